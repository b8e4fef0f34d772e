"""`faultline shrink RUN`: the command line of :mod:`harness.shrink.shrinker`.

Exit codes: 0 shrunk (the minimal campaign is written; its path is the last stdout line),
1 not reproducible in K replays (the source run's loss never came back), 2 refused (the run
lost nothing, has no faults) or bad arguments, 3 infrastructure (a replay's cluster did not
start twice, the checker failed, interrupted), 4 inconclusive (no replay of the original
schedule lost writes, and in some its faults failed to apply: it was not tested). Progress goes to stderr; every replay heals
its own faults, and an interrupted shrink stops the running replay (which heals) and then
heals whatever the ledger still holds open.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.text import Text

from harness.cli.common import EXIT_INFRA, EXIT_OK, Exit, err, live_progress, out, target_overrides


def _line(p: Any) -> Text:
    el = time.monotonic() - p.started
    return Text.assemble(
        ("shrink ", "bold"), (p.phase, "bold"), f" {el:.0f}s | candidates {p.candidates} | replays {p.runs} | size ",
        (f"{p.current}", "cyan"), f"/{p.original} | best ", (f"{p.best}", "green"), " | running ",
        (p.replay, "yellow"), f" | last {p.last} | {p.mechanism}")


def shrink(run_dir: Path = typer.Argument(..., help="a run directory that lost acknowledged writes"),
           replays: int = typer.Option(3, "--replays", help="K: replays per candidate (one loss by the same mechanism = still fails)"),
           max_runs: Optional[int] = typer.Option(None, "--max-runs", help="at most this many replays (this invocation)"),
           time_budget: Optional[float] = typer.Option(None, "--time-budget", help="stop searching after this many seconds"),
           out_file: Optional[Path] = typer.Option(None, "--out", help="the minimal campaign (default RUN/shrink/minimal.yaml)"),
           set_: list[str] = typer.Option([], "--set", help="override for every replay: dotted.key=value (repeatable)"),
           target: Optional[str] = typer.Option(None, "--target", help="replay on this embedded cluster (kraftsim or "
                                                "apache-kafka[:VERSION]): a kraftsim loss shrunk on real Kafka"),
           tail: float = typer.Option(5.0, "--tail", help="workload seconds after a candidate's last heal"),
           simplify_: bool = typer.Option(True, "--simplify/--no-simplify",
                                          help="after ddmin, try shorter, thinner and earlier steps"),
           progress: bool = typer.Option(True, "--progress/--no-progress", help="live progress on stderr")) -> None:
    """Delta-debug a lossy run's faults down to a minimal campaign that still loses writes
    by the same mechanism; writes RUN/shrink/ (minimal.yaml, shrink.json, shrink.html)."""
    from groundwork.config import ConfigError
    from harness.cluster import InfraError
    from harness.heal import heal_all
    from groundwork.ledger import Ledger
    from harness.interrupts import signals_raise
    from harness.runner import Interrupted
    from harness.shrink.shrinker import Progress, Shrinker, ShrinkOptions

    if not run_dir.is_dir():
        raise ConfigError(run_dir, "", "run directory not found")
    if time_budget is not None and time_budget <= 0:
        raise ConfigError(None, "--time-budget", f"want a positive number of seconds, got {time_budget:g}")
    prog = Progress()
    stop = threading.Event()
    sh = Shrinker(run_dir, ShrinkOptions(replays=replays, max_runs=max_runs, time_budget=time_budget,
                                         out=out_file, overrides=target_overrides(target) + list(set_), tail=tail,
                                         simplify=simplify_),
                  progress=prog, stop_event=stop, say=lambda s: err.print(s, markup=False))
    with signals_raise(Interrupted, stop):
        try:
            with live_progress(lambda: _line(prog), enabled=progress, refresh_per_second=2):
                res = sh.run()
        except Interrupted:
            sh.abort()
            rep = heal_all(Ledger())
            raise Exit(EXIT_INFRA, f"interrupted: stopped the running replay; healed {len(rep.healed)} ledger "
                                   f"entries; `faultline shrink {run_dir}` resumes from {sh.dir / 'shrink.json'}") from None
        except InfraError as e:
            sh.abort()
            heal_all(Ledger())
            raise Exit(EXIT_INFRA, f"{e}") from None
    if res.code == EXIT_OK:
        out.print(res.message, markup=False)
        if res.page:
            err.print(f"page: {res.page}", markup=False)
        print(str(res.out), flush=True)
    raise Exit(res.code, "" if res.code == EXIT_OK else res.message)


def register(app: typer.Typer) -> None:
    app.command()(shrink)
