"""What one check found: counts, evidence and per-partition figures (:class:`Analysis`).

Its own module so that :mod:`checkers.job` (which computes it) and :mod:`checkers.verdict`
(which turns it into verdict.json) both stand on it without importing each other.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


@dataclass
class Analysis:
    """Counts, evidence and per-partition figures; what the verdict and the tables are made of.

    ``rows[name]`` holds every evidence row of an anomaly as a dict when its evidence is small
    (the usual case: a run with a handful of anomalies); large evidence is a DataFrame over the
    Parquet files the partition tasks wrote (``frames[name]``).
    """
    counts: dict[str, int]
    acked_writes: int
    history_records: int
    rows: dict[str, list[dict[str, Any]]]
    frames: dict[str, DataFrame]
    columns: dict[str, list[tuple[str, str]]]
    stats: list[dict[str, Any]]
    throughput: list[dict[str, Any]]
    extra: dict[str, Any] = field(default_factory=dict)
    bad_lines: int = 0          # complete history lines that were not a record of the schema
    torn_lines: int = 0         # cut last lines of killed writers
    #: families that raised (checkers/families.py): {family, anomalies, error, partitions}, by name
    family_failures: list[dict[str, Any]] = field(default_factory=list)

    def examples(self, name: str, n: int) -> list[dict[str, Any]]:
        if name in self.rows:
            return self.rows[name][:n]
        df = self.frames[name]
        t = next((c for c in ("ack_t", "t_first", "invoke_t", "complete_t") if c in df.columns), None)
        order = [c for c in (t, "topic", "partition", "offset", "value", "process") if c and c in df.columns]
        got = [json.loads(r[0]) for r in df.orderBy(*order).select(F.to_json(F.struct(*df.columns))).limit(n).collect()]
        return [{c: r.get(c) for c in df.columns} for r in got]   # to_json leaves out nulls; rows keep them
