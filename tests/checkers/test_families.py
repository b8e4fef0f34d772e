"""The anomaly families run check-safe and merge as Jepsen's merge-valid (false > unknown > true).

Real checker runs (the session's Spark) on hand-built histories in the real file format, one of
them with a real loss; the family list is the real one with one family swapped for (or joined by)
a planted one that raises (tests/checkers/planted.py), handed to check_run as its ``families``.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from checkers import evidence
from checkers.families import FAMILIES, Family, one_line
from checkers.job import check_run
from checkers.outcome import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_UNEXPECTED, exit_code
from tests.checkers import planted
from tests.checkers.builder import HistoryBuilder

TOPIC = "orders"


def _swap(name: str) -> tuple[Family, ...]:
    """The real list with family ``name`` replaced by one that raises (same name and anomalies)."""
    assert name in {f.name for f in FAMILIES}
    return tuple(dataclasses.replace(f, check=planted.raises) if f.name == name else f for f in FAMILIES)


def _loss_run(root: Path, expect: str) -> Path:
    """One acknowledged write read, then replaced by another at its offset: lost_write,
    inconsistent_offset, offset_mismatch, realtime_offset_regression."""
    b = HistoryBuilder()
    b.send("producer-0", TOPIC, 0, "producer-0-0", 0, 1.0)
    b.send("producer-0", TOPIC, 0, "producer-0-1", 1, 2.0)
    b.poll("consumer-0", TOPIC, 0, [(0, "producer-0-0"), (1, "producer-0-1")], 3.0)
    b.send("producer-1", TOPIC, 0, "producer-1-0", 1, 5.0)
    b.drain(TOPIC, 0, [(0, "producer-0-0"), (1, "producer-1-0")], 2, 20.0)
    return b.write(root / "loss", expect=expect)


def _clean_run(root: Path) -> Path:
    b = HistoryBuilder()
    for i in range(3):
        b.send("producer-0", TOPIC, 0, f"producer-0-{i}", i, 1.0 + i)
    b.drain(TOPIC, 0, [(i, f"producer-0-{i}") for i in range(3)], 3, 20.0)
    return b.write(root / "clean", expect="no-loss")


def test_every_anomaly_has_exactly_one_family():
    names = [f.name for f in FAMILIES]
    assert len(names) == len(set(names))
    owners = [a for f in FAMILIES for a in f.anomalies]
    assert sorted(owners) == sorted(evidence.SCHEMAS)


def test_one_line_keeps_the_first_line_of_the_message():
    assert one_line(RuntimeError("boom\n  at line 2")) == "RuntimeError: boom"
    assert one_line(KeyError()) == "KeyError"
    assert len(one_line(ValueError("x" * 1000))) == 300


@pytest.mark.parametrize("expect, outcome, code", [("no-loss", "unexpected", EXIT_UNEXPECTED),
                                                    ("loss", "as_expected", EXIT_OK)])
def test_a_failed_family_does_not_hide_a_loss_another_family_found(spark, tmp_path, expect, outcome, code):
    """merge-valid: a definite loss makes the verdict false (invalid), not unknown."""
    v = check_run(_loss_run(tmp_path, expect), spark=spark, families=_swap("poll_order"))
    c = v["counts"]
    assert (c["lost_write"], c["inconsistent_offset"], c["offset_mismatch"], c["realtime_offset_regression"]) == (1, 1, 2, 1)
    assert v["validity"] == "invalid" and v["valid"] is False and "lost_write" in v["invalid_because"]
    assert v["outcome"] == outcome and exit_code(v) == code and v["inconclusive_because"] == []
    assert v["family_failures"] == [{"family": "poll_order", "anomalies": ["nonmonotonic_poll", "poll_skip"],
                                     "error": f"RuntimeError: planted failure in {TOPIC}@0",
                                     "partitions": [f"{TOPIC}@0"]}]
    (s,) = v["stories"]                     # the lost write is still explained
    assert s["lost"]["count"] == 1


def test_a_failed_family_on_a_clean_run_is_inconclusive_naming_it(spark, tmp_path):
    """Nothing found, but one family never answered: unknown, never a pass and never a crash."""
    fams = (*FAMILIES, Family("planted", (), planted.raises))
    v = check_run(_clean_run(tmp_path), spark=spark, families=fams)
    assert all(n == 0 for n in v["counts"].values()) and set(v["counts"]) == set(evidence.SCHEMAS)
    assert v["acked_writes"] == 3
    assert v["validity"] == "unknown" and v["valid"] is False and v["invalid_because"] == []
    assert v["outcome"] == "inconclusive" and v["as_expected"] is False and exit_code(v) == EXIT_INCONCLUSIVE
    assert v["inconclusive_because"] == [f"anomaly family planted () failed on 1 partition ({TOPIC}@0): "
                                         f"RuntimeError: planted failure in {TOPIC}@0"]


def test_the_lost_writes_family_failing_leaves_a_loss_control_inconclusive(spark, tmp_path):
    """expect: loss, and the family that counts lost writes raised: whether writes were lost is
    unknown (not "not reproduced"); the divergence it left behind still makes the history invalid."""
    v = check_run(_loss_run(tmp_path, "loss"), spark=spark, families=_swap("lost_writes"))
    assert v["counts"]["lost_write"] == 0 and v["counts"]["inconsistent_offset"] == 1
    assert v["validity"] == "invalid"
    assert v["outcome"] == "inconclusive" and exit_code(v) == EXIT_INCONCLUSIVE
    (why,) = v["inconclusive_because"]
    assert why.startswith("anomaly family lost_writes (lost_write, unseen_at_end) failed on 1 partition")
    assert "\n" not in why and "second line" not in why
