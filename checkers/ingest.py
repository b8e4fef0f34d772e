"""Histories in JSON Lines -> one Parquet dataset per run, converted once and reused.

Why: the history is written as JSON Lines because that is append-only and survives a SIGKILL
(docs/history-format.md), but JSON is the slowest thing a checker can read. Measured on this
2-core box, Spark's JSON reader parses about 200k history records/s; pyarrow's C++ JSON reader
parses about 1.3M/s, and Spark then scans the Parquet columns at several million rows/s. So the
first check of a run converts ``history/*.jsonl`` into ``history.parquet/`` (a manifest records
each source file's size and mtime; an unchanged run is never converted twice).

The files are cut into splits of at most :data:`SPLIT_BYTES` at line boundaries (a split owns
the lines that *start* inside it, as Hadoop's line reader does), so memory per converter is
bounded by the split, not the history. With a local master the driver converts the splits with
pyarrow's threads; with a cluster master (``spark://...``) each split is one Spark task, so the
conversion scales out with the workers (they must see the run directory at the same path, as
they must for Spark's own readers).

Torn and malformed lines: a SIGKILL can leave the last line of a file without its newline; it
is not a record and is skipped. A line that is not a JSON object with the schema's types
(``workloads.history.FIELDS``) is dropped and counted (``bad_lines`` in the checker's
section of verdict.json), never guessed at - the same rule as Spark's PERMISSIVE reader,
made visible.
"""
from __future__ import annotations

import io
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from workloads import history as H

#: bytes per conversion split: bounds converter memory (about 3x this) independently of history size
SPLIT_BYTES = 64 * 1024 * 1024
#: the converted dataset and its manifest, inside the run directory
DATASET = "history.parquet"
MANIFEST = "_faultline_manifest.json"
#: bump when the conversion changes, so old datasets are rebuilt
FORMAT = 1

_ARROW_TYPES = {"int": "int32", "long": "int64", "double": "float64", "string": "string", "boolean": "bool"}
_REQUIRED = ("type", "f", "process")


def arrow_schema():  # -> pyarrow.Schema (imported lazily: the harness imports this module's callers)
    import pyarrow as pa
    return pa.schema([pa.field(n, pa.type_for_alias(_ARROW_TYPES[t])) for n, t in H.FIELDS.items()])


@dataclass(frozen=True)
class Split:
    path: str
    start: int
    end: int
    index: int


@dataclass
class IngestResult:
    dataset: Path
    records: int
    bad_lines: int
    torn_lines: int
    converted: bool        # False: an existing, up-to-date dataset was reused
    seconds: float = 0.0


def plan_splits(files: Iterable[str | Path], split_bytes: int = SPLIT_BYTES) -> list[Split]:
    out: list[Split] = []
    for f in files:
        size = os.path.getsize(f)
        for start in range(0, max(size, 1), split_bytes):
            out.append(Split(str(f), start, min(size, start + split_bytes), len(out)))
    return out


def _read_split(s: Split) -> tuple[bytes, int]:
    """The complete lines starting in ``[start, end)``, and 1 if the file's cut tail was dropped."""
    with open(s.path, "rb") as fh:
        if s.start > 0:
            fh.seek(s.start - 1)
            fh.readline()                 # the line in progress at start belongs to the previous split
        begin = fh.tell()
        if begin >= s.end and s.start > 0:
            return b"", 0
        buf = fh.read(max(0, s.end - begin))
        if buf and not buf.endswith(b"\n"):
            buf += fh.readline()          # finish the last line that started inside the split
    torn = 0
    if buf and not buf.endswith(b"\n"):   # end of file without a newline: a torn (SIGKILLed) write
        cut = buf.rfind(b"\n") + 1
        torn, buf = 1, buf[:cut]
    return buf, torn


