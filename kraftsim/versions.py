"""Which Kafka releases and metadata versions exist: the ONE table, and the parsers that refuse others.

Why a table and not a pattern: ``metadata.version: "9.9"`` or ``kafka.version: "3.4.9"`` parse as
versions but name nothing Kafka ever shipped; a run at such a version would record gates for a
Kafka that does not exist. So a value must be in this table, and an error names the nearest values
that are (:func:`nearest`).

Sources, checked when the table was last extended:

- ``RELEASES``: every ``org.apache.kafka:kafka_2.13`` version from 3.0.0 in Maven Central's
  ``maven-metadata.xml`` (KRaft releases; 2.x had no production KRaft).
- ``LATEST_IV``: the newest feature level of each release line that the line's releases ship as
  production: server-common ``MetadataVersion.java`` (``LATEST_PRODUCTION``, else the last enum
  value) in ``kafka-server-common`` x.y.z from Maven Central for 3.3 to 4.4 (3.7.2: IBP_3_7_IV4,
  3.8.1: IBP_3_8_IV0, 3.9.2: IBP_3_9_IV0, 4.0.2: IBP_4_0_IV3, 4.1.2: IBP_4_1_IV1, 4.2.2: IBP_4_2_IV1,
  4.3.1: IBP_4_3_IV0, 4.4.0: IBP_4_4_IV2), and core ``kafka/api/ApiVersion.scala`` at the tags for
  3.0 to 3.2 (KAFKA_3_0_IV1, KAFKA_3_1_IV0, KAFKA_3_2_IV0). A newer line's IVs that an older
  release lists as unstable (4.1.0 lists IBP_4_2_IV0) are not in force before that line ships.
- ``MIN_KRAFT_IV``: ``MetadataVersion.MINIMUM_KRAFT_VERSION`` = IBP_3_0_IV1 (3.3 to 3.9); from 4.0
  ``MetadataVersion.MINIMUM_VERSION`` = IBP_3_3_IV3: Kafka 4.x software runs no older feature level
  (``min_metadata_version``).

To add a release: append it to ``RELEASES`` (and its line's newest IV to ``LATEST_IV`` for a new
line); the harness reads this table through ``python -m kraftsim versions --json``.
"""
from __future__ import annotations

import bisect
import re
from typing import Any

#: every Apache Kafka release with KRaft (Maven Central, org.apache.kafka:kafka_2.13), oldest first
RELEASES: tuple[str, ...] = (
    "3.0.0", "3.0.1", "3.0.2", "3.1.0", "3.1.1", "3.1.2", "3.2.0", "3.2.1", "3.2.2", "3.2.3",
    "3.3.0", "3.3.1", "3.3.2", "3.4.0", "3.4.1", "3.5.0", "3.5.1", "3.5.2", "3.6.0", "3.6.1", "3.6.2",
    "3.7.0", "3.7.1", "3.7.2", "3.8.0", "3.8.1", "3.9.0", "3.9.1", "3.9.2",
    "4.0.0", "4.0.1", "4.0.2", "4.1.0", "4.1.1", "4.1.2", "4.2.0", "4.2.1", "4.2.2",
    "4.3.0", "4.3.1", "4.4.0",
)

#: the newest feature level ("IV") of each release line: ``MetadataVersion.fromVersionString("3.5")``
#: picks the latest IV of that release, and so does kraftsim for a version given without one
LATEST_IV: dict[tuple[int, int], int] = {
    (3, 0): 1, (3, 1): 0, (3, 2): 0, (3, 3): 3, (3, 4): 0, (3, 5): 2, (3, 6): 2, (3, 7): 4,
    (3, 8): 0, (3, 9): 0, (4, 0): 3, (4, 1): 1, (4, 2): 1, (4, 3): 0, (4, 4): 2,
}

MetadataVersion = tuple[int, int, int]
KafkaVersion = tuple[int, int, int]

#: MetadataVersion.MINIMUM_KRAFT_VERSION: 3.0-IV0 is a ZooKeeper-era IBP, no KRaft feature level
MIN_KRAFT_IV: MetadataVersion = (3, 0, 1)
#: MetadataVersion.MINIMUM_VERSION from Kafka 4.0.0: the oldest feature level 4.x software runs
MIN_IV_FROM_4_0: MetadataVersion = (3, 3, 3)

_RELEASE_TUPLES: tuple[KafkaVersion, ...] = tuple(
    (int(a), int(b), int(c)) for a, b, c in (r.split(".") for r in RELEASES))


def format_metadata_version(mv: MetadataVersion) -> str:
    return f"{mv[0]}.{mv[1]}-IV{mv[2]}"


