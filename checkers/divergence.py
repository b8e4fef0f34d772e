"""Log divergence: inconsistent offsets, duplicates, offset mismatches (docs/anomalies.md).

Jepsen's ``inconsistent-offsets`` and ``duplicate`` cases, plus the send-side view
(``offset_mismatch``). Seed 003 §2 (Log Matching): replicas that agree on an offset and
leader epoch hold the same record, so any two observations of one partition+offset with
different values mean two replicas' logs diverged and both were exposed.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.frames import TP, Frames


def _observations(fr: Frames) -> DataFrame:
    """Every (topic, partition, offset, value) observation, tagged with who made it."""
    r = fr.reads.select(*TP, "offset", "value", F.concat(F.col("f"), F.lit(":"), F.col("process")).alias("by"))
    s = fr.ok_sends.select(*TP, "offset", "value", F.concat(F.lit("send:"), F.col("process")).alias("by"))
    return r.unionByName(s)


def divergence(fr: Frames) -> dict[str, DataFrame]:
    obs = _observations(fr)
    inconsistent = (obs.groupBy(*TP, "offset")
                    .agg(F.countDistinct("value").alias("n_values"),
                         F.array_join(F.sort_array(F.collect_set("value")), " ").alias("values"),
                         F.array_join(F.sort_array(F.collect_set(F.concat(F.col("by"), F.lit("="), F.col("value")))), " ").alias("observed_by"))
                    .where(F.col("n_values") > 1))
    duplicate = (obs.groupBy("topic", "value")
                 .agg(F.countDistinct("partition", "offset").alias("n_offsets"),
                      F.array_join(F.sort_array(F.collect_set(F.concat(F.col("partition").cast("string"), F.lit(":"),
                                                                         F.col("offset").cast("string")))), " ").alias("at"))
                 .where(F.col("n_offsets") > 1))
    s = fr.ok_sends.select("process", "op", *TP, "offset", "value", "ack_t")
    r = fr.reads.select(*TP, "offset", F.col("value").alias("read_value"), F.col("process").alias("reader"))
    mismatch = (s.join(r, TP + ["offset"], "inner").where(F.col("read_value") != F.col("value"))
                .groupBy("process", "op", *TP, "offset", "value", "ack_t")
                .agg(F.array_join(F.sort_array(F.collect_set("read_value")), " ").alias("read_values"),
                     F.array_join(F.sort_array(F.collect_set("reader")), " ").alias("readers")))
    return {"inconsistent_offset": inconsistent, "duplicate": duplicate, "offset_mismatch": mismatch}
