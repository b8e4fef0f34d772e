"""``faultline check RUN`` (the checker again: verdict.json, then the report from it, as a
run does) and ``faultline report RUN`` (report.html and junit.xml from a checked run's files)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from checkers.outcome import EXPECTS
from groundwork.config import ConfigError
from harness.cli.common import EXIT_CONFIG, EXIT_INFRA, Exit, err, one_line, out, run_dir_arg


def check(results_dir: Path = typer.Argument(..., help="a run directory (results/<run>), or one holding only cluster-logs/"),
          expect: Optional[str] = typer.Option(None, "--expect", help="no-loss | loss | loss-allowed (default: run.json)"),
          spark_master: Optional[str] = typer.Option(None, "--spark-master", envvar="FAULTLINE_SPARK_MASTER",
                                                     help="Spark master URL (default local)")) -> None:
    """Check a run's histories again; writes verdict.json, report.html and junit.xml and prints the verdict.

    A directory with only cluster-logs/ (each host's Kafka server.log, controller.log, state-change.log) gets what its events say happened, per partition, and an inconclusive outcome: without histories no lost write can be shown (exit 4)."""
    rd = run_dir_arg(results_dir, logs_only=True)
    if expect is not None and expect not in EXPECTS:
        raise ConfigError(None, "--expect", f"expected one of {', '.join(EXPECTS)}, got {expect!r}")
    from harness.check import check_and_report, validity_word

    checked = check_and_report(rd, spark_master=spark_master, expect=expect)
    if checked.verdict is None:
        raise Exit(checked.code, checked.message)
    v = checked.verdict
    for n in checked.notes:
        err.print(f"note: {n}", markup=False)
    counts = v.get("counts") or {}
    nonzero = ", ".join(f"{k}={n}" for k, n in counts.items() if n)
    out.print(f"outcome: {v.get('outcome')}  validity: {validity_word(v)}  expected: {v.get('expected')}  "
              f"as_expected: {str(bool(v.get('as_expected'))).lower()}  acked_writes: {v.get('acked_writes')}  "
              f"incidents: {v.get('incidents')}  anomalies: {nonzero or 'none'}", markup=False)
    for why in v.get("inconclusive_because") or []:
        out.print(f"inconclusive: {why}", markup=False)
    if v.get("outcome") != "inconclusive" and v.get("outcome_reason"):
        out.print(f"because: {v['outcome_reason']}", markup=False)
    for s in v.get("stories") or []:
        out.print(f"{s['topic']}@{s['partition']}: {s['mechanism']} - {s['lost']['count']} lost", markup=False)
    for s in v.get("event_stories") or []:      # only the cluster's logs: what they say happened
        out.print(s["label"], markup=False)
    out.print(str(rd / "verdict.json"))
    raise Exit(checked.code)


def report(results_dir: Path = typer.Argument(..., help="a run directory with verdict.json")) -> None:
    """Write report.html and junit.xml for a checked run (or a checked directory of only cluster-logs/)."""
    rd = run_dir_arg(results_dir, logs_only=True)
    if not (rd / "verdict.json").exists():
        raise ConfigError(rd, "verdict.json", "missing; run `faultline check` first")
    try:
        from harness.report import ReportInputError, write_junit, write_report
    except ImportError as e:
        raise Exit(EXIT_INFRA, f"report unavailable: {one_line(e)}") from None
    try:
        write_report(rd)
        write_junit(rd)
    except ReportInputError as e:  # a malformed input file: the user's to fix, one line
        raise Exit(EXIT_CONFIG, one_line(e)) from None
    except ImportError as e:
        raise Exit(EXIT_INFRA, f"report unavailable: {one_line(e)}") from None
    except Exception as e:  # noqa: BLE001
        raise Exit(EXIT_INFRA, f"{rd}: report failed: {one_line(e)}") from None
    out.print(str(rd / "report.html"))


def register(app: typer.Typer) -> None:
    app.command()(check)
    app.command()(report)
