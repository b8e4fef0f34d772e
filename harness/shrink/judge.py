"""Judging replays: did this run lose acknowledged writes, and by which mechanism?

"Still fails" means the same mechanism, not just any loss: a shrink that drifts from an
unclean election to a page-cache loss of a lone leader has found *a* loss, not the one the
user asked about. The mechanism comes from verdict.json's ``mechanisms`` ({label: lost-write
count}, built by checkers/stories.py). Runs judged before that existed have only the
attribution rows; :func:`attribution_mechanism` reads the same labels off them coarsely.
:func:`mechanisms` is the one place that chooses.

One SparkSession judges every replay of a shrink (``checkers.job.check_run(run, spark=...)``):
a JVM start per replay would cost more than many replays' fault injection. A replay whose
final drain read back every acknowledged value cannot have a lost write (lost_write is an
acknowledged value no read returned, docs/anomalies.md), so it is not sent to Spark at all.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from checkers.outcome import EXIT_INFRA
from harness.check import Checked, check_and_report, stderr_to
from harness.cluster import InfraError
from workloads.history import acked_missing_from_drain

MECHANISMS = ("empty_replica_elected", "stale_alter_partition_readmit", "last_replica_standing",
              "unclean_election", "truncated_to_lossy_leader", "ack_below_min_isr", "unexplained")

_EV = re.compile(r"^t=(?P<t>-?[\d.]+) (?P<event>\w+) @(?P<host>[^/ ]*)/(?P<node>\S+)\s*(?P<rest>.*)$")
_KV = re.compile(r"(\w+)=(\[[^\]]*\]|\{[^}]*\}|\S+)")


def _event(s: str) -> dict[str, Any] | None:
    m = _EV.match(s or "")
    if not m:
        return None
    d: dict[str, Any] = {"t": float(m["t"]), "event": m["event"], "host": m["host"], "raw": s}
    d.update(dict(_KV.findall(m["rest"])))
    return d


def _crash_removal(e: dict[str, Any]) -> bool:
    return e["event"] == "recovery" or (e["event"] == "truncation" and e.get("reason") == "recovery")


def attribution_mechanism(row: dict[str, Any]) -> str:
    """A lost write's mechanism from its attribution row (verdict.json ``attribution``),
    in the labels of checkers/stories.py. Coarse on purpose: the decisive event is the
    first removal of the write that was not its holder's own crash recovery (a follower
    truncating to a leader that lacks it); the election before it says why that leader
    lacked it (reason ``unclean``: KIP-704 / unclean.leader.election.enable)."""
    ack_t = float(row.get("ack_t") or 0.0)
    removals = sorted((e for e in map(_event, row.get("removed_by") or []) if e), key=lambda e: e["t"])
    elections = sorted((e for e in map(_event, row.get("elections") or [])
                        if e and e["event"] == "leader_elected"), key=lambda e: e["t"])
    follow = [e for e in removals if not _crash_removal(e)]
    crashes = [e for e in removals if _crash_removal(e)]
    if not follow:
        return "last_replica_standing" if crashes else "unexplained"
    # elections after the ack, up to the removal: the leader the holders truncated to
    before = [e for e in elections if ack_t <= e["t"] <= follow[0]["t"] + 0.5]
    if any(e.get("reason") == "unclean" for e in before):
        return "unclean_election"
    if before:
        return "empty_replica_elected"
    # no election: the leader of the ack lost the write itself and kept leading
    return "truncated_to_lossy_leader" if crashes else "unexplained"


def mechanisms(verdict: dict[str, Any]) -> dict[str, int]:
    """{mechanism: lost writes} of a verdict: its own ``mechanisms`` when the checker wrote
    them, else derived from the attribution rows (the first 100 lost writes)."""
    if isinstance(verdict.get("mechanisms"), dict):
        return {str(k): int(v or 0) for k, v in verdict["mechanisms"].items() if v}
    if not int((verdict.get("counts") or {}).get("lost_write", 0) or 0):
        return {}
    c = Counter(attribution_mechanism(r) for r in verdict.get("attribution") or [])
    return dict(c.most_common()) or {"unexplained": int(verdict["counts"]["lost_write"])}


def primary(mech: dict[str, int]) -> str | None:
    """The mechanism that lost the most writes (ties: the first label in MECHANISMS order)."""
    if not mech:
        return None
    order = {m: i for i, m in enumerate(MECHANISMS)}
    return sorted(mech.items(), key=lambda kv: (-kv[1], order.get(kv[0], 99), kv[0]))[0][0]


def same_mechanism(wanted: str, mech: dict[str, int]) -> bool:
    return wanted in mech


def acked_missing(run_dir: Path) -> int | None:
    """Acknowledged values the final drain did not read (workloads.history)."""
    return acked_missing_from_drain(run_dir)


class Judge:
    """One SparkSession for a whole shrink, started on first need, stopped by :meth:`close`."""

    def __init__(self, log: Path):
        self.log = log
        self.spark: Any = None
        self.own_session = False

    def check(self, run_dir: Path, expect: str | None = "loss", report: bool = False) -> Checked:
        """:func:`harness.check.check_and_report` in this shrink's session (started on first
        need); a replay gets no report (only its mechanism is wanted), the source run does."""
        if self.spark is None:
            from checkers.session import make_session, session_running
            os.environ.setdefault("PYSPARK_SUBMIT_ARGS", " ".join(
                f"--conf {k}={v}" for k, v in (("spark.sql.ui.retainedExecutions", 20), ("spark.ui.retainedJobs", 50),
                                               ("spark.ui.retainedStages", 50), ("spark.ui.retainedTasks", 1000)))
                + " pyspark-shell")
            self.log.parent.mkdir(parents=True, exist_ok=True)
            try:
                self.own_session = not session_running()   # close() stops only what it started
                with stderr_to(self.log):  # the JVM inherits fd 2: its chatter goes to the log
                    self.spark = make_session(app_name="faultline-shrink")
            except Exception as e:  # noqa: BLE001 - no Spark: infrastructure
                return Checked(run_dir, None, EXIT_INFRA, f"checker failed: Spark did not start: {type(e).__name__}: {e}")
        try:
            return check_and_report(run_dir, spark=self.spark, expect=expect, report=report)
        finally:
            try:
                self.spark.catalog.clearCache()
            except Exception:  # noqa: BLE001 - a cache we could not drop is not a verdict
                pass

    def verdict(self, run_dir: Path, expect: str | None = "loss") -> dict[str, Any]:
        """A replay's verdict; InfraError when the checker could not give one."""
        checked = self.check(run_dir, expect)
        if checked.verdict is None:
            raise InfraError(f"checker failed on {run_dir}: {checked.message}")
        return checked.verdict

    def close(self) -> None:
        if self.spark is not None:
            try:
                if self.own_session:
                    self.spark.stop()
            finally:
                self.spark = None
