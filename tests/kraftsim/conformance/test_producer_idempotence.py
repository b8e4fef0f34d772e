"""Idempotent producer sequence checks on the leader (Kafka's producer state).

Kafka keeps, per producer id, the epoch and the metadata of the last
``ProducerStateEntry.NUM_BATCHES_TO_RETAIN`` = 5 batches. ``UnifiedLog.analyzeAndValidateProducerState``
first looks for a duplicate (``ProducerStateEntry.findDuplicateBatch``: same epoch, same first and
last sequence among those 5) and answers it as appended, with the ORIGINAL batch's offsets; then
``ProducerAppendInfo.checkProducerEpoch`` (older epoch → INVALID_PRODUCER_EPOCH) and
``checkSequence`` (same epoch: the first sequence must be last sequence + 1; new epoch: must be 0;
otherwise OUT_OF_ORDER_SEQUENCE_NUMBER). A broker never answers DUPLICATE_SEQUENCE_NUMBER.

Cases from ``storage/src/test/java/.../ProducerStateManagerTest.java`` (testBasicIdempotence,
testProducerSequenceWrapAround, testNoValidationOnFirstEntryWhenLoadingLog-style new producer,
testOldEpochForControlRecord/epoch checks) and ``UnifiedLogTest.testDuplicateAppends``, driven
through a real, unstarted kraftsim broker's produce path (acks=1).
"""
from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from tests.kraftsim.conformance.broker_harness import BrokerSim, batch

PID = 1000


def _produce_all(tmp_path, batches: list[tuple[int, int, int]]) -> list[tuple[ErrorCode, int]]:
    """Produce (epoch, base sequence, record count) batches in order; return each answer."""
    async def go() -> list[tuple[ErrorCode, int]]:
        s = BrokerSim(tmp_path, replicas=[1], isr=[1], min_isr=1)
        out = []
        for epoch, seq, n in batches:
            out.append(await s.produce(batch(n, producer_id=PID, producer_epoch=epoch, base_sequence=seq), acks=1))
        return out
    return asyncio.run(go())


def test_duplicate_within_last_five_answers_original_offset(tmp_path):
    """UnifiedLogTest.testDuplicateAppends / findDuplicateBatch: batches seq 0-1, 2-3, 4-5 at
    offsets 0, 2, 4; a retry of seq 2-3 is answered success with base offset 2 and appends nothing."""
    out = _produce_all(tmp_path, [(0, 0, 2), (0, 2, 2), (0, 4, 2), (0, 2, 2), (0, 6, 1)])
    assert out == [(ErrorCode.none, 0), (ErrorCode.none, 2), (ErrorCode.none, 4), (ErrorCode.none, 2),
                   (ErrorCode.none, 6)]


def test_duplicate_outside_window_is_out_of_order_sequence(tmp_path):
    """Only the last 5 batches are remembered: after seq 0..6 (7 one-record batches) a retry of
    seq 0 is not found by ``findDuplicateBatch`` and fails ``checkSequence`` (0 ≠ 6 + 1) →
    OUT_OF_ORDER_SEQUENCE_NUMBER, never DUPLICATE_SEQUENCE_NUMBER (which librdkafka takes as
    delivered without an offset)."""
    out = _produce_all(tmp_path, [(0, i, 1) for i in range(7)] + [(0, 0, 1)])
    assert out[-1] == (ErrorCode.out_of_order_sequence_number, -1)


def test_sequence_gap_is_out_of_order(tmp_path):
    """ProducerStateManagerTest.testBasicIdempotence (gap case): after seq 0-4, seq 6 →
    OUT_OF_ORDER_SEQUENCE_NUMBER; seq 5 then succeeds at offset 5."""
    out = _produce_all(tmp_path, [(0, 0, 5), (0, 6, 1), (0, 5, 1)])
    assert out == [(ErrorCode.none, 0), (ErrorCode.out_of_order_sequence_number, -1), (ErrorCode.none, 5)]


def test_epoch_rules(tmp_path):
    """``checkProducerEpoch``: an older epoch → INVALID_PRODUCER_EPOCH; ``checkSequence``: a new
    epoch must start at sequence 0 (else OUT_OF_ORDER_SEQUENCE_NUMBER), and the first batch of an
    unknown producer is accepted at any sequence."""
    out = _produce_all(tmp_path, [(3, 7, 1), (4, 5, 1), (4, 0, 1), (3, 8, 1)])
    assert out == [(ErrorCode.none, 0), (ErrorCode.out_of_order_sequence_number, -1), (ErrorCode.none, 1),
                   (ErrorCode.invalid_producer_epoch, -1)]


def test_follower_keeps_producer_state_for_when_it_leads(tmp_path):
    """``UnifiedLog.append`` updates the producer state for replication appends too, and
    ``UnifiedLog.truncateTo`` rebuilds it to the truncation point: follower 2 replicates
    producer batches seq 0, 1, 2 (offsets 0, 1, 2), truncates to 2 on a diverging epoch, then
    becomes leader: a retry of seq 1 is a duplicate answered with offset 1, seq 2 is new and
    lands at offset 2."""
    from kraftsim.storage.records import rewrite_batch

    async def go() -> list[tuple[ErrorCode, int]]:
        s = BrokerSim(tmp_path, node=2, replicas=[1, 2], isr=[1, 2], leader=1, min_isr=1)
        for seq in range(3):
            s.r.log.append_as_follower(rewrite_batch(
                bytearray(batch(1, producer_id=PID, producer_epoch=0, base_sequence=seq)), seq, 5))
        s.r.log.truncate_to(2, reason="diverging_epoch")
        s.partition(leader=2, isr=[2], leader_epoch=6, partition_epoch=2)
        assert s.r.role == "leader"
        out = [await s.produce(batch(1, producer_id=PID, producer_epoch=0, base_sequence=q), acks=1) for q in (1, 2)]
        s.b.fetcher_manager.shutdown()
        return out
    assert asyncio.run(go()) == [(ErrorCode.none, 1), (ErrorCode.none, 2)]
