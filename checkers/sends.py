"""Per-producer send order: nonmonotonic sends and send skips (docs/anomalies.md).

Jepsen's ``nonmonotonic-send-cases``: one producer's successive acknowledged sends to one
partition must land at increasing offsets (an idempotent producer keeps per-partition order,
and the leader appends in order, seed 003 §2.3). A *send skip* is the Kafka-specific twin:
between two successive acknowledged sends of a producer lies an offset holding another value
of the same producer that was not sent between them - the log reordered that producer's writes.

Computed with window functions over the producer's entries in offset order, never a range join:
for each entry, the nearest acknowledged anchors before and after it in the log.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.frames import TP, Frames


def send_order(fr: Frames) -> dict[str, DataFrame]:
    ok = fr.ok_sends.select("process", "op", *TP, "offset", "value", "invoke_t", "ack_t")
    w = Window.partitionBy("process", *TP).orderBy("op")
    paired = (ok.withColumn("prev_op", F.lag("op").over(w))
              .withColumn("prev_offset", F.lag("offset").over(w))
              .withColumn("prev_value", F.lag("value").over(w))
              .withColumn("next_op", F.lead("op").over(w)))
    nonmono = (paired.where(F.col("prev_offset").isNotNull() & (F.col("offset") <= F.col("prev_offset")))
               .select("process", *TP, "prev_op", "prev_offset", "prev_value", "op", "offset", "value",
                       (F.col("offset") - F.col("prev_offset")).alias("delta")))

    # the log entries that belong to a producer: join the observed log with its sends by value
    writer = fr.sends.select(*TP, "value", F.col("process").alias("writer"), F.col("op").alias("writer_op"),
                             F.col("type").alias("writer_type"), F.col("offset").alias("acked_offset"))
    entries = (fr.log.join(writer, [*TP, "value"], "inner")
               .withColumn("anchor_op", F.when((F.col("writer_type") == "ok") & (F.col("acked_offset") == F.col("offset")),
                                               F.col("writer_op"))))
    # nearest anchors before and after, both as running frames ("unbounded preceding"): Spark
    # evaluates those incrementally, while a frame reaching "unbounded following" is recomputed
    # for every row - quadratic in a producer's partition (33 s of a 1M-record check)
    before = Window.partitionBy("writer", *TP).orderBy("offset", "value").rowsBetween(Window.unboundedPreceding, -1)
    after = (Window.partitionBy("writer", *TP).orderBy(F.col("offset").desc(), F.col("value").desc())
             .rowsBetween(Window.unboundedPreceding, -1))
    anchor_offset = F.when(F.col("anchor_op").isNotNull(), F.col("offset"))
    entries = (entries
               .withColumn("before_op", F.last("anchor_op", True).over(before))
               .withColumn("before_offset", F.last(anchor_offset, True).over(before))
               .withColumn("after_op", F.last("anchor_op", True).over(after))
               .withColumn("after_offset", F.last(anchor_offset, True).over(after)))
    consecutive = paired.select(F.col("process").alias("writer"), *TP, F.col("op").alias("before_op"),
                                F.col("next_op").alias("after_op"))
    skip = (entries.where(F.col("anchor_op").isNull() & F.col("before_op").isNotNull() & F.col("after_op").isNotNull()
                          & ((F.col("writer_op") < F.col("before_op")) | (F.col("writer_op") > F.col("after_op"))))
            .join(consecutive, ["writer", *TP, "before_op", "after_op"], "inner")
            .select(F.col("writer").alias("process"), *TP,
                    F.col("before_op").alias("prev_op"), F.col("before_offset").alias("prev_offset"),
                    F.col("after_op").alias("op"), F.col("after_offset").alias("offset"),
                    F.col("offset").alias("skipped_offset"), F.col("value").alias("skipped_value"),
                    F.col("writer_op").alias("skipped_op"), F.col("writer_type").alias("skipped_type")))
    return {"nonmonotonic_send": nonmono, "send_skip": skip}
