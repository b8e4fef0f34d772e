"""Incidents: the anomaly rows one event in the log causes, counted once.

Why: one lost write in a KIP-903 run is three invalidating rows - the ``lost_write`` itself,
the ``inconsistent_offset`` where the new leader wrote another record at its offset, and the
``offset_mismatch`` of its send reading back another value - often with a
``realtime_offset_regression``, a ``nonmonotonic_send`` and a ``send_skip`` of the record that
replaced it. The
detailed counts keep every row (each is a fact a reader may want); the headline counts
incidents: per topic-partition, every anomaly row that names a record slot (an offset) is
grouped with the others at the same offset, and the group is named after its most telling
anomaly (:data:`OFFSET_KEYED` order). Anomalies without an offset of their own (duplicates,
poll order, failed writes read, the visible end) are one incident per row.

Computed by the partition tasks (partitions are disjoint, so their counts add up).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from checkers.evidence import Nullable

#: anomalies whose row names one offset of its partition, in the order that names an incident
OFFSET_KEYED = ("lost_write", "offset_mismatch", "inconsistent_offset", "realtime_offset_regression",
                "nonmonotonic_send", "send_skip", "ack_below_min_isr")
#: the column holding that offset (``offset`` unless named here): a send skip is about the
#: record found out of order, which after a loss is a new write in a reused slot
_OFFSET_COLUMN = {"send_skip": "skipped_offset"}


def offsets_of(cols: dict[str, Any], column: str = "offset") -> np.ndarray:
    """The non-null offset column of one family's evidence columns, as int64."""
    v = cols.get(column)
    if v is None:
        return np.zeros(0, dtype=np.int64)
    if isinstance(v, Nullable):
        vals = np.asarray(v.values, dtype=np.int64)
        return vals if v.null is None else vals[~np.asarray(v.null, dtype=bool)]
    return np.array([int(x) for x in v if x is not None], dtype=np.int64)


def partition_incidents(fam: dict[str, tuple[dict[str, Any], int]]) -> dict[str, int]:
    """{primary anomaly: incidents} for the offset-keyed anomalies of one partition."""
    seen: set[int] = set()
    out: dict[str, int] = {}
    for name in OFFSET_KEYED:
        cols, n = fam.get(name, ({}, 0))
        if not n:
            continue
        new = set(np.unique(offsets_of(cols, _OFFSET_COLUMN.get(name, "offset"))).tolist()) - seen
        if new:
            out[name] = len(new)
            seen |= new
    return out


def headline(keyed: dict[str, int], counts: dict[str, int], invalidating: list[str]) -> tuple[int, dict[str, int]]:
    """(incidents, by primary anomaly): the keyed incidents of every partition plus one per row of
    each invalidating anomaly without an offset."""
    by = {k: n for k, n in keyed.items() if n}
    for name in invalidating:
        if name not in OFFSET_KEYED and counts.get(name):
            by[name] = by.get(name, 0) + int(counts[name])
    return sum(by.values()), by
