"""Two active controllers at once: the metadata quorum's split brain, from the controllers' events.

Why: KRaft's Raft (KIP-595) lets an old leader linger in its epoch while the others elect a new
one - it can commit nothing - but Kafka bounds how long: from 3.7 a leader without Fetch from a
majority of the voters resigns after 1.5 x ``controller.quorum.fetch.timeout.ms``
(KafkaRaftClient.pollLeader, LeaderState.timeUntilCheckQuorumExpires). Before 3.7 nothing ended
it: an active controller cut from the other controllers but not from the brokers stays active for
as long as the cut lasts, the brokers keep reading its metadata and sending it their heartbeats
and AlterPartition requests, which it can never answer, while the new active controller fences
those brokers for missing heartbeats - two sets of metadata served at once. No acknowledged write
is lost by that alone, so the history cannot show it; the controllers' own events can.

A controller's *tenure* as leader of an epoch runs from its ``controller_elected`` event (real
Kafka: ``controller_activated``, QuorumController's "Becoming the active controller at epoch E",
checkers/kafkalog) to the first of: its ``controller_resigned`` for that epoch (check quorum, a
higher epoch, shutdown; real Kafka: ``controller_renounced``), a
new incarnation of it (its next ``features`` event: it restarted), or a process fault the
timeline applied to its host (kill, pause, reboot, disk wipe, restart: a stopped process claims
nothing it can act on). A network partition does not end a tenure - that is the case this finds.
Two tenures of different controllers overlapping for more than :data:`SPLIT_BRAIN_AFTER_S` are
one ``controller_split_brain`` row: who led which epoch, when the overlap began and ended, how
it ended, and what the newer leader did to the brokers meanwhile (``broker_fenced`` events).

The threshold: with check quorum the old leader resigns within 1.5 fetch timeouts of its last
majority Fetch, and the others need at least one fetch timeout to notice and elect, so an
overlap stays under half a fetch timeout (1 s with Kafka's default 2 s), plus clock slack between
hosts (2 s, as attribution allows). 3 s of overlap is therefore more than Kafka 3.7+ ever shows.

Informational (docs/anomalies.md): it breaks no promise the history can test - Raft allows a
stale leader of an old epoch - but a campaign can require it (``require_anomalies``) or forbid it
(``forbid_anomalies``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checkers.attribution import fault_intervals
from checkers.values import as_int

ANOMALY = "controller_split_brain"
#: overlaps of two leaders' tenures longer than this are split brain (see module docstring)
SPLIT_BRAIN_AFTER_S = 3.0
#: real Kafka's controller events (checkers/kafkalog) -> the kraftsim events they stand for here
KAFKA_EVENTS = {"controller_activated": "controller_elected", "controller_renounced": "controller_resigned"}
#: process faults that stop a controller from acting as leader (nemeses/process.py, reboot, disk_wipe)
STOPPING_FAULTS = frozenset({"kill", "pause", "reboot", "disk-wipe", "restart"})


@dataclass
class Tenure:
    host: str
    node: str | None
    epoch: int
    start: float
    end: float | None          # None: still leading when the run's records end
    ended_by: str              # resigned (reason), restarted, the fault, or "still leading at the end"



def tenures(events: list[dict[str, Any]], timeline: list[dict[str, Any]]) -> list[Tenure]:
    """Every controller's leadership of an epoch, with when and how it ended."""
    by_host: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("t") is None or e.get("role") not in (None, "controller"):
            continue
        ev = e.get("event")
        if ev in ("controller_elected", "controller_resigned", "features"):
            by_host.setdefault(str(e.get("host")), []).append(e)
        elif ev in KAFKA_EVENTS:
            # real Kafka (checkers/kafkalog): the same facts, with the epoch as controller_epoch
            by_host.setdefault(str(e.get("host")), []).append(
                {**e, "event": KAFKA_EVENTS[ev], "epoch": e.get("controller_epoch")})
    stops: dict[str, list[tuple[float, str]]] = {}
    for f in fault_intervals(timeline):
        if f.start is not None and f.fault in STOPPING_FAULTS:
            for h in f.targets:
                stops.setdefault(h, []).append((f.start, f"{f.fault} {f.id}"))
    out: list[Tenure] = []
    for host, evs in by_host.items():
        evs.sort(key=lambda e: float(e["t"]))
        for i, e in enumerate(evs):
            if e["event"] != "controller_elected":
                continue
            epoch = as_int(e.get("epoch"))
            if epoch is None:
                continue
            start = float(e["t"])
            end, how = None, "still leading when the records end"
            for later in evs[i + 1:]:
                if later["event"] == "controller_resigned" and as_int(later.get("epoch")) == epoch:
                    end, how = float(later["t"]), f"resigned ({later.get('reason') or '?'})"
                    break
                if later["event"] in ("features", "controller_elected"):
                    end, how = float(later["t"]), "restarted"
                    break
            for t, what in sorted(stops.get(host, [])):
                if t >= start and (end is None or t < end):
                    end, how = t, what
                    break
            out.append(Tenure(host, None if e.get("node") is None else str(e.get("node")), epoch, start, end, how))
    return out


def split_brain(events: list[dict[str, Any]], timeline: list[dict[str, Any]],
                end_t: float | None = None) -> list[dict[str, Any]]:
    """The ``controller_split_brain`` rows: overlapping tenures of two controllers longer than
    :data:`SPLIT_BRAIN_AFTER_S`. ``end_t`` closes tenures still open (default: the last event)."""
    ts = tenures(events, timeline)
    last = end_t if end_t is not None else max((float(e["t"]) for e in events if e.get("t") is not None), default=0.0)
    fenced = [e for e in events if e.get("event") == "broker_fenced" and e.get("t") is not None]
    rows = []
    for a in ts:
        for b in ts:
            if a.host == b.host or (a.epoch, a.start) >= (b.epoch, b.start):
                continue   # each pair once, the older epoch first
            lo = max(a.start, b.start)
            hi = min(a.end if a.end is not None else last, b.end if b.end is not None else last)
            if hi - lo <= SPLIT_BRAIN_AFTER_S:
                continue
            during = [e for e in fenced if lo <= float(e["t"]) <= hi and str(e.get("host")) == b.host]
            which = sorted({int(e["broker"]) for e in during if as_int(e.get("broker")) is not None})
            older_end = a.end if a.end is not None else last
            rows.append({"old_leader": as_int(a.node) if a.node is not None else None, "old_epoch": a.epoch,
                         "new_leader": as_int(b.node) if b.node is not None else None, "new_epoch": b.epoch,
                         "from_t": lo, "to_t": hi, "seconds": round(hi - lo, 3),
                         "ended_by": (f"{a.host} {a.ended_by}" if older_end <= hi else f"{b.host} {b.ended_by}"),
                         "brokers_fenced": len(during), "fenced_brokers": ",".join(map(str, which))})
    rows.sort(key=lambda r: (r["from_t"], r["old_epoch"]))
    return rows
