"""Reading a number out of an event or a row, and the reboot nemesis's page-cache cuts out of
the timeline: the one way the stories and the run-level families do it.

Why one module: events come from kraftsim's JSON, from Kafka's log lines (checkers/kafkalog)
and from Spark rows, so a field may be missing, None, a bool, a string or NaN; every reader
must treat those alike, or two stories of one run disagree about the same offset.
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterator


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


def page_cache_cuts(timeline: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], str, dict[str, Any]]]:
    """Every page-cache-loss cut the reboot nemesis recorded: (its timeline note, the host, the
    host's ``page_cache_cut`` record: what was cut, and the ``uncertain`` ranges; docs/nemeses.md)."""
    for r in timeline:
        raw = r.get("detail")
        if r.get("kind") != "note" or num(r.get("t")) is None or not isinstance(raw, str) or "page_cache_cut" not in raw:
            continue
        try:
            detail = json.loads(raw)
        except ValueError:
            continue
        for host, d in (detail.items() if isinstance(detail, dict) else ()):
            if isinstance(d, dict) and isinstance(d.get("page_cache_cut"), dict):
                yield r, str(host), d["page_cache_cut"]
