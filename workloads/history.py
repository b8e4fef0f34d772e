"""The history format: the one contract between the clients that record and the checkers.

Why a module of its own: the writer (producers, consumers, drain, observer) and the
reader (the Spark checkers, which may run on workers without the harness) must agree to
the letter, so both import this stdlib-only module. The format is documented in
``docs/history-format.md``; bump ``SCHEMA_VERSION`` on any incompatible change.

Durability: histories are append-only JSON Lines, one file per process, flushed
at least every ``FLUSH_INTERVAL_S`` seconds, so a harness killed with SIGKILL leaves a
prefix that :func:`read_history` still reads up to its last complete line.
"""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

SCHEMA_VERSION = 1
FLUSH_INTERVAL_S = 0.2

#: operation types, as Jepsen names them
INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
TYPES = (INVOKE, OK, FAIL, INFO)

#: operation functions
SEND, POLL, DRAIN, DRAIN_END, OBSERVE = "send", "poll", "drain", "drain-end", "observe"
FUNCTIONS = (SEND, POLL, DRAIN, DRAIN_END, OBSERVE)

#: the columns of one history record, in the order the checkers' schema declares them
FIELDS: dict[str, str] = {
    "v": "int",          # schema version
    "t": "double",       # seconds on the run's monotonic clock (groundwork.clock)
    "process": "string", # writer id, e.g. "producer-0", "consumer-1", "drain"
    "op": "long",        # per-process operation index: links an invoke to its completion
    "type": "string",    # invoke | ok | fail | info
    "f": "string",       # send | poll | drain | drain-end | observe
    "topic": "string",
    "partition": "int",
    "offset": "long",
    "value": "string",   # unique, self-describing: "<process>-<seq>"
    "error": "string",   # Kafka error name (kio.schema.errors) or client error name
    "error_code": "int",
}


def make_value(process: str, seq: int) -> str:
    """A unique, self-describing message value: which producer wrote it and its sequence."""
    return f"{process}-{seq}"


def parse_value(value: str) -> tuple[str, int]:
    """Inverse of :func:`make_value` (the producer id may itself contain dashes)."""
    process, _, seq = value.rpartition("-")
    return process, int(seq)


def record(
    *,
    t: float,
    process: str,
    op: int,
    type: str,
    f: str,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
    value: str | None = None,
    error: str | None = None,
    error_code: int | None = None,
) -> dict[str, Any]:
    """Build one history record with every schema field present (null where unknown)."""
    if type not in TYPES:
        raise ValueError(f"history type must be one of {TYPES}, got {type!r}")
    if f not in FUNCTIONS:
        raise ValueError(f"history f must be one of {FUNCTIONS}, got {f!r}")
    return {
        "v": SCHEMA_VERSION, "t": t, "process": process, "op": op, "type": type, "f": f,
        "topic": topic, "partition": partition, "offset": offset, "value": value,
        "error": error, "error_code": error_code,
    }


class JsonlWriter:
    """Append-only JSON Lines file, flushed to the OS at least every FLUSH_INTERVAL_S.

    Thread-safe: confluent-kafka delivery callbacks run on the polling thread while
    invokes are written from the sending thread. Each line is written whole under a
    lock, so a SIGKILL can cut at most the last line.
    """

    def __init__(self, path: str | os.PathLike[str], flush_interval: float = FLUSH_INTERVAL_S):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8", buffering=1 << 16)
        self._lock = threading.Lock()
        self._interval = flush_interval
        self._last_flush = time.monotonic()
        self._closed = False
        self._flusher = threading.Thread(target=self._flush_loop, daemon=True,
                                         name=f"flush-{self.path.name}")
        self._flusher.start()

    def write(self, rec: dict[str, Any]) -> None:
        line = json.dumps(rec, separators=(",", ":")) + "\n"
        with self._lock:
            if self._closed:
                raise ValueError(f"history {self.path} is closed")
            self._fh.write(line)
            now = time.monotonic()
            if now - self._last_flush >= self._interval:
                self._fh.flush()
                self._last_flush = now

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._fh.flush()
                self._last_flush = time.monotonic()

    def _flush_loop(self) -> None:
        while True:
            time.sleep(self._interval / 2)
            with self._lock:
                if self._closed:
                    return
                if time.monotonic() - self._last_flush >= self._interval / 2:
                    self._fh.flush()
                    self._last_flush = time.monotonic()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._closed = True

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class ReadStats:
    """What :func:`read_jsonl` skipped: a cut last line is expected after a SIGKILL."""
    lines: int = 0
    torn_tail: bool = False
    bad_lines: int = 0


def read_jsonl(path: str | os.PathLike[str], stats: ReadStats | None = None) -> Iterator[dict[str, Any]]:
    """Read a JSON Lines file up to its last complete line.

    A final line without its newline (the writer was killed mid-write) is ignored and
    noted in ``stats.torn_tail``; an undecodable complete line is counted, not fatal.
    """
    st = stats if stats is not None else ReadStats()
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                st.torn_tail = True
                break
            st.lines += 1
            try:
                yield json.loads(raw)
            except ValueError:
                st.bad_lines += 1


def history_files(run_dir: str | os.PathLike[str]) -> list[Path]:
    """The history files of a run directory: ``RUN/history/*.jsonl``."""
    return sorted((Path(run_dir) / "history").glob("*.jsonl"))


def acked_missing_from_drain(run_dir: Path) -> int | None:
    """Acknowledged values (``send`` oks) that the final drain did not read, straight from a
    run's histories: the user's question asked without Spark, for a quick yes/no (shrinking
    decides "still loses?" with it) and as a cross-check of the checker's lost_write. None when
    no ``drain-end`` record says the drain read its partitions to the end - then only the
    checker can tell."""
    acked, drained, ended = set(), set(), False
    for f in sorted((run_dir / "history").glob("*.jsonl")):
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if '"ok"' not in line:
                    continue
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                if d.get("type") != "ok":
                    continue
                fn = d.get("f")
                if fn == "send":
                    acked.add((d.get("topic"), d.get("value")))
                elif fn == "drain":
                    drained.add((d.get("topic"), d.get("value")))
                elif fn == "drain-end":
                    ended = True
    return len(acked - drained) if ended else None


def send_errors(run_dir: Path) -> dict[str, int]:
    """Sends that ended ``fail``/``info``, per Kafka error name, straight from the producers'
    histories (a torn last line is skipped): whether a campaign reached the state it tests,
    e.g. NOT_ENOUGH_REPLICAS below min ISR (an expectation's ``require_errors``)."""
    counts: dict[str, int] = {}
    for f in sorted((Path(run_dir) / "history").glob("producer-*.jsonl")):
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if '"fail"' not in line and '"info"' not in line:
                    continue
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("type") in ("fail", "info") and r.get("f") == "send" and r.get("error"):
                    counts[str(r["error"])] = counts.get(str(r["error"]), 0) + 1
    return counts
