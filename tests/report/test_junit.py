"""issue 7, must show 3: junit.xml parses with junitparser and fails exactly the unexpected
expectations — loss where none was expected, and a known-bad control that lost nothing."""
from __future__ import annotations

import json
from pathlib import Path

import junitparser as jp
import pytest

from harness.report import write_junit
from tests.report.runs import make_clean_run, make_loss_run


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


@pytest.mark.parametrize("make, expect, outcome", [
    (make_loss_run, "no-loss", "failure"),   # unexpected loss
    (make_loss_run, "loss", "pass"),         # the known-bad control reproduced its loss
    (make_clean_run, "no-loss", "pass"),
    (make_clean_run, "loss", "failure"),     # the known-bad control did NOT reproduce: unexpected too
])
def test_one_case_per_expectation_failing_only_when_unexpected(tmp_path: Path, make, expect: str,
                                                                outcome: str) -> None:
    run = make(tmp_path, expect=expect)
    cases = _cases(write_junit(run))
    assert [(n, o) for n, o, _ in cases] == [(f"lost acknowledged writes: expect {expect}", outcome)]
    case = cases[0][2]
    if outcome == "failure":
        failure = case.result[0]
        assert failure.type == "UnexpectedVerdict"
        if make is make_loss_run:
            assert failure.message.startswith("UNEXPECTED LOSS: expected no-loss; 3 lost acknowledged writes")
            # the lost-write summary: per partition, each write with its attribution, and the re-run line
            assert "lost writes by partition: faultline-1=2, faultline-2=1" in failure.text
            assert "faultline-2 offset 877 value producer-0-1193 acked t=21.731 by producer-0" in failure.text
            assert "wipe[broker-2]" in failure.text
            assert "re-run: faultline run campaigns/kip903-wipe-race.yaml --seed 7" in failure.text
        else:
            assert failure.message.startswith("EXPECTED LOSS NOT REPRODUCED")
    xml = jp.JUnitXml.fromfile(str(run / "junit.xml"))
    suite = next(iter(xml))
    assert (suite.tests, suite.failures, suite.errors) == (1, int(outcome == "failure"), 0)
    props = {p.name: p.value for p in suite.properties()}
    assert props["expect"] == expect and props["switch.kip903.enabled"] in ("false", "true")


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
