"""Attribution: what happened to a lost write's partition between its ack and its miss.

For every lost write (ack at ``ack_t``, first missed by a read at ``miss_t``), join:

* ``faults``: timeline nemesis faults active in, or ended at most ``recent_s`` before, the window;
* ``elections``: ``leader_elected`` events of the partition (leader, epochs, ISR, ELR, reason);
* ``isr_changes``: ``isr_changed`` events of the partition;
* ``alter_partition``: AlterPartition accepts/rejects of the partition (KIP-903, seed 000: a
  stale broker epoch admitted to the ISR is the classic cause);
* ``broker_events``: broker registrations (new broker epoch, unclean shutdown), fencing;
* ``removed_by`` (forensics): ``truncation`` events that cut the partition below the write's
  offset, and ``recovery`` events whose log end offset ended at or below it - which broker's
  log lost the record, as Kafka's system tests search the data logs.

The window is ``[ack_t - slack_s, miss_t + slack_s]`` (cluster wall clocks vs the run clock).
Lost writes are few; they are broadcast and joined against the (small) event frames.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checkers.frames import TP

CATEGORIES = ("faults", "elections", "isr_changes", "alter_partition", "broker_events", "removed_by")
BROKER_EVENTS = ("broker_registered", "broker_fenced", "broker_unfenced", "self_fenced")


def _arr(c: str) -> Column:
    return F.when(F.col(c).isNotNull(), F.concat(F.lit(c + "=["), F.array_join(F.col(c), ","), F.lit("]")))


def _kv(c: str) -> Column:
    return F.when(F.col(c).isNotNull(), F.concat(F.lit(c + "="), F.col(c).cast("string")))


def event_desc(events: DataFrame) -> DataFrame:
    """A one-line, human-readable description per cluster/proxy event."""
    return events.withColumn("desc", F.concat_ws(
        " ", F.format_string("t=%.3f", F.col("t")), F.col("event"),
        F.concat(F.lit("@"), F.coalesce(F.col("host"), F.lit("")), F.lit("/"), F.coalesce(F.col("node"), F.lit("?"))),
        _kv("broker"), _kv("broker_epoch"), _kv("previous_broker_epoch"), _kv("clean_shutdown"),
        _kv("leader"), _kv("leader_epoch"), _kv("partition_epoch"), _arr("isr"), _arr("elr"), _arr("new_isr"),
        _kv("broker_epochs"), _kv("version"), _kv("accepted"), _kv("error"),
        _kv("from_offset"), _kv("to_offset"), _kv("recovery_point"), _kv("log_end_offset"),
        _kv("reason"), _kv("leader_recovery_state")))


def fault_windows(timeline: DataFrame) -> DataFrame:
    """One row per nemesis fault id: start_t, stop_t (null while never healed), desc."""
    f = (timeline.where(F.col("kind") == "nemesis")
         .groupBy("id")
         .agg(F.first("fault", True).alias("fault"), F.first("targets", True).alias("targets"),
              F.min(F.when(F.col("phase") == "start", F.col("t"))).alias("start_t"),
              F.max(F.when(F.col("phase") == "stop", F.col("t"))).alias("stop_t"),
              F.first(F.when(F.col("phase") == "start", F.col("detail")), True).alias("detail")))
    return f.withColumn("desc", F.concat_ws(
        " ", F.concat(F.col("fault"), F.lit("["), F.array_join(F.coalesce(F.col("targets"), F.array()), ","), F.lit("]")),
        F.format_string("%s %.3f-%s", F.col("id"), F.col("start_t"),
                        F.coalesce(F.format_string("%.3f", F.col("stop_t")), F.lit("active"))),
        F.col("detail")))


def attribute(lost: DataFrame, timeline: DataFrame, events: DataFrame,
              slack_s: float = 2.0, recent_s: float = 30.0) -> DataFrame:
    """Add one array column per category and a one-line ``attribution`` summary to ``lost``."""
    keys = F.broadcast(lost.select("process", "op", *TP, "offset", "ack_t", "miss_t")
                       .withColumn("w0", F.col("ack_t") - slack_s)
                       .withColumn("w1", F.coalesce(F.col("miss_t"), F.lit(float("inf"))) + slack_s))
    parts: list[DataFrame] = []

    fw = fault_windows(timeline)
    fj = keys.join(fw, (fw.start_t <= keys.w1) & (fw.stop_t.isNull() | (fw.stop_t >= keys.w0 - recent_s)), "inner")
    parts.append(fj.select("process", "op", F.lit("faults").alias("cat"), F.col("start_t").alias("et"), "desc"))

    ev = event_desc(events).select(F.col("topic").alias("e_topic"), F.col("partition").alias("e_partition"),
                                   F.col("t").alias("et"), "event", "desc", "from_offset", "to_offset", "log_end_offset")
    on_tp = (ev.e_topic == keys.topic) & (ev.e_partition == keys.partition)
    in_win = (ev.et >= keys.w0) & (ev.et <= keys.w1)
    pj = keys.join(ev, on_tp & in_win, "inner")
    cat = (F.when(F.col("event") == "leader_elected", "elections").when(F.col("event") == "isr_changed", "isr_changes")
           .when(F.col("event") == "alter_partition", "alter_partition"))
    parts.append(pj.select("process", "op", cat.alias("cat"), "et", "desc").where(F.col("cat").isNotNull()))
    bj = keys.join(ev.where(F.col("event").isin(*BROKER_EVENTS)), in_win, "inner")
    parts.append(bj.select("process", "op", F.lit("broker_events").alias("cat"), "et", "desc"))
    # forensics: which truncation/recovery removed the record (any time after the ack)
    removed = ((F.col("event") == "truncation") & (F.col("to_offset") <= F.col("offset")) & (F.col("from_offset") > F.col("offset"))) \
        | ((F.col("event") == "recovery") & (F.col("log_end_offset") <= F.col("offset")))
    rj = keys.join(ev, on_tp & (ev.et >= keys.w0), "inner").where(removed)
    parts.append(rj.select("process", "op", F.lit("removed_by").alias("cat"), "et", "desc"))

    allp = parts[0]
    for p in parts[1:]:
        allp = allp.unionByName(p)
    grouped = allp.groupBy("process", "op").agg(*[
        F.transform(F.array_sort(F.collect_list(F.when(F.col("cat") == c, F.struct("et", "desc")))),
                    lambda s: s["desc"]).alias(c) for c in CATEGORIES])
    out = lost.join(grouped, ["process", "op"], "left")
    for c in CATEGORIES:
        out = out.withColumn(c, F.coalesce(F.col(c), F.array().cast("array<string>")))
    summary = F.concat_ws(" | ", *[F.when(F.size(c) > 0, F.concat(F.lit(c + ": "), F.array_join(F.col(c), "; ")))
                                  for c in CATEGORIES])
    return out.withColumn("attribution", F.when(summary == "", F.lit("no fault or event recorded in window"))
                          .otherwise(summary))
