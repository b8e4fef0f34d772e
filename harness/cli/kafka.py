"""``faultline kafka install VERSION...`` and ``faultline kafka list``: the Apache Kafka releases
the embedded Apache Kafka target runs, resolved through Maven into the release cache.

Why a command of its own: a nightly job or CI installs its releases once, where Maven Central is
reachable, and every later run finds them in the cache (targets/releases.py); a run that needs a
release not yet installed installs it first, with the same progress, and offline fails in one
line naming the release and this command.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.cli.common import EXIT_CONFIG, Exit, err, out

kafka_app = typer.Typer(help="Apache Kafka releases for the embedded Apache Kafka target (Maven Central, cached).",
                        no_args_is_help=True, add_completion=False)


@kafka_app.command("install")
def install(versions: list[str] = typer.Argument(None, help="releases, e.g. 4.1.0 3.9.1"),
            kafka_home: Optional[Path] = typer.Option(None, "--kafka-home",
                                                      help="record an unpacked Apache Kafka distribution instead "
                                                           "(its libs/ are used in place)")) -> None:
    """Resolve each release's jars (``org.apache.kafka:kafka_2.13`` and the logging backend its
    distribution ships) with Maven into the cache, and archive its classes for the JVMs (once per
    release: a throw-away node on loopback ports); prints each release's libs directory."""
    from targets import releases
    if kafka_home is not None:
        if versions:
            raise Exit(EXIT_CONFIG, "give releases or --kafka-home, not both")
        rel = releases.install_home(kafka_home)
        out.print(f"{rel.version}\t{rel.source}\t{rel.libs}")
        return
    if not versions:
        raise Exit(EXIT_CONFIG, "name at least one release, e.g. `faultline kafka install 4.1.0`")
    for v in versions:
        try:
            releases.parse(v)
        except ValueError as e:
            raise Exit(EXIT_CONFIG, str(e)) from None
    import shutil
    import tempfile

    from targets import kafka_cds
    from targets.apache_kafka import JVM_OPTS
    for v in versions:
        rel = releases.install(v, say=lambda s: err.print(s, markup=False))
        # and its class archive, so a run's first cluster does not make it (targets/kafka_cds.py)
        with tempfile.TemporaryDirectory(prefix="faultline-kafka-install-") as work:
            kafka_cds.ensure(rel, shutil.which("java") or "java", JVM_OPTS, lambda s: err.print(s, markup=False),
                             Path(work))
        out.print(f"{rel.version}\t{rel.source}\t{rel.libs}")


@kafka_app.command("list")
def list_() -> None:
    """The installed releases: version, where from (maven | kafka-home), logging backend, libs."""
    from targets import releases
    rels = releases.list_installed()
    if not rels:
        err.print(f"no Apache Kafka release installed in {releases.cache_dir()} (`faultline kafka install 4.1.0`)",
                  markup=False)
        return
    for r in rels:
        out.print(f"{r.version}\t{r.source}\t{r.logging}\t{r.libs}")


def register(app: typer.Typer) -> None:
    app.add_typer(kafka_app, name="kafka")
