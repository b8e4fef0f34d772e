"""Protocol invariants from the observer and cluster event logs (docs/anomalies.md).

* ``ack_below_min_isr`` - docs/seeds.md#seed-003-2-7 / min.insync.replicas: an acks=all produce may only be
  acknowledged once at least the effective min ISR replicas (the leader included) hold it
  (:mod:`checkers.min_isr`: the rule in force, capped at the replication factor from Kafka 3.7).
  Judged, where the run has them, from the **replicas' own logs** (:mod:`checkers.replicas`:
  kraftsim followers' ``follower_append`` events with the truncations and recoveries): an ack is
  flagged when, at its ack time, so many replicas *certainly* lacked its offset that fewer than the
  effective min ISR can have held it. That evidence is written by the followers, not by the
  leader whose ack decision is judged.
  Where no replica recorded its log end (real Kafka logs no follower LEO at INFO; older kraftsim
  runs), the judgement falls back to an **ISR view**, labelled as such in ``judged_by``: the acting
  leader's own (``leader_isr``, its maximal ISR, as Partition.checkEnoughReplicasReachOffset reads
  it), else the controller's ``leader_elected``/``isr_changed`` events, else the observer's samples;
  flagged when that ISR was below the min ISR during the *whole* interval from the send's invoke
  to its ack. That view checks the leader's bookkeeping against itself: a leader that acks with
  fewer copies while its ISR looks full passes it. The controller's view alone misjudges a leader
  cut from the controller: the controller shrinks the ISR, the leader never learns it and, with
  every follower still fetching from it, rightly acknowledges with the ISR it has.
* ``visible_end_regression`` - the HWM never moves backwards (docs/seeds.md#seed-003-2-7): at the end the
  final drain's end offset must be above every offset that was acknowledged or read earlier.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from checkers.evidence import Nullable
from checkers.partition import Partition, send_cols, tp_cols
from checkers.replicas import ReplicaLog

#: a partition's ISR size over time: (t ascending, isr size), from the driver
IsrTimeline = tuple[np.ndarray, np.ndarray]

#: what a partition's acks were judged by (evidence column ``judged_by``; verdict
#: ``checker.ack_below_min_isr.judged_by``): the replicas' own logs - independent of the leader -
#: or one of the ISR views, the fallback
BY_REPLICAS = "replica_logs"
BY_LEADER_ISR = "leader_isr"
BY_CONTROLLER_ISR = "controller_isr"
BY_OBSERVER_ISR = "observer_isr"
#: the fallback's label, for a reader of the verdict (docs/anomalies.md)
FALLBACK_NOTE = "judged from an ISR view: no independent replica evidence on this target"


def isr_evidence(events: list[dict[str, Any]], observer: list[dict[str, Any]], use_events: bool
                 ) -> tuple[dict[tuple[str, int], IsrTimeline], dict[tuple[str, int], str]]:
    """(topic, partition) -> ISR size changes, and which view each came from: the leaders' own
    view where they reported it, else the controller's events, else (no cluster logs collected)
    the observer's samples.

    Small (one row per election or ISR change, or per observer sample): built once on the
    driver and shipped to the partition tasks.
    """
    out: dict[tuple[str, int], list[tuple[float, int]]] = {}
    source: dict[tuple[str, int], str] = {}

    def add(rows: list[dict[str, Any]], field: str, skip: set[tuple[str, int]], by: str) -> None:
        for r in rows:
            if r["t"] is not None and r["partition"] is not None and r["topic"] is not None \
                    and r.get(field) is not None and (r["topic"], int(r["partition"])) not in skip:
                key = (r["topic"], int(r["partition"]))
                out.setdefault(key, []).append((float(r["t"]), len(r[field])))
                source[key] = by

    if use_events:
        add([e for e in events if e["event"] == "leader_isr"], "maximal_isr", set(), BY_LEADER_ISR)
        add([e for e in events if e["event"] in ("leader_elected", "isr_changed")], "isr", set(out),
            BY_CONTROLLER_ISR)
    else:
        add([o for o in observer if o["error"] is None], "isr", set(), BY_OBSERVER_ISR)
    res: dict[tuple[str, int], IsrTimeline] = {}
    for k, v in out.items():
        v.sort(key=lambda x: x[0])          # stable: changes at one instant keep their log order
        res[k] = (np.array([x[0] for x in v]), np.array([x[1] for x in v], dtype=np.int64))
    return res, source


def isr_timelines(events: list[dict[str, Any]], observer: list[dict[str, Any]],
                  use_events: bool) -> dict[tuple[str, int], IsrTimeline]:
    """:func:`isr_evidence` without the sources."""
    return isr_evidence(events, observer, use_events)[0]


def isr_sizes(isr: IsrTimeline | None, invoke_t: np.ndarray, ack_t: np.ndarray, min_isr: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The ISR view per send: (known at both ends, size at invoke, size at ack, below min ISR the
    whole time). A change at the same instant as an invoke or ack counts as already in effect."""
    n = len(invoke_t)
    if isr is None or len(isr[0]) == 0:
        z = np.zeros(n, dtype=np.int64)
        return np.zeros(n, dtype=bool), z, z, np.zeros(n, dtype=bool)
    ct, size = isr
    good = np.cumsum(size >= min_isr)
    i0 = np.searchsorted(ct, invoke_t, side="right") - 1
    i1 = np.searchsorted(ct, ack_t, side="right") - 1
    known = (i0 >= 0) & (i1 >= 0)
    s0, s1 = size[np.maximum(i0, 0)], size[np.maximum(i1, 0)]
    g0, g1 = good[np.maximum(i0, 0)], good[np.maximum(i1, 0)]
    return known, s0, s1, known & (s0 < min_isr) & (s1 < min_isr) & (g0 == g1)


