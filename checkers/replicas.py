"""What each replica held, from the replicas' own logs: the evidence ``ack_below_min_isr`` judges by.

Why (docs/anomalies.md §protocol invariants): an acks=all ack promises that, when the producer
was told "ok" for offset O, at least the effective min ISR replicas (the leader included) held
O. The leader's ISR view (``leader_isr``) is what the leader's own ack decision reads, so judging
acks by it checks the leader against itself. A follower's log is written by the follower: its
log end offset (LEO) over time is evidence the leader's bookkeeping does not produce.

kraftsim followers emit ``follower_append`` from their fetch path (kraftsim/broker/fetcher.py,
Kafka's ReplicaFetcherThread.processPartitionData): ``from_offset`` (the LEO just before the
append), ``log_end_offset`` (after), ``broker_epoch`` (the incarnation), at most every 100 ms per
partition, and always for the first append after a quieter spell. Every other way a log end
moves is an event of its own: ``truncation`` (``from_offset`` is the LEO just before) and
``recovery`` at start-up. Between two such samples of one replica the LEO only grows (appends),
so the *first sample after a time T* bounds the LEO at T from above: its ``from_offset``.

A replica **certainly lacked** offset O at time T when:

* the first sample after ``T + CLOCK_SLACK_S`` is a ``follower_append`` or ``truncation`` whose
  ``from_offset`` is at most O (a ``recovery`` first gives no bound: the LEO before a crash is
  not recorded);
* the replica's last ``follower_append`` before ``invoke_t - CLOCK_SLACK_S`` and its first after
  ``T + CLOCK_SLACK_S`` carry the same ``broker_epoch``: one incarnation throughout, so no restart
  (with a page cache lost, a disk wiped) hides between them;
* no ``truncation`` or ``recovery`` of the replica lies between ``invoke_t - CLOCK_SLACK_S`` and
  that first sample (a truncation after the ack could have cut what the replica held).

Anything else - no sample before or after, another incarnation, a shrink in between - and the
replica *may* have held O. So a flagged ack is certainly under-replicated; a replica the events
say nothing about is counted as holding the write.

The slack: the events carry the broker's wall clock, mapped onto the run clock with
``run.json wall_at_t0``; the attribution and the stories allow the same 2 s for that mapping.
Coalescing costs only sensitivity, never soundness: a suppressed append is inside a bound the
next emitted one gives. kraftsim's ``truncation`` states the exact log end it cut from; the
events read from Kafka's own logs (checkers/kafkalog) state only a lower bound there, but they
never carry a ``follower_append``, so their partitions never reach this judgement.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: the kraftsim event a follower writes when it appended fetched records (docs/history-format.md)
FOLLOWER_APPEND = "follower_append"
#: the other events that move a replica's log end offset
SHRINKS = ("truncation", "recovery")
#: cluster wall clocks vs the run clock (checkers/attribution.py and checkers/stories.py allow the same)
CLOCK_SLACK_S = 2.0
#: a from_offset for a sample that bounds nothing (a recovery: the LEO before the crash is unknown)
NO_BOUND = np.iinfo(np.int64).max


@dataclass(frozen=True)
class ReplicaLog:
    """One replica's samples of one partition, on the run clock, each array sorted by time."""
    broker: int
    #: every sample (follower_append, truncation, recovery): time and the LEO bound just before it
    t: np.ndarray
    before: np.ndarray
    #: the follower_append samples alone: time and broker epoch (the incarnation)
    append_t: np.ndarray
    append_epoch: np.ndarray
    #: truncation and recovery times
    shrink_t: np.ndarray

    def lacking(self, offset: np.ndarray, invoke_t: np.ndarray, ack_t: np.ndarray,
                slack: float = CLOCK_SLACK_S) -> np.ndarray:
        """Per ack: did this replica certainly lack ``offset`` when it was acknowledged?"""
        n = len(offset)
        if n == 0 or len(self.append_t) == 0:
            return np.zeros(n, dtype=bool)
        after = ack_t + slack
        since = invoke_t - slack
        i = np.searchsorted(self.t, after, side="right")          # the first sample after the ack
        has = i < len(self.t)
        ic = np.minimum(i, len(self.t) - 1)
        bound, t_s = self.before[ic], self.t[ic]
        j0 = np.searchsorted(self.append_t, since, side="left") - 1  # last append before the invoke
        j1 = np.searchsorted(self.append_t, after, side="right")     # first append after the ack
        m = len(self.append_t)
        same = (j0 >= 0) & (j1 < m)
        same &= self.append_epoch[np.clip(j0, 0, m - 1)] == self.append_epoch[np.clip(j1, 0, m - 1)]
        shrinks = np.searchsorted(self.shrink_t, t_s, side="left") - np.searchsorted(self.shrink_t, since, side="right")
        return has & same & (shrinks <= 0) & (bound <= offset) & ~np.isnan(ack_t) & ~np.isnan(invoke_t)


#: (topic, partition) -> the replicas with samples there
ReplicaLogs = dict[tuple[str, int], list[ReplicaLog]]


def replica_logs(events: list[dict[str, Any]]) -> ReplicaLogs:
    """Every partition's replica samples, from the cluster events (already on the run clock).

    Only partitions with at least one ``follower_append`` get an entry: without one the run has no
    independent evidence there (real Kafka logs no follower LEO at INFO; older kraftsim runs did
    not record it), and the judgement falls back to the leader's ISR view. Small: built on the
    driver and shipped to the partition tasks.
    """
    rows: dict[tuple[str, int], dict[int, list[tuple[float, int, str, int]]]] = {}
    have: set[tuple[str, int]] = set()
    for e in events:
        kind = e.get("event")
        if kind != FOLLOWER_APPEND and kind not in SHRINKS:
            continue
        t, topic, part = e.get("t"), e.get("topic"), e.get("partition")
        broker = _broker_of(e)
        if t is None or topic is None or part is None or broker is None:
            continue
        key = (topic, int(part))
        if kind == FOLLOWER_APPEND:
            if e.get("from_offset") is None or e.get("broker_epoch") is None:
                continue
            before, epoch = int(e["from_offset"]), int(e["broker_epoch"])
            have.add(key)
        elif kind == "truncation" and e.get("from_offset") is not None:
            before, epoch = int(e["from_offset"]), -1
        else:
            before, epoch = int(NO_BOUND), -1
        rows.setdefault(key, {}).setdefault(broker, []).append((float(t), before, kind, epoch))
    out: ReplicaLogs = {}
    for key in sorted(have):
        logs = []
        for broker, samples in sorted(rows[key].items()):
            samples.sort(key=lambda s: s[0])          # stable: one instant keeps the log's order
            apps = [s for s in samples if s[2] == FOLLOWER_APPEND]
            logs.append(ReplicaLog(
                broker,
                np.array([s[0] for s in samples], dtype=np.float64), np.array([s[1] for s in samples], dtype=np.int64),
                np.array([s[0] for s in apps], dtype=np.float64), np.array([s[3] for s in apps], dtype=np.int64),
                np.array([s[0] for s in samples if s[2] != FOLLOWER_APPEND], dtype=np.float64)))
        out[key] = logs
    return out


def _broker_of(e: dict[str, Any]) -> int | None:
    """The replica an event is about: its ``broker`` field, else the node that wrote it (storage's
    ``truncation`` / ``recovery`` carry only the writer's ``node``)."""
    for k in ("broker", "node"):
        v = e.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, str) and v.isdigit():
            return int(v)
    return None
