"""``write_report(run_dir)``: one self-contained ``report.html`` for one run.

Why self-contained: reports are opened from disk, attached to tickets and archived with
nightly results on machines without network; so no CDN, no scripts, no external images —
plots are inline SVG, styles inline. Big evidence stays in the checker's CSVs beside the
report and is linked, never inlined (a 10 M-op run must still give a page of a few MB).

Top to bottom: verdict banner; for a directory that held only the cluster's logs (no histories,
checkers/events_only.py) what they say happened, per partition, before anything is listed; lost
writes - first the loss story of each partition (what
happened, in order, and the Kafka rule that let it through: checkers/stories.py), then per
partition the writes, each with its mechanism and the raw evidence folded; the timeline
(faults, throughput, ack latency, leaders, ISR, AlterPartition, lost writes at ack time);
every other anomaly; availability; leader choices per election (docs/seeds.md#seed-004); the events; how
to re-run. The story comes before the timeline so a reviewer's first screen says what
happened.
"""
from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

import pandas as pd

from checkers.outcome import AS_EXPECTED, EVENTS_ONLY, INCONCLUSIVE, FaultCount
from harness.report import controllers
from harness.report import events as ev
from harness.report import jinja
from harness.report import plots, tables
from harness.report.index import write_index
from harness.report.inputs import ANOMALY_ORDER, RunData, load_run, read_evidence, read_evidence_columns, verdict_outcome

#: anomalies the checker counts but which do not make a history invalid (docs/anomalies.md)
INFORMATIONAL = {"unseen_at_end", "failed_write_visible_allowed", "controller_split_brain", "isr_change_stuck",
                 "log_not_recovered", "log_dir_offline"}

TOP_N = 200           # rows per evidence table shown inline
EVENT_TOP_N = 300     # rows per event table shown inline
DATA_DIR = "report-data"  # full event tables written beside report.html

ANOMALY_TEXT: dict[str, str] = {
    "lost_write": "An acknowledged (acks=all) send never read, although a later read of its partition reached past its offset or the final drain read the whole partition.",
    "unseen_at_end": "Acknowledged sends no one had read when the run ended, with no read past them: availability, not loss.",
    "inconsistent_offset": "One partition+offset observed with different values: the replicas' logs diverged.",
    "duplicate": "One value at more than one offset.",
    "offset_mismatch": "An acknowledged send whose acknowledged offset holds another value in the reads.",
    "nonmonotonic_send": "One producer's successive acknowledged sends to a partition went backwards.",
    "send_skip": "Between two successive acknowledged sends of one producer lie its own other values, sent before or after them (acknowledged or not): the log reordered its writes.",
    "realtime_offset_regression": "A send acknowledged at or below an offset already acknowledged or read before it was invoked (seed 003 §2.7).",
    "nonmonotonic_poll": "One consumer's successive reads of a partition went backwards.",
    "poll_skip": "One consumer's successive reads of a partition skipped offsets that others saw.",
    "failed_write_visible": "A send that failed with a 'never appended' error was read anyway.",
    "ack_below_min_isr": "A send acknowledged while fewer replicas than min.insync.replicas (capped at the replication factor from Kafka 3.7) could hold it: by the followers' own log end offsets where the target records them, else by an ISR view (column judged_by; seed 003 §2.6).",
    "visible_end_regression": "The partition's visible end (HWM) moved backwards between observations (seed 003 §2.7).",
    "failed_write_visible_allowed": "A send that failed after append (NOT_ENOUGH_REPLICAS_AFTER_APPEND or timeout) was read: allowed by Kafka (seed 003 §2.7), counted only.",
    "controller_split_brain": "Two controllers led the metadata quorum at once, in two epochs, for longer than Kafka's check quorum allows (1.5 fetch timeouts from 3.7): the old one kept serving the brokers it still reached - answering none of their heartbeats or ISR changes - while the new one fenced them. From the controllers' events; counted only (docs/anomalies.md).",
    "isr_change_stuck": "A leader's ISR change (AlterPartition) stayed unresolved for more than 10 s: no answer, or an error after which Kafka waits for newer metadata that did not come. Its ISR was frozen meanwhile: a dead follower kept in it holds the high watermark, acks=all writes time out. From the leaders' leader_isr events; counted only (docs/anomalies.md).",
    "uncommitted_read": "A reader was shown a record that was never committed: the replica it read from held it below its own high watermark, then truncated it to match its leader (Kafka: \"Truncating ... below high watermark\"). From the brokers' truncation events and the inconsistent offsets (docs/anomalies.md).",
    "hwm_regression": "A replica truncated its log below its own high watermark: records it had shown as committed to any reader were removed, with no unclean election to permit it (Kafka: \"Non-monotonic update of high watermark\"; KAFKA-14704's demoted leader). From the brokers' truncation events (docs/anomalies.md).",
    "log_not_recovered": "A broker loaded a log dir as cleanly shut down although a page-cache-loss cut had hit it and no process had loaded it since: the clean-shutdown marker came from a start-up that never loaded the logs, so the cut log was trusted without recovery (docs/anomalies.md).",
    "log_dir_offline": "A broker took a log dir offline (an unreadable checkpoint, a storage error); with no dir left it halts (docs/anomalies.md).",
}


