"""Per-partition idempotent-producer state, kept by the log as Kafka's ``ProducerStateManager`` is.

Why in the log and updated on every append (leader and follower alike): Kafka's
``UnifiedLog.append`` updates the producer state for client and replication appends, so a
follower that becomes leader already knows every producer's epoch and last batches. Rebuilding
it from the whole log at each leadership change (what kraftsim once did) stalls the broker's
event loop for seconds on a long log — Metadata, Fetch and heartbeats all wait. The state is
built once per log (at broker start-up, before registration, as Kafka loads producer state while
loading logs) and then maintained incrementally; a truncation drops the batches it removed.

Per producer id: the epoch and the metadata of the last
``ProducerStateEntry.NUM_BATCHES_TO_RETAIN`` = 5 batches (first/last sequence, first/last offset).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

#: ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NUM_BATCHES_TO_RETAIN = 5


@dataclass
class ProducerEntry:
    epoch: int
    #: (first_seq, last_seq, first_offset, last_offset), oldest first
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def update(self, pid: int, epoch: int, first_seq: int, last_seq: int, first: int, last: int) -> None:
        """ProducerAppendInfo.appendDataBatch: a newer epoch starts a fresh entry."""
        if pid < 0 or first_seq < 0:
            return
        e = self.producers.get(pid)
        if e is None or epoch > e.epoch:
            e = self.producers[pid] = ProducerEntry(epoch)
        e.batches.append((first_seq, last_seq, first, last))

    def truncate(self, offset: int) -> None:
        """Forget batches at or past ``offset`` (UnifiedLog.truncateTo → rebuildProducerState,
        bounded to what is kept in memory: a producer left without batches is forgotten)."""
        for pid in list(self.producers):
            e = self.producers[pid]
            while e.batches and e.batches[-1][2] >= offset:
                e.batches.pop()
            if not e.batches:
                del self.producers[pid]

    def clear(self) -> None:
        self.producers.clear()
