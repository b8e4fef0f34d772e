"""Per-partition idempotent-producer state, kept by the log as Kafka's ``ProducerStateManager`` is.

Why in the log and updated on every append (leader and follower alike): Kafka's
``UnifiedLog.append`` updates the producer state for client and replication appends, so a
follower that becomes leader already knows every producer's epoch and last batches. Rebuilding
it from the whole log at each leadership change (what kraftsim once did) stalls the broker's
event loop for seconds on a long log — Metadata, Fetch and heartbeats all wait. The state is
built once per log (at broker start-up, before registration, as Kafka loads producer state while
loading logs) and then maintained incrementally.

A truncation rebuilds it from the log, as ``UnifiedLog.truncateTo`` → ``rebuildProducerState``
does: the latest snapshot at or below the new end (Kafka takes one at every segment roll,
``ProducerStateManager.takeSnapshot``; kraftsim keeps them in memory), then the batches from
there to the new end replayed. Dropping the truncated batches alone is not the same: a producer
whose last 5 batches were all cut still has older batches in the log, which Kafka's state keeps
(and de-duplicates retries against) and which had been evicted from the 5-deep window.

Per producer id: the epoch and the metadata of the last
``ProducerStateEntry.NUM_BATCHES_TO_RETAIN`` = 5 batches (first/last sequence, first/last offset).
"""
from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable

#: ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NUM_BATCHES_TO_RETAIN = 5

#: (producer id, epoch, first sequence, last sequence, first offset, last offset) of one batch
BatchInfo = tuple[int, int, int, int, int, int]
#: the log's idempotent batches of [start, end), in offset order
BatchSource = Callable[[int, int], Iterable[BatchInfo]]


@dataclass
class ProducerEntry:
    epoch: int
    #: (first_seq, last_seq, first_offset, last_offset), oldest first
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    def copy(self) -> "ProducerEntry":
        return ProducerEntry(self.epoch, deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN))


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        #: offset -> the producers as of that offset (all batches below it), one per segment roll
        self.snapshots: dict[int, dict[int, ProducerEntry]] = {}

    def update(self, pid: int, epoch: int, first_seq: int, last_seq: int, first: int, last: int) -> None:
        """ProducerAppendInfo.appendDataBatch: a newer epoch starts a fresh entry."""
        if pid < 0 or first_seq < 0:
            return
        e = self.producers.get(pid)
        if e is None or epoch > e.epoch:
            e = self.producers[pid] = ProducerEntry(epoch)
        e.batches.append((first_seq, last_seq, first, last))

    def take_snapshot(self, offset: int) -> None:
        """ProducerStateManager.takeSnapshot at a segment roll: the state of every batch below
        ``offset`` (the new segment's base offset)."""
        self.snapshots[offset] = {pid: e.copy() for pid, e in self.producers.items()}

    def delete_snapshots_below(self, offset: int) -> None:
        """Snapshots below the log start offset cannot be replayed from (their segments are gone)."""
        for o in [o for o in self.snapshots if o < offset]:
            del self.snapshots[o]

    def truncate_and_reload(self, log_start: int, end: int, batches_from: BatchSource) -> None:
        """UnifiedLog.rebuildProducerState → ProducerStateManager.truncateAndReload: drop the
        snapshots outside [log start, end], restore the latest one at or below ``end`` (none: an
        empty state at the log start), then replay the log's batches from there up to ``end``."""
        for o in [o for o in self.snapshots if o > end or o < log_start]:
            del self.snapshots[o]
        offsets = sorted(self.snapshots)
        i = bisect_right(offsets, end)
        start = offsets[i - 1] if i else log_start
        self.producers = {pid: e.copy() for pid, e in self.snapshots[start].items()} if i else {}
        for pid, epoch, first_seq, last_seq, first, last in batches_from(start, end):
            self.update(pid, epoch, first_seq, last_seq, first, last)

    def clear(self) -> None:
        self.producers.clear()
        self.snapshots.clear()
