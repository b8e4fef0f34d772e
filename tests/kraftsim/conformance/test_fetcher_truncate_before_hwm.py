"""A follower with a diverging epoch truncates before it takes the leader's high watermark
(KAFKA-14704), and a follower serves consumer Fetches from v11 (KIP-392).

Kafka:
- core/src/main/scala/kafka/server/AbstractFetcherThread.scala ``processFetchRequest``. Up to
  3.4.0 every partition of a Fetch response is first handed to ``processPartitionData``
  (ReplicaFetcherThread: append, then ``log.maybeUpdateHighWatermark(leader's HWM)``, capped at
  the follower's own LEO), and only then is ``FetchResponse.divergingEpoch`` looked at; the
  truncations run after the whole response (``truncateOnFetchResponse``). A former leader with an
  uncommitted tail therefore holds a HWM above that tail until its truncation runs, and logs
  "Truncating <tp> to offset <o> below high watermark <hw>". From KAFKA-14704 (bd32d98bd7c, first
  3.5.0; 649d5497442, first 3.4.1) a diverging partition is not processed; its HWM comes with
  the next fetch. AbstractFetcherThreadTest ``testTruncateOnFetchDoesNotProcessPartitionData``
  (bd32d98bd7c) is the case ported below: replica log a,b (epoch 0), c (2), d,e,f (4), HWM 1,
  following at epoch 5; leader log a,b,c,g,h (g, h in epoch 5), HWM 4. The first fetch truncates
  to 3 and leaves the HWM at 1.
- KafkaApis.handleFetchRequest gives every consumer Fetch from v11 ClientMetadata, so
  ``FetchParams.fetchOnlyLeader = isFromFollower || (isFromConsumer && clientMetadata.isEmpty)``
  is false (3.4.0 core/.../server/FetchDataInfo.scala) and Partition.getLocalLog serves it from a
  follower at the same leader epoch - or at any epoch when the client sends none (-1,
  Partition.checkCurrentLeaderEpoch) - up to the follower's own HWM. A client without KIP-320
  epochs (librdkafka before 2.1 sent CurrentLeaderEpoch -1 in Fetch v11) whose metadata still names
  the demoted leader therefore reads from it; that is how the uncommitted tail is seen.
"""
from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from kraftsim.broker.fetcher import ReplicaFetcherThread
from kraftsim.storage import records as rec
from kraftsim.wire import build
from tests.kraftsim.conformance.broker_harness import TOPIC_ID, BrokerSim

REPLICA_LOG = [(b"a", 0), (b"b", 0), (b"c", 2), (b"d", 4), (b"e", 4), (b"f", 4)]


