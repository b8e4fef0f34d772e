"""Read one run directory into what the report needs — and nothing more.

Why this module exists: the report is the last step of a run and must never be the
reason a run has no report. So every input except the directory itself is optional
(a missing file becomes a note on the page, not a crash), while a file that exists but
is malformed is a :class:`ReportInputError` naming file, field and what is wanted.

Why it never reads ``history/``: a nightly run records tens of millions of operations
(docs/report.md); the checker already reduced them to ``verdict.json``, ``aggregates/*.csv`` and
``anomalies/*.csv``. The report reads those, and reads evidence CSVs only up to the
top-N rows it shows (the full files are linked beside the report).

Cluster event logs carry wall time; they are mapped onto the run clock with
``t = wall - run.json.wall_at_t0`` (groundwork/clock.py).
"""
from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from checkers import kafkalog
from checkers.attribution import fault_intervals
from checkers.outcome import AS_EXPECTED, EVENTS_ONLY, EXPECTS, INCONCLUSIVE, UNEXPECTED
from harness.report.errors import ReportInputError
from workloads.history import ReadStats, read_jsonl

#: the checker's own anomaly names, in the order the report lists them
ANOMALY_ORDER = (
    "lost_write", "unseen_at_end", "inconsistent_offset", "duplicate", "offset_mismatch",
    "nonmonotonic_send", "send_skip", "realtime_offset_regression", "nonmonotonic_poll",
    "poll_skip", "failed_write_visible", "failed_write_visible_allowed",
    "controller_split_brain", "isr_change_stuck", "uncommitted_read", "hwm_regression", "log_not_recovered",
    "log_dir_offline",
)

THROUGHPUT_COLUMNS = ("second", "ok", "fail", "info", "latency_p50_ms", "latency_p99_ms")


@dataclass
class RunData:
    """Everything the report shows about one run; ``None``/empty where the file was absent."""
    run_dir: Path
    run: dict[str, Any]
    verdict: dict[str, Any] | None
    campaign: dict[str, Any] | None
    throughput: pd.DataFrame | None
    lost_by_partition: pd.DataFrame | None
    faults: pd.DataFrame          # one row per fault interval: id, fault, targets, start, stop
    phases: pd.DataFrame          # harness phases: t, phase
    timeline_notes: pd.DataFrame  # harness notes on the timeline: t, text
    observer: pd.DataFrame | None  # t, topic, partition, leader, leader_epoch, isr, elr, error
    events: pd.DataFrame          # cluster + proxy events: t, host, node, role, event, ...
    notes: list[str] = field(default_factory=list)
    #: the observer's DescribeQuorum samples (controller-quorum.jsonl): t, leader_id,
    #: leader_epoch, high_watermark, voters (count), error, broker; None when absent
    controller_quorum: pd.DataFrame | None = None

    @property
    def run_id(self) -> str:
        return str(self.run.get("run_id") or self.run_dir.name)


def verdict_outcome(v: dict[str, Any] | None) -> str | None:
    """The checker's decision as verdict.json records it (``outcome``: as_expected, unexpected,
    inconclusive; checkers/outcome.py), or None when there is none. Read, never judged again:
    every page and file of the report shows this one. A verdict written before ``outcome``
    existed is read by its ``as_expected``."""
    v = v or {}
    if v.get("outcome") in (AS_EXPECTED, UNEXPECTED, INCONCLUSIVE):
        return str(v["outcome"])
    return {True: AS_EXPECTED, False: UNEXPECTED}.get(v.get("as_expected"))


# ---------------------------------------------------------------- small checkers

def _load_json_object(path: Path) -> dict[str, Any]:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ReportInputError(path, f"line {e.lineno}", f"valid JSON ({e.msg})") from None
    except UnicodeDecodeError:
        raise ReportInputError(path, "(file)", "UTF-8 text") from None
    if not isinstance(obj, dict):
        raise ReportInputError(path, "(top level)", f"a JSON object, got {type(obj).__name__}")
    return obj


