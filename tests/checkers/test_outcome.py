"""The one decision: does a run's evidence meet its expectation (checkers/outcome.py)?

Pure functions over the evidence the checker gathers; the end-to-end form (real histories
through check_run, then report.html, the suite index and JUnit) is
tests/harness/test_loss_allowed.py.
"""
from __future__ import annotations

import pytest

from checkers.outcome import (AS_EXPECTED, INCONCLUSIVE, UNEXPECTED, Evidence, Expectation, decide,
                              exit_code)

UNCLEAN = "unclean.leader.election.enable=true"


def _ev(lost: int, **kw) -> Evidence:  # noqa: ANN003
    return Evidence(lost=lost, acked=1000, valid=lost == 0, invalid_because=["lost_write"] if lost else [],
                    counts={"lost_write": lost}, **kw)


def _story(partition: int, mechanism: str, allowed_by: str | None) -> dict:
    return {"topic": "t", "partition": partition, "mechanism": mechanism, "label": mechanism.replace("_", " "),
            "allowed_by": allowed_by}


def test_no_loss_and_loss() -> None:
    assert decide(Expectation("no-loss"), _ev(0)).outcome == AS_EXPECTED
    o = decide(Expectation("no-loss"), _ev(3))
    assert o.outcome == UNEXPECTED and o.reason.startswith("UNEXPECTED LOSS: expected no-loss; 3 lost")
    assert decide(Expectation("loss"), _ev(3)).outcome == AS_EXPECTED
    o = decide(Expectation("loss"), _ev(0))
    assert o.outcome == UNEXPECTED and "EXPECTED LOSS NOT REPRODUCED" in o.reason
    # no-loss also promises a valid history: another broken promise is unexpected, in its own check
    o = decide(Expectation("no-loss"), Evidence(lost=0, acked=10, valid=False, invalid_because=["duplicate"],
                                                counts={"lost_write": 0, "duplicate": 2}))
    assert o.outcome == UNEXPECTED and o.reason == "UNEXPECTED ANOMALIES: duplicate=2"
    assert [(c.kind, c.ok) for c in o.checks] == [("loss", True), ("validity", False)]


def test_finding_nothing_with_thin_evidence_is_inconclusive_never_a_pass() -> None:
    thin = ["no acknowledged writes: nothing was tested"]
    for exp in ("no-loss", "loss", "loss-allowed"):
        o = decide(Expectation(exp), _ev(0, thin=thin))
        assert o.outcome == INCONCLUSIVE and o.inconclusive_because == thin and not o.as_expected, exp
    # found what it looked for, or broke a promise: conclusive whatever the thin evidence
    assert decide(Expectation("loss"), _ev(5, thin=thin)).outcome == AS_EXPECTED
    assert decide(Expectation("no-loss"), _ev(5, thin=thin)).outcome == UNEXPECTED
    # a run that cannot be judged at all is inconclusive whatever it found
    assert decide(Expectation("loss"), _ev(5, unjudgeable=["x failed"])).outcome == INCONCLUSIVE


def test_loss_allowed_reads_the_stories() -> None:
    ok = _story(0, "unclean_election", UNCLEAN)
    o = decide(Expectation("loss-allowed"), _ev(40, stories=[ok]))
    assert o.outcome == AS_EXPECTED and o.allowed_by == [UNCLEAN]
    assert o.reason.startswith(f"allowed by configuration ({UNCLEAN})")
    # one partition's loss no setting explains: unexpected, naming it
    o = decide(Expectation("loss-allowed"), _ev(50, stories=[ok, _story(1, "last_replica_standing", None)]))
    assert o.outcome == UNEXPECTED and "LOSS NOT ALLOWED BY CONFIGURATION" in o.reason and "t@1" in o.reason
    # no loss at all: the allowed loss was not reproduced
    assert decide(Expectation("loss-allowed"), _ev(0)).outcome == UNEXPECTED
    # a loss without a story cannot be shown to be allowed
    assert decide(Expectation("loss-allowed"), _ev(7)).outcome == UNEXPECTED
    # the expectation names the setting: a story allowed by another one is not enough
    other = _story(0, "unclean_election", "some.other=true")
    o = decide(Expectation("loss-allowed", allowed_by=UNCLEAN), _ev(9, stories=[other]))
    assert o.outcome == UNEXPECTED and f"not by {UNCLEAN}" in o.reason
    assert decide(Expectation("loss-allowed", allowed_by=UNCLEAN), _ev(9, stories=[ok])).outcome == AS_EXPECTED


