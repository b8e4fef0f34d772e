"""Read a run directory: the history into Parquet by partition, the other logs into DataFrames.

The history is converted by :mod:`checkers.ingest` (its Arrow schema derives from
``workloads.history.FIELDS``, so writer and checker cannot drift) and read by the partition
kernel. The timeline, observer and event logs are small and read by Spark with explicit
schemas - never inferred: inference reads every file twice and guesses types from the first
lines it sees. Only ``RUN/history/*.jsonl`` is required; every other input is optional and
yields an empty frame.

Bad input gives one line naming the file, the field and what is wanted
(:class:`CheckerInputError`), never a traceback.
"""
from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from checkers.ingest import IngestResult, Split, convert_split, ingest
from workloads import history as H

TIMELINE_SCHEMA = T.StructType([
    T.StructField("v", T.IntegerType()), T.StructField("t", T.DoubleType()),
    T.StructField("kind", T.StringType()), T.StructField("phase", T.StringType()),
    T.StructField("id", T.StringType()), T.StructField("fault", T.StringType()),
    T.StructField("targets", T.ArrayType(T.StringType())),
    T.StructField("detail", T.StringType()),   # nested object kept as its JSON text
])

OBSERVER_SCHEMA = T.StructType([
    T.StructField("t", T.DoubleType()), T.StructField("topic", T.StringType()),
    T.StructField("partition", T.IntegerType()), T.StructField("leader", T.IntegerType()),
    T.StructField("leader_epoch", T.IntegerType()),
    T.StructField("isr", T.ArrayType(T.IntegerType())),
    T.StructField("elr", T.ArrayType(T.IntegerType())),
    T.StructField("error", T.StringType()),
])

#: cluster (kraftsim) and proxy event logs: the union of every event's fields (common.md)
EVENT_SCHEMA = T.StructType([
    T.StructField("wall", T.DoubleType()), T.StructField("node", T.StringType()),
    T.StructField("role", T.StringType()), T.StructField("event", T.StringType()),
    T.StructField("broker", T.IntegerType()), T.StructField("broker_epoch", T.LongType()),
    T.StructField("previous_broker_epoch", T.LongType()),
    T.StructField("clean_shutdown", T.BooleanType()), T.StructField("reason", T.StringType()),
    T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
    T.StructField("leader", T.IntegerType()), T.StructField("leader_epoch", T.IntegerType()),
    T.StructField("partition_epoch", T.IntegerType()),
    T.StructField("isr", T.ArrayType(T.IntegerType())),
    T.StructField("elr", T.ArrayType(T.IntegerType())),
    T.StructField("leader_recovery_state", T.StringType()),
    T.StructField("candidates", T.StringType()),
    T.StructField("new_isr", T.ArrayType(T.IntegerType())),
    T.StructField("broker_epochs", T.StringType()),
    T.StructField("version", T.IntegerType()), T.StructField("accepted", T.BooleanType()),
    T.StructField("error", T.StringType()), T.StructField("error_code", T.IntegerType()),
    T.StructField("from_offset", T.LongType()), T.StructField("to_offset", T.LongType()),
    T.StructField("recovery_point", T.LongType()), T.StructField("log_end_offset", T.LongType()),
    T.StructField("truncated_bytes", T.LongType()),
])


class CheckerInputError(Exception):
    """A run directory the checker cannot read; the message is one line for the user."""


@dataclass
class RunInputs:
    """Everything the checker reads from one run directory."""
    run_dir: Path
    run: dict[str, Any]
    ingest: IngestResult       # the history, converted by topic-partition (checkers/ingest.py)
    timeline: DataFrame
    observer: DataFrame
    events: DataFrame          # cluster + proxy events with t on the run clock and a host column
    has_cluster_events: bool = False
    history_files: list[str] = field(default_factory=list)


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """run.json is optional for the checker (expect and switches default), but must be valid if present."""
    path = run_dir / "run.json"
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CheckerInputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); want the run.json object") from None
    if not isinstance(data, dict):
        raise CheckerInputError(f"{path}: top level is {type(data).__name__}; want a JSON object")
    expect = data.get("expect")
    if expect is not None and expect not in ("no-loss", "loss"):
        raise CheckerInputError(f"{path}: field 'expect' is {expect!r}; want 'no-loss' or 'loss'")
    w0 = data.get("wall_at_t0")
    if w0 is not None and not isinstance(w0, (int, float)):
        raise CheckerInputError(f"{path}: field 'wall_at_t0' is {w0!r}; want seconds since the epoch (a number)")
    sw = data.get("switches")
    if sw is not None and not isinstance(sw, dict):
        raise CheckerInputError(f"{path}: field 'switches' is {type(sw).__name__}; want an object of target settings")
    return data


def _uri(p: str | Path) -> str:
    return Path(p).resolve().as_uri()


