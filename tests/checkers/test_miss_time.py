"""When a lost write was first missed: the per-partition sweep and the join agree.

The checker picks the join for few lost writes and the sweep (``lost._first_polls_past``) for
many; a bug in either would silently move ``miss_t`` and with it the attribution window. The
sweep is checked against a brute-force search on random polls, then both paths are run through
the real Spark job on the hand-built table and must give the identical lost-write rows.
"""
from __future__ import annotations

import math
import random
import shutil

import pandas as pd

from checkers import job, lost
from tests.checkers.cases import build_table


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
        got = lost._first_polls_past(keys, polls)
        for q in range(n_q):
            for col, after in (("after_t", True), ("any_t", False)):
                want = _brute(polls, keys.ack_t[q], keys.offset[q], after)
                g = got[col][q]
                assert (math.isnan(want) and math.isnan(g)) or want == g, (col, q, want, g)


def test_sweep_and_join_paths_give_the_same_lost_rows(spark, tmp_path, monkeypatch):
    rd = build_table().write(tmp_path / "join", expect="no-loss", switches={"min.insync.replicas": 2})
    swept = tmp_path / "sweep"
    shutil.copytree(rd, swept)
    by_join = job.check_run(rd, spark=spark)
    monkeypatch.setattr(lost, "SWEEP_ABOVE_PAIRS", -1)
    by_sweep = job.check_run(swept, spark=spark)
    assert by_join["counts"]["lost_write"] > 0
    assert by_sweep["attribution"] == by_join["attribution"]
    a = pd.read_csv(rd / "anomalies" / "lost_write.csv")
    b = pd.read_csv(swept / "anomalies" / "lost_write.csv")
    pd.testing.assert_frame_equal(a, b)
    assert a["miss_t"].notna().any()
