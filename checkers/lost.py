"""Lost writes and writes unseen at the end (docs/anomalies.md §lost_write, §unseen_at_end).

The headline question of the harness. Following Jepsen's ``lost-write-cases``: we cannot
expect every acknowledged value to be read (a consumer may lag, a write may land after the
last poll), so a write only counts as *lost* when reading provably went past it:

* some read of the same partition returned an offset greater than the write's acknowledged
  offset (the reader's fetch position crossed it), or
* the final drain read the whole partition (a ``drain-end`` record exists for it).

And a write some consumer read earlier is lost too when the final drain read its whole
partition and did not return it: the log it was in was replaced (KIP-903's empty replica
elected, seed 000; an unclean election, seed 001) - the durable end state no longer holds it.

Otherwise an unread acknowledged write is *unseen at end* - an availability symptom, reported
apart. A value read at another offset is not lost (see duplicate / offset_mismatch): matching is
by value within the topic. Seed 003 §2.7: an ``acks=all`` acknowledgement means the HWM passed
the record, so every later complete read must return it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from checkers.partition import Partition, send_cols

#: foreign reads, by (topic, value): (partition, offset, read by the drain, reader) - values read
#: in a partition none of their sends went to (checkers/kernel.py gathers them across partitions)
Foreign = dict[tuple[str | None, str], list[tuple[int, int, bool, str]]]


def lost_and_unseen(p: Partition, foreign: Foreign) -> dict[str, tuple[dict[str, Any], int]]:
    """``{"lost_write": (columns, n), "unseen_at_end": (columns, n)}`` for one partition.

    A write counts as read when its value was read anywhere in its topic: in its own partition
    (a lookup by value code), or elsewhere - then the read is foreign there (values are unique
    per send, docs/history-format.md) and ``foreign`` holds it.
    """
    s = p.sends
    ok = np.flatnonzero(p.ok_mask())
    vc = s.vc[ok]
    off = s.offset.values[ok]
    read, drained_here = p.read_flags()
    has_v = vc >= 0
    same_read = has_v & read[np.maximum(vc, 0)] if len(read) else np.zeros(len(ok), dtype=bool)
    same_drained = has_v & drained_here[np.maximum(vc, 0)] if len(read) else np.zeros(len(ok), dtype=bool)
    mro = p.max_read_offset()
    read_past = off < mro if mro is not None else np.zeros(len(ok), dtype=bool)
    drained = p.drain_end is not None
    cand = ~same_read | (drained & ~same_drained)
    read_else = np.zeros(len(ok), dtype=bool)
    drained_else = np.zeros(len(ok), dtype=bool)
    if foreign:
        for i in np.flatnonzero(cand & has_v):
            for part, _, by_drain, _ in foreign.get((p.topic, p.values[int(vc[i])].as_py()), ()):
                if part != p.partition:
                    read_else[i] = True
                    drained_else[i] |= by_drain
    was_read = same_read | read_else
    in_drain = same_drained | drained_else
    lost_m = cand & ((~was_read & read_past) | (drained & ~in_drain))
    unseen_m = cand & ~was_read & ~read_past & ~drained
    li, ui = np.flatnonzero(lost_m), np.flatnonzero(unseen_m)
    because = np.where(~was_read[li] & read_past[li], "read_past_offset",
                       np.where(~was_read[li], "final_drain_read_whole_partition", "final_drain_missed_read_earlier"))
    lost = {**send_cols(p, ok[li]), "max_read_offset": [mro] * len(li), "drain_end": [p.drain_end] * len(li),
            "lost_because": because.tolist()}
    lost.update(_miss(p, ok[li], because))
    unseen = {**send_cols(p, ok[ui]), "max_read_offset": [mro] * len(ui)}
    return {"lost_write": (lost, len(li)), "unseen_at_end": (unseen, len(ui))}


def _miss(p: Partition, idx: np.ndarray, because: np.ndarray) -> dict[str, Any]:
    """When was the write first missed: the first poll after the ack whose reads passed its offset.

    Falls back to the drain's end, then to any read past it (even one before the ack); a write
    read before it vanished was first missed by the final drain. Per-poll extents (one row per
    poll op), never every message read; :func:`first_polls_past` is a sweep, not a join.
    """
    import pandas as pd

    n = len(idx)
    if n == 0:
        return {"miss_t": np.zeros(0), "miss_by": []}
    s, po = p.sends, p.polls
    keys = pd.DataFrame({"topic": [p.topic] * n, "partition": np.full(n, p.partition or 0, dtype=np.int32),
                         "process": s.proc[idx], "op": s.op[idx], "offset": s.offset.values[idx],
                         "ack_t": s.complete_t[idx]})
    if n * len(po.t_first) <= DIRECT_PAIRS:
        got = _first_polls_direct(p, keys)
    else:
        polls = pd.DataFrame({"t_first": po.t_first, "reader": [p.processes[int(c)] for c in po.proc],
                              "max_offset": po.max_offset})
        got = first_polls_past(keys, polls)
    det = p.drain_end_t
    miss_t: list[float | None] = []
    miss_by: list[str | None] = []
    for i in range(n):
        if because[i] == "final_drain_missed_read_earlier":
            miss_t.append(det)
            miss_by.append("drain")
            continue
        at, ar, yt, yr = got["after_t"].iat[i], got["after_reader"].iat[i], got["any_t"].iat[i], got["any_reader"].iat[i]
        if not np.isnan(at):
            miss_t.append(float(at)); miss_by.append(ar)
        elif det is not None:
            miss_t.append(det); miss_by.append("drain")
        elif not np.isnan(yt):
            miss_t.append(float(yt)); miss_by.append(yr)
        else:
            miss_t.append(None); miss_by.append(None)
    return {"miss_t": np.array([np.nan if v is None else v for v in miss_t], dtype=np.float64), "miss_by": miss_by}


#: lost writes x polls up to which each lost write scans the polls directly (numpy, one pass
#: per write); above it the sweep (:func:`first_polls_past`) - both exact, same tie-break
DIRECT_PAIRS = 20_000_000


def _first_polls_direct(p: Partition, keys):  # -> pandas.DataFrame like first_polls_past
    import pandas as pd

    po = p.polls
    out: dict[str, list] = {"after_t": [], "after_reader": [], "any_t": [], "any_reader": []}
    for ack, off in zip(keys["ack_t"].to_numpy(float), keys["offset"].to_numpy()):
        past = po.max_offset > off
        for name, m in (("any", past), ("after", past & (po.t_first >= ack) if not np.isnan(ack) else None)):
            if m is None or not m.any():
                out[f"{name}_t"].append(np.nan)
                out[f"{name}_reader"].append(None)
                continue
            idx = np.flatnonzero(m)
            tmin = po.t_first[idx].min()
            reader = min(p.processes[int(c)] for c in po.proc[idx[po.t_first[idx] == tmin]])
            out[f"{name}_t"].append(float(tmin))
            out[f"{name}_reader"].append(reader)
    return pd.DataFrame(out)


def first_polls_past(keys, polls):  # (pandas.DataFrame, pandas.DataFrame) -> pandas.DataFrame
    """For each lost write, the first read after its ack that passed its offset - a sweep.

    Runs once per topic-partition. Walking the polls backwards in time keeps a
    stack of the polls not dominated by a later-added (earlier) poll with a max_offset at least
    as high; the answer for (ack_t, offset) is then a binary search. O((polls + writes) log
    polls), where the join of every lost write with every poll was quadratic (2,251 lost writes
    x 10,787 polls of one KIP-903 run: 20 s). ``any_*``: the earliest poll at any time past it.
    """
    import bisect

    import numpy as np
    import pandas as pd

    nq = len(keys)
    after_t, any_t = np.full(nq, np.nan), np.full(nq, np.nan)
    after_r: list = [None] * nq
    any_r: list = [None] * nq
    if nq and len(polls):
        p = polls.sort_values(["t_first", "reader"], kind="mergesort").reset_index(drop=True)
        pt, pm, pr = p["t_first"].to_numpy(float), p["max_offset"].to_numpy(), p["reader"].to_numpy()
        # any time: polls by max_offset descending, with the running argmin of t
        by_m = np.argsort(-pm, kind="mergesort")
        run_best = []
        best = -1
        for i in by_m:
            if best < 0 or pt[i] < pt[best] or (pt[i] == pt[best] and i < best):
                best = int(i)
            run_best.append(best)
        neg_m_sorted = -pm[by_m]                       # ascending
        ack, off = keys["ack_t"].to_numpy(float), keys["offset"].to_numpy()
        neg: list[int] = []                           # stack of -max_offset, increasing bottom..top
        idx: list[int] = []
        j = len(p) - 1
        for q in np.argsort(-np.nan_to_num(ack, nan=-np.inf), kind="mergesort"):
            a, x = ack[q], off[q]
            n = int(np.searchsorted(neg_m_sorted, -x, side="left"))   # polls with max_offset > x
            if n:
                any_t[q], any_r[q] = pt[run_best[n - 1]], pr[run_best[n - 1]]
            if np.isnan(a):
                continue
            while j >= 0 and pt[j] >= a:
                while neg and -neg[-1] <= pm[j]:
                    neg.pop()
                    idx.pop()
                neg.append(-int(pm[j]))
                idx.append(j)
                j -= 1
            k = bisect.bisect_left(neg, -int(x)) - 1
            if k >= 0:
                after_t[q], after_r[q] = pt[idx[k]], pr[idx[k]]
    # explicit dtypes: an empty or all-null object column would not convert to Arrow strings
    return pd.DataFrame({"topic": pd.Series(keys["topic"].to_numpy(), dtype=object),
                         "partition": pd.Series(keys["partition"].to_numpy(), dtype="int32"),
                         "process": pd.Series(keys["process"].to_numpy(), dtype=object),
                         "op": pd.Series(keys["op"].to_numpy(), dtype="int64"),
                         "after_t": after_t, "after_reader": pd.Series(after_r, dtype=object),
                         "any_t": any_t, "any_reader": pd.Series(any_r, dtype=object)})


