"""Per-producer send order: nonmonotonic sends and send skips (docs/anomalies.md).

Jepsen's ``nonmonotonic-send-cases``: one producer's successive acknowledged sends to one
partition must land at increasing offsets (an idempotent producer keeps per-partition order,
and the leader appends in order, docs/seeds.md#seed-003-2-3). A *send skip* is the Kafka-specific twin:
between two successive acknowledged sends of a producer lies an offset holding another value
of the same producer that was not sent between them - the log reordered that producer's writes.

Computed over each producer's entries in offset order with binary searches, never a range
join: each consecutive pair of its acknowledged sends looks up the entries between its offsets.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from checkers.partition import TYPE_NAMES, Partition, proc_strings, tp_cols, value_strings


def send_order(p: Partition) -> dict[str, tuple[dict[str, Any], int]]:
    s = p.sends
    ok = np.flatnonzero(p.ok_mask())
    ok = ok[np.lexsort((s.op[ok], s.proc[ok]))]          # each producer's ok sends in op order
    proc, off = s.proc[ok], s.offset.values[ok]
    same = np.zeros(len(ok), dtype=bool)
    same[1:] = proc[1:] == proc[:-1]
    bad = np.flatnonzero(same & (off <= np.r_[0, off[:-1]]))
    prev = ok[bad - 1]
    cur = ok[bad]
    nonmono = {**tp_cols(p, len(bad)), "process": proc_strings(p, s.proc[cur]), "prev_op": s.op[prev],
               "prev_offset": s.offset.values[prev], "prev_value": value_strings(p, s.vc[prev]), "op": s.op[cur],
               "offset": s.offset.values[cur], "value": value_strings(p, s.vc[cur]),
               "delta": s.offset.values[cur] - s.offset.values[prev]}
    return {"nonmonotonic_send": (nonmono, len(bad)), "send_skip": _skips(p, ok, same)}


def _skips(p: Partition, ok: np.ndarray, same: np.ndarray) -> tuple[dict[str, Any], int]:
    """Log entries of a producer strictly between two of its consecutive acknowledged sends
    (by op, offsets ``a < b``) that were sent before the first or after the second - including
    its own *acknowledged* writes sitting there out of order (docs/anomalies.md §send_skip).

    Per producer, its log entries sorted by offset; each consecutive pair of acknowledged sends
    selects the entries in ``(a, b)`` with two binary searches. A healthy log has none there
    (only sends issued between the two, e.g. an indeterminate one), so the work is the pairs
    plus the offenders. One row per offending entry: its first pair (in op order) reports it.
    """
    s = p.sends
    off, vc = p.log()
    nn = vc >= 0
    off, vc = off[nn], vc[nn]
    # the log entries that belong to a producer: join the observed log with its sends by value
    by_v = np.argsort(s.vc, kind="stable")
    sv = s.vc[by_v]
    lo, hi = np.searchsorted(sv, vc, "left"), np.searchsorted(sv, vc, "right")
    cnt = hi - lo
    ent = np.repeat(np.arange(len(vc)), cnt)
    if len(ent) == 0 or len(ok) < 2:
        return {}, 0
    within = np.arange(len(ent)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    snd = by_v[lo[ent] + within]
    e_off, e_vc = off[ent], vc[ent]
    w, w_op, w_type = s.proc[snd], s.op[snd], s.type[snd]
    order = np.lexsort((e_vc, e_off, w))             # by producer, then offset
    e_off, e_vc, w, w_op, w_type = (a[order] for a in (e_off, e_vc, w, w_op, w_type))
    # consecutive acknowledged sends (op order) of one producer with increasing offsets
    pa, pb = ok[:-1][same[1:]], ok[1:][same[1:]]
    oa, ob = s.offset.values[pa], s.offset.values[pb]
    up = ob > oa + 1
    pa, pb, oa, ob = pa[up], pb[up], oa[up], ob[up]
    if len(pa) == 0:
        return {}, 0
    # the entries of the pair's producer with offsets in (a, b): w is sorted, then offset
    key = w.astype(np.int64) * (1 << 40) + e_off.astype(np.int64)
    pw = s.proc[pa].astype(np.int64) * (1 << 40)
    i0 = np.searchsorted(key, pw + oa, "right")
    i1 = np.searchsorted(key, pw + ob, "left")
    k = np.maximum(i1 - i0, 0)
    if k.sum() == 0:
        return {}, 0
    pair = np.repeat(np.arange(len(pa)), k)
    idx = np.repeat(i0, k) + (np.arange(k.sum()) - np.repeat(np.cumsum(k) - k, k))
    outside = (w_op[idx] < s.op[pa[pair]]) | (w_op[idx] > s.op[pb[pair]])
    pair, idx = pair[outside], idx[outside]
    if len(idx) == 0:
        return {}, 0
    _, first = np.unique(idx, return_index=True)      # one row per entry: its first pair
    pair, idx = pair[first], idx[first]
    a, b = pa[pair], pb[pair]
    cols = {**tp_cols(p, len(idx)), "process": proc_strings(p, w[idx]), "prev_op": s.op[a], "prev_offset": oa[pair],
            "op": s.op[b], "offset": ob[pair], "skipped_offset": e_off[idx], "skipped_value": value_strings(p, e_vc[idx]),
            "skipped_op": w_op[idx], "skipped_type": [TYPE_NAMES[int(t)] for t in w_type[idx]]}
    return cols, len(idx)
