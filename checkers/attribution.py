"""Attribution: what happened to a lost write's partition between its ack and its miss.

For every lost write (ack at ``ack_t``, first missed by a read at ``miss_t``), join:

* ``faults``: timeline nemesis faults active in, or ended at most ``recent_s`` before, the window;
* ``elections``: ``leader_elected`` events of the partition (leader, epochs, ISR, ELR, reason)
  and the winners' ``became_leader`` (what the new leader's log held: start, end, size - seed 004);
* ``isr_changes``: ``isr_changed`` events of the partition;
* ``alter_partition``: AlterPartition accepts/rejects of the partition (KIP-903, seed 000: a
  stale broker epoch admitted to the ISR is the classic cause);
* ``broker_events``: broker registrations (new broker epoch, unclean shutdown), fencing;
* ``removed_by`` (forensics): ``truncation`` events that cut the partition below the write's
  offset, ``recovery`` events whose log end offset ended at or below it, and leaders that took
  over after the ack with a log ending at or below it - which broker's log lost the record, as
  Kafka's system tests search the data logs.

The window is ``[ack_t - slack_s, miss_t + slack_s]`` (cluster wall clocks vs the run clock).
The event logs and the timeline are small (a row per fault step or cluster event): the driver
reads them (:func:`checkers.load.read_log`), describes each event in one line
(:func:`event_desc`, :func:`fault_windows`) and builds one :class:`RunEvents`, which the
partition tasks use to attribute their own lost writes (binary searches on event time), so
lost writes never travel to be joined.
"""
from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass, field
from typing import Any

CATEGORIES = ("faults", "elections", "isr_changes", "alter_partition", "broker_events", "removed_by")
BROKER_EVENTS = ("broker_registered", "broker_fenced", "broker_unfenced", "self_fenced")


#: the fields an event's description names, in order, after its time, name and origin
_DESC_FIELDS = ("broker", "broker_epoch", "previous_broker_epoch", "clean_shutdown", "leader", "leader_epoch",
                "partition_epoch", "isr", "elr", "new_isr", "broker_epochs", "version", "accepted", "error",
                "from_offset", "to_offset", "recovery_point", "log_start_offset", "log_end_offset", "hwm",
                "local_log_size_bytes", "reason", "leader_recovery_state")


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ",".join(str(x) for x in v if x is not None) + "]"
    return str(v)


def event_desc(e: dict[str, Any]) -> str:
    """A one-line, human-readable description of a cluster/proxy event: the fields it has."""
    head = [f"t={e['t']:.3f}" if e.get("t") is not None else None, e.get("event"),
            f"@{e.get('host') or ''}/{e.get('node') or '?'}"]
    return " ".join([h for h in head if h is not None]
                    + [f"{k}={_text(e[k])}" for k in _DESC_FIELDS if e.get(k) is not None])