def _check(path: Path, obj: dict[str, Any], key: str, types: tuple[type, ...], wanted: str,
           *, required: bool = False) -> None:
    if key not in obj or obj[key] is None:
        if required:
            raise ReportInputError(path, key, f"missing; wanted {wanted}")
        return
    value = obj[key]
    # bool is an int in Python; a boolean where a number is wanted is still wrong
    if isinstance(value, bool) and bool not in types:
        raise ReportInputError(path, key, f"{wanted}, got {value!r}")
    if not isinstance(value, types):
        raise ReportInputError(path, key, f"{wanted}, got {value!r}")


def _validate_run(path: Path, run: dict[str, Any]) -> None:
    num = (int, float)
    _check(path, run, "run_id", (str,), "a string")
    _check(path, run, "campaign", (str,), "the campaign name as a string")
    _check(path, run, "target", (str,), "the target name as a string")
    _check(path, run, "seed", (int,), "an integer seed")
    _check(path, run, "wall_at_t0", num, "the wall-clock time of t=0 in seconds (a number)")
    _check(path, run, "duration_s", num, "a number of seconds")
    _check(path, run, "switches", (dict,), "an object of target settings")
    _check(path, run, "command", (str,), "the exact re-run command line as a string")
    _check(path, run, "target_version", (str,), "a string such as 'kraftsim 0.1'")
    if run.get("expect") is not None and run["expect"] not in EXPECTS:
        raise ReportInputError(path, "expect", f"one of {', '.join(EXPECTS)}, got {run['expect']!r}")


def _validate_verdict(path: Path, v: dict[str, Any]) -> None:
    _check(path, v, "valid", (bool,), "true or false", required=True)
    _check(path, v, "counts", (dict,), "an object of anomaly name -> integer count", required=True)
    for name, n in v["counts"].items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ReportInputError(path, f"counts.{name}", f"a non-negative integer, got {n!r}")
    _check(path, v, "acked_writes", (int,), "an integer")
    _check(path, v, "as_expected", (bool,), "true or false")
    _check(path, v, "examples", (dict,), "an object of anomaly name -> list of rows")
    for name, rows in (v.get("examples") or {}).items():
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ReportInputError(path, f"examples.{name}", "a list of row objects")
    _check(path, v, "lost_writes_by_partition", (dict,), "an object of 'topic@partition' -> integer")
    _check(path, v, "stories", (list,), "a list of loss stories (docs/verdict-format.md)")
    for i, st in enumerate(v.get("stories") or []):
        if not isinstance(st, dict) or not isinstance(st.get("sentences"), list):
            raise ReportInputError(path, f"stories[{i}]", "an object with a 'sentences' list")
    _check(path, v, "attribution", (list,), "a list of per-lost-write summaries")


def _read_csv(path: Path, required: tuple[str, ...] = (), **kw: Any) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, **kw)
    except pd.errors.EmptyDataError:
        return pd.DataFrame(columns=list(required))
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ReportInputError(path, "(file)", f"CSV with a header row ({first})") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ReportInputError(path, "header", f"columns {', '.join(required)}; missing {', '.join(missing)}")
    return df


def _jsonl(path: Path, notes: list[str]) -> list[dict[str, Any]]:
    st = ReadStats()
    try:
        rows = [r for r in read_jsonl(path, st) if isinstance(r, dict)]
    except UnicodeDecodeError:
        raise ReportInputError(path, "(file)", "UTF-8 JSON Lines") from None
    if st.bad_lines:
        notes.append(f"{path.name}: {st.bad_lines} undecodable line(s) skipped")
    if st.torn_tail:
        notes.append(f"{path.name}: last line cut (writer killed mid-line), ignored")
    return rows


def _jsonl_frame(path: Path, notes: list[str], engine: str = "ujson") -> pd.DataFrame:
    """A JSON Lines file as a DataFrame, fast: pandas' JSON reader over the file up to its
    last newline (a cut last line is what a SIGKILL leaves, as in workloads/history.py).
    A file with undecodable lines falls back to :func:`read_jsonl`, which skips them."""
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1
    if data[cut:].strip():
        notes.append(f"{path.name}: last line cut (writer killed mid-line), ignored")
    body = data[:cut]
    if not body.strip():
        return pd.DataFrame()
    if engine == "pyarrow":
        # several times faster on the observer's hundreds of thousands of samples; its type
        # inference refuses a column that changes type mid-file, so fall back then
        try:
            return pd.read_json(io.BytesIO(body), lines=True, engine="pyarrow")
        except Exception:  # noqa: BLE001 - any refusal just means: use the general reader
            pass
    try:
        df = pd.read_json(io.BytesIO(body), lines=True, dtype=False, convert_dates=False,
                          keep_default_dates=False)
        if not isinstance(df, pd.DataFrame):
            raise ValueError("not a table")
        return df
    except ValueError:
        rows = [r for r in _jsonl(path, []) if isinstance(r, dict)]
        bad = body.count(b"\n") - len(rows)
        if bad:
            notes.append(f"{path.name}: {bad} undecodable line(s) skipped")
        return pd.DataFrame(rows)


