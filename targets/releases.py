"""Apache Kafka releases on this machine: resolved through Maven into a per-version cache.

Why Maven and not the release tarball: these machines and CI reach Maven Central, where Apache
Kafka publishes every release's jars, and the ecosystem's own resolver gets the broker's whole
classpath from the published ``org.apache.kafka:kafka_2.13:VERSION`` pom (a generated pom and
``mvn dependency:copy-dependencies``): no hand-written downloader, checksums verified by Maven.
The pom brings everything but the logging backend, which the tarball adds: without one the
broker logs nothing (3.x may not even start), and faultline reads Kafka's own log lines. So the
backend the release's ``LICENSE-binary`` lists is added beside it (:data:`LOGGING`).

An unpacked Kafka distribution (``--kafka-home DIR``, what lab users already have) is recorded
the same way, pointing at its ``libs/``; nothing is copied.

Layout (``$FAULTLINE_KAFKA_CACHE``, else ``$XDG_CACHE_HOME/faultline/kafka``, else
``~/.cache/faultline/kafka``)::

    4.1.0/release.json    {"version", "source": "maven"|"kafka-home", "libs", "logging", "jars"}
    4.1.0/libs/*.jar      (maven only)

A release is installed into a temporary directory and renamed into place, so a half-finished
install (Ctrl-C, no network) is never taken for a release.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from groundwork.config import ConfigError
from targets.base import InfraError

VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
#: the oldest release line the embedded target runs: KRaft became production-ready in 3.3, and
#: 3.3 is the first line whose StorageTool and KRaft configs the target's launcher writes for
OLDEST = (3, 3, 0)


@dataclass(frozen=True)
class Logging:
    """A release's logging backend, as its distribution ships it (LICENSE-binary of the tag)."""
    kind: str                                   # "log4j1" (reload4j, log4j.properties) | "log4j2" (log4j2.yaml)
    artifacts: tuple[tuple[str, str, str], ...]  # (groupId, artifactId, version)


def logging_of(version: str) -> Logging:
    """The logging backend a release's tarball ships.

    3.x: ``ch.qos.reload4j:reload4j`` with ``org.slf4j:slf4j-reload4j`` 1.7.36 (LICENSE-binary and
    gradle/dependencies.gradle at each tag: reload4j 1.2.19 in 3.3.x and 3.4.0, 1.2.25 from 3.4.1).
    4.x: log4j 2 (KAFKA-9366), ``log4j-core`` with ``log4j-slf4j-impl`` - the slf4j 1 binding,
    because Kafka pins slf4j-api 1.7.36 - at 2.24.3 in 4.0 and 4.1 (checked against a 4.0 build's
    dependant-libs; no 4.x tag is in the mirror this was written from, so 4.x is not checked against
    LICENSE-binary; any log4j 2 binding of that API reads the same log4j2.yaml).
    """
    v = parse(version)
    if v[0] < 4:
        reload4j = "1.2.19" if v < (3, 4, 1) else "1.2.25"
        return Logging("log4j1", (("ch.qos.reload4j", "reload4j", reload4j),
                                  ("org.slf4j", "slf4j-reload4j", "1.7.36")))
    log4j2 = "2.24.3"
    return Logging("log4j2", (("org.apache.logging.log4j", "log4j-core", log4j2),
                              ("org.apache.logging.log4j", "log4j-slf4j-impl", log4j2)))


