"""The leader-epoch cache of one partition (Kafka's ``LeaderEpochFileCache``).

Why: followers detect log divergence by asking the leader for the end offset of their last
fetched epoch (OffsetsForLeaderEpoch / Fetch ``DivergingEpoch``, docs/seeds.md#seed-003-2-2-2 "last fetch
leader epoch ... required to detect log divergence"). The cache maps each leader epoch to the
first offset written in it and is persisted in ``leader-epoch-checkpoint`` whenever it changes.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Callable

from .checkpoints import read_leader_epoch_checkpoint, write_leader_epoch_checkpoint

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, path: Path, *, log_end_offset: Callable[[], int], sync_truncation: bool = True) -> None:
        self._path = Path(path)
        #: features gate epoch_checkpoint_truncation_unsynced (off: True). Kafka 3.7.0-3.7.x's
        #: LeaderEpochFileCache.truncateFromEnd writes the checkpoint with writeToFile(false) - no
        #: fsync of the file or of its directory (CheckpointFile.write(entries, sync = false)),
        #: introduced by KAFKA-15046 d71d0639d9d, first 3.7.0; 3.8.0 (7c30eed66c4) fsyncs every
        #: write again, truncations from a scheduler thread (truncateFromEndAsyncFlush). kraftsim
        #: writes synchronously either way; assign and clear (clearAndFlush) always fsync.
        self.sync_truncation = sync_truncation
        self._leo = log_end_offset
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in read_leader_epoch_checkpoint(self._path):
            self._assign(epoch, start)

    # --- queries ---------------------------------------------------------------------------

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def end_offset_for(self, requested: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: (largest epoch ≤ requested, start of the next epoch or LEO).

        - requested undefined, or larger than every known epoch while not the latest → (-1, -1);
        - requested is the latest epoch → (requested, LEO);
        - requested below the earliest epoch → (requested, start of the earliest epoch);
        - otherwise (floor epoch, start offset of the first epoch above requested).
        """
        if requested == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._epochs and self._epochs[-1] == requested:
            return requested, self._leo()
        hi = bisect.bisect_right(self._epochs, requested)
        if hi == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if hi == 0:
            return requested, self._starts[0]
        return self._epochs[hi - 1], self._starts[hi]

    # --- updates ---------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, *, persist: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed."""
        changed = self._assign(epoch, start_offset)
        if changed and persist:
            self.flush()
        return changed

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0:
            return False
        if self._epochs and self._epochs[-1] == epoch and self._starts[-1] <= start_offset:
            return False
        # Kafka drops entries that conflict with the new one (epoch ≥ new or start ≥ new start).
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (after a log truncation)."""
        n = bisect.bisect_left(self._starts, end_offset)
        if n < len(self._starts):
            del self._epochs[n:], self._starts[n:]
            self.flush(sync=self.sync_truncation)

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self.flush()

    def flush(self, *, sync: bool = True) -> None:
        write_leader_epoch_checkpoint(self._path, self.entries(), sync=sync)
