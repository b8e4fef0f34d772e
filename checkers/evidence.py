"""Evidence tables: one fixed schema per anomaly, and the columnar -> Arrow/Spark plumbing.

Why one place: the partition kernel (numpy, on the workers), the driver (small evidence as
rows), Spark (large evidence as a dataset) and the report all read the same tables, so the
column names and types are declared once here (docs/anomalies.md describes each column).
A family returns its evidence as equal-length columns (numpy arrays with a null mask, or plain
lists); :func:`to_table` makes the Arrow table the kernel writes and returns.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

STR, INT, LONG, DOUBLE, BOOL, STRS = "string", "int", "long", "double", "boolean", "array<string>"

_LOST_BASE = [("topic", STR), ("partition", INT), ("offset", LONG), ("value", STR), ("process", STR), ("op", LONG),
              ("invoke_t", DOUBLE), ("ack_t", DOUBLE), ("max_read_offset", LONG)]
_FAILED = [("process", STR), ("op", LONG), ("topic", STR), ("partition", INT), ("value", STR), ("type", STR),
           ("error", STR), ("error_code", INT), ("invoke_t", DOUBLE), ("complete_t", DOUBLE), ("read_at", STR),
           ("readers", STR)]

#: what each lost write is attributed to (checkers/attribution.py): lists of one-line descriptions
ATTRIBUTION_COLUMNS = [("faults", STRS), ("elections", STRS), ("isr_changes", STRS), ("alter_partition", STRS),
                       ("broker_events", STRS), ("removed_by", STRS), ("attribution", STR)]

#: evidence columns per anomaly, in table order
SCHEMAS: dict[str, list[tuple[str, str]]] = {
    # process, op first: the order attribution's join on (process, op) gives the table
    "lost_write": [("process", STR), ("op", LONG)] + [c for c in _LOST_BASE if c[0] not in ("process", "op")]
    + [("drain_end", LONG), ("lost_because", STR), ("miss_t", DOUBLE), ("miss_by", STR)] + ATTRIBUTION_COLUMNS,
    "unseen_at_end": _LOST_BASE,
    "inconsistent_offset": [("topic", STR), ("partition", INT), ("offset", LONG), ("n_values", LONG), ("values", STR),
                            ("observed_by", STR)],
    "duplicate": [("topic", STR), ("value", STR), ("n_offsets", LONG), ("at", STR)],
    "offset_mismatch": [("process", STR), ("op", LONG), ("topic", STR), ("partition", INT), ("offset", LONG),
                        ("value", STR), ("ack_t", DOUBLE), ("read_values", STR), ("readers", STR)],
    "nonmonotonic_send": [("process", STR), ("topic", STR), ("partition", INT), ("prev_op", LONG),
                          ("prev_offset", LONG), ("prev_value", STR), ("op", LONG), ("offset", LONG), ("value", STR),
                          ("delta", LONG)],
    "send_skip": [("process", STR), ("topic", STR), ("partition", INT), ("prev_op", LONG), ("prev_offset", LONG),
                  ("op", LONG), ("offset", LONG), ("skipped_offset", LONG), ("skipped_value", STR),
                  ("skipped_op", LONG), ("skipped_type", STR)],
    "realtime_offset_regression": [("process", STR), ("op", LONG), ("topic", STR), ("partition", INT),
                                   ("offset", LONG), ("value", STR), ("invoke_t", DOUBLE), ("ack_t", DOUBLE),
                                   ("prior_offset", LONG), ("prior_t", DOUBLE), ("prior_source", STR)],
    "nonmonotonic_poll": [("process", STR), ("f", STR), ("topic", STR), ("partition", INT), ("prev_op", LONG),
                          ("prev_max_offset", LONG), ("op", LONG), ("min_offset", LONG), ("t_first", DOUBLE),
                          ("delta", LONG)],
    "poll_skip": [("process", STR), ("f", STR), ("topic", STR), ("partition", INT), ("prev_op", LONG),
                  ("prev_max_offset", LONG), ("op", LONG), ("min_offset", LONG), ("t_first", DOUBLE),
                  ("skipped", LONG), ("first_skipped_offset", LONG)],
    "failed_write_visible": _FAILED,
    "failed_write_visible_allowed": _FAILED,
    "ack_below_min_isr": [("process", STR), ("op", LONG), ("topic", STR), ("partition", INT), ("offset", LONG),
                          ("value", STR), ("invoke_t", DOUBLE), ("ack_t", DOUBLE), ("judged_by", STR),
                          ("copies_at_most", INT), ("replicas_lacking", STR), ("replication_factor", INT),
                          ("isr_at_invoke", INT), ("isr_at_ack", INT), ("min_insync_replicas", INT)],
    "visible_end_regression": [("topic", STR), ("partition", INT), ("drain_end", LONG), ("max_read_offset", LONG),
                               ("max_acked_offset", LONG), ("visible_end_seen", LONG)],
    # run-level (checkers/quorum.py, checkers/isr_changes.py): from the cluster's events, not the history
    "controller_split_brain": [("old_leader", INT), ("old_epoch", INT), ("new_leader", INT), ("new_epoch", INT),
                               ("from_t", DOUBLE), ("to_t", DOUBLE), ("seconds", DOUBLE), ("ended_by", STR),
                               ("brokers_fenced", INT), ("fenced_brokers", STR)],
    "isr_change_stuck": [("topic", STR), ("partition", INT), ("leader", INT), ("leader_epoch", INT), ("isr", STR),
                         ("proposed_isr", STR), ("from_t", DOUBLE), ("to_t", DOUBLE), ("seconds", DOUBLE),
                         ("ended_by", STR), ("answers", STR)],
    # run-level effects of known storage bugs (checkers/effects.py): the brokers' events, the
    # timeline, and for uncommitted_read the inconsistent_offset rows the partitions gave
    "uncommitted_read": [("topic", STR), ("partition", INT), ("offset", LONG), ("broker", INT), ("t", DOUBLE),
                         ("to_offset", LONG), ("high_watermark", LONG), ("values", STR), ("observed_by", STR),
                         ("text", STR), ("source", STR), ("line", LONG)],
    "hwm_regression": [("host", STR), ("broker", INT), ("topic", STR), ("partition", INT), ("t", DOUBLE),
                       ("to_offset", LONG), ("high_watermark", LONG), ("reason", STR), ("text", STR),
                       ("source", STR), ("line", LONG)],
    "log_not_recovered": [("host", STR), ("broker", INT), ("log_dir", STR), ("t", DOUBLE), ("t_cut", DOUBLE),
                          ("text", STR), ("source", STR), ("line", LONG)],
    "log_dir_offline": [("host", STR), ("broker", INT), ("log_dir", STR), ("t", DOUBLE), ("error", STR),
                        ("text", STR), ("source", STR), ("line", LONG)],
}

#: report aggregates (common.md contract for throughput)
THROUGHPUT = [("second", LONG), ("ok", LONG), ("fail", LONG), ("info", LONG), ("latency_p50_ms", DOUBLE),
              ("latency_p99_ms", DOUBLE)]
LOST_BY_PARTITION = [("topic", STR), ("partition", INT), ("acked", LONG), ("max_acked_offset", LONG),
                     ("max_read_offset", LONG), ("drain_end", LONG), ("lost", LONG), ("unseen_at_end", LONG)]


def arrow_type(t: str):
    import pyarrow as pa
    return {STR: pa.string(), INT: pa.int32(), LONG: pa.int64(), DOUBLE: pa.float64(), BOOL: pa.bool_(),
            STRS: pa.list_(pa.string())}[t]


def arrow_schema(cols: Sequence[tuple[str, str]]):
    import pyarrow as pa
    return pa.schema([pa.field(n, arrow_type(t)) for n, t in cols])


def spark_schema(cols: Sequence[tuple[str, str]]):
    from pyspark.sql import types as T
    st = {STR: T.StringType(), INT: T.IntegerType(), LONG: T.LongType(), DOUBLE: T.DoubleType(),
          BOOL: T.BooleanType(), STRS: T.ArrayType(T.StringType())}
    return T.StructType([T.StructField(n, st[t]) for n, t in cols])


class Nullable:
    """A numpy column with a null mask (``True`` = null): ints have no NaN of their own."""
    __slots__ = ("values", "null")

    def __init__(self, values: np.ndarray, null: np.ndarray | None = None) -> None:
        self.values = values
        self.null = null

    def __len__(self) -> int:
        return len(self.values)

    def take(self, idx: np.ndarray) -> "Nullable":
        return Nullable(self.values[idx], None if self.null is None else self.null[idx])


def _arrow_col(v: Any, t: str, n: int):
    import pyarrow as pa
    at = arrow_type(t)
    if v is None:
        return pa.nulls(n, at)
    if isinstance(v, Nullable):
        return pa.array(v.values, mask=v.null, type=at, from_pandas=False)
    if isinstance(v, (pa.Array, pa.ChunkedArray)):
        return v.cast(at)
    if isinstance(v, np.ndarray) and v.dtype != object:
        if t == DOUBLE:
            return pa.array(v.astype(np.float64), type=at, from_pandas=True)   # NaN is null for times
        return pa.array(v, type=at)
    return pa.array(list(v), type=at)


def to_table(name_or_cols: str | Sequence[tuple[str, str]], cols: dict[str, Any], n: int):
    """Equal-length columns -> an Arrow table of the anomaly's schema (missing columns are null)."""
    import pyarrow as pa
    spec = SCHEMAS[name_or_cols] if isinstance(name_or_cols, str) else name_or_cols
    return pa.table({c: _arrow_col(cols.get(c), t, n) for c, t in spec}, schema=arrow_schema(spec))
