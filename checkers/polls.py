"""Per-consumer read order: nonmonotonic polls and poll skips (docs/anomalies.md).

Jepsen's ``poll-skip+nonmonotonic-cases``: a consumer's successive polls of one partition
continue where the previous one left off. Going back to (or before) the last offset it
returned is *nonmonotonic*; jumping over offsets that some other observation shows exist is a
*skip* (offsets are compared by their rank among all observed offsets of the partition, so gaps
no one ever saw - compaction, control records - do not count). The final drain is a reader too.
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
    ranks = (fr.log.select(*TP, "offset").distinct()
             .withColumn("rank", F.dense_rank().over(Window.partitionBy(*TP).orderBy("offset"))))
    r_prev = ranks.select(*TP, F.col("offset").alias("prev_max_offset"), F.col("rank").alias("prev_rank"))
    r_cur = ranks.select(*TP, F.col("offset").alias("min_offset"), F.col("rank").alias("cur_rank"))
    r_first = ranks.select(*TP, F.col("offset").alias("first_skipped_offset"), F.col("rank").alias("skip_rank"))
    skips = (ops.where(F.col("min_offset") > F.col("prev_max_offset"))
             .join(r_prev, TP + ["prev_max_offset"]).join(r_cur, TP + ["min_offset"])
             .where(F.col("cur_rank") - F.col("prev_rank") > 1)
             .withColumn("skip_rank", F.col("prev_rank") + 1)
             .join(r_first, TP + ["skip_rank"], "left")
             .select("process", "f", *TP, "prev_op", "prev_max_offset", "op", "min_offset", "t_first",
                     (F.col("cur_rank") - F.col("prev_rank") - 1).alias("skipped"), "first_skipped_offset"))
    return {"nonmonotonic_poll": nonmono, "poll_skip": skips}
