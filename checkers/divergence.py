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
    """Counted on the distinct observed log first; observers are looked up only for the offenders.

    ``log`` holds each distinct (partition, offset, value) once, so an offset with two rows is
    inconsistent and a value with two rows is a duplicate; only those (normally none) are joined
    back to the observations for the "who saw what" evidence.
    """
    incons_keys = (fr.log.groupBy(*TP, "offset").agg(F.count(F.lit(1)).alias("n_values"))
                   .where(F.col("n_values") > 1))
    obs = _observations(fr).join(incons_keys.select(*TP, "offset"), TP + ["offset"], "left_semi")
    inconsistent = (obs.groupBy(*TP, "offset")
                    .agg(F.countDistinct("value").alias("n_values"),
                         F.array_join(F.sort_array(F.collect_set("value")), " ").alias("values"),
                         F.array_join(F.sort_array(F.collect_set(F.concat(F.col("by"), F.lit("="), F.col("value")))), " ").alias("observed_by"))
                    .where(F.col("n_values") > 1))
    # duplicates: a value twice in its own partition (co-partitioned), or a value observed in a
    # partition none of its sends went to ("foreign": the only way a value can be in two
    # partitions, values being unique per send) - both candidate sets are small, then exact
    log = fr.log.where(F.col("value").isNotNull())
    within = (log.groupBy(*TP, "value").agg(F.count(F.lit(1)).alias("n")).where(F.col("n") > 1)
              .select("topic", "value"))
    foreign = (log.join(fr.sends.select(*TP, "value"), [*TP, "value"], "left_anti").select("topic", "value"))
    dup_values = within.unionByName(foreign).distinct()
    duplicate = (log.join(dup_values, ["topic", "value"], "left_semi")
                 .groupBy("topic", "value")
                 .agg(F.count(F.lit(1)).alias("n_offsets"),
                      F.array_join(F.sort_array(F.collect_set(F.concat(F.col("partition").cast("string"), F.lit(":"),
                                                                        F.col("offset").cast("string")))), " ").alias("at"))
                 .where(F.col("n_offsets") > 1))
    # an acknowledged offset read with another value is an inconsistent offset seen from the send side
    keys = incons_keys.select(*TP, "offset")
    s = fr.ok_sends.join(keys, TP + ["offset"], "left_semi").select("process", "op", *TP, "offset", "value", "ack_t")
    r = (fr.reads.join(keys, TP + ["offset"], "left_semi")
         .select(*TP, "offset", F.col("value").alias("read_value"), F.col("process").alias("reader")))
    mismatch = (s.join(r, TP + ["offset"], "inner").where(F.col("read_value") != F.col("value"))
                .groupBy("process", "op", *TP, "offset", "value", "ack_t")
                .agg(F.array_join(F.sort_array(F.collect_set("read_value")), " ").alias("read_values"),
                     F.array_join(F.sort_array(F.collect_set("reader")), " ").alias("readers")))
    return {"inconsistent_offset": inconsistent, "duplicate": duplicate, "offset_mismatch": mismatch}
