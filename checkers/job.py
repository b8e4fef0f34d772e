"""The checker job: run directory in, verdict.json and evidence tables out.

One SparkSession for the whole check (docs/architecture.md, "Decisions and why"). The history is converted once into Parquet
files by topic-partition (:mod:`checkers.ingest`); Spark then runs the partition kernel as tasks
(:mod:`checkers.kernel`: every anomaly family, columnar, one partition at a time, and the
attribution of its lost writes). The run's other logs (timeline, observer, cluster and proxy
events) are small and read on the driver, which ships what the tasks need. Only counts, evidence rows
(normally few) and per-partition figures reach the driver; large evidence stays as Parquet
written by the tasks. Runs unchanged under
``--spark-master spark://...`` or ``spark-submit``: the workers need pyspark, pyarrow, numpy,
pandas and this repository, and must see the run directory at the same path.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from checkers import aggregates, attribution, events_only, evidence, halts, invariants, kernel, stories
from checkers.analysis import Analysis
from checkers.families import FAMILIES, Family, run_level
from checkers.ingest import PartitionFiles, partition_files
from checkers.load import CheckerInputError, RunInputs, load_run, precheck
from checkers.min_isr import MinIsrRule, replication_factor, rule_in_force
from checkers.replicas import ReplicaLogs, replica_logs
from checkers.outcome import EXPECTS
from checkers.session import SessionWarmup, resolve_master, start_session
from checkers.verdict import build_verdict, pkey

#: every anomaly the checker reports, in report order
ANOMALIES = kernel.ANOMALIES


#: evidence rows (all anomalies together) below which evidence is collected to the driver;
#: an anomaly with more than its share stays as the tasks' Parquet files
SMALL_EVIDENCE_ROWS = 140_000


def _switch(run: dict[str, Any], key: str) -> Any:
    return (run.get("switches") or {}).get(key)


def _as_int(v: Any) -> int | None:
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def min_insync_replicas(run: dict[str, Any]) -> int | None:
    """The min ISR the run's topic had: its own config (run.json ``topic``, set at creation),
    else the target's default (a ``min.insync.replicas`` switch) - Kafka's precedence, a topic
    config over the broker's; None when run.json names neither."""
    topic = run.get("topic")
    v = _as_int(topic.get("min_insync_replicas")) if isinstance(topic, dict) else None
    return v if v is not None else _as_int(_switch(run, "min.insync.replicas"))


def ack_judgement(rule: MinIsrRule, pfs: list[PartitionFiles], isr_source: dict[tuple[str, int], str],
                  logs: ReplicaLogs, judged: bool) -> dict[str, Any]:
    """verdict.json ``checker.ack_below_min_isr``: the min ISR judged against and the rule that
    decided it, and per partition the evidence its acks were judged by - the replicas' own logs
    (independent of the leader) or, labelled as the fallback, an ISR view (docs/anomalies.md)."""
    by: dict[str, list[str]] = {}
    if judged:
        for pf in pfs:
            if pf.partition is None:
                continue
            key = (pf.topic, int(pf.partition))
            src = invariants.BY_REPLICAS if key in logs else isr_source.get(key, "none")
            by.setdefault(src, []).append(pkey(pf.topic, pf.partition))
    fallback = sorted(k for k in by if k != invariants.BY_REPLICAS)
    note = (f"{invariants.FALLBACK_NOTE} ({', '.join(fallback)})" if fallback else
            "judged from the replicas' own logs" if by else "not evaluated (effective min ISR 1 or unknown)")
    return {**rule.as_dict(), "judged_by": {k: sorted(v) for k, v in sorted(by.items())}, "note": note}


def _foreign(results: list[kernel.PartResult]) -> kernel.Foreign:
    out: kernel.Foreign = {}
    for r in results:
        for topic, value, part, off, drain, reader in r.foreign:
            out.setdefault((topic, value), []).append((part, off, drain, reader))
    return out


#: where a run-level family failed, in ``family_failures`` (it asks no partition)
RUN_LEVEL_WHERE = "the run's cluster events"


def family_failures(results: list[kernel.PartResult], families: tuple[Family, ...],
                    run_failures: list[tuple[str, str]] = ()) -> list[dict[str, Any]]:
    """The families that raised, one entry each (in list order): the anomalies they answer, the
    first error (one line) and every partition they failed on (a run-level family: the run)."""
    out: dict[str, dict[str, Any]] = {}
    declared = {f.name: list(f.anomalies) for f in families}
    failed = [(pkey(r.topic, r.partition) if r.partition is not None else "sends without a partition", f)
              for r in results for f in r.failures] + [(RUN_LEVEL_WHERE, f) for f in run_failures]
    for where, (name, error) in failed:
        entry = out.setdefault(name, {"family": name, "anomalies": declared.get(name, []), "error": error,
                                      "partitions": []})
        entry["partitions"].append(where)
    order = {f.name: i for i, f in enumerate(families)}
    return [dict(e, partitions=sorted(e["partitions"])) for _, e in sorted(out.items(), key=lambda kv: order[kv[0]])]


