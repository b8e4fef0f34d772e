"""Overlapping faults of one lane are drawn one above the other (a random mix with
``concurrency``: two kills at once must not hide each other).

Real rendering (matplotlib SVG inside the real report page) from the synthetic run directory
of tests/report/runs.py, with faults added to its timeline. Before the lanes were split into
rows, two overlapping kills in the per-kind lanes (more than MAX_FAULT_LANES fault[targets]
combinations) were two boxes at the same height, and no "kill (2)" row existed.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.report import write_report
from harness.report.plots import MAX_FAULT_LANES, fault_rows
from tests.report.runs import make_loss_run


def _fault(fid: str, fault: str, host: str, t0: float, t1: float) -> list[dict]:
    return [{"v": 1, "t": t0, "kind": "nemesis", "phase": "start", "id": fid, "fault": fault, "targets": [host], "detail": {}},
            {"v": 1, "t": t1, "kind": "nemesis", "phase": "stop", "id": fid, "fault": fault, "targets": [host], "detail": {}}]


def test_overlapping_faults_of_one_lane_get_their_own_rows() -> None:
    df = pd.DataFrame([{"fault": "kill", "targets": "broker-1", "start": 1.0, "stop": 5.0},
                       {"fault": "kill", "targets": "broker-1", "start": 3.0, "stop": 4.0},   # inside the first
                       {"fault": "kill", "targets": "broker-1", "start": 5.0, "stop": 6.0},   # after: row 1 again
                       {"fault": "pause", "targets": "broker-2", "start": 2.0, "stop": 9.0}])
    labels, lane = fault_rows(df)
    assert labels == ["kill[broker-1]", "kill[broker-1] (2)", "pause[broker-2]"]
    assert lane == [0, 1, 0, 2]


def test_two_overlapping_kills_are_drawn_on_two_rows_of_the_kill_lane(tmp_path: Path) -> None:
    run = make_loss_run(tmp_path)
    extra = []
    for i in range(MAX_FAULT_LANES + 1):      # enough host combinations for one lane per fault kind
        extra += _fault(f"p-{i}", "pause", f"broker-{i}", 1.0 + i, 1.5 + i)
    extra += _fault("k-a", "kill", "broker-1", 41.0, 47.0) + _fault("k-b", "kill", "broker-2", 43.0, 49.0)
    with (run / "timeline.jsonl").open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in extra))
    html = write_report(run).read_text(encoding="utf-8")
    a = html.index("<svg", html.index('<h2 id="timeline">'))
    svg = html[a:html.index("</svg>", a)]
    assert "kill (2)" in svg
    assert "pause (2)" not in svg    # the pauses never overlap: one row


def test_a_fault_that_failed_to_start_is_drawn_hatched_with_its_reason(tmp_path: Path) -> None:
    """A fault whose start raised (healed at once: its start, stop and failed records) is not an
    applied fault: its box is hatched red with the reason on hover, the faults table says
    FAILED TO START with the reason, and the banner lists the verdict's failed faults."""
    run = make_loss_run(tmp_path)
    why = "truncate-unflushed: log dir /nonexistent does not exist"
    rows = _fault("f-bad", "reboot", "broker-3", 30.0, 30.4) + [
        {"v": 1, "t": 30.4, "kind": "nemesis", "phase": "failed", "id": "f-bad", "fault": "reboot",
         "targets": ["broker-3"], "detail": {"reason": why, "undone": {"started": ["broker-3"]}}}]
    with (run / "timeline.jsonl").open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    v = json.loads((run / "verdict.json").read_text())
    v["faults"] = {"applied": 1, "failed": 1, "min_applied": 1,
                   "failed_list": [{"fault": "reboot", "targets": ["broker-3"], "reason": why}]}
    (run / "verdict.json").write_text(json.dumps(v))
    html = write_report(run).read_text(encoding="utf-8")
    a = html.index("<svg", html.index('<h2 id="timeline">'))
    svg = html[a:html.index("</svg>", a)]
    assert f'<g id="failed-fault-0"><title>reboot[broker-3] failed to start: {why}</title>' in svg
    assert svg.count("<title>") == 1 and "failed to start (healed)" in svg      # only the failed one; legend
    faults = html[html.index('id="faults"'):]
    faults = faults[:faults.index("</table>")]
    assert f"FAILED TO START: {why}" in faults and faults.count("FAILED TO START") == 1
    banner = html[html.index('id="faults-applied"'):]
    assert banner.startswith('id="faults-applied">1 applied') and f"reboot[broker-3]: {why}" in banner[:1500]
