"""Aggregates for the report: send throughput per second and lost writes per partition.

``aggregates/throughput.csv`` columns (common.md contract): second, ok, fail, info,
latency_p50_ms, latency_p99_ms - sends bucketed by the second they completed (an
indeterminate send with no completion by the second it was invoked); latencies of ok sends.

Each partition task returns a small partial (per second: counts, and a histogram of ok
latencies on logarithmic bins 0.1% wide, each bin remembering its smallest latency); the driver
merges the partials, so no task ships its sends. A percentile is the smallest latency of the
bin holding that rank: a latency that really occurred, within 0.1% of the exact percentile
(Spark's percentile_approx with accuracy 1000 is within 0.1% in rank).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from checkers.partition import FAIL, INFO, OK, Partition

#: latency histogram bin width (ratio between bin edges)
BIN_RATIO = 1.001
_LOG = math.log(BIN_RATIO)


def throughput_partial(p: Partition) -> dict[str, np.ndarray]:
    """Per-second counts and latency bins of this partition's sends (columns of equal length)."""
    s = p.sends
    when = np.where(np.isnan(s.complete_t), s.invoke_t, s.complete_t)
    has = ~np.isnan(when)
    sec = np.floor(when[has]).astype(np.int64)
    typ = s.type[has]
    secs, inv = np.unique(sec, return_inverse=True)
    counts = {name: np.bincount(inv, weights=(typ == code), minlength=len(secs)).astype(np.int64)
              for name, code in (("ok", OK), ("fail", FAIL), ("info", INFO))}
    lat = (s.complete_t[has] - s.invoke_t[has]) * 1000.0
    lm = (typ == OK) & ~np.isnan(lat)
    lsec, lat = sec[lm], lat[lm]
    b = np.where(lat > 0, np.floor(np.log(np.maximum(lat, 1e-300)) / _LOG), -(10 ** 9)).astype(np.int64)
    if len(lat):
        order = np.lexsort((lat, b, lsec))
        lsec, b, lat = lsec[order], b[order], lat[order]
        first = np.ones(len(lat), dtype=bool)
        first[1:] = (lsec[1:] != lsec[:-1]) | (b[1:] != b[:-1])
        st = np.flatnonzero(first)
        n = np.diff(np.r_[st, len(lat)])
        lsec, b, lmin = lsec[st], b[st], lat[st]
    else:
        n, lmin = np.zeros(0, dtype=np.int64), np.zeros(0)
    return {"second": secs, **counts, "l_second": lsec, "l_bin": b, "l_n": n, "l_min": lmin}


def merge_throughput(parts: list[dict[str, np.ndarray]]) -> list[dict[str, Any]]:
    """The throughput rows (one per second, ascending) from every partition's partial."""
    import pandas as pd
    if not parts:
        return []
    c = pd.DataFrame({k: np.concatenate([p[k] for p in parts]) for k in ("second", "ok", "fail", "info")})
    c = c.groupby("second", sort=True).sum()
    l = pd.DataFrame({k: np.concatenate([p[k] for p in parts]) for k in ("l_second", "l_bin", "l_n", "l_min")})
    l = l.groupby(["l_second", "l_bin"], sort=True).agg(l_n=("l_n", "sum"), l_min=("l_min", "min")).reset_index()
    pct: dict[int, tuple[float, float]] = {}
    for sec, g in l.groupby("l_second", sort=False):
        cum = g["l_n"].to_numpy().cumsum()
        mins = g["l_min"].to_numpy()
        total = cum[-1]
        pick = [mins[int(np.searchsorted(cum, max(1, math.ceil(q * total)), "left"))] for q in (0.5, 0.99)]
        pct[int(sec)] = (round(float(pick[0]), 3), round(float(pick[1]), 3))
    return [{"second": int(sec), "ok": int(r["ok"]), "fail": int(r["fail"]), "info": int(r["info"]),
             "latency_p50_ms": pct.get(int(sec), (None, None))[0], "latency_p99_ms": pct.get(int(sec), (None, None))[1]}
            for sec, r in c.iterrows()]


def lost_by_partition(stats: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per topic-partition with acks, reads or a drain end: acked, extents, lost, unseen."""
    keys = ("topic", "partition", "acked", "max_acked_offset", "max_read_offset", "drain_end", "lost", "unseen_at_end")
    return sorted(({k: s.get(k) for k in keys} for s in stats), key=lambda r: (str(r["topic"]), r["partition"]))
