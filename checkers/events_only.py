"""Check a directory that holds only the cluster's logs: what happened, and no lost-write verdict.

An operator with a Kafka cluster's ``server.log`` / ``controller.log`` / ``state-change.log`` per
host (laid out as faultline collects them, ``DIR/cluster-logs/<host>/``, docs/kafka-logs.md) but no
faultline run wants to know what those lines say: which partitions had elections, unclean ones,
ISR changes, AlterPartition rejections, truncations, fences and controller failovers. Without
histories nothing says which acknowledged writes were lost, so the verdict says so: outcome
``inconclusive`` because of :data:`checkers.outcome.NO_HISTORIES`, decided where every outcome is
(checkers/outcome.py), ``mode`` :data:`checkers.outcome.EVENTS_ONLY`, and the stories of
checkers/stories.py's events kind in ``event_stories`` (docs/verdict-format.md).

No Spark: the events are read on the driver as a run's are (checkers/load.py
:func:`~checkers.load.read_cluster_events`), so they are the very rows a history check's loss
stories would read. The run clock starts at the first event read (there is no run.json to anchor
it); verdict.json names that anchor, and the report places the events with it.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from checkers import stories
from checkers.features import read as read_features
from checkers.load import CheckerInputError, on_run_clock, read_cluster_events
from checkers.outcome import EVENTS_ONLY, Evidence, Expectation, decide
from checkers.verdict import VERDICT_VERSION
from workloads import history as H


def applies(run_dir: Path) -> bool:
    """A directory with ``cluster-logs/`` and neither run.json nor a history file: only the
    cluster's logs to read. A run directory (run.json) without histories stays an error: its
    histories are missing, which the history check says."""
    return (run_dir / "cluster-logs").is_dir() and not (run_dir / "run.json").exists() \
        and not H.history_files(run_dir)


def check(run_dir: str | os.PathLike[str], *, expect: str | None = None) -> dict[str, Any]:
    """Read the cluster's events, tell them, write verdict.json and return it. Raises
    :class:`~checkers.load.CheckerInputError` (one line) when the logs hold no event at all."""
    started = time.time()
    rd = Path(run_dir)
    cluster = read_cluster_events(rd)
    walls = [e["wall"] for e in cluster.events if e.get("wall") is not None]
    if not walls:
        why = "; ".join(cluster.kafka.problems) or (
            f"{cluster.kafka.files} Kafka log files, {cluster.kafka.records} records, none a statement the reader knows")
        raise CheckerInputError(f"{rd / 'cluster-logs'}: no cluster event read ({why}); want each host's Kafka "
                                "server.log, controller.log or state-change.log in cluster-logs/<host>/ "
                                "(docs/kafka-logs.md)")
    w0 = min(walls)
    events = on_run_clock(cluster.events, w0)
    exp = Expectation.from_run({}, expect=expect)
    decided = decide(exp, Evidence(lost=0, acked=None, valid=False, histories=False)).to_verdict(exp)
    told = stories.build_event_stories(events, [], wall_at_t0=w0)
    hosts = sorted({str(e["host"]) for e in events if e.get("host")})
    features = read_features(rd)
    verdict: dict[str, Any] = {
        "v": VERDICT_VERSION,
        "mode": EVENTS_ONLY,
        "outcome": decided["outcome"],
        "outcome_reason": decided["outcome_reason"],
        "inconclusive_because": decided["inconclusive_because"],
        "valid": False,
        "validity": "unknown",
        "family_failures": [],
        "incidents": None,
        "incidents_by_anomaly": {},
        "counts": {},
        "invalid_because": [],
        "acked_writes": None,
        "history_records": 0,
        "bad_lines": 0,
        "torn_lines": 0,
        "expected": decided["expected"],
        "expectation": decided["expectation"],
        "as_expected": decided["as_expected"],
        "expectations": decided["expectations"],
        "allowed_by": decided["allowed_by"],
        "run_id": rd.name,
        "mechanisms": {},
        "stories": [],
        "event_stories": told,
        "examples": {},
        "lost_writes_by_partition": {},
        "attribution": [],
        "events_only": {"wall_at_t0": w0, "clock": "t=0 is the first event read from the cluster's logs",
                        "hosts": hosts, "events": len(events), "kafka_logs": cluster.kafka.as_dict()},
        "checker": {"spark_master": None, "spark_version": None, "duration_s": None, "history_files": 0,
                    "features": features.as_dict()},
    }
    verdict["checker"]["duration_s"] = round(time.time() - started, 3)
    tmp = rd / ".verdict.json.tmp"
    tmp.write_text(json.dumps(verdict, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, rd / "verdict.json")
    return verdict
