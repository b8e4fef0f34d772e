"""Fixtures for the real-Kafka nemesis tests: one cluster per module and release, faults healed
from their ledger after every test.

Why module-scoped clusters: a real cluster's start (``kafka-storage format`` and four to six
JVMs) costs tens of seconds on two cores, the tests after it seconds. Each module therefore
shares one cluster per release, and every test leaves it as it found it: its faults are healed
through `faultline heal`'s own path (``harness.heal.heal_all`` on the test's ledger) even when the
test fails, and the cluster is stopped - JVMs, namespaces, network - when the module ends,
whatever happened.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

import pytest

from harness.heal import heal_all
from nemeses.base import NemesisContext
from tests.realkafka.realcluster import RealCluster


@contextlib.contextmanager
def real_cluster(tmp_path_factory: pytest.TempPathFactory, version: str, **kw: Any) -> Iterator[RealCluster]:
    c = RealCluster(tmp_path_factory.mktemp(f"kafka-{version}-"), version, **kw)
    try:
        c.start()
        yield c
    finally:
        c.stop()
    # the launcher's stop leaves no JVM, namespace or device of the cluster behind
    left = c.leftovers()
    assert left == [], f"left after the cluster's stop: {left}"


@pytest.fixture
def faults(tmp_path: Path) -> Iterator[list[NemesisContext]]:
    """Register every nemesis context a test makes here; whatever the test left applied is healed
    from the context's ledger afterwards (as `faultline heal` does), pass or fail."""
    made: list[NemesisContext] = []
    try:
        yield made
    finally:
        for ctx in made:
            report = heal_all(ctx.ledger)
            assert not report.failed, f"heal after the test failed: {report.failed}"
