"""The anomaly families, declared once, each run check-safe.

Jepsen composes its checkers as a named map (``jepsen.checker/compose``) and runs each one
through ``check-safe``: a checker that throws gives ``{:valid? :unknown, :error ...}`` instead
of failing the whole check, and ``merge-valid`` folds the results with false over unknown over
true. faultline does the same per topic-partition: :data:`FAMILIES` lists every family once,
with the evidence tables it fills (docs/anomalies.md), and :func:`run_families` runs each,
catching what it raises. A family that raises leaves its tables empty for that partition and is
reported as a failure - its name and the error in one line - while every other family still
reports; the verdict folds the failures in (checkers/verdict.py: docs/verdict-format.md
§family failures). A bug in one family never costs the run its other answers, and never passes
for "nothing found".

Each family is a module-level function ``(partition, inputs) -> {anomaly: (columns, count)}``
(pickled by reference into the Spark tasks). ``inputs`` is the kernel's broadcast context
(checkers/kernel.py ``Context``), typed here by what the families read so this module does not
import the kernel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from checkers import divergence, effects, failed, invariants, isr_changes, lost, polls, quorum, realtime, sends
from checkers.invariants import IsrTimeline
from checkers.lost import Foreign
from checkers.partition import Partition
from checkers.replicas import ReplicaLogs

#: one family's answer for one partition: anomaly -> (evidence columns, count)
Findings = dict[str, tuple[dict[str, Any], int]]

#: the longest error text a failure keeps (one line)
ERROR_CHARS = 300


class Inputs(Protocol):
    """What the families read besides the partition (checkers/kernel.py ``Context``)."""
    foreign: Foreign
    min_isr: int | None                                  # the effective min ISR (checkers/min_isr.py)
    isr: dict[tuple[str, int], IsrTimeline]
    isr_source: dict[tuple[str, int], str]               # which ISR view each timeline is
    replicas: ReplicaLogs                                # the replicas' own logs (checkers/replicas.py)
    replication_factor: int | None


class RunView(Protocol):
    """What a run-level family reads: the cluster's (and proxy's) events on the run clock, with
    their host, and the timeline (checkers/load.py ``RunInputs``). A view may also carry
    ``inconsistent_offsets``, the partitions' ``inconsistent_offset`` rows (checkers/job.py asks
    the run-level families after the partitions); one without them has none."""
    events: list[dict[str, Any]]
    timeline: list[dict[str, Any]]


@dataclass(frozen=True)
class Family:
    """One question about a topic-partition and the evidence tables its answers fill.

    A ``run_level`` family asks its question once per run, of the cluster's events rather than of
    a partition's history (two active controllers, a stuck ISR change): its ``check`` gets
    ``(None, RunView)`` on the driver (:func:`run_level`), never a partition task."""
    name: str
    anomalies: tuple[str, ...]
    check: Callable[[Any, Any], Findings]
    #: only asked of a real topic-partition, not of the group of sends without one
    partitioned: bool = True
    run_level: bool = False


def _lost_writes(p: Partition, inputs: Inputs) -> Findings:
    return lost.lost_and_unseen(p, inputs.foreign)


def _divergence(p: Partition, inputs: Inputs) -> Findings:
    return divergence.divergence(p, inputs.foreign)


def _send_order(p: Partition, inputs: Inputs) -> Findings:
    return sends.send_order(p)


def _realtime_order(p: Partition, inputs: Inputs) -> Findings:
    return realtime.realtime_regression(p)


def _poll_order(p: Partition, inputs: Inputs) -> Findings:
    return polls.poll_order(p)


def _ack_below_min_isr(p: Partition, inputs: Inputs) -> Findings:
    key = (p.topic, p.partition)
    return {"ack_below_min_isr": invariants.ack_below_min_isr(
        p, inputs.isr.get(key), inputs.min_isr, replicas=inputs.replicas.get(key),
        replication_factor=inputs.replication_factor, isr_source=inputs.isr_source.get(key))}


def _visible_end(p: Partition, inputs: Inputs) -> Findings:
    return {"visible_end_regression": invariants.visible_end_regression(p)}


def _failed_writes(p: Partition, inputs: Inputs) -> Findings:
    return failed.failed_visible(p, inputs.foreign)


def _columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    keys = list(rows[0]) if rows else []
    return {k: [r.get(k) for r in rows] for k in keys}


def _run_end(view: RunView) -> float | None:
    ts = [float(r["t"]) for r in (*view.events, *view.timeline) if isinstance(r.get("t"), (int, float))]
    return max(ts) if ts else None


def _controller_split_brain(_: Any, view: RunView) -> Findings:
    rows = quorum.split_brain(view.events, view.timeline, end_t=_run_end(view))
    return {quorum.ANOMALY: (_columns(rows), len(rows))}


def _isr_change_stuck(_: Any, view: RunView) -> Findings:
    rows = isr_changes.stuck(view.events, view.timeline, end_t=_run_end(view))
    return {isr_changes.ANOMALY: (_columns(rows), len(rows))}


def _uncommitted_read(_: Any, view: RunView) -> Findings:
    rows = effects.uncommitted_reads(list(getattr(view, "inconsistent_offsets", None) or []), view.events)
    return {effects.UNCOMMITTED_READ: (_columns(rows), len(rows))}


def _hwm_regression(_: Any, view: RunView) -> Findings:
    rows = effects.hwm_regressions(view.events)
    return {effects.HWM_REGRESSION: (_columns(rows), len(rows))}


def _log_not_recovered(_: Any, view: RunView) -> Findings:
    rows = effects.logs_not_recovered(view.events, view.timeline)
    return {effects.LOG_NOT_RECOVERED: (_columns(rows), len(rows))}


def _log_dir_offline(_: Any, view: RunView) -> Findings:
    rows = effects.logs_offline(view.events)
    return {effects.LOG_DIR_OFFLINE: (_columns(rows), len(rows))}


#: every anomaly family the checker runs, once; each anomaly of evidence.SCHEMAS is filled by
#: exactly one of them (tests/checkers/test_families.py holds this)
FAMILIES: tuple[Family, ...] = (
    Family("lost_writes", ("lost_write", "unseen_at_end"), _lost_writes),
    Family("divergence", ("inconsistent_offset", "duplicate", "offset_mismatch"), _divergence),
    Family("send_order", ("nonmonotonic_send", "send_skip"), _send_order),
    Family("realtime_order", ("realtime_offset_regression",), _realtime_order),
    Family("poll_order", ("nonmonotonic_poll", "poll_skip"), _poll_order),
    Family("ack_below_min_isr", ("ack_below_min_isr",), _ack_below_min_isr),
    Family("visible_end", ("visible_end_regression",), _visible_end),
    Family("failed_writes", ("failed_write_visible", "failed_write_visible_allowed"), _failed_writes,
           partitioned=False),
    Family("controller_quorum", ("controller_split_brain",), _controller_split_brain, run_level=True),
    Family("isr_changes", ("isr_change_stuck",), _isr_change_stuck, run_level=True),
    Family("uncommitted_read", ("uncommitted_read",), _uncommitted_read, run_level=True),
    Family("hwm_regression", ("hwm_regression",), _hwm_regression, run_level=True),
    Family("log_not_recovered", ("log_not_recovered",), _log_not_recovered, run_level=True),
    Family("log_dir_offline", ("log_dir_offline",), _log_dir_offline, run_level=True),
)


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message``, at most :data:`ERROR_CHARS` - never a traceback."""
    msg = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    text = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS - 3] + "..."


