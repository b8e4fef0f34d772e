"""Protocol invariants from the observer and cluster event logs (docs/anomalies.md).

* ``ack_below_min_isr`` - seed 003 §2.7 / min.insync.replicas: an acks=all produce may only be
  acknowledged once the ISR holds at least min.insync.replicas members. Flagged when the
  partition's ISR was below min ISR during the *whole* interval from the send's invoke to its
  ack (so the HWM advance that acknowledged it must have happened with too small an ISR).
  The ISR is the one the acting leader answered by: its ``leader_isr`` events (kraftsim writes
  one whenever the ISR a leader acts on changes; the size judged is its maximal ISR, as
  Partition.checkEnoughReplicasReachOffset reads it). Without them (older runs, Kafka logs
  without the leader's lines) the controller's ``leader_elected``/``isr_changed`` events stand in,
  else the observer's samples. The controller's view alone misjudges a leader cut from the
  controller: the controller shrinks the ISR, the leader never learns it and, with every
  follower still fetching from it, rightly acknowledges with the ISR it has.
* ``visible_end_regression`` - the HWM never moves backwards (seed 003 §2.7): at the end the
  final drain's end offset must be above every offset that was acknowledged or read earlier.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from checkers.partition import Partition, send_cols, tp_cols

#: a partition's ISR size over time: (t ascending, isr size), from the driver
IsrTimeline = tuple[np.ndarray, np.ndarray]


def isr_timelines(events: list[dict[str, Any]], observer: list[dict[str, Any]],
                  use_events: bool) -> dict[tuple[str, int], IsrTimeline]:
    """(topic, partition) -> ISR size changes: the leaders' own view where they reported it, else
    the controller's events, else (no cluster logs collected) the observer's samples.

    Small (one row per election or ISR change, or per observer sample): built once on the
    driver and shipped to the partition tasks.
    """
    out: dict[tuple[str, int], list[tuple[float, int]]] = {}

    def add(rows: list[dict[str, Any]], field: str, skip: set[tuple[str, int]]) -> None:
        for r in rows:
            if r["t"] is not None and r["partition"] is not None and r["topic"] is not None \
                    and r.get(field) is not None and (r["topic"], int(r["partition"])) not in skip:
                out.setdefault((r["topic"], int(r["partition"])), []).append((float(r["t"]), len(r[field])))

    if use_events:
        add([e for e in events if e["event"] == "leader_isr"], "maximal_isr", set())
        add([e for e in events if e["event"] in ("leader_elected", "isr_changed")], "isr", set(out))
    else:
        add([o for o in observer if o["error"] is None], "isr", set())
    res: dict[tuple[str, int], IsrTimeline] = {}
    for k, v in out.items():
        v.sort(key=lambda x: x[0])          # stable: changes at one instant keep their log order
        res[k] = (np.array([x[0] for x in v]), np.array([x[1] for x in v], dtype=np.int64))
    return res


def ack_below_min_isr(p: Partition, isr: IsrTimeline | None, min_isr: int | None) -> tuple[dict[str, Any], int]:
    """Acks whose partition's ISR was below min ISR from the send's invoke through its ack.

    A change at the same instant as an invoke or ack counts as already in effect.
    """
    if not min_isr or min_isr <= 1 or isr is None or len(isr[0]) == 0:
        return {}, 0
    ct, size = isr
    s = p.sends
    ok = np.flatnonzero(p.ok_mask() & ~np.isnan(s.invoke_t))
    good = np.cumsum(size >= min_isr)
    i0 = np.searchsorted(ct, s.invoke_t[ok], side="right") - 1
    i1 = np.searchsorted(ct, s.complete_t[ok], side="right") - 1
    known = (i0 >= 0) & (i1 >= 0)
    s0, s1 = size[np.maximum(i0, 0)], size[np.maximum(i1, 0)]
    g0, g1 = good[np.maximum(i0, 0)], good[np.maximum(i1, 0)]
    bad = known & (s0 < min_isr) & (s1 < min_isr) & (g0 == g1)
    idx = ok[bad]
    cols = {**send_cols(p, idx), "isr_at_invoke": s0[bad], "isr_at_ack": s1[bad],
            "min_insync_replicas": np.full(len(idx), min_isr)}
    return cols, len(idx)


def visible_end_regression(p: Partition) -> tuple[dict[str, Any], int]:
    """The final drain ended below an offset acknowledged or read earlier: the HWM went back."""
    mro, mao = p.max_read_offset(), p.max_acked_offset()
    high = max(-1 if mro is None else mro, -1 if mao is None else mao)
    if p.drain_end is None or p.drain_end >= high + 1:
        return {}, 0
    return {**tp_cols(p, 1), "drain_end": [p.drain_end], "max_read_offset": [mro], "max_acked_offset": [mao],
            "visible_end_seen": [high + 1]}, 1
