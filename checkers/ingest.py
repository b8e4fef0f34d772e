"""Histories in JSON Lines -> one Arrow IPC dataset per run, converted while they grow.

Why: the history is written as JSON Lines because that is append-only and survives a SIGKILL
(docs/history-format.md), but JSON is the slowest thing a checker can read. Measured on this
2-core box, Spark's JSON reader parses about 200k history records/s; pyarrow's C++ JSON reader
parses about 1.3M/s, and the partition kernel reads memory-mapped Arrow columns far faster still. So
``history/*.jsonl`` becomes ``history.arrow/``, and because the files only ever grow, the
conversion is done in *rounds*, each converting what was appended since the last one: during
the run (checkers/follow.py runs rounds in the background, whole flushed lines only), so that
after the run only the tail is left, and at the check (the final round: everything, a torn
last line dropped and counted). A run never followed (an old run, ``faultline check``) is
converted from scratch by that same final round.

What a round covered is recorded in a manifest, ``history.arrow/_faultline_manifest.json``,
written atomically (temporary file, rename) after the round's files: per history file the byte
offset converted up to (plus a CRC of the 4 KiB before it, so a file rewritten rather than
appended to is noticed and converted from scratch). Part files are named by the history file
and the byte offset where their lines start; one whose start is not below the recorded offset
of its file was written by a round that did not finish (the harness died in it) and is never
trusted: the next round deletes it and converts those bytes again. A flock on
``RUN/.history.arrow.lock`` keeps two converters of one run from interleaving rounds.

The files are cut into splits of at most :data:`SPLIT_BYTES` (a split owns the lines that
*start* inside it, as Hadoop's line reader does), so memory per converter is bounded by the
split, not the history. Each split is written as one Arrow IPC file per topic-partition it holds,
``history.arrow/tp/<quoted topic>@<partition>/part-<quoted history file>@<offset>.arrow``,
rows in line order (rows with no topic or partition go to ``tp/unpartitioned/``): the partition
kernel (checkers/kernel.py) then reads each partition's files directly, with no shuffle, in
(history file, offset) order - file order, then line order, however the rounds cut them, so a
followed history and one converted from scratch give the same rows in the same order. With a
local master the driver converts one split per core in threads (each parse single-threaded;
pyarrow releases the GIL, so parsing, splitting and writing all overlap: 13.1 s for 10M
records / 1.75 GB against 17.2 s one split at a time with pyarrow's own threads; the JSON
parse alone is about 8.5 s of it); with a cluster master (``spark://...``) each split of the
final round is one Spark task, so the conversion scales out with the workers (they must see
the run directory at the same path, as they must for Spark's own readers).

Torn and malformed lines: a SIGKILL can leave the last line of a file without its newline; it
is not a record and is skipped (a round during the run stops before it: its writer may still
finish it). A line that is not a JSON object with the schema's types
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

import fcntl
import json
import os
import re
import shutil
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import quote, unquote

from workloads import history as H

# why Arrow IPC files and not Parquet: the kernel reads each partition's files whole, and an
# uncompressed IPC file is memory-mapped, not decoded - Parquet's decode was a third of the
# partition kernel's time (0.25 of 0.72 s per million records, one core), and its snappy and
# dictionary encoding cost the conversion more than writing IPC does (low-cardinality columns
# stay dictionary-encoded in IPC too). The price is disk: about 5x Parquet's size, under half
# the JSON Lines history it is derived from.
#: bytes per conversion split: bounds converter memory (about 3x this) independently of history size
SPLIT_BYTES = 32 * 1024 * 1024
#: columns with few distinct values, dictionary-encoded in the part files and read so by the
#: kernel (checkers/partition.py codes them); the others (values, times, offsets) are nearly
#: unique, and ``error``, null on almost every record, stays a plain string column
DICTIONARY_COLUMNS = ["process", "type", "f", "topic"]
#: the converted dataset and its manifest, inside the run directory
DATASET = "history.arrow"
#: the dataset's name before FORMAT 4 (Parquet part files): derived, removed when found
OLD_DATASET = "history.parquet"
MANIFEST = "_faultline_manifest.json"
#: bump when the conversion changes, so old datasets are rebuilt (2: files by topic-partition;
#: 3: part files named by history file and offset, converted in rounds; 4: Arrow IPC files)
FORMAT = 4
#: the run directory's lock file: one converter of a run at a time
LOCK = ".history.arrow.lock"
#: the file a dataset without any record holds, so readers always find one
EMPTY_PART = "part-empty.arrow"
#: a part file's suffix
PART_SUFFIX = ".arrow"
#: bytes before a recorded offset whose CRC is kept: a file rewritten, not appended to, is noticed
TAIL_CHECK_BYTES = 4096
#: the per-partition directories, inside the dataset
TP_DIR = "tp"
UNPARTITIONED = "unpartitioned"   # no "@", so never a topic-partition; no "_" or "." prefix, which readers skip

_ARROW_TYPES = {"int": "int32", "long": "int64", "double": "float64", "string": "string", "boolean": "bool"}
_REQUIRED = ("type", "f", "process")
_INT_RANGE = {"int": (-(1 << 31), (1 << 31) - 1), "long": (-(1 << 63), (1 << 63) - 1)}


def arrow_schema():  # -> pyarrow.Schema (imported lazily: the harness imports this module's callers)
    import pyarrow as pa
    return pa.schema([pa.field(n, pa.type_for_alias(_ARROW_TYPES[t])) for n, t in H.FIELDS.items()])


def part_schema():  # -> pyarrow.Schema: the part files' (low-cardinality strings dictionary-encoded)
    import pyarrow as pa
    return pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), f.type)) if f.name in DICTIONARY_COLUMNS else f
                      for f in arrow_schema()])


def write_part(table, path: str | os.PathLike[str]) -> None:
    """Write ``table`` (of :func:`arrow_schema`) as one part file at ``path`` (not atomically:
    callers write a temporary name and rename)."""
    _write_encoded(encode_part(table), path)


def encode_part(table):  # -> pyarrow.Table of :func:`part_schema`, one chunk per column
    """``table`` (of :func:`arrow_schema`) with :data:`DICTIONARY_COLUMNS` dictionary-encoded."""
    import pyarrow as pa
    import pyarrow.compute as pc
    schema = part_schema()
    cols = [table[f.name].combine_chunks() for f in schema]
    cols = [pc.dictionary_encode(c) if pa.types.is_dictionary(f.type) else c for c, f in zip(cols, schema)]
    return pa.Table.from_arrays(cols, schema=schema)


def _write_encoded(table, path: str | os.PathLike[str]) -> None:
    import pyarrow as pa
    with pa.OSFile(os.fspath(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)


def read_part(path: str | os.PathLike[str]):  # -> pyarrow.Table of :func:`part_schema`
    """One part file, memory-mapped (its columns are views of the page cache, not copies)."""
    import pyarrow as pa
    with pa.memory_map(os.fspath(path), "r") as src:
        return pa.ipc.open_file(src).read_all()


@dataclass(frozen=True)
class Split:
    """The lines of one history file that start in ``[start, end)``."""
    path: str
    start: int
    end: int

    @property
    def part(self) -> str:
        """This split's part file name (without :data:`PART_SUFFIX`) in every partition directory."""
        return part_name(os.path.basename(self.path), self.start)


