"""Protocol invariants from the observer and cluster event logs (docs/anomalies.md).

* ``ack_below_min_isr`` - seed 003 §2.7 / min.insync.replicas: an acks=all produce may only be
  acknowledged once the ISR holds at least min.insync.replicas members. Flagged when the
  partition's ISR was below min ISR during the *whole* interval from the send's invoke to its
  ack (so the HWM advance that acknowledged it must have happened with too small an ISR).
  The ISR timeline comes from the cluster event logs (``leader_elected``/``isr_changed``) when
  the run collected them, else from the observer's samples.
* ``visible_end_regression`` - the HWM never moves backwards (seed 003 §2.7): at the end the
  final drain's end offset must be above every offset that was acknowledged or read earlier.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.frames import TP, Frames


def isr_timeline(events: DataFrame, observer: DataFrame, use_events: bool) -> DataFrame:
    """(topic, partition, t, isr_size) changes; cluster events if collected, else observer samples."""
    if use_events:
        return (events.where(F.col("event").isin("leader_elected", "isr_changed") & F.col("isr").isNotNull()
                             & F.col("topic").isNotNull())
                .select(*TP, "t", F.size("isr").alias("isr_size")))
    return (observer.where(F.col("isr").isNotNull() & F.col("topic").isNotNull() & F.col("error").isNull())
            .select(*TP, "t", F.size("isr").alias("isr_size")))


def ack_below_min_isr(fr: Frames, isr: DataFrame, min_isr: int) -> DataFrame:
    ok = fr.ok_sends.where(F.col("invoke_t").isNotNull())
    changes = isr.select(*TP, "t", F.lit(0).alias("k"), "isr_size",
                         F.when(F.col("isr_size") >= min_isr, 1).otherwise(0).alias("good"),
                         F.lit(None).cast("string").alias("process"), F.lit(None).cast("long").alias("op"),
                         F.lit(None).cast("string").alias("at"))
    probes = (ok.select(*TP, F.col("invoke_t").alias("t"), "process", "op", F.lit("invoke").alias("at"))
              .unionByName(ok.select(*TP, F.col("ack_t").alias("t"), "process", "op", F.lit("ack").alias("at")))
              .select(*TP, "t", F.lit(1).alias("k"), F.lit(None).cast("int").alias("isr_size"),
                      F.lit(0).alias("good"), "process", "op", "at"))
    w = Window.partitionBy(*TP).orderBy("t", "k").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    st = (changes.unionByName(probes)
          .withColumn("state", F.last("isr_size", True).over(w))
          .withColumn("goods", F.sum("good").over(w))
          .where(F.col("k") == 1)
          .groupBy(*TP, "process", "op")
          .agg(F.max(F.when(F.col("at") == "invoke", F.col("state"))).alias("isr_at_invoke"),
               F.max(F.when(F.col("at") == "ack", F.col("state"))).alias("isr_at_ack"),
               F.max(F.when(F.col("at") == "invoke", F.col("goods"))).alias("g0"),
               F.max(F.when(F.col("at") == "ack", F.col("goods"))).alias("g1")))
    return (ok.join(st, [*TP, "process", "op"])
            .where((F.col("isr_at_invoke") < min_isr) & (F.col("isr_at_ack") < min_isr) & (F.col("g0") == F.col("g1")))
            .select("process", "op", *TP, "offset", "value", "invoke_t", "ack_t", "isr_at_invoke", "isr_at_ack",
                    F.lit(min_isr).alias("min_insync_replicas")))


def visible_end_regression(fr: Frames) -> DataFrame:
    high = F.greatest(F.coalesce("max_read_offset", F.lit(-1)), F.coalesce("max_acked_offset", F.lit(-1)))
    return (fr.part_stats.where(F.col("drain_end").isNotNull() & (F.col("drain_end") < high + 1))
            .select(*TP, "drain_end", "max_read_offset", "max_acked_offset", (high + 1).alias("visible_end_seen")))


def invariants(fr: Frames, events: DataFrame, observer: DataFrame, min_isr: int | None,
               has_cluster_events: bool) -> dict[str, DataFrame]:
    out = {"visible_end_regression": visible_end_regression(fr)}
    if min_isr and min_isr > 1:
        out["ack_below_min_isr"] = ack_below_min_isr(fr, isr_timeline(events, observer, has_cluster_events), min_isr)
    else:
        # min ISR 1 (or unknown): every ack trivially satisfies it
        out["ack_below_min_isr"] = ack_below_min_isr(fr, fr.ok_sends.limit(0).select(
            *TP, F.col("ack_t").alias("t"), F.lit(0).alias("isr_size")), 1).limit(0)
    return out
