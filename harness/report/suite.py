"""The suite's ``index.html`` and ``junit.xml``, from the suite directory's own files.

Why from files only (``suite.json`` and the append-only ``suite-log.jsonl``): the page is
rewritten after every cell, by a resumed suite as much as by the first one, and a CI job may
render it from a copied directory. Unexpected cells come first because they are the reason
anyone opens the page; each row links to the cell's own run report. A suite with axes gets a
table before it with one row per cell and one column per axis value (:func:`side_by_side`). The trend column reads
the earlier suite directories of the same suite name under the same results directory
(oldest to newest), so "which night did this cell start losing writes" is one glance.
"""
from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

from checkers.outcome import FaultCount
from harness.report import jinja
from harness.report import junit_xml as jx

ORDER = {"unexpected": 0, "error": 1, "inconclusive": 2, "as-expected": 3, "pending": 4}
TREND_LEN = 20


def _read_log(path: Path) -> list[dict[str, Any]]:
    out = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict):
            out.append(r)
    return out


def _spec(suite_dir: Path) -> dict[str, Any]:
    return json.loads((suite_dir / "suite.json").read_text(encoding="utf-8"))


def _started(records: list[dict[str, Any]]) -> float:
    return next((float(r["wall"]) for r in records if r.get("event") == "suite_started"), 0.0)


def load_suite_dir(suite_dir: Path) -> dict[str, Any]:
    spec = _spec(suite_dir)
    recs = _read_log(suite_dir / "suite-log.jsonl")
    done = {r["cell"]: r for r in recs if r.get("event") == "cell_finished"}
    cells = []
    for c in spec["cells"]:
        r = done.get(c["id"])
        cells.append({"id": c["id"], "cell": c, "result": r, "outcome": r["outcome"] if r else "pending"})
    return {"spec": spec, "records": recs, "cells": cells, "started": _started(recs),
            "finished": next((r for r in reversed(recs) if r.get("event") == "suite_finished"), None)}


