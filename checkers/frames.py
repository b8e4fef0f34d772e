"""Derived frames every anomaly family shares: sends, reads, drain ends, the observed log.

Why one place: each family asks the same questions of the raw history ("which sends were
acknowledged, at what offset?", "what did readers see?"); deriving them once keeps the
definitions in docs/anomalies.md and the code in step. Jepsen's vocabulary: a send is an
invoke paired with its completion (ok / fail / info) by ``(process, op)``; a send with no
completion at all is indeterminate, i.e. ``info``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from workloads import history as H

TP = ["topic", "partition"]


@dataclass
class Frames:
    sends: DataFrame       # one row per send op: process, op, topic, partition, value, offset, type, error, error_code, invoke_t, complete_t
    ok_sends: DataFrame    # sends acknowledged (type ok, offset known); ack_t = complete_t
    reads: DataFrame       # one row per message read by poll or drain: process, op, f, t, topic, partition, offset, value
    poll_ops: DataFrame    # one row per (reader process, op, topic, partition): t_first, t_last, min_offset, max_offset, n
    drain_end: DataFrame   # topic, partition, drain_end (offset the final drain read up to), drain_end_t
    log: DataFrame         # distinct (topic, partition, offset, value) seen by ok sends or reads
    part_stats: DataFrame  # per topic-partition: max_read_offset, max_acked_offset, acked, drain_end, drain_end_t
    read_values: DataFrame  # distinct (topic, partition, value) read there; drained = the final drain read it
    extra: list[DataFrame] = field(default_factory=list)   # families' own cached intermediates

    def keep(self, df: DataFrame) -> DataFrame:
        """Cache a family's intermediate and release it with the shared frames (a long-lived
        session checking many runs - a benchmark, the test suite - must not accumulate them)."""
        self.extra.append(df.cache())
        return df

    def cache(self) -> "Frames":
        """Materialise the shared frames once (each family reads them; recomputing is the cost)."""
        for df in self._cached():
            df.cache()
        return self

    def unpersist(self) -> None:
        for df in (*self._cached(), *self.extra):
            df.unpersist()
        self.extra.clear()

    def _cached(self) -> tuple[DataFrame, ...]:
        return (self.sends, self.ok_sends, self.reads, self.poll_ops, self.log, self.part_stats, self.read_values)


def derive(history: DataFrame, partitions: int | None = None) -> Frames:
    """Build the shared frames from the raw history DataFrame (lazy; nothing is collected).

    Why sends and reads are each shuffled once, by topic-partition, and never again: every
    family's grouping, window and join key includes ``(topic, partition)``, and Spark knows that
    data hash-partitioned on ``(topic, partition)`` is already clustered for any key containing
    both - so the cached frames carry that partitioning and the families add no shuffle (the few
    questions asked across partitions of a topic - a value read in another partition - are
    answered on small candidate sets). Measured: the shuffles were most of a large check.

    Pairing invokes with completions is one aggregation by ``(topic, partition, process, op)``:
    producers name the partition in the invoke (docs/history-format.md), so both halves of a
    send are in the same topic-partition.
    """
    n = partitions or int(history.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    h = history
    done = F.col("type") != H.INVOKE
    rank = F.when(F.col("type") == H.OK, 0).when(F.col("type") == H.INFO, 1).otherwise(2)
    # each subset is shuffled once on its way into the cache (sends, reads); the same hash
    # partitioning on (topic, partition) with the same n makes them co-partitioned
    pairs = (h.where(F.col("f") == H.SEND).drop("v", "f").repartition(n, *TP)
             .groupBy(*TP, "process", "op")
             .agg(F.min(F.when(~done, F.col("t"))).alias("invoke_t"),
                  F.min(F.when(done, F.col("t"))).alias("complete_t"),
                  # ok wins over info wins over fail if a writer ever recorded two completions
                  F.min(F.when(done, rank)).alias("_rank"),
                  F.first(F.when(done, F.col("value")), True).alias("c_value"),
                  F.first(F.when(~done, F.col("value")), True).alias("i_value"),
                  F.coalesce(F.first(F.when(F.col("type") == H.OK, F.col("offset")), True),
                             F.first(F.when(done, F.col("offset")), True)).alias("offset"),
                  F.first(F.when(done, F.col("error")), True).alias("error"),
                  F.first(F.when(done, F.col("error_code")), True).alias("error_code")))
    sends = pairs.select(
        "process", "op",
        *TP,
        F.coalesce("c_value", "i_value").alias("value"),
        "offset",
        F.when(F.col("_rank") == 0, H.OK).when(F.col("_rank") == 2, H.FAIL).otherwise(H.INFO).alias("type"),
        "error", "error_code", "invoke_t", "complete_t")
    ok_sends = (sends.where((F.col("type") == H.OK) & F.col("offset").isNotNull() & F.col("partition").isNotNull())
                .withColumn("ack_t", F.col("complete_t")))

    reads = (h.where(F.col("f").isin(H.POLL, H.DRAIN) & (F.col("type") == H.OK)
                     & F.col("offset").isNotNull() & F.col("partition").isNotNull())
             .select("process", "op", "f", "t", "topic", "partition", "offset", "value")
             .repartition(n, *TP))
    poll_ops = (reads.groupBy("process", "op", "f", *TP)
                .agg(F.min("t").alias("t_first"), F.max("t").alias("t_last"),
                     F.min("offset").alias("min_offset"), F.max("offset").alias("max_offset"),
                     F.count(F.lit(1)).alias("n")))
    drain_end = (h.where((F.col("f") == H.DRAIN_END) & (F.col("type") == H.OK) & F.col("offset").isNotNull())
                 .repartition(n, *TP)
                 .groupBy(*TP).agg(F.max("offset").alias("drain_end"), F.max("t").alias("drain_end_t")))
    log = (reads.select(*TP, "offset", "value")
           .unionByName(ok_sends.select(*TP, "offset", "value")).distinct())
    read_values = (reads.groupBy(*TP, "value")
                   .agg(F.max(F.col("f") == H.DRAIN).alias("drained")))

    read_stats = poll_ops.groupBy(*TP).agg(F.max("max_offset").alias("max_read_offset"))
    ack_stats = ok_sends.groupBy(*TP).agg(F.max("offset").alias("max_acked_offset"),
                                          F.count(F.lit(1)).alias("acked"))
    part_stats = (ack_stats.join(read_stats, TP, "full_outer").join(drain_end, TP, "full_outer")
                  .fillna(0, subset=["acked"]))
    return Frames(sends, ok_sends, reads, poll_ops, drain_end, log, part_stats, read_values)
