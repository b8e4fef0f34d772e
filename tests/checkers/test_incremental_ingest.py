"""A history converted while it grows gives the check a history converted from scratch gives.

The run is a real lossy one (tests/checkers/fixtures/kip903-off.tar.gz: KIP-903 off, writes
lost to a wiped replica's election). Its history files are written again, piece by piece - cut
in the middle of lines, the drain's file appearing only near the end, as a run writes them -
with the follower's rounds (checkers/follow.py) in between; the check after the last piece
converts only the tail. Its verdict, lost values and evidence tables must equal those of a
check of the same run from scratch. A second case kills the converting process in the middle
of a round (after some of its part files, before its manifest): the check must not trust those
files, and must still give the scratch verdict.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


from checkers import ingest
from checkers.follow import HistoryFollower
from checkers.job import check_run
from harness.check import check_and_report
from tests.support.tarballs import unpack

FIXTURE = Path(__file__).parent / "fixtures" / "kip903-off.tar.gz"
REPO = Path(__file__).resolve().parents[2]


def _unpack(dest: Path) -> Path:
    dest.mkdir(parents=True)
    return unpack(FIXTURE, dest)


def _outputs(rd: Path) -> dict[str, str]:
    """verdict.json without the checker's own section, and every evidence and aggregate CSV."""
    v = json.loads((rd / "verdict.json").read_text())
    v.pop("checker")
    out = {"verdict": json.dumps(v, sort_keys=True)}
    for sub in ("anomalies", "aggregates"):
        for f in sorted((rd / sub).glob("*.csv")):
            out[f"{sub}/{f.name}"] = f.read_text()
    return out


def _cuts(size: int, n: int, rng: random.Random) -> list[int]:
    return sorted(rng.randrange(1, size) for _ in range(n)) + [size]


def _grow(rd: Path, contents: dict[str, bytes], upto: dict[str, int], pos: dict[str, int]) -> None:
    """Append each file's bytes from ``pos`` to ``upto`` (creating it when it first gets any)."""
    for name, data in contents.items():
        if upto[name] > pos[name]:
            with open(rd / "history" / name, "ab") as fh:
                fh.write(data[pos[name]:upto[name]])
            pos[name] = upto[name]


def _history(rd: Path) -> dict[str, bytes]:
    contents = {p.name: p.read_bytes() for p in sorted((rd / "history").glob("*.jsonl"))}
    for p in (rd / "history").glob("*.jsonl"):
        p.unlink()
    return contents


def test_followed_history_checks_as_one_converted_from_scratch(spark, tmp_path):
    scratch = _unpack(tmp_path / "scratch")
    followed = _unpack(tmp_path / "followed")
    contents = _history(followed)
    rng = random.Random(7)
    rounds = 6
    cuts = {n: _cuts(len(d), rounds, rng) for n, d in contents.items()}
    cuts["drain.jsonl"] = [0] * (rounds - 2) + _cuts(len(contents["drain.jsonl"]), 2, rng)   # the drain comes last
    pos = {n: 0 for n in contents}
    follower = HistoryFollower(followed, round_bytes=1)           # every new whole line is due
    mid_line = 0
    for i in range(rounds):                                        # the last piece is left to the check
        _grow(followed, contents, {n: c[i] for n, c in cuts.items()}, pos)
        mid_line += sum(1 for n in contents if 0 < pos[n] < len(contents[n]) and contents[n][pos[n] - 1:pos[n]] != b"\n")
        follower.round()
    assert mid_line > 0, "no round met a line cut by its writer"
    man = json.loads((followed / ingest.DATASET / ingest.MANIFEST).read_text())
    assert all(contents[n][:e["offset"]].endswith(b"\n") or e["offset"] == 0 for n, e in man["files"].items())
    _grow(followed, contents, {n: len(d) for n, d in contents.items()}, pos)

    v_scratch = check_run(scratch, spark=spark)
    v_followed = check_run(followed, spark=spark)
    assert v_scratch["counts"]["lost_write"] > 0                   # a real loss, with its story
    ing = v_followed["checker"]["ingest"]
    assert ing["resumed_bytes"] > 0 and 0 < ing["bytes"] < sum(map(len, contents.values())), ing
    assert v_scratch["checker"]["ingest"]["resumed_bytes"] == 0
    # the rounds cut the files elsewhere than the scratch splits: more part files, same rows
    n_parts = {rd: sum(len(pf.files) for pf in ingest.partition_files(rd / ingest.DATASET)) for rd in (scratch, followed)}
    assert n_parts[followed] > n_parts[scratch], n_parts
    a, b = _outputs(scratch), _outputs(followed)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k] == b[k], f"{k} differs between the followed and the scratch check"


