"""Failed writes that became visible (docs/anomalies.md §failed_write_visible).

docs/seeds.md#seed-003-2-7: a produce request can fail *after* the leader appended the batch -
NOT_ENOUGH_REPLICAS_AFTER_APPEND, or a timeout (the client's ``info``) - and the record may
still be replicated and read later; Kafka allows that, so it is only counted
(``failed_write_visible_allowed``). An error that means "never appended" (NOT_ENOUGH_REPLICAS,
NOT_LEADER_OR_FOLLOWER, ...) followed by the value showing up in a read is an anomaly
(``failed_write_visible``): the client was told a lie. Error names are Kafka's (kio.schema.errors,
compared case-insensitively); librdkafka's local timeouts are ``_MSG_TIMED_OUT`` / ``_TIMED_OUT``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from checkers.lost import Foreign
from checkers.partition import OK, TYPE_NAMES, Partition

#: failures after which the record may have been appended (indeterminate outcomes)
MAYBE_APPENDED_ERRORS = (
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION",
    "_MSG_TIMED_OUT", "_TIMED_OUT", "_TIMED_OUT_QUEUE", "_TRANSPORT", "_PURGE_INFLIGHT",
)
#: the same by Kafka error code (kio.schema.errors.ErrorCode): 20, 7, 13
MAYBE_APPENDED_CODES = (20, 7, 13)



def failed_visible(p: Partition, foreign: Foreign) -> dict[str, tuple[dict[str, Any], int]]:
    """Failed (fail / info) sends whose value some read returned: here, or elsewhere (foreign)."""
    s, r = p.sends, p.reads
    failed = np.flatnonzero((s.type != OK) & (s.vc >= 0))
    rows: list[dict[str, Any]] = []
    if len(failed):
        by_v = np.argsort(r.vc, kind="stable")
        rv = r.vc[by_v]
        errors = s.error.to_pylist()
        for i in failed:
            value = p.values[int(s.vc[i])].as_py()
            topic = p.topics[int(s.topic[i])] if s.topic is not None else p.topic
            lo, hi = np.searchsorted(rv, s.vc[i], "left"), np.searchsorted(rv, s.vc[i], "right")
            here = by_v[lo:hi]
            at = {f"{p.partition}:{int(o)}" for o in r.offset[here]}
            readers = {p.processes[int(c)] for c in r.proc[here]}
            for part, o, _, reader in foreign.get((topic, value), ()):
                if part != p.partition:
                    at.add(f"{part}:{o}")
                    readers.add(reader)
            if not at:
                continue
            rows.append({"process": p.processes[int(s.proc[i])], "op": int(s.op[i]), "topic": topic,
                         "partition": p.partition, "value": value, "type": TYPE_NAMES[int(s.type[i])],
                         "error": errors[i], "error_code": None if s.error_code.null[i] else int(s.error_code.values[i]),
                         "invoke_t": _f(s.invoke_t[i]), "complete_t": _f(s.complete_t[i]),
                         "read_at": " ".join(sorted(at)), "readers": " ".join(sorted(readers))})
    allowed = [r_ for r_ in rows if _allowed(r_)]
    anomaly = [r_ for r_ in rows if not _allowed(r_)]
    return {"failed_write_visible": (_columns(anomaly), len(anomaly)),
            "failed_write_visible_allowed": (_columns(allowed), len(allowed))}


def _allowed(r: dict[str, Any]) -> bool:
    return (r["type"] == "info" or (r["error"] or "").upper() in MAYBE_APPENDED_ERRORS
            or (r["error_code"] if r["error_code"] is not None else -999) in MAYBE_APPENDED_CODES)


def _f(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def _columns(rows: list[dict[str, Any]]) -> dict[str, list]:
    keys = ("process", "op", "topic", "partition", "value", "type", "error", "error_code", "invoke_t", "complete_t",
            "read_at", "readers")
    return {k: [r[k] for r in rows] for k in keys}
