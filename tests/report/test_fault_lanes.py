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
