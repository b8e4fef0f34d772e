"""``write_junit(run_dir)``: ``junit.xml`` for CI — one test case per campaign expectation.

Why JUnit: Jenkins, GitLab and GitHub Actions all read it, so a nightly loss shows up as a
failed test with the lost-write summary as its message, next to the run's own tests. Written
with the standard library (harness/report/junit_xml.py, the schema Jenkins reads) so a
runtime install needs no test extra; the tests parse it with junitparser.

Expectations: a campaign states ``expect: no-loss | loss | loss-allowed`` (and maybe
``require_errors``, docs/campaigns.md); the checker judges each part once
(checkers/outcome.py) and lists them in verdict.json ``expectations``: a ``loss`` campaign has
one (``lost acknowledged writes: expect loss``), a ``no-loss`` campaign two (``lost
acknowledged writes: expect no-loss``; ``history valid: …`` failing with the anomalies in
``invalid_because``), a ``loss-allowed`` campaign one that fails when a loss story names no
setting that permits it, and ``require_errors`` one more. Each becomes a test case, failing
exactly when that part did not hold; this module only reads them. A run without a verdict is
an *error* case, and so is an inconclusive one: neither a pass nor an expected failure.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from checkers.outcome import INCONCLUSIVE, UNEXPECTED
from harness.report import junit_xml as jx
from harness.report.inputs import RunData, load_run, read_evidence, verdict_outcome
from harness.report.render import expectation
from harness.report.tables import lost_writes_table

MAX_LOST_IN_SUMMARY = 20


@dataclass
class Expectation:
    name: str
    ok: bool | None      # None: could not be judged (no verdict)
    message: str         # one line: what was expected and what was found
    details: str = ""    # the evidence summary (failure body)


def lost_write_summary(data: RunData, limit: int = MAX_LOST_IN_SUMMARY) -> str:
    """Lost writes per partition, then the first few with their attribution: what a CI
    reader needs to decide whether to open the report."""
    v = data.verdict or {}
    lines = []
    by_part = v.get("lost_writes_by_partition") or {}
    if by_part:
        lines.append("lost writes by partition: " + ", ".join(
            f"{k}={n}" for k, n in sorted(by_part.items(), key=lambda kv: (-int(kv[1]), kv[0])) if int(n)))
    head, _ = read_evidence(data.run_dir, "lost_write", limit)
    if head is None or head.empty:
        head = pd.DataFrame((v.get("examples") or {}).get("lost_write") or [])
    if not head.empty:
        t = lost_writes_table(head, v)
        for r in t.head(limit).to_dict("records"):
            line = f"  {r['partition']} offset {r['offset']} value {r['value']} acked t={r['ack t (s)']} by {r['producer']}"
            if r.get("attribution"):
                line += f" :: {r['attribution']}"
            lines.append(line)
        total = (v.get("counts") or {}).get("lost_write", len(t))
        if total > len(t.head(limit)):
            lines.append(f"  ... {total - len(t.head(limit))} more in anomalies/lost_write.csv")
    return "\n".join(lines) + _rerun(data)


def expectations(data: RunData) -> list[Expectation]:
    """The test cases: the parts of the expectation the checker judged (verdict.json
    ``expectations``, checkers/outcome.py), each failing exactly when it did not hold - read,
    never judged again here, so JUnit says what report.html and the suite index say."""
    v = data.verdict
    if v is None:
        return [Expectation("verdict", None, "the checker wrote no verdict.json for this run")]
    exp = expectation(data)
    if exp["outcome"] == "inconclusive":
        # too little evidence (checkers/outcome.py): neither a pass nor an unexpected verdict
        why = "; ".join(exp["inconclusive_because"]) or "the checker gave no reason"
        return [Expectation(f"lost acknowledged writes: expect {exp['expect'] or 'no-loss'}", None,
                            f"INCONCLUSIVE: {why}", why + _rerun(data))]
    listed = v.get("expectations")
    if isinstance(listed, list) and listed and all(isinstance(e, dict) and "name" in e for e in listed):
        out = []
        for e in listed:
            ok = e.get("ok", e.get("as_expected"))
            msg = str(e.get("message") or f"expected {e.get('expected')}, found {e.get('actual')}")
            kind = e.get("kind") or ("loss" if "lost" in str(e["name"]) else "")
            out.append(Expectation(str(e["name"]), None if ok is None else bool(ok), msg,
                                   "" if ok else _failure_details(data, kind, exp)))
        return out
    # a verdict written before the checker listed its expectations: one case, its outcome
    return [Expectation(f"verdict as expected: expect {exp['expect'] or 'no-loss'}", exp["as_expected"],
                        exp["reason"] or f"the checker's verdict says outcome={exp['outcome']}",
                        lost_write_summary(data) if exp["lost"] else _rerun(data).lstrip("\n"))]


def _failure_details(data: RunData, kind: str, exp: dict) -> str:
    """The evidence a CI reader needs under a failed case."""
    if kind == "loss" and exp["lost"]:
        return lost_write_summary(data)
    if kind == "loss":
        return ("the known-bad control did not lose writes: the fault did not bite or the checker missed it"
                + _rerun(data))
    if kind == "validity":
        others = [a for a in exp["invalid_because"] if a != "lost_write"]
        return _examples(data, others) + _rerun(data)
    if kind == "anomalies":
        run = data.run
        named = [a for a in (*(run.get("require_anomalies") or []), *(run.get("forbid_anomalies") or []))]
        return _examples(data, named) + _rerun(data)
    return _rerun(data).lstrip("\n")


def _rerun(data: RunData) -> str:
    return f"\nre-run: {data.run['command']}" if data.run.get("command") else ""


def _examples(data: RunData, names: list[str], per: int = 5) -> str:
    examples = (data.verdict or {}).get("examples") or {}
    lines = []
    for a in names:
        rows = examples.get(a) or []
        lines.append(f"{a}: {(data.verdict or {}).get('counts', {}).get(a, '?')}"
                     + (f" (evidence: anomalies/{a}.csv)" if (data.run_dir / "anomalies" / f"{a}.csv").is_file() else ""))
        for r in rows[:per]:
            lines.append("  " + json.dumps(r, separators=(",", ":"), default=str))
    return "\n".join(lines)


def build_suite(data: RunData) -> jx.Suite:
    run = data.run
    campaign = str(run.get("campaign") or (data.campaign or {}).get("name") or "campaign")
    suite = jx.Suite(f"faultline.{campaign}")
    for key in ("run_id", "target", "target_version", "seed", "command", "expect", "allowed_by"):
        if run.get(key) is not None:
            suite.properties.append((key, str(run[key])))
    for key in ("require_errors", "require_anomalies", "forbid_anomalies"):
        if run.get(key):
            suite.properties.append((key, ",".join(map(str, run[key]))))
    for k, val in sorted((run.get("switches") or {}).items()):
        suite.properties.append((f"switch.{k}", json.dumps(val) if not isinstance(val, str) else val))
    duration = run.get("duration_s") if isinstance(run.get("duration_s"), (int, float)) else 0.0
    cases = expectations(data)
    outcome = verdict_outcome(data.verdict)
    inconclusive = outcome == INCONCLUSIVE
    if outcome == UNEXPECTED and not any(e.ok is False for e in cases):
        # never let CI pass a run the checker itself called unexpected
        cases.append(Expectation("verdict as expected", False, "the checker's verdict says outcome=unexpected",
                                 json.dumps((data.verdict or {}).get("counts"), sort_keys=True)))
    for e in cases:
        case = jx.Case(e.name, classname=f"faultline.{campaign}", time=float(duration))
        if e.ok is False:
            case.failure = (e.message, "UnexpectedVerdict", e.details or e.message)
        elif e.ok is None:
            case.error = (e.message, "Inconclusive" if inconclusive else "NoVerdict", e.details or e.message)
        else:
            case.system_out = e.message
        suite.cases.append(case)
    return suite


def write_junit(run_dir: str | Path) -> Path:
    """Write ``<run_dir>/junit.xml`` and return its path."""
    data = load_run(run_dir, timeline=False)
    return jx.write(data.run_dir / "junit.xml", f"faultline {data.run_id}", [build_suite(data)])
