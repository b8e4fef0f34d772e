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
The event logs and the timeline are small: Spark reads them with their schemas and makes each
event's one-line description (:func:`event_desc`, :func:`fault_windows`); the driver collects
them once into a :class:`RunEvents`, and the partition tasks attribute their own lost writes
with it (binary searches on event time), so lost writes never travel to be joined.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

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


@dataclass
class RunEvents:
    """The run's faults and cluster/proxy events, described, as the partition tasks need them."""
    faults: list[tuple[float, float | None, str]] = field(default_factory=list)    # start_t, stop_t, desc
    by_tp: dict[tuple[str, int], list[tuple]] = field(default_factory=dict)        # (t, event, desc, from, to, leo), by t
    broker: list[tuple[float, str]] = field(default_factory=list)                  # broker events (t, desc), by t

    @classmethod
    def collect(cls, timeline: DataFrame, events: DataFrame) -> "RunEvents":
        """Two small Spark jobs: every fault window and every event with its description."""
        faults = [(r["start_t"], r["stop_t"], r["desc"]) for r in
                  fault_windows(timeline).select("start_t", "stop_t", "desc").collect() if r["start_t"] is not None]
        out = cls(faults=faults)
        rows = event_desc(events).select("topic", "partition", "t", "event", "desc", "from_offset", "to_offset",
                                         "log_end_offset").collect()
        for r in rows:
            if r["t"] is None:
                continue
            if r["event"] in BROKER_EVENTS:
                out.broker.append((r["t"], r["desc"]))
            if r["topic"] is not None and r["partition"] is not None:
                out.by_tp.setdefault((r["topic"], int(r["partition"])), []).append(
                    (r["t"], r["event"], r["desc"], r["from_offset"], r["to_offset"], r["log_end_offset"]))
        out.broker.sort()
        for v in out.by_tp.values():
            v.sort(key=lambda e: (e[0], e[2]))
        return out


_PARTITION_CATEGORY = {"leader_elected": "elections", "isr_changed": "isr_changes", "alter_partition": "alter_partition"}


def _removes(e: tuple, offset: int) -> bool:
    """A truncation that cut the log below the offset, or a recovery that ended at or below it."""
    _, event, _, frm, to, leo = e
    if event == "truncation":
        return to is not None and frm is not None and to <= offset < frm
    return event == "recovery" and leo is not None and leo <= offset


def attribute(cols: dict[str, Any], n: int, ev: RunEvents, topic: str | None, partition: int | None,
              slack_s: float = 2.0, recent_s: float = 30.0) -> None:
    """Add one list column per category and the one-line ``attribution`` to lost-write columns."""
    out: dict[str, list] = {c: [] for c in (*CATEGORIES, "attribution")}
    tp_events = ev.by_tp.get((topic, partition), []) if topic is not None and partition is not None else []
    tp_t = [e[0] for e in tp_events]
    br_t = [e[0] for e in ev.broker]
    removals = [e for e in tp_events if e[1] in ("truncation", "recovery")]
    for i in range(n):
        ack, miss, off = cols["ack_t"][i], cols["miss_t"][i], int(cols["offset"].values[i])
        miss = None if miss is None or (isinstance(miss, float) and math.isnan(miss)) else miss
        w0 = ack - slack_s
        w1 = (miss if miss is not None else math.inf) + slack_s
        got: dict[str, list[tuple[float, str]]] = {c: [] for c in CATEGORIES}
        got["faults"] = [(st, d) for st, sp, d in ev.faults if st <= w1 and (sp is None or sp >= w0 - recent_s)]
        for e in tp_events[bisect.bisect_left(tp_t, w0):bisect.bisect_right(tp_t, w1)]:
            cat = _PARTITION_CATEGORY.get(e[1])
            if cat:
                got[cat].append((e[0], e[2]))
        got["broker_events"] = list(ev.broker[bisect.bisect_left(br_t, w0):bisect.bisect_right(br_t, w1)])
        got["removed_by"] = [(e[0], e[2]) for e in removals if e[0] >= w0 and _removes(e, off)]
        parts = []
        for c in CATEGORIES:
            descs = [d for _, d in sorted(got[c])]
            out[c].append(descs)
            if descs:
                parts.append(f"{c}: " + "; ".join(descs))
        out["attribution"].append(" | ".join(parts) if parts else "no fault or event recorded in window")
    cols.update(out)
