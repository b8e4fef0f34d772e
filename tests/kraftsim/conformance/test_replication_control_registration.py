"""Broker registration, ported from Kafka's ClusterControlManager / BrokerHeartbeatManager.

Kafka (``ClusterControlManager.registerBroker``): a registration with another incarnation id is
refused with DUPLICATE_BROKER_REGISTRATION only while the old incarnation has a valid session
(``BrokerHeartbeatManager.hasValidSession``: not fenced and heard from within the session
timeout). Otherwise the new incarnation gets a new broker epoch and a RegisterBrokerRecord that
is FENCED; no FenceBrokerRecord is written for the old incarnation. What happens to its partitions
depends on the software version:

- up to 3.7 nothing: ``registerBroker`` adds only the RegisterBrokerRecord, so a broker whose old
  session expired before the controller's sweep fenced it keeps its ISR memberships and leaderships;
- 3.8-3.9 (KAFKA-15586 376e9e20dbf): ``brokerUncleanShutdownHandler.addRecordsForShutdown`` →
  ``ReplicationControlManager.handleBrokerUncleanShutdown``, which returns unless ELR is supported
  and otherwise takes every new incarnation out of ISRs and ELRs, clean or not;
- 4.0+ (KAFKA-18106): ``handleBrokerShutdown(brokerId, isCleanShutdown, records)``: with ELR on
  and a restart that cannot prove a clean shutdown (PreviousBrokerEpoch ≠ the stored epoch) it
  leaves ISRs and ELRs and cannot be elected; otherwise it is handled as if fenced (removed from
  ISRs, leaderships moved).

The same incarnation re-registering keeps its epoch and fencing state. A fenced broker is unfenced
by a heartbeat once its metadata offset reaches its registration record (``BrokerHeartbeatManager``
/ ``ReplicationControlManager.handleBrokerUnfenced``).
"""
from __future__ import annotations

import uuid

import pytest

from kraftsim.metadata import NO_LEADER

from tests.kraftsim.conformance.controller_harness import (brokers, controller, create, expire_session, heartbeat,
                                                             part, register, register_raw)


def test_replication_control_registration_duplicate_only_while_session_valid(tmp_path):
    """ClusterControlManagerTest.testReRegistrationAndBrokerEpoch: a new epoch, fenced, no
    FenceBrokerRecord; on 4.0 software the old incarnation's partitions are handled as if it had
    been fenced (handleBrokerShutdown, clean or ELR off)."""
    c = controller(tmp_path, **{"metadata.version": "4.0"})
    epochs = brokers(c, 1, 2, 3)
    create(c, [2, 1, 3])
    assert register_raw(c, 2).error_code.name == "duplicate_broker_registration"
    expire_session(c, 2)                  # session no longer valid, not yet fenced by the sweep
    n_fence = sum(1 for r in c.records if r.get("type") == "fence_broker")
    e2 = register(c, 2)
    assert e2 > epochs[2]
    reg = c.image.brokers[2]
    assert reg.fenced and reg.broker_epoch == e2
    assert sum(1 for r in c.records if r.get("type") == "fence_broker") == n_fence
    ps = part(c)
    assert 2 not in ps.isr and ps.leader == 1        # handled as if fenced: leadership moved
    heartbeat(c, 2)
    assert not c.image.brokers[2].fenced


@pytest.mark.parametrize("mv,kv", [("3.4", None), ("3.9", None), ("3.4", "3.7.1")])
def test_replication_control_reregistration_changes_no_partition_before_3_8(tmp_path, mv, kv):
    """Kafka 3.4-3.7 ``ClusterControlManager.registerBroker`` (3.7.0: no shutdown handler) and 3.9
    with ELR unsupported: a broker re-registering after its session expired but before the sweep
    fenced it keeps its place - still in the ISR, still the leader - while fenced; once unfenced it
    leads with whatever log the new incarnation has."""
    c = controller(tmp_path, **{"metadata.version": mv, **({"kafka.version": kv} if kv else {})})
    brokers(c, 1, 2, 3)
    create(c, [2, 1, 3])
    expire_session(c, 2)
    before = part(c)
    register(c, 2, prev=-1)
    ps = part(c)
    assert ps.partition_epoch == before.partition_epoch and ps.leader_epoch == before.leader_epoch, ps
    assert ps.leader == 2 and 2 in ps.isr and c.image.brokers[2].fenced, ps
    heartbeat(c, 2)
    assert not c.image.brokers[2].fenced and part(c).leader == 2


def test_replication_control_reregistration_3_9_with_elr_leaves_isr_even_when_clean(tmp_path):
    """QuorumControllerTest.testUncleanShutdownBroker (3.9.0-rc3, an ELR metadata.version): 3.8-3.9's
    handleBrokerUncleanShutdown takes every new incarnation out of the ISR, even one whose
    PreviousBrokerEpoch proves a clean shutdown (3.9 does not look at it), and it does not enter the
    ELR although the ISR falls below min ISR 3 (as a fenced-like removal would put it there)."""
    c = controller(tmp_path, **{"metadata.version": "3.9", "eligible.leader.replicas.version": "1"})
    epochs = brokers(c, 1, 2, 3)
    create(c, [1, 2, 3], min_isr=3)
    expire_session(c, 3)
    register(c, 3, prev=epochs[3])
    ps = part(c)
    assert 3 not in ps.isr and 3 not in ps.elr and ps.leader == 1, ps


def test_replication_control_registration_after_fence_and_same_incarnation(tmp_path):
    c = controller(tmp_path, **{"metadata.version": "3.9"})
    brokers(c, 1, 2, 3)
    create(c, [1, 2, 3])
    c.fence(3, "session_timeout")
    inc = uuid.uuid4()
    e3 = register(c, 3, inc=inc)              # old incarnation fenced: accepted at once
    assert c.image.brokers[3].fenced
    assert register(c, 3, inc=inc) == e3      # same incarnation: same epoch, still fenced
    assert c.image.brokers[3].fenced
    heartbeat(c, 3)
    assert not c.image.brokers[3].fenced
    assert register(c, 3, inc=inc) == e3
    assert not c.image.brokers[3].fenced


def test_replication_control_registration_unclean_restart_with_elr_leaves_isr(tmp_path):
    """handleBrokerUncleanShutdown: with ELR on, a new incarnation of a broker whose session expired
    unfenced (it is still in the ISR and leads) leaves the ISR without entering the ELR, and is not
    elected: the next ISR member leads."""
    c = controller(tmp_path, **{"metadata.version": "4.1"})
    brokers(c, 1, 2, 3)
    create(c, [1, 2, 3], min_isr=3)
    expire_session(c, 1)
    register(c, 1, prev=-1)
    ps = part(c)
    assert ps.leader == 2 and ps.isr == [2, 3] and 1 not in ps.elr, ps
    assert ps.leader != NO_LEADER
