"""Code that checks runs in-process stops only a Spark session it started - also a session
started in the background beside a run or a suite (checkers.session.SessionWarmup).

Why: ``SparkSession.builder.getOrCreate`` hands every caller in one process the same session.
The shrink's judge, a suite and ``checkers.job.check_run`` used to stop "their" session when
done - in a process that already had one (a notebook, the test suite's shared session) that
ended it for everyone, and the next check failed on a stopped context
(``'NoneType' object has no attribute 'sc'``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from checkers.job import check_run
from checkers.session import SessionWarmup, session_running
from harness.check import CheckPrep
from harness.shrink.judge import Judge
from tests.checkers.builder import HistoryBuilder

REPO = Path(__file__).resolve().parents[2]


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


def test_a_warmup_finding_a_session_shares_it_and_leaves_it(spark, tmp_path: Path) -> None:
    """A run's warm-up (and a suite's) in a process that already has a session uses that
    session and does not own it: closing the warm-up leaves it running."""
    warm = SessionWarmup(log=tmp_path / "spark.log").start()
    assert warm.take() is not None and not warm.owned
    warm.close()
    prep = CheckPrep(tmp_path / "run", spark=True).start()
    assert prep.session() is not None
    prep.close()
    assert _alive(spark)


_OWNER = """
import json, sys
from pathlib import Path
from checkers.session import SessionWarmup, session_running
from harness.check import CheckPrep, check_and_report
rd, log = Path(sys.argv[1]), Path(sys.argv[2])
out = {}
# a warm-up that cannot start (no such master) never fails the run: the check starts Spark itself
prep = CheckPrep(rd, spark=True, spark_master="no-such-master").start()
checked = check_and_report(rd, prep=prep)
prep.close()
out["failed"] = {"code": checked.code, "verdict": checked.verdict is not None, "notes": prep.take_notes(),
                 "running": session_running()}
# a warm-up in a process without a session owns it: a check given it leaves it, close() stops it
warm = SessionWarmup(log=log).start()
spark = warm.take()
out["owned"] = warm.owned
checked = check_and_report(rd, spark=spark)
out["checked"] = checked.verdict is not None
out["running_after_check"] = session_running()
warm.close()
out["running_after_close"] = session_running()
print("RESULT " + json.dumps(out), flush=True)
"""


def test_the_warmup_that_started_a_session_stops_it_and_one_that_failed_leaves_the_check_to_start_it(tmp_path: Path) -> None:
    """In a fresh process (no session): the owner rule from the other side, and a warm-up
    that cannot start Spark - the run goes on, its check starts Spark as before, and the note
    says so. The JVM's output goes to the log the warm-up was given, not to stderr."""
    b = HistoryBuilder()
    b.send("producer-0", "t", 0, "producer-0-0", 0, 1.0)
    b.drain("t", 0, [(0, "producer-0-0")], end=1, t=5.0)
    rd = b.write(tmp_path / "run")
    p = subprocess.run([sys.executable, "-c", _OWNER, str(rd), str(tmp_path / "spark.log")], cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=900)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    out = json.loads(line[7:])
    assert out["failed"]["code"] == 0 and out["failed"]["verdict"], out
    assert any("Spark could not start during the run" in n for n in out["failed"]["notes"]), out
    assert out["failed"]["running"] is False              # the check started its own session and stopped it
    assert out["owned"] and out["checked"] and out["running_after_check"] and not out["running_after_close"], out
    log = (rd / "checker.log").read_text(errors="replace")
    assert "SparkException" in log and "Master must" in log   # the failed JVM's own words (SparkSubmit's)
    assert "WARN" not in p.stderr                          # Spark's log went to the logs, not the terminal
