"""Java-properties files and the one-line configuration error every kraftsim config shares.

Why a module of its own, below both configs: the broker/controller config (``kraftsim/config.py``)
reads ``controller.quorum.voters`` with the quorum's own parser (``kraftsim/raft/config.py``,
QuorumConfig.parseVoterConnections), and the raft node's config reads its file with this parser
and raises this error. With both here, the arrow runs one way only: config -> raft.config ->
properties (Kafka reads both with ``Utils.loadProps`` and reports a bad value as a ConfigException).
"""
from __future__ import annotations

import re


class ConfigError(Exception):
    """One-line configuration error: ``kraftsim: FILE: key 'x': <what is wanted>``."""


def parse_properties(text: str) -> list[tuple[int, str, str]]:
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"^([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if not m:
            raise ConfigError(f"line {n}: key=value is wanted, got {line[:60]!r}")
        out.append((n, m.group(1), m.group(2)))
    return out