def part_name(history_file: str, start: int) -> str:
    """``part-<quoted history file>@<start offset>``: '@' is always quoted, so the split is unambiguous."""
    return f"part-{quote(history_file, safe='')}@{start:016d}"


def part_key(name: str) -> tuple[str, int] | None:
    """(history file, start offset) of a part file name; None for any other name."""
    stem = name.removeprefix("part-").removesuffix(PART_SUFFIX)
    f, sep, start = stem.rpartition("@")
    if not sep or not start.isdigit() or not name.startswith("part-"):
        return None
    return unquote(f), int(start)


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
    """Every topic-partition of a converted dataset; the unpartitioned group first. A
    partition's files are in (history file, start offset) order: file order, then line order."""
    root = Path(dataset) / TP_DIR
    out: list[PartitionFiles] = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        parts = sorted(d.glob(f"part-*{PART_SUFFIX}"), key=lambda f: part_key(f.name) or ("", -1))
        files = tuple(str(f.resolve()) for f in parts)
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
    bytes: int = 0         # history bytes this call converted
    resumed_bytes: int = 0  # history bytes already converted before it (by rounds during the run)


def plan_splits(files: Iterable[str | Path], split_bytes: int = SPLIT_BYTES,
                starts: dict[str, int] | None = None, ends: dict[str, int] | None = None) -> list[Split]:
    """Splits of at most ``split_bytes`` covering each file from ``starts`` (default 0) to
    ``ends`` (default its size)."""
    out: list[Split] = []
    for f in files:
        lo = (starts or {}).get(str(f), 0)
        hi = (ends or {}).get(str(f), os.path.getsize(f))
        for start in range(lo, hi, split_bytes):
            out.append(Split(str(f), start, min(hi, start + split_bytes)))
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
        buf = fh.read(want + _TAIL_SLACK)  # not readinto a bytearray: zero-filling it cost 26 ms a split
        got = len(buf)
        data = memoryview(buf)
        if got > want:                    # finish the last line that started inside the split
            nl = buf.find(b"\n", max(0, want - 1), got)
            if nl >= 0:
                data = data[:nl + 1]
            elif got == want + _TAIL_SLACK:   # a line longer than the slack: read on (rare, copies)
                buf = buf + fh.readline()
                data = memoryview(buf)
    torn = 0
    if len(data) and data[-1] != 0x0A:    # end of file without a newline: a torn (SIGKILLed) write
        cut = buf.rfind(b"\n", 0, len(data)) + 1
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
    if not any(table[c].null_count for c in _REQUIRED):
        return table, bad                 # the usual case: no copy of the table
    keep = pc.and_(pc.and_(pc.is_valid(table["type"]), pc.is_valid(table["f"])), pc.is_valid(table["process"]))
    kept = table.filter(keep)
    return kept, bad + (table.num_rows - kept.num_rows)


