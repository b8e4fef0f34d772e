"""One controller decision is one metadata-log batch.

Kafka (metadata/src/main/java/org/apache/kafka/controller/QuorumController.java, 3.5.1-3.9):
every ControllerWriteEvent appends its ``ControllerResult``'s records with one
``raftClient.scheduleAtomicAppend`` / ``scheduleAppend`` (``appendRecords``: an atomic result must
fit ``maxRecordsPerBatch`` = 10000, a non-atomic one is split only past it - QuorumControllerTest
``testAppendRecords`` / ``testAppendRecordsAtomically``). ``ClusterControlManager.registerBroker`` and
``ReplicationControlManager.createTopics`` return ``ControllerResult.atomicOf`` (the clean-up records
and the RegisterBrokerRecord; the TopicRecord and its PartitionRecords), ``alterPartition`` and
``processBrokerHeartbeat`` ``ControllerResult.of`` (one batch under 10000 records), and
``maybeFenceOneStaleBroker`` one broker's fence and partition changes. So no failover can commit
a TopicRecord without its partitions, or half of an AlterPartition.

The cases drive kraftsim's real controller (controller_harness.py) and read its raft log's batches.
"""
from __future__ import annotations

import json
import uuid

from kio.index import load_request_schema

from kraftsim.raft.log import CONTROL_FLAG
from kraftsim.storage import records as rec
from kraftsim.wire import build
from tests.kraftsim.conformance.controller_harness import (PEER, brokers, controller, create, expire_session,
                                                             heartbeat, part, register, run)


def _batches(c, start: int) -> list[list[str]]:
    """The record types of each data batch written at or after ``start``."""
    log = c.quorum.log
    out, pos = [], start
    while pos < log.end_offset:
        data = log.read(pos, 1 << 20)
        for h in rec.iter_batches(data, 0, check_crc=False):
            if not h.attributes & CONTROL_FLAG:
                out.append([json.loads(r.value)["type"] for r in rec.decode_records(data[h.position:h.position + h.length])])
            pos = h.last_offset + 1
    return out


def test_create_topic_is_one_atomic_batch(tmp_path):
    """ReplicationControlManager.createTopics → ControllerResult.atomicOf: the TopicRecord and its
    three PartitionRecords in one batch."""
    c = controller(tmp_path, **{"metadata.version": "4.1"})
    brokers(c, 1, 2, 3)
    start = c.quorum.log.end_offset
    req = build(load_request_schema(19, 7), {"topics": [{"name": "bar", "num_partitions": 3, "replication_factor": 3,
                                                          "assignments": [], "configs": []}]})
    run(c.h_create_topics(None, req, PEER))
    assert _batches(c, start) == [["topic", "partition", "partition", "partition"]]


def test_alter_partition_for_two_partitions_is_one_batch(tmp_path):
    """ReplicationControlManager.alterPartition → ControllerResult.of(records, response): both
    partitions' changes in one batch."""
    c = controller(tmp_path, **{"metadata.version": "4.1"})
    epochs = brokers(c, 1, 2, 3)
    create(c, [1, 2, 3])
    create(c, [1, 2, 3], name="baz")
    start = c.quorum.log.end_offset
    topics = []
    for name in ("foo", "baz"):
        ps = part(c, name)
        topics.append({"topic_id": uuid.UUID(c.image.topics[name].topic_id), "partitions": [{
            "partition_index": 0, "leader_epoch": ps.leader_epoch, "partition_epoch": ps.partition_epoch,
            "leader_recovery_state": 0,
            "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": epochs[b]} for b in (1, 2)]}]})
    req = build(load_request_schema(56, 3), {"broker_id": 1, "broker_epoch": epochs[1], "topics": topics})
    resp = run(c.h_alter_partition(None, req, PEER))
    assert [p.error_code.name for t in resp.topics for p in t.partitions] == ["none", "none"]
    assert _batches(c, start) == [["partition", "partition"]]


def test_reregistration_clean_up_and_registration_are_one_atomic_batch(tmp_path):
    """ClusterControlManager.registerBroker → ControllerResult.atomicOf: the records
    handleBrokerShutdown adds for the old incarnation and the new RegisterBrokerRecord together
    (4.1, ELR on, an unclean restart of the leader of two partitions)."""
    c = controller(tmp_path, **{"metadata.version": "4.1"})
    brokers(c, 1, 2, 3)
    create(c, [1, 2, 3], min_isr=2)
    create(c, [1, 2, 3], min_isr=2, name="baz")
    expire_session(c, 1)
    start = c.quorum.log.end_offset
    epoch = register(c, 1, prev=-1)
    assert _batches(c, start) == [["partition", "partition", "register_broker"]]
    assert epoch == c.quorum.log.end_offset - 1  # the broker epoch: its RegisterBrokerRecord's offset
    assert part(c).leader == 2 and part(c, "baz").leader == 2


def test_fence_on_session_timeout_is_one_batch(tmp_path):
    """maybeFenceOneStaleBroker: the fence and the partition changes it causes in one batch; and a
    controlled shutdown heartbeat (processBrokerHeartbeat) likewise."""
    c = controller(tmp_path, **{"metadata.version": "4.1"})
    brokers(c, 1, 2, 3)
    create(c, [1, 2, 3])
    expire_session(c, 1)
    start = c.quorum.log.end_offset
    c.maybe_fence_stale_brokers()
    assert _batches(c, start) == [["fence_broker", "partition"]]
    start = c.quorum.log.end_offset
    heartbeat(c, 2, shut=True)
    assert _batches(c, start) == [["shutdown_broker", "partition", "fence_broker"]]