def _check_history_file(path: Path) -> None:
    """Cheap driver-side sanity check of the first complete line (not the whole file)."""
    with open(path, "rb") as fh:
        first = fh.readline()
    if not first.strip():
        return
    if not first.endswith(b"\n"):
        return  # a single torn line: nothing complete to read, Spark drops it
    try:
        rec = json.loads(first)
    except ValueError:
        raise CheckerInputError(f"{path}: line 1 is not JSON; want one history record per line (docs/history-format.md)") from None
    if not isinstance(rec, dict):
        raise CheckerInputError(f"{path}: line 1 is {type(rec).__name__}; want a JSON object per line")
    for required in ("t", "process", "type", "f"):
        if required not in rec:
            raise CheckerInputError(f"{path}: line 1 lacks field {required!r}; want every field of workloads/history.py FIELDS")
    if rec.get("v") not in (None, H.SCHEMA_VERSION):
        raise CheckerInputError(f"{path}: field 'v' is {rec.get('v')!r}; this checker reads schema version {H.SCHEMA_VERSION}")
    if rec.get("type") not in H.TYPES:
        raise CheckerInputError(f"{path}: line 1 field 'type' is {rec.get('type')!r}; want one of {', '.join(H.TYPES)}")
    if rec.get("f") not in H.FUNCTIONS:
        raise CheckerInputError(f"{path}: line 1 field 'f' is {rec.get('f')!r}; want one of {', '.join(H.FUNCTIONS)}")


def _spark_splits(spark: SparkSession) -> Callable[[list[Split], str], list[tuple[int, int, int]]] | None:
    """Convert splits as Spark tasks on a cluster master; None (driver threads) when local."""
    master = spark.sparkContext.master
    if master.startswith("local"):
        return None

    def run(splits: list[Split], out_dir: str) -> list[tuple[int, int, int]]:
        return spark.sparkContext.parallelize(splits, len(splits)).map(lambda s: convert_split(s, out_dir)).collect()
    return run


def _optional_json(spark: SparkSession, paths: list[Path], schema: T.StructType,
                   with_path: bool = False) -> DataFrame:
    """Read the files that exist; an empty frame of the same schema when none do."""
    paths = [p for p in paths if p.exists() and p.stat().st_size > 0]
    if not paths:
        df = spark.createDataFrame([], schema)
        return df.withColumn("_path", F.lit(None).cast("string")) if with_path else df
    df = spark.read.schema(schema).json([_uri(p) for p in paths])
    if with_path:
        df = df.withColumn("_path", F.col("_metadata.file_path"))
    return df


def precheck(run_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], list[str]]:
    """Driver-side checks that need no Spark: fail fast, in one line, before a JVM starts."""
    rd = Path(run_dir)
    if not rd.is_dir():
        raise CheckerInputError(f"{rd}: not a directory; want a run directory results/<run-id>/")
    run = read_run_json(rd)
    files = [str(p) for p in H.history_files(rd)]
    if not files:
        raise CheckerInputError(f"{rd / 'history'}: no *.jsonl files; want at least one history file (docs/history-format.md)")
    for p in files:
        _check_history_file(Path(p))
    return run, files


def load_run(spark: SparkSession, run_dir: str | os.PathLike[str]) -> RunInputs:
    """Read one run directory. Raises CheckerInputError with a one-line reason."""
    rd = Path(run_dir)
    run, files = precheck(rd)
    ingested = ingest(rd, files, run_splits=_spark_splits(spark))   # the partition kernel reads it

    timeline = _optional_json(spark, [rd / "timeline.jsonl"], TIMELINE_SCHEMA)
    observer = _optional_json(spark, [rd / "observer.jsonl"], OBSERVER_SCHEMA)
    ev_paths = [Path(p) for p in sorted(glob.glob(str(rd / "cluster-logs" / "*" / "events.jsonl")))]
    ev_paths.append(rd / "proxy-events.jsonl")
    events = _optional_json(spark, ev_paths, EVENT_SCHEMA, with_path=True)
    w0 = float(run.get("wall_at_t0") or 0.0)
    if not run.get("wall_at_t0") and any(p.exists() for p in ev_paths):
        # without the run clock's wall anchor the event times cannot be joined with the history
        raise CheckerInputError(f"{rd / 'run.json'}: field 'wall_at_t0' missing; want it to map cluster event 'wall' times to the run clock")
    events = (events.withColumn("t", F.col("wall") - F.lit(w0))
              .withColumn("host", F.when(F.col("_path").endswith("proxy-events.jsonl"), F.lit("proxy"))
                          .otherwise(F.regexp_extract("_path", r"cluster-logs/([^/]+)/events\.jsonl$", 1)))
              .drop("_path"))
    has_cluster = any(p.exists() and p.stat().st_size > 0 for p in ev_paths[:-1])
    return RunInputs(rd, run, ingested, timeline, observer, events, has_cluster, files)
