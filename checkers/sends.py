"""Per-producer send order: nonmonotonic sends and send skips (docs/anomalies.md).

Jepsen's ``nonmonotonic-send-cases``: one producer's successive acknowledged sends to one
partition must land at increasing offsets (an idempotent producer keeps per-partition order,
and the leader appends in order, seed 003 §2.3). A *send skip* is the Kafka-specific twin:
between two successive acknowledged sends of a producer lies an offset holding another value
of the same producer that was not sent between them - the log reordered that producer's writes.

Computed over the producer's entries in offset order with prefix scans, never a range join:
for each entry, the nearest acknowledged anchors before and after it in the log.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from checkers.partition import OK, TYPE_NAMES, Partition, group_starts, proc_strings, tp_cols, value_strings


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
    (in offset order) that were sent before the first or after the second."""
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
    if len(ent) == 0:
        return {}, 0
    within = np.arange(len(ent)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    snd = by_v[lo[ent] + within]
    e_off, e_vc = off[ent], vc[ent]
    w, w_op, w_type = s.proc[snd], s.op[snd], s.type[snd]
    anchor = (w_type == OK) & ~s.offset.null[snd] & (s.offset.values[snd] == e_off)
    order = np.lexsort((e_vc, e_off, w))
    e_off, e_vc, w, w_op, w_type, anchor, snd = (a[order] for a in (e_off, e_vc, w, w_op, w_type, anchor, snd))
    n = len(order)
    starts = group_starts(w)
    gstart = np.repeat(starts, np.diff(np.r_[starts, n]))
    gend = np.repeat(np.r_[starts[1:], n] - 1, np.diff(np.r_[starts, n]))
    idx = np.arange(n)
    last = np.maximum.accumulate(np.where(anchor, idx, -1))
    before = np.r_[-1, last[:-1]]
    before = np.where(before >= gstart, before, -1)
    nxt = np.minimum.accumulate(np.where(anchor, idx, n)[::-1])[::-1]
    after = np.r_[nxt[1:], n]
    after = np.where(after <= gend, after, -1)
    cand = np.flatnonzero(~anchor & (before >= 0) & (after >= 0))
    cand = cand[(w_op[cand] < w_op[before[cand]]) | (w_op[cand] > w_op[after[cand]])]
    if len(cand) == 0:
        return {}, 0
    # ...and the two anchors must be consecutive acknowledged sends of the producer (op order)
    proc_ok, op_ok = s.proc[ok], s.op[ok]
    key_ok = list(zip(proc_ok.tolist(), op_ok.tolist()))
    next_op = {key_ok[i]: int(op_ok[i + 1]) for i in range(len(ok) - 1) if same[i + 1]}
    keep = [i for i in cand if next_op.get((int(w[i]), int(w_op[before[i]]))) == int(w_op[after[i]])]
    keep = np.array(keep, dtype=np.int64)
    b, a = before[keep], after[keep]
    cols = {**tp_cols(p, len(keep)), "process": proc_strings(p, w[keep]), "prev_op": w_op[b], "prev_offset": e_off[b],
            "op": w_op[a], "offset": e_off[a], "skipped_offset": e_off[keep], "skipped_value": value_strings(p, e_vc[keep]),
            "skipped_op": w_op[keep], "skipped_type": [TYPE_NAMES[int(t)] for t in w_type[keep]]}
    return cols, len(keep)