def _wall(ts: Any) -> str:
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return str(ts) if ts else "—"


def expectation(data: RunData) -> dict[str, Any]:
    """The banner's facts: lost count, what the campaign expected, and whether that held - as
    the checker decided it (verdict ``outcome``, ``as_expected``, ``outcome_reason``;
    checkers/outcome.py). Read, never judged again here: a verdict without an outcome shows
    "expectation unknown"."""
    v = data.verdict or {}
    counts = v.get("counts") or {}
    lost = counts.get("lost_write") if data.verdict is not None else None
    expect = v.get("expected") or data.run.get("expect") or (data.campaign or {}).get("expect")
    outcome = verdict_outcome(v)
    as_expected = None if outcome is None or outcome == INCONCLUSIVE else outcome == AS_EXPECTED
    events_only = v.get("mode") == EVENTS_ONLY     # no history was checked: validity is not known
    return {"lost": lost, "expect": expect, "as_expected": as_expected,
            "valid": None if events_only else v.get("valid"), "events_only": events_only,
            "outcome": outcome, "reason": str(v.get("outcome_reason") or ""),
            "inconclusive_because": [str(x) for x in v.get("inconclusive_because") or []],
            "incidents": v.get("incidents"),
            "acked": v.get("acked_writes"), "invalid_because": [str(x) for x in v.get("invalid_because") or []],
            "counts": counts, "history_records": v.get("history_records"),
            "faults": v.get("faults") if isinstance(v.get("faults"), dict) else None,
            "failed_faults": _failed_faults(v),
            "halts": [str(h.get("text")) for h in v.get("halts") or [] if isinstance(h, dict)],
            "checker": v.get("checker") if isinstance(v.get("checker"), dict) else {}}


def _failed_faults(v: dict[str, Any]) -> list[str]:
    """The verdict's failed faults, one line per reason (checkers/outcome.py groups them)."""
    try:
        fc = FaultCount.from_run(v)
    except ValueError:
        return []
    return fc.failed_groups() if fc is not None else []


def _lost_by_partition(data: RunData, lost_head: pd.DataFrame) -> dict[str, int]:
    v = data.verdict or {}
    if v.get("lost_writes_by_partition"):
        return {str(k): int(n) for k, n in v["lost_writes_by_partition"].items() if int(n) > 0}
    lbp = data.lost_by_partition
    if lbp is not None and not lbp.empty and "partition" in lbp.columns:
        ncol = tables.pick(lbp, ("lost_write", "lost_writes", "lost", "count", "n"))
        if ncol:
            keys = [ev.pkey(t, p) for t, p in zip(lbp.get("topic", lbp["partition"]), lbp["partition"])] \
                if "topic" in lbp.columns else [str(p) for p in lbp["partition"]]
            return {k: int(n) for k, n in zip(keys, lbp[ncol]) if int(n) > 0}
    if not lost_head.empty:
        return {str(k): int(n) for k, n in lost_head["partition"].value_counts().items()}
    return {}


