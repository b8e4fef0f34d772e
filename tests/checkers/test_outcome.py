"""The one decision: does a run's evidence meet its expectation (checkers/outcome.py)?

Pure functions over the evidence the checker gathers; the end-to-end form (real histories
through check_run, then report.html, the suite index and JUnit) is
tests/harness/test_loss_allowed.py.
"""
from __future__ import annotations

import pytest

from checkers.outcome import (AS_EXPECTED, INCONCLUSIVE, UNEXPECTED, Evidence, Expectation, FaultCount, decide,
                              exit_code, fault_shortfall)

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


def test_a_required_invalidating_anomaly_expects_an_invalid_history() -> None:
    """The vulnerable side of a storage bug: a reader saw never-committed records (uncommitted_read,
    invalidating) and the same records at two offsets follow from it (duplicate, offset_mismatch).
    Requiring the anomaly makes the invalid history the expectation; without it shown the run is
    unexpected; the fixed side forbids it and keeps the validity check."""
    def ev(**counts: int) -> Evidence:
        bad = [a for a, n in counts.items() if n]
        return Evidence(lost=0, acked=1000, valid=not bad, invalid_because=bad, counts={"lost_write": 0, **counts})
    need = Expectation("no-loss", require_anomalies=("uncommitted_read",))
    o = decide(need, ev(uncommitted_read=151, inconsistent_offset=151, duplicate=151))
    assert o.outcome == AS_EXPECTED and [(c.kind, c.ok) for c in o.checks] == [
        ("loss", True), ("validity", True), ("anomalies", True)]
    assert o.checks[1].message == "invalid by uncommitted_read=151 (with inconsistent_offset=151, duplicate=151)"
    # not shown: the history's other anomalies are unexpected again, and the requirement fails
    o = decide(need, ev(duplicate=2))
    assert o.outcome == UNEXPECTED and "UNEXPECTED ANOMALIES: duplicate=2" in o.reason
    assert "REQUIRED ANOMALY NOT SHOWN: uncommitted_read=0" in o.reason
    # a lost write is still unexpected
    assert decide(need, Evidence(lost=1, acked=9, valid=False, invalid_because=["lost_write", "uncommitted_read"],
                                 counts={"lost_write": 1, "uncommitted_read": 1})).outcome == UNEXPECTED
    # the fixed side
    o = decide(Expectation("no-loss", forbid_anomalies=("uncommitted_read",)), ev(uncommitted_read=1,
                                                                                 inconsistent_offset=1))
    assert o.outcome == UNEXPECTED and "FORBIDDEN ANOMALY SHOWN: uncommitted_read=1" in o.reason
    assert "UNEXPECTED ANOMALIES: uncommitted_read=1, inconsistent_offset=1" in o.reason


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


def test_without_histories_nothing_is_judged():
    """Only the cluster's logs (checkers/events_only.py): whatever the expectation, the outcome is
    inconclusive because there were no histories, and no part of the expectation is listed as held."""
    from checkers.outcome import NO_HISTORIES, Evidence, Expectation, decide, exit_code
    for exp in (Expectation(), Expectation("loss"), Expectation("loss-allowed", require_errors=("NOT_ENOUGH_REPLICAS",))):
        out = decide(exp, Evidence(lost=0, acked=None, valid=False, histories=False))
        v = out.to_verdict(exp)
        assert v["outcome"] == "inconclusive" and v["inconclusive_because"] == [NO_HISTORIES]
        assert v["expectations"] == [] and v["as_expected"] is False and exit_code(v) == 4


FAILED = [{"fault": "reboot", "targets": ["broker-1"], "reason": "log dir /nonexistent does not exist"},
          {"fault": "reboot", "targets": ["broker-3"], "reason": "log dir /nonexistent does not exist"}]


def test_too_few_faults_applied_is_thin_a_loss_still_counts() -> None:
    """No fault applied (or fewer than nemesis.min_applied): finding nothing proves nothing, so the
    run is inconclusive naming the failed faults; but a loss it found is a loss (a thin reason,
    not an unjudgeable one): Kafka lost acknowledged writes under whatever the faults did."""
    run = {"faults": {"applied": 0, "failed": 2, "failed_list": FAILED, "min_applied": 1}}
    why = fault_shortfall(run)
    # grouped by reason: a mix repeats one failure many times
    assert why == ["2 of 2 faults failed to start: reboot[broker-1], reboot[broker-3]: log dir /nonexistent does not exist"]
    o = decide(Expectation("no-loss"), _ev(0, thin=why))
    assert o.outcome == INCONCLUSIVE and o.reason == "INCONCLUSIVE: " + why[0] and exit_code(o.to_verdict(Expectation())) == 4
    assert decide(Expectation("no-loss"), _ev(4, thin=why)).outcome == UNEXPECTED
    assert decide(Expectation("loss"), _ev(4, thin=why)).outcome == AS_EXPECTED
    # a control whose faults failed did not "not reproduce": it was not tested
    assert decide(Expectation("loss"), _ev(0, thin=why)).outcome == INCONCLUSIVE
    # enough applied, or no count (a run.json from before faults were counted): no reason
    assert fault_shortfall({"faults": {"applied": 1, "failed": 2, "failed_list": FAILED, "min_applied": 1}}) == []
    assert fault_shortfall({}) == []
    assert fault_shortfall({"faults": {"applied": 2, "failed": 1, "failed_list": FAILED[:1], "min_applied": 3}}) == [
        "1 of 3 faults failed to start, 2 applied (nemesis.min_applied 3): reboot[broker-1]: log dir /nonexistent "
        "does not exist"]
    assert fault_shortfall({"faults": {"applied": 0, "failed": 0, "min_applied": 1}}) == [
        "0 faults applied, fewer than nemesis.min_applied 1: nothing was tested under faults"]
    many = [dict(FAILED[0], reason=f"reason {i % 7}") for i in range(9)] + [FAILED[1]]
    (line,) = fault_shortfall({"faults": {"applied": 0, "failed": 10, "failed_list": many, "min_applied": 1}})
    assert line.startswith("10 of 10 faults failed to start: reboot[broker-1] (2x): reason 0; reboot[broker-1] (2x): "
                           "reason 1; reboot[broker-1]: reason 2;") and line.endswith("; and 3 more reasons")
    assert "\n" not in line


@pytest.mark.parametrize("faults, field", [("lots", "'faults'"), ({"applied": -1}, "'faults.applied'"),
                                           ({"min_applied": "x"}, "'faults.min_applied'"),
                                           ({"failed_list": "x"}, "'faults.failed_list'")])
def test_a_bad_fault_count_in_run_json_is_one_line(faults, field: str) -> None:
    with pytest.raises(ValueError) as e:
        FaultCount.from_run({"faults": faults})
    assert field in str(e.value) and "\n" not in str(e.value)
