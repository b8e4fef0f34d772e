"""Histories in JSON Lines -> one Parquet dataset per run, converted once and reused.

Why: the history is written as JSON Lines because that is append-only and survives a SIGKILL
(docs/history-format.md), but JSON is the slowest thing a checker can read. Measured on this
2-core box, Spark's JSON reader parses about 200k history records/s; pyarrow's C++ JSON reader
parses about 1.3M/s, and the partition kernel reads Parquet columns far faster still. So the
first check of a run converts ``history/*.jsonl`` into ``history.parquet/`` (a manifest records
each source file's size and mtime; an unchanged run is never converted twice).

The files are cut into splits of at most :data:`SPLIT_BYTES` at line boundaries (a split owns
the lines that *start* inside it, as Hadoop's line reader does), so memory per converter is
bounded by the split, not the history. Each split is written as one Parquet file per
topic-partition it holds, ``history.parquet/tp/<quoted topic>@<partition>/part-<split>.parquet``,
rows in line order (rows with no topic or partition go to ``tp/unpartitioned/``): the partition
kernel (checkers/kernel.py) then reads each partition's files directly, with no shuffle. With a
local master the driver converts one split per core in threads (each parse single-threaded;
pyarrow releases the GIL, so parsing, splitting and writing all overlap: 13.1 s for 10M
records / 1.75 GB against 17.2 s one split at a time with pyarrow's own threads; the JSON
parse alone is about 8.5 s of it); with a cluster master (``spark://...``) each split is one
Spark task, so the conversion scales out with the workers (they must see the run directory at
the same path, as they must for Spark's own readers).

Torn and malformed lines: a SIGKILL can leave the last line of a file without its newline; it
is not a record and is skipped. A line that is not a JSON object with the schema's types
(``workloads.history.FIELDS``) is dropped and counted (``bad_lines`` in the checker's
section of verdict.json), never guessed at - the same rule as Spark's PERMISSIVE reader,
made visible. A number outside its column's range (a partition past int32) is the wrong type.

Why pyarrow and not a faster JSON reader: the parse is most of the first check's time (about
0.24 s of a 32 MB split's 0.35 s). DuckDB's reader parses the 10M-record benchmark history
into Arrow in 3.1 s on two cores (pyarrow: about 6.7 s), but it casts leniently - a
``"partition":"3"`` or ``3.5`` becomes a partition, an ``"op":true`` an op, ``"value":5`` a
string - where this reader must drop the line; DuckDB's ``json_transform_strict`` casts the
same way, and checking each field's JSON type in SQL took 14 s. Measured 2026-11 (DuckDB
2.0); not a dependency.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import quote, unquote

from workloads import history as H

#: bytes per conversion split: bounds converter memory (about 3x this) independently of history size
SPLIT_BYTES = 32 * 1024 * 1024
#: columns with few distinct values, dictionary-encoded in the Parquet files; the others
#: (values, times, offsets) are nearly unique, and trying a dictionary for them took a 64 MB
#: split's write from 0.07 s to 0.12 s for nothing
DICTIONARY_COLUMNS = ["process", "type", "f", "topic", "error"]
#: the converted dataset and its manifest, inside the run directory
DATASET = "history.parquet"
MANIFEST = "_faultline_manifest.json"
#: bump when the conversion changes, so old datasets are rebuilt (2: files by topic-partition)
FORMAT = 2
#: the per-partition directories, inside the dataset
TP_DIR = "tp"
UNPARTITIONED = "unpartitioned"   # no "@", so never a topic-partition; no "_" or "." prefix, which readers skip

_ARROW_TYPES = {"int": "int32", "long": "int64", "double": "float64", "string": "string", "boolean": "bool"}
_REQUIRED = ("type", "f", "process")
_INT_RANGE = {"int": (-(1 << 31), (1 << 31) - 1), "long": (-(1 << 63), (1 << 63) - 1)}


def arrow_schema():  # -> pyarrow.Schema (imported lazily: the harness imports this module's callers)
    import pyarrow as pa
    return pa.schema([pa.field(n, pa.type_for_alias(_ARROW_TYPES[t])) for n, t in H.FIELDS.items()])


@dataclass(frozen=True)
class Split:
    path: str
    start: int
    end: int
    index: int


@dataclass(frozen=True)
class PartitionFiles:
    """One topic-partition's converted files, in split order (= file-list order, then line order)."""
    topic: str | None
    partition: int | None
    files: tuple[str, ...]


def partition_dir(topic: str | None, partition: int | None) -> str:
    """``<quoted topic>@<partition>``: '@' is always quoted, so the split is unambiguous."""
    if topic is None or partition is None:
        return UNPARTITIONED
    return f"{quote(topic, safe='')}@{partition}"


def partition_files(dataset: str | os.PathLike[str]) -> list[PartitionFiles]:
    """Every topic-partition of a converted dataset; the unpartitioned group first."""
    root = Path(dataset) / TP_DIR
    out: list[PartitionFiles] = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        files = tuple(sorted(str(f.resolve()) for f in d.glob("part-*.parquet")))
        if not files:
            continue
        if d.name == UNPARTITIONED:
            out.append(PartitionFiles(None, None, files))
        else:
            topic, _, part = d.name.rpartition("@")
            out.append(PartitionFiles(unquote(topic), int(part), files))
    return sorted(out, key=lambda pf: (pf.partition is not None, pf.topic or "", pf.partition or 0))


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