@dataclass(frozen=True)
class RunLevelView:
    """What the run-level families read (checkers/families.py ``RunView``)."""
    events: list[dict[str, Any]]
    timeline: list[dict[str, Any]]
    inconsistent_offsets: list[dict[str, Any]]


def _partition_rows(results: list[Any], name: str) -> list[dict[str, Any]]:
    """Every row of one anomaly over the partitions: kept in memory up to the cap, else read back
    from the task's evidence file (a driver-side read of one small table: never the history)."""
    out: list[dict[str, Any]] = []
    for r in results:
        if not r.counts.get(name):
            continue
        if name in r.rows:
            out += r.rows[name]
        elif name in r.files:
            import pyarrow.parquet as pq
            out += pq.read_table(r.files[name]).to_pylist()
    return out


def analyze(spark: SparkSession, inputs: RunInputs, families: tuple[Family, ...] = FAMILIES) -> Analysis:
    """Run the partition kernel over every topic-partition, then merge and attribute.

    Pass 2 (every partition again, with the foreign reads of all) only when pass 1 found a value
    read in a partition it was not sent to; a healthy run has none. Each family runs check-safe
    (checkers/families.py): one that raises is listed in ``family_failures``, the others report.
    """
    ds = inputs.ingest.dataset
    scratch = Path(inputs.run_dir) / ".checker-evidence"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    cap = max(0, SMALL_EVIDENCE_ROWS // len(ANOMALIES))
    min_isr = min_insync_replicas(inputs.run)
    rule = rule_in_force(min_isr, replication_factor(inputs.run), inputs.features)
    judged = rule.effective is not None and rule.effective > 1
    isr, isr_source = (invariants.isr_evidence(inputs.events, inputs.observer, inputs.has_cluster_events)
                       if judged else ({}, {}))
    logs = replica_logs(inputs.events) if judged and rule.replication_factor else {}
    pfs = partition_files(ds)
    ctx = kernel.Context(str(scratch.resolve()), cap, rule.effective, isr, isr_source, logs, rule.replication_factor,
                         events=attribution.RunEvents.collect(inputs.timeline, inputs.events), families=families)
    t0 = time.time()
    results = kernel.run_partitions(spark, pfs, ctx)
    foreign = _foreign(results)
    extra_dups: list[dict[str, Any]] = []
    if foreign:
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        ctx.foreign = foreign
        results = kernel.run_partitions(spark, pfs, ctx)
        owned = {k for r in results for k in r.owned}
        extra_dups = kernel.unowned_duplicates(foreign, owned)
    kernel_s = time.time() - t0
    counts = {n: sum(r.counts.get(n, 0) for r in results) for n in ANOMALIES}
    counts["duplicate"] += len(extra_dups)
    # run-level families (two active controllers, a stuck ISR change): the cluster's events, once
    # after the partitions: uncommitted_read explains their inconsistent_offset rows
    view = RunLevelView(inputs.events, inputs.timeline, _partition_rows(results, "inconsistent_offset"))
    run_found, run_failures = run_level(view, families)
    run_rows: dict[str, list[dict[str, Any]]] = {}
    for name, (cols, n) in run_found.items():
        counts[name] += int(n)
        run_rows[name] = [dict(zip(cols, vals)) for vals in zip(*cols.values())] if n else []
    columns = {n: list(evidence.SCHEMAS[n]) for n in ANOMALIES}
    rows: dict[str, list[dict[str, Any]]] = {}
    frames: dict[str, DataFrame] = {}
    for name in ANOMALIES:
        have = [r for r in results if r.counts.get(name)]
        extra = extra_dups if name == "duplicate" else run_rows.get(name, [])
        if counts[name] <= cap and all(name in r.rows for r in have):
            rows[name] = [row for r in have for row in r.rows[name]] + extra
            continue
        files = [r.files[name] for r in have]
        if extra:
            import pyarrow.parquet as pq
            path = scratch / name / "unowned.parquet"   # not "_...": Spark skips such files
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(evidence.to_table(name, {k: [d[k] for d in extra] for k in extra[0]}, len(extra)), path)
            files.append(str(path))
        frames[name] = spark.read.schema(evidence.spark_schema(evidence.SCHEMAS[name])).parquet(
            *[Path(f).resolve().as_uri() for f in files])
    _sort_rows(rows)
    records = inputs.ingest.records
    extra_info: dict[str, Any] = {"min_insync_replicas": min_isr,
                                  "ack_below_min_isr": ack_judgement(rule, pfs, isr_source, logs, judged),
                                  "kernel": {
        "partitions": len(pfs), "passes": 2 if foreign else 1, "foreign_reads": sum(len(v) for v in foreign.values()),
        "seconds": round(kernel_s, 3)}}
    extra_info["ingest"] = {"converted": inputs.ingest.converted, "seconds": round(inputs.ingest.seconds, 3),
                            "bad_lines": inputs.ingest.bad_lines, "torn_lines": inputs.ingest.torn_lines,
                            "bytes": inputs.ingest.bytes, "resumed_bytes": inputs.ingest.resumed_bytes}
    stats = [r.stats for r in results if r.stats is not None]
    tp = aggregates.merge_throughput([r.throughput for r in results])
    keyed: dict[str, int] = {}
    for r in results:
        for k, n in r.incidents.items():
            keyed[k] = keyed.get(k, 0) + n
    extra_info["incidents"] = keyed
    extra_info["halts"] = halts.node_halts(inputs.events, inputs.timeline)
    extra_info["stories"] = stories.build_stories(stats, inputs.events, inputs.timeline, inputs.run,
                                                  features=inputs.features, min_isr=rule.effective)
    return Analysis(counts, sum(r.acked for r in results), int(records), rows, frames, columns, stats, tp, extra_info,
                    bad_lines=int(inputs.ingest.bad_lines), torn_lines=int(inputs.ingest.torn_lines),
                    family_failures=family_failures(results, families, run_failures))


def _sort_rows(rows: dict[str, list[dict[str, Any]]]) -> None:
    """Deterministic evidence order (by time, then partition/offset) so verdicts compare equal."""
    def key(r: dict[str, Any]) -> tuple:
        t = r.get("ack_t", r.get("t_first", r.get("invoke_t", r.get("complete_t", r.get("from_t")))))
        return (t if t is not None else -1.0, str(r.get("topic")), r.get("partition") or 0,
                r.get("offset") if r.get("offset") is not None else -1, str(r.get("value")), str(r.get("process")),
                json.dumps(r, sort_keys=True, default=str))
    for v in rows.values():
        v.sort(key=key)


def _flat_for_csv(df: DataFrame) -> DataFrame:
    """CSV holds atoms only: arrays/structs become JSON text (arrays of strings joined by ' ; ')."""
    cols = []
    for f in df.schema.fields:
        if isinstance(f.dataType, T.ArrayType) and isinstance(f.dataType.elementType, T.StringType):
            cols.append(F.array_join(F.col(f.name), " ; ").alias(f.name))
        elif isinstance(f.dataType, (T.ArrayType, T.StructType, T.MapType)):
            cols.append(F.to_json(F.col(f.name)).alias(f.name))
        else:
            cols.append(F.col(f.name))
    return df.select(*cols)


def write_table(df: DataFrame, base: Path) -> None:
    """Write ``base.csv`` (one file, header) and ``base.parquet`` (a Parquet dataset directory)."""
    base.parent.mkdir(parents=True, exist_ok=True)
    pq = base.with_suffix(".parquet")
    _remove(pq)
    df.coalesce(1).write.mode("overwrite").parquet(pq.resolve().as_uri())
    tmp = base.parent / f".{base.name}.csv.tmp"
    _flat_for_csv(df).coalesce(1).write.mode("overwrite").option("header", True).option("escape", "\"").csv(tmp.resolve().as_uri())
    parts = sorted(tmp.glob("part-*.csv"))
    target = base.with_suffix(".csv")
    if parts:
        shutil.move(str(parts[0]), target)
    else:  # an empty frame: Spark may write no part file at all; keep the header
        target.write_text(",".join(df.columns) + "\n", encoding="utf-8")
    shutil.rmtree(tmp, ignore_errors=True)


def _remove(p: Path) -> None:
    if p.is_dir():
        shutil.rmtree(p, ignore_errors=True)
    elif p.exists():
        p.unlink()


def write_rows(rows: list[dict[str, Any]], schema: T.StructType, base: Path) -> None:
    """Driver-side writer for small evidence: the same CSV and a single-file Parquet table."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    base.parent.mkdir(parents=True, exist_ok=True)
    names = [f.name for f in schema.fields]
    _remove(base.with_suffix(".parquet"))
    try:
        table = pa.Table.from_pylist(rows, schema=to_arrow_schema(schema))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        table = pa.Table.from_pylist([{k: json.dumps(r.get(k)) if isinstance(r.get(k), (list, dict)) else r.get(k)
                                       for k in names} for r in rows])
    pq.write_table(table, base.with_suffix(".parquet"))
    with open(base.with_suffix(".csv"), "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        for r in rows:
            w.writerow([_csv_cell(r.get(k)) for k in names])


def _csv_cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return " ; ".join(v)
    if isinstance(v, (list, dict)):
        return json.dumps(v, separators=(",", ":"))
    if isinstance(v, bool):
        return "true" if v else "false"
    return v


def write_evidence(an: Analysis, run_dir: Path) -> None:
    """anomalies/<name>.csv + .parquet for every anomaly (empty tables keep their header)."""
    for name in ANOMALIES:
        if name in an.rows:
            write_rows(an.rows[name], evidence.spark_schema(an.columns[name]), run_dir / "anomalies" / name)
        else:
            write_table(an.frames[name], run_dir / "anomalies" / name)


def write_aggregates(an: Analysis, run_dir: Path) -> None:
    """aggregates/throughput.csv and lost_by_partition.csv (one row per second / per partition)."""
    write_rows(an.throughput, evidence.spark_schema(evidence.THROUGHPUT), run_dir / "aggregates" / "throughput")
    write_rows(aggregates.lost_by_partition(an.stats), evidence.spark_schema(evidence.LOST_BY_PARTITION),
               run_dir / "aggregates" / "lost_by_partition")


def check_run(run_dir: str | os.PathLike[str], *, spark_master: str | None = None,
              expect: str | None = None, spark: SparkSession | None = None,
              write_tables: bool = True, families: tuple[Family, ...] = FAMILIES) -> dict[str, Any]:
    """Check one run directory; write verdict.json, anomalies/, aggregates/; return the verdict.
    A directory with only ``cluster-logs/`` (no run.json, no history) is read without Spark by
    checkers/events_only.py: its events told, outcome inconclusive (no histories).

    ``expect`` ("no-loss" | "loss" | "loss-allowed") defaults to run.json's ``expect``. A given ``spark`` session
    is used and left running (tests, suites and a run's warm-up share one); otherwise one is
    made - a local one in the background while the driver converts the history - and stopped
    here if this call started it (checkers.session.session_running).
    ``families``: the anomaly families to run (checkers/families.py; tests plant a failing one).
    """
    if expect is not None and expect not in EXPECTS:
        raise CheckerInputError(f"--expect {expect!r}: want one of {', '.join(EXPECTS)}")
    rd = Path(run_dir)
    if events_only.applies(rd):     # only the cluster's logs: their events told, no lost-write verdict
        return events_only.check(rd, expect=expect)
    precheck(rd)
    started = time.time()
    inputs: RunInputs | None = None
    own = False                                      # stop only a session this call starts
    master = resolve_master(spark_master)
    if spark is None and (master or "").startswith("local"):
        # a local session starts (JVM, Python workers) while the driver converts the history
        warmup = SessionWarmup(master).start()
        try:
            inputs = load_run(None, rd)
        except BaseException:
            warmup.close()                           # stops it (once up) if it started it
            raise
        spark, own = warmup.take(), warmup.owned     # None: it could not start; tried again below
    if spark is None:
        spark, own = start_session(master)
    session = spark
    try:
        warm = kernel.warm_workers(session)   # overlaps the ingest and the small logs
        if inputs is None:
            inputs = load_run(session, rd)
        warm.join()
        an = analyze(session, inputs, families)
        verdict = build_verdict(an, inputs.run, expect=expect, run_dir=rd)
        verdict["checker"] = {"spark_master": session.sparkContext.master, "spark_version": session.version,
                              "duration_s": None, "history_files": len(inputs.history_files),
                              "ingest": an.extra.get("ingest"), "kernel": an.extra.get("kernel"),
                              "min_insync_replicas": an.extra.get("min_insync_replicas"),
                              "ack_below_min_isr": an.extra.get("ack_below_min_isr"),
                              "features": inputs.features.as_dict()}
        if write_tables:
            write_evidence(an, rd)
            write_aggregates(an, rd)
        verdict["checker"]["duration_s"] = round(time.time() - started, 3)
        tmp = rd / ".verdict.json.tmp"
        tmp.write_text(json.dumps(verdict, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, rd / "verdict.json")
        for df in an.frames.values():
            df.unpersist()
        shutil.rmtree(rd / ".checker-evidence", ignore_errors=True)
        return verdict
    finally:
        if own:
            session.stop()
