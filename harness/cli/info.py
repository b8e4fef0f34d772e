"""``faultline nemeses`` (the faults faultline can inject) and ``faultline inventory check FILE``
(what faultline understood of an inventory): questions about what a campaign may use."""
from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from harness.cli.common import err, out


def nemeses() -> None:
    """List the faults faultline can inject."""
    from nemeses.base import REGISTRY
    from nemeses.catalog import load_nemeses

    failures = load_nemeses()
    t = Table("fault", "description", box=None, show_edge=False)
    for name in sorted(REGISTRY):
        t.add_row(name, REGISTRY[name].description)
    out.print(t)
    for mod, why in sorted(failures.items()):
        err.print(f"note: nemeses.{mod} did not load: {why}")


def inventory_check(file: Path = typer.Argument(..., help="inventory YAML file")) -> None:
    """Validate an inventory and print what faultline understood."""
    from harness.inventory import load_inventory

    inv = load_inventory(file)
    if inv.embedded:
        out.print(f"{file}: ok: embedded {inv.embedded} with {inv.embedded_brokers} broker(s), "
                  f"settings {inv.embedded_settings or '{}'}")
        return
    out.print(f"{file}: ok: transport {inv.transport}, bootstrap {inv.bootstrap}")
    for h in inv.hosts.values():
        svc = h.service
        how = f"systemd {svc.systemd}" if svc and svc.systemd else f"command (pidfile {svc.pidfile})" if svc else "-"
        out.print(f"  {h.role:<10} {h.name:<16} node {h.node_id:<5} {h.address:<16} {how}")


def register(app: typer.Typer) -> None:
    app.command()(nemeses)
    inventory_app = typer.Typer(no_args_is_help=True, help="Inventory tools.")
    inventory_app.command("check")(inventory_check)
    app.add_typer(inventory_app, name="inventory")
