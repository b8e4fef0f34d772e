"""The checker job: run directory in, verdict.json and evidence tables out.

One SparkSession for the whole check (DESIGN.md); every anomaly family is a function from
DataFrames to evidence DataFrames (:mod:`checkers.lost`, ``divergence``, ``sends``,
``realtime``, ``polls``, ``failed``, ``invariants``); their counts make the verdict
(:mod:`checkers.verdict`). Only evidence rows (normally few) and the first examples reach the
driver; histories stay distributed. Runs unchanged under ``--spark-master spark://...`` or
``spark-submit``: the package needs only pyspark and ``workloads/history.py`` on the workers.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from checkers import aggregates, attribution, divergence, failed, invariants, lost, polls, realtime, sends
from checkers.frames import Frames, derive
from checkers.load import CheckerInputError, RunInputs, load_run, precheck
from checkers.session import make_session
from checkers.verdict import build_verdict

#: every anomaly the checker reports, in report order
ANOMALIES = (
    "lost_write", "unseen_at_end", "inconsistent_offset", "duplicate", "offset_mismatch",
    "nonmonotonic_send", "send_skip", "realtime_offset_regression", "nonmonotonic_poll", "poll_skip",
    "failed_write_visible", "failed_write_visible_allowed", "ack_below_min_isr", "visible_end_regression",
)


@dataclass
class Analysis:
    """Evidence frames and their counts; what the verdict and the tables are made of.

    ``rows[name]`` holds every evidence row of an anomaly as a dict when its evidence is small
    (the usual case: a run with a handful of anomalies); then its tables are written from the
    driver without another Spark job. Large evidence stays distributed (no ``rows`` entry).
    """
    frames: Frames
    evidence: dict[str, DataFrame]
    counts: dict[str, int]
    acked_writes: int
    history_records: int
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)   # small evidence, by anomaly
    extra: dict[str, Any] = field(default_factory=dict)

    def examples(self, name: str, n: int) -> list[dict[str, Any]]:
        if name in self.rows:
            return self.rows[name][:n]
        df = self.evidence[name]
        t = next((c for c in ("ack_t", "t_first", "invoke_t", "complete_t") if c in df.columns), None)
        order = [c for c in (t, "topic", "partition", "offset", "value", "process") if c and c in df.columns]
        rows = [json.loads(r[0]) for r in df.orderBy(*order).select(F.to_json(F.struct(*df.columns))).limit(n).collect()]
        return rows


#: evidence rows (all anomalies together) below which evidence is collected to the driver;
#: an anomaly with more than its share stays distributed and Spark writes its tables
SMALL_EVIDENCE_ROWS = 140_000
#: threads submitting the per-anomaly jobs (overlaps the driver's per-job latency)
JOB_THREADS = 4


def _switch(run: dict[str, Any], key: str) -> Any:
    return (run.get("switches") or {}).get(key)


def _as_int(v: Any) -> int | None:
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def evidence_frames(inputs: RunInputs, fr: Frames, *, attribute: bool = True) -> dict[str, DataFrame]:
    """Every anomaly family's evidence frame (lazy)."""
    ev: dict[str, DataFrame] = {}
    ev.update(lost.lost_and_unseen(fr))
    ev.update(divergence.divergence(fr))
    ev.update(sends.send_order(fr))
    ev.update(realtime.realtime_regression(fr))
    ev.update(polls.poll_order(fr))
    ev.update(failed.failed_visible(fr))
    min_isr = _as_int(_switch(inputs.run, "min.insync.replicas"))
    ev.update(invariants.invariants(fr, inputs.events, inputs.observer, min_isr, inputs.has_cluster_events))
    if attribute:
        ev["lost_write"] = attribution.attribute(ev["lost_write"], inputs.timeline, inputs.events)
    return {n: ev[n] for n in ANOMALIES}


def _collect(name: str, df: DataFrame, limit: int) -> tuple[str, list[dict[str, Any]] | None, int]:
    """(name, every row as a dict, count) when at most ``limit`` rows; (name, None, count) otherwise.

    One job in the usual case (few or no evidence rows): the rows are the count.
    """
    got = [json.loads(r[0]) for r in df.select(F.to_json(F.struct(*df.columns))).limit(limit + 1).collect()]
    if len(got) <= limit:
        return name, got, len(got)
    return name, None, df.count()


