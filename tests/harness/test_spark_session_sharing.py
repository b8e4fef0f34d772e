"""Code that checks runs in-process stops only a Spark session it started.

Why: ``SparkSession.builder.getOrCreate`` hands every caller in one process the same session.
The shrink's judge, a suite and ``checkers.job.check_run`` used to stop "their" session when
done - in a process that already had one (a notebook, the test suite's shared session) that
ended it for everyone, and the next check failed on a stopped context
(``'NoneType' object has no attribute 'sc'``).
"""
from __future__ import annotations

from pathlib import Path

from checkers.job import check_run
from checkers.session import session_running
from harness.shrink.judge import Judge


def _alive(spark) -> bool:
    return spark.range(3).count() == 3


def test_the_judge_leaves_a_session_it_found_running(spark, tmp_path: Path) -> None:
    assert session_running()
    judge = Judge(tmp_path / "checker.log")
    checked = judge.check(tmp_path / "not-a-run")      # starts (finds) the session, then fails: no run
    assert checked.verdict is None
    judge.close()
    assert _alive(spark)


def test_check_run_without_a_session_leaves_the_running_one(spark, tmp_path: Path) -> None:
    run = tmp_path / "empty-run"
    (run / "history").mkdir(parents=True)
    try:
        check_run(run)
    except Exception:  # noqa: BLE001 - an empty run is not judged; what matters is the session after
        pass
    assert _alive(spark)
