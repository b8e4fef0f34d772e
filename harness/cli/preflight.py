"""``faultline preflight INVENTORY``: can a run on this lab work? One table, one line per problem.

Exit codes: 0 a run can work (warnings may remain: emulated reboots, clocks apart, little disk);
3 some check FAILed (a run could not inject a fault or read the cluster: the lines name each
problem and its fix); 2 the inventory itself is bad (one line). docs/targets.md, "Preflight".
"""
from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

from harness.cli.common import EXIT_INFRA, EXIT_OK, Exit, err, out


def preflight(inventory: Path = typer.Argument(..., help="inventory YAML file"),
              min_free_gb: float = typer.Option(1.0, "--min-free-gb", help="FAIL when a log dir's filesystem has less free (GiB); warn under five times that"),
              results_dir: Path = typer.Option(Path("results"), "--results-dir", help="embedded target: where run directories go (its free disk is checked)")) -> None:
    """Connect to every host of INVENTORY and check what a run needs; exit 0 only when a run can work."""
    from groundwork.config import ConfigError
    from harness.inventory import load_inventory
    from harness.preflight import Options, preflight as run_preflight
    from harness.preflight.render import lines, summary, table

    if min_free_gb < 0:
        raise ConfigError(None, "--min-free-gb", f"want a number of GiB >= 0, got {min_free_gb:g}")
    inv = load_inventory(inventory)
    if not inv.embedded:
        err.print(f"checking {len(inv.hosts)} host(s) of {inventory} over {inv.transport} ...", markup=False)
    rep = run_preflight(inv, Options(min_free_gb=min_free_gb, results_dir=results_dir))
    # a pipe or a log file gets the whole table, not one folded to 80 columns
    Console(highlight=False, width=None if sys.stdout.isatty() else 200).print(table(rep))
    for ln in lines(rep):
        out.print(ln, markup=False, highlight=False)
    for n in rep.notes:
        out.print(f"note: {n}", markup=False, highlight=False)
    if rep.failed:
        raise Exit(EXIT_INFRA, summary(rep))
    out.print(summary(rep), markup=False, highlight=False)
    raise Exit(EXIT_OK)


def register(app: typer.Typer) -> None:
    app.command()(preflight)
