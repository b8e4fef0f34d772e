"""The ``faultline`` command line (typer + rich).

Exit codes: 0 the verdict was the expected one, 1 it was not (e.g. loss where none was
expected), 2 usage or configuration error, or a run directory the checker cannot read (one
line on stderr, never a traceback), 3 infrastructure failure (target unreachable, cluster did
not start, checker could not run, interrupted), 4 inconclusive (``check``/``run``: no
acknowledged write, or a partition never read completely - nothing was proven either way).
``run`` prints the run directory as its last line on stdout;
progress goes to stderr so scripts can take ``| tail -1``. ``run --no-check`` writes no verdict:
its 0 means only "the run completed" (the verdict comes from ``faultline check RUN`` later).
"""
from __future__ import annotations

import os
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

import typer

try:  # typer >= 0.26 vendors its own click
    from typer._click import exceptions as cexc
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as cexc
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from groundwork.config import ConfigError

EXIT_OK, EXIT_UNEXPECTED, EXIT_CONFIG, EXIT_INFRA = 0, 1, 2, 3

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Jepsen-style fault injection for Kafka (KRaft): was any acknowledged acks=all write lost?")
inventory_app = typer.Typer(no_args_is_help=True, help="Inventory tools.")
app.add_typer(inventory_app, name="inventory")

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


class Exit(Exception):
    def __init__(self, code: int, message: str = ""):
        self.code, self.message = code, message
        super().__init__(message)


def _one_line(e: BaseException) -> str:
    s = str(e).strip().replace("\n", " ")
    return s or type(e).__name__


def _mount_docker() -> None:
    """`faultline docker ...` from the remote-targets part, if it is installed and imports."""
    try:
        from harness.cli.docker import docker_app
    except Exception:  # noqa: BLE001 - the rest of the CLI works without it
        return
    app.add_typer(docker_app, name="docker")


# --- run ---------------------------------------------------------------------------------

def _status_line(status: Any) -> Text:
    el = time.monotonic() - status.started
    return Text.assemble(
        (f"{status.phase}", "bold"), f" {el:.0f}s | acked ", (f"{status.acked}", "green"),
        " failed ", (f"{status.failed}", "red"), f" info {status.info} | read {status.read} | ",
        f"{status.ops_per_s:.0f} ops/s | fault ", (status.fault, "yellow"))


@app.command()
def run(campaign: Path = typer.Argument(..., help="campaign YAML file"),
        seed: Optional[int] = typer.Option(None, "--seed", help="seed for random choices (replays a schedule)"),
        set_: list[str] = typer.Option([], "--set", help="override: dotted.key=value (repeatable)"),
        results_dir: Path = typer.Option(Path("results"), "--results-dir", help="where run directories go"),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="live progress on stderr"),
        check_: bool = typer.Option(True, "--check/--no-check",
                                    help="check the run (Spark) when it ends; --no-check stops after collecting "
                                         "the histories and logs and writes no verdict (`faultline check RUN` later)")) -> None:
    """Run a campaign; the last line printed is the run directory (holding verdict.json).

    ``--no-check`` ends the run once histories and cluster logs are collected: no Spark, no
    verdict.json, no report. Why: a benchmark or a loop of runs pays the checker's JVM start
    once for all of them (``checkers.job.check_run(run, spark=session)``) instead of once per
    run, and the time of the fault-injection run alone is what it measures."""
    from harness.campaign import load_campaign
    from harness.cluster import InfraError
    from harness.heal import OwnedLedger, heal_all
    from harness.interrupts import signals_raise
    from harness.runner import Interrupted, Runner, RunStatus

    camp = load_campaign(campaign, overrides=list(set_), seed=seed)
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
            runner = Runner(camp, results_dir.resolve(), command, ledger=ledger, status=status, stop_event=stop)
            err.print(f"run {runner.run_id}: campaign {camp.name}, seed {camp.seed}, expect {camp.expect}")
            ticker_stop = threading.Event()

            def tick() -> None:
                while not ticker_stop.wait(0.5):
                    runner.refresh_status()

            threading.Thread(target=tick, daemon=True).start()
            if progress and err.is_terminal:
                with Live(get_renderable=lambda: _status_line(status), console=err, refresh_per_second=4, transient=True):
                    result = runner.run()
            else:
                result = runner.run()
            ticker_stop.set()
            runner.refresh_status()
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
            raise Exit(EXIT_INFRA, _one_line(e)) from None
    for n in runner.notes:
        err.print(f"note: {n}")
    if result.exit_code in (EXIT_INFRA, EXIT_CONFIG):
        err.print(f"faultline: error: {result.message}", markup=False)
    else:
        out.print(result.message)
    print(str(result.run_dir), flush=True)
    raise Exit(result.exit_code)