def ack_below_min_isr(p: Partition, isr: IsrTimeline | None, min_isr: int | None, *,
                      replicas: list[ReplicaLog] | None = None, replication_factor: int | None = None,
                      isr_source: str | None = None) -> tuple[dict[str, Any], int]:
    """Acks that fewer than ``min_isr`` replicas can have held (the effective min ISR).

    With ``replicas`` (the partition's replica logs) and the replication factor: judged from the
    replicas' own logs, each flagged ack certainly under-replicated (:mod:`checkers.replicas`).
    Else from the ISR view ``isr`` (``isr_source`` names it): below min ISR from invoke through ack.
    """
    if not min_isr or min_isr <= 1:
        return {}, 0
    s = p.sends
    ok = np.flatnonzero(p.ok_mask() & ~np.isnan(s.invoke_t))
    inv, ack = s.invoke_t[ok], s.complete_t[ok]
    known, s0, s1, isr_bad = isr_sizes(isr, inv, ack, min_isr)
    extra: dict[str, Any]
    if replicas and replication_factor:
        off = s.offset.values[ok]
        lacking = np.zeros((len(replicas), len(ok)), dtype=bool)
        for k, r in enumerate(replicas):
            lacking[k] = r.lacking(off, inv, ack)
        copies = replication_factor - lacking.sum(axis=0)
        bad = copies < min_isr
        brokers = [r.broker for r in replicas]
        who = [",".join(str(brokers[k]) for k in np.flatnonzero(lacking[:, i])) for i in np.flatnonzero(bad)]
        extra = {"judged_by": [BY_REPLICAS] * int(bad.sum()), "copies_at_most": copies[bad],
                 "replicas_lacking": who}
    elif isr is not None and len(isr[0]):
        bad = isr_bad
        extra = {"judged_by": [isr_source or BY_LEADER_ISR] * int(bad.sum())}
    else:
        return {}, 0
    idx = ok[bad]
    n = len(idx)
    cols = {**send_cols(p, idx), **extra,
            "isr_at_invoke": Nullable(s0[bad], ~known[bad]), "isr_at_ack": Nullable(s1[bad], ~known[bad]),
            "min_insync_replicas": np.full(n, min_isr), "replication_factor":
                Nullable(np.full(n, replication_factor or 0), np.full(n, replication_factor is None))}
    return cols, n


def visible_end_regression(p: Partition) -> tuple[dict[str, Any], int]:
    """The final drain ended below an offset acknowledged or read earlier: the HWM went back."""
    mro, mao = p.max_read_offset(), p.max_acked_offset()
    high = max(-1 if mro is None else mro, -1 if mao is None else mao)
    if p.drain_end is None or p.drain_end >= high + 1:
        return {}, 0
    return {**tp_cols(p, 1), "drain_end": [p.drain_end], "max_read_offset": [mro], "max_acked_offset": [mao],
            "visible_end_seen": [high + 1]}, 1