def test_a_line_cut_by_its_writer_is_converted_once_whole(tmp_path):
    """A round during the run stops before a line its writer has not finished; the next round
    converts it whole. A torn last line left at the end is dropped and counted once by the
    final round, exactly as a conversion from scratch does."""
    rd = tmp_path / "run"
    (rd / "history").mkdir(parents=True)
    f = rd / "history" / "producer-0.jsonl"
    lines = [json.dumps({"v": 1, "t": i * 0.5, "process": "producer-0", "op": i, "type": "ok", "f": "send",
                         "topic": "t", "partition": i % 3, "offset": i, "value": f"producer-0-{i}", "error": None,
                         "error_code": None}) + "\n" for i in range(30)]
    text = "".join(lines).encode() + b'{"v":1,"t":99.0,"process":"pro'       # cut by a SIGKILL
    line_starts = [sum(len(x) for x in lines[:i]) for i in range(len(lines))]
    conv = ingest.Converter(rd)
    got = []
    for cut in (line_starts[7] + 5, line_starts[7] + 9, line_starts[20] - 1, len(text)):
        with open(f, "ab") as fh:
            fh.write(text[f.stat().st_size:cut])
        got.append(conv.round([str(f)], final=False).records)
    assert got == [7, 7, 19, 30]                                  # whole lines only; the torn tail waits
    final = ingest.ingest(rd, [str(f)])
    (tmp_path / "scratch" / "history").mkdir(parents=True)
    shutil.copy(f, tmp_path / "scratch" / "history" / f.name)
    scratch = ingest.ingest(tmp_path / "scratch", [str(tmp_path / "scratch" / "history" / f.name)])
    assert (final.records, final.bad_lines, final.torn_lines) == (scratch.records, scratch.bad_lines, scratch.torn_lines) == (30, 0, 1)
    assert final.resumed_bytes == len(text) - len(text.split(b"\n")[-1]) and final.bytes == len(text.split(b"\n")[-1])
    for pf_a, pf_b in zip(ingest.partition_files(final.dataset), ingest.partition_files(scratch.dataset), strict=True):
        ops = [[op for x in pf.files for op in ingest.read_part(x).column("op").to_pylist()] for pf in (pf_a, pf_b)]
        assert ops[0] == ops[1] and len(pf_a.files) > len(pf_b.files)
    again = ingest.ingest(rd, [str(f)])
    assert again.converted is False and again.records == 30      # complete: never converted twice


_KILLED_MID_ROUND = """
import os, signal, sys, time
from checkers import ingest
from checkers.follow import HistoryFollower
rd = sys.argv[1]
follower = HistoryFollower(rd, round_bytes=1, split_bytes=64 * 1024)   # many splits a round
follower.round()                                   # a round that finished: its manifest written
open(os.path.join(rd, "GROW"), "w").close()        # the test appends the rest of the history now
while os.path.exists(os.path.join(rd, "GROW")):
    time.sleep(0.05)
real, n = os.replace, [0]
def replace_then_die(a, b):                        # the harness dies after its fifth part file
    real(a, b)
    n[0] += 1
    if n[0] == 5:
        os.kill(os.getpid(), signal.SIGKILL)
ingest.os.replace = replace_then_die
follower.round()
"""


def _stray(run: Path, man: ingest.Manifest) -> list[Path]:
    """Part files the manifest does not cover (start at or past their file's recorded offset)."""
    out = []
    for p in (run / ingest.DATASET / ingest.TP_DIR).glob(f"*/part-*{ingest.PART_SUFFIX}"):
        key = ingest.part_key(p.name)
        if key is not None and key[1] >= man.offsets.get(key[0], 0):
            out.append(p)
    return out


def test_a_converter_killed_mid_round_leaves_nothing_the_check_trusts(spark, tmp_path):
    scratch = _unpack(tmp_path / "scratch")
    run = _unpack(tmp_path / "run")
    contents = _history(run)
    pos = {n: 0 for n in contents}
    _grow(run, contents, {n: len(d) // 3 for n, d in contents.items()}, pos)
    child = subprocess.Popen([sys.executable, "-c", _KILLED_MID_ROUND, str(run)], cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        grow = run / "GROW"
        deadline = time.monotonic() + 300
        while not grow.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert grow.exists(), f"the converter did not finish its first round (exit {child.poll()})"
        _grow(run, contents, {n: len(d) for n, d in contents.items()}, pos)
        grow.unlink()
        assert child.wait(timeout=300) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    # the control: the killed round left part files its manifest does not cover, some at
    # offsets the check's own round (one split per file here) never writes again - trusted,
    # their rows would be counted twice
    man = ingest.Manifest.read(run / ingest.DATASET / ingest.MANIFEST)
    assert man is not None and man.records > 0
    stray = _stray(run, man)
    assert sum(ingest.read_part(p).num_rows for p in stray) > 0
    orphans = [p for p in stray if ingest.part_key(p.name)[1] > man.offsets[ingest.part_key(p.name)[0]]]
    assert orphans, [p.name for p in stray]

    checked = check_and_report(run)                               # what `faultline check RUN` runs
    assert checked.verdict is not None, checked.message
    assert not any(p.exists() for p in orphans)
    check_run(scratch, spark=spark)
    a, b = _outputs(scratch), _outputs(run)
    assert json.loads(a["verdict"])["counts"]["lost_write"] > 0
    for k in a:
        assert a[k] == b[k], f"{k} differs after the killed conversion"
