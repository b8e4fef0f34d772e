"""``workloads.history.acked_missing_from_drain``: the Spark-free "did the drain miss an
acknowledged write?" that shrinking and the KIP-903 benchmark ask of a run's histories.

Hand-built histories in the documented format (docs/history-format.md): a write acknowledged
but never read back by the final drain is counted; an acknowledged write the drain read, a
failed send and a write that was never acknowledged are not; without a ``drain-end`` record
the drain may have stopped early, so the answer is "unknown" (None), not 0.
"""
from __future__ import annotations

import json
from pathlib import Path

from workloads.history import acked_missing_from_drain


def _write(run: Path, name: str, records: list[dict]) -> None:
    (run / "history").mkdir(parents=True, exist_ok=True)
    with open(run / "history" / name, "a", encoding="utf-8") as fh:
        for i, r in enumerate(records):
            fh.write(json.dumps({"process": name, "op": i, "topic": "t", "partition": 0, **r}) + "\n")


def _history(run: Path, drain_end: bool) -> None:
    _write(run, "producer-0.jsonl", [
        {"type": "invoke", "f": "send", "value": "p0-1"}, {"type": "ok", "f": "send", "value": "p0-1", "offset": 0},
        {"type": "invoke", "f": "send", "value": "p0-2"}, {"type": "ok", "f": "send", "value": "p0-2", "offset": 1},
        {"type": "invoke", "f": "send", "value": "p0-3"}, {"type": "fail", "f": "send", "value": "p0-3"},
        {"type": "invoke", "f": "send", "value": "p0-4"}, {"type": "info", "f": "send", "value": "p0-4"},
    ])
    _write(run, "drain.jsonl", [{"type": "ok", "f": "drain", "value": "p0-1", "offset": 0}]
           + ([{"type": "ok", "f": "drain-end", "offset": 1}] if drain_end else []))


def test_an_acknowledged_write_the_drain_did_not_read_is_counted(tmp_path: Path) -> None:
    _history(tmp_path, drain_end=True)
    assert acked_missing_from_drain(tmp_path) == 1          # p0-2: acked at offset 1, never read


def test_without_a_drain_end_the_answer_is_unknown(tmp_path: Path) -> None:
    _history(tmp_path, drain_end=False)
    assert acked_missing_from_drain(tmp_path) is None


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    _history(tmp_path, drain_end=True)
    with open(tmp_path / "history" / "drain.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"type": "ok", "f": "drain", "value": "p0-2", "off')   # a crash mid-line
    assert acked_missing_from_drain(tmp_path) == 1
