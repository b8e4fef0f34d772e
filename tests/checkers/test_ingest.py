"""JSON Lines -> history.parquet: every complete record exactly once, bad lines counted, once per run.

No Spark here: the conversion is pyarrow (checkers/ingest.py); these are quick.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq

from checkers import ingest


def _rec(i: int, **kw) -> str:
    r = {"v": 1, "t": i * 0.5, "process": "producer-0", "op": i, "type": "ok", "f": "send", "topic": "t",
         "partition": i % 3, "offset": i, "value": f"producer-0-{i}", "error": None, "error_code": None}
    r.update(kw)
    return json.dumps(r)


def _write(p: Path, lines: list[str], tail: str = "") -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(l + "\n" for l in lines) + tail, encoding="utf-8")
    return p


def _ops(dataset: Path) -> list[int]:
    return sorted(pq.read_table(dataset).column("op").to_pylist())


def test_split_boundaries_lose_and_repeat_nothing(tmp_path):
    f = _write(tmp_path / "run" / "history" / "producer-0.jsonl", [_rec(i) for i in range(500)])
    for split in (1, 7, 64, 150, 10_000):
        out = tmp_path / f"out-{split}"
        out.mkdir()
        results = [ingest.convert_split(s, str(out)) for s in ingest.plan_splits([f], split_bytes=split)]
        assert sum(r[0] for r in results) == 500, split
        assert _ops(out) == list(range(500)), split


def test_torn_tail_and_bad_lines_are_dropped_and_counted(tmp_path):
    rd = tmp_path / "run"
    lines = [_rec(i) for i in range(10)]
    lines[3] = "not json at all"
    lines[6] = _rec(6, partition="zero")        # wrong type: not a record of the schema
    _write(rd / "history" / "producer-0.jsonl", lines, tail='{"v":1,"t":9.9,"process":"producer-0","op":')
    res = ingest.ingest(rd, [str(rd / "history" / "producer-0.jsonl")])
    assert (res.records, res.bad_lines, res.torn_lines, res.converted) == (8, 2, 1, True)
    assert _ops(res.dataset) == [0, 1, 2, 4, 5, 7, 8, 9]


def test_converted_once_and_again_when_a_file_changes(tmp_path):
    rd = tmp_path / "run"
    f = _write(rd / "history" / "producer-0.jsonl", [_rec(i) for i in range(5)])
    assert ingest.ingest(rd, [str(f)]).converted is True
    again = ingest.ingest(rd, [str(f)])
    assert again.converted is False and again.records == 5
    with open(f, "a", encoding="utf-8") as fh:
        fh.write(_rec(5) + "\n")
    os.utime(f, ns=(1, os.stat(f).st_mtime_ns + 10**9))
    changed = ingest.ingest(rd, [str(f)])
    assert changed.converted is True and changed.records == 6 and _ops(changed.dataset) == list(range(6))


def test_empty_history_gives_a_readable_empty_dataset(tmp_path):
    rd = tmp_path / "run"
    f = _write(rd / "history" / "producer-0.jsonl", [])
    res = ingest.ingest(rd, [str(f)])
    assert res.records == 0 and pq.read_table(res.dataset).num_rows == 0
