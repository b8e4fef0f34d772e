"""Verdicts that say what they mean: exit codes, incidents, inconclusive runs, partition keys.

Real checker runs (the session's Spark) on hand-built histories in the real file format; the
exit codes through the real command lines (``python -m checkers``, ``faultline check``).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.job import check_run
from checkers.outcome import EXIT_INCONCLUSIVE, exit_code
from tests.checkers.builder import HistoryBuilder

REPO = Path(__file__).resolve().parents[2]
TOPIC = "orders-eu-1"          # dashes and a trailing number: "orders-eu-1-0" was ambiguous


def _replaced_run(root: Path) -> Path:
    """One acknowledged write read, then replaced: the new leader wrote another record at its
    offset (an empty replica elected). One incident, four rows: lost_write, inconsistent_offset,
    offset_mismatch, realtime_offset_regression."""
    b = HistoryBuilder()
    b.send("producer-0", TOPIC, 0, "producer-0-0", 0, 1.0)
    b.send("producer-0", TOPIC, 0, "producer-0-1", 1, 2.0)
    b.poll("consumer-0", TOPIC, 0, [(0, "producer-0-0"), (1, "producer-0-1")], 3.0)
    b.send("producer-1", TOPIC, 0, "producer-1-0", 1, 5.0)
    b.drain(TOPIC, 0, [(0, "producer-0-0"), (1, "producer-1-0")], 2, 20.0)
    return b.write(root / "replaced", expect="loss")


def test_one_lost_write_and_its_divergence_are_one_incident(spark, tmp_path):
    v = check_run(_replaced_run(tmp_path), spark=spark)
    c = v["counts"]
    assert (c["lost_write"], c["inconsistent_offset"], c["offset_mismatch"], c["realtime_offset_regression"]) == (1, 1, 2, 1)
    assert v["incidents"] == 1 and v["incidents_by_anomaly"] == {"lost_write": 1}
    assert v["outcome"] == "as_expected" and v["as_expected"] is True and exit_code(v) == 0
    assert v["lost_writes_by_partition"] == {f"{TOPIC}@0": 1}
    assert json.loads((tmp_path / "replaced" / "verdict.json").read_text())["incidents"] == 1


def test_zero_acknowledged_writes_is_inconclusive_not_a_pass(tmp_path):
    """Through the real CLI (its own Spark): exit 4 and the reason, never 0."""
    b = HistoryBuilder()
    b.send("producer-0", TOPIC, 0, "producer-0-0", None, 1.0, type="fail", error="NOT_LEADER_OR_FOLLOWER",
           error_code=6)
    b.drain(TOPIC, 0, [], 0, 20.0)
    rd = b.write(tmp_path / "nothing", expect="no-loss")
    p = subprocess.run([sys.executable, "-m", "checkers", str(rd)], cwd=REPO, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == EXIT_INCONCLUSIVE, (p.returncode, p.stdout, p.stderr[-2000:])
    assert "inconclusive: no acknowledged writes" in p.stdout
    v = json.loads((rd / "verdict.json").read_text())
    assert v["outcome"] == "inconclusive" and v["as_expected"] is False and v["valid"] is True
    assert v["inconclusive_because"] == ["no acknowledged writes: nothing was tested"]


def test_partition_never_read_completely_is_inconclusive(spark, tmp_path):
    b = HistoryBuilder()
    for p in (0, 1):
        b.send("producer-0", TOPIC, p, f"producer-0-{p}", 0, 1.0 + p)
        b.poll("consumer-0", TOPIC, p, [(0, f"producer-0-{p}")], 5.0 + p)
    b.drain(TOPIC, 0, [(0, "producer-0-0")], 1, 20.0)          # partition 1: no drain end
    v = check_run(b.write(tmp_path / "half", expect="no-loss"), spark=spark)
    assert v["valid"] is True and v["counts"]["lost_write"] == 0
    assert v["outcome"] == "inconclusive" and exit_code(v) == EXIT_INCONCLUSIVE
    assert v["inconclusive_because"] == [f"no complete read (final drain end) of 1 partition with acknowledged "
                                         f"writes: {TOPIC}@1"]
    # the same run, fully drained, passes
    b.drain(TOPIC, 1, [(0, "producer-0-1")], 1, 21.0)
    v = check_run(b.write(tmp_path / "whole", expect="no-loss"), spark=spark)
    assert v["outcome"] == "as_expected" and v["as_expected"] is True and exit_code(v) == 0


@pytest.mark.parametrize("cmd", [["-m", "harness.cli", "check"], ["-m", "checkers"]], ids=["faultline", "checkers"])
def test_unreadable_history_exits_2_with_one_line(tmp_path, cmd):
    b = HistoryBuilder()
    b.send("producer-0", TOPIC, 0, "producer-0-0", 0, 1.0)
    rd = b.write(tmp_path / "run")
    (rd / "history" / "producer-0.jsonl").write_text("this is not a history\n")
    p = subprocess.run([sys.executable, *cmd, str(rd)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr[-2000:])
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "producer-0.jsonl: line 1 is not JSON" in lines[0], p.stderr
    assert "Traceback" not in p.stderr


def _with_run(rd: Path, **extra) -> Path:
    run = json.loads((rd / "run.json").read_text())
    (rd / "run.json").write_text(json.dumps({**run, **extra}))
    return rd


def _clean(b: HistoryBuilder) -> HistoryBuilder:
    b.send("producer-0", TOPIC, 0, "producer-0-0", 0, 1.0)
    b.send("producer-0", TOPIC, 0, "producer-0-1", 1, 2.0)
    b.drain(TOPIC, 0, [(0, "producer-0-0"), (1, "producer-0-1")], 2, 20.0)
    return b


FAILED_REBOOTS = {"applied": 0, "failed": 2, "min_applied": 1, "failed_list": [
    {"fault": "reboot", "targets": ["broker-1"], "reason": "truncate-unflushed: log dir /nonexistent does not exist"},
    {"fault": "reboot", "targets": ["broker-2"], "reason": "truncate-unflushed: log dir /nonexistent does not exist"}]}


def test_a_run_whose_faults_all_failed_is_inconclusive_unless_it_lost_writes(spark, tmp_path):
    """run.json ``faults`` (the harness's count) below ``min_applied``: a clean history proves
    nothing; a loss is still a loss (the checker's rule is thin, docs/verdict-format.md)."""
    b = HistoryBuilder()
    b.fault("f-1", "reboot", ["broker-1"], 3.0, 3.2)
    b.timeline.append({"v": 1, "t": 3.2, "kind": "nemesis", "phase": "failed", "id": "f-1", "fault": "reboot",
                       "targets": ["broker-1"], "detail": {"reason": "truncate-unflushed: log dir /nonexistent does not exist",
                                                           "undone": {"started": ["broker-1"]}}})
    rd = _with_run(_clean(b).write(tmp_path / "clean", expect="no-loss"), faults=FAILED_REBOOTS)
    v = check_run(rd, spark=spark)
    assert v["outcome"] == "inconclusive" and exit_code(v) == EXIT_INCONCLUSIVE and v["valid"] is True
    assert v["faults"] == FAILED_REBOOTS
    assert v["inconclusive_because"] == ["2 of 2 faults failed to start: reboot[broker-1], reboot[broker-2]: "
                                         "truncate-unflushed: log dir /nonexistent does not exist"]
    # a lost write found with no fault applied is still an unexpected loss under no-loss
    v = check_run(_with_run(_replaced_run(tmp_path / "lossy"), expect="no-loss", faults=FAILED_REBOOTS), spark=spark)
    assert v["outcome"] == "unexpected" and v["counts"]["lost_write"] == 1 and v["inconclusive_because"] == []
    # one fault applied: min_applied 1 is met
    v = check_run(_with_run(_clean(HistoryBuilder()).write(tmp_path / "one"), faults={**FAILED_REBOOTS, "applied": 1}),
                  spark=spark)
    assert v["outcome"] == "as_expected"


def test_a_node_that_halted_on_its_own_makes_a_clean_run_inconclusive(spark, tmp_path):
    """A controller's raft thread hit a fatal error and the process halted (its fatal_fault event,
    kraftsim's as Kafka's RaftIoThread); the harness found a broker not running after the heal
    (node_exit). The quorum survived and nothing was lost - but the run did not test the
    cluster it meant to."""
    b = _clean(HistoryBuilder())
    b.event("controller-2", 6.5, "fatal_fault", node=2, component="raft", fault="Unexpected error in raft IO thread",
            error="Leader 3 at epoch 9 is inconsistent with current leader 1", halted=True, epoch=9, state="Follower")
    b.timeline.append({"v": 1, "t": 19.0, "kind": "node_exit", "host": "broker-3", "node_id": 3, "role": "broker",
                       "text": "broker-3 is not running after the heal; no fault of the run left it down"})
    rd = b.write(tmp_path / "halted", expect="no-loss")
    v = check_run(rd, spark=spark)
    assert v["outcome"] == "inconclusive" and v["valid"] is True
    assert [(h["host"], h["how"]) for h in v["halts"]] == [("controller-2", "fatal_fault"), ("broker-3", "node_exit")]
    assert v["halts"][0]["event"] == {"source": "cluster-logs/controller-2/events.jsonl", "line": 1}
    (why,) = v["inconclusive_because"]
    assert why.startswith("2 nodes stopped during the run without a fault stopping them") and \
        "t=6.5s controller-2: halted: Unexpected error in raft IO thread: Leader 3 at epoch 9 is inconsistent" in why \
        and "broker-3 is not running after the heal" in why
    # the same halt in a run that lost a write: the loss stands, the halt is still named
    lossy = _replaced_run(tmp_path / "lossy-halt")
    (lossy / "cluster-logs" / "controller-2").mkdir(parents=True)
    (lossy / "cluster-logs" / "controller-2" / "events.jsonl").write_text(
        (rd / "cluster-logs" / "controller-2" / "events.jsonl").read_text())
    v = check_run(lossy, spark=spark)
    assert v["outcome"] == "as_expected" and v["halts"][0]["how"] == "fatal_fault"
