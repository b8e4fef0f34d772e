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
