"""Poll skips count the *distinct* offsets a poll jumped over (checkers/polls.py).

A partition's real file-format history, converted by the ingest and loaded as the kernel loads
it, then the poll-order family on it. The observed log holds (offset, value) pairs, so an offset
two readers saw with different values is in it twice; a skip over it is still one offset.
"""
from __future__ import annotations

from pathlib import Path

from checkers import ingest
from checkers.partition import load
from checkers.polls import poll_order
from tests.checkers.builder import HistoryBuilder

TOPIC = "orders"


def _partition(tmp_path: Path, stray_at_1: bool):
    b = HistoryBuilder()
    values = [f"producer-0-{i}" for i in range(4)]
    for off, v in enumerate(values):
        b.send("producer-0", TOPIC, 0, v, off, 1.0 + off)
    b.poll("consumer-1", TOPIC, 0, list(enumerate(values)), 6.0)
    if stray_at_1:                     # another reader saw another value at offset 1
        b.poll("consumer-2", TOPIC, 0, [(1, "stray")], 6.5)
    b.poll("consumer-0", TOPIC, 0, [(0, values[0])], 7.0)
    b.poll("consumer-0", TOPIC, 0, [(3, values[3])], 8.0)    # jumps offsets 1 and 2
    rd = b.write(tmp_path / ("stray" if stray_at_1 else "plain"))
    ingest.ingest(rd, sorted(str(f) for f in (rd / "history").glob("*.jsonl")))
    pf = next(p for p in ingest.partition_files(rd / ingest.DATASET) if p.partition == 0)
    return load(pf.files, pf.topic, pf.partition)


def test_a_skip_over_an_offset_seen_with_two_values_counts_it_once(tmp_path: Path) -> None:
    for stray in (False, True):
        cols, n = poll_order(_partition(tmp_path, stray))["poll_skip"]
        assert n == 1, stray
        assert list(cols["skipped"]) == [2], stray
        assert list(cols["first_skipped_offset"]) == [1], stray