def trends(suite_dir: Path, name: str, limit: int = TREND_LEN) -> dict[str, list[dict[str, Any]]]:
    """Per cell id: the outcomes of earlier suites of this name beside this one, oldest first."""
    root = suite_dir.parent
    earlier = []
    for d in root.glob("suite-*"):
        if d == suite_dir or not (d / "suite.json").is_file():
            continue
        try:
            if _spec(d).get("name") != name:
                continue
        except (OSError, ValueError):
            continue
        recs = _read_log(d / "suite-log.jsonl")
        earlier.append((_started(recs), d, recs))
    earlier.sort(key=lambda t: t[0])
    out: dict[str, list[dict[str, Any]]] = {}
    for started, d, recs in earlier[-limit:]:
        for r in recs:
            if r.get("event") == "cell_finished":
                out.setdefault(r["cell"], []).append({
                    "outcome": r["outcome"], "lost": r.get("lost"), "suite": d.name,
                    "date": _dt.datetime.fromtimestamp(started, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M")})
    return out


def failed_faults(result: dict[str, Any]) -> str:
    """A cell's failed faults, grouped by reason, from its verdict's ``faults`` (checkers/outcome.py)."""
    try:
        fc = FaultCount.from_run(result)
    except ValueError:
        return ""
    return fc.describe_failed(limit=50) if fc is not None else ""


def _href(suite_dir: Path, run_dir: str | None) -> str | None:
    if not run_dir:
        return None
    p = Path(run_dir) / "report.html"
    if not p.is_file():
        return None
    try:
        return str(p.relative_to(suite_dir))
    except ValueError:
        return p.as_uri()


def side_by_side(spec: dict[str, Any], cells: list[dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A suite with ``axes`` (harness/suite/spec.py): one row per cell (its ``row``: name, seed and
    inventory) and one column per combination of axis values, each holding that run's row of the
    flat table - so a pair's result under each value reads across one line. None without axes.
    A row is marked by its worst outcome, and the rows keep the suite's order (pairs together)."""
    axes = spec.get("axes") or {}
    if not axes:
        return None
    by_id = {r["id"]: r for r in rows}
    columns: list[tuple[tuple[str, str], ...]] = []
    lines: dict[str, dict[tuple, dict[str, Any]]] = {}
    for c in cells:
        combo = tuple((c["cell"].get("axes") or {}).items())
        if combo not in columns:
            columns.append(combo)
        lines.setdefault(c["cell"].get("row") or c["id"], {})[combo] = by_id[c["id"]]
    out = []
    for name, got in lines.items():
        runs = [got.get(col) for col in columns]
        worst = min((r["outcome"] for r in runs if r), key=lambda o: ORDER.get(o, 9), default="pending")
        expects = sorted({r["expect"] for r in runs if r})
        out.append({"row": name, "outcome": worst, "expect": ", ".join(expects), "runs": runs})
    return {"axes": list(axes), "columns": [", ".join(f"{k}={v}" for k, v in col) for col in columns],
            "rows": out}


def write_suite_index(suite_dir: str | Path) -> Path:
    suite_dir = Path(suite_dir)
    data = load_suite_dir(suite_dir)
    name = data["spec"]["name"]
    tr = trends(suite_dir, name)
    rows = []
    for c in data["cells"]:
        r = c["result"] or {}
        av = r.get("availability") or {}
        rows.append({
            "id": c["id"], "outcome": c["outcome"], "expect": c["cell"]["expect"],
            "reason": r.get("reason") or ("not run yet" if c["outcome"] == "pending" else ""),
            "label": r.get("label") or "", "lost": r.get("lost"), "acked": r.get("acked"),
            "mechanisms": ", ".join(f"{k}={v}" for k, v in (r.get("mechanisms") or {}).items()),
            "unavailable": av.get("seconds_without_ack"), "failed": av.get("failed"),
            "duration": r.get("duration_s"), "href": _href(suite_dir, r.get("run_dir")),
            "run": Path(r["run_dir"]).name if r.get("run_dir") else "",
            "seed": c["cell"].get("seed"), "overrides": " ".join(c["cell"]["overrides"]),
            "campaign": Path(c["cell"]["campaign"]).name, "trend": tr.get(c["id"], []),
            "notes": "; ".join(r.get("notes") or []), "index": c["cell"].get("index", 0),
            "faults": r.get("faults") if isinstance(r.get("faults"), dict) else None,
            "failed_faults": failed_faults(r), "halts": "; ".join(r.get("halts") or []),
        })
    matrix = side_by_side(data["spec"], data["cells"], rows)
    # unexpected first; within an outcome the suite's own order keeps each pair together
    rows.sort(key=lambda x: (ORDER.get(x["outcome"], 9), x["index"]))
    counts: dict[str, int] = {}
    for x in rows:
        counts[x["outcome"]] = counts.get(x["outcome"], 0) + 1
    fin = data["finished"]
    html = jinja.env().get_template("suite_index.html.j2").render(
        name=name, description=data["spec"].get("description") or "", rows=rows, counts=sorted(counts.items()),
        started=_dt.datetime.fromtimestamp(data["started"], _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        if data["started"] else "?",
        state=("finished, exit %s" % fin["exit"]) if fin else "running or interrupted (resume with --resume)",
        total_s=sum(x["duration"] or 0 for x in rows), suite_dir=str(suite_dir), matrix=matrix)
    out = suite_dir / "index.html"
    tmp = out.with_suffix(".html.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return out


def write_suite_junit(suite_dir: str | Path) -> Path:
    """One test case per cell: unexpected → failure, error/inconclusive/pending → error."""
    suite_dir = Path(suite_dir)
    data = load_suite_dir(suite_dir)
    name = data["spec"]["name"]
    suite = jx.Suite(f"faultline.suite.{name}")
    suite.properties.append(("suite_dir", str(suite_dir)))
    for c in data["cells"]:
        r = c["result"] or {}
        case = jx.Case(f"{c['id']}: expect {c['cell']['expect']}", classname=f"faultline.suite.{name}",
                       time=float(r.get("duration_s") or 0.0))
        f = r.get("faults") if isinstance(r.get("faults"), dict) else None
        detail = "\n".join(x for x in (
            r.get("reason"), f"run: {r.get('run_dir')}" if r.get("run_dir") else "",
            f"faults: {f.get('applied')} applied, {f.get('failed')} failed (min {f.get('min_applied')})" if f else "",
            "failed faults: " + failed_faults(r) if failed_faults(r) else "",
            "stopped on their own: " + "; ".join(r.get("halts") or []) if r.get("halts") else "",
            "overrides: " + " ".join(c["cell"]["overrides"])) if x)
        if c["outcome"] == "unexpected":
            case.failure = (r.get("reason") or "unexpected", "UnexpectedOutcome", detail)
        elif c["outcome"] in ("error", "inconclusive"):
            case.error = (r.get("reason") or c["outcome"], "Inconclusive" if c["outcome"] == "inconclusive"
                          else "Infrastructure", detail)
        elif c["outcome"] == "pending":
            case.error = ("not run: the suite was interrupted", "NotRun", detail)
        else:
            case.system_out = detail
        suite.cases.append(case)
    return jx.write(suite_dir / "junit.xml", f"faultline suite {name}", [suite])