def convert_split(s: Split, out_dir: str, use_threads: bool = True) -> tuple[int, int, int]:
    """Convert one split to ``out_dir/tp/<partition>/<s.part>.arrow`` (one file per
    topic-partition it holds, rows in line order); return (records, bad lines, torn lines)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    buf, torn = _read_split(s)
    if _NON_SPACE.search(buf) is None:
        return 0, 0, torn
    table, bad = _parse(buf, use_threads)
    del buf
    if table.num_rows:
        # dictionary-encode once for the whole split, then cut: taking a partition's rows then
        # moves the low-cardinality columns' int32 codes, not their strings (each part file
        # carries the split's small dictionaries; the kernel unifies them)
        enc = encode_part(table)
        topic = enc["topic"].chunk(0)
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
            tmp = os.path.join(d, f".{s.part}.tmp")
            rows = enc if (a == 0 and b == len(skey)) else enc.take(pa.array(order[a:b]))
            _write_encoded(rows, tmp)
            os.replace(tmp, os.path.join(d, f"{s.part}{PART_SUFFIX}"))
    return table.num_rows, bad, torn


def _fingerprint(files: list[str]) -> dict[str, list[int]]:
    return {os.path.basename(f): [os.path.getsize(f), os.stat(f).st_mtime_ns] for f in files}


def _tail_crc(path: str, offset: int) -> int:
    """CRC32 of the :data:`TAIL_CHECK_BYTES` before ``offset``."""
    lo = max(0, offset - TAIL_CHECK_BYTES)
    with open(path, "rb") as fh:
        fh.seek(lo)
        return zlib.crc32(fh.read(offset - lo))


def last_line_end(path: str, lo: int, size: int) -> int:
    """The offset just past the last newline in ``[lo, size)``, or ``lo`` without one: a round
    during the run converts whole lines only (the writer may be in the middle of the next)."""
    block = 1 << 16
    with open(path, "rb") as fh:
        hi = size
        while hi > lo:
            a = max(lo, hi - block)
            fh.seek(a)
            nl = fh.read(hi - a).rfind(b"\n")
            if nl >= 0:
                return a + nl + 1
            hi = a
    return lo


@dataclass
class Manifest:
    """What the rounds so far covered: the dataset's ``_faultline_manifest.json``."""
    offsets: dict[str, int] = field(default_factory=dict)    # history file name -> bytes converted
    tails: dict[str, int] = field(default_factory=dict)      # file -> CRC32 of the bytes before its offset
    torn: dict[str, int] = field(default_factory=dict)       # file -> 1: the final round dropped its cut last line
    records: int = 0
    bad_lines: int = 0
    torn_lines: int = 0
    #: every file's [size, mtime_ns] when a final round ended: the same files again need no round
    complete: dict[str, list[int]] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT,
                "files": {f: {"offset": o, "tail_crc": self.tails.get(f, 0), "torn": self.torn.get(f, 0)}
                          for f, o in sorted(self.offsets.items())},
                "records": self.records, "bad_lines": self.bad_lines, "torn_lines": self.torn_lines,
                "complete": self.complete}

    @classmethod
    def read(cls, path: Path) -> "Manifest | None":
        """The manifest at ``path``; None when absent, unreadable or of another format."""
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("format") != FORMAT:
                return None
            files = doc["files"]
            return cls({f: int(e["offset"]) for f, e in files.items()},
                       {f: int(e["tail_crc"]) for f, e in files.items()},
                       {f: int(e["torn"]) for f, e in files.items()},
                       int(doc["records"]), int(doc["bad_lines"]), int(doc["torn_lines"]), doc.get("complete"))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def write(self, path: Path) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.to_json()), encoding="utf-8")
        os.replace(tmp, path)

    def still_prefix(self, files: list[str]) -> bool:
        """Whether every file it covered still starts with the bytes it converted (only grew)."""
        by_name = {os.path.basename(f): f for f in files}
        for name, off in self.offsets.items():
            f = by_name.get(name)
            if f is None:
                return False
            size = os.path.getsize(f)
            if size < off or (self.torn.get(name) and size != off):
                return False   # shrank, or grew after its cut last line was dropped: not the same file
            if off and _tail_crc(f, off) != self.tails.get(name):
                return False
        return True


