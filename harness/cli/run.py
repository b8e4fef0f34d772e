"""``faultline run CAMPAIGN``: lock the lab, heal leftovers, run, check, report; the run directory
last on stdout.

``run --no-check`` writes no verdict: its 0 means only "the run completed" (the verdict comes
from ``faultline check RUN`` later).
"""
from __future__ import annotations

import shlex
import threading
import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.text import Text

from harness.cli.common import (EXIT_CONFIG, EXIT_INFRA, EXIT_OK, Exit, err, live_progress, one_line, out,
                                target_overrides)


def _status_line(status: Any) -> Text:
    el = time.monotonic() - status.started
    return Text.assemble(
        (f"{status.phase}", "bold"), f" {el:.0f}s | acked ", (f"{status.acked}", "green"),
        " failed ", (f"{status.failed}", "red"), f" info {status.info} | read {status.read} | ",
        f"{status.ops_per_s:.0f} ops/s | fault ", (status.fault, "yellow"))


def run(ctx: typer.Context,
        campaign: Path = typer.Argument(..., help="campaign YAML file"),
        seed: Optional[int] = typer.Option(None, "--seed", help="seed for random choices (replays a schedule)"),
        set_: list[str] = typer.Option([], "--set", help="override: dotted.key=value (repeatable)"),
        target: Optional[str] = typer.Option(None, "--target", help="the embedded cluster to run on: kraftsim (the "
                                             "model) or apache-kafka[:VERSION] (real Kafka from the release cache); "
                                             "the same as --set target.embedded=..."),
        results_dir: Path = typer.Option(Path("results"), "--results-dir", help="where run directories go"),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="live progress on stderr"),
        check_: bool = typer.Option(True, "--check/--no-check",
                                    help="check the run (Spark) when it ends; --no-check stops after collecting "
                                         "the histories and logs and writes no verdict (`faultline check RUN` later)"),
        wait: bool = typer.Option(False, "--wait", help="when another run holds the lab, wait for it instead of exiting 3"),
        wait_timeout: Optional[float] = typer.Option(None, "--wait-timeout", help="with --wait: give up (exit 3) after this many seconds")) -> None:
    """Run a campaign; the last line printed is the run directory (holding verdict.json).

    ``--no-check`` ends the run once the histories and cluster logs are collected: no Spark, no
    verdict.json, no report; ``faultline check RUN`` checks it later. A loop of runs or a
    benchmark then starts the checker's JVM once for all of them, and times the
    fault-injection run alone.

    A run on a lab takes the lab's lock (harness/lock.py) before anything else, so a second run
    on the same hosts never heals this one's faults as leftovers, and gives it back once its own
    heal is done; ``--wait`` waits for a lab another run holds."""
    from harness.campaign import load_campaign
    from harness.cluster import InfraError
    from harness.heal import OwnedLedger, heal_all
    from harness.interrupts import signals_raise
    from harness.lock import LockHeld, lab_lock
    from harness.runner import Interrupted, Runner, RunStatus

    set_ = target_overrides(target) + list(set_)
    camp = load_campaign(campaign, overrides=set_, seed=seed)
    lock = lab_lock(camp.inventory)  # before the leftover heal: a refused run heals nothing
    if lock is not None:
        try:
            lock.acquire(f"faultline run {camp.path}", wait=wait, timeout=wait_timeout,
                         say=lambda s: err.print(s, markup=False))
        except LockHeld as e:
            raise Exit(EXIT_INFRA, str(e)) from None
        ctx.call_on_close(lock.release)  # on every way out, also an error or a signal
    ledger = OwnedLedger()
    if ledger.open_entries():
        rep = heal_all(ledger)
        if rep.healed or rep.failed:
            err.print(f"healed {len(rep.healed)} fault(s)/process(es) left by an earlier run"
                      + (f"; {len(rep.failed)} could not be healed (run `faultline heal`)" if rep.failed else ""))
    command = " ".join(shlex.quote(a) for a in
                       ["faultline", "run", str(camp.path), "--seed", str(camp.seed),
                        *sum((["--set", s] for s in set_), []), "--results-dir", str(results_dir.resolve()),
                        *([] if check_ else ["--no-check"])])
    status = RunStatus()
    stop = threading.Event()
    runner = None
    with signals_raise(Interrupted, stop):
        try:
            runner = Runner(camp, results_dir.resolve(), command, ledger=ledger, status=status, stop_event=stop,
                            check=check_)
            err.print(f"run {runner.run_id}: campaign {camp.name}, seed {camp.seed}, expect {camp.expect}")
            if lock is not None:
                lock.set_run_dir(runner.run_dir)
            with live_progress(lambda: _status_line(status), enabled=progress, tick=runner.refresh_status):
                result = runner.run()
            if lock is not None:
                lock.release_if_healed(ledger)  # the lab is free while the checker runs
            err.print(f"acked {status.acked}, failed {status.failed}, info {status.info}, read {status.read}")
            if result.exit_code == EXIT_OK and not check_:
                result.message = f"workload done; not checked (--no-check): faultline check {runner.run_dir}"
            elif result.exit_code == EXIT_OK:
                err.print(f"checking {runner.run_dir} (Spark; log in checker.log) ...")
                result = runner.check_and_report()
        except Interrupted:
            # arrived before the run loop's own handler could take it: heal what is registered
            rep = heal_all(ledger)
            err.print(f"faultline: error: interrupted; healed {len(rep.healed)} ledger entries", markup=False)
            if runner is not None:
                print(str(runner.run_dir), flush=True)
            raise Exit(EXIT_INFRA) from None
        except InfraError as e:
            raise Exit(EXIT_INFRA, one_line(e)) from None
    for n in runner.notes:
        err.print(f"note: {n}")
    if result.exit_code in (EXIT_INFRA, EXIT_CONFIG):
        err.print(f"faultline: error: {result.message}", markup=False)
    else:
        out.print(result.message)
    print(str(result.run_dir), flush=True)
    raise Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    app.command()(run)
