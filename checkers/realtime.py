"""Real-time offset regression (docs/anomalies.md §realtime_offset_regression).

docs/seeds.md#seed-003-2-7: an acknowledged or consumed record sits below the HWM, hence below the LEO of
every ISR member, so a send *invoked after* that acknowledgement or read must be appended at a
higher offset. An ok send at or below an offset already known to exist before its invoke means
the log went backwards in real time (typically the tail was truncated away by an election).

An as-of lookup: the partition's known offsets (acks at ack time, reads at the time the poll
finished) sorted by time with a running maximum; each send's invoke time is binary-searched in
it (a fact at exactly the invoke time does not count - it was not known before).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from checkers.partition import DRAIN, Partition, send_cols


def realtime_regression(p: Partition) -> dict[str, tuple[dict[str, Any], int]]:
    s, po = p.sends, p.polls
    ok = np.flatnonzero(p.ok_mask())
    a_ok = ok[~np.isnan(s.complete_t[ok])]
    # known facts: (t, offset, kind 0 = ack / 1 = read, index)
    t = np.concatenate([s.complete_t[a_ok], po.t_last])
    off = np.concatenate([s.offset.values[a_ok], po.max_offset])
    kind = np.concatenate([np.zeros(len(a_ok), dtype=np.int8), np.ones(len(po.t_last), dtype=np.int8)])
    ref = np.concatenate([a_ok, np.arange(len(po.t_last))])
    keep = ~np.isnan(t)
    t, off, kind, ref = t[keep], off[keep], kind[keep], ref[keep]
    probes = ok[~np.isnan(s.invoke_t[ok])]
    empty = {"realtime_offset_regression": ({}, 0)}
    if len(t) == 0 or len(probes) == 0:
        return empty
    # rank facts by (offset, t, source text): the maximum fact known before each invoke
    rank_order = np.lexsort((t, off))
    rank_order = _break_ties(p, rank_order, t, off, kind, ref)
    rank = np.empty(len(t), dtype=np.int64)
    rank[rank_order] = np.arange(len(t))
    by_t = np.argsort(t, kind="stable")
    run = np.maximum.accumulate(rank[by_t])
    n_before = np.searchsorted(t[by_t], s.invoke_t[probes], side="left")
    has = n_before > 0
    best = np.where(has, rank_order[run[np.maximum(n_before - 1, 0)]], -1)
    bad = has & (s.offset.values[probes] <= np.where(has, off[np.maximum(best, 0)], 0))
    idx, fact = probes[bad], best[bad]
    cols = {**send_cols(p, idx), "prior_offset": off[fact], "prior_t": t[fact],
            "prior_source": [_source(p, kind[f], ref[f]) for f in fact]}
    return {"realtime_offset_regression": (cols, len(idx))}


def _source(p: Partition, kind: int, ref: int) -> str:
    if kind == 0:
        return f"ack:{p.processes[int(p.sends.proc[ref])]}:{p.values[int(p.sends.vc[ref])].as_py()}" \
            if p.sends.vc[ref] >= 0 else f"ack:{p.processes[int(p.sends.proc[ref])]}:"
    po = p.polls
    f = "drain" if po.f[ref] == DRAIN else "poll"
    return f"{f}:{p.processes[int(po.proc[ref])]}:op{int(po.op[ref])}"


def _break_ties(p: Partition, order: np.ndarray, t: np.ndarray, off: np.ndarray, kind: np.ndarray,
                ref: np.ndarray) -> np.ndarray:
    """Facts equal in (offset, t) are ordered by their source text, as a struct comparison would."""
    so, st = off[order], t[order]
    tie = np.zeros(len(order), dtype=bool)
    tie[1:] = (so[1:] == so[:-1]) & (st[1:] == st[:-1])
    if not tie.any():
        return order
    order = order.copy()
    i, n = 1, len(order)
    while i < n:
        if not tie[i]:
            i += 1
            continue
        j = i
        while j < n and tie[j]:
            j += 1
        grp = order[i - 1:j]
        order[i - 1:j] = sorted(grp, key=lambda k: _source(p, kind[k], ref[k]))
        i = j
    return order