def test_required_errors() -> None:
    need = ("NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND")
    o = decide(Expectation("no-loss", require_errors=need), _ev(0))
    assert o.outcome == UNEXPECTED and o.reason.startswith("NO SEND ENDED WITH NOT_ENOUGH_REPLICAS OR")
    o = decide(Expectation("no-loss", require_errors=need),
               _ev(0, send_errors={"NOT_ENOUGH_REPLICAS": 12, "_MSG_TIMED_OUT": 1}))
    assert o.outcome == AS_EXPECTED and "NOT_ENOUGH_REPLICAS=12" in o.reason
    assert [c.kind for c in o.checks] == ["loss", "validity", "errors"]


def test_the_verdict_fields_and_exit_codes() -> None:
    exp = Expectation("loss-allowed", allowed_by=UNCLEAN)
    v = decide(exp, _ev(50, stories=[_story(1, "last_replica_standing", None)])).to_verdict(exp)
    assert (v["outcome"], v["as_expected"], v["expected"], exit_code(v)) == (UNEXPECTED, False, "loss-allowed", 1)
    assert v["expectation"] == {"expect": "loss-allowed", "allowed_by": UNCLEAN, "require_errors": [],
                                "require_anomalies": [], "forbid_anomalies": []}
    assert [e["ok"] for e in v["expectations"]] == [False]
    assert exit_code(decide(Expectation(), _ev(0)).to_verdict(Expectation())) == 0
    assert exit_code(decide(Expectation(), _ev(0, thin=["x"])).to_verdict(Expectation())) == 4


def _counted(**counts: int) -> Evidence:
    return Evidence(lost=0, acked=1000, valid=True, counts={"lost_write": 0, **counts})


def test_required_and_forbidden_anomalies() -> None:
    """A bug that loses no write shows as an informational anomaly: the vulnerable side of a pair
    requires it, the fixed side forbids it (a campaign's require_anomalies / forbid_anomalies)."""
    need = Expectation("no-loss", require_anomalies=("controller_split_brain",))
    o = decide(need, _counted(controller_split_brain=0))
    assert o.outcome == UNEXPECTED and o.reason.startswith("REQUIRED ANOMALY NOT SHOWN: controller_split_brain=0")
    o = decide(need, _counted(controller_split_brain=2))
    assert o.outcome == AS_EXPECTED and "controller_split_brain=2" in o.reason
    assert [c.kind for c in o.checks] == ["loss", "validity", "anomalies"]
    forbid = Expectation("no-loss", forbid_anomalies=("isr_change_stuck",))
    o = decide(forbid, _counted(isr_change_stuck=1))
    assert o.outcome == UNEXPECTED and "FORBIDDEN ANOMALY SHOWN: isr_change_stuck=1" in o.reason
    assert decide(forbid, _counted()).outcome == AS_EXPECTED
    # a loss where none is expected is still unexpected, whatever the anomalies
    assert decide(need, Evidence(lost=3, acked=9, valid=False, invalid_because=["lost_write"],
                                 counts={"lost_write": 3, "controller_split_brain": 1})).outcome == UNEXPECTED


@pytest.mark.parametrize("run, field", [({"expect": "lossy"}, "'expect'"), ({"allowed_by": 3}, "'allowed_by'"),
                                        ({"require_errors": "NOT_ENOUGH_REPLICAS"}, "'require_errors'"),
                                        ({"require_anomalies": "isr_change_stuck"}, "'require_anomalies'"),
                                        ({"require_anomalies": ["a"], "forbid_anomalies": ["a"]},
                                         "'forbid_anomalies'")])
def test_a_bad_expectation_in_run_json_is_one_line(run: dict, field: str) -> None:
    with pytest.raises(ValueError) as e:
        Expectation.from_run(run)
    assert field in str(e.value) and "want" in str(e.value)


def test_allowed_by_is_read_only_with_loss_allowed() -> None:
    assert Expectation.from_run({"expect": "no-loss", "allowed_by": UNCLEAN}).allowed_by is None
    assert Expectation.from_run({"expect": "loss-allowed", "allowed_by": UNCLEAN}).allowed_by == UNCLEAN
    assert Expectation.from_run({"expect": "loss-allowed"}, expect="loss").expect == "loss"
