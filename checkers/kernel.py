"""The partition kernel: one Spark task checks whole topic-partitions, columnar, in numpy.

Why this shape (measured, benchmarks/checker_scale.py): expressed as Spark SQL over rows, the
anomaly families cost about 1 us per record per derived frame - 71k records/s at 10M records
on 2 cores, with the history shuffled to bring each partition together. But every family asks
its questions of one topic-partition (docs/anomalies.md), and the ingest already writes the
history by topic-partition (checkers/ingest.py), so no shuffle is needed at all: Spark schedules
one task per group of partitions, on local cores or on a cluster's workers, and each task loads
its partitions' part files (memory-mapped) and runs the families (declared once, each run check-safe:
:mod:`checkers.families`) on integer-coded columns (:mod:`checkers.partition`). Only counts,
small evidence, per-partition statistics and the throughput partials come back to the driver;
large evidence is written as Parquet by the task.

The few questions that cross partitions - a value read in a partition it was not sent to - are
answered in a second pass: pass 1 returns each partition's *foreign reads* (reads of values no
send of that partition carried; none in a healthy run); if there are any, every partition is
checked again with all of them in hand (lost writes read elsewhere, failed writes read
elsewhere, duplicates across partitions), and values nobody sent are judged on the driver.
"""
from __future__ import annotations

import os
import re
import threading
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from checkers import aggregates, attribution, divergence, evidence, incidents
from checkers.families import FAMILIES, Family, run_families
from checkers.invariants import IsrTimeline
from checkers.lost import Foreign
from checkers.partition import load
from checkers.replicas import ReplicaLogs

if TYPE_CHECKING:
    from checkers.ingest import PartitionFiles

#: the anomalies the kernel computes, in report order (job.ANOMALIES)
ANOMALIES = tuple(evidence.SCHEMAS)


@dataclass
class Context:
    """What every partition task needs besides its files (broadcast once)."""
    out_dir: str                                   # evidence scratch: OUT/<anomaly>/<partition>.parquet
    cap: int                                       # evidence rows a task returns per anomaly
    min_isr: int | None = None                     # the effective min ISR (checkers/min_isr.py)
    isr: dict[tuple[str, int], IsrTimeline] = field(default_factory=dict)
    isr_source: dict[tuple[str, int], str] = field(default_factory=dict)
    replicas: ReplicaLogs = field(default_factory=dict)
    replication_factor: int | None = None
    foreign: Foreign = field(default_factory=dict)
    events: attribution.RunEvents = field(default_factory=attribution.RunEvents)
    #: the anomaly families to run (checkers/families.py); a test plants a failing one here
    families: tuple[Family, ...] = FAMILIES


@dataclass
class PartResult:
    topic: str | None
    partition: int | None
    records: int
    acked: int
    counts: dict[str, int]
    rows: dict[str, list[dict[str, Any]]]          # an anomaly's rows when at most ``cap``
    files: dict[str, str]                          # an anomaly's evidence file when it has rows
    stats: dict[str, Any] | None                   # lost_by_partition row (None: nothing acked or read)
    throughput: dict[str, np.ndarray]
    foreign: list[tuple] = field(default_factory=list)
    owned: list[tuple[str | None, str]] = field(default_factory=list)   # foreign values this partition sent
    incidents: dict[str, int] = field(default_factory=dict)             # offset-keyed incidents by primary anomaly
    failures: list[tuple[str, str]] = field(default_factory=list)      # (family, one-line error): it raised here


def _name(pf: PartitionFiles) -> str:
    if pf.partition is None:
        return "unpartitioned"   # never "_...": Spark skips such files
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{pf.topic}") + f"-p{pf.partition}-{zlib.crc32(str(pf.topic).encode()):08x}"


def check_partition(pf: PartitionFiles, ctx: Context) -> PartResult:
    p = load(pf.files, pf.topic, pf.partition)
    fam, failures = run_families(p, ctx, ctx.families)     # check-safe: a family that raises is named
    lost_cols, n_lost = fam.get("lost_write", ({}, 0))
    if n_lost:
        attribution.attribute(lost_cols, n_lost, ctx.events, p.topic, p.partition)
    counts, rows, files = {}, {}, {}
    for name in ANOMALIES:
        cols, n = fam.get(name, ({}, 0))
        counts[name] = n
        if n == 0:
            continue
        table = evidence.to_table(name, cols, n)
        path = os.path.join(ctx.out_dir, name, _name(pf) + ".parquet")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        import pyarrow.parquet as pq
        pq.write_table(table, path)
        files[name] = path
        if n <= ctx.cap:
            rows[name] = table.to_pylist()
    acked = int(p.ok_mask().sum())
    stats = None
    if p.partition is not None and (acked or len(p.reads.offset) or p.drain_end is not None):
        stats = {"topic": p.topic, "partition": p.partition, "acked": acked, "max_acked_offset": p.max_acked_offset(),
                 "max_read_offset": p.max_read_offset(), "drain_end": p.drain_end,
                 "lost": counts["lost_write"], "unseen_at_end": counts["unseen_at_end"]}
        if n_lost:
            stats.update(lost_extent(lost_cols, fam.get("ack_below_min_isr", ({}, 0))[0]))
    owned = []
    if ctx.foreign:
        sent = p.sent_flags()
        for topic, value in ctx.foreign:
            if topic == p.topic or p.partition is None:
                c = divergence._code_of(p, value)
                if c is not None and sent[c]:
                    owned.append((topic, value))
    return PartResult(p.topic, p.partition, p.records, acked, counts, rows, files, stats,
                      aggregates.throughput_partial(p), divergence.foreign_reads(p) if p.partition is not None else [],
                      owned, incidents.partition_incidents(fam) if p.partition is not None else {}, failures)


