"""The Apache Kafka releases the real-Kafka tests run, read from tests/kafka-releases.txt.

Why a file and not a constant: scripts/setup-test-host.sh installs exactly these releases into the
release cache before the tests (from Maven Central), so a test never spends its own time resolving
one - and the two lists cannot disagree because there is only one.
"""
from __future__ import annotations

from pathlib import Path

RELEASES_FILE = Path(__file__).resolve().parents[1] / "kafka-releases.txt"


def releases_under_test() -> list[str]:
    """Every release of the file, oldest first (one 3.x, one 4.x)."""
    lines = RELEASES_FILE.read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
