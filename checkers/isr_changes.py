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

Kafka's own logs state no pending proposal at INFO (Partition.prepareIsrExpand / prepareIsrShrink
log nothing; handleAlterPartitionError logs INVALID_REQUEST, FENCED_LEADER_EPOCH,
INVALID_UPDATE_VERSION and UNKNOWN_TOPIC_* at DEBUG), so where no leader states its proposals
the controller's rejection is the start instead: an ``alter_partition`` the controller rejected
with one of the errors after which the leader keeps the change pending (:data:`KEEPS_PENDING`;
Kafka 3.4.1's controller logs the empty ISR a 3.5.1 broker re-sent: "Rejecting AlterPartition
request from node 3 for faultline-0 because it specified an invalid ISR [] that doesn't include
itself."), open until the partition's next metadata change, an accepted AlterPartition of that
leader, or a process fault on the leader (3.5.1 core/src/main/scala/kafka/cluster/Partition.scala
handleAlterPartitionError: those errors return false and leave partitionState pending).

Informational (docs/anomalies.md); a campaign can require or forbid it.
"""
from __future__ import annotations

from typing import Any

from checkers.attribution import fault_intervals
from checkers.quorum import STOPPING_FAULTS

ANOMALY = "isr_change_stuck"
#: a pending ISR change older than this is stuck (see module docstring)
STUCK_AFTER_S = 10.0
#: the controller's answers after which the leader keeps its change pending until new metadata
#: (Partition.handleAlterPartitionError returns false without resetting the state)
KEEPS_PENDING = frozenset({"INVALID_REQUEST", "FENCED_LEADER_EPOCH", "INVALID_UPDATE_VERSION",
                           "UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_ID", "NEW_LEADER_ELECTED"})


def _ids(v: Any) -> str:
    return "[" + ",".join(str(x) for x in v) + "]" if isinstance(v, list) else "null"


def _answers(evs: list[dict[str, Any]], leader: Any, start: float, end: float) -> dict[str, int]:
    """The controller's answers to ``leader``'s AlterPartition in ``[start, end]``, counted by kind."""
    said: dict[str, int] = {}
    for a in evs:
        if a["event"] == "alter_partition" and a.get("role") != "proxy" and a.get("leader") == leader \
                and start <= float(a["t"]) <= end:
            key = ("accepted" if a.get("accepted") else str(a.get("error") or "rejected")) + \
                  f" (new_isr {_ids(a.get('new_isr'))})"
            said[key] = said.get(key, 0) + 1
    return said


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
    # kraftsim states each proposal (proposed_isr); a source that never did is Kafka's logs
    stated = any(e.get("event") == "leader_isr" and isinstance(e.get("proposed_isr"), list) for e in timed)
    for (topic, part), evs in sorted(by_tp.items()):
        if not stated:
            rows += _rejected_and_kept(topic, part, evs, stops, last)
            continue
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
            said = _answers(evs, leader, start, end)
            rows.append({"topic": topic, "partition": part, "leader": leader, "leader_epoch": e.get("leader_epoch"),
                         "isr": _ids(e.get("isr")), "proposed_isr": _ids(e["proposed_isr"]), "from_t": start,
                         "to_t": end, "seconds": round(end - start, 3), "ended_by": how,
                         "answers": "; ".join(f"{k} x{n}" for k, n in said.items()) or "no answer"})
    return rows


def _rejected_and_kept(topic: str, part: int, evs: list[dict[str, Any]], stops: dict[str, list[float]],
                       last: float) -> list[dict[str, Any]]:
    """Rows from the controller's rejections, for logs where no leader states its proposals."""
    rows: list[dict[str, Any]] = []
    covered = -1.0
    for i, a in enumerate(evs):
        if a["event"] != "alter_partition" or a.get("role") == "proxy" or a.get("accepted") \
                or str(a.get("error")) not in KEEPS_PENDING or float(a["t"]) < covered:
            continue
        leader, start = a.get("leader"), float(a["t"])
        end, how = last, "still pending when the records end"
        for later in evs[i + 1:]:
            if later["event"] in ("isr_changed", "leader_elected"):
                end, how = float(later["t"]), f"newer metadata ({later['event']})"
                break
            if later["event"] == "alter_partition" and later.get("role") != "proxy" and later.get("accepted") \
                    and later.get("leader") == leader:
                end, how = float(later["t"]), "answered or replaced"
                break
        hosts = {str(e.get("host")) for e in evs if e["event"] == "leader_isr" and e.get("broker") == leader}
        for t in sorted(t for h in hosts for t in stops.get(h, [])):
            if start <= t < end:
                end, how = t, "the leader's process stopped"
                break
        covered = end
        if end - start <= STUCK_AFTER_S:
            continue
        view = next((e for e in reversed(evs[:i]) if e["event"] == "leader_isr" and e.get("broker") == leader), {})
        said = _answers(evs, leader, start, end)
        rows.append({"topic": topic, "partition": part, "leader": leader,
                     "leader_epoch": a["leader_epoch"] if a.get("leader_epoch") is not None else view.get("leader_epoch"),
                     "isr": _ids(view.get("isr")),
                     "proposed_isr": _ids(a.get("new_isr")), "from_t": start, "to_t": end,
                     "seconds": round(end - start, 3), "ended_by": how,
                     "answers": "; ".join(f"{k} x{n}" for k, n in said.items())})
    return rows
