"""What every embedded target shares: the error that means "the machine failed us", and the
shape of a launcher.

Why a room of its own (``targets/``): a *target* is what a campaign runs against. Two of them
are started by faultline itself for each run on this machine - kraftsim (the model) and a real
Apache Kafka cluster from the release cache - and both end the same way, as an ordinary local
inventory (``RUN/inventory.yaml``) of the processes they started, so the run loop, the nemeses,
`faultline heal` and preflight treat them exactly like a lab. The launchers and the cache of
Kafka releases live here, below the harness, so the house shows what a target is.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class InfraError(RuntimeError):
    """The target or the machine failed us (not the user's config): exit code 3."""


class EmbeddedTarget(Protocol):
    """A cluster faultline starts for one run and stops at its end."""

    #: the run's cluster directory (configs, data, logs of every node)
    dir: Path
    bootstrap: str

    def start(self, timeout: float = ...) -> str:
        """Start every node; return ``bootstrap.servers`` once the cluster serves clients."""

    def write_inventory(self) -> Path:
        """``RUN/inventory.yaml``: the running nodes as a plain local inventory."""

    def features(self) -> dict[str, Any]:
        """What the cluster runs (versions, gates where known), for run.json ``features``."""

    def stop(self) -> None:
        """Stop every node and undo what start did (idempotent)."""