class _Locked:
    """flock on ``RUN/.history.arrow.lock`` for one round (released when the process dies)."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / LOCK

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def nice_this_thread(nice: int) -> None:
    """Lower this thread's CPU priority (Linux: nice is per thread, and a process forked from
    it inherits it): work done beside a run must not take the cores from the workload and the
    cluster it records. Only ever raised, which needs no privilege."""
    if nice:
        try:
            import threading
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        except (OSError, AttributeError):
            pass


class Converter:
    """Keeps ``RUN/history.arrow`` up to date with ``RUN/history/*.jsonl``, a round at a time."""

    def __init__(self, run_dir: str | os.PathLike[str], split_bytes: int = SPLIT_BYTES):
        self.rd = Path(run_dir)
        self.out = self.rd / DATASET
        self.split_bytes = split_bytes
        self._cleaned = False

    def _load(self, files: list[str]) -> tuple[Manifest, bool]:
        """The manifest to continue from and whether the dataset starts afresh. Part files a
        round wrote but the manifest does not cover (the converter died in the round) are
        deleted - once per converter, and again after one of its rounds raised."""
        man = Manifest.read(self.out / MANIFEST)
        if man is None or not man.still_prefix(files):
            shutil.rmtree(self.out, ignore_errors=True)
            shutil.rmtree(self.rd / OLD_DATASET, ignore_errors=True)   # an older faultline's copy
            (self.rd / f".{OLD_DATASET}.lock").unlink(missing_ok=True)
            (self.out / TP_DIR).mkdir(parents=True)
            self._cleaned = True
            return Manifest(), True
        if not self._cleaned and man.complete != _fingerprint(files):
            self._drop_untrusted(man)
        self._cleaned = True
        return man, False

    def _drop_untrusted(self, man: Manifest) -> None:
        root = self.out / TP_DIR
        for d in root.iterdir() if root.is_dir() else []:
            for p in d.iterdir():
                key = part_key(p.name)
                if p.name == EMPTY_PART:
                    continue
                if p.name.startswith(".") or key is None or key[1] >= man.offsets.get(key[0], 0):
                    p.unlink(missing_ok=True)

    def round(self, files: list[str], *, final: bool = True,
              due: Callable[[str, int, int], bool] | None = None,
              run_splits: Callable[[list[Split], str], list[tuple[int, int, int]]] | None = None,
              threads: int | None = None, nice: int = 0) -> IngestResult:
        """Convert what the files gained since the last round. ``final``: up to their ends,
        a torn last line dropped and counted, and the dataset marked complete; otherwise whole
        lines only, of the files ``due(file, converted up to, whole lines up to)`` picks (all
        with new lines by default). ``run_splits`` converts the splits elsewhere (Spark tasks);
        else ``threads`` driver threads (default one per core) at CPU niceness ``nice``."""
        started = time.time()
        files = [str(f) for f in files]
        with _Locked(self.rd):
            man, fresh = self._load(files)
            prints = _fingerprint(files)
            if final and not fresh and man.complete == prints:
                return IngestResult(self.out, man.records, man.bad_lines, man.torn_lines, False,
                                    time.time() - started, 0, sum(man.offsets.values()))
            starts = {f: man.offsets.get(os.path.basename(f), 0) for f in files}
            ends: dict[str, int] = {}
            for f in files:
                size = prints[os.path.basename(f)][0]
                end = size if final else last_line_end(f, starts[f], size)
                ends[f] = end if final or (end > starts[f] and (due is None or due(f, starts[f], end))) else starts[f]
            splits = plan_splits(files, self.split_bytes, starts=starts, ends=ends)
            if not final and not splits and not fresh and all(os.path.basename(f) in man.offsets for f in files):
                return IngestResult(self.out, man.records, man.bad_lines, man.torn_lines, False,
                                    time.time() - started, 0, sum(starts.values()))
            try:
                results = self._convert(splits, run_splits, threads, nice) if splits else []
            except BaseException:
                self._cleaned = False     # its part files are untrusted now: the next round drops them
                raise
            for f in files:
                name = os.path.basename(f)
                if ends[f] > starts[f] or name not in man.offsets:
                    man.offsets[name] = ends[f]
                    man.tails[name] = _tail_crc(f, ends[f]) if ends[f] else 0
                if final and ends[f] > starts[f]:
                    man.torn[name] = sum(r[2] for s, r in zip(splits, results) if s.path == f)
            man.records += sum(r[0] for r in results)
            man.bad_lines += sum(r[1] for r in results)
            man.torn_lines += sum(r[2] for r in results)
            man.complete = prints if final else None
            self._empty_marker(man.records == 0 and final)
            man.write(self.out / MANIFEST)
        done = sum(ends[f] - starts[f] for f in files)
        return IngestResult(self.out, man.records, man.bad_lines, man.torn_lines, fresh or done > 0,
                            time.time() - started, done, 0 if fresh else sum(starts.values()))

    def _convert(self, splits: list[Split], run_splits: Callable[[list[Split], str], list[tuple[int, int, int]]] | None,
                 threads: int | None, nice: int) -> list[tuple[int, int, int]]:
        out = str(self.out)
        if run_splits is not None:
            return run_splits(splits, out)
        # one split per thread, each parsed single-threaded: the parse, the split by partition
        # and the part files' writing all run in parallel (pyarrow releases the GIL)
        from concurrent.futures import ThreadPoolExecutor
        n = min(len(splits), max(1, threads or os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=n, initializer=nice_this_thread, initargs=(nice,)) as pool:
            return list(pool.map(lambda sp: convert_split(sp, out, use_threads=False), splits))

    def _empty_marker(self, want: bool) -> None:
        """A dataset always has one file (readers need a schema): an empty one when no records."""
        p = self.out / TP_DIR / UNPARTITIONED / EMPTY_PART
        if want and not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp = p.with_name(f".{EMPTY_PART}.tmp")
            write_part(arrow_schema().empty_table(), str(tmp))
            os.replace(tmp, p)
        elif not want and p.exists():
            p.unlink()


def ingest(run_dir: str | os.PathLike[str], files: list[str],
           run_splits: Callable[[list[Split], str], list[tuple[int, int, int]]] | None = None) -> IngestResult:
    """Make ``RUN/history.arrow`` complete: the final round (from scratch for a run no round
    followed); ``run_splits`` converts splits elsewhere (Spark tasks)."""
    return Converter(run_dir).round(files, final=True, run_splits=run_splits)