def _anomaly_sections(data: RunData) -> list[dict[str, Any]]:
    v = data.verdict or {}
    counts: dict[str, int] = v.get("counts") or {}
    names = [n for n in ANOMALY_ORDER if n in counts and n != "lost_write"]
    names += sorted(n for n in counts if n not in ANOMALY_ORDER)
    out = []
    for name in names:
        n = counts[name]
        head, path = read_evidence(data.run_dir, name, TOP_N) if n else (None, None)
        if head is None or head.empty:
            head = tables.examples_table((v.get("examples") or {}).get(name) or [])
        parquet = data.run_dir / "anomalies" / f"{name}.parquet"
        out.append({"name": name, "count": n, "text": ANOMALY_TEXT.get(name, ""),
                    "informational": name in INFORMATIONAL,
                    "table": tables.to_html(head.head(TOP_N)) if n else "",
                    "shown": min(len(head), TOP_N), "csv": tables.rel(path, data.run_dir),
                    "parquet": tables.rel(parquet, data.run_dir) if parquet.exists() else None})
    out.sort(key=lambda s: (s["count"] == 0, s["informational"]))
    return out


def _story_view(st: dict[str, Any]) -> dict[str, Any]:
    """One loss story (verdict.json ``stories``, checkers/stories.py) as the page shows it: the
    sentences in order, the mechanism, and each step's event reference for the evidence list."""
    steps = []
    for x in st.get("steps") or []:
        if not isinstance(x, dict):
            continue
        ref = x.get("event") if isinstance(x.get("event"), dict) else {}
        where = f"{ref.get('source')}:{ref.get('line')}" if ref.get("source") and ref.get("line") else (ref.get("source") or "")
        steps.append({"t": x.get("t"), "kind": x.get("kind"), "text": x.get("text"), "where": where})
    others = [m for m in st.get("mechanisms") or [] if m != st.get("mechanism")]
    return {"key": ev.pkey(st.get("topic"), st.get("partition")), "mechanism": st.get("mechanism") or "unexplained",
            "label": st.get("label") or "", "others": others, "allowed_by": st.get("allowed_by"),
            "sentences": [str(x) for x in st.get("sentences") or []], "steps": steps,
            "lost": st.get("lost") if isinstance(st.get("lost"), dict) else {}}


def _event_story_view(st: dict[str, Any]) -> dict[str, Any]:
    """One "what happened" story (verdict.json ``event_stories``, checkers/stories.py's events
    kind): its one-line summary, the sentences in order, and each step's line for the evidence list."""
    view = _story_view(st)
    topic, part = st.get("topic"), st.get("partition")
    view["key"] = ev.pkey(topic, part) if topic is not None else "cluster"
    for x, raw in zip(view["steps"], [y for y in st.get("steps") or [] if isinstance(y, dict)]):
        x["count"] = raw.get("count")
    counts = st.get("counts") if isinstance(st.get("counts"), dict) else {}
    view["counts"] = {k: v for k, v in counts.items() if v and not isinstance(v, dict)}
    return view


def _event_table(df: pd.DataFrame, name: str, data_dir: Path) -> dict[str, Any]:
    link = None
    if len(df) > EVENT_TOP_N:
        data_dir.mkdir(exist_ok=True)
        df.to_csv(data_dir / f"{name}.csv", index=False)
        link = f"{DATA_DIR}/{name}.csv"
    return {"count": len(df), "table": tables.to_html(df.head(EVENT_TOP_N)), "csv": link,
            "shown": min(len(df), EVENT_TOP_N)}


