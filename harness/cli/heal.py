"""``faultline heal``: undo what the heal ledger still holds open (faults, processes), and release
the lab locks of faultline runs that are gone (harness/lock.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.cli.common import EXIT_INFRA, EXIT_OK, Exit, err, out


def heal(inventory: Optional[Path] = typer.Option(None, "--inventory", help="rebuild nodes from this inventory instead of the one each ledger entry names"),
         force: bool = typer.Option(False, "--force", help="also heal faults of a faultline run that is still running")) -> None:
    """Undo every fault and stop every process the heal ledger still holds open."""
    from harness.heal import heal_all
    from harness.inventory import load_inventory
    from harness.lock import clear_stale
    from groundwork.ledger import Ledger

    if inventory is not None:
        load_inventory(inventory)  # validate first: exit 2 on a bad file
    ledger = Ledger()
    rep = heal_all(ledger, inventory=str(inventory) if inventory else None, force=force)
    for h in clear_stale():
        out.print(f"released the lab lock of {h.describe()}: that faultline process is gone", markup=False)
    for h in rep.healed:
        out.print(f"healed: {h}", markup=False)
    for h in rep.skipped:
        err.print(f"skipped: {h}; use --force to heal it anyway", markup=False)
    for f in rep.failed:
        err.print(f"faultline: heal failed: {f}", markup=False)
    out.print(f"{len(rep.healed)} healed, {len(rep.failed)} failed; ledger {ledger.path}")
    raise Exit(EXIT_INFRA if rep.failed else EXIT_OK)


def register(app: typer.Typer) -> None:
    app.command()(heal)
