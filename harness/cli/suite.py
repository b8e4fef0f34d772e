"""``faultline suite SUITE.yaml``: run a matrix of campaigns and judge every cell.

Exit codes: 0 every cell as expected; 1 some cell unexpected or inconclusive; 2 bad suite
file (one line: file, field, what is wanted); 3 infrastructure (a run or the checker failed,
or the suite was interrupted — resume it with ``--resume DIR``). The suite directory is the
last line on stdout, as ``faultline run`` prints its run directory. See docs/suites.md.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.text import Text

from groundwork.config import ConfigError
from harness.cli.common import EXIT_INFRA, Exit, live_progress


def _fmt(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(s)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def suite(suite_file: Optional[Path] = typer.Argument(None, help="suite YAML file (see docs/suites.md)"),
          results_dir: Path = typer.Option(Path("results"), "--results-dir", help="where suite directories go"),
          resume: Optional[Path] = typer.Option(None, "--resume", help="resume an interrupted suite directory"),
          progress: bool = typer.Option(True, "--progress/--no-progress", help="live progress on stderr")) -> None:
    """Run every cell of a suite (campaign x settings x seeds x inventory) and judge each
    against its expectation; the last line printed is the suite directory (index.html, junit.xml)."""
    from harness.suite.spec import load_suite
    from harness.interrupts import signals_raise
    from harness.suite.runner import Progress, SuiteInterrupted, SuiteRunner

    # our own handle on the terminal: the suite points file descriptor 2 at checker.log
    # while Spark's JVM starts (it inherits fd 2), and progress must not follow it there
    err = Console(file=os.fdopen(os.dup(2), "w", buffering=1), highlight=False, soft_wrap=True,
                  force_terminal=sys.stderr.isatty() or None)

    if resume is None and suite_file is None:
        raise ConfigError(None, "SUITE", "give a suite file, or --resume DIR")
    if resume is not None and suite_file is not None:
        raise ConfigError(None, "--resume", "resumes the suite it names; give no suite file with it")
    if resume is not None:
        if not (resume / "suite.json").is_file() or not (resume / "suite-log.jsonl").is_file():
            raise ConfigError(resume, "", "not a suite directory (no suite.json and suite-log.jsonl)")
        runner = SuiteRunner.load(resume, say=lambda s: err.print(s, markup=False))
        for n in runner.recover():
            err.print(f"resume: {n}", markup=False)
    else:
        spec = load_suite(suite_file)  # ConfigError -> exit 2, one line
        runner = SuiteRunner.create(spec, results_dir.resolve(), say=lambda s: err.print(s, markup=False))
    prog: Progress = runner.progress
    err.print(f"suite {runner.spec.name}: {len(runner.spec.cells)} cells; {runner.dir}", markup=False)

    def line() -> Text:
        now = time.monotonic()
        k = min(prog.done + 1, prog.total)
        return Text.assemble(("suite ", "bold"), f"cell {k} of {prog.total} ", (prog.current, "bold"),
                             f" ({prog.phase}, {_fmt(now - prog.cell_started)}) | elapsed {_fmt(now - prog.started)}"
                             f" | ETA {_fmt(prog.eta())} | ",
                             *[(f"{n} {o} ", "red" if o in ("unexpected", "error") else "green" if o == "as-expected" else "yellow")
                               for o, n in sorted(prog.counts.items())])

    with signals_raise(SuiteInterrupted):
        try:
            with live_progress(line, console=err, enabled=progress, refresh_per_second=2):
                code = runner.run()
        except SuiteInterrupted:
            code = EXIT_INFRA
    res = runner.results()
    n_ok = sum(1 for r in res if r["outcome"] == "as-expected")
    msg = (f"{n_ok} of {len(runner.spec.cells)} cells as expected"
           + "".join(f", {sum(1 for r in res if r['outcome'] == o)} {o}"
                     for o in ("unexpected", "inconclusive", "error") if any(r["outcome"] == o for r in res))
           + ("" if len(res) == len(runner.spec.cells) else
              f", {len(runner.spec.cells) - len(res)} not run (resume: faultline suite --resume {runner.dir})"))
    err.print(f"{msg}; {runner.dir / 'index.html'}", markup=False)
    print(str(runner.dir), flush=True)
    raise Exit(code)


def register(app: typer.Typer) -> None:
    app.command()(suite)
