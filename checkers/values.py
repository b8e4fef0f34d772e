"""Reading a number out of an event or a row, the one way the stories and the run-level
families do it.

Why one module: events come from kraftsim's JSON, from Kafka's log lines (checkers/kafkalog)
and from Spark rows, so a field may be missing, None, a bool, a string or NaN; every reader
must treat those alike, or two stories of one run disagree about the same offset.
"""
from __future__ import annotations

import math
from typing import Any


def num(v: Any) -> float | None:
    """A real number, or None for a missing value, a bool or NaN."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and not (
        isinstance(v, float) and math.isnan(v)) else None


def as_int(v: Any) -> int | None:
    """An integer (from an int, a float or a numeric string), or None."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None
