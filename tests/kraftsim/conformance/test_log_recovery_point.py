"""Recovery point and flush rules of a partition log (Kafka's LogManager / UnifiedLog / LocalLog).

- ``LogManager.truncateTo`` (and ``truncateFullyAndStartAt``) call
  ``checkpointRecoveryOffsetsInDir`` right after the log was truncated, so
  ``recovery-point-offset-checkpoint`` never names an offset the log no longer has;
- ``LocalLog.flush(offset)`` fsyncs every segment of ``segments.values(recoveryPoint, offset)``
  (``LogSegment.flush`` forces the file unconditionally), then the recovery point moves to the
  flushed offset — nothing in Kafka skips a segment because it was loaded rather than written.

Cases in the spirit of LogManagerTest.testRecoveryDirectoryMappingWithTrailingSlash/
testCheckpointRecoveryPoints and LogLoaderTest's truncate-then-recover tests, on kraftsim's own
``LogManager`` and ``PartitionLog`` over real files.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from kraftsim.storage import records as rec
from kraftsim.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, read_offset_checkpoint
from kraftsim.storage.manager import LogManager


def _manager(d: Path, **kw) -> LogManager:
    m = LogManager([d], node_id=1, cluster_id="c", **kw)
    m.load()
    return m


def _fill(log, n: int, per_batch: int = 1) -> None:
    for _ in range(n // per_batch):
        log.append_as_leader(rec.encode_batch([(None, b"x" * 50, [])] * per_batch), 1)


def test_truncation_checkpoints_recovery_point(tmp_path):
    """LogManager.truncateTo → checkpointRecoveryOffsetsInDir. A follower with 70 flushed records
    (recovery point 70 in the checkpoint) truncates to 50 on a diverging epoch: the checkpoint
    file says 50 immediately, before any flush or shutdown."""
    m = _manager(tmp_path)
    log = m.get_or_create("t", 0)
    _fill(log, 70)
    log.flush()
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT)[("t", 0)] == 70
    log.truncate_to(50, reason="diverging_epoch")
    assert log.log_end_offset == 50
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT)[("t", 0)] == 50


def test_full_truncation_checkpoints_recovery_point(tmp_path):
    """LogManager.truncateFullyAndStartAt → checkpointRecoveryOffsetsInDir: a log fully truncated
    and restarted at offset 5 (below its first segment's records) is checkpointed at 5 at once."""
    m = _manager(tmp_path)
    log = m.get_or_create("t", 0)
    _fill(log, 30)
    log.flush()
    log.truncate_fully_and_start_at(5, reason="offset_out_of_range")
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT)[("t", 0)] == 5


@pytest.fixture
def fsynced(monkeypatch):
    """Paths passed to os.fsync (the real fsync still runs)."""
    seen: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        try:
            seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
        real(fd)
    monkeypatch.setattr(os, "fsync", spy)
    return seen


def test_flush_fsyncs_reloaded_segments_from_recovery_point(tmp_path, fsynced):
    """LocalLog.flush fsyncs every segment from the recovery point on, whether or not this process
    wrote to it: 20 records appended without flush, the broker crashes (page cache intact, recovery
    point 0), restarts and recovers them; its next flush must fsync that segment before the
    recovery point moves to 20 — otherwise a power loss would cut records the checkpoint calls durable."""
    m = _manager(tmp_path)
    _fill(m.get_or_create("t", 0), 20)
    m.close_unclean()
    m2 = _manager(tmp_path)
    log = m2.get("t", 0)
    assert log.log_end_offset == 20 and log.recovery_point == 0
    fsynced.clear()
    log.flush()
    seg = str((tmp_path / "t-0" / "00000000000000000000.log").resolve())
    assert seg in fsynced, f"segment not fsynced; fsynced: {fsynced}"
    assert log.recovery_point == 20


def test_flush_covers_segments_from_recovery_point_only(tmp_path, fsynced):
    """``segments.values(recoveryPoint, offset)``: with segments starting at 0, 10 and 20 (each
    rolled by size), a log reloaded after a crash whose recovery point is 10 fsyncs the segments
    at 10 and 20 on flush, not the one at 0 (it is below the recovery point)."""
    m = _manager(tmp_path, segment_bytes=1024)
    log = m.get_or_create("t", 0)
    _fill(log, 30, per_batch=10)
    bases = log.segment_base_offsets()
    assert len(bases) >= 3, bases
    m.close_unclean()
    from kraftsim.storage.checkpoints import write_offset_checkpoint
    write_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT, {("t", 0): bases[1]})
    m2 = _manager(tmp_path, segment_bytes=1024)
    log = m2.get("t", 0)
    assert log.recovery_point == bases[1]
    fsynced.clear()
    log.flush()
    names = {Path(p).name for p in fsynced}
    want = {f"{b:020d}.log" for b in bases[1:]}
    assert want <= names, (want, names)
    assert f"{bases[0]:020d}.log" not in names
