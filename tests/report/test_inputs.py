"""The report degrades gracefully on missing files, refuses malformed ones in one line, and
shows only the top rows of big evidence files with the whole file linked."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.report import ReportInputError, write_index, write_junit, write_report
from harness.report.__main__ import main as report_main
from harness.report.render import TOP_N
from tests.report.runs import TOPIC, make_clean_run, make_loss_run

REPO = Path(__file__).resolve().parents[2]


def test_run_with_only_run_json_still_gets_a_report(tmp_path: Path) -> None:
    run = make_loss_run(tmp_path)
    for name in ("verdict.json", "timeline.jsonl", "observer.jsonl", "proxy-events.jsonl", "campaign.yaml"):
        (run / name).unlink()
    for sub in ("anomalies", "aggregates", "cluster-logs"):
        for f in sorted((run / sub).rglob("*"), reverse=True):
            f.unlink() if f.is_file() else f.rmdir()
        (run / sub).rmdir()
    html = write_report(run).read_text()
    assert "NO VERDICT" in html
    assert "verdict.json missing" in html and "aggregates/throughput.csv missing" in html
    assert "cluster-logs/ missing" in html


def test_torn_and_bad_jsonl_lines_are_noted_not_fatal(tmp_path: Path) -> None:
    run = make_loss_run(tmp_path)
    with open(run / "timeline.jsonl", "a") as fh:
        fh.write("not json\n")
        fh.write('{"v": 1, "t": 55.0, "kind": "nem')  # writer killed mid-line
    html = write_report(run).read_text()
    assert "timeline.jsonl: 1 undecodable line(s) skipped" in html
    assert "timeline.jsonl: last line cut" in html


def test_fault_never_healed_is_shown_until_run_end(tmp_path: Path) -> None:
    run = make_loss_run(tmp_path)
    with open(run / "timeline.jsonl", "a") as fh:
        fh.write(json.dumps({"v": 1, "t": 55.0, "kind": "nemesis", "phase": "start", "id": "f-9",
                             "fault": "partition", "targets": ["broker-1"], "detail": {}}) + "\n")
    html = write_report(run).read_text()
    assert "NO (run ended)" in html


def test_fault_bands_are_the_intervals_attribution_uses() -> None:
    """The page and the verdict pair a fault's start and stop the same way: a healed fault, a
    fault whose stop was written twice (a later heal), one never healed and one with only a
    stop give the same intervals in the report's bands and in attribution's windows."""
    from checkers.attribution import fault_windows
    from harness.report.inputs import _faults

    def rec(t, phase, fid, fault="kill", targets=("broker-1",)):
        return {"v": 1, "t": t, "kind": "nemesis", "phase": phase, "id": fid, "fault": fault,
                "targets": list(targets), "detail": {}}
    rows = [rec(1.0, "start", "f-1"), rec(2.0, "stop", "f-1"),
            rec(3.0, "start", "f-2", "pause", ["broker-2", "broker-3"]), rec(4.0, "stop", "f-2"),
            rec(9.0, "stop", "f-2"), {"v": 1, "t": 5.0, "kind": "phase", "phase": "drain"},
            rec(6.0, "start", "f-3", "partition"), rec("late", "stop", "f-3"), rec(7.0, "stop", "f-4")]
    bands, phases, _ = _faults(rows, end_t=20.0)
    got = [(r.id, r.start, r.stop, r.healed, r.targets) for r in bands.itertuples()]
    assert got == [("f-1", 1.0, 2.0, True, "broker-1"), ("f-2", 3.0, 9.0, True, "broker-2, broker-3"),
                   ("f-3", 6.0, 20.0, False, "broker-1"), ("f-4", 7.0, 7.0, True, "broker-1")]
    assert [(a, b) for a, b, _ in fault_windows(rows)] == [(1.0, 2.0), (3.0, 9.0), (6.0, None)]
    assert phases.to_dict("records") == [{"t": 5.0, "phase": "drain"}]


@pytest.mark.parametrize("file, mutate, message", [
    ("verdict.json", lambda v: v["counts"].update(lost_write="three"),
     "verdict.json: counts.lost_write: a non-negative integer, got 'three'"),
    ("verdict.json", lambda v: v.pop("valid"), "verdict.json: valid: missing; wanted true or false"),
    ("run.json", lambda r: r.update(expect="maybe"), "run.json: expect: one of no-loss, loss, loss-allowed, got 'maybe'"),
    ("run.json", lambda r: r.update(wall_at_t0="noon"),
     "run.json: wall_at_t0: the wall-clock time of t=0 in seconds (a number), got 'noon'"),
])
def test_malformed_input_is_one_clear_line(tmp_path: Path, file: str, mutate, message: str) -> None:
    run = make_loss_run(tmp_path)
    doc = json.loads((run / file).read_text())
    mutate(doc)
    (run / file).write_text(json.dumps(doc))
    with pytest.raises(ReportInputError) as err:
        write_report(run)
    assert str(err.value) == f"{run / file}: {message.split(': ', 1)[1]}"


def test_entry_point_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_loss_run(tmp_path)
    (run / "verdict.json").write_text(json.dumps({"valid": "yes", "counts": {}}))
    proc = subprocess.run([sys.executable, "-m", "harness.report", str(run)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"faultline report: {run / 'verdict.json'}: valid: true or false, got 'yes'"]
    assert "Traceback" not in proc.stderr
    # and the good path writes report, junit and index (in-process: one interpreter start is enough)
    make_clean_run(tmp_path / "ok")
    good = tmp_path / "ok" / "20261118T000000-kip903-on"
    assert report_main([str(good)]) == 0
    assert capsys.readouterr().out.split() == [str(good / "report.html"), str(good / "junit.xml"),
                                               str((tmp_path / "ok").resolve() / "index.html")]


def test_bad_csv_and_json_syntax_are_one_line(tmp_path: Path) -> None:
    run = make_loss_run(tmp_path)
    (run / "aggregates" / "throughput.csv").write_text("second,ok\n0,1\n")
    with pytest.raises(ReportInputError, match=r"throughput.csv: header: columns second, ok, fail"):
        write_report(run)
    (run / "aggregates" / "throughput.csv").unlink()
    (run / "verdict.json").write_text("{\"valid\": true,\n")
    with pytest.raises(ReportInputError, match=r"verdict.json: line 2: valid JSON"):
        write_report(run)


def test_big_evidence_shows_top_n_and_links_the_whole_file(tmp_path: Path) -> None:
    run = make_loss_run(tmp_path)
    n = 5_000
    rows = pd.DataFrame({"topic": TOPIC, "partition": [i % 3 for i in range(n)], "offset": range(n),
                         "value": [f"producer-0-{i}" for i in range(n)], "process": "producer-0",
                         "op": range(n), "ack_t": [10 + i * 0.001 for i in range(n)]})
    rows.to_csv(run / "anomalies" / "lost_write.csv", index=False)
    v = json.loads((run / "verdict.json").read_text())
    v["counts"]["lost_write"] = n
    v["lost_writes_by_partition"] = {f"{TOPIC}@{p}": int((rows["partition"] == p).sum()) for p in range(3)}
    v["attribution"] = []
    (run / "verdict.json").write_text(json.dumps(v))
    html = write_report(run).read_text()
    assert html.count("producer-0-") < TOP_N + 50  # the head only, not 5 000 rows
    assert f'Showing {TOP_N}; all of them: <a href="anomalies/lost_write.csv">' in html
    assert 'id="lost-count">5000<' in html
    junit = write_junit(run).read_text()
    assert "4980 more in anomalies/lost_write.csv" in junit


def test_index_survives_a_malformed_run(tmp_path: Path) -> None:
    make_clean_run(tmp_path)
    bad = make_loss_run(tmp_path)
    (bad / "verdict.json").write_text("[]")
    html = write_index(tmp_path).read_text()
    assert "20261118T000000-kip903-on" in html and "20261117T000000-kip903-off" in html
    assert "verdict.json: (top level): a JSON object, got list" in html


def test_each_report_rewrites_the_results_index(tmp_path: Path) -> None:
    """results/index.html is rewritten after each run — the runner writes the report,
    and that is enough."""
    write_report(make_loss_run(tmp_path))
    first = (tmp_path / "index.html").read_text()
    assert "20261117T000000-kip903-off/report.html" in first and "kip903-on" not in first
    write_report(make_clean_run(tmp_path))
    second = (tmp_path / "index.html").read_text()
    assert second.index("20261118T000000-kip903-on") < second.index("20261117T000000-kip903-off")


def test_values_from_files_are_shown_as_text_never_markup(tmp_path: Path) -> None:
    run = make_loss_run(tmp_path)
    df = pd.read_csv(run / "anomalies" / "lost_write.csv")
    df.loc[0, "value"] = "<script>alert(1)</script>"
    df.loc[0, "attribution"] = "faults: <img src=x> | elections: a&b"
    df.to_csv(run / "anomalies" / "lost_write.csv", index=False)
    html = write_report(run).read_text()
    assert "<script>alert(1)</script>" not in html and "<img src=x>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "faults: &lt;img src=x&gt;<br>elections: a&amp;b" in html


def test_topic_ids_join_their_topic_and_late_phases_do_not_stretch_the_plot(tmp_path: Path) -> None:
    """Seen on a real kip-903 run: the proxy logs AlterPartition under the topic id, and the
    checker's phase minutes after the run stretched the SVG to 7 000 px wide."""
    import re

    from harness.report.inputs import load_run

    run = make_loss_run(tmp_path)
    with open(run / "proxy-events.jsonl", "a") as fh:
        fh.write(json.dumps({"wall": 1_795_000_019.0, "node": -1, "role": "proxy", "event": "alter_partition",
                             "topic": "8c8bff74-1044-4eb2-b211-f67c320dcb19", "partition": 1, "leader": 0,
                             "new_isr": [0, 2], "accepted": True, "error": "NONE", "error_code": 0}) + "\n")
    with open(run / "timeline.jsonl", "a") as fh:
        fh.write(json.dumps({"v": 1, "t": 424.2, "kind": "phase", "phase": "report", "detail": {}}) + "\n")
    (run / "campaign.yaml").write_text("name: kip903-wipe-race\ntopic: {name: faultline}\n")
    events = load_run(run).events
    assert set(events["topic"].dropna()) == {TOPIC}
    html = write_report(run).read_text()
    width = float(re.search(r'<svg[^>]*viewBox="0 0 ([\d.]+) ', html).group(1))
    assert width < 1500
