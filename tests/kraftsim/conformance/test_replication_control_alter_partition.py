"""AlterPartition validation, ported from Kafka's ReplicationControlManagerTest.

Kafka (``ReplicationControlManager.alterPartition`` / ``validateAlterPartitionData`` /
``ineligibleReplicasForIsr``), in this order: a broker epoch that is not the requester's current
one fails the whole request with STALE_BROKER_EPOCH (``ClusterControlManager.checkBrokerEpoch``);
then per partition: unknown partition; a leader or partition epoch NEWER than the controller's →
NOT_CONTROLLER; an older leader epoch → FENCED_LEADER_EPOCH; a requester that is not the leader →
INVALID_REQUEST; an older partition epoch → INVALID_UPDATE_VERSION; an ISR naming a non-replica or
a replica twice, or without the leader → INVALID_REQUEST; RECOVERING with more than one ISR member,
or RECOVERED → RECOVERING → INVALID_REQUEST; then EVERY member of the proposed ISR (not only the
added ones) must be registered, not in controlled shutdown, not fenced and, when the request
carries a broker epoch other than -1 (AlterPartition v3, KIP-903), at that broker epoch →
INELIGIBLE_REPLICA (OPERATION_NOT_ATTEMPTED for requests before v2). The controller checks the
epochs whenever a request carries them; whether they are sent is the broker's choice (v3 from
metadata.version 3.5-IV1).
"""
from __future__ import annotations

import pytest

from tests.kraftsim.conformance.controller_harness import (alter, brokers, controller, create, expire_session,
                                                             fence_quietly, heartbeat, part, register, set_partition)


def _setup(tmp_path, **settings):
    c = controller(tmp_path, **settings)
    brokers(c, 1, 2, 3)
    create(c, [1, 2, 3])
    return c


def test_replication_control_alter_partition_invalid_requests(tmp_path):
    """ReplicationControlManagerTest.testInvalidAlterPartitionRequests (broker ids +1)."""
    c = _setup(tmp_path)
    ps = part(c)
    assert ps.leader == 1
    # invalid leader: a replica that does not lead
    assert alter(c, 2, [1, 2])[1].name == "invalid_request"
    # stale broker epoch: the whole request fails
    top, err, _ = alter(c, 1, [1, 2], broker_epoch=c.image.brokers[1].broker_epoch - 1)
    assert top.name == "stale_broker_epoch"
    # leader / partition epoch newer than the controller's
    assert alter(c, 1, [1, 2], leader_epoch=500)[1].name == "not_controller"
    assert alter(c, 1, [1, 2], partition_epoch=500)[1].name == "not_controller"
    # a replica that is not in the assignment; an ISR without the leader
    assert alter(c, 1, {1: -1, 2: -1, 4: -1})[1].name == "invalid_request"
    assert alter(c, 1, [2, 3])[1].name == "invalid_request"
    # RECOVERING with two members; RECOVERED -> RECOVERING
    assert alter(c, 1, [1, 2], lrs=1)[1].name == "invalid_request"
    assert alter(c, 1, [1], lrs=1)[1].name == "invalid_request"
    assert part(c).partition_epoch == ps.partition_epoch


def test_replication_control_alter_partition_older_epochs(tmp_path):
    """validateAlterPartitionData: an older leader epoch → FENCED_LEADER_EPOCH, an older partition
    epoch → INVALID_UPDATE_VERSION."""
    c = _setup(tmp_path)
    assert alter(c, 1, [1, 2])[1].name == "none"
    assert alter(c, 1, [1, 2, 3], partition_epoch=part(c).partition_epoch - 1)[1].name == "invalid_update_version"
    c.fence(3, "session_timeout")
    heartbeat(c, 3)
    ps = part(c)
    if ps.leader_epoch > 0:
        assert alter(c, 1, [1, 2], leader_epoch=ps.leader_epoch - 1)[1].name == "fenced_leader_epoch"


def test_replication_control_alter_partition_rejects_fenced_broker(tmp_path):
    """ReplicationControlManagerTest.testAlterPartitionShouldRejectFencedBrokers: a fenced broker
    cannot join the ISR → INELIGIBLE_REPLICA (v2+); once unfenced the same request succeeds."""
    c = _setup(tmp_path)
    c.fence(3, "session_timeout")
    for version in (2, 3):
        assert alter(c, 1, [1, 2, 3], version=version)[1].name == "ineligible_replica"
    heartbeat(c, 3)
    assert alter(c, 1, [1, 2, 3])[1].name == "none"
    assert part(c).isr == [1, 2, 3]


def test_replication_control_alter_partition_rejects_shutting_down_broker(tmp_path):
    """ReplicationControlManagerTest.testAlterPartitionShouldRejectShuttingDownBrokers: a broker in
    controlled shutdown cannot join the ISR → INELIGIBLE_REPLICA."""
    c = _setup(tmp_path)
    assert alter(c, 1, [1, 2])[1].name == "none"
    reg = c.image.brokers[3]              # 3 enters controlled shutdown (BrokerRegistrationChangeRecord)
    c.append([{"type": "shutdown_broker", "broker": 3, "broker_epoch": reg.broker_epoch}])
    assert c.image.brokers[3].shutting_down
    assert alter(c, 1, [1, 2, 3])[1].name == "ineligible_replica"