# --- check / report ------------------------------------------------------------------------

def _run_dir(path: Path) -> Path:
    if not path.is_dir():
        raise ConfigError(path, "", "run directory not found")
    if not (path / "run.json").exists() and not (path / "history").is_dir():
        raise ConfigError(path, "", "not a run directory (no run.json or history/)")
    return path


@app.command()
def check(results_dir: Path = typer.Argument(..., help="a run directory (results/<run>)"),
          expect: Optional[str] = typer.Option(None, "--expect", help="no-loss | loss (default: run.json)"),
          spark_master: Optional[str] = typer.Option(None, "--spark-master", help="Spark master URL (default local)")) -> None:
    """Check a run's histories again; writes verdict.json and prints the verdict."""
    rd = _run_dir(results_dir)
    if expect is not None and expect not in ("no-loss", "loss"):
        raise ConfigError(None, "--expect", f"expected no-loss or loss, got {expect!r}")
    try:
        from checkers.job import check_run
    except Exception as e:  # noqa: BLE001
        raise Exit(EXIT_INFRA, f"checker unavailable: {_one_line(e)}") from None
    from checkers.load import CheckerInputError
    from checkers.verdict import exit_code
    from harness.runner import stderr_to
    try:
        with stderr_to(rd / "checker.log"):
            v = check_run(rd, spark_master=spark_master, expect=expect)
    except CheckerInputError as e:   # unreadable input: the checker's own one line (file, field, want)
        raise Exit(EXIT_CONFIG, _one_line(e)) from None
    except (ValueError, FileNotFoundError) as e:
        raise Exit(EXIT_CONFIG, f"{rd}: {_one_line(e)}") from None
    except Exception as e:  # noqa: BLE001
        raise Exit(EXIT_INFRA, f"{rd}: checker failed: {_one_line(e)}") from None
    counts = v.get("counts") or {}
    nonzero = ", ".join(f"{k}={n}" for k, n in counts.items() if n)
    out.print(f"outcome: {v.get('outcome')}  valid: {str(bool(v.get('valid'))).lower()}  expected: {v.get('expected')}  "
              f"as_expected: {str(bool(v.get('as_expected'))).lower()}  acked_writes: {v.get('acked_writes')}  "
              f"incidents: {v.get('incidents')}  anomalies: {nonzero or 'none'}", markup=False)
    for why in v.get("inconclusive_because") or []:
        out.print(f"inconclusive: {why}", markup=False)
    for s in v.get("stories") or []:
        out.print(f"{s['topic']}@{s['partition']}: {s['mechanism']} - {s['lost']['count']} lost", markup=False)
    out.print(str(rd / "verdict.json"))
    raise Exit(exit_code(v))


@app.command()
def report(results_dir: Path = typer.Argument(..., help="a run directory with verdict.json")) -> None:
    """Write report.html and junit.xml for a checked run."""
    rd = _run_dir(results_dir)
    if not (rd / "verdict.json").exists():
        raise ConfigError(rd, "verdict.json", "missing; run `faultline check` first")
    try:
        from harness.report import ReportInputError, write_junit, write_report
    except ImportError as e:
        raise Exit(EXIT_INFRA, f"report unavailable: {_one_line(e)}") from None
    try:
        write_report(rd)
        write_junit(rd)
    except ReportInputError as e:  # a malformed input file: the user's to fix, one line
        raise Exit(EXIT_CONFIG, _one_line(e)) from None
    except ImportError as e:
        raise Exit(EXIT_INFRA, f"report unavailable: {_one_line(e)}") from None
    except Exception as e:  # noqa: BLE001
        raise Exit(EXIT_INFRA, f"{rd}: report failed: {_one_line(e)}") from None
    out.print(str(rd / "report.html"))


# --- heal / nemeses / inventory ----------------------------------------------------------------

