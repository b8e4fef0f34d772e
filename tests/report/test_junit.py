"""junit.xml parses with junitparser and fails exactly the unexpected
expectations — loss where none was expected, and a known-bad control that lost nothing."""
from __future__ import annotations

import json
from pathlib import Path

import junitparser as jp
import pytest

from harness.report import write_junit
from tests.report.runs import decide_verdict, make_clean_run, make_loss_run


def _cases(path: Path) -> list[tuple[str, str, jp.TestCase]]:
    """(name, outcome, case) for every test case; outcome is pass|failure|error|skipped."""
    xml = jp.JUnitXml.fromfile(str(path))
    out = []
    for suite in xml:
        assert suite.name == "faultline.kip903-wipe-race"
        for case in suite:
            kinds = {type(r).__name__.lower() for r in case.result}
            outcome = "failure" if "failure" in kinds else "error" if "error" in kinds else \
                "skipped" if "skipped" in kinds else "pass"
            out.append((case.name, outcome, case))
    return out


LOST = "lost acknowledged writes: expect {}"
VALID = "history valid: no other anomaly breaks a Kafka promise"


@pytest.mark.parametrize("make, expect, outcomes", [
    # unexpected loss, and the history is invalid for other reasons too
    (make_loss_run, "no-loss", [(LOST.format("no-loss"), "failure"), (VALID, "failure")]),
    # the known-bad control reproduced its loss: that is all a loss campaign asks
    (make_loss_run, "loss", [(LOST.format("loss"), "pass")]),
    (make_clean_run, "no-loss", [(LOST.format("no-loss"), "pass"), (VALID, "pass")]),
    # the known-bad control did NOT reproduce: unexpected too
    (make_clean_run, "loss", [(LOST.format("loss"), "failure")]),
])
def test_one_case_per_expectation_failing_only_when_unexpected(tmp_path: Path, make, expect: str,
                                                                outcomes: list) -> None:
    run = make(tmp_path, expect=expect)
    cases = _cases(write_junit(run))
    assert [(n, o) for n, o, _ in cases] == outcomes
    # some case fails exactly when the checker's verdict is not as expected
    as_expected = json.loads((run / "verdict.json").read_text())["as_expected"]
    assert any(o == "failure" for _, o, _ in cases) == (not as_expected)
    failures = {n: c.result[0] for n, o, c in cases if o == "failure"}
    for f in failures.values():
        assert f.type == "UnexpectedVerdict"
    if make is make_loss_run and expect == "no-loss":
        f = failures[LOST.format("no-loss")]
        assert f.message.startswith("UNEXPECTED LOSS: expected no-loss; 3 lost acknowledged writes of 10440")
        # the lost-write summary: per partition, each write with its attribution, and the re-run line
        assert "lost writes by partition: faultline@1=2, faultline@2=1" in f.text
        assert "faultline@2 offset 877 value producer-0-1193 acked t=21.731 by producer-0" in f.text
        assert "wipe[broker-2]" in f.text
        assert "re-run: faultline run campaigns/kip903-wipe-race.yaml --seed 7" in f.text
        v = failures[VALID]
        assert v.message == "UNEXPECTED ANOMALIES: inconsistent_offset=2, realtime_offset_regression=1"
        assert "realtime_offset_regression: 1" in v.text and '"prior_offset":1460' in v.text
    if make is make_clean_run and expect == "loss":
        assert failures[LOST.format("loss")].message.startswith("EXPECTED LOSS NOT REPRODUCED")
    xml = jp.JUnitXml.fromfile(str(run / "junit.xml"))
    suite = next(iter(xml))
    assert (suite.tests, suite.failures, suite.errors) == (len(outcomes), len(failures), 0)
    props = {p.name: p.value for p in suite.properties()}
    assert props["expect"] == expect and props["switch.kip903.enabled"] in ("false", "true")


def test_no_loss_but_invalid_history_fails_only_the_validity_case(tmp_path: Path) -> None:
    run = make_clean_run(tmp_path)
    v = json.loads((run / "verdict.json").read_text())
    v["counts"]["duplicate"] = 4
    v.update(valid=False, invalid_because=["duplicate"],
             examples={"duplicate": [{"topic": "faultline", "value": "producer-0-9", "offsets": [10, 12]}]})
    (run / "verdict.json").write_text(json.dumps(v))
    assert decide_verdict(run)["outcome"] == "unexpected"   # the checker's decision over the new evidence
    cases = _cases(write_junit(run))
    assert [(n, o) for n, o, _ in cases] == [(LOST.format("no-loss"), "pass"), (VALID, "failure")]
    assert cases[1][2].result[0].message == "UNEXPECTED ANOMALIES: duplicate=4"