def test_replication_control_alter_partition_checks_every_isr_member_not_only_added(tmp_path):
    """ReplicationControlManager.ineligibleReplicasForIsr runs over the WHOLE proposed ISR: a member
    that is already in the ISR but fenced (or in controlled shutdown) makes the request
    INELIGIBLE_REPLICA, e.g. a leader changing only the recovery state while a fenced broker is
    still listed."""
    c = _setup(tmp_path)
    fence_quietly(c, 3)               # ISR still {1,2,3}: the registration changed, the ISR not yet
    assert part(c).isr == [1, 2, 3]
    assert alter(c, 1, [1, 2, 3])[1].name == "ineligible_replica"
    assert alter(c, 1, [1, 2])[1].name == "none"


def test_replication_control_alter_partition_checks_existing_members_broker_epoch(tmp_path):
    """KIP-903 (ineligibleReplicasForIsr, "broker epoch mismatch"): the check covers members already
    in the ISR too: {1,2,3} re-sent with a stale epoch for 2 → INELIGIBLE_REPLICA; -1 skips it."""
    c = _setup(tmp_path)
    e2 = c.image.brokers[2].broker_epoch
    e = {b: c.image.brokers[b].broker_epoch for b in (1, 2, 3)}
    assert alter(c, 1, {**e, 2: e2 + 1000})[1].name == "ineligible_replica"
    assert alter(c, 1, {**e, 2: -1})[1].name == "none"


@pytest.mark.parametrize("mv", ["3.4", "3.5", "4.1"])
def test_replication_control_alter_partition_stale_epoch_rejected_when_sent(tmp_path, mv):
    """ReplicationControlManagerTest.testAlterPartitionShouldRejectBrokersWithStaleEpoch: a late
    AlterPartition naming a broker's previous epoch is rejected with INELIGIBLE_REPLICA when the
    request carries epochs (v3) and accepted as v2 (no epochs). The controller does not look at the
    metadata.version for this; a 3.4 broker simply never sends v3."""
    c = _setup(tmp_path, **{"metadata.version": mv})
    assert alter(c, 1, [1, 2], version=2)[1].name == "none"
    old = c.image.brokers[3].broker_epoch
    c.fence(3, "session_timeout")
    register(c, 3)
    heartbeat(c, 3)
    assert c.image.brokers[3].broker_epoch != old
    e = {b: c.image.brokers[b].broker_epoch for b in (1, 2)}
    assert alter(c, 1, {**e, 3: old}, version=3)[1].name == "ineligible_replica"
    assert alter(c, 1, [1, 2, 3], version=2)[1].name == "none"


def test_replication_control_effective_min_isr_is_capped_at_replication_factor(tmp_path):
    """ReplicationControlManagerTest.testEligibleLeaderReplicas_EffectiveMinIsr
    (ReplicationControlManager.getTopicEffectiveMinIsr): min.insync.replicas 5 on an RF 3 topic is
    an effective min ISR of 3 for every partition change."""
    c = controller(tmp_path, **{"metadata.version": "4.1"})
    brokers(c, 1, 2, 3)
    create(c, [1, 2, 3], min_isr=5)
    assert c.effective_min_isr("foo") == 3
    set_partition(c, isr=[1, 2], elr=[3])
    # ISR back at RF = effective min ISR: ELR cleared, and no ELR while at RF
    assert alter(c, 1, [1, 2, 3])[1].name == "none"
    assert part(c).elr == [] and part(c).last_known_elr == []


def test_replication_control_create_topic_isr_is_the_active_replicas(tmp_path):
    """ReplicationControlManager.createTopic / buildPartitionRegistration: with a manual assignment
    the ISR is the active (unfenced, not shutting down) replicas and the leader the first of them;
    when none is active, INVALID_REPLICA_ASSIGNMENT (ReplicationControlManagerTest
    .testCreatePartitionsFailsWithManualAssignmentWithAllFenced)."""
    from kio.index import load_request_schema
    from kraftsim.wire import build

    from tests.kraftsim.conformance.controller_harness import PEER, run
    c = controller(tmp_path)
    brokers(c, 1, 2, 3)
    c.fence(1, "session_timeout")
    create(c, [1, 2, 3])
    ps = part(c)
    assert ps.isr == [2, 3] and ps.leader == 2
    c.fence(2, "session_timeout")
    c.fence(3, "session_timeout")
    req = build(load_request_schema(19, 7), {"topics": [{"name": "bar", "num_partitions": -1, "replication_factor": -1,
                                                         "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}],
                                                         "configs": []}]})
    resp = run(c.h_create_topics(None, req, PEER))
    assert resp.topics[0].error_code.name == "invalid_replica_assignment"
    assert "bar" not in c.image.topics
