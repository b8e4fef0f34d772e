"""A ``loss-allowed`` suite cell whose loss its configuration does NOT allow is UNEXPECTED
everywhere: in the run's report.html, in its junit.xml, in the suite's index.html and in the
suite's junit.xml - one decision (checkers/outcome.py), read by all of them.

The run is real: the checker inputs of a real ``faultline run campaigns/kip-903.yaml`` with
kip903.enabled=false (tests/checkers/fixtures/kip903-off, see tests/checkers/test_kraftsim_runs.py),
which lost writes to a stale AlterPartition that re-admitted a wiped broker - a loss no setting
permits (its story's ``allowed_by`` is null). The cell is a real suite cell from a suite file;
its expectation reaches run.json the way a suite run's does (the cell's overrides, loaded by the
campaign loader, written as the run loop writes run.json), and the real checker (Spark), report
and suite writers judge and render it. Only the cluster run itself is replayed from the fixture:
a fresh KIP-903 run takes minutes and its loss is timing-dependent.

The same cell with a loss its configuration does allow (a story naming
``unclean.leader.election.enable=true``) is the known-good side: tests/checkers/test_outcome.py.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import junitparser as jp
import pytest

from checkers.outcome import EXIT_OK
from harness.campaign import load_campaign
from harness.suite.runner import SuiteRunner
from harness.suite.spec import load_suite
from tests.support.tarballs import unpack

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "checkers" / "fixtures" / "kip903-off.tar.gz"

SUITE = """
name: allowed-or-not
cells:
  - name: kip-903/loss-allowed
    campaign: {campaign}
    set: {{target.metadata.version: "3.4"}}
    expect: loss-allowed
    allowed_by: unclean.leader.election.enable=true
"""


def _junit_failures(path: Path) -> list[tuple[str, str]]:
    return [(c.name, c.result[0].message) for s in jp.JUnitXml.fromfile(str(path)) for c in s
            if c.result and isinstance(c.result[0], jp.Failure)]


@pytest.mark.timeout(1500)
def test_loss_allowed_cell_with_a_loss_no_setting_allows_is_unexpected_everywhere(spark, tmp_path: Path) -> None:
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(SUITE.format(campaign=ROOT / "campaigns" / "kip-903.yaml"), encoding="utf-8")
    spec = load_suite(suite_file)
    (cell,) = spec.cells
    runner = SuiteRunner.create(spec, tmp_path / "results")
    runner.spark = spark

    # the cell's run: the real KIP-903 histories, with the run.json a run of this cell writes
    run_dir = runner.runs / "kip903-off"
    run_dir.mkdir(parents=True)
    unpack(FIXTURE, run_dir)
    camp = load_campaign(cell.campaign, overrides=cell.overrides, seed=cell.seed)
    run = json.loads((run_dir / "run.json").read_text())
    run.update(camp.expectation.to_json())          # as Runner.write_run_json writes it
    (run_dir / "run.json").write_text(json.dumps(run))
    assert (run["expect"], run["allowed_by"]) == ("loss-allowed", "unclean.leader.election.enable=true")

    rec = runner.finish_cell(cell, EXIT_OK, run_dir, "", time.time())
    runner.write_outputs()

    # the checker's one decision
    v = json.loads((run_dir / "verdict.json").read_text())
    assert v["counts"]["lost_write"] > 0 and v["expected"] == "loss-allowed"
    assert [s["allowed_by"] for s in v["stories"]] == [None]
    assert v["outcome"] == "unexpected" and v["as_expected"] is False
    assert v["outcome_reason"].startswith("LOSS NOT ALLOWED BY CONFIGURATION")

    # report.html: the banner
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    badge = re.search(r'id="verdict-expectation" class="badge (\w+)">([^<]+)<', html)
    assert badge is not None and badge.groups() == ("unexpected", "UNEXPECTED"), badge
    assert "LOSS NOT ALLOWED BY CONFIGURATION" in html

    # the run's junit.xml
    fails = _junit_failures(run_dir / "junit.xml")
    assert [n for n, _ in fails] == ["lost acknowledged writes: expect loss-allowed"]
    assert fails[0][1].startswith("LOSS NOT ALLOWED BY CONFIGURATION")

    # the suite: its log, index.html and junit.xml
    assert rec["outcome"] == "unexpected" and rec["reason"] == v["outcome_reason"]
    index = (runner.dir / "index.html").read_text(encoding="utf-8")
    row = re.search(r'<tr[^>]*data-cell="kip-903/loss-allowed"[^>]*>', index)
    assert row is not None and "unexpected" in row.group(0), row
    fails = _junit_failures(runner.dir / "junit.xml")
    assert [n for n, _ in fails] == ["kip-903/loss-allowed: expect loss-allowed"]
    assert fails[0][1].startswith("LOSS NOT ALLOWED BY CONFIGURATION")
    assert runner.exit_code() == 1
