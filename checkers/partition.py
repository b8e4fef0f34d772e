"""One topic-partition's history as columns: sends, reads, poll ops, the observed log.

Why columns per partition: every anomaly family asks its questions of one topic-partition
(docs/anomalies.md), and Spark's row engine spent about 1 us per row per derived frame on them
(71k records/s at 10M records on 2 cores). Here a partition's records are loaded once from its
Arrow IPC part files (checkers/ingest.py writes them by topic-partition) and every string the families
compare - values and process names - becomes a dense integer code, so the families are sorts,
prefix scans and array lookups in numpy. Value codes are *order-preserving* (the dictionary is
sorted), so "order by value" means what it meant in Spark SQL: byte order of the UTF-8 strings.

Jepsen's vocabulary, as before: a send is an invoke paired with its completion (ok / fail /
info) by ``(process, op)``; a send with no completion is indeterminate (``info``). If a writer
ever recorded two completions, ok wins over info wins over fail, and the first one in file order
gives the value, offset and error.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from checkers.evidence import Nullable
from workloads import history as H

#: function and type codes (anything else - an unknown type - counts as a completion, rank fail)
SEND, POLL, DRAIN, DRAIN_END = 0, 1, 2, 3
INVOKE, OK, INFO, FAIL, OTHER = 0, 1, 2, 3, 9
TYPE_NAMES = {OK: H.OK, INFO: H.INFO, FAIL: H.FAIL}
BIG = np.iinfo(np.int64).max


def _codes(col, names: Sequence[str], default: int) -> np.ndarray:
    """A string column (plain or dictionary-encoded chunks) -> int8 codes by name."""
    import pyarrow as pa
    import pyarrow.compute as pc
    parts = []
    for chunk in col.chunks:
        if pa.types.is_dictionary(chunk.type):
            table = np.array([names.index(x) if x in names else default for x in chunk.dictionary.to_pylist()]
                             + [default], dtype=np.int8)
            idx = pc.fill_null(chunk.indices, len(table) - 1).to_numpy(zero_copy_only=False)
            parts.append(table[idx])
        else:
            out = np.full(len(chunk), default, dtype=np.int8)
            for code, name in enumerate(names):
                out[pc.fill_null(pc.equal(chunk, name), False).to_numpy(zero_copy_only=False)] = code
            parts.append(out)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int8)


def _dict_codes(col) -> tuple[list, np.ndarray]:
    """(names, int64 codes; null -> len(names)) of a low-cardinality string column."""
    import pyarrow as pa
    import pyarrow.compute as pc
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr)
    names = arr.dictionary.to_pylist()
    return names, pc.fill_null(arr.indices, len(names)).to_numpy(zero_copy_only=False).astype(np.int64)


def _int(col, fill: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """(values with nulls filled, null mask) of an integer column."""
    import pyarrow.compute as pc
    null = pc.is_null(col).to_numpy(zero_copy_only=False)
    return pc.fill_null(col, fill).to_numpy(zero_copy_only=False).astype(np.int64), null


def group_starts(*keys: np.ndarray) -> np.ndarray:
    """Start index of every run of equal keys in already sorted key arrays."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)


