"""`faultline --help` and each command's `--help` read as whole sentences in an 80-column terminal.

Rich wraps help text to the terminal; a line break typed into a docstring (sources wrap at 100
columns, terminals are narrower) used to survive into the output, so a description stopped
mid-sentence with room left on the line. The invariant checked on the real output: wherever a
description goes on on the next line, the next word would not have fitted on this one.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 80


def _help(*args: str) -> list[str]:
    p = subprocess.run([sys.executable, "-m", "harness.cli", *args, "--help"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT, env={**os.environ, "COLUMNS": str(WIDTH), "TERM": "dumb"})
    assert p.returncode in (0, 2), p.stderr
    lines = p.stdout.splitlines()
    assert lines and all(len(ln) <= WIDTH for ln in lines), p.stdout
    return lines


def _early_breaks(rows: list[list[str]], width: int) -> list[str]:
    """Lines of one paragraph (each row: its wrapped lines) that ended although the next word fitted."""
    bad = []
    for row in rows:
        for cur, nxt in zip(row, row[1:]):
            if cur and nxt and len(cur) + 1 + len(nxt.split()[0]) <= width:
                bad.append(f"{cur!r} / {nxt!r}")
    return bad


def _intro(lines: list[str]) -> list[list[str]]:
    """The command's own description: the paragraphs between the Usage line and the first panel."""
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("Usage:")) + 1
    end = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("╭"))
    paras: list[list[str]] = [[]]
    for ln in lines[start:end]:
        if ln.strip():
            paras[-1].append(ln.strip())
        elif paras[-1]:
            paras.append([])
    return [p for p in paras if p]


def _commands(lines: list[str]) -> tuple[list[list[str]], int]:
    """Each command's description in the Commands panel, and the width of that column."""
    top = next(i for i, ln in enumerate(lines) if "Commands" in ln and ln.lstrip().startswith("╭"))
    body = [ln for ln in lines[top + 1:] if ln.lstrip().startswith("│")]
    body = body[:next((i for i, ln in enumerate(body) if ln.lstrip().startswith("╰")), len(body))]
    first = body[0]
    name = first[1:].lstrip().split()[0]
    col = first.index(name) + len(name)
    col += len(first[col:]) - len(first[col:].lstrip())        # where descriptions start
    right = first.rindex("│")
    rows: list[list[str]] = []
    for ln in body:
        if ln[2:col].strip():                                   # a command name: a new row
            rows.append([])
        rows[-1].append(ln[col:right].strip())
    return rows, right - 1 - col


@pytest.mark.parametrize("command", [[], ["run"], ["check"], ["shrink"], ["suite"], ["heal"], ["docker"]],
                         ids=lambda c: " ".join(["faultline", *c]))
def test_help_descriptions_are_whole_sentences(command: list[str]) -> None:
    lines = _help(*command)
    assert _early_breaks(_intro(lines), WIDTH - 2) == []
    if any("Commands" in ln for ln in lines):
        rows, width = _commands(lines)
        assert len(rows) >= 2 and _early_breaks(rows, width) == []
        text = " ".join(" ".join(r) for r in rows)
        assert "still loses writes by the same mechanism" in text or command, text
    assert "``" not in "\n".join(lines)   # reStructuredText quoting is for the docs, not the terminal
