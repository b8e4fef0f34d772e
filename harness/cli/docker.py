"""``faultline docker ...``: the one documented command that builds the kraftsim image.

Why a sub-app of its own: the image is needed only by Docker targets and their tests; the
harness CLI mounts ``docker_app`` (``app.add_typer(docker_app, name="docker")``) so the
build lives next to the code that knows how (harness/docker/image.py). Failures print one
line and exit 3 (infrastructure; 2 for a bad inventory), like every other unreachable-target
error. They raise ``SystemExit`` rather than ``typer.Exit`` because the main CLI runs click
with ``standalone_mode=False``, where ``typer.Exit``'s code is returned and lost.
"""
from __future__ import annotations

from typing import Optional

import typer

from checkers.outcome import EXIT_CONFIG, EXIT_INFRA
from harness.docker import image as docker_image

docker_app = typer.Typer(help="Docker targets: build the kraftsim image from a locally made base.",
                         no_args_is_help=True, add_completion=False)


@docker_app.callback()
def _group() -> None:
    """Docker targets (kept a group so more subcommands can join build-image)."""


@docker_app.command("build-image")
def build_image(
    tag: str = typer.Option(docker_image.IMAGE_TAG, help="tag of the kraftsim image"),
    base: str = typer.Option(docker_image.BASE_TAG, help="tag of the local debootstrap base"),
    rebuild_base: bool = typer.Option(False, "--rebuild-base", help="rebuild the base even if its tag exists"),
    rebuild: bool = typer.Option(False, "--rebuild", help="rebuild the image even if it holds this exact source"),
    base_image: Optional[str] = typer.Option(None, help="build FROM this existing image instead of the "
                                             "local base (e.g. python:3.11-slim-bookworm where a registry is reachable)"),
    mirror: Optional[str] = typer.Option(None, help="Debian mirror for debootstrap (default: the one apt uses)"),
    wheels: Optional[str] = typer.Option(None, help="directory with kio/crc32c/typing_extensions wheels "
                                         "(default: pip download on this host)"),
) -> None:
    """Build the base image (cached) and the kraftsim image; prints the image tag."""
    try:
        r = docker_image.build_all(base=base, tag=tag, rebuild_base=rebuild_base, mirror=mirror,
                                   wheels_dir=wheels, base_image=base_image, rebuild_image=rebuild)
    except docker_image.ImageBuildError as e:
        typer.echo(f"faultline docker build-image: {e}", err=True)
        raise SystemExit(EXIT_INFRA)
    base_note = f"built in {r.base_seconds:.0f}s" if r.base_built else "cached"
    image_note = f"built in {r.image_seconds:.0f}s" if r.image_built else "up to date"
    typer.echo(f"base {r.base_tag} ({base_note}); image {r.image_tag} ({image_note})", err=True)
    typer.echo(r.image_tag)


def _load(inventory: str):  # noqa: ANN202 - harness.inventory.Inventory
    from groundwork.config import ConfigError
    from harness.inventory import load_inventory
    try:
        return load_inventory(inventory)
    except ConfigError as e:
        typer.echo(f"faultline docker: error: {e}", err=True)
        raise SystemExit(EXIT_CONFIG)


@docker_app.command("up")
def up(inventory: str = typer.Argument(..., help="a docker inventory, e.g. inventory/docker.yaml"),
       start: bool = typer.Option(True, "--start/--no-start", help="start kraftsim in the containers")) -> None:
    """Create the inventory's network, data volumes and host containers, each with its
    kraftsim server.properties, and start kraftsim in them with kafka_service.command."""
    from harness.docker import cluster as docker_cluster
    from groundwork.transport.base import TransportError
    inv = _load(inventory)
    try:
        made = docker_cluster.up(inv, start=start)
    except (docker_cluster.DockerClusterError, TransportError) as e:
        typer.echo(f"faultline docker up: {e}", err=True)
        raise SystemExit(getattr(e, "exit_code", EXIT_INFRA))
    plan = docker_cluster.plan_of(inv)
    for name, t in made.items():
        typer.echo(f"{name}: container {t.selector} at {inv.hosts[name].address} on {plan.network} ({plan.subnet})")


@docker_app.command("down")
def down(inventory: str = typer.Argument(..., help="the docker inventory given to `up`")) -> None:
    """Remove the inventory's containers, their data volumes and the network."""
    from harness.docker import cluster as docker_cluster
    from groundwork.transport.base import TransportError
    inv = _load(inventory)
    try:
        n = docker_cluster.down(inv)
    except (docker_cluster.DockerClusterError, TransportError) as e:
        typer.echo(f"faultline docker down: {e}", err=True)
        raise SystemExit(getattr(e, "exit_code", EXIT_INFRA))
    typer.echo(f"removed {n} container(s) of {inventory}")


def register(app: typer.Typer) -> None:
    app.add_typer(docker_app, name="docker")


def main() -> None:  # pragma: no cover - `python -m harness.cli docker build-image`
    docker_app()


if __name__ == "__main__":
    main()
