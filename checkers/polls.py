"""Per-consumer read order: nonmonotonic polls and poll skips (docs/anomalies.md).

Jepsen's ``poll-skip+nonmonotonic-cases``: a consumer's successive polls of one partition
continue where the previous one left off. Going back to (or before) the last offset it
returned is *nonmonotonic*; jumping over offsets that some other observation shows exist is a
*skip* (offsets are compared by their rank among all observed offsets of the partition, so gaps
no one ever saw - compaction, control records - do not count). The final drain is a reader too.

A skip is counted against the offsets anyone observed (the distinct observed log), so the
count is exactly the observed offsets strictly between the two polls.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.frames import TP, Frames


def poll_order(fr: Frames) -> dict[str, DataFrame]:
    w = Window.partitionBy("process", *TP).orderBy("op")
    ops = (fr.poll_ops.withColumn("prev_op", F.lag("op").over(w))
           .withColumn("prev_max_offset", F.lag("max_offset").over(w))
           .where(F.col("prev_op").isNotNull()))
    nonmono = (ops.where(F.col("min_offset") <= F.col("prev_max_offset"))
               .select("process", "f", *TP, "prev_op", "prev_max_offset", "op", "min_offset", "t_first",
                       (F.col("min_offset") - F.col("prev_max_offset")).alias("delta")))
    # only a poll that did not continue at the next offset can skip anything; for those (normally
    # few) gaps, count the observed offsets strictly inside the gap - a range join restricted to
    # the gap candidates instead of ranking every offset of every partition
    gaps = ops.where(F.col("min_offset") > F.col("prev_max_offset") + 1)
    offsets = fr.log.select(F.col("topic").alias("l_topic"), F.col("partition").alias("l_partition"),
                            F.col("offset").alias("l_offset")).distinct()
    inside = ((F.col("topic") == F.col("l_topic")) & (F.col("partition") == F.col("l_partition"))
              & (F.col("l_offset") > F.col("prev_max_offset")) & (F.col("l_offset") < F.col("min_offset")))
    skips = (gaps.join(offsets, inside, "inner")
             .groupBy("process", "f", *TP, "prev_op", "prev_max_offset", "op", "min_offset", "t_first")
             .agg(F.count(F.lit(1)).alias("skipped"), F.min("l_offset").alias("first_skipped_offset")))
    return {"nonmonotonic_poll": nonmono, "poll_skip": skips}