def lost_extent(lost_cols: dict[str, Any], below_cols: dict[str, Any]) -> dict[str, Any]:
    """What a partition lost, for its loss story (checkers/stories.py): offset range, first and
    last ack, the last first-miss, and how many of the lost writes were acknowledged below min ISR."""
    off = incidents.offsets_of(lost_cols)
    ack = np.asarray(lost_cols["ack_t"], dtype=np.float64)
    miss = np.asarray(lost_cols.get("miss_t", []), dtype=np.float64)
    keys = set(zip(list(lost_cols.get("process") or []), np.asarray(lost_cols.get("op", []), dtype=np.int64).tolist()))
    below = set(zip(list(below_cols.get("process") or []), np.asarray(below_cols.get("op", []), dtype=np.int64).tolist()))

    def _f(a: np.ndarray, fn) -> float | None:
        a = a[~np.isnan(a)] if len(a) else a
        return float(fn(a)) if len(a) else None
    return {"lost_first_offset": int(off.min()) if len(off) else None,
            "lost_last_offset": int(off.max()) if len(off) else None,
            "lost_first_ack_t": _f(ack, np.min), "lost_last_ack_t": _f(ack, np.max),
            "lost_first_miss_t": _f(miss, np.min), "lost_last_miss_t": _f(miss, np.max),
            "lost_below_min_isr": len(keys & below),
            "lost_below_min_isr_by": (below_cols.get("judged_by") or [None])[0]}


def unowned_duplicates(foreign: Foreign, owned: set[tuple[str | None, str]]) -> list[dict[str, Any]]:
    """Duplicates among values no partition sent: judged from the foreign reads alone."""
    out = []
    for (topic, value), entries in sorted(foreign.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        if (topic, value) in owned:
            continue
        at = {f"{part}:{o}" for part, o, _, _ in entries}
        if len(at) > 1:
            out.append({"topic": topic, "value": value, "n_offsets": len(at), "at": " ".join(sorted(at))})
    return out


def group_tasks(pfs: list[PartitionFiles], tasks: int) -> list[list[PartitionFiles]]:
    """Partitions into at most ``tasks`` groups of similar bytes (largest first, least-loaded bin)."""
    size = {id(pf): sum(os.path.getsize(f) for f in pf.files) for pf in pfs}
    bins: list[tuple[int, list[PartitionFiles]]] = [(0, []) for _ in range(max(1, min(tasks, len(pfs))))]
    for pf in sorted(pfs, key=lambda x: -size[id(x)]):
        i = min(range(len(bins)), key=lambda k: bins[k][0])
        bins[i] = (bins[i][0] + size[id(pf)], bins[i][1] + [pf])
    return [b for _, b in bins if b]


def _warm_worker(_: Any) -> None:
    """Import what a partition task needs (numpy, pyarrow, every family) in this Python worker."""
    import pyarrow.ipc  # noqa: F401  (the kernel's reader)
    import pyarrow.parquet  # noqa: F401  (its evidence writer)


def warm_workers(spark) -> threading.Thread:
    """Start the executors' Python workers and their imports now, in the background.

    Why: the first Spark job of a session pays for forking the Python workers and importing
    numpy, pyarrow and the checker families in each (measured on the 2-core box: 2.3 s of a
    10M-record kernel's 6.4 s; the same kernel run again took 4.1 s). Workers are reused
    across jobs (spark.python.worker.reuse), so a throwaway job started while the driver
    converts the history and reads the small logs hides most of that latency. The caller
    joins the thread before the kernel's own job; the join is only for tidiness - the kernel
    is correct with the warm-up still running or failed.
    """
    sc = spark.sparkContext
    n = max(1, sc.defaultParallelism)

    def run() -> None:
        try:
            sc.parallelize(range(n), n).foreach(_warm_worker)
        except Exception:   # a warm-up is an optimisation: the kernel's job reports real failures
            pass
    t = threading.Thread(target=run, name="faultline-warm-workers", daemon=True)
    t.start()
    return t


def run_partitions(spark, pfs: list[PartitionFiles], ctx: Context) -> list[PartResult]:
    """Check every partition as Spark tasks (local cores or a cluster's workers)."""
    sc = spark.sparkContext
    groups = group_tasks(pfs, 2 * sc.defaultParallelism)
    bc = sc.broadcast(ctx)
    try:
        return [r for g in sc.parallelize(groups, len(groups)).map(
            lambda g: [check_partition(pf, bc.value) for pf in g]).collect() for r in g]
    finally:
        bc.unpersist()