def format_kafka_version(v: KafkaVersion) -> str:
    return f"{v[0]}.{v[1]}.{v[2]}"


def metadata_versions() -> list[MetadataVersion]:
    """Every KRaft feature level of a released line, oldest first."""
    return [(a, b, iv) for (a, b), top in sorted(LATEST_IV.items()) for iv in range(top + 1)
            if (a, b, iv) >= MIN_KRAFT_IV]


def nearest(value: tuple[int, ...], known: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The known values either side of ``value`` (one at either end of the table)."""
    i = bisect.bisect_left(known, value)
    return [known[j] for j in (i - 1, i) if 0 <= j < len(known)]


def _lines() -> list[tuple[int, int]]:
    return sorted(LATEST_IV)


def _line_text(line: tuple[int, ...]) -> str:
    return f"{line[0]}.{line[1]}"


def parse_metadata_version(text: str) -> MetadataVersion:
    """``3.4`` → (3, 4, 0); ``3.9-IV0`` → (3, 9, 0); a release line without an IV gets its newest IV.
    Only feature levels of released lines (``LATEST_IV``); ValueError names the nearest valid ones."""
    t = text.strip()
    m = re.match(r"^(\d+)\.(\d+)(?:-IV(\d+))?$", t)
    if not m:
        raise ValueError(f"{t!r} is not a Kafka metadata version: one like 3.4 or 3.9-IV0 is wanted")
    line = (int(m.group(1)), int(m.group(2)))
    lines = _lines()
    if line not in LATEST_IV:
        near = " or ".join(_line_text(x) for x in nearest(line, lines))
        raise ValueError(f"{t} is not a Kafka metadata version (no Kafka release line {line[0]}.{line[1]}); "
                         f"nearest: {near} (Kafka has {_line_text(lines[0])} to {_line_text(lines[-1])})")
    if m.group(3) is None:
        return line[0], line[1], LATEST_IV[line]
    mv = (line[0], line[1], int(m.group(3)))
    if mv not in metadata_versions():
        near = " or ".join(format_metadata_version(x) for x in nearest(mv, metadata_versions()))
        ivs = [format_metadata_version(x) for x in metadata_versions() if x[:2] == line]
        raise ValueError(f"{t} is not a Kafka metadata version; nearest: {near} "
                         f"(the {_line_text(line)} line has {ivs[0]} to {ivs[-1]})")
    return mv


def parse_kafka_version(text: str) -> KafkaVersion:
    """``3.9.0`` → (3, 9, 0); ``3.9`` → (3, 9, 0). A KRaft Kafka release in ``RELEASES``;
    ValueError names the nearest releases that exist."""
    t = text.strip()
    m = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?$", t)
    if not m:
        raise ValueError(f"{t!r} is not a Kafka release: one like 3.9.0 or 3.4.1 is wanted")
    v = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    if v not in _RELEASE_TUPLES:
        near = " or ".join(format_kafka_version(x) for x in nearest(v, list(_RELEASE_TUPLES)))
        raise ValueError(f"{t} is not a Kafka release; nearest: {near} "
                         f"(KRaft releases run {RELEASES[0]} to {RELEASES[-1]})")
    return v


def release_of(mv: MetadataVersion) -> KafkaVersion:
    """The release that introduced ``mv``: x.y.0 for every x.y-IVn (MetadataVersion.release())."""
    return mv[0], mv[1], 0


def min_metadata_version(kv: KafkaVersion) -> MetadataVersion:
    """The oldest feature level the software ``kv`` runs (MINIMUM_VERSION from 4.0.0)."""
    return MIN_IV_FROM_4_0 if kv >= (4, 0, 0) else MIN_KRAFT_IV


def table() -> dict[str, Any]:
    """What ``python -m kraftsim versions --json`` prints: one entry per release line, oldest first,
    with its releases, its feature levels, the release that introduced them (a metadata.version's
    default kafka.version) and the oldest feature level its software runs."""
    lines = []
    for line in _lines():
        rels = [r for r, t in zip(RELEASES, _RELEASE_TUPLES) if t[:2] == line]
        lines.append({
            "line": _line_text(line),
            "releases": rels,
            "metadata_versions": [format_metadata_version(mv) for mv in metadata_versions() if mv[:2] == line],
            "metadata_version": format_metadata_version((line[0], line[1], LATEST_IV[line])),
            "introduced_by": format_kafka_version(release_of((line[0], line[1], 0))),
            "min_metadata_version": format_metadata_version(min_metadata_version((line[0], line[1], 0))),
        })
    return {"lines": lines}
