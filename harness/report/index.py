"""``write_index(results_root)``: ``results/index.html`` listing every run, newest first.

Why: nightly series are read as a list — which night started losing writes, under which
campaign and target — and each row links to that run's report. Rewritten after each run
from the run directories themselves (``run.json`` + ``verdict.json``), so it needs no state
of its own and a deleted run simply disappears. A run whose files are malformed is listed
with the one-line problem instead of breaking the index for every other run.
"""
from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

import pandas as pd

from harness.report import jinja
from harness.report.errors import ReportInputError
from checkers.outcome import AS_EXPECTED, INCONCLUSIVE, UNEXPECTED
from harness.report.inputs import _load_json_object, _validate_run, _validate_verdict, verdict_outcome


def _row(run_dir: Path) -> dict[str, Any]:
    row: dict[str, Any] = {"run": run_dir.name, "href": None, "date": "", "sort": 0.0, "campaign": "",
                           "target": "", "verdict": "no verdict", "state": "unknown", "lost": None,
                           "expect": "", "duration": None, "seed": None, "problem": ""}
    try:
        run = _load_json_object(run_dir / "run.json")
        _validate_run(run_dir / "run.json", run)
        row["run"] = str(run.get("run_id") or run_dir.name)
        started = run.get("started_wall") or run.get("wall_at_t0")
        if isinstance(started, (int, float)):
            row["sort"] = float(started)
            row["date"] = _dt.datetime.fromtimestamp(started, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        row.update(campaign=run.get("campaign") or "", target=run.get("target") or "",
                   expect=run.get("expect") or "", duration=run.get("duration_s"), seed=run.get("seed"))
        vpath = run_dir / "verdict.json"
        if vpath.is_file():
            v = _load_json_object(vpath)
            _validate_verdict(vpath, v)
            lost = int(v["counts"].get("lost_write", 0))
            row["lost"] = lost
            # the checker's decision (checkers/outcome.py), read as report.html reads it
            outcome = verdict_outcome(v)
            row["verdict"] = ("loss" if lost else "no loss") + {
                AS_EXPECTED: " (as expected)", UNEXPECTED: " — UNEXPECTED",
                INCONCLUSIVE: " — INCONCLUSIVE"}.get(outcome, "")   # inconclusive: neither a pass nor a failure
            row["state"] = {AS_EXPECTED: "expected", UNEXPECTED: "unexpected"}.get(outcome, "unknown")
            row["expect"] = v.get("expected") or row["expect"]
    except ReportInputError as e:
        row["problem"] = str(e)
    if (run_dir / "report.html").is_file():
        row["href"] = f"{run_dir.name}/report.html"
    if not row["sort"]:
        row["sort"] = (run_dir / "run.json").stat().st_mtime
    return row


def runs_table(results_root: Path) -> pd.DataFrame:
    """One row per run directory (a directory holding run.json), newest first."""
    rows = [_row(p.parent) for p in sorted(results_root.glob("*/run.json"))
            if not p.parent.is_symlink()]   # RESULTS/latest is the newest run once more (harness/latest.py)
    cols = ["run", "href", "date", "sort", "campaign", "target", "verdict", "state", "lost", "expect",
            "duration", "seed", "problem"]
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["sort", "run"], ascending=[False, False], kind="stable").reset_index(drop=True)


def by_campaign(df: pd.DataFrame) -> pd.DataFrame:
    """One row per campaign and target: how many runs, how many unexpected, and the newest
    verdict — the first thing to read in a nightly series."""
    cols = ["campaign", "target", "runs", "unexpected", "lost (total)", "newest", "newest verdict"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for (campaign, target), g in df.groupby(["campaign", "target"], sort=True):
        newest = g.sort_values("sort", ascending=False).iloc[0]
        rows.append({"campaign": campaign or "—", "target": target or "—", "runs": len(g),
                     "unexpected": int((g["state"] == "unexpected").sum()),
                     "lost (total)": int(pd.to_numeric(g["lost"], errors="coerce").fillna(0).sum()),
                     "newest": newest["date"], "newest verdict": newest["verdict"]})
    return pd.DataFrame(rows, columns=cols)


def write_index(results_root: str | Path) -> Path:
    """Write ``<results_root>/index.html`` and return its path."""
    root = Path(results_root)
    if not root.is_dir():
        raise ReportInputError(root, "(directory)", "an existing results directory")
    df = runs_table(root)
    summary = df.groupby("state").size().to_dict() if not df.empty else {}
    page = jinja.env().get_template("index.html.j2").render(
        runs=df.to_dict("records"), summary=summary, total=len(df),
        campaigns=by_campaign(df).to_dict("records"),
        generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))
    out = root / "index.html"
    tmp = out.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out
