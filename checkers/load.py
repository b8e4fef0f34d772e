"""Read a run directory: the history into Parquet by partition, the other logs into rows.

The history is converted by :mod:`checkers.ingest` (its Arrow schema derives from
``workloads.history.FIELDS``, so writer and checker cannot drift) and read by the partition
kernel. The timeline, observer and event logs are small (a row per fault step, sample or
cluster event) and are read on the driver with explicit field kinds (:func:`read_log`) -
never inferred from the first lines seen. Only ``RUN/history/*.jsonl`` is required; every
other input is optional and yields no rows.

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

from pyspark.sql import SparkSession

from checkers import kafkalog
from checkers.features import NO_RECORD, FeaturesInForce, read as read_features
from checkers.ingest import IngestResult, Split, convert_split, ingest
from checkers.outcome import Expectation, FaultCount
from workloads import history as H

#: The small logs' fields and their kinds (docs/history-format.md, common.md). Read on the driver:
#: "int", "float", "str" (an object or array is kept as its compact JSON text), "bool", "ints"
#: (a list of integers), "strs" (a list of strings). A value of another kind reads as null.
TIMELINE_FIELDS = {"v": "int", "t": "float", "kind": "str", "phase": "str", "id": "str", "fault": "str",
                   "targets": "strs", "detail": "str", "host": "str", "text": "str"}

OBSERVER_FIELDS = {"t": "float", "topic": "str", "partition": "int", "leader": "int", "leader_epoch": "int",
                   "isr": "ints", "elr": "ints", "error": "str"}

#: cluster (kraftsim) and proxy event logs: the union of every event's fields (common.md)
EVENT_FIELDS = {
    "wall": "float", "node": "str", "role": "str", "event": "str", "broker": "int", "broker_epoch": "int",
    "previous_broker_epoch": "int", "clean_shutdown": "bool", "reason": "str", "topic": "str", "partition": "int",
    "leader": "int", "leader_epoch": "int", "partition_epoch": "int", "isr": "ints", "elr": "ints",
    "maximal_isr": "ints", "proposed_isr": "ints", "epoch": "int",
    "leader_recovery_state": "str", "candidates": "str", "new_isr": "ints", "broker_epochs": "str",
    "version": "int", "accepted": "bool", "error": "str", "error_code": "int", "from_offset": "int",
    "to_offset": "int", "recovery_point": "int", "log_end_offset": "int", "truncated_bytes": "int",
    "log_start_offset": "int", "hwm": "int", "local_log_size_bytes": "int", "local_log_start_timestamp": "int",
    # the controllers' quorum: kraftsim's controller_elected/resigned (epoch), Kafka's
    # controller_activated/renounced (checkers/kafkalog)
    "epoch": "int", "controller_epoch": "int", "new_controller_epoch": "int", "new_controller": "int",
    "last_committed_offset": "int",
    # fatal_fault (kraftsim's raft thread, docs/kraftsim-raft.md; checkers/halts.py)
    "halted": "bool", "component": "str", "fault": "str",
    # truncation below the HWM and log dir loads (checkers/effects.py)
    "high_watermark": "int", "log_dir": "str",
}

#: one row of a small log: every field of its FIELDS map, coerced or None
LogRow = dict[str, Any]


def _as_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _as_str(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    return str(v)


def _coerce(kind: str, v: Any) -> Any:
    if kind == "int":
        return _as_int(v)
    if kind == "float":
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    if kind == "str":
        return _as_str(v)
    if kind == "bool":
        return v if isinstance(v, bool) else None
    if not isinstance(v, list):
        return None
    return [_as_int(x) for x in v] if kind == "ints" else [_as_str(x) for x in v]


def read_log(path: Path, fields: dict[str, str]) -> list[LogRow]:
    """Every record of the file, in line order, coerced to ``fields`` (none if it is missing).

    These logs are small (a row per fault step, observer sample or cluster event, never per
    message), and the checker needs them whole on the driver: attribution and the ISR
    timelines ship to the partition tasks. Reading them here costs milliseconds; the Spark JSON
    reader cost a cold session seconds of planning for kilobytes. A torn last line or an
    undecodable line is skipped (:func:`workloads.history.read_jsonl`), a field of the wrong
    kind reads as null - the tolerance the history's own reader has.
    """
    if not path.is_file():
        return []
    return [{k: _coerce(kind, rec.get(k)) for k, kind in fields.items()}
            for rec in H.read_jsonl(path) if isinstance(rec, dict)]


def read_log_lines(path: Path, fields: dict[str, str], source: str) -> list[LogRow]:
    """:func:`read_log` with each row's ``source`` (the file, relative to the run directory) and
    ``line`` (1-based, counting every line of the file): a loss story (checkers/stories.py)
    points at the very event it tells, so a reader can open the line."""
    if not path.is_file():
        return []
    out: list[LogRow] = []
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.endswith(b"\n"):
                break                      # a torn last line, as workloads.history.read_jsonl
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append({**{k: _coerce(kind, rec.get(k)) for k, kind in fields.items()},
                            "source": source, "line": n})
    return out


class CheckerInputError(Exception):
    """A run directory the checker cannot read; the message is one line for the user."""


@dataclass
class RunInputs:
    """Everything the checker reads from one run directory."""
    run_dir: Path
    run: dict[str, Any]
    ingest: IngestResult       # the history, converted by topic-partition (checkers/ingest.py)
    timeline: list[LogRow]
    observer: list[LogRow]
    events: list[LogRow]       # cluster + proxy events with t on the run clock and a host column
    has_cluster_events: bool = False
    history_files: list[str] = field(default_factory=list)
    #: which Kafka behaviours were in force, as the cluster recorded them (checkers/features.py)
    features: FeaturesInForce = field(default_factory=lambda: FeaturesInForce(None, problem=NO_RECORD))


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
    try:
        Expectation.from_run(data)   # expect, allowed_by, require_errors (checkers/outcome.py)
        FaultCount.from_run(data)    # faults: applied, failed, min_applied
    except ValueError as exc:
        raise CheckerInputError(f"{path}: {exc}") from None
    w0 = data.get("wall_at_t0")
    if w0 is not None and not isinstance(w0, (int, float)):
        raise CheckerInputError(f"{path}: field 'wall_at_t0' is {w0!r}; want seconds since the epoch (a number)")
    sw = data.get("switches")
    if sw is not None and not isinstance(sw, dict):
        raise CheckerInputError(f"{path}: field 'switches' is {type(sw).__name__}; want an object of target settings")
    return data


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


def _spark_splits(spark: SparkSession | None) -> Callable[[list[Split], str], list[tuple[int, int, int]]] | None:
    """Convert splits as Spark tasks on a cluster master; None (driver threads) when local or
    when no session is up yet (a local check converts while its session starts)."""
    if spark is None or spark.sparkContext.master.startswith("local"):
        return None

    def run(splits: list[Split], out_dir: str) -> list[tuple[int, int, int]]:
        return spark.sparkContext.parallelize(splits, len(splits)).map(lambda s: convert_split(s, out_dir)).collect()
    return run


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


def load_run(spark: SparkSession | None, run_dir: str | os.PathLike[str]) -> RunInputs:
    """Read one run directory. Raises CheckerInputError with a one-line reason. ``spark``: a
    cluster session converts the history's last round as its tasks; None or local, the driver."""
    rd = Path(run_dir)
    run, files = precheck(rd)
    ingested = ingest(rd, files, run_splits=_spark_splits(spark))   # the partition kernel reads it

    timeline = read_log_lines(rd / "timeline.jsonl", TIMELINE_FIELDS, "timeline.jsonl")
    observer = read_log(rd / "observer.jsonl", OBSERVER_FIELDS)
    cluster = read_cluster_events(rd)
    if not run.get("wall_at_t0") and cluster.present:
        # without the run clock's wall anchor the event times cannot be joined with the history
        raise CheckerInputError(f"{rd / 'run.json'}: field 'wall_at_t0' missing; want it to map cluster event 'wall' times to the run clock")
    events = on_run_clock(cluster.events, float(run.get("wall_at_t0") or 0.0))
    return RunInputs(rd, run, ingested, timeline, observer, events, cluster.has_cluster, files, read_features(rd))


