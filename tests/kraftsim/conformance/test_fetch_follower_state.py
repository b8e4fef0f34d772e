"""What a follower's Fetch does to the leader's view of it, and a follower's truncation at its log end.

Kafka:
- ``ReplicaManager.fetchMessages`` reads once with ``readFromPurgatory = false`` and updates the
  follower's fetch state then; a parked (long-polled) Fetch is completed by ``DelayedFetch.onComplete``
  → ``readFromLog(..., readFromPurgatory = true)`` → ``Partition.fetchRecords(updateFetchState =
  false)``: waking up never rewrites the follower's fetch offset or broker epoch (3.4-3.9).
- ``Replica.updateFetchStateOrThrow`` (KAFKA-15221 d46781d4db3, Kafka 3.7.0): a Fetch whose
  ReplicaEpoch is older than the broker's live registration is answered NOT_LEADER_OR_FOLLOWER and
  changes nothing (PartitionTest ``testFenceFollowerFetchWithStaleBrokerEpoch``, ReplicaTest
  ``testFenceStaleUpdates``); 3.5/3.6 take it.
- ``UnifiedLog.truncateTo`` at or past the log end still truncates the leader-epoch cache
  (UnifiedLogTest ``testTruncateToEndOffsetClearsEpochCache``), and the fetcher calls it for every
  diverging epoch (AbstractFetcherThread.truncate); otherwise a broker that became leader without
  appending (an entry (e, LEO)) and then follows epoch e+1 gets a diverging epoch at its LEO forever.
"""
from __future__ import annotations

import asyncio
import uuid

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from kraftsim.broker.fetcher import ReplicaFetcherThread
from kraftsim.storage.log import PartitionLog
from kraftsim.storage.records import encode_batch, rewrite_batch
from kraftsim.wire import build
from tests.kraftsim.conformance.broker_harness import TOPIC_ID, BrokerSim, batch, broker_epoch_of


def _fetch_request(rid: int, epoch: int, offset: int, leader_epoch: int = 5, max_wait_ms: int = 500):
    return build(load_request_schema(1, 15), {
        "replica_state": {"replica_id": rid, "replica_epoch": epoch}, "max_wait": max_wait_ms, "min_bytes": 1,
        "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic_id": uuid.UUID(TOPIC_ID), "partitions": [{
            "partition": 0, "current_leader_epoch": leader_epoch, "fetch_offset": offset, "last_fetched_epoch": 5,
            "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]})


def _error(resp) -> ErrorCode:
    return resp.responses[0].partitions[0].error_code


@pytest.mark.parametrize("kafka_version,fenced", [("3.7.0", True), ("3.6.2", False)])
def test_fence_follower_fetch_with_stale_broker_epoch(tmp_path, kafka_version, fenced):
    """PartitionTest.testFenceFollowerFetchWithStaleBrokerEpoch: ISR [1,2], ten records; follower 2
    fetches at the log end with its epoch; a Fetch with epoch - 1 is NOT_LEADER_OR_FOLLOWER on 3.7
    and leaves LEO, epoch and caught-up time as they were; 3.6.2 (same metadata.version 3.6) takes
    it. A Fetch without ReplicaEpoch (-1) is never fenced (ReplicaTest.testFenceStaleUpdates)."""
    async def go() -> tuple[ErrorCode, tuple, tuple, ErrorCode]:
        s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1, 2],
                      settings={"metadata.version": "3.6", "kafka.version": kafka_version})
        s.append(10)
        good = await s.b.apis.handle_fetch(None, _fetch_request(2, broker_epoch_of(2), 10), None)
        assert _error(good) is ErrorCode.none
        fs = s.r.followers[2]
        before = (fs.leo, fs.broker_epoch, fs.last_caught_up)
        stale = await s.b.apis.handle_fetch(None, _fetch_request(2, broker_epoch_of(2) - 1, 3, max_wait_ms=0), None)
        after = (fs.leo, fs.broker_epoch, fs.last_caught_up)
        none = await s.b.apis.handle_fetch(None, _fetch_request(2, -1, 10, max_wait_ms=0), None)
        return _error(stale), before, after, _error(none)
    stale, before, after, none = asyncio.run(go())
    if fenced:
        assert stale is ErrorCode.not_leader_or_follower and after == before
    else:
        assert stale is ErrorCode.none and after[:2] == (3, broker_epoch_of(2) - 1)
    assert none is ErrorCode.none


def test_parked_fetch_does_not_update_follower_state_when_it_wakes(tmp_path):
    """DelayedFetch reads from purgatory without updating fetch state: follower 2's old incarnation
    parks a Fetch at the log end (offset 10); its wiped new incarnation fetches at 0 meanwhile; a new
    record wakes the parked Fetch, which answers with data but leaves 2's fetch offset at 0.
    (3.6.2: no stale-epoch fencing, so only the purgatory rule keeps the state right.)"""
    async def go() -> tuple[int, int, ErrorCode]:
        s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1], settings={"metadata.version": "3.6", "kafka.version": "3.6.2"})
        s.append(10)
        parked = asyncio.ensure_future(s.b.apis.handle_fetch(None, _fetch_request(2, broker_epoch_of(2), 10), None))
        await asyncio.sleep(0.05)
        assert not parked.done()
        s.r.on_follower_fetch(2, 0, broker_epoch_of(2))   # the new incarnation, empty
        s.append(1)                                        # wakes the parked Fetch
        resp = await parked
        fs = s.r.followers[2]
        return fs.leo, s.r.hwm, _error(resp)
    leo, hwm, err = asyncio.run(go())
    assert err is ErrorCode.none and leo == 0, f"the parked Fetch rewrote the follower's offset to {leo}"