def analyze(spark: SparkSession, inputs: RunInputs, *, attribute: bool = True) -> Analysis:
    """Compute every anomaly: shared frames cached once, then one small job per anomaly.

    Why this shape (measured): one union of all evidence plans made Catalyst and AQE re-plan a
    huge tree stage after stage (112 s for a 24k-record run); per-anomaly plans over cached
    frames are small, and they are submitted from a few threads at once so the driver's
    per-job latency overlaps instead of adding up (Spark schedules concurrent jobs from
    different threads of one SparkSession).
    """
    from concurrent.futures import ThreadPoolExecutor

    fr = derive(inputs.history).cache()
    ev = evidence_frames(inputs, fr, attribute=attribute)
    per_anomaly = max(0, SMALL_EVIDENCE_ROWS // len(ANOMALIES))
    with ThreadPoolExecutor(max_workers=JOB_THREADS) as pool:
        meta_f = pool.submit(lambda: fr.sends.agg(
            F.sum(F.when((F.col("type") == "ok") & F.col("offset").isNotNull() & F.col("partition").isNotNull(), 1)
                  .otherwise(0)).alias("acked")).collect()[0])
        done = list(pool.map(lambda kv: _collect(kv[0], kv[1], per_anomaly), ev.items()))
        meta = meta_f.result()
    counts = {n: 0 for n in ANOMALIES}
    rows: dict[str, list[dict[str, Any]]] = {}
    for name, got, n in done:
        counts[name] = n
        if got is not None:
            rows[name] = got
        else:
            ev[name] = ev[name].cache()
    _sort_rows(rows)
    records = inputs.ingest.records if inputs.ingest is not None else inputs.history.count()
    extra: dict[str, Any] = {"min_insync_replicas": _as_int(_switch(inputs.run, "min.insync.replicas"))}
    if inputs.ingest is not None:
        extra["ingest"] = {"converted": inputs.ingest.converted, "seconds": round(inputs.ingest.seconds, 3),
                           "bad_lines": inputs.ingest.bad_lines, "torn_lines": inputs.ingest.torn_lines}
    return Analysis(fr, ev, counts, int(meta["acked"] or 0), int(records), rows, extra)


def _sort_rows(rows: dict[str, list[dict[str, Any]]]) -> None:
    """Deterministic evidence order (by time, then partition/offset) so verdicts compare equal."""
    def key(r: dict[str, Any]) -> tuple:
        t = r.get("ack_t", r.get("t_first", r.get("invoke_t", r.get("complete_t"))))
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
    _flat_for_csv(df).coalesce(1).write.mode("overwrite").option("header", True).csv(tmp.resolve().as_uri())
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
    for name, df in an.evidence.items():
        if name in an.rows:
            write_rows(an.rows[name], df.schema, run_dir / "anomalies" / name)
        else:
            write_table(df, run_dir / "anomalies" / name)


def write_aggregates(an: Analysis, run_dir: Path) -> None:
    """aggregates/throughput.csv and lost_by_partition.csv (one row per second / per partition)."""
    tp = aggregates.throughput(an.frames)
    lbp = aggregates.lost_by_partition(an.frames, an.evidence["lost_write"], an.evidence["unseen_at_end"])
    for df, name in ((tp, "throughput"), (lbp, "lost_by_partition")):
        rows = [r.asDict(recursive=True) for r in df.collect()]   # per second / per partition: small
        write_rows(rows, df.schema, run_dir / "aggregates" / name)


def check_run(run_dir: str | os.PathLike[str], *, spark_master: str | None = None,
              expect: str | None = None, spark: SparkSession | None = None,
              write_tables: bool = True) -> dict[str, Any]:
    """Check one run directory; write verdict.json, anomalies/, aggregates/; return the verdict.

    ``expect`` ("no-loss" | "loss") defaults to run.json's ``expect``. A given ``spark`` session
    is used and left running (tests share one); otherwise one is made and stopped here.
    """
    if expect is not None and expect not in ("no-loss", "loss"):
        raise CheckerInputError(f"--expect {expect!r}: want 'no-loss' or 'loss'")
    rd = Path(run_dir)
    precheck(rd)
    own = spark is None
    started = time.time()
    session = spark or make_session(spark_master)
    try:
        inputs = load_run(session, rd)
        an = analyze(session, inputs)
        verdict = build_verdict(an, inputs.run, expect=expect)
        verdict["checker"] = {"spark_master": session.sparkContext.master, "spark_version": session.version,
                              "duration_s": None, "history_files": len(inputs.history_files),
                              "ingest": an.extra.get("ingest")}
        if write_tables:
            write_evidence(an, rd)
            write_aggregates(an, rd)
        verdict["checker"]["duration_s"] = round(time.time() - started, 3)
        tmp = rd / ".verdict.json.tmp"
        tmp.write_text(json.dumps(verdict, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, rd / "verdict.json")
        for df in an.evidence.values():
            df.unpersist()
        an.frames.unpersist()
        return verdict
    finally:
        if own:
            session.stop()
