"""Producer state after a truncation is what the log below the truncation point says.

Kafka (3.9.0-rc3 core/src/main/scala/kafka/log/UnifiedLog.scala ``truncateTo``): after cutting the
log it calls ``rebuildProducerState(targetOffset, producerStateManager)`` →
``ProducerStateManager.truncateAndReload``: the latest producer snapshot at or below the target (one
is taken at every segment roll) is loaded and the batches from there to the target replayed. The
producer entry is therefore the one the remaining log gives - up to the last 5 batches and the
epoch - not the in-memory entry minus the truncated batches, which has lost the older batches the
newer ones pushed out of the 5-deep window. The same in every 3.x release.

Cases: UnifiedLogTest ``testProducerIdMapTruncateToWithNoSnapshots`` and ``testProducerIdMapTruncateTo``,
and the case the window makes different: more than 5 batches, truncated below the last 5.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from kio.schema.errors import ErrorCode

from kraftsim.storage.log import PartitionLog
from kraftsim.storage.records import encode_batch, rewrite_batch
from tests.kraftsim.conformance.broker_harness import BrokerSim, batch

PID = 1000


def _log(d: Path, **kw) -> PartitionLog:
    return PartitionLog.open(d, "t", 0, recovery_point=0, clean=True, **kw)


def _append(log: PartitionLog, seq: int, n: int = 1, epoch: int = 0, pid: int = PID) -> None:
    log.append_as_leader(encode_batch([(None, b"v" * 40, [])] * n, producer_id=pid, producer_epoch=epoch,
                                      base_sequence=seq), 0)


def _state(log: PartitionLog) -> dict[int, tuple[int, list]]:
    return {pid: (e.epoch, list(e.batches)) for pid, e in log.producer_state().producers.items()}


def test_producer_id_map_truncate_to_with_no_snapshots(tmp_path):
    """UnifiedLogTest.testProducerIdMapTruncateToWithNoSnapshots: seq 0 and 1, truncateTo(1): the
    producer is still active, its last sequence 0."""
    log = _log(tmp_path)
    log.producer_state()
    _append(log, 0)
    _append(log, 1)
    log.truncate_to(1)
    assert _state(log) == {PID: (0, [(0, 0, 0, 0)])}
    log.close()


def test_truncate_below_the_last_five_batches_keeps_the_producer(tmp_path):
    """Seven batches seq 0..6 at offsets 0..6; truncateTo(2): Kafka rebuilds from the log - the
    producer is active with seq 0 and 1 - where dropping the cut batches from the 5-deep window
    (which held only seq 2..6) would forget the producer."""
    log = _log(tmp_path)
    log.producer_state()
    for seq in range(7):
        _append(log, seq)
    log.truncate_to(2)
    assert _state(log) == {PID: (0, [(0, 0, 0, 0), (1, 1, 1, 1)])}
    log.close()


def test_producer_id_map_truncate_to_across_snapshots(tmp_path):
    """UnifiedLogTest.testProducerIdMapTruncateTo, with the snapshots segment rolls take: small
    segments, two producers (one bumping its epoch), truncations into earlier segments; after each,
    the state equals the one a fresh load of the remaining log builds, and no snapshot lies past
    the new end."""
    log = _log(tmp_path / "a", segment_bytes=1024)
    log.producer_state()
    seqs = {PID: 0, PID + 1: 0}
    for i in range(60):
        pid = PID + (i % 2)
        epoch = 1 if pid == PID + 1 and i >= 30 else 0
        if pid == PID + 1 and i == 30:
            seqs[pid] = 0
        _append(log, seqs[pid], n=2, epoch=epoch, pid=pid)
        seqs[pid] += 2
    assert len(log.segment_base_offsets()) > 4
    for target in (101, 77, 40, 9, 3):
        log.truncate_to(target)
        end = log.log_end_offset
        fresh = _log(tmp_path / f"copy-{target}")
        while fresh.log_end_offset < end:
            fresh.append_as_follower(log.read(fresh.log_end_offset, 1 << 20))
        assert _state(log) == _state(fresh), target
        assert all(o <= end for o in log.producer_state().snapshots)
        fresh.close()
    log.close()


def test_follower_truncated_below_five_batches_answers_a_retry_as_duplicate_when_it_leads(tmp_path):
    """Through the broker: follower 2 replicates seq 0..6 (offsets 0..6), truncates to 2 on a
    diverging epoch, becomes leader. A retry of seq 1 is a duplicate (its original offset 1,
    nothing appended: ProducerStateEntry.findDuplicateBatch); seq 2 is the next write, at offset 2.
    A forgotten producer would append the retry again - a duplicate Kafka de-duplicates."""
    async def go() -> tuple[list[tuple[ErrorCode, int]], int]:
        s = BrokerSim(tmp_path, node=2, replicas=[1, 2], isr=[1, 2], leader=1, min_isr=1)
        s.r.log.producer_state()
        for seq in range(7):
            s.r.log.append_as_follower(rewrite_batch(
                bytearray(batch(1, producer_id=PID, producer_epoch=0, base_sequence=seq)), seq, 5))
        s.r.log.truncate_to(2, reason="diverging_epoch")
        s.partition(leader=2, isr=[2], leader_epoch=6, partition_epoch=2)
        out = [await s.produce(batch(1, producer_id=PID, producer_epoch=0, base_sequence=q), acks=1) for q in (1, 2)]
        s.b.fetcher_manager.shutdown()
        return out, s.r.log.log_end_offset
    out, leo = asyncio.run(go())
    assert out == [(ErrorCode.none, 1), (ErrorCode.none, 2)] and leo == 3
