"""Lost writes and writes unseen at the end (docs/anomalies.md §lost_write, §unseen_at_end).

The headline question of the harness. Following Jepsen's ``lost-write-cases``: we cannot
expect every acknowledged value to be read (a consumer may lag, a write may land after the
last poll), so a write only counts as *lost* when reading provably went past it:

* some read of the same partition returned an offset greater than the write's acknowledged
  offset (the reader's fetch position crossed it), or
* the final drain read the whole partition (a ``drain-end`` record exists for it).

And a write some consumer read earlier is lost too when the final drain read its whole
partition and did not return it: the log it was in was replaced (KIP-903's empty replica
elected, seed 000; an unclean election, seed 001) - the durable end state no longer holds it.

Otherwise an unread acknowledged write is *unseen at end* - an availability symptom, reported
apart. A value read at another offset is not lost (see duplicate / offset_mismatch): matching is
by value within the topic. Seed 003 §2.7: an ``acks=all`` acknowledgement means the HWM passed
the record, so every later complete read must return it.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.frames import TP, Frames


def lost_and_unseen(fr: Frames) -> dict[str, DataFrame]:
    """Return ``{"lost_write": df, "unseen_at_end": df}`` evidence frames."""
    read_values = fr.reads.select("topic", "value").distinct().withColumn("_read", F.lit(True))
    drain_values = (fr.reads.where(F.col("f") == "drain").select("topic", "value").distinct()
                    .withColumn("_drained", F.lit(True)))
    acked = (fr.ok_sends.join(read_values, ["topic", "value"], "left")
             .join(drain_values, ["topic", "value"], "left")
             .join(fr.part_stats.select(*TP, "max_read_offset", "drain_end", "drain_end_t"), TP, "left"))
    was_read = F.coalesce(F.col("_read"), F.lit(False))
    in_drain = F.coalesce(F.col("_drained"), F.lit(False))
    read_past = F.coalesce(F.col("max_read_offset") > F.col("offset"), F.lit(False))
    drained = F.col("drain_end").isNotNull()
    lost = (acked.where((~was_read & read_past) | (drained & ~in_drain))
            .withColumn("lost_because", F.when(~was_read & read_past, F.lit("read_past_offset"))
                        .when(~was_read, F.lit("final_drain_read_whole_partition"))
                        .otherwise(F.lit("final_drain_missed_read_earlier"))))
    lost = _with_miss_t(fr, lost)
    lost = lost.select(*TP, "offset", "value", "process", "op", "invoke_t", "ack_t",
                       "max_read_offset", "drain_end", "lost_because", "miss_t", "miss_by")
    unseen = (acked.where(~was_read & ~read_past & ~drained)
              .select(*TP, "offset", "value", "process", "op", "invoke_t", "ack_t", "max_read_offset"))
    return {"lost_write": lost, "unseen_at_end": unseen}


def _with_miss_t(fr: Frames, lost: DataFrame) -> DataFrame:
    """When was the write first missed: the first poll after the ack whose reads passed its offset.

    Falls back to the drain's end, then to any read past it (even one before the ack). Works on
    per-poll aggregates (one row per poll op and partition), not on every message read.
    """
    polls = fr.poll_ops.select(F.col("topic").alias("p_topic"), F.col("partition").alias("p_partition"),
                               F.col("process").alias("reader"), "t_first", "max_offset")
    keys = F.broadcast(lost.select("process", "op", *TP, "offset", "ack_t"))
    cond = ((F.col("topic") == F.col("p_topic")) & (F.col("partition") == F.col("p_partition"))
            & (F.col("max_offset") > F.col("offset")))
    j = (keys.join(polls, cond, "inner")
         .groupBy("process", "op")
         .agg(F.min(F.when(F.col("t_first") >= F.col("ack_t"),
                           F.struct("t_first", "reader"))).alias("after"),
              F.min(F.struct("t_first", "reader")).alias("any")))
    out = lost.join(j, ["process", "op"], "left")
    read_earlier = F.col("lost_because") == "final_drain_missed_read_earlier"
    # a write read before it vanished was first missed by the final drain
    return (out.withColumn("miss_t", F.when(read_earlier, F.col("drain_end_t"))
                           .otherwise(F.coalesce(F.col("after.t_first"), F.col("drain_end_t"), F.col("any.t_first"))))
            .withColumn("miss_by", F.when(read_earlier, F.lit("drain")).otherwise(F.coalesce(F.col("after.reader"),
                                              F.when(F.col("drain_end_t").isNotNull(), F.lit("drain")),
                                              F.col("any.reader"))))
            .drop("after", "any"))