def _consumer_fetch(offset: int, version: int = 15, leader_epoch: int = -1):
    body = {"max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic_id": uuid.UUID(TOPIC_ID), "partitions": [{
                "partition": 0, "current_leader_epoch": leader_epoch, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
    if version >= 15:
        body["replica_state"] = {"replica_id": -1, "replica_epoch": -1}
    else:
        body["replica_id"] = -1
    if version >= 11:
        body["rack_id"] = ""
    if version < 13:
        body["topics"] = [{"topic": "t", "partitions": body["topics"][0]["partitions"]}]
    return build(load_request_schema(1, version), body)


def _values(resp) -> list[tuple[int, bytes]]:
    data = bytes(resp.responses[0].partitions[0].records or b"")
    out, pos = [], 0
    for h in rec.iter_batches(data, 0):
        out += [(r.offset, r.value) for r in rec.decode_records(data[h.position:h.position + h.length])]
        pos = h.position + h.length
    return out


def _diverging_response(hwm: int, epoch: int, end_offset: int):
    return build(load_response_schema(1, 15), {
        "throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
        "responses": [{"topic_id": uuid.UUID(TOPIC_ID), "partitions": [{
            "partition_index": 0, "error_code": ErrorCode.none, "high_watermark": hwm,
            "last_stable_offset": hwm, "log_start_offset": 0, "aborted_transactions": None,
            "records": None, "diverging_epoch": {"epoch": epoch, "end_offset": end_offset}}]}]})


def _follower(tmp_path, kafka_version: str) -> BrokerSim:
    s = BrokerSim(tmp_path, node=2, replicas=[1, 2], isr=[1, 2], leader=1, min_isr=1, leader_epoch=5,
                  settings={"metadata.version": "3.4", "kafka.version": kafka_version})
    for off, (value, epoch) in enumerate(REPLICA_LOG):
        s.r.log.append_as_follower(rec.encode_batch([(None, value, [])], base_offset=off, leader_epoch=epoch))
    s.r.hwm = 1
    return s


@pytest.mark.parametrize("kafka_version,hwm_at_read,read,hwm_in_truncation", [
    ("3.4.0", 4, [(1, b"b"), (2, b"c"), (3, b"d")], 4),   # d (offset 3) was never committed: the leader has g there
    ("3.4.1", 1, [], 1),
])
def test_truncate_on_fetch_does_not_process_partition_data(tmp_path, kafka_version, hwm_at_read, read,
                                                           hwm_in_truncation):
    """AbstractFetcherThreadTest.testTruncateOnFetchDoesNotProcessPartitionData: the leader answers
    the replica's Fetch (last fetched epoch 4) with diverging epoch (2, 3) and HWM 4. 3.4.1: one
    truncation, no data processed - LEO 3, HWM still 1. 3.4.0: the HWM is taken first (min(4, LEO
    6) = 4), so a consumer Fetch read between that and the truncation (here: at the fetcher's
    first step after the response's data) gets d at offset 3, an uncommitted record; the
    truncation then finds HWM 4 above its target (Kafka: "Truncating ... below high watermark")."""
    async def go():
        s = _follower(tmp_path, kafka_version)
        assert s.r.log.log_end_offset == 6 and s.r.log.latest_epoch == 4
        fetcher = ReplicaFetcherThread(s.b, 1)
        reads: list = []

        async def consumer() -> None:  # a pre-KIP-320 client (no epoch) reading from this replica
            resp = await s.b.apis.handle_fetch(None, _consumer_fetch(1), None)
            reads.append((s.r.hwm, resp.responses[0].partitions[0].error_code, _values(resp)))
        task = asyncio.ensure_future(consumer())
        backoff = await fetcher.handle_partition_response(s.r, _diverging_response(4, 2, 3).responses[0].partitions[0])
        await task
        s.b.fetcher_manager.shutdown()
        return s, backoff, reads
    s, backoff, reads = asyncio.run(go())
    assert not backoff
    assert (s.r.log.log_end_offset, s.r.log.latest_epoch) == (3, 2)
    assert s.r.hwm == min(hwm_at_read, 3) if kafka_version == "3.4.0" else s.r.hwm == 1
    assert reads == [(hwm_at_read, ErrorCode.none, read)]
    truncations = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()
                   if '"truncation"' in line]
    assert [(e["from_offset"], e["to_offset"], e["reason"], e["high_watermark"]) for e in truncations] == \
        [(6, 3, "diverging_epoch", hwm_in_truncation)]


def test_truncation_waits_for_the_whole_response_on_3_4_0(tmp_path):
    """processFetchRequest truncates only after every partition of the response was processed
    (truncateOnFetchResponse after the loop): with a second answer in the same response, the
    diverging partition's raised HWM is still in place while the other is processed."""
    async def go():
        s = _follower(tmp_path, "3.4.0")
        fetcher = ReplicaFetcherThread(s.b, 1)
        pd = _diverging_response(4, 2, 3).responses[0].partitions[0]
        seen: list[tuple[int, int]] = []
        orig = fetcher.process_partition_data

        def spy(r, data):
            out = orig(r, data)
            seen.append((r.hwm, r.log.log_end_offset))
            return out
        fetcher.process_partition_data = spy  # type: ignore[method-assign]
        await fetcher.process_fetch_response([(s.r, pd), (s.r, pd)])
        s.b.fetcher_manager.shutdown()
        return seen, s.r.log.log_end_offset
    seen, leo = asyncio.run(go())
    assert seen == [(4, 6), (4, 6)] and leo == 3


@pytest.mark.parametrize("version,leader_epoch,code", [
    (15, -1, ErrorCode.none),                   # no epoch: not checked
    (15, 5, ErrorCode.none),                    # the follower's own epoch
    (15, 4, ErrorCode.fenced_leader_epoch),     # older than the replica's
    (15, 6, ErrorCode.unknown_leader_epoch),    # newer than the replica's
    (11, -1, ErrorCode.none),                   # ClientMetadata from v11
    (10, -1, ErrorCode.not_leader_or_follower),  # no ClientMetadata: fetchOnlyLeader
])
def test_consumer_fetch_from_a_follower(tmp_path, version, leader_epoch, code):
    """FetchParams.fetchOnlyLeader and Partition.checkCurrentLeaderEpoch for a consumer asking a
    follower (leader epoch 5, HWM 1): served from Fetch v11, up to the follower's HWM."""
    async def go():
        s = _follower(tmp_path, "3.4.1")
        resp = await s.b.apis.handle_fetch(None, _consumer_fetch(0, version, leader_epoch), None)
        s.b.fetcher_manager.shutdown()
        return resp
    resp = asyncio.run(go())
    p = resp.responses[0].partitions[0]
    assert p.error_code is code
    if code is ErrorCode.none:
        assert _values(resp) == [(0, b"a")] and int(p.high_watermark) == 1
