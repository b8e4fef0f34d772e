"""Real-time offset regression (docs/anomalies.md §realtime_offset_regression).

Seed 003 §2.7: an acknowledged or consumed record sits below the HWM, hence below the LEO of
every ISR member, so a send *invoked after* that acknowledgement or read must be appended at a
higher offset. An ok send at or below an offset already known to exist before its invoke means
the log went backwards in real time (typically the tail was truncated away by an election).

As-of join by window: the partition's known offsets (acks at ack time, reads at the time the
poll finished) and the sends' invoke times in one time-ordered stream; a running maximum.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.frames import TP, Frames


def realtime_regression(fr: Frames) -> dict[str, DataFrame]:
    acks = fr.ok_sends.select(*TP, F.col("ack_t").alias("t"), "offset",
                              F.concat(F.lit("ack:"), F.col("process"), F.lit(":"), F.col("value")).alias("src"))
    reads = fr.poll_ops.select(*TP, F.col("t_last").alias("t"), F.col("max_offset").alias("offset"),
                               F.concat(F.col("f"), F.lit(":"), F.col("process"), F.lit(":op"), F.col("op").cast("string")).alias("src"))
    known = (acks.unionByName(reads).where(F.col("t").isNotNull())
             .select(*TP, "t", F.lit(1).alias("k"), F.struct("offset", "t", "src").alias("fact"),
                     F.lit(None).cast("string").alias("process"), F.lit(None).cast("long").alias("op")))
    probes = fr.ok_sends.where(F.col("invoke_t").isNotNull()).select(
        *TP, F.col("invoke_t").alias("t"), F.lit(0).alias("k"),
        F.lit(None).cast("struct<offset:bigint,t:double,src:string>").alias("fact"), "process", "op")
    w = Window.partitionBy(*TP).orderBy("t", "k").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    prior = (known.unionByName(probes).withColumn("prior", F.max("fact").over(w))
             .where(F.col("k") == 0).select(*TP, "process", "op", "prior"))
    return {"realtime_offset_regression": (
        fr.ok_sends.join(prior, [*TP, "process", "op"], "inner")
        .where(F.col("prior").isNotNull() & (F.col("offset") <= F.col("prior.offset")))
        .select("process", "op", *TP, "offset", "value", "invoke_t", "ack_t",
                F.col("prior.offset").alias("prior_offset"), F.col("prior.t").alias("prior_t"),
                F.col("prior.src").alias("prior_source")))}
