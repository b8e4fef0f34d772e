"""The ISR expansion raced by a restarted follower's Fetches (Kafka 3.5.0-3.6.2), and its fix.

Kafka 3.5.0-3.6.2: ``Partition.updateFollowerFetchState`` updates a follower's Replica state
without ``leaderIsrUpdateLock`` and takes any broker epoch, so while one request handler thread
expands the ISR on a stale Fetch of a restarted follower's old incarnation, another can replace
the state with the new incarnation's Fetch. The fix's commit (KAFKA-15221 d46781d4db3, first
3.7.0) tells the race: (2) the first check passes - caught up, broker epoch as the metadata cache
has it; (3) the cache learns the new registration; (4a) caught up? yes, (4b) the new incarnation's
Fetch lands, (4c) epoch match? yes, new = new; (5) AlterPartition goes out with the NEW epoch -
the controller's KIP-903 check cannot tell, and the empty incarnation joins the ISR. 3.7.0 takes
the state under the lock (one state for the checks and the epochs sent) and fences a Fetch whose
epoch is older than the live registration (``Replica.updateFetchStateOrThrow``): the stale Fetch's
expansion goes out with the OLD epoch, which the controller answers INELIGIBLE_REPLICA
(ReplicationControlManager.ineligibleReplicasForIsr, tests/kraftsim/conformance/
test_replication_control_alter_partition.py ``..._stale_epoch_rejected_when_sent``).

Kafka's PartitionTest has no case for the interleaving itself (it is a thread race; the fix's
tests are ``testFenceFollowerFetchWithStaleBrokerEpoch``, ported in test_fetch_follower_state.py).
The cases here deliver the three events of steps 2-4 to kraftsim's real broker (broker_harness.py)
in the order the commit gives, on 3.6.2 and 3.7.0 at metadata.version 3.6 (KIP-903 epochs on).
"""
from __future__ import annotations

import asyncio
import uuid

import pytest
from kio.index import load_request_schema

from kraftsim.broker.partition import UNSYNCHRONISED_WINDOW_S
from kraftsim.wire import build
from tests.kraftsim.conformance.broker_harness import TOPIC_ID, BrokerSim, broker_epoch_of

OLD = broker_epoch_of(2)
NEW = OLD + 50   # the restarted follower's registration (a later metadata offset)


def _fetch(epoch: int, offset: int):
    return build(load_request_schema(1, 15), {
        "replica_state": {"replica_id": 2, "replica_epoch": epoch}, "max_wait": 0, "min_bytes": 1,
        "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic_id": uuid.UUID(TOPIC_ID), "partitions": [{
            "partition": 0, "current_leader_epoch": 5, "fetch_offset": offset, "last_fetched_epoch": 5,
            "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]})


async def _race(tmp_path, kafka_version: str, new_fetch: bool) -> tuple[list[tuple[int, int]] | None, int]:
    """Leader 1 with ISR [1] and ten records (HWM 10); follower 2's old incarnation's stale Fetch at
    offset 10 (caught up), then the image learns 2's new registration (fenced, then unfenced), then
    - if ``new_fetch`` - the new incarnation's first Fetch at offset 0. Returns the broker epochs of
    the proposed ISR (None: no expansion) and follower 2's LEO in the leader's view."""
    s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1], settings={"metadata.version": "3.6", "kafka.version": kafka_version})
    s.append(10)
    assert s.r.hwm == 10
    await s.b.apis.handle_fetch(None, _fetch(OLD, 10), None)                              # (2)
    s.record({"type": "register_broker", "broker": 2, "broker_epoch": NEW, "incarnation_id": "inc-2b",
              "host": "127.0.0.3", "port": 1})                                             # (3)
    s.record({"type": "unfence_broker", "broker": 2, "broker_epoch": NEW})
    if new_fetch:
        await s.b.apis.handle_fetch(None, _fetch(NEW, 0), None)                           # (4b)
    await asyncio.sleep(UNSYNCHRONISED_WINDOW_S + 0.05)
    item = s.r.pending
    return (None if item is None else list(item.isr_with_epochs)), s.r.followers[2].leo


def test_3_6_sends_the_new_incarnations_epoch_for_a_stale_catch_up(tmp_path):
    """3.6.2: the expansion decided on the stale Fetch goes out with broker 2's NEW epoch, while the
    leader's own view of broker 2 is offset 0: the controller would accept an empty replica."""
    isr, leo = asyncio.run(_race(tmp_path, "3.6.2", new_fetch=True))
    assert isr == [(1, broker_epoch_of(1)), (2, NEW)]
    assert leo == 0


def test_3_7_sends_the_epoch_the_checks_read(tmp_path):
    """3.7.0: the stale Fetch's expansion is decided and its epochs taken on one state: broker 2's
    OLD epoch, which the controller refuses (INELIGIBLE_REPLICA); the new incarnation's Fetch at
    offset 0 adds nothing."""
    isr, leo = asyncio.run(_race(tmp_path, "3.7.0", new_fetch=True))
    assert isr == [(1, broker_epoch_of(1)), (2, OLD)]
    assert leo == 0


def test_3_6_without_the_concurrent_fetch_adds_nothing(tmp_path):
    """3.6.2 without step 4b: the state is still the stale one, whose epoch no longer matches the
    image at the second check - no expansion (the race needs both incarnations' Fetches at once)."""
    isr, leo = asyncio.run(_race(tmp_path / "a", "3.6.2", new_fetch=False))
    assert isr is None and leo == 10


@pytest.mark.parametrize("kafka_version", ["3.6.2", "3.7.0"])
def test_an_ordinary_catch_up_expands_with_the_followers_epoch(tmp_path, kafka_version):
    """No restart: a follower that catches up joins the ISR with its one epoch on both versions
    (3.6 after the window)."""
    async def go() -> list[tuple[int, int]] | None:
        s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1], settings={"metadata.version": "3.6",
                                                                    "kafka.version": kafka_version})
        s.append(10)
        await s.b.apis.handle_fetch(None, _fetch(OLD, 10), None)
        await asyncio.sleep(UNSYNCHRONISED_WINDOW_S + 0.05)
        return None if s.r.pending is None else list(s.r.pending.isr_with_epochs)
    assert asyncio.run(go()) == [(1, broker_epoch_of(1)), (2, OLD)]