@dataclass
class ClusterEvents:
    """The cluster's and the proxy's events of a run directory, by wall time (no run clock yet)."""
    events: list[LogRow]       # EVENT_FIELDS coerced, with host, source, line
    present: bool              # an event log or Kafka log file exists (even if empty)
    has_cluster: bool          # the cluster itself said something (kraftsim's events or Kafka's logs)
    kafka: "kafkalog.Stats"    # what the Kafka log reader met


def read_cluster_events(rd: Path) -> ClusterEvents:
    """kraftsim's ``cluster-logs/<host>/events.jsonl``, the proxy's ``proxy-events.jsonl`` and, for
    hosts with Kafka's log4j files and no events.jsonl, the events read from those
    (checkers/kafkalog, docs/kafka-logs.md): one list, each row with the host it came from and the
    file and line that made it. Used by :func:`load_run` and by the events-only check
    (checkers/events_only.py), so both tell the same events."""
    cluster_paths = [Path(p) for p in sorted(glob.glob(str(rd / "cluster-logs" / "*" / "events.jsonl")))]
    proxy = rd / "proxy-events.jsonl"
    st = kafkalog.Stats()
    kafka = kafkalog.read_cluster_logs(rd / "cluster-logs", stats=st)
    events: list[LogRow] = []
    for path in [*cluster_paths, proxy]:   # with the host it came from (its cluster-logs folder)
        host = "proxy" if path == proxy else path.parent.name
        events += [{**e, "host": host} for e in read_log_lines(path, EVENT_FIELDS, path.relative_to(rd).as_posix())]
    events += [{**{k: _coerce(kind, e.get(k)) for k, kind in EVENT_FIELDS.items()},
                "host": e["host"], "source": e["source"], "line": e["line"]} for e in kafka]
    present = any(p.exists() for p in [*cluster_paths, proxy]) or bool(kafka)
    has_cluster = any(p.exists() and p.stat().st_size > 0 for p in cluster_paths) or bool(kafka)
    return ClusterEvents(events, present, has_cluster, st)


def on_run_clock(events: list[LogRow], wall_at_t0: float) -> list[LogRow]:
    """Each event with ``t = wall - wall_at_t0`` (groundwork/clock.py's run clock)."""
    return [{**e, "t": None if e["wall"] is None else e["wall"] - wall_at_t0} for e in events]
