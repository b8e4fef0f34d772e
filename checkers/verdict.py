"""Assemble verdict.json from the anomaly counts (format: docs/verdict-format.md).

Which anomalies make a run invalid, and why (docs/anomalies.md §validity): every anomaly that
shows Kafka broke a promise does; ``unseen_at_end`` (availability) and
``failed_write_visible_allowed`` (Kafka allows it, seed 003 §2.7) are only counted; a duplicate
only breaks a promise when the producer was idempotent (``enable.idempotence``, Kafka's default
since 3.0, is assumed on unless run.json's switches say false).
"""
from __future__ import annotations

from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:
    from checkers.job import Analysis

INFORMATIONAL = ("unseen_at_end", "failed_write_visible_allowed")
EXAMPLES = 10
ATTRIBUTIONS = 100


def _false(v: Any) -> bool:
    return v is False or (isinstance(v, str) and v.strip().lower() in ("false", "0", "no", "off"))


def invalidating(counts: dict[str, int], run: dict[str, Any]) -> list[str]:
    """The anomaly names with a nonzero count that make the run invalid."""
    idem_off = _false((run.get("switches") or {}).get("enable.idempotence"))
    bad = []
    for name, n in counts.items():
        if n == 0 or name in INFORMATIONAL or (name == "duplicate" and idem_off):
            continue
        bad.append(name)
    return bad


def build_verdict(an: "Analysis", run: dict[str, Any], *, expect: str | None = None) -> dict[str, Any]:
    counts = dict(an.counts)
    bad = invalidating(counts, run)
    valid = not bad
    expected = expect or run.get("expect") or "no-loss"
    if expected == "loss":
        as_expected = counts["lost_write"] > 0
    else:
        as_expected = valid and counts["lost_write"] == 0
    by_part = {f"{r['topic']}-{r['partition']}": int(r["lost"]) for r in an.stats if r.get("lost")}
    lost_rows = an.examples("lost_write", ATTRIBUTIONS)
    names = [c for c, _ in an.columns["lost_write"]]
    attribution_cols = [c for c in ("topic", "partition", "offset", "value", "process", "ack_t", "miss_t", "miss_by",
                                    "lost_because", "faults", "elections", "isr_changes", "alter_partition",
                                    "broker_events", "removed_by", "attribution") if c in names]
    return {
        "valid": valid,
        "counts": counts,
        "invalid_because": bad,
        "acked_writes": an.acked_writes,
        "history_records": an.history_records,
        "expected": expected,
        "as_expected": as_expected,
        "run_id": run.get("run_id"),
        "examples": {name: an.examples(name, EXAMPLES) for name in an.counts if counts[name] > 0},
        "lost_writes_by_partition": dict(sorted(by_part.items())),
        "attribution": [{c: r.get(c) for c in attribution_cols} for r in lost_rows],
    }