@app.command()
def heal(inventory: Optional[Path] = typer.Option(None, "--inventory", help="rebuild nodes from this inventory instead of the one each ledger entry names"),
         force: bool = typer.Option(False, "--force", help="also heal faults of a faultline run that is still running")) -> None:
    """Undo every fault and stop every process the heal ledger still holds open."""
    from harness.heal import heal_all
    from harness.inventory import load_inventory
    from groundwork.ledger import Ledger

    if inventory is not None:
        load_inventory(inventory)  # validate first: exit 2 on a bad file
    ledger = Ledger()
    rep = heal_all(ledger, inventory=str(inventory) if inventory else None, force=force)
    for h in rep.healed:
        out.print(f"healed: {h}", markup=False)
    for h in rep.skipped:
        err.print(f"skipped: {h}; use --force to heal it anyway", markup=False)
    for f in rep.failed:
        err.print(f"faultline: heal failed: {f}", markup=False)
    out.print(f"{len(rep.healed)} healed, {len(rep.failed)} failed; ledger {ledger.path}")
    raise Exit(EXIT_INFRA if rep.failed else EXIT_OK)


@app.command()
def nemeses() -> None:
    """List the faults faultline can inject."""
    from nemeses.base import REGISTRY
    from nemeses.schedule import load_nemeses

    failures = load_nemeses()
    t = Table("fault", "description", box=None, show_edge=False)
    for name in sorted(REGISTRY):
        t.add_row(name, REGISTRY[name].description)
    out.print(t)
    for mod, why in sorted(failures.items()):
        err.print(f"note: nemeses.{mod} did not load: {why}")


@inventory_app.command("check")
def inventory_check(file: Path = typer.Argument(..., help="inventory YAML file")) -> None:
    """Validate an inventory and print what faultline understood."""
    from harness.inventory import load_inventory

    inv = load_inventory(file)
    if inv.embedded:
        out.print(f"{file}: ok: embedded {inv.embedded} with {inv.kraftsim_brokers} broker(s), "
                  f"settings {inv.kraftsim_settings or '{}'}")
        return
    out.print(f"{file}: ok: transport {inv.transport}, bootstrap {inv.bootstrap}")
    for h in inv.hosts.values():
        svc = h.service
        how = f"systemd {svc.systemd}" if svc and svc.systemd else f"command (pidfile {svc.pidfile})" if svc else "-"
        out.print(f"  {h.role:<10} {h.name:<16} node {h.node_id:<5} {h.address:<16} {how}")


# --- entry point ---------------------------------------------------------------------------------

def _mount_suite() -> None:
    """`faultline suite ...` (harness/cli/suite.py)."""
    from harness.cli.suite import register
    register(app)


def _mount_shrink() -> None:
    """`faultline shrink RUN` (harness/cli/shrink.py)."""
    from harness.cli.shrink import register
    register(app)


def main(argv: list[str] | None = None) -> None:
    _mount_docker()
    _mount_shrink()
    _mount_suite()
    try:
        app(args=argv, prog_name="faultline", standalone_mode=False)
        code = EXIT_OK
    except Exit as e:
        if e.message:
            (err if e.code else out).print(("faultline: error: " if e.code else "") + e.message, markup=False)
        code = e.code
    except ConfigError as e:
        err.print(f"faultline: error: {e}", markup=False)
        code = EXIT_CONFIG
    except getattr(cexc, "NoArgsIsHelpError", ()) as e:  # help was printed
        code = EXIT_CONFIG
    except cexc.UsageError as e:
        where = getattr(getattr(e, "ctx", None), "command_path", "") or "faultline"
        err.print(f"faultline: usage error: {_one_line(e)} (see `{where} --help`)", markup=False)
        code = EXIT_CONFIG
    except cexc.ClickException as e:
        err.print(f"faultline: error: {_one_line(e)}", markup=False)
        code = EXIT_CONFIG
    except (EOFError,) as e:
        err.print(f"faultline: aborted: {_one_line(e)}", markup=False)
        code = EXIT_INFRA
    except KeyboardInterrupt:
        err.print("faultline: interrupted")
        code = EXIT_INFRA
    except Exception as e:  # noqa: BLE001 - never a traceback for the user; keep the detail for us
        if os.environ.get("FAULTLINE_DEBUG"):
            raise
        err.print(f"faultline: internal error: {type(e).__name__}: {_one_line(e)}", markup=False)
        code = EXIT_INFRA
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    main()