def first_where(mask: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per group: index of the first row where ``mask`` holds, or -1."""
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64)
    pos = np.where(mask, np.arange(len(mask), dtype=np.int64), BIG)
    first = np.minimum.reduceat(pos, starts)
    return np.where(first == BIG, -1, first)


@dataclass
class Sends:
    """One row per send op (invoke + completion), in (process, op) order."""
    proc: np.ndarray          # process code
    op: np.ndarray
    vc: np.ndarray            # value code, -1 = null
    offset: Nullable
    type: np.ndarray          # OK / INFO / FAIL
    error: object             # pyarrow string array
    error_code: Nullable
    invoke_t: np.ndarray      # NaN = none
    complete_t: np.ndarray
    topic: np.ndarray | None = None   # topic code per send (only in the unpartitioned group)


@dataclass
class Reads:
    """One row per message read by a poll or the drain (type ok, offset known)."""
    proc: np.ndarray
    op: np.ndarray
    f: np.ndarray             # POLL / DRAIN
    t: np.ndarray
    offset: np.ndarray
    vc: np.ndarray


@dataclass
class PollOps:
    """One row per (reader process, op, f): the extent of one poll (or one drain fetch)."""
    proc: np.ndarray
    op: np.ndarray
    f: np.ndarray
    t_first: np.ndarray
    t_last: np.ndarray
    min_offset: np.ndarray
    max_offset: np.ndarray
    n: np.ndarray


@dataclass
class Partition:
    topic: str | None
    partition: int | None
    records: int
    processes: list[str]           # process code -> name
    values: object                 # pyarrow string array: value code -> value (sorted, so codes keep order)
    sends: Sends
    reads: Reads
    polls: PollOps
    drain_end: int | None
    drain_end_t: float | None
    topics: list[str | None] = field(default_factory=list)   # unpartitioned group: topic code -> name
    _log: tuple[np.ndarray, np.ndarray] | None = field(default=None, init=False, repr=False, compare=False)

    # -- derived, shared by several families ------------------------------------------------
    @property
    def n_values(self) -> int:
        return len(self.values)

    def ok_mask(self) -> np.ndarray:
        return (self.sends.type == OK) & ~self.sends.offset.null

    def read_flags(self) -> tuple[np.ndarray, np.ndarray]:
        """(read here, read here by the drain) per value code."""
        read = np.zeros(self.n_values + 1, dtype=bool)
        drained = np.zeros(self.n_values + 1, dtype=bool)
        r = self.reads
        read[r.vc] = True                # code -1 lands in the spare last slot and is ignored
        drained[r.vc[r.f == DRAIN]] = True
        read[-1] = drained[-1] = False
        return read[:-1], drained[:-1]

    def sent_flags(self) -> np.ndarray:
        """Values some send of this partition (any outcome) carried."""
        sent = np.zeros(self.n_values + 1, dtype=bool)
        sent[self.sends.vc] = True
        sent[-1] = False
        return sent[:-1]

    def log(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct observed log: (offset, value code) pairs read or acknowledged, sorted.
        Computed once (three families ask; a third of their time went to it) and read-only, so
        no family can change what the next one sees."""
        if self._log is None:
            self._log = self._observed_log()
            for a in self._log:
                a.flags.writeable = False
        return self._log

    def _observed_log(self) -> tuple[np.ndarray, np.ndarray]:
        ok = self.ok_mask()
        off = np.concatenate([self.reads.offset, self.sends.offset.values[ok]])
        vc = np.concatenate([self.reads.vc, self.sends.vc[ok]])
        if len(off) == 0:
            return off.astype(np.int64), vc.astype(np.int64)
        order = np.lexsort((vc, off))
        off, vc = off[order], vc[order]
        keep = np.ones(len(off), dtype=bool)
        keep[1:] = (off[1:] != off[:-1]) | (vc[1:] != vc[:-1])
        return off[keep], vc[keep]

    def max_read_offset(self) -> int | None:
        return int(self.polls.max_offset.max()) if len(self.polls.max_offset) else None

    def max_acked_offset(self) -> int | None:
        ok = self.ok_mask()
        return int(self.sends.offset.values[ok].max()) if ok.any() else None


def _pair_sends(t: np.ndarray, typ: np.ndarray, proc: np.ndarray, op: np.ndarray, op_null: np.ndarray,
                vc: np.ndarray, off: np.ndarray, off_null: np.ndarray, err, err_code: np.ndarray,
                err_code_null: np.ndarray, topic: np.ndarray | None) -> Sends:
    import pyarrow as pa
    keys = [op, op_null.astype(np.int8), proc] + ([topic] if topic is not None else [])
    order = np.lexsort(tuple(keys))              # stable: file order within a send
    t, typ, proc, op, vc, off, off_null = (a[order] for a in (t, typ, proc, op, vc, off, off_null))
    err_code, err_code_null = err_code[order], err_code_null[order]
    tp = topic[order] if topic is not None else None
    starts = group_starts(*(k[order] for k in keys))
    done = typ != INVOKE
    rank = np.select([typ == OK, typ == INFO, typ == INVOKE], [0, 1, 9], 2)
    if len(starts):
        invoke_t = np.fmin.reduceat(np.where(done, np.nan, t), starts)
        complete_t = np.fmin.reduceat(np.where(done, t, np.nan), starts)
        best = np.minimum.reduceat(rank, starts)
    else:
        invoke_t = complete_t = np.zeros(0)
        best = np.zeros(0, dtype=np.int64)
    stype = np.where(best == 0, OK, np.where(best == 2, FAIL, INFO)).astype(np.int8)
    c_val = first_where(done & (vc >= 0), starts)
    i_val = first_where(~done & (vc >= 0), starts)
    vpick = np.where(c_val >= 0, c_val, i_val)
    svc = np.where(vpick >= 0, vc[np.maximum(vpick, 0)], -1)
    o_ok = first_where((typ == OK) & ~off_null, starts)
    o_any = first_where(done & ~off_null, starts)
    opick = np.where(o_ok >= 0, o_ok, o_any)
    soff = Nullable(np.where(opick >= 0, off[np.maximum(opick, 0)], -1), opick < 0)
    erow = first_where(done & ~np.asarray(pa.compute.is_null(err).to_numpy(zero_copy_only=False))[order], starts)
    error = err.take(pa.array(order)).take(pa.array(np.maximum(erow, 0))) if len(starts) else pa.array([], pa.string())
    error = pa.compute.if_else(pa.array(erow < 0), pa.scalar(None, pa.string()), error) if len(starts) else error
    ecrow = first_where(done & ~err_code_null, starts)
    scode = Nullable(np.where(ecrow >= 0, err_code[np.maximum(ecrow, 0)], 0), ecrow < 0)
    return Sends(proc[starts], op[starts], svc, soff, stype, error, scode, invoke_t, complete_t,
                 tp[starts] if tp is not None else None)


def _poll_ops(r: Reads) -> PollOps:
    order = np.lexsort((r.f, r.op, r.proc))
    proc, op, f, t, off = r.proc[order], r.op[order], r.f[order], r.t[order], r.offset[order]
    s = group_starts(proc, op, f)
    if len(s) == 0:
        z = np.zeros(0, dtype=np.int64)
        return PollOps(z, z, z.astype(np.int8), np.zeros(0), np.zeros(0), z, z, z)
    return PollOps(proc[s], op[s], f[s], np.fmin.reduceat(t, s), np.fmax.reduceat(t, s),
                   np.minimum.reduceat(off, s), np.maximum.reduceat(off, s), np.diff(np.r_[s, len(off)]))


def load(files: Sequence[str], topic: str | None, partition: int | None) -> Partition:
    """Read one topic-partition's part files (file order = line order) into columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from checkers.ingest import part_schema, read_part

    # memory-mapped; low-cardinality strings stay dictionary-encoded (no string copies)
    tables = [read_part(f) for f in files]
    tb = pa.concat_tables(tables).unify_dictionaries() if tables else None
    if tb is None or tb.num_rows == 0:
        tb = part_schema().empty_table()
    n = tb.num_rows
    fcode = _codes(tb["f"], [H.SEND, H.POLL, H.DRAIN, H.DRAIN_END], 9)
    tcode = _codes(tb["type"], [H.INVOKE, H.OK, H.INFO, H.FAIL], OTHER)
    processes, proc = _dict_codes(tb["process"])
    processes.append(None)
    # order-preserving value codes: encode, sort the dictionary, renumber
    venc = pc.dictionary_encode(tb["value"].combine_chunks())
    vdict = venc.dictionary
    sort = np.asarray(pc.array_sort_indices(vdict).to_numpy(zero_copy_only=False), dtype=np.int64)
    rank = np.empty(len(sort), dtype=np.int64)
    rank[sort] = np.arange(len(sort))
    values = vdict.take(pa.array(sort))
    raw = pc.fill_null(venc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    vc = np.where(raw >= 0, rank[np.maximum(raw, 0)] if len(rank) else -1, -1)
    t = pc.fill_null(tb["t"], np.nan).to_numpy(zero_copy_only=False).astype(np.float64)
    op, op_null = _int(tb["op"])
    off, off_null = _int(tb["offset"])
    ec, ec_null = _int(tb["error_code"])
    topics: list[str | None] = []
    tcol = None
    if partition is None:   # the unpartitioned group mixes topics
        topics, tcol = _dict_codes(tb["topic"])
        topics.append(None)

    s = np.flatnonzero(fcode == SEND)
    sends = _pair_sends(t[s], tcode[s], proc[s], op[s], op_null[s], vc[s], off[s], off_null[s],
                        tb["error"].take(pa.array(s)), ec[s], ec_null[s], tcol[s] if tcol is not None else None)
    if partition is None:
        rm = np.zeros(n, dtype=bool)     # a read with no partition is not a read (docs/history-format.md)
    else:
        rm = ((fcode == POLL) | (fcode == DRAIN)) & (tcode == OK) & ~off_null
    reads = Reads(proc[rm], op[rm], fcode[rm], t[rm], off[rm], vc[rm])
    de = (fcode == DRAIN_END) & (tcode == OK) & ~off_null
    drain_end = int(off[de].max()) if partition is not None and de.any() else None
    drain_end_t = float(np.nanmax(t[de])) if drain_end is not None and not np.isnan(t[de]).all() else None
    return Partition(topic, partition, n, processes, values, sends, reads, _poll_ops(reads), drain_end,
                     drain_end_t, topics)


def value_strings(p: Partition, vc: np.ndarray):
    """Value codes -> a pyarrow string array (code -1 -> null)."""
    import pyarrow as pa
    vc = np.asarray(vc, dtype=np.int64)
    if len(p.values) == 0:
        return pa.nulls(len(vc), pa.string())
    return p.values.take(pa.array(np.maximum(vc, 0), mask=vc < 0))


def proc_strings(p: Partition, codes: np.ndarray) -> list[str]:
    return [p.processes[int(c)] for c in codes]


def tp_cols(p: Partition, n: int) -> dict[str, object]:
    """Topic and partition columns for ``n`` evidence rows of this partition (null partition: None)."""
    part = np.full(n, p.partition, dtype=np.int32) if p.partition is not None else None
    return {"topic": [p.topic] * n, "partition": part}


def send_cols(p: Partition, idx: np.ndarray) -> dict[str, object]:
    """The common evidence columns of sends ``idx``: who, what, where, when."""
    s = p.sends
    n = len(idx)
    return {**tp_cols(p, n), "process": proc_strings(p, s.proc[idx]), "op": s.op[idx],
            "offset": s.offset.take(idx), "value": value_strings(p, s.vc[idx]),
            "invoke_t": s.invoke_t[idx], "ack_t": s.complete_t[idx]}
