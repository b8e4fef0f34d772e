"""Bad input gives one clear line naming file, field and what is wanted - never a traceback.

These run before any Spark session starts (checkers.load.precheck), so they are quick.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.load import CheckerInputError, precheck
from tests.checkers.builder import HistoryBuilder

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path) -> Path:
    b = HistoryBuilder()
    b.send("producer-0", "t", 0, "producer-0-0", 0, 1.0)
    return b.write(tmp_path / "run")


@pytest.mark.parametrize("mutate, needle", [
    (lambda rd: (rd / "history" / "producer-0.jsonl").unlink(), "no *.jsonl files"),
    (lambda rd: (rd / "history" / "producer-0.jsonl").write_text("not json\n"), "line 1 is not JSON"),
    (lambda rd: (rd / "history" / "producer-0.jsonl").write_text('{"t":1,"process":"p","type":"ok"}\n'),
     "lacks field 'f'"),
    (lambda rd: (rd / "history" / "producer-0.jsonl").write_text(
        '{"v":1,"t":1,"process":"p","op":1,"type":"done","f":"send"}\n'), "field 'type' is 'done'"),
    (lambda rd: (rd / "history" / "producer-0.jsonl").write_text(
        '{"v":9,"t":1,"process":"p","op":1,"type":"ok","f":"send"}\n'), "field 'v' is 9"),
    (lambda rd: (rd / "run.json").write_text("{"), "run.json: not valid JSON"),
    (lambda rd: (rd / "run.json").write_text(json.dumps({"expect": "maybe"})), "field 'expect' is 'maybe'"),
    (lambda rd: (rd / "run.json").write_text(json.dumps({"wall_at_t0": "noon"})), "field 'wall_at_t0'"),
])
def test_bad_input_is_one_line(tmp_path, mutate, needle):
    rd = _run(tmp_path)
    mutate(rd)
    with pytest.raises(CheckerInputError) as ei:
        precheck(rd)
    msg = str(ei.value)
    assert needle in msg and "\n" not in msg and str(rd) in msg


def test_torn_last_line_is_accepted(tmp_path):
    rd = _run(tmp_path)
    with open(rd / "history" / "producer-0.jsonl", "a") as fh:
        fh.write('{"v":1,"t":9.0,"process":"producer-0","op":7,"ty')   # SIGKILL mid-line
    precheck(rd)


def test_cli_prints_one_line_and_exits_2(tmp_path):
    p = subprocess.run([sys.executable, "-m", "checkers", str(tmp_path / "missing")], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a directory" in lines[0] and "Traceback" not in p.stderr


def test_small_logs_tolerate_bad_lines_and_kinds(tmp_path):
    """The timeline/event logs are read on the driver: a torn last line and an undecodable
    line are skipped, a field of the wrong kind reads as null (the rest of the row stays), an
    object in a text field keeps its compact JSON - and the descriptions attribution prints
    follow from exactly that."""
    from checkers.attribution import event_desc, fault_windows
    from checkers.load import EVENT_FIELDS, TIMELINE_FIELDS, read_log
    ev = tmp_path / "events.jsonl"
    ev.write_text(
        '{"wall":10.5,"node":"0","event":"alter_partition","topic":"t","partition":"zero","leader":1,'
        '"new_isr":[1,2],"broker_epochs":{"2":7},"accepted":true,"version":2}\n'
        'garbage\n'
        '{"wall":11.0,"node":"0","event":"leader_elected","topic":"t","partition":0,"isr":[2],"elr":[]}\n'
        '{"wall":12.0,"node":"0","event":"trunc')
    rows = read_log(ev, EVENT_FIELDS)
    assert len(rows) == 2
    assert rows[0]["partition"] is None and rows[0]["leader"] == 1 and rows[0]["broker_epochs"] == '{"2":7}'
    assert rows[1]["partition"] == 0 and rows[1]["isr"] == [2]
    assert read_log(tmp_path / "absent.jsonl", EVENT_FIELDS) == []
    desc = event_desc({**rows[0], "t": 0.5, "host": "controller"})
    assert desc == ('t=0.500 alter_partition @controller/0 leader=1 new_isr=[1,2] broker_epochs={"2":7} '
                    'version=2 accepted=true')
    tl = tmp_path / "timeline.jsonl"
    tl.write_text(
        '{"t":1.0,"kind":"nemesis","phase":"start","id":"f1","fault":"kill","targets":["broker-1"],"detail":{"signal":9}}\n'
        '{"t":2.25,"kind":"nemesis","phase":"stop","id":"f1","fault":"kill","targets":["broker-1"]}\n'
        '{"t":3.0,"kind":"nemesis","phase":"start","id":"f2","fault":"pause","targets":["broker-2"]}\n'
        '{"t":4.0,"kind":"phase","phase":"drain"}\n')
    assert fault_windows(read_log(tl, TIMELINE_FIELDS)) == [
        (1.0, 2.25, 'kill[broker-1] f1 1.000-2.250 {"signal":9}'), (3.0, None, "pause[broker-2] f2 3.000-active")]
