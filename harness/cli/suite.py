"""``faultline suite SUITE.yaml``: run a matrix of campaigns and judge every cell.

Exit codes: 0 every cell as expected; 1 some cell unexpected or inconclusive; 2 bad suite
file (one line: file, field, what is wanted); 3 infrastructure (a run or the checker failed,
or the suite was interrupted — resume it with ``--resume DIR``; or ``faultline preflight``,
which runs first on every inventory the cells use, found a lab that cannot run). The suite
directory is the last line on stdout, as ``faultline run`` prints its run directory. See
docs/suites.md.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from typer.core import TyperGroup
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
          progress: bool = typer.Option(True, "--progress/--no-progress", help="live progress on stderr"),
          preflight_: bool = typer.Option(True, "--preflight/--no-preflight",
                                          help="first run `faultline preflight` on every inventory the cells use; stop (exit 3) on a problem"),
          wait: bool = typer.Option(False, "--wait", help="a cell whose lab another run holds waits for it (`faultline run --wait`)"),
          only: Optional[list[str]] = typer.Option(None, "--cell",
                                                   help="run only the cells whose name matches this glob (e.g. 'kip-903/*'); repeatable"),
          target: Optional[str] = typer.Option(None, "--target", help="run every cell on this embedded cluster: "
                                               "kraftsim or apache-kafka[:VERSION] (a suite's `target` axis runs "
                                               "each cell on several)"),
          keep_last: Optional[int] = typer.Option(None, "--keep-last",
                                                  help="after the suite, keep the newest N run and N suite directories in its results dir "
                                                       "and delete the older ones (`faultline prune`); wins over the suite file's retention.keep_last")) -> None:
    """Run every cell of a suite (campaign x settings x seeds x inventory) and judge each
    against its expectation; the last line printed is the suite directory (index.html, junit.xml)."""
    from harness.suite.spec import load_suite, select_cells
    from harness.interrupts import signals_raise
    from harness.suite.runner import Progress, SuiteInterrupted, SuiteRunner

    # our own handle on the terminal: the suite points file descriptor 2 at checker.log
    # while Spark's JVM starts (it inherits fd 2), and progress must not follow it there
    err = Console(file=os.fdopen(os.dup(2), "w", buffering=1), highlight=False, soft_wrap=True,
                  force_terminal=sys.stderr.isatty() or None)

    if resume is None and suite_file is None:
        raise ConfigError(None, "SUITE", "give a suite file, or --resume DIR")
    if keep_last is not None and keep_last < 1:
        raise ConfigError(None, "--keep-last", f"want at least 1 (the suite itself is kept), got {keep_last}")
    if resume is not None and target:
        raise ConfigError(None, "--target", "a resumed suite runs the cells it was started with; give no --target with --resume")
    if resume is not None and only:
        raise ConfigError(None, "--cell", "a resumed suite runs the cells it was started with; give no --cell with --resume")
    if resume is not None and suite_file is not None:
        raise ConfigError(None, "--resume", "resumes the suite it names; give no suite file with it")
    if resume is not None:
        if not (resume / "suite.json").is_file() or not (resume / "suite-log.jsonl").is_file():
            raise ConfigError(resume, "", "not a suite directory (no suite.json and suite-log.jsonl)")
        runner = SuiteRunner.load(resume, say=lambda s: err.print(s, markup=False))
        if preflight_:
            _preflight(runner.spec, err, resume.resolve().parent)
        for n in runner.recover():
            err.print(f"resume: {n}", markup=False)
    else:
        spec = load_suite(suite_file, target=target)  # ConfigError -> exit 2, one line
        if only:
            spec = select_cells(spec, only)
        if preflight_:
            _preflight(spec, err, results_dir)
        runner = SuiteRunner.create(spec, results_dir.resolve(), say=lambda s: err.print(s, markup=False))
    if wait:
        runner.run_args.append("--wait")
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
    keep = keep_last if keep_last is not None else runner.spec.keep_last   # the option wins over the file's retention
    if keep is not None:
        _retention(runner.dir, keep, err)
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


def _preflight(spec: Any, err: Console, results_dir: Path) -> None:
    """`faultline preflight` on each inventory the cells use: a lab that cannot run stops the
    suite before its first cell (exit 3, the table and one line per problem)."""
    from harness.inventory import load_inventory
    from harness.preflight import FAIL, Options, preflight
    from harness.preflight.render import lines, summary, table
    from harness.suite.runner import cell_inventories

    for inv_path in cell_inventories(spec):
        rep = preflight(load_inventory(inv_path), Options(results_dir=results_dir))
        if rep.failed:
            err.print(table(rep))
            for ln in lines(rep):
                if ln.startswith(FAIL):
                    err.print(ln, markup=False, highlight=False)
            raise Exit(EXIT_INFRA, f"{summary(rep)} (the suite stops before its first cell; "
                                   "`faultline preflight` shows the table, --no-preflight skips the check)")
        err.print(summary(rep), markup=False, highlight=False)


def _retention(suite_dir: Path, keep_last: int, err: Console) -> None:
    """Keep the newest ``keep_last`` run and suite directories beside this suite (never it)."""
    from harness.prune import human, prune

    res = prune(suite_dir.parent, keep_last, keep={suite_dir})
    for e in res.removed:
        err.print(f"retention: removed {e.kind} {e.path.name} ({human(e.size)})", markup=False, highlight=False)
    for e, why in res.failed:
        err.print(f"retention: cannot delete {e.path}: {why}", markup=False, highlight=False)
    err.print(f"retention: kept the newest {keep_last} of each kind and {len(res.in_use)} in use; "
              f"freed {human(res.freed)}", markup=False, highlight=False)


def suite_check(suite_file: Path = typer.Argument(..., help="suite YAML file (see docs/suites.md)")) -> None:
    """Validate a suite as `faultline suite` would, start nothing, and print its cells: campaign,
    seed, expectation, overrides and (embedded cells) the Kafka versions in force. Exit 0 when the
    suite would start, 2 with one line when it would refuse."""
    from harness.cli.common import out
    from harness.plan import check_suite

    _, lines = check_suite(suite_file)
    out.print(f"{suite_file}: ok", markup=False, highlight=False)
    for line in lines:
        out.print(line, markup=False, highlight=False)


class _SuiteGroup(TyperGroup):
    """``faultline suite FILE ...`` runs the suite (the default command, as before there was a
    second one); ``faultline suite check FILE`` checks it. Anything but a command name first
    (a file, an option such as ``--resume``) goes to ``run``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if ctx.resilient_parsing:   # shell completion: offer the command names as they are
            return super().parse_args(ctx, args)
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["run", *args]
        return super().parse_args(ctx, args)


def register(app: typer.Typer) -> None:
    suite_app = typer.Typer(cls=_SuiteGroup, no_args_is_help=False,
                            help="Run a suite of campaigns (`faultline suite FILE`, the same as `faultline suite run "
                                 "FILE`), or check one (`faultline suite check FILE`). See docs/suites.md.")
    suite_app.command("run")(suite)
    suite_app.command("check")(suite_check)
    app.add_typer(suite_app, name="suite")
