"""``faultline prune RESULTS_DIR --keep-last N``: delete the oldest run and suite directories.

Keeps the newest N run directories and the newest N suite directories under RESULTS_DIR and
deletes the older ones, never one that is in use (a run of it alive, a lab lock naming it, a
suite still running, or written in the last minutes: harness/prune.py). Prints each directory
removed with its size, and the space freed. Exit 0; 2 bad arguments; 3 a directory could not
be deleted.
"""
from __future__ import annotations

from pathlib import Path

import typer

from harness.cli.common import EXIT_INFRA, EXIT_OK, Exit, err, out


def prune(results_dir: Path = typer.Argument(..., help="the results directory (run and suite directories)"),
          keep_last: int = typer.Option(..., "--keep-last", help="how many of the newest run directories, and of the newest suite directories, to keep"),
          dry_run: bool = typer.Option(False, "--dry-run", help="say what would be deleted; delete nothing")) -> None:
    """Delete the oldest run and suite directories beyond the newest N of each (never one in use)."""
    from groundwork.config import ConfigError
    from harness.prune import human, prune as run_prune

    if keep_last < 0:
        raise ConfigError(None, "--keep-last", f"want a number of directories >= 0, got {keep_last}")
    if not results_dir.is_dir():
        raise ConfigError(results_dir, "", "results directory not found")
    res = run_prune(results_dir, keep_last, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    for e in res.removed:
        out.print(f"{verb} {e.kind} {e.path} ({human(e.size)})", markup=False, highlight=False)
    for e in res.in_use:
        err.print(f"kept {e.kind} {e.path}: in use ({e.in_use})", markup=False, highlight=False)
    for e, why in res.failed:
        err.print(f"faultline: error: cannot delete {e.path}: {why}", markup=False, highlight=False)
    out.print(f"{verb} {len(res.removed)} director{'y' if len(res.removed) == 1 else 'ies'}, "
              f"{'would free' if dry_run else 'freed'} {human(res.freed)}; kept {len(res.kept)} "
              f"(the newest {keep_last} of each kind) and {len(res.in_use)} in use", markup=False, highlight=False)
    raise Exit(EXIT_INFRA if res.failed else EXIT_OK)


def register(app: typer.Typer) -> None:
    app.command()(prune)
