"""JSON Lines -> history.arrow: every complete record exactly once, bad lines counted, once per run.

No Spark here: the conversion is pyarrow (checkers/ingest.py); these are quick.
"""
from __future__ import annotations

import json
import os
from pathlib import Path


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
    files = [f for pf in ingest.partition_files(dataset) for f in pf.files]
    return sorted(op for f in files for op in ingest.read_part(f).column("op").to_pylist())


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


def test_numbers_outside_a_columns_range_are_bad_lines_not_a_crash(tmp_path):
    """A partition past int32 or an op past int64 is not a record of the schema: pyarrow
    refuses the buffer, and the line-by-line path must drop and count the line (it raised
    ArrowInvalid out of the ingest before)."""
    rd = tmp_path / "run"
    lines = [_rec(i) for i in range(6)]
    lines[1] = _rec(1, partition=99_999_999_999)
    lines[4] = _rec(4, op=1 << 70)
    lines[5] = _rec(5, offset=(1 << 63) - 1)                  # the edge of int64 is still a number
    _write(rd / "history" / "producer-0.jsonl", lines)
    res = ingest.ingest(rd, [str(rd / "history" / "producer-0.jsonl")])
    assert (res.records, res.bad_lines) == (4, 2)
    assert _ops(res.dataset) == [0, 2, 3, 5]


def test_lines_longer_than_the_read_slack_cross_split_ends_whole(tmp_path, monkeypatch):
    """A split reads a little past its end to finish its last line in one read; a line longer
    than that slack is finished by a second read. Every split size, with the slack forced tiny,
    must still give each record exactly once, and a torn tail is still counted once."""
    monkeypatch.setattr(ingest, "_TAIL_SLACK", 8)
    lines = [_rec(i, value=("x" * (i * 37 % 300)) + f"-{i}") for i in range(120)]
    f = _write(tmp_path / "run" / "history" / "producer-0.jsonl", lines, tail='{"v":1,"t":9.9,"process":"pro')
    for split in (1, 9, 64, 333, 4096, 1 << 20):
        out = tmp_path / f"out-{split}"
        out.mkdir()
        results = [ingest.convert_split(s, str(out)) for s in ingest.plan_splits([f], split_bytes=split)]
        assert sum(r[0] for r in results) == 120, split
        assert sum(r[2] for r in results) == 1, split
        assert sum(r[1] for r in results) == 0, split
        assert _ops(out) == list(range(120)), split


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
    assert res.records == 0 and sum(ingest.read_part(f).num_rows for pf in ingest.partition_files(res.dataset)
                                    for f in pf.files) == 0


def test_rows_land_in_their_topic_partition_in_line_order(tmp_path):
    """The partition kernel reads one directory per topic-partition; line order is kept
    (first completion wins), awkward topic names round-trip, and rows without a topic or a
    partition (a poll's invoke, a send that failed before partitioning) are kept apart."""
    rd = tmp_path / "run"
    topics = ["a/b", "x@y", "\u00fc", "plain"]
    lines = [_rec(i, topic=topics[i % 4], partition=i % 2) for i in range(400)]
    lines += [_rec(1000 + i, partition=None) for i in range(5)] + [_rec(2000, topic=None)]
    f1 = _write(rd / "history" / "producer-0.jsonl", lines[:200])
    f2 = _write(rd / "history" / "producer-1.jsonl", lines[200:])
    res = ingest.ingest(rd, [str(f1), str(f2)])
    pfs = ingest.partition_files(res.dataset)
    assert pfs[0].topic is None and pfs[0].partition is None            # unpartitioned first
    assert sorted(ingest.read_part(pfs[0].files[0]).column("op").to_pylist()) == [1000, 1001, 1002, 1003, 1004, 2000]
    got = {(pf.topic, pf.partition): pf for pf in pfs[1:]}
    assert set(got) == {(t, p) for i, t in enumerate(topics) for p in (i % 2,)}
    for (topic, part), pf in got.items():
        ops = [op for f in pf.files for op in ingest.read_part(f).column("op").to_pylist()]
        want = [i for i in range(400) if topics[i % 4] == topic]
        assert ops == want, topic                                      # every row, in line order
        t = ingest.read_part(pf.files[0])
        assert set(t.column("topic").to_pylist()) == {topic} and set(t.column("partition").to_pylist()) == {part}


def test_splits_of_one_partition_keep_file_order(tmp_path):
    f = _write(tmp_path / "run" / "history" / "producer-0.jsonl", [_rec(i, partition=0) for i in range(300)])
    out = tmp_path / "out"
    out.mkdir()
    for s in ingest.plan_splits([f], split_bytes=1000):
        ingest.convert_split(s, str(out))
    (pf,) = ingest.partition_files(out)
    assert len(pf.files) > 5
    assert [op for fl in pf.files for op in ingest.read_part(fl).column("op").to_pylist()] == list(range(300))


def test_an_older_faultlines_parquet_copy_is_replaced(tmp_path):
    """A run converted by a faultline before Arrow IPC part files holds ``history.parquet/``:
    derived data in a format nothing reads now. The first conversion removes it (and its lock
    file) and builds ``history.arrow/`` from the history itself."""
    rd = tmp_path / "run"
    f = _write(rd / "history" / "producer-0.jsonl", [_rec(i) for i in range(20)])
    old = rd / ingest.OLD_DATASET / "tp" / "t@0"
    old.mkdir(parents=True)
    (old / "part-producer-0.jsonl@0000000000000000.parquet").write_bytes(b"PAR1 not read")
    (rd / f".{ingest.OLD_DATASET}.lock").write_text("")
    res = ingest.ingest(rd, [str(f)])
    assert res.dataset == rd / ingest.DATASET and _ops(res.dataset) == list(range(20))
    assert not (rd / ingest.OLD_DATASET).exists() and not (rd / f".{ingest.OLD_DATASET}.lock").exists()
