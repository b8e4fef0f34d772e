"""The report draws the active controller (KRaft quorum leader) as a lane of the timeline,
with an "Active controller by epoch" table — only when the run has the data.

Real files and real rendering (matplotlib SVG, Jinja page) from a synthetic run directory
(tests/report/runs.py) with the observer's ``controller-quorum.jsonl`` or kraftsim's
``controller_elected``/``controller_resigned`` events added. Before the lane existed the
timeline had no "active controller" row and the page no such table: the tests with data
failed; the ones without data guard that nothing is invented.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.report import ReportInputError, write_report
from tests.report.runs import WALL0, make_loss_run

VOTERS = [{"id": 1000, "log_end_offset": 7, "last_fetch_ms": 1, "last_caught_up_ms": 1},
          {"id": 1001, "log_end_offset": 7, "last_fetch_ms": 1, "last_caught_up_ms": 1},
          {"id": 1002, "log_end_offset": 7, "last_fetch_ms": 1, "last_caught_up_ms": 1}]


def _q(t: float, leader: int | None, epoch: int | None, error: str | None = None) -> dict:
    return {"t": t, "leader_id": leader, "leader_epoch": epoch, "high_watermark": None if leader is None else 10,
            "voters": None if leader is None else VOTERS, "observers": [], "broker": 1, "error": error}


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))


def _timeline_svg(html: str) -> str:
    start = html.index('<h2 id="timeline">')
    a = html.index("<svg", start)
    return html[a:html.index("</svg>", a)]


def test_quorum_file_draws_lane_with_each_leader_and_epoch(tmp_path: Path) -> None:
    run = make_loss_run(tmp_path)
    _write(run / "controller-quorum.jsonl", [_q(0.4, 1000, 1), _q(5.4, 1000, 1), _q(20.2, None, None, "REQUEST_TIMED_OUT"),
                                             _q(21.1, 1001, 3), _q(44.0, 1001, 4)])
    html = write_report(run).read_text(encoding="utf-8")
    svg = _timeline_svg(html)
    assert "active controller" in svg
    for label in ("1000 · e1", "1001 · e3", "1001 · e4", "controller 1000", "controller 1001", "no active controller"):
        assert label in svg, label
    assert 'id="active-controller"' in html and "Active controller by epoch" in html
    assert "controller elected" not in svg  # no controller_elected events in this run
    table = html[html.index('id="active-controller"'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 4  # epoch 1, none, epoch 3, epoch 4 (the heartbeat line merged)
    assert "none (REQUEST_TIMED_OUT)" in table and "DescribeQuorum" in table


def test_controller_events_are_the_second_source(tmp_path: Path) -> None:
    run = make_loss_run(tmp_path)
    logs = run / "cluster-logs"

    def ev(t: float, node: int, name: str, **kw) -> dict:
        return {"wall": WALL0 + t, "node": node, "role": "controller", "event": name, **kw}

    _write(logs / "controller-1" / "events.jsonl", [
        ev(0.3, 1000, "controller_elected", epoch=1, leader=1000, voters=[1000, 1001, 1002]),
        ev(30.0, 1000, "controller_resigned", epoch=1, leader=1000, reason="check_quorum")])
    _write(logs / "controller-3" / "events.jsonl", [
        ev(31.2, 1002, "controller_elected", epoch=2, leader=1002, voters=[1000, 1001, 1002])])
    html = write_report(run).read_text(encoding="utf-8")
    svg = _timeline_svg(html)
    assert "active controller" in svg and "1000 · e1" in svg and "1002 · e2" in svg
    assert "controller events" in html and "none (resigned (check_quorum))" in html
    assert "controller elected" in svg  # ▼ at each controller_elected event
    # node ids are named by the host the faults name (kill[controller-3])
    assert "controller 1002 (controller-3)" in svg and "1002 (controller-3)" in html


def test_no_quorum_data_no_lane_and_no_table(tmp_path: Path) -> None:
    run = make_loss_run(tmp_path)
    html = write_report(run).read_text(encoding="utf-8")
    assert "active controller" not in _timeline_svg(html)
    assert 'id="active-controller"' not in html


def test_one_controller_one_epoch_is_a_table_row_not_a_lane(tmp_path: Path) -> None:
    run = make_loss_run(tmp_path)
    _write(run / "controller-quorum.jsonl", [{**_q(0.5, 3000, 1), "voters": VOTERS[:1]}])
    html = write_report(run).read_text(encoding="utf-8")
    assert "active controller" not in _timeline_svg(html)
    assert 'id="active-controller"' in html and "One controller led throughout" in html


def test_malformed_quorum_line_is_one_clear_error(tmp_path: Path) -> None:
    run = make_loss_run(tmp_path)
    _write(run / "controller-quorum.jsonl", [{**_q(0.5, 1000, 1), "leader_epoch": "one"}])
    with pytest.raises(ReportInputError) as e:
        write_report(run)
    msg = str(e.value)
    assert "controller-quorum.jsonl" in msg and "leader_epoch" in msg and "\n" not in msg
