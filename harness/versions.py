"""The Kafka releases and metadata versions that exist, as the harness knows them: the one place
every check of ``kafka.version`` / ``metadata.version`` reads (inventories, campaigns, suites,
``--set``; a real-Kafka launcher picking the release for a metadata.version).

Why through a program: the table has one owner, kraftsim/versions.py, and kraftsim is "apart" -
the harness runs it, never imports it (docs/architecture.md). So the table is read from
``python -m kraftsim versions --json`` once per process and kept.

Every check raises ValueError with one line that names the value and the nearest valid ones; the
caller adds the file and the field (``ConfigError``).
"""
from __future__ import annotations

import functools
import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Mapping

#: the target settings that name a Kafka release, and the one that names a metadata version
RELEASE_KEYS = ("kafka.version", "controller.kafka.version")
METADATA_KEY = "metadata.version"


@dataclass(frozen=True)
class Line:
    """One release line (x.y): its releases, its feature levels, and the release introducing them."""
    line: str
    releases: tuple[str, ...]
    metadata_versions: tuple[str, ...]
    metadata_version: str   # the newest IV: what "x.y" alone means
    introduced_by: str      # x.y.0: kraftsim's kafka.version when only the metadata.version is given


@functools.cache
def _lines() -> tuple[Line, ...]:
    try:
        p = subprocess.run([sys.executable, "-m", "kraftsim", "versions", "--json"], capture_output=True,
                           text=True, timeout=60)
        doc = json.loads(p.stdout) if p.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError) as e:
        raise RuntimeError(f"cannot read Kafka's versions from `python -m kraftsim versions --json`: {e}") from None
    if doc is None:
        raise RuntimeError("`python -m kraftsim versions --json` exited "
                           f"{p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1][:200]}")
    return tuple(Line(x["line"], tuple(x["releases"]), tuple(x["metadata_versions"]), x["metadata_version"],
                      x["introduced_by"]) for x in doc["lines"])


def _key(text: str) -> tuple[int, ...]:
    """"3.4.1" → (3, 4, 1); "3.5-IV2" → (3, 5, 2)."""
    return tuple(int(p) for p in text.replace("-IV", ".").split("."))


def _nearest(value: tuple[int, ...], known: list[str]) -> str:
    below = [k for k in known if _key(k) < value]
    above = [k for k in known if _key(k) > value]
    return " or ".join(([below[-1]] if below else []) + ([above[0]] if above else []))


def known_releases() -> tuple[str, ...]:
    """Every Kafka release with KRaft (3.0.0 ...), oldest first."""
    return tuple(r for ln in _lines() for r in ln.releases)


def known_metadata_versions() -> tuple[str, ...]:
    """Every KRaft feature level of a released line ("3.0-IV1" ...), oldest first."""
    return tuple(mv for ln in _lines() for mv in ln.metadata_versions)


def _text(value: Any) -> str:
    """A version as written. YAML reads ``3.10`` unquoted as the number 3.1: a number is refused."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{value!r}: a version string like \"3.9\" is wanted")
    if isinstance(value, float):
        raise ValueError(f"{value!r} is a number, not a version: quote it (YAML reads 3.10 as the number 3.1)")
    return str(value).strip()


def check_kafka_version(text: Any) -> str:
    """A Kafka release ("3.4.1", or "3.4" for 3.4.0) → its full name; ValueError naming the nearest."""
    t = _text(text)
    parts = t.split(".")
    if not (2 <= len(parts) <= 3 and all(p.isdigit() for p in parts)):
        raise ValueError(f"{t!r} is not a Kafka release: one like 3.9.0 or 3.4.1 is wanted")
    full = ".".join(parts + ["0"] * (3 - len(parts)))
    known = known_releases()
    if _key(full) not in {_key(r) for r in known}:
        raise ValueError(f"{t} is not a Kafka release; nearest: {_nearest(_key(full), list(known))} "
                         f"(releases run {known[0]} to {known[-1]})")
    return next(r for r in known if _key(r) == _key(full))


def check_metadata_version(text: Any) -> str:
    """A metadata version ("3.4", "3.9-IV0") → its feature level "x.y-IVn" (a line alone: its newest
    IV, as MetadataVersion.fromVersionString); ValueError naming the nearest valid ones."""
    t = _text(text)
    line, _, iv = t.partition("-IV")
    parts = line.split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts) or (iv and not iv.isdigit()) or t.endswith("-IV"):
        raise ValueError(f"{t!r} is not a Kafka metadata version: one like 3.4 or 3.9-IV0 is wanted")
    lines = {_key(ln.line): ln for ln in _lines()}
    here = lines.get(_key(line))
    if here is None:
        names = [ln.line for ln in _lines()]
        raise ValueError(f"{t} is not a Kafka metadata version (no release line {line}); nearest: "
                         f"{_nearest(_key(line), names)} (lines run {names[0]} to {names[-1]})")
    if not iv:
        return here.metadata_version
    if f"{here.line}-IV{int(iv)}" not in here.metadata_versions:
        raise ValueError(f"{t} is not a Kafka metadata version; nearest: "
                         f"{_nearest(_key(t), list(known_metadata_versions()))} (the {here.line} line has "
                         f"{here.metadata_versions[0]} to {here.metadata_versions[-1]})")
    return f"{here.line}-IV{int(iv)}"


def release_for_metadata_version(mv: Any, *, newest_patch: bool = False) -> str:
    """The Kafka release to run for a metadata version: the x.y.0 that introduced it (what kraftsim
    runs when only the metadata.version is given, MetadataVersion.release()), or with
    ``newest_patch`` that line's newest patch release."""
    full = check_metadata_version(mv)
    here = next(ln for ln in _lines() if full.startswith(ln.line + "-IV"))
    return here.releases[-1] if newest_patch else here.introduced_by


def is_version_key(key: str) -> bool:
    """Does this target setting (or dotted campaign key ending in one) name a version, whose text
    must be kept as written?"""
    return any(key == k or key.endswith("." + k) for k in (METADATA_KEY, *RELEASE_KEYS))


def check_settings(settings: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every version among target settings checked; the (key, one-line error) pairs of the bad ones."""
    bad = []
    for key, value in settings.items():
        check = check_metadata_version if key == METADATA_KEY else check_kafka_version if key in RELEASE_KEYS else None
        if check is None:
            continue
        try:
            check(value)
        except ValueError as e:
            bad.append((key, str(e)))
    return bad
