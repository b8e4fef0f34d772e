"""A family planted in the checker's family list by tests: it raises on every partition.

Its own small module because Spark's Python workers unpickle the family list by reference (module
and name) and must import it; a test module would drag pytest and the tests' fixtures along.
"""
from __future__ import annotations

from typing import Any


def raises(p: Any, inputs: Any) -> dict:
    """Fail the way a family bug does: an exception with a multi-line message."""
    raise RuntimeError(f"planted failure in {p.topic}@{p.partition}\nsecond line: must not reach the verdict")
