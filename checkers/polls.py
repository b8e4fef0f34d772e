"""Per-consumer read order: nonmonotonic polls and poll skips (docs/anomalies.md).

Jepsen's ``poll-skip+nonmonotonic-cases``: a consumer's successive polls of one partition
continue where the previous one left off. Going back to (or before) the last offset it
returned is *nonmonotonic*; jumping over offsets that some other observation shows exist is a
*skip* (offsets are compared by their rank among all observed offsets of the partition, so gaps
no one ever saw - compaction, control records - do not count). The final drain is a reader too.

A skip is counted against the offsets anyone observed (the distinct observed log), so the
count is exactly the observed offsets strictly between the two polls.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from checkers.partition import DRAIN, Partition, group_starts, proc_strings, tp_cols


def poll_order(p: Partition) -> dict[str, tuple[dict[str, Any], int]]:
    po = p.polls
    order = np.lexsort((po.op, po.proc))       # each reader's polls of this partition in op order
    proc = po.proc[order]
    same = np.zeros(len(order), dtype=bool)
    same[1:] = proc[1:] == proc[:-1]
    cur = order[1:][same[1:]]
    prev = order[:-1][same[1:]]
    prev_max = po.max_offset[prev]
    mono = po.min_offset[cur] <= prev_max
    nonmono = _cols(p, prev[mono], cur[mono])
    nonmono["delta"] = po.min_offset[cur[mono]] - prev_max[mono]
    # a skip: a gap over offsets someone observed (the distinct observed log, any value)
    gap = po.min_offset[cur] > prev_max + 1
    logged = p.log()[0]                       # sorted by offset: its distinct offsets in one pass
    offsets = logged[group_starts(logged)]    # (np.unique hashed them again: 0.08 of 0.6 s a partition)
    lo = np.searchsorted(offsets, prev_max[gap], "right")
    hi = np.searchsorted(offsets, po.min_offset[cur[gap]], "left")
    skipped = hi - lo
    has = skipped > 0
    gp, gc = prev[gap][has], cur[gap][has]
    skips = _cols(p, gp, gc)
    skips["skipped"] = skipped[has]
    skips["first_skipped_offset"] = offsets[lo[has]] if len(offsets) else np.zeros(0, dtype=np.int64)
    return {"nonmonotonic_poll": (nonmono, int(mono.sum())), "poll_skip": (skips, int(has.sum()))}


def _cols(p: Partition, prev: np.ndarray, cur: np.ndarray) -> dict[str, Any]:
    po = p.polls
    return {**tp_cols(p, len(cur)), "process": proc_strings(p, po.proc[cur]),
            "f": ["drain" if f == DRAIN else "poll" for f in po.f[cur]], "prev_op": po.op[prev],
            "prev_max_offset": po.max_offset[prev], "op": po.op[cur], "min_offset": po.min_offset[cur],
            "t_first": po.t_first[cur]}
