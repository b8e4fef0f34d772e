"""``faultline campaign check FILE``: everything ``run`` would refuse, refused without starting
anything (no cluster, no lock, no heal), and the resolved plan printed (harness/plan.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.cli.common import out, target_overrides


def campaign_check(campaign: Path = typer.Argument(..., help="campaign YAML file"),
                   seed: Optional[int] = typer.Option(None, "--seed", help="seed, as `faultline run --seed`"),
                   set_: list[str] = typer.Option([], "--set", help="override: dotted.key=value (repeatable), "
                                                                   "as `faultline run --set`"),
                   target: Optional[str] = typer.Option(None, "--target", help="the embedded cluster, as "
                                                        "`faultline run --target`")) -> None:
    """Validate a campaign as `faultline run` would, start nothing, and print the plan: target,
    settings (and, on the embedded cluster, the Kafka versions and gates in force), topic,
    workload, nemesis steps, expectation. Exit 0 when `run` would start it, 2 with one line when
    it would refuse."""
    from harness.plan import campaign_plan, check_campaign

    camp, features = check_campaign(campaign, target_overrides(target) + list(set_), seed)
    out.print(f"{campaign}: ok", markup=False, highlight=False)
    for line in campaign_plan(camp, features, seed=seed):
        out.print(line, markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    campaign_app = typer.Typer(no_args_is_help=True, help="Campaign tools.")
    campaign_app.command("check")(campaign_check)
    app.add_typer(campaign_app, name="campaign")