def build_context(data: RunData) -> dict[str, Any]:
    run, d = data.run, data.run_dir
    exp = expectation(data)

    lost_raw, lost_csv = read_evidence(d, "lost_write", TOP_N)
    if (lost_raw is None or lost_raw.empty) and data.verdict:
        lost_raw = tables.examples_table((data.verdict.get("examples") or {}).get("lost_write") or [])
    lost = tables.lost_writes_table(lost_raw, data.verdict) if lost_raw is not None and not lost_raw.empty \
        else pd.DataFrame(columns=list(tables.LOST_ALIASES))
    by_part = _lost_by_partition(data, lost)
    stories = tables.story_index(data.verdict)
    per_partition = []
    for k, n in sorted(by_part.items(), key=lambda kv: (-kv[1], ev.pkey_order(kv[0]))):
        rows_k = lost[lost["partition"] == k].drop(columns=["partition"])
        st = stories.get(k) or {}
        if len(rows_k):
            rows_k = rows_k.assign(attribution=[tables.evidence_cell(st.get("mechanism"), st.get("label"), a)
                                                for a in rows_k["attribution"]])
        per_partition.append({"key": k, "count": n, "shown": len(rows_k), "mechanism": st.get("mechanism"),
                              "table": tables.to_html(rows_k, cls="data lost", html_cols=("attribution",))
                              if len(rows_k) else ""})
    lost_parquet = d / "anomalies" / "lost_write.parquet"

    # every lost write's ack time for the plot: only three columns of the full CSV
    pts = read_evidence_columns(d, "lost_write", ["topic", "partition", "ack_t", "t_ack", "acked_t",
                                                    "ack_time", "ok_t", "t"])
    if pts is None or pts.empty:
        pts = lost_raw if lost_raw is not None else pd.DataFrame()
    lost_pts = pd.DataFrame(columns=["t", "partition"])
    if pts is not None and not pts.empty:
        tcol = tables.pick(pts, tables.LOST_ALIASES["ack t (s)"])
        if tcol and "partition" in pts.columns:
            topics = pts["topic"] if "topic" in pts.columns else [None] * len(pts)
            lost_pts = pd.DataFrame({"t": pd.to_numeric(pts[tcol], errors="coerce"),
                                     "partition": [ev.pkey(t, p) for t, p in zip(topics, pts["partition"])]}
                                    ).dropna()

    elections = ev.elections(data.events)
    isr = ev.isr_changes(data.events)
    alters = ev.alter_partitions(data.events)
    brokers = ev.broker_events(data.events)
    duration = run.get("duration_s")
    end_t = float(duration) if isinstance(duration, (int, float)) else 0.0
    if data.throughput is not None and len(data.throughput):
        end_t = max(end_t, float(data.throughput["second"].max()) + 1)
    for df in (data.faults.rename(columns={"stop": "t"}), data.events, data.observer):
        if df is not None and not df.empty and "t" in df.columns and df["t"].notna().any():
            end_t = max(end_t, float(df["t"].max()))
    series = ev.leader_series(data.events, data.observer)
    avail = ev.availability(series, end_t, data.observer, alters, by_part.keys())

    # partitions drawn: lost writes first, then the most eventful
    activity: dict[str, float] = {}
    for k in series:
        activity[k] = activity.get(k, 0) + len(series[k])
    for df in (elections, isr, alters):
        for k, n in df["partition"].value_counts().items() if not df.empty else []:
            activity[k] = activity.get(k, 0) + n
    for k, n in by_part.items():
        activity[k] = activity.get(k, 0) + 1e9 + n
    rows = sorted(activity, key=lambda k: (-activity[k], ev.pkey_order(k)))
    shown_rows = sorted(rows[:plots.MAX_PARTITION_ROWS], key=ev.pkey_order)
    ctl_segments, ctl_voters = controllers.active_controller(data.controller_quorum, data.events, end_t)
    ctl_lane = controllers.show_lane(ctl_segments, ctl_voters)
    ctl_names = controllers.hosts(data.events)
    timeline = plots.timeline_svg(end_t=end_t, throughput=data.throughput, faults=data.faults,
                                  phases=data.phases, rows=shown_rows, intervals=series, elections=elections,
                                  isr=isr, alters=alters, lost=lost_pts,
                                  hidden_partitions=max(0, len(rows) - len(shown_rows)),
                                  controllers=ctl_segments if ctl_lane else None, controller_names=ctl_names,
                                  controller_elected=controllers.elected_times(data.events))
    lost_bars = plots.lost_by_partition_svg(pd.Series(by_part)) if len(by_part) > 1 else ""

    faults = data.faults.assign(duration=(data.faults["stop"] - data.faults["start"]).round(3)) \
        if not data.faults.empty else data.faults
    if not faults.empty:
        faults = faults.assign(start=faults["start"].round(3), stop=faults["stop"].round(3),
                               healed=faults["healed"].map({True: "yes", False: "NO (run ended)"}),
                               failed=faults["failed"].map(lambda r: f"FAILED TO START: {r}" if isinstance(r, str) and r
                                                           else ""))
    data_dir = d / DATA_DIR
    switches = run.get("switches") or {}
    return {
        "title": f"faultline — {data.run_id}",
        "run": run, "run_id": data.run_id, "exp": exp,
        "campaign": run.get("campaign") or (data.campaign or {}).get("name") or "—",
        "target": run.get("target") or "—", "version": run.get("target_version") or "—",
        "seed": run.get("seed"), "switches": switches,
        "started": _wall(run.get("started_wall")), "duration": duration,
        "command": run.get("command"), "campaign_path": run.get("campaign_path"),
        "notes": data.notes,
        "timeline": timeline, "lost_bars": lost_bars,
        "controllers": {"count": len(ctl_segments), "voters": ctl_voters, "lane": ctl_lane,
                        "source": ctl_segments[0].source if ctl_segments else None,
                        "table": tables.to_html(controllers.table(ctl_segments, ctl_names), table_id="active-controller")}
        if ctl_segments else None,
        "lost_summary": tables.to_html(tables.lost_summary(by_part, lost, data.lost_by_partition, stories), table_id="lost-summary"),
        "lost_partitions": per_partition, "lost_shown": len(lost),
        "stories": [_story_view(st) for st in (data.verdict or {}).get("stories") or [] if isinstance(st, dict)],
        "event_stories": [_event_story_view(st) for st in (data.verdict or {}).get("event_stories") or []
                          if isinstance(st, dict)],
        "events_only": (data.verdict or {}).get("events_only") if exp["events_only"] else None,
        "mechanisms": (data.verdict or {}).get("mechanisms") or {},
        "lost_csv": tables.rel(lost_csv, d),
        "lost_parquet": tables.rel(lost_parquet, d) if lost_parquet.exists() else None,
        "anomalies": _anomaly_sections(data),
        "availability": tables.to_html(avail[(avail.drop(columns=["partition"]) != 0).any(axis=1)]
                                       if not avail.empty else avail, table_id="availability"),
        "availability_total": len(avail),
        "writes": ev.write_unavailability(data.throughput),
        "elections": _event_table(elections, "elections", data_dir),
        "unclean": int((elections["reason"] == "unclean").sum()) if not elections.empty else 0,
        "isr": _event_table(isr, "isr_changes", data_dir),
        "alters": _event_table(alters, "alter_partitions", data_dir),
        "alters_rejected": int((~alters["accepted"].astype(bool)).sum()) if not alters.empty else 0,
        "brokers": _event_table(brokers, "broker_events", data_dir),
        "faults": tables.to_html(faults, table_id="faults"),
        "timeline_notes": tables.to_html(data.timeline_notes, table_id="timeline-notes"),
        "generated": _wall(_dt.datetime.now(_dt.timezone.utc).timestamp()),
    }


def write_report(run_dir: str | Path, *, index: bool = True) -> Path:
    """Render ``<run_dir>/report.html`` and return its path; with ``index`` (the default) also
    rewrite the results root's ``index.html`` (``<run_dir>/../index.html``), so every run that
    gets a report also appears in the nightly list without a separate step (not for a directory
    that held only the cluster's logs: its parent is no results directory).

    Raises :class:`harness.report.errors.ReportInputError` (one line: file, field, wanted)
    for malformed inputs; missing optional inputs only add a note to the page.
    """
    data = load_run(run_dir)
    ctx = build_context(data)
    page = jinja.env().get_template("report.html.j2").render(**ctx)
    out = data.run_dir / "report.html"
    tmp = out.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)  # a viewer never sees half a report
    if index and not ctx["exp"]["events_only"]:   # a logs-only directory is no run of a results dir
        write_index(data.run_dir.resolve().parent)
    return out


__all__ = ["write_report", "build_context", "expectation"]
