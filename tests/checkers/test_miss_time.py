"""When a lost write was first missed: the per-partition sweep against brute force.

``miss_t`` bounds the attribution window, so a bug in the sweep (``lost.first_polls_past``)
would silently move it. The sweep is checked against a brute-force search on random polls.
"""
from __future__ import annotations

import math
import random

import pandas as pd

from checkers import lost


def _brute(polls: pd.DataFrame, ack: float, off: int, after: bool) -> float:
    c = polls[(polls.max_offset > off) & ((polls.t_first >= ack) if after else True)]
    return float(c.t_first.min()) if len(c) else math.nan


def test_sweep_matches_brute_force():
    rnd = random.Random(7)
    for _ in range(300):
        n_p, n_q = rnd.randint(0, 30), rnd.randint(1, 10)
        polls = pd.DataFrame({"reader": [f"c{rnd.randint(0, 2)}" for _ in range(n_p)],
                              "t_first": [rnd.randint(0, 50) * 1.0 for _ in range(n_p)],
                              "max_offset": [rnd.randint(0, 40) for _ in range(n_p)]})
        keys = pd.DataFrame({"topic": ["t"] * n_q, "partition": [0] * n_q, "process": ["p"] * n_q, "op": list(range(n_q)),
                             "ack_t": [rnd.randint(0, 50) * 1.0 for _ in range(n_q)],
                             "offset": [rnd.randint(0, 40) for _ in range(n_q)]})
        got = lost.first_polls_past(keys, polls)
        for q in range(n_q):
            for col, after in (("after_t", True), ("any_t", False)):
                want = _brute(polls, keys.ack_t[q], keys.offset[q], after)
                g = got[col][q]
                assert (math.isnan(want) and math.isnan(g)) or want == g, (col, q, want, g)
