"""Aggregates for the report: send throughput per second and lost writes per partition.

``aggregates/throughput.csv`` columns (common.md contract): second, ok, fail, info,
latency_p50_ms, latency_p99_ms - sends bucketed by the second they completed (an
indeterminate send with no completion by the second it was invoked); latencies of ok sends.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.frames import TP, Frames


def throughput(fr: Frames) -> DataFrame:
    s = fr.sends.where(F.coalesce("complete_t", "invoke_t").isNotNull())
    lat = F.when(F.col("type") == "ok", (F.col("complete_t") - F.col("invoke_t")) * 1000.0)
    return (s.withColumn("second", F.floor(F.coalesce("complete_t", "invoke_t")).cast("long"))
            .groupBy("second")
            .agg(F.sum(F.when(F.col("type") == "ok", 1).otherwise(0)).alias("ok"),
                 F.sum(F.when(F.col("type") == "fail", 1).otherwise(0)).alias("fail"),
                 F.sum(F.when(F.col("type") == "info", 1).otherwise(0)).alias("info"),
                 F.round(F.percentile_approx(lat, 0.5, 1000), 3).alias("latency_p50_ms"),
                 F.round(F.percentile_approx(lat, 0.99, 1000), 3).alias("latency_p99_ms"))
            .orderBy("second"))


def lost_by_partition(fr: Frames, lost: DataFrame, unseen: DataFrame) -> DataFrame:
    l = lost.groupBy(*TP).agg(F.count(F.lit(1)).alias("lost"))
    u = unseen.groupBy(*TP).agg(F.count(F.lit(1)).alias("unseen_at_end"))
    return (fr.part_stats.select(*TP, "acked", "max_acked_offset", "max_read_offset", "drain_end")
            .join(l, TP, "left").join(u, TP, "left")
            .fillna(0, subset=["lost", "unseen_at_end", "acked"])
            .orderBy(*TP))