# ---------------------------------------------------------------- per input

def _faults(rows: list[dict[str, Any]], end_t: float) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Fault intervals (paired by fault id as attribution pairs them: one definition of a
    fault's interval for the verdict and the page), phases and notes. A fault never stopped
    (harness killed) is shown as active until the end of the run; ``failed`` is the one-line
    reason of a fault whose start failed (healed at once), else None."""
    out = []
    for f in fault_intervals(rows):
        start = f.start if f.start is not None else f.stop   # a stop alone: a zero-length band
        if start is None:
            continue
        out.append({"id": f.id, "fault": f.fault or "?", "targets": ", ".join(f.targets), "start": start,
                    "stop": f.stop if f.stop is not None else max(end_t, start), "healed": f.stop is not None,
                    "failed": f.failed})
    phases: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for r in rows:
        t = r.get("t")
        if not isinstance(t, (int, float)) or isinstance(t, bool):
            continue
        if r.get("kind") == "phase":
            phases.append({"t": float(t), "phase": str(r.get("phase"))})
        elif r.get("kind") in ("note", "node_exit"):   # node_exit: a node that stopped on its own
            text = r.get("text") or r.get("detail") or ""
            notes.append({"t": round(float(t), 3), "note": text if isinstance(text, str) else json.dumps(text)})
    faults = pd.DataFrame(out, columns=["id", "fault", "targets", "start", "stop", "healed", "failed"])
    return faults.sort_values("start", kind="stable").reset_index(drop=True), \
        pd.DataFrame(phases, columns=["t", "phase"]), pd.DataFrame(notes, columns=["t", "note"])


QUORUM_COLUMNS = ["t", "leader_id", "leader_epoch", "high_watermark", "voters", "error", "broker"]


def _controller_quorum(path: Path, notes: list[str]) -> pd.DataFrame:
    """The observer's DescribeQuorum lines (workloads/controller_quorum.py): one row per line
    with a numeric ``t``; ``voters`` becomes the number of voters. A line whose leader or
    epoch is not a whole number is one clear error (file, field, wanted)."""
    rows = []
    for i, r in enumerate(_jsonl(path, notes), 1):
        t = r.get("t")
        if not isinstance(t, (int, float)) or isinstance(t, bool):
            continue
        for k in ("leader_id", "leader_epoch", "high_watermark"):
            v = r.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise ReportInputError(path, f"line {i}: {k}", f"an integer or null, got {v!r}")
        voters = r.get("voters")
        rows.append({"t": float(t), "leader_id": r.get("leader_id"), "leader_epoch": r.get("leader_epoch"),
                     "high_watermark": r.get("high_watermark"),
                     "voters": len(voters) if isinstance(voters, list) else None,
                     "error": r.get("error") if isinstance(r.get("error"), str) else None,
                     "broker": r.get("broker")})
    df = pd.DataFrame(rows, columns=QUORUM_COLUMNS)
    return df.sort_values("t", kind="stable").reset_index(drop=True)


def _events(run_dir: Path, wall_at_t0: float | None, notes: list[str]) -> pd.DataFrame:
    frames: list[pd.DataFrame] = []
    sources = sorted((run_dir / "cluster-logs").glob("*/events.jsonl"))
    proxy = run_dir / "proxy-events.jsonl"
    if proxy.is_file():
        sources.append(proxy)
    for path in sources:
        df = _jsonl_frame(path, notes)
        if df.empty or "wall" not in df.columns or "event" not in df.columns:
            continue
        df = df.assign(wall=pd.to_numeric(df["wall"], errors="coerce"))
        df = df[df["wall"].notna() & df["event"].notna()]
        df = df.assign(host=path.parent.name if path.name == "events.jsonl" else "proxy",
                       t=df["wall"] - wall_at_t0 if wall_at_t0 is not None else float("nan"))
        frames.append(df)
    # real Kafka: hosts with Kafka's log4j files and no events.jsonl, read as the checker reads them
    # (checkers/kafkalog, docs/kafka-logs.md), so the election and ISR tables are not empty there
    kafka = kafkalog.read_cluster_logs(run_dir / "cluster-logs")
    if kafka:
        df = pd.DataFrame(kafka)
        frames.append(df.assign(t=df["wall"] - wall_at_t0 if wall_at_t0 is not None else float("nan")))
    frames = [f for f in frames if not f.empty]
    if frames and wall_at_t0 is None:
        notes.append("run.json has no wall_at_t0: cluster events cannot be placed on the run clock")
    if not frames:
        return pd.DataFrame(columns=["t", "host", "node", "role", "event", "topic", "partition"])
    df = pd.concat(frames, ignore_index=True, sort=False)
    for col in ("topic", "partition"):
        if col not in df.columns:
            df[col] = None
    return df.sort_values("t", kind="stable").reset_index(drop=True)


_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


def _name_topic_ids(events: pd.DataFrame, observer: pd.DataFrame | None,
                    campaign: dict[str, Any] | None, notes: list[str]) -> pd.DataFrame:
    """AlterPartition names topics by id (v2+); the proxy logs the id when it has not seen the
    name. With one topic in the run the id can only be that topic, so its events join the
    partition's row; with several, they stay apart and a note says so."""
    if events.empty or "topic" not in events.columns:
        return events
    is_id = events["topic"].map(lambda v: isinstance(v, str) and bool(_UUID.match(v)))
    if not is_id.any():
        return events
    names: set[str] = set(events.loc[~is_id, "topic"].dropna().astype(str))
    if observer is not None and not observer.empty:
        names |= set(observer["topic"].dropna().astype(str))
    topic = (campaign or {}).get("topic")
    if isinstance(topic, dict) and isinstance(topic.get("name"), str):
        names.add(topic["name"])
    names = {n for n in names if not _UUID.match(n)}
    if len(names) == 1:
        events = events.copy()
        events.loc[is_id, "topic"] = next(iter(names))
    else:
        notes.append(f"{int(is_id.sum())} event(s) name their topic only by id; shown under the id")
    return events


def load_run(run_dir: str | Path, *, timeline: bool = True) -> RunData:
    """Load a run directory; only the directory itself is required.

    ``timeline=False`` reads only run.json, verdict.json and campaign.yaml — what junit.xml
    needs — and skips the observer samples and cluster events, the biggest inputs."""
    d = Path(run_dir)
    if not d.is_dir():
        raise ReportInputError(d, "(directory)", "an existing run directory (results/<run-id>/)")
    notes: list[str] = []

    run_path = d / "run.json"
    if run_path.is_file():
        run = _load_json_object(run_path)
        _validate_run(run_path, run)
        if run.get("error"):
            notes.append(f"run error: {run['error']}")
        run_notes = run.get("notes") if isinstance(run.get("notes"), list) else []
        notes.extend(f"run note: {n}" for n in run_notes)
    else:
        run = {"run_id": d.name}
        notes.append("run.json missing: campaign, seed and re-run command unknown")

    verdict = None
    vpath = d / "verdict.json"
    if vpath.is_file():
        verdict = _load_json_object(vpath)
        _validate_verdict(vpath, verdict)
    else:
        notes.append("verdict.json missing: the checker did not finish; no verdict to show")

    campaign = None
    cpath = d / "campaign.yaml"
    if cpath.is_file():
        try:
            loaded = yaml.safe_load(cpath.read_text(encoding="utf-8"))
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"line {mark.line + 1}" if mark else "(file)"
            raise ReportInputError(cpath, where, "valid YAML") from None
        campaign = loaded if isinstance(loaded, dict) else None

    if not timeline:
        empty = pd.DataFrame()
        return RunData(run_dir=d, run=run, verdict=verdict, campaign=campaign, throughput=None,
                       lost_by_partition=None, faults=empty, phases=empty, timeline_notes=empty, observer=None,
                       events=empty, notes=notes)

    throughput = None
    tp = d / "aggregates" / "throughput.csv"
    if tp.is_file():
        throughput = _read_csv(tp, THROUGHPUT_COLUMNS)
        for c in THROUGHPUT_COLUMNS:
            throughput[c] = pd.to_numeric(throughput[c], errors="coerce")
        throughput = throughput.dropna(subset=["second"]).sort_values("second").reset_index(drop=True)
    else:
        notes.append("aggregates/throughput.csv missing: no throughput or latency plot")

    lbp = None
    lp = d / "aggregates" / "lost_by_partition.csv"
    if lp.is_file():
        lbp = _read_csv(lp)

    duration = run.get("duration_s")
    end_t = float(duration) if isinstance(duration, (int, float)) else 0.0
    if throughput is not None and len(throughput):
        end_t = max(end_t, float(throughput["second"].max()) + 1)

    tl = d / "timeline.jsonl"
    faults, phases, tl_notes = _faults(_jsonl(tl, notes) if tl.is_file() else [], end_t)
    if not tl.is_file():
        notes.append("timeline.jsonl missing: no fault intervals")

    observer = None
    op = d / "observer.jsonl"
    if op.is_file():
        observer = _jsonl_frame(op, notes, engine="pyarrow").reindex(columns=["t", "topic", "partition", "leader",
                                                              "leader_epoch", "isr", "elr", "error"])
        observer["t"] = pd.to_numeric(observer["t"], errors="coerce")
        observer = observer.dropna(subset=["t"]).sort_values("t", kind="stable").reset_index(drop=True)

    cq = d / "controller-quorum.jsonl"
    controller_quorum = _controller_quorum(cq, notes) if cq.is_file() else None

    wall0 = run.get("wall_at_t0")
    only = (verdict or {}).get("events_only") if (verdict or {}).get("mode") == EVENTS_ONLY else None
    if isinstance(only, dict):
        # only the cluster's logs (checkers/events_only.py): the checker's clock starts at their
        # first event, and there is no run to miss files of
        wall0 = only.get("wall_at_t0") if isinstance(only.get("wall_at_t0"), (int, float)) else None
        notes[:] = [n for n in notes if not n.startswith(("run.json missing", "aggregates/throughput.csv missing",
                                                          "timeline.jsonl missing"))]
        notes.append("only the cluster's logs were read (no run.json, no histories): what their events say "
                     "happened, and no lost-write verdict")
    events = _events(d, float(wall0) if wall0 is not None else None, notes)
    events = _name_topic_ids(events, observer, campaign, notes)
    if not (d / "cluster-logs").is_dir():
        notes.append("cluster-logs/ missing: no elections, ISR or AlterPartition events")

    return RunData(run_dir=d, run=run, verdict=verdict, campaign=campaign, throughput=throughput,
                   lost_by_partition=lbp, faults=faults, phases=phases, timeline_notes=tl_notes,
                   observer=observer,
                   events=events, notes=notes, controller_quorum=controller_quorum)


def read_evidence(run_dir: Path, anomaly: str, limit: int | None) -> tuple[pd.DataFrame | None, Path | None]:
    """The first ``limit`` rows of ``anomalies/<anomaly>.csv`` and its path (``None`` if absent).

    Reading only the head is what keeps a 10 M-op run's report fast: the table shows the
    top rows, the link next to it leads to the whole file.
    """
    path = run_dir / "anomalies" / f"{anomaly}.csv"
    if not path.is_file():
        return None, None
    return _read_csv(path, nrows=limit), path


def read_evidence_columns(run_dir: Path, anomaly: str, columns: list[str]) -> pd.DataFrame | None:
    """Selected columns of a whole evidence CSV (for plotting every lost write's ack time)."""
    path = run_dir / "anomalies" / f"{anomaly}.csv"
    if not path.is_file():
        return None
    header = _read_csv(path, nrows=0)
    present = [c for c in columns if c in header.columns]
    if not present:
        return pd.DataFrame(columns=columns)
    return _read_csv(path, usecols=present)
