"""A leader re-elected at a new leader epoch (Kafka's ``Partition.makeLeader`` with
``isNewLeader = false``), as happens on every ISR shrink before metadata.version 3.6
(``PartitionChangeBuilder.triggerLeaderEpochBumpIfNeeded``).

Kafka (3.5.1 core/src/main/scala/kafka/cluster/Partition.scala ``makeLeader``,
server/ReplicaManager.scala ``applyLocalLeadersDelta``): the leader takes the new epoch and its start
offset and resets each follower with ``Replica.resetReplicaState(isNewLeader = false)`` - fetch
offset and broker epoch kept, ``lastFetchLeaderLogEndOffset`` = the LESO, last fetch and caught-up
time = now for ISR members, 0 otherwise. Waiting acks=all requests are NOT completed: makeLeader calls
``tryCompleteDelayedRequests`` only when the HWM moved, and DelayedProduce keeps waiting while the
HWM is below the batch. Only a leader that becomes a follower completes them with
NOT_LEADER_OR_FOLLOWER (ReplicaManagerTest ``testDeltaToFollowerCompletesProduce``).

These drive a real, unstarted kraftsim broker (broker_harness.py); the test plays the controller by
writing the PartitionChangeRecord of an ISR shrink with its leader epoch bump.
"""
from __future__ import annotations

import asyncio
import time

from kio.schema.errors import ErrorCode

from tests.kraftsim.conformance.broker_harness import BrokerSim, batch, broker_epoch_of


def test_isr_shrink_with_epoch_bump_keeps_acks_all_waiting_until_the_hwm_passes(tmp_path):
    """The complement of ReplicaManagerTest.testDeltaToFollowerCompletesProduce, ported with its
    ``topicsChangeDelta(isStartIdLeader = true)`` (a PartitionChangeRecord naming the leader bumps
    the epoch): RF 3, ISR [1,2,3], min ISR 1 at metadata.version 3.4. An acks=all write waits for
    followers 2 and 3; the controller shrinks 2 out at leader epoch 6. The write keeps waiting (the
    HWM did not move: 3 has not fetched it), then succeeds when 3 fetches past it."""
    async def go() -> tuple[bool, tuple[ErrorCode, int], int]:
        s = BrokerSim(tmp_path, replicas=[1, 2, 3], isr=[1, 2, 3], min_isr=1, settings={"metadata.version": "3.4"})
        s.fetch(2, 0)
        s.fetch(3, 0)
        task = asyncio.ensure_future(s.produce(batch(2), acks=-1, timeout=5.0))
        await asyncio.sleep(0.05)
        assert not task.done()
        s.partition(leader=1, isr=[1, 3], leader_epoch=6, partition_epoch=2)
        assert s.r.leader_epoch == 6 and s.r.role == "leader"
        await asyncio.sleep(0.05)
        waiting = not task.done()
        s.fetch(3, 2)
        return waiting, await task, s.r.hwm
    waiting, out, hwm = asyncio.run(go())
    assert waiting, "the re-elected leader answered the waiting acks=all write at once"
    assert out == (ErrorCode.none, 0) and hwm == 2


def test_isr_shrink_to_the_leader_acknowledges_the_waiting_write(tmp_path):
    """RF 2, ISR [1,2] -> [1] with the bump (metadata.version 3.4, min ISR 1): makeLeader's
    ``maybeIncrementLeaderHW`` moves the HWM to the LEO (ISR down to 1) and completes the write
    with success - the write Kafka acknowledges (and a later election of 2 would lose)."""
    async def go() -> tuple[ErrorCode, int]:
        s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1, 2], min_isr=1, settings={"metadata.version": "3.4"})
        s.fetch(2, 0)
        task = asyncio.ensure_future(s.produce(batch(3), acks=-1, timeout=5.0))
        await asyncio.sleep(0.05)
        assert not task.done()
        s.partition(leader=1, isr=[1], leader_epoch=6, partition_epoch=2)
        return await task
    assert asyncio.run(go()) == (ErrorCode.none, 0)


def _reelected(tmp_path, isr_after: list[int]) -> tuple[object, float, float]:
    s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1, 2], min_isr=1, settings={"metadata.version": "3.4"})
    for _ in range(11):
        s.append(1)
    s.fetch(2, 10)
    before = time.monotonic()
    s.partition(leader=1, isr=isr_after, leader_epoch=6, partition_epoch=2)
    return s, before, time.monotonic()


def test_reset_replica_state_when_leader_is_reelected_and_replica_is_in_sync(tmp_path):
    """ReplicaTest.testResetReplicaStateWhenLeaderIsReelectedAndReplicaIsInSync: LEO 10 and the
    broker epoch are kept, lastFetchLeaderLogEndOffset = the leader's end offset (11), last fetch
    and last caught-up time = the reset time."""
    s, before, after = _reelected(tmp_path, [1, 2])
    fs = s.r.followers[2]
    assert (fs.leo, fs.broker_epoch, fs.leader_leo_at_last_fetch) == (10, broker_epoch_of(2), 11)
    assert before <= fs.last_fetch <= after and before <= fs.last_caught_up <= after
    assert s.r.leso == 11 and s.r.log.epoch_entries()[-1] == (6, 11)


def test_reset_replica_state_when_leader_is_reelected_and_replica_is_not_in_sync(tmp_path):
    """ReplicaTest.testResetReplicaStateWhenLeaderIsReelectedAndReplicaIsNotInSync: LEO 10 kept,
    lastFetchLeaderLogEndOffset 11, last fetch and caught-up time 0 (not brought back into the ISR
    before it fetches again)."""
    s, _, _ = _reelected(tmp_path, [1])
    fs = s.r.followers[2]
    assert (fs.leo, fs.broker_epoch, fs.leader_leo_at_last_fetch) == (10, broker_epoch_of(2), 11)
    assert fs.last_fetch == 0.0 and fs.last_caught_up == 0.0


def test_do_not_reset_replica_state_if_leader_epoch_is_not_bumped(tmp_path):
    """PartitionTest.testDoNotResetReplicaStateIfLeaderEpochIsNotBumped (metadata.version 3.6+: an
    ISR shrink without the bump): the follower's state is untouched."""
    s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1, 2], min_isr=1, settings={"metadata.version": "3.9"})
    s.append(1)
    s.fetch(2, 1)
    fs = s.r.followers[2]
    snapshot = (fs.leo, fs.last_fetch, fs.last_caught_up, fs.leader_leo_at_last_fetch)
    s.partition(leader=1, isr=[1], leader_epoch=5, partition_epoch=2)
    assert (fs.leo, fs.last_fetch, fs.last_caught_up, fs.leader_leo_at_last_fetch) == snapshot
    assert s.r.followers[2] is fs and s.r.leader_epoch == 5