def test_truncate_to_end_offset_clears_epoch_cache(tmp_path):
    """UnifiedLogTest.testTruncateToEndOffsetClearsEpochCache: records of epoch 19 at 27-28; becoming
    leader at epoch 20 (then 24) assigns (epoch, 29); truncating to the log end (29) or past it (30)
    removes that trivial entry and leaves (19, 27)."""
    log = PartitionLog.open(tmp_path, "t", 0, recovery_point=0, clean=True)
    log.truncate_fully_and_start_at(27)
    log.append_as_follower(rewrite_batch(bytearray(encode_batch([(None, b"a", []), (None, b"b", [])])), 27, 19))
    assert log.epoch_entries()[-1] == (19, 27) and log.log_end_offset == 29
    for epoch, target in ((20, 29), (24, 30)):
        log.epoch_cache.assign(epoch, log.log_end_offset)
        assert log.epoch_entries()[-1] == (epoch, 29)
        log.truncate_to(target)
        assert log.epoch_entries()[-1] == (19, 27) and log.log_end_offset == 29
    log.close()


def test_follower_with_a_trivial_epoch_entry_gets_past_a_diverging_epoch_at_its_log_end(tmp_path):
    """Broker 2 led epoch 6 without appending (entry (6, 3) at its LEO 3), then follows 1 at epoch 7;
    1 answers its Fetch (last fetched epoch 6) with diverging epoch (5, 3). The fetcher truncates to
    3 - the log end - which cuts the entry: the next Fetch says epoch 5 and replication goes on."""
    async def go() -> tuple[bool, int, int]:
        s = BrokerSim(tmp_path, node=2, replicas=[1, 2], isr=[1, 2], leader=1, min_isr=1)
        for i in range(3):
            s.r.log.append_as_follower(rewrite_batch(bytearray(batch(1)), i, 5))
        s.r.log.epoch_cache.assign(6, 3)
        s.partition(leader=1, isr=[1, 2], leader_epoch=7, partition_epoch=3)
        assert s.r.log.latest_epoch == 6
        resp = build(load_response_schema(1, 15), {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
                                                   "responses": [{"topic_id": uuid.UUID(TOPIC_ID), "partitions": [{
                                                       "partition_index": 0, "error_code": ErrorCode.none,
                                                       "high_watermark": 3, "last_stable_offset": 3,
                                                       "log_start_offset": 0, "aborted_transactions": None,
                                                       "records": None, "diverging_epoch": {"epoch": 5, "end_offset": 3}}]}]})
        backoff = await ReplicaFetcherThread(s.b, 1).handle_partition_response(s.r, resp.responses[0].partitions[0])
        s.b.fetcher_manager.shutdown()
        return backoff, s.r.log.latest_epoch, s.r.log.log_end_offset
    assert asyncio.run(go()) == (False, 5, 3)
