"""Log divergence: inconsistent offsets, duplicates, offset mismatches (docs/anomalies.md).

Jepsen's ``inconsistent-offsets`` and ``duplicate`` cases, plus the send-side view
(``offset_mismatch``). docs/seeds.md#seed-003-2 (Log Matching): replicas that agree on an offset and
leader epoch hold the same record, so any two observations of one partition+offset with
different values mean two replicas' logs diverged and both were exposed.

Counted on the distinct observed log of one partition (offset, value code) - an offset with two
values is inconsistent, a value with two offsets a duplicate; observers are looked up only for
the offenders. A value in two *partitions* is only possible through a foreign read (a value read
in a partition none of its sends went to, values being unique per send): the partition that
sent the value reports it, with the foreign reads the kernel gathered from the others.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from checkers.lost import Foreign
from checkers.partition import DRAIN, Partition


def divergence(p: Partition, foreign: Foreign) -> dict[str, tuple[dict[str, Any], int]]:
    off, vc = p.log()
    nn = vc >= 0
    off_v, vc_v = off[nn], vc[nn]                 # sorted by (offset, value)
    return {"inconsistent_offset": _inconsistent(p, off_v, vc_v),
            "duplicate": _duplicates(p, off_v, vc_v, foreign),
            "offset_mismatch": _mismatch(p, off_v, vc_v)}


def _multi_offsets(off_v: np.ndarray) -> np.ndarray:
    """Offsets holding more than one distinct (non-null) value."""
    if len(off_v) < 2:
        return np.zeros(0, dtype=np.int64)
    same = off_v[1:] == off_v[:-1]
    return np.unique(off_v[1:][same])


def _observers(p: Partition, offsets: np.ndarray) -> tuple[list[tuple[int, str, str]], np.ndarray]:
    """(offset, by, value) for every read and ok send at ``offsets``; and the ok-send indices there."""
    r, s = p.reads, p.sends
    ok = np.flatnonzero(p.ok_mask())
    rs = np.flatnonzero(np.isin(r.offset, offsets) & (r.vc >= 0))
    ss = ok[np.isin(s.offset.values[ok], offsets) & (s.vc[ok] >= 0)]
    obs = [(int(r.offset[i]), ("drain:" if r.f[i] == DRAIN else "poll:") + p.processes[int(r.proc[i])],
            p.values[int(r.vc[i])].as_py()) for i in rs]
    obs += [(int(s.offset.values[i]), "send:" + p.processes[int(s.proc[i])], p.values[int(s.vc[i])].as_py()) for i in ss]
    return obs, ss


def _inconsistent(p: Partition, off_v: np.ndarray, vc_v: np.ndarray) -> tuple[dict[str, Any], int]:
    bad = _multi_offsets(off_v)
    obs, _ = _observers(p, bad)
    per: dict[int, tuple[set, set]] = {int(o): (set(), set()) for o in bad}
    for o, by, v in obs:
        per[o][0].add(v)
        per[o][1].add(f"{by}={v}")
    rows = sorted(per.items())
    return ({"topic": [p.topic] * len(rows), "partition": [p.partition] * len(rows), "offset": [o for o, _ in rows],
             "n_values": [len(vs) for _, (vs, _) in rows], "values": [" ".join(sorted(vs)) for _, (vs, _) in rows],
             "observed_by": [" ".join(sorted(bs)) for _, (_, bs) in rows]}, len(rows))


def _mismatch(p: Partition, off_v: np.ndarray, vc_v: np.ndarray) -> tuple[dict[str, Any], int]:
    """An acknowledged offset read with another value: an inconsistent offset seen from the send."""
    bad = _multi_offsets(off_v)
    if len(bad) == 0:
        return {}, 0
    s, r = p.sends, p.reads
    _, ss = _observers(p, bad)
    cols: dict[str, list] = {k: [] for k in ("process", "op", "topic", "partition", "offset", "value", "ack_t",
                                             "read_values", "readers")}
    for i in ss:
        o, v = s.offset.values[i], s.vc[i]
        at = np.flatnonzero((r.offset == o) & (r.vc >= 0) & (r.vc != v))
        if len(at) == 0:
            continue
        cols["process"].append(p.processes[int(s.proc[i])])
        cols["op"].append(int(s.op[i]))
        cols["topic"].append(p.topic)
        cols["partition"].append(p.partition)
        cols["offset"].append(int(o))
        cols["value"].append(p.values[int(v)].as_py())
        cols["ack_t"].append(float(s.complete_t[i]))
        cols["read_values"].append(" ".join(sorted({p.values[int(c)].as_py() for c in r.vc[at]})))
        cols["readers"].append(" ".join(sorted({p.processes[int(c)] for c in r.proc[at]})))
    return cols, len(cols["op"])


def _duplicates(p: Partition, off_v: np.ndarray, vc_v: np.ndarray, foreign: Foreign) -> tuple[dict[str, Any], int]:
    """Values this partition sent that sit at more than one (partition, offset)."""
    sent = p.sent_flags()
    if len(vc_v) == 0 or len(sent) == 0:
        return {}, 0
    counts = np.bincount(vc_v, minlength=p.n_values)
    cand = set(np.flatnonzero((counts > 1) & sent).tolist())
    if foreign:
        for (topic, value), _ in foreign.items():
            if topic == p.topic:
                c = _code_of(p, value)
                if c is not None and sent[c]:
                    cand.add(c)
    cols: dict[str, list] = {"topic": [], "value": [], "n_offsets": [], "at": []}
    if not cand:
        return cols, 0
    order = np.argsort(vc_v, kind="stable")
    sv, so = vc_v[order], off_v[order]
    for c in sorted(cand):
        lo, hi = np.searchsorted(sv, c, "left"), np.searchsorted(sv, c, "right")
        value = p.values[int(c)].as_py()
        at = {f"{p.partition}:{int(o)}" for o in so[lo:hi]}
        at |= {f"{part}:{o}" for part, o, _, _ in foreign.get((p.topic, value), ()) if part != p.partition}
        if len(at) > 1:
            cols["topic"].append(p.topic)
            cols["value"].append(value)
            cols["n_offsets"].append(len(at))
            cols["at"].append(" ".join(sorted(at)))
    return cols, len(cols["value"])


def _code_of(p: Partition, value: str) -> int | None:
    """The code of a value string in this partition's (sorted) dictionary, or None."""
    import pyarrow.compute as pc
    i = pc.index(p.values, value).as_py()
    return i if i is not None and i >= 0 else None


def foreign_reads(p: Partition) -> list[tuple[str | None, str, int, int, bool, str]]:
    """Reads of values no send of this partition carried: (topic, value, partition, offset, drain, reader)."""
    sent = p.sent_flags()
    r = p.reads
    if len(r.vc) == 0:
        return []
    has = r.vc >= 0
    idx = np.flatnonzero(has & ~sent[np.maximum(r.vc, 0)]) if len(sent) else np.flatnonzero(has)
    return [(p.topic, p.values[int(r.vc[i])].as_py(), p.partition, int(r.offset[i]), bool(r.f[i] == DRAIN),
             p.processes[int(r.proc[i])]) for i in idx]
