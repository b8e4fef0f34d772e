"""An ISR change a leader proposed that stayed unresolved: the partition's ISR frozen.

Why: a leader changes its ISR only through the controller (AlterPartition). While its proposal
is pending (Kafka's ``PendingPartitionChange``, ``partitionState.isInflight``) it proposes
nothing else: a follower that died stays in the ISR it acts on, so the high watermark waits for
it and acks=all writes time out. The proposal ends with the controller's answer, or with newer
metadata for the partition; it stays when the controller never answers (an active controller
that can commit nothing, before Kafka 3.7 never resigning) or answers an error after which Kafka
keeps it and waits for metadata (Partition.handleAlterPartitionError: INVALID_REQUEST,
FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_*, NEW_LEADER_ELECTED) - as for the
request a Kafka 3.5.0 / 3.5.1 broker rebuilt with an empty ISR. No acknowledged write is lost by
it; the writes stall. The history shows the stall (sends timing out), not why; the leaders'
events do.

From kraftsim's ``leader_isr`` events (``proposed_isr``: the ISR of the AlterPartition awaiting
an answer, null once resolved): a proposal's period runs from the first event naming it to the
first of: the same leader's next ``leader_isr`` for the partition with another proposal or none,
the controller's next change of the partition (``isr_changed`` / ``leader_elected``: newer
metadata), a process fault on the leader's host, or the end of the records. Longer than
:data:`STUCK_AFTER_S` is one ``isr_change_stuck`` row with the controller's answers to that
leader's AlterPartition for the partition meanwhile (``alter_partition`` events: accepted or the
error, and the ISR it named). 10 s is longer than a controller failover takes with Kafka's
default timeouts (a fetch timeout to notice, two election timeouts: about 4 s), so a proposal
that merely waited for a new active controller does not count.

Informational (docs/anomalies.md); a campaign can require or forbid it.
"""
from __future__ import annotations

from typing import Any

from checkers.attribution import fault_intervals
from checkers.quorum import STOPPING_FAULTS

ANOMALY = "isr_change_stuck"
#: a pending ISR change older than this is stuck (see module docstring)
STUCK_AFTER_S = 10.0


def _ids(v: Any) -> str:
    return "[" + ",".join(str(x) for x in v) + "]" if isinstance(v, list) else "null"


def stuck(events: list[dict[str, Any]], timeline: list[dict[str, Any]], end_t: float | None = None) -> list[dict[str, Any]]:
    """The ``isr_change_stuck`` rows (see module docstring); ``end_t`` closes open proposals."""
    last = end_t if end_t is not None else max((float(e["t"]) for e in events if e.get("t") is not None), default=0.0)
    timed = sorted((e for e in events if e.get("t") is not None), key=lambda e: float(e["t"]))
    stops: dict[str, list[float]] = {}
    for f in fault_intervals(timeline):
        if f.start is not None and f.fault in STOPPING_FAULTS:
            for h in f.targets:
                stops.setdefault(h, []).append(f.start)
    by_tp: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for e in timed:
        if e.get("topic") is not None and e.get("partition") is not None and e.get("event") in (
                "leader_isr", "isr_changed", "leader_elected", "alter_partition"):
            by_tp.setdefault((str(e["topic"]), int(e["partition"])), []).append(e)
    rows: list[dict[str, Any]] = []
    for (topic, part), evs in sorted(by_tp.items()):
        for i, e in enumerate(evs):
            if e["event"] != "leader_isr" or not isinstance(e.get("proposed_isr"), list):
                continue
            prev = next((p for p in reversed(evs[:i]) if p["event"] == "leader_isr"
                         and p.get("host") == e.get("host")), None)
            if prev is not None and prev.get("proposed_isr") == e["proposed_isr"] \
                    and prev.get("leader_epoch") == e.get("leader_epoch"):
                continue   # the same proposal, still pending (another field of the view changed)
            start = float(e["t"])
            end, how = last, "still pending when the records end"
            for later in evs[i + 1:]:
                if later["event"] == "leader_isr" and later.get("host") == e.get("host") and (
                        later.get("proposed_isr") != e["proposed_isr"] or later.get("leader_epoch") != e.get("leader_epoch")):
                    end = float(later["t"])
                    how = "answered or replaced" if later.get("proposed_isr") is None else "another proposal"
                    break
                if later["event"] in ("isr_changed", "leader_elected"):   # the controller's: newer metadata
                    end, how = float(later["t"]), f"newer metadata ({later['event']})"
                    break
            for t in sorted(stops.get(str(e.get("host")), [])):
                if start <= t < end:
                    end, how = t, "the leader's process stopped"
                    break
            if end - start <= STUCK_AFTER_S:
                continue
            leader = e.get("broker")
            answers = [a for a in evs if a["event"] == "alter_partition" and a.get("role") != "proxy"
                       and a.get("leader") == leader and start <= float(a["t"]) <= end]
            said: dict[str, int] = {}
            for a in answers:
                key = ("accepted" if a.get("accepted") else str(a.get("error") or "rejected")) + \
                      f" (new_isr {_ids(a.get('new_isr'))})"
                said[key] = said.get(key, 0) + 1
            rows.append({"topic": topic, "partition": part, "leader": leader, "leader_epoch": e.get("leader_epoch"),
                         "isr": _ids(e.get("isr")), "proposed_isr": _ids(e["proposed_isr"]), "from_t": start,
                         "to_t": end, "seconds": round(end - start, 3), "ended_by": how,
                         "answers": "; ".join(f"{k} x{n}" for k, n in said.items()) or "no answer"})
    return rows