def _time(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class FaultInterval:
    """One nemesis fault of the timeline: its start and stop records paired by fault id."""
    id: str
    fault: str | None
    targets: tuple[str, ...]
    start: float | None      # None: only its stop was recorded
    stop: float | None       # None: never healed in this timeline (the harness was killed)
    detail: Any              # the start record's detail (the fault's parameters)
    #: the one-line reason when the fault's start raised (its ``failed`` record; what it had done
    #: was healed at once, nemeses/active.py), else None
    failed: str | None = None


def fault_intervals(timeline: list[dict[str, Any]]) -> list[FaultInterval]:
    """Every nemesis fault id of the timeline, in order of its first record.

    The one pairing of start and stop records, shared by attribution and the report's fault
    bands (harness/report), so a fault is the same interval in the verdict and on the page.
    A nemesis writes one start and one stop per fault id (nemeses/base.py); should a stop be
    written twice (a later ``faultline heal``), the interval runs from the first start to the
    last stop. Rows may be raw JSON: a time that is not a number is no time.
    """
    by_id: dict[str, list[dict[str, Any]]] = {}
    for r in timeline:
        if r.get("kind") == "nemesis" and _time(r.get("t")) is not None:
            by_id.setdefault(str(r.get("id")), []).append(r)
    out = []
    for fid, rows in by_id.items():
        starts = [float(r["t"]) for r in rows if r.get("phase") == "start"]
        stops = [float(r["t"]) for r in rows if r.get("phase") == "stop"]
        if not starts and not stops:
            continue
        fault = next((r["fault"] for r in rows if r.get("fault") is not None), None)
        targets = next((r["targets"] for r in rows if isinstance(r.get("targets"), list)), None) or []
        detail = next((r["detail"] for r in rows if r.get("phase") == "start" and r.get("detail") is not None), None)
        fails = [r for r in rows if r.get("phase") == "failed"]
        failed = _failure(fails[0]) if fails else None
        if fails and not starts:   # it failed before it touched anything: an instant
            starts = [float(fails[0]["t"])]
        if fails and not stops:
            stops = [float(fails[0]["t"])]
        out.append(FaultInterval(fid, None if fault is None else str(fault),
                                 tuple(str(x) for x in targets if x is not None),
                                 min(starts) if starts else None, max(stops) if stops else None, detail, failed))
    return out


def _failure(r: dict[str, Any]) -> str:
    """The one-line reason of a ``failed`` record (its detail may be raw JSON text or a mapping)."""
    d = r.get("detail")
    if isinstance(d, str):
        try:
            d = json.loads(d)
        except ValueError:
            return d or "failed"
    return str(d.get("reason") or "failed") if isinstance(d, dict) else "failed"


def fault_windows(timeline: list[dict[str, Any]]) -> list[tuple[float, float | None, str]]:
    """One (start_t, stop_t, desc) per nemesis fault that started; stop_t None while never healed."""
    out = []
    for f in fault_intervals(timeline):
        if f.start is None:
            continue
        parts = [None if f.fault is None else f"{f.fault}[{','.join(f.targets)}]",
                 f"{f.id} {f.start:.3f}-{'active' if f.stop is None else f'{f.stop:.3f}'}",
                 None if f.failed is None else f"FAILED to start ({f.failed}; what it did was healed)",
                 None if f.detail is None else _text(f.detail)]
        out.append((f.start, f.stop, " ".join(x for x in parts if x is not None)))
    return out


@dataclass
class RunEvents:
    """The run's faults and cluster/proxy events, described, as the partition tasks need them."""
    faults: list[tuple[float, float | None, str]] = field(default_factory=list)    # start_t, stop_t, desc
    by_tp: dict[tuple[str, int], list[tuple]] = field(default_factory=dict)        # (t, event, desc, from, to, leo), by t
    broker: list[tuple[float, str]] = field(default_factory=list)                  # broker events (t, desc), by t

    @classmethod
    def collect(cls, timeline: list[dict[str, Any]], events: list[dict[str, Any]]) -> "RunEvents":
        """Every fault window and every event with its description, by partition and time."""
        out = cls(faults=fault_windows(timeline))
        for r in events:
            if r["t"] is None:
                continue
            desc = event_desc(r)
            if r["event"] in BROKER_EVENTS:
                out.broker.append((r["t"], desc))
            if r["topic"] is not None and r["partition"] is not None:
                out.by_tp.setdefault((r["topic"], int(r["partition"])), []).append(
                    (r["t"], r["event"], desc, r["from_offset"], r["to_offset"], r["log_end_offset"]))
        out.broker.sort()
        for v in out.by_tp.values():
            v.sort(key=lambda e: (e[0], e[2]))
        return out


#: a partition event's category; ``became_leader`` is the winner's own side of an election
_PARTITION_CATEGORY = {"leader_elected": "elections", "became_leader": "elections", "isr_changed": "isr_changes",
                       "alter_partition": "alter_partition"}
_REMOVALS = ("truncation", "recovery", "became_leader")


def _removes(e: tuple, offset: int, ack_t: float) -> bool:
    """A truncation that cut the log below the offset, a recovery that ended at or below it,
    or a leader that took over after the ack without it (its log end at or below the offset:
    the followers truncate to it, seed 003 §2.10). The last needs the takeover after the ack
    itself, not within the clock slack: a leader elected just before the write lacked it too."""
    t, event, _, frm, to, leo = e
    if event == "truncation":
        return to is not None and frm is not None and to <= offset < frm
    if event == "became_leader":
        return leo is not None and leo <= offset and t >= ack_t
    return event == "recovery" and leo is not None and leo <= offset


def attribute(cols: dict[str, Any], n: int, ev: RunEvents, topic: str | None, partition: int | None,
              slack_s: float = 2.0, recent_s: float = 30.0) -> None:
    """Add one list column per category and the one-line ``attribution`` to lost-write columns."""
    out: dict[str, list] = {c: [] for c in (*CATEGORIES, "attribution")}
    tp_events = ev.by_tp.get((topic, partition), []) if topic is not None and partition is not None else []
    tp_t = [e[0] for e in tp_events]
    br_t = [e[0] for e in ev.broker]
    removals = [e for e in tp_events if e[1] in _REMOVALS]
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
        got["removed_by"] = [(e[0], e[2]) for e in removals if e[0] >= w0 and _removes(e, off, ack)]
        parts = []
        for c in CATEGORIES:
            descs = [d for _, d in sorted(got[c])]
            out[c].append(descs)
            if descs:
                parts.append(f"{c}: " + "; ".join(descs))
        out["attribution"].append(" | ".join(parts) if parts else "no fault or event recorded in window")
    cols.update(out)
