"""The leader-epoch checkpoint written by a truncation is fsynced except on Kafka 3.7.x.

Kafka: storage/src/main/java/org/apache/kafka/storage/internals/epoch/LeaderEpochFileCache.java
``truncateFromEnd`` / ``truncateFromStart`` call ``writeToFile(false)`` on 3.7.0-3.7.x ("We
intentionally don't force flushing change to the device here"), and
server-common/src/main/java/org/apache/kafka/server/common/CheckpointFile.java ``write(entries,
sync = false)`` neither fsyncs the temp file nor flushes the directory after the rename
(``Utils.atomicMoveWithFallback(temp, path, false)``) - KAFKA-15046 d71d0639d9d, first 3.7.0.
KAFKA-16541 7c30eed66c4 (first 3.8.0) makes ``CheckpointFile.write`` fsync always (and runs the
truncation's write on the scheduler, truncateFromEndAsyncFlush); ``assign`` and
``clearAndFlush`` fsync on every version. Kafka's own tests check no crash; the case below
checks what reaches the disk's write barrier: the fsyncs of one truncation's checkpoint write.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from kraftsim.features import parse_kafka_version, software_gate
from kraftsim.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, read_leader_epoch_checkpoint
from kraftsim.storage.manager import LogManager
from kraftsim.storage.records import encode_batch


def _fsyncs(monkeypatch) -> list[str]:
    """Every fsync from here on, as the path of the file or directory it synced."""
    seen: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)
    monkeypatch.setattr(os, "fsync", spy)
    return seen


@pytest.mark.parametrize("kafka_version,synced", [("3.6.2", True), ("3.7.0", False), ("3.7.1", False),
                                                  ("3.8.0", True)])
def test_truncate_from_end_fsyncs_the_checkpoint(tmp_path, monkeypatch, kafka_version, synced):
    unsynced = software_gate("epoch_checkpoint_truncation_unsynced", parse_kafka_version(kafka_version))
    m = LogManager([tmp_path / "d"], node_id=1, cluster_id="c", epoch_checkpoint_sync_on_truncation=not unsynced)
    m.load()
    log = m.get_or_create("t", 0)
    seen = _fsyncs(monkeypatch)
    for epoch in (0, 0, 1, 1):
        log.append_as_leader(encode_batch([(None, b"v", [])], timestamp_ms=1), epoch)
    ckpt = log.dir / LEADER_EPOCH_CHECKPOINT
    assigned = [p for p in seen if Path(p).name.startswith(LEADER_EPOCH_CHECKPOINT) or p == str(log.dir)]
    assert assigned and str(log.dir) in assigned   # assign: fsynced on every version
    del seen[:]
    log.truncate_to(2)                              # LeaderEpochFileCache.truncateFromEnd(2)
    assert read_leader_epoch_checkpoint(ckpt) == [(0, 0)]
    epoch_syncs = [p for p in seen if Path(p).name.startswith(LEADER_EPOCH_CHECKPOINT)]
    dir_syncs = [p for p in seen if p == str(log.dir)]
    assert (bool(epoch_syncs), bool(dir_syncs)) == (synced, synced)
    m.shutdown()
