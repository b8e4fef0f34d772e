"""High watermark rules of a partition leader and follower (Kafka's ``Partition.scala``).

Cases ported from Kafka's ``core/src/test/scala/unit/kafka/cluster/PartitionTest.scala``:
testHighWatermarkAdvanceShouldNotAdvanceWhenUnderMinISR, testMaybeShrinkIsr,
testHighWatermarkIncreasesWithFencedOrShutdownFollower; the follower case from
``ReplicaFetcherThread.processPartitionData`` / ``UnifiedLog.maybeUpdateHighWatermark``.
They drive a real, unstarted kraftsim broker (tests/kraftsim/conformance/broker_harness.py).
"""
from __future__ import annotations

import asyncio

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from kraftsim.broker.fetcher import ReplicaFetcherThread
from kraftsim.storage.records import rewrite_batch
from kraftsim.wire import build
from tests.kraftsim.conformance.broker_harness import BrokerSim, batch


def test_hwm_does_not_advance_under_min_isr(tmp_path):
    """Kafka 3.7+ (KAFKA-15583): ``Partition.maybeIncrementLeaderHW`` returns early while
    ``isUnderMinIsr`` (committed ISR smaller than the effective min ISR), with or without ELR;
    the HWM moves only once the controller has committed an ISR of min ISR members.

    PartitionTest.testHighWatermarkAdvanceShouldNotAdvanceWhenUnderMinISR: min ISR 3,
    replicas [1,2,3], ISR [1,2], 10 records; both followers fetch to the LEO → HWM stays 0 and
    the maximal ISR is 3 (expansion pending); the controller commits ISR [1,2,3] → HWM = LEO.
    metadata.version 3.9 (ELR not in force) so the rule is not tied to ELR.
    """
    s = BrokerSim(tmp_path, replicas=[1, 2, 3], isr=[1, 2], min_isr=3, settings={"metadata.version": "3.9"})
    s.append(10)
    assert s.r.hwm == 0
    s.fetch(2, 10)
    assert s.r.hwm == 0
    s.fetch(3, 10)
    assert s.r.hwm == 0
    assert sorted(s.r.maximal_isr) == [1, 2, 3]
    assert s.pending_isr == [1, 2, 3]
    s.answer(ErrorCode.none, s.alter_response([1, 2, 3], 2))
    assert s.r.hwm == 10


def test_hwm_under_min_isr_gate_off_before_3_7(tmp_path):
    """Before Kafka 3.7 (no KAFKA-15583) the leader's HWM follows the maximal ISR even while the
    committed ISR is below min ISR (``Partition.maybeIncrementLeaderHW`` without the
    ``isUnderMinIsr`` guard). Same inputs as the previous case at metadata.version 3.6: HWM = LEO
    as soon as every maximal-ISR member fetched it."""
    s = BrokerSim(tmp_path, replicas=[1, 2, 3], isr=[1, 2], min_isr=3, settings={"metadata.version": "3.6"})
    s.append(10)
    s.fetch(2, 10)
    assert s.r.hwm == 10


@pytest.mark.parametrize("state,expected", [("unfenced", 10), ("fenced", 20), ("shutdown", 20)])
def test_hwm_waits_for_caught_up_eligible_replica(tmp_path, state, expected):
    """``Partition.maybeIncrementLeaderHW``: the HWM is the smallest LEO among the maximal ISR
    *and* every replica that is caught up (``Replica.isCaughtUp``: at the leader's LEO or caught
    up within replica.lag.time.max.ms) and ISR-eligible (``isReplicaIsrEligible``: unfenced, not
    shutting down, matching broker epoch) — ``shouldWaitForReplicaToJoinIsr``.

    PartitionTest.testHighWatermarkIncreasesWithFencedOrShutdownFollower: replicas [1,2], ISR
    [1,2], 10 records, follower 2 fetches 10 (HWM 10); follower 2 becomes fenced / shutting down /
    stays unfenced; 10 more records; the controller shrinks the ISR to [1]. Unfenced: HWM stays
    10 (2 is caught up and eligible). Fenced or shutting down: HWM 20.
    """
    s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1, 2], min_isr=1)
    s.append(10)
    s.fetch(2, 10)
    assert s.r.hwm == 10
    if state == "fenced":
        s.fence(2)
    elif state == "shutdown":
        s.shutting_down(2)
    s.append(10)
    s.partition(leader=1, isr=[1], leader_epoch=5, partition_epoch=2)
    assert s.r.isr == [1] and s.r.maximal_isr == [1]
    assert s.r.hwm == expected


def test_hwm_shrink_completes_then_advances(tmp_path):
    """PartitionTest.testMaybeShrinkIsr: replicas [1,2,3] all in the ISR, 10 records, follower 2
    at the LEO, follower 3 never fetches; after replica.lag.time.max.ms the leader proposes ISR
    [1,2] (maximal ISR stays [1,2,3], HWM 0 because 3 is unknown); when the controller commits
    it the HWM advances to the LEO (``Partition.handleAlterPartitionUpdate`` →
    ``maybeIncrementLeaderHW``)."""
    s = BrokerSim(tmp_path, replicas=[1, 2, 3], isr=[1, 2, 3], min_isr=1)
    s.append(10)
    s.fetch(2, 10)
    assert s.r.hwm == 0
    s.r.followers[3].last_caught_up -= 31.0  # replica.lag.time.max.ms (30 s here) has passed
    s.r.maybe_shrink_isr()
    assert s.pending_isr == [1, 2]
    assert sorted(s.r.maximal_isr) == [1, 2, 3] and sorted(s.r.isr) == [1, 2, 3]
    assert s.r.hwm == 0
    s.answer(ErrorCode.none, s.alter_response([1, 2], 2))
    assert sorted(s.r.isr) == [1, 2] and sorted(s.r.maximal_isr) == [1, 2]
    assert s.r.hwm == 10


def test_follower_hwm_follows_leader_down(tmp_path):
    """A follower takes the leader's HWM as sent, bounded by its own log start and end offsets,
    so it can go down: ``ReplicaFetcherThread.processPartitionData`` →
    ``UnifiedLog.maybeUpdateHighWatermark`` → ``updateHighWatermark`` (no monotonicity, unlike
    the leader's ``maybeIncrementHighWatermark``). Follower with 10 records and HWM 8 receives a
    Fetch response with high_watermark 5 → HWM 5; then 50 → HWM 10 (its LEO)."""
    async def go() -> tuple[int, int]:
        s = BrokerSim(tmp_path, node=2, replicas=[1, 2], isr=[1, 2], leader=1, min_isr=1)
        r = s.r
        assert r.role == "follower"
        data = bytearray(batch(10))
        r.log.append_as_follower(rewrite_batch(data, 0, 5))
        r.hwm = 8
        cls = load_response_schema(1, 15)

        def pd(hw: int):
            resp = build(cls, {"responses": [{"topic_id": None, "partitions": [{
                "partition_index": 0, "error_code": 0, "high_watermark": hw, "last_stable_offset": hw,
                "log_start_offset": 0, "records": b""}]}]})
            return resp.responses[0].partitions[0]

        fetcher = ReplicaFetcherThread(s.b, leader=1)
        await fetcher.handle_partition_response(r, pd(5))
        down = r.hwm
        await fetcher.handle_partition_response(r, pd(50))
        s.b.fetcher_manager.remove(r)
        s.b.fetcher_manager.shutdown()
        return down, r.hwm

    down, capped = asyncio.run(go())
    assert down == 5
    assert capped == 10
