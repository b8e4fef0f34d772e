"""The large-evidence path (the partition tasks' Parquet files, read and written by Spark) gives
the same verdict and tables as the small path that returns evidence rows to the driver."""
from __future__ import annotations

import shutil

import pandas as pd

from checkers import job
from tests.checkers import cases
from tests.checkers.builder import HistoryBuilder

SUBSET = ("lost-read-past", "send-skip", "inconsistent-offset", "duplicate-never-sent", "failed-visible-elsewhere")


def test_distributed_evidence_path_matches(spark, tmp_path, monkeypatch):
    b = HistoryBuilder()
    for c in cases.CASES:
        if c.name in SUBSET:
            c.build(b, c.name)
    small_dir = b.write(tmp_path / "small")
    large_dir = tmp_path / "large"
    shutil.copytree(small_dir, large_dir)
    small = job.check_run(small_dir, spark=spark)
    monkeypatch.setattr(job, "SMALL_EVIDENCE_ROWS", 0)
    large = job.check_run(large_dir, spark=spark)
    strip = lambda v: {k: x for k, x in v.items() if k != "checker"}
    assert strip(large) == strip(small)
    assert (large_dir / "anomalies" / "lost_write.parquet").is_dir()       # a Spark dataset
    for name in job.ANOMALIES:
        a = pd.read_csv(small_dir / "anomalies" / f"{name}.csv", dtype=str, keep_default_na=False)
        c = pd.read_csv(large_dir / "anomalies" / f"{name}.csv", dtype=str, keep_default_na=False)
        assert list(a.columns) == list(c.columns), name
        assert sorted(map(tuple, a.values.tolist())) == sorted(map(tuple, c.values.tolist())), name
    assert small["counts"]["duplicate"] == 1 and small["counts"]["failed_write_visible"] == 1   # cross-partition
    assert len(pd.read_parquet(large_dir / "anomalies" / "lost_write.parquet")) == small["counts"]["lost_write"]
