"""``faultline docker ...``: the one documented command that builds the kraftsim image, or with
``--kafka VERSION`` a real Apache Kafka image (harness/docker/kafka_image.py).

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

docker_app = typer.Typer(help="Docker targets: build the kraftsim or an Apache Kafka image from a locally made base.",
                         no_args_is_help=True, add_completion=False)


@docker_app.callback()
def _group() -> None:
    """Docker targets (kept a group so more subcommands can join build-image)."""


@docker_app.command("build-image")
def build_image(
    tag: Optional[str] = typer.Option(None, help=f"tag of the image (default: {docker_image.IMAGE_TAG}, "
                                      "with --kafka faultline/kafka:VERSION)"),
    kafka: Optional[str] = typer.Option(None, "--kafka", metavar="VERSION",
                                        help="build a real Apache Kafka image of this release (e.g. 4.1.0) instead "
                                        "of kraftsim's: a JRE and the release's jars from the release cache "
                                        "(installed through Maven first when missing)"),
    base: str = typer.Option(docker_image.BASE_TAG, help="tag of the local debootstrap base"),
    rebuild_base: bool = typer.Option(False, "--rebuild-base", help="rebuild the base even if its tag exists"),
    rebuild: bool = typer.Option(False, "--rebuild", help="rebuild the image even if it holds this exact source"),
    base_image: Optional[str] = typer.Option(None, help="build FROM this existing image instead of the "
                                             "local base (e.g. python:3.11-slim-bookworm where a registry is reachable)"),
    mirror: Optional[str] = typer.Option(None, help="Debian mirror for debootstrap (default: the one apt uses)"),
    wheels: Optional[str] = typer.Option(None, help="directory with kio/crc32c/typing_extensions wheels "
                                         "(default: pip download on this host)"),
) -> None:
    """Build the base image (cached) and the kraftsim image (or, with --kafka, an Apache Kafka
    image); prints the image tag."""
    if kafka is not None:
        _build_kafka(kafka, tag=tag, base=base, rebuild_base=rebuild_base, mirror=mirror, base_image=base_image,
                     rebuild=rebuild)
        return
    try:
        r = docker_image.build_all(base=base, tag=tag or docker_image.IMAGE_TAG, rebuild_base=rebuild_base,
                                   mirror=mirror, wheels_dir=wheels, base_image=base_image, rebuild_image=rebuild)
    except docker_image.ImageBuildError as e:
        typer.echo(f"faultline docker build-image: {e}", err=True)
        raise SystemExit(EXIT_INFRA)
    _built(r.base_tag, r.base_built, r.base_seconds, r.image_tag, r.image_built, r.image_seconds)


def _built(base: str, base_built: bool, base_s: float, tag: str, built: bool, image_s: float) -> None:
    base_note = f"built in {base_s:.0f}s" if base_built else "cached"
    image_note = f"built in {image_s:.0f}s" if built else "up to date"
    typer.echo(f"base {base} ({base_note}); image {tag} ({image_note})", err=True)
    typer.echo(tag)


def _build_kafka(version: str, *, tag: Optional[str], base: str, rebuild_base: bool, mirror: Optional[str],
                 base_image: Optional[str], rebuild: bool) -> None:
    from groundwork.config import ConfigError
    from harness.docker import kafka_image
    try:
        r = kafka_image.build_all(version, base=base, tag=tag, rebuild_base=rebuild_base, mirror=mirror,
                                  base_image=base_image, rebuild_image=rebuild)
    except (ValueError, ConfigError) as e:
        typer.echo(f"faultline docker build-image: --kafka: {e}", err=True)
        raise SystemExit(EXIT_CONFIG)
    except docker_image.ImageBuildError as e:
        typer.echo(f"faultline docker build-image: {e}", err=True)
        raise SystemExit(EXIT_INFRA)
    _built(*r)


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
       start: bool = typer.Option(True, "--start/--no-start", help="start kraftsim or Kafka in the containers")) -> None:
    """Create the inventory's network, data volumes and host containers, each with its
    server.properties - kraftsim's, or on a Kafka image Kafka's, its storage formatted with
    kafka_service.format - and start the service in them with kafka_service.command."""
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