#: bytes read past a split's end in the same read, to finish its last line without a copy
_TAIL_SLACK = 64 * 1024
_NON_SPACE = re.compile(rb"\S")


def _read_split(s: Split) -> tuple[memoryview, int]:
    """The complete lines starting in ``[start, end)``, and 1 if the file's cut tail was dropped.

    One read into one buffer, sliced by memoryview: joining the last line's tail onto a 32 MB
    split, or cutting a torn line off it, copied the whole split (about 0.05 s of a split's
    0.4 s conversion, measured).
    """
    with open(s.path, "rb") as fh:
        if s.start > 0:
            fh.seek(s.start - 1)
            fh.readline()                 # the line in progress at start belongs to the previous split
        begin = fh.tell()
        if begin >= s.end and s.start > 0:
            return memoryview(b""), 0
        want = max(0, s.end - begin)
        buf = bytearray(want + _TAIL_SLACK)
        got = fh.readinto(buf)
        data = memoryview(buf)[:got]
        if got > want:                    # finish the last line that started inside the split
            nl = buf.find(b"\n", max(0, want - 1), got)
            if nl >= 0:
                data = data[:nl + 1]
            elif got == len(buf):         # a line longer than the slack: read on (rare, copies)
                more = fh.readline()
                data = memoryview(bytes(data) + more)
    torn = 0
    if len(data) and data[-1] != 0x0A:    # end of file without a newline: a torn (SIGKILLed) write
        cut = bytes(data).rfind(b"\n") + 1
        torn, data = 1, data[:cut]
    return data, torn


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
            if isinstance(v, bool) or not isinstance(v, int) or not _INT_RANGE[t][0] <= v <= _INT_RANGE[t][1]:
                return None   # out of the column's range is the wrong type too (it crashed the ingest)
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


def _parse(buf: bytes | memoryview, use_threads: bool = True):
    """pyarrow's reader for the whole buffer; line by line only when some line is bad."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    schema = arrow_schema()
    bad = 0
    try:
        table = pj.read_json(pa.BufferReader(pa.py_buffer(buf)), read_options=pj.ReadOptions(block_size=8 << 20, use_threads=use_threads),
                             parse_options=pj.ParseOptions(explicit_schema=schema,
                                                           unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        rows = []
        for line in bytes(buf).splitlines():
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


def convert_split(s: Split, out_dir: str, use_threads: bool = True) -> tuple[int, int, int]:
    """Convert one split to ``out_dir/tp/<partition>/part-NNNNN.parquet`` (one file per
    topic-partition it holds, rows in line order); return (records, bad lines, torn lines)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    buf, torn = _read_split(s)
    if _NON_SPACE.search(buf) is None:
        return 0, 0, torn
    table, bad = _parse(buf, use_threads)
    del buf
    if table.num_rows:
        topic = pc.dictionary_encode(table["topic"].combine_chunks())
        names = topic.dictionary.to_pylist()
        tcode = pc.fill_null(topic.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        part = pc.fill_null(table["partition"], -1).to_numpy(zero_copy_only=False).astype(np.int64)
        unpart = (tcode < 0) | pc.is_null(table["partition"]).to_numpy(zero_copy_only=False)
        key = np.where(unpart, -1, tcode * (1 << 32) + part)
        order = np.argsort(key, kind="stable")          # stable: line order within a partition
        skey = key[order]
        starts = np.flatnonzero(np.r_[True, skey[1:] != skey[:-1]])
        ends = np.r_[starts[1:], len(skey)]
        for a, b in zip(starts, ends):
            i = int(order[a])
            d = os.path.join(out_dir, TP_DIR, partition_dir(None if unpart[i] else names[tcode[i]],
                                                            None if unpart[i] else int(part[i])))
            os.makedirs(d, exist_ok=True)
            tmp = os.path.join(d, f".part-{s.index:05d}.tmp")
            rows = table if (a == 0 and b == len(skey)) else table.take(pa.array(order[a:b]))
            pq.write_table(rows, tmp, compression="snappy", use_dictionary=DICTIONARY_COLUMNS)
            os.replace(tmp, os.path.join(d, f"part-{s.index:05d}.parquet"))
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
        # one split per core, each parsed single-threaded: the parse, the split by partition
        # and the Parquet writing all run in parallel (pyarrow releases the GIL)
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            results = list(pool.map(lambda sp: convert_split(sp, str(tmp), use_threads=False), splits))
    records = sum(r[0] for r in results)
    if not any(tmp.glob(f"{TP_DIR}/*/part-*.parquet")):   # a dataset always has one file
        (tmp / TP_DIR / UNPARTITIONED).mkdir(parents=True, exist_ok=True)
        pq.write_table(arrow_schema().empty_table(), tmp / TP_DIR / UNPARTITIONED / "part-00000.parquet")
    meta = {"source": fp, "records": records, "bad_lines": sum(r[1] for r in results),
            "torn_lines": sum(r[2] for r in results)}
    (tmp / MANIFEST).write_text(json.dumps(meta), encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return IngestResult(out, records, meta["bad_lines"], meta["torn_lines"], True, time.time() - started)
