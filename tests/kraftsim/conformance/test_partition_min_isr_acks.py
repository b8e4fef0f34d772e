"""acks=all and min.insync.replicas on the leader (Kafka's ``Partition.scala``).

- before the append: ``Partition.appendRecordsToLeader`` refuses with NOT_ENOUGH_REPLICAS when
  the committed ISR is smaller than the effective min ISR;
- at completion: ``Partition.checkEnoughReplicasReachOffset`` answers once the HWM reached the
  batch: success only if effective min ISR ≤ |maximal ISR|, else NOT_ENOUGH_REPLICAS_AFTER_APPEND;
  below the HWM the request keeps waiting (DelayedProduce) — it is never failed early;
- ``Partition.effectiveMinIsr`` = min(min.insync.replicas, replication factor) from Kafka 3.7
  (KAFKA-15583 edc7e10a745); before it the raw config counts, whatever the metadata.version.

They drive a real, unstarted kraftsim broker (broker_harness.py) through its produce path.
"""
from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from tests.kraftsim.conformance.broker_harness import BrokerSim, batch


def _shrink_race(tmp_path, mv: str) -> tuple[ErrorCode | None, int]:
    """RF 2, min ISR 2, ISR [1,2]: an acks=all write waits for follower 2; the controller then
    commits ISR [1] (follower stopped). Returns the write's answer (None = still waiting) and the HWM."""
    async def go() -> tuple[ErrorCode | None, int]:
        s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1, 2], min_isr=2, settings={"metadata.version": mv})
        s.fetch(2, 0)
        task = asyncio.ensure_future(s.produce(batch(3), acks=-1, timeout=1.0))
        await asyncio.sleep(0.05)
        assert not task.done()
        s.r.followers[2].last_caught_up -= 31.0  # stopped longer than replica.lag.time.max.ms (30 s)
        s.partition(leader=1, isr=[1], leader_epoch=5, partition_epoch=2)  # the accepted shrink
        await asyncio.sleep(0.05)
        out = task.result()[0] if task.done() else None
        hwm = s.r.hwm
        task.cancel()
        return out, hwm
    return asyncio.run(go())


def test_acks_all_after_shrink_below_min_isr_never_succeeds_3_7(tmp_path):
    """Kafka 3.7+ (KAFKA-15583): once the ISR [1] (< min ISR 2) is committed the HWM does not
    move (``maybeIncrementLeaderHW`` returns while ``isUnderMinIsr``), so a waiting acks=all write
    is not answered success; it waits (and times out, or completes if the ISR grows back).
    The reported fault: RF 2, min ISR 2, ELR off (metadata.version 3.9), follower SIGSTOPped."""
    code, hwm = _shrink_race(tmp_path, "3.9")
    assert code is None, f"a write with one copy was answered {code}"
    assert hwm == 0


def test_acks_all_after_shrink_below_min_isr_not_enough_replicas_after_append(tmp_path):
    """Before 3.7 the HWM jumps to the LEO when ISR [1] is committed, and
    ``Partition.checkEnoughReplicasReachOffset`` answers NOT_ENOUGH_REPLICAS_AFTER_APPEND
    because effective min ISR 2 > |maximal ISR| 1 — never success (metadata.version 3.6)."""
    code, hwm = _shrink_race(tmp_path, "3.6")
    assert hwm == 3
    assert code is ErrorCode.not_enough_replicas_after_append


def test_acks_all_success_when_hwm_passes_with_min_isr(tmp_path):
    """``checkEnoughReplicasReachOffset``: HWM ≥ required offset and |maximal ISR| ≥ min ISR →
    success with the batch's base offset (RF 2, min ISR 2, ISR [1,2], 4 records already
    replicated; the write waits until follower 2 fetches past it)."""
    async def go() -> tuple[ErrorCode, int]:
        s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1, 2], min_isr=2)
        s.append(4)
        s.fetch(2, 4)
        task = asyncio.ensure_future(s.produce(batch(2), acks=-1, timeout=2.0))
        await asyncio.sleep(0.02)
        assert not task.done()
        s.fetch(2, 6)
        return await task
    code, base = asyncio.run(go())
    assert (code, base) == (ErrorCode.none, 4)


def test_effective_min_isr_is_capped_at_replication_factor(tmp_path):
    """``Partition.effectiveMinIsr``: min.insync.replicas larger than the replication factor
    counts as the replication factor. RF 2, min.insync.replicas 3, ISR [1,2]: acks=all is
    accepted (no NOT_ENOUGH_REPLICAS) and succeeds once follower 2 has the batch."""
    async def go() -> tuple[ErrorCode, int]:
        s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1, 2], min_isr=3)
        task = asyncio.ensure_future(s.produce(batch(1), acks=-1, timeout=2.0))
        await asyncio.sleep(0.02)
        if task.done():
            return task.result()
        s.fetch(2, 1)
        return await task
    assert asyncio.run(go()) == (ErrorCode.none, 0)


@pytest.mark.parametrize("settings", [{"metadata.version": "3.6"}, {"metadata.version": "3.4", "kafka.version": "3.6.2"}])
def test_min_isr_above_replication_factor_refuses_acks_all_before_3_7(tmp_path, settings):
    """ProducerFailureHandlingTest.testNotEnoughReplicas (up to 3.6; KAFKA-15583 removed it with
    the cap): min.insync.replicas = RF + 1, acks=all -> NotEnoughReplicasException. Kafka 3.6's
    ``Partition.appendRecordsToLeader`` compares the ISR with the raw config
    (``val minIsr = leaderLog.config.minInSyncReplicas``) - a software rule, so 3.6.2 at
    metadata.version 3.4 refuses too. RF 2, min.insync.replicas 3, ISR [1,2]."""
    async def go() -> tuple[tuple[ErrorCode, int], int]:
        s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1, 2], min_isr=3, settings=settings)
        out = await s.produce(batch(1), acks=-1, timeout=1.0)
        return out, s.r.log.log_end_offset
    out, leo = asyncio.run(go())
    assert out == (ErrorCode.not_enough_replicas, -1) and leo == 0


def test_acks_all_refused_before_append_below_min_isr(tmp_path):
    """``Partition.appendRecordsToLeader``: committed ISR size < effective min ISR and acks=all →
    NOT_ENOUGH_REPLICAS, nothing appended (RF 3, min ISR 2, ISR [1])."""
    async def go() -> tuple[tuple[ErrorCode, int], int]:
        s = BrokerSim(tmp_path, replicas=[1, 2, 3], isr=[1], min_isr=2)
        out = await s.produce(batch(1), acks=-1, timeout=1.0)
        return out, s.r.log.log_end_offset
    out, leo = asyncio.run(go())
    assert out == (ErrorCode.not_enough_replicas, -1) and leo == 0