def parse(version: str) -> tuple[int, int, int]:
    m = VERSION_RE.match(str(version).strip())
    if not m:
        raise ValueError(f"an Apache Kafka release like 4.1.0 or 3.9.1 is wanted, got {version!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def cache_dir() -> Path:
    env = os.environ.get("FAULTLINE_KAFKA_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "faultline" / "kafka"


@dataclass(frozen=True)
class Release:
    """An installed release: where its jars are and how it logs."""
    version: str
    libs: Path
    source: str          # "maven" | "kafka-home"
    logging: str         # "log4j1" | "log4j2"

    @property
    def classpath(self) -> str:
        """The JVM's ``-cp``: every jar of ``libs/`` (Java expands ``DIR/*`` itself)."""
        return f"{self.libs}/*"


class NotInstalled(InfraError):
    """The run needs a release that is not in the cache and could not be installed (exit 3: the
    machine, not the campaign, is missing something)."""


def _release_file(version: str, root: Path | None = None) -> Path:
    return (root or cache_dir()) / version / "release.json"


def installed(version: str, root: Path | None = None) -> Release | None:
    """The cached release, or None. A record whose jars are gone counts as not installed."""
    f = _release_file(version, root)
    try:
        doc = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    libs = Path(doc.get("libs", ""))
    if not libs.is_dir() or not any(libs.glob(f"kafka_2.1*-{version}.jar")):
        return None
    return Release(version, libs, str(doc.get("source", "maven")), str(doc.get("logging", logging_of(version).kind)))


def list_installed(root: Path | None = None) -> list[Release]:
    base = root or cache_dir()
    out = []
    for d in sorted(base.glob("*"), key=lambda p: _sort_key(p.name)):
        r = installed(d.name, base) if VERSION_RE.match(d.name) else None
        if r is not None:
            out.append(r)
    return out


def _sort_key(name: str) -> tuple[int, ...]:
    try:
        return parse(name)
    except ValueError:
        return (999,)


def pom(version: str) -> str:
    """The generated pom: the broker (``kafka_2.13``) and its logging backend."""
    deps = [("org.apache.kafka", "kafka_2.13", version), *logging_of(version).artifacts]
    body = "\n".join(f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
                     "</dependency>" for g, a, v in deps)
    return ("<project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n  <modelVersion>4.0.0</modelVersion>\n"
            f"  <groupId>faultline</groupId><artifactId>kafka-{version}</artifactId><version>1</version>\n"
            f"  <packaging>pom</packaging>\n  <dependencies>\n{body}\n  </dependencies>\n</project>\n")


def install_command(version: str) -> str:
    return f"faultline kafka install {version}"


def install(version: str, *, root: Path | None = None, say: Callable[[str], None] = lambda s: None,
            mvn: str = "mvn") -> Release:
    """Resolve ``version`` through Maven into the cache (idempotent: an installed release is
    returned as is). Raises :class:`NotInstalled` with one line when Maven cannot get it."""
    v = parse(version)
    if v < OLDEST:
        raise ConfigError(None, "kafka.version", f"{version}: the embedded Apache Kafka target runs releases from "
                           f"{'.'.join(map(str, OLDEST))} (KRaft production-ready); pick a newer release")
    have = installed(version, root)
    if have is not None:
        return have
    if shutil.which(mvn) is None:
        raise NotInstalled(f"Apache Kafka {version} is not installed and Maven (mvn) is not on "
                           f"PATH: install Maven (apt-get install maven) and run `{install_command(version)}`, or "
                           "`faultline kafka install --kafka-home DIR` with an unpacked Kafka distribution")
    base = root or cache_dir()
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=base))
    try:
        (tmp / "pom.xml").write_text(pom(version), encoding="utf-8")
        say(f"resolving Apache Kafka {version} from Maven Central (kafka_2.13 and its logging backend) ...")
        started = time.monotonic()
        p = subprocess.run([mvn, "-B", "-q", "-f", str(tmp / "pom.xml"), "dependency:copy-dependencies",
                            f"-DoutputDirectory={tmp / 'libs'}", "-DincludeScope=runtime"],
                           capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            lines = [ln for ln in (p.stdout + p.stderr).splitlines() if "ERROR" in ln] or (p.stdout + p.stderr).splitlines()
            why = re.sub(r"\s+", " ", (lines[0] if lines else f"mvn exited {p.returncode}")).strip()[:300]
            raise NotInstalled(f"Apache Kafka {version} is not installed and Maven could not "
                               f"resolve it ({why}); run `{install_command(version)}` where Maven Central is reachable, "
                               "or `faultline kafka install --kafka-home DIR`")
        jars = sorted(x.name for x in (tmp / "libs").glob("*.jar"))
        (tmp / "pom.xml").unlink()
        final = base / version
        _write_record(tmp, {"version": version, "source": "maven", "libs": str(final / "libs"),
                            "logging": logging_of(version).kind, "jars": jars,
                            "installed_wall": time.time(), "seconds": round(time.monotonic() - started, 1)})
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        say(f"installed Apache Kafka {version}: {len(jars)} jars in {final / 'libs'}")
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    rel = installed(version, root)
    assert rel is not None
    return rel


def install_home(kafka_home: Path, *, root: Path | None = None) -> Release:
    """Record an unpacked Apache Kafka distribution (its ``libs/kafka_2.1x-VERSION.jar`` says the
    version); nothing is copied, so the distribution must stay where it is."""
    libs = Path(kafka_home).resolve() / "libs"
    cores = sorted(libs.glob("kafka_2.1*-*.jar")) if libs.is_dir() else []
    cores = [c for c in cores if re.fullmatch(r"kafka_2\.1\d-\d+\.\d+\.\d+\.jar", c.name)]
    if not cores:
        raise ConfigError(None, "--kafka-home", f"{kafka_home}: not an Apache Kafka distribution "
                          "(want DIR/libs/kafka_2.13-VERSION.jar)")
    version = cores[0].name.rsplit("-", 1)[1][: -len(".jar")]
    kind = "log4j2" if any(libs.glob("log4j-core-*.jar")) else "log4j1"
    d = (root or cache_dir()) / version
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    _write_record(d, {"version": version, "source": "kafka-home", "libs": str(libs), "logging": kind,
                      "jars": sorted(x.name for x in libs.glob("*.jar")), "installed_wall": time.time()})
    rel = installed(version, root)
    assert rel is not None
    return rel


def _write_record(d: Path, doc: dict) -> None:
    tmp = d / "release.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, d / "release.json")


def ensure(version: str, *, root: Path | None = None, say: Callable[[str], None] = lambda s: None) -> Release:
    """The release a run needs: the cached one, else installed now (with progress)."""
    return install(version, root=root, say=say)