def run_families(p: Partition, inputs: Inputs, families: tuple[Family, ...] = FAMILIES
                 ) -> tuple[Findings, list[tuple[str, str]]]:
    """Every family's findings for one partition, and ``(family, one-line error)`` for each family
    that raised (its anomalies then have no findings here). A family answering an anomaly it did
    not declare is a failure too: its tables would be filled behind the list's back."""
    found: Findings = {}
    failures: list[tuple[str, str]] = []
    for fam in families:
        if fam.run_level or (fam.partitioned and p.partition is None):
            continue
        _ask(fam, p, inputs, found, failures)
    return found, failures


def _ask(fam: Family, subject: Any, inputs: Any, found: Findings, failures: list[tuple[str, str]]) -> None:
    """One family's findings into ``found``, or its one-line error into ``failures``."""
    try:
        got = fam.check(subject, inputs)
        extra = sorted(set(got) - set(fam.anomalies))
        if extra:
            raise ValueError(f"answered undeclared anomalies {', '.join(extra)}")
    except Exception as exc:  # noqa: BLE001 - Jepsen's check-safe: one family's bug is its own
        failures.append((fam.name, one_line(exc)))
        return
    found.update(got)


def run_level(view: RunView, families: tuple[Family, ...] = FAMILIES) -> tuple[Findings, list[tuple[str, str]]]:
    """Every run-level family's findings (rows as columns) and ``(family, one-line error)`` for each
    that raised - check-safe as :func:`run_families`, once per run on the driver."""
    found: Findings = {}
    failures: list[tuple[str, str]] = []
    for fam in families:
        if fam.run_level:
            _ask(fam, None, view, found, failures)
    return found, failures