def _coerce(rec: Any, types: dict[str, str]) -> dict[str, Any] | None:
    """One decoded line as a row of the schema, or None when a field has the wrong type."""
    if not isinstance(rec, dict):
        return None
    row: dict[str, Any] = {}
    for name, t in types.items():
        v = rec.get(name)
        if v is None:
            row[name] = None
        elif t in ("int", "long"):
            if isinstance(v, bool) or not isinstance(v, int):
                return None
            row[name] = v
        elif t == "double":
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return None
            row[name] = float(v)
        elif t == "string":
            if not isinstance(v, str):
                return None
            row[name] = v
        elif t == "boolean":
            if not isinstance(v, bool):
                return None
            row[name] = v
    return row


def _parse(buf: bytes):
    """pyarrow's reader for the whole buffer; line by line only when some line is bad."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    schema = arrow_schema()
    bad = 0
    try:
        table = pj.read_json(io.BytesIO(buf), read_options=pj.ReadOptions(block_size=8 << 20),
                             parse_options=pj.ParseOptions(explicit_schema=schema,
                                                           unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        rows = []
        for line in buf.splitlines():
            if not line.strip():
                continue
            try:
                row = _coerce(json.loads(line), H.FIELDS)
            except ValueError:
                row = None
            if row is None:
                bad += 1
            else:
                rows.append(row)
        table = pa.Table.from_pylist(rows, schema=schema)
    keep = pc.and_(pc.and_(pc.is_valid(table["type"]), pc.is_valid(table["f"])), pc.is_valid(table["process"]))
    kept = table.filter(keep)
    return kept, bad + (table.num_rows - kept.num_rows)


def convert_split(s: Split, out_dir: str) -> tuple[int, int, int]:
    """Convert one split to ``out_dir/part-NNNNN.parquet``; return (records, bad lines, torn lines)."""
    import pyarrow.parquet as pq

    buf, torn = _read_split(s)
    if not buf.strip():
        return 0, 0, torn
    table, bad = _parse(buf)
    if table.num_rows:
        tmp = os.path.join(out_dir, f".part-{s.index:05d}.tmp")
        pq.write_table(table, tmp, compression="snappy")
        os.replace(tmp, os.path.join(out_dir, f"part-{s.index:05d}.parquet"))
    return table.num_rows, bad, torn


def _fingerprint(files: list[str]) -> dict[str, Any]:
    return {"format": FORMAT, "files": {os.path.basename(f): [os.path.getsize(f), os.stat(f).st_mtime_ns] for f in files}}


def ingest(run_dir: str | os.PathLike[str], files: list[str],
           run_splits: Callable[[list[Split], str], list[tuple[int, int, int]]] | None = None) -> IngestResult:
    """Make ``RUN/history.parquet`` current; ``run_splits`` converts splits elsewhere (Spark tasks)."""
    import time

    import pyarrow.parquet as pq

    started = time.time()
    rd = Path(run_dir)
    out = rd / DATASET
    fp = _fingerprint(files)
    man = out / MANIFEST
    if man.exists():
        try:
            old = json.loads(man.read_text(encoding="utf-8"))
        except ValueError:
            old = {}
        if old.get("source") == fp:
            return IngestResult(out, int(old.get("records", 0)), int(old.get("bad_lines", 0)),
                                int(old.get("torn_lines", 0)), False, time.time() - started)
    tmp = rd / f".{DATASET}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    splits = plan_splits(files)
    if run_splits is not None:
        results = run_splits(splits, str(tmp))
    else:
        results = [convert_split(s, str(tmp)) for s in splits]
    records = sum(r[0] for r in results)
    if not any(tmp.glob("part-*.parquet")):   # Spark cannot read a dataset without one file
        pq.write_table(arrow_schema().empty_table(), tmp / "part-00000.parquet")
    meta = {"source": fp, "records": records, "bad_lines": sum(r[1] for r in results),
            "torn_lines": sum(r[2] for r in results)}
    (tmp / MANIFEST).write_text(json.dumps(meta), encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return IngestResult(out, records, meta["bad_lines"], meta["torn_lines"], True, time.time() - started)