def test_checker_unexpected_verdict_is_never_a_pass(tmp_path: Path) -> None:
    """Known-bad control for the derivation: a verdict the checker calls unexpected for a
    reason the cases do not cover still fails junit."""
    run = make_clean_run(tmp_path)
    v = json.loads((run / "verdict.json").read_text())
    v.update(outcome="unexpected", as_expected=False)
    (run / "verdict.json").write_text(json.dumps(v))
    cases = _cases(write_junit(run))
    assert [o for _, o, _ in cases] == ["pass", "pass", "failure"]
    assert cases[2][0] == "verdict as expected"


def test_checker_listed_expectations_fail_exactly_the_unmet_ones(tmp_path: Path) -> None:
    run = make_loss_run(tmp_path, expect="loss")
    vpath = run / "verdict.json"
    v = json.loads(vpath.read_text())
    v["expectations"] = [
        {"name": "lost acknowledged writes: expect loss", "expected": "loss", "actual": 3, "ok": True},
        {"name": "no inconsistent offsets", "expected": 0, "actual": 2, "ok": False},
        {"name": "no duplicates", "expected": 0, "actual": 0, "ok": True},
    ]
    vpath.write_text(json.dumps(v))
    cases = _cases(write_junit(run))
    assert [(n, o) for n, o, _ in cases] == [
        ("lost acknowledged writes: expect loss", "pass"),
        ("no inconsistent offsets", "failure"),
        ("no duplicates", "pass"),
    ]
    assert cases[1][2].result[0].message == "expected 0, found 2"


def test_run_without_verdict_is_an_error_not_a_pass(tmp_path: Path) -> None:
    run = make_clean_run(tmp_path)
    (run / "verdict.json").unlink()
    cases = _cases(write_junit(run))
    assert [(n, o) for n, o, _ in cases] == [("verdict", "error")]


def test_junit_has_the_shape_jenkins_reads(tmp_path: Path) -> None:
    """The structure Jenkins' JUnit schema asks for, checked with the standard library:
    testsuites > testsuite(name, tests, failures, errors, time) > properties/property(name, value)
    and testcase(name, classname, time) > failure(message, type) with the summary as text."""
    import xml.etree.ElementTree as ET

    root = ET.parse(write_junit(make_loss_run(tmp_path))).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    for attr in ("name", "tests", "failures", "errors", "time"):
        assert attr in suite.attrib, attr
    assert int(suite.get("tests")) == len(suite.findall("testcase")) == 2
    assert int(suite.get("failures")) == sum(len(c.findall("failure")) for c in suite.findall("testcase")) == 2
    float(suite.get("time"))
    assert all(set(p.attrib) == {"name", "value"} for p in suite.find("properties"))
    for case in suite.findall("testcase"):
        assert {"name", "classname", "time"} <= set(case.attrib)
        for f in case.findall("failure"):
            assert f.get("message") and f.get("type") == "UnexpectedVerdict" and f.text
    assert [c.tag for c in suite if c.tag != "testcase"] == ["properties"]  # properties come first


def test_inconclusive_run_is_an_error_not_a_pass(tmp_path: Path) -> None:
    """A run with nothing to judge by (checkers/verdict.py outcome "inconclusive") is neither a
    passed expectation nor an unexpected verdict: one error case saying why."""
    run = make_clean_run(tmp_path)
    v = json.loads((run / "verdict.json").read_text())
    v.update(outcome="inconclusive", as_expected=False, acked_writes=0,
             inconclusive_because=["no acknowledged writes: nothing was tested"])
    (run / "verdict.json").write_text(json.dumps(v))
    cases = _cases(write_junit(run))
    assert [(n, o) for n, o, _ in cases] == [(LOST.format("no-loss"), "error")]
    err = cases[0][2].result[0]
    assert err.type == "Inconclusive" and err.message == "INCONCLUSIVE: no acknowledged writes: nothing was tested"
