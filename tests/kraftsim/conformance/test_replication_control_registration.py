"""Broker registration, ported from Kafka's ClusterControlManager / BrokerHeartbeatManager.

Kafka (``ClusterControlManager.registerBroker``): a registration with another incarnation id is
refused with DUPLICATE_BROKER_REGISTRATION only while the old incarnation has a valid session
(``BrokerHeartbeatManager.hasValidSession``: not fenced and heard from within the session
timeout). Otherwise the new incarnation gets a new broker epoch and a RegisterBrokerRecord that
is FENCED; no FenceBrokerRecord is written for the old incarnation. Its partitions are cleaned up
first (``addRecordsForShutdown`` → ``ReplicationControlManager.handleBrokerShutdown``, KAFKA-15586
/ KAFKA-18106): with ELR on and a restart that cannot prove a clean shutdown (PreviousBrokerEpoch
≠ the stored epoch), it leaves ISRs and ELRs and cannot be elected; otherwise it is handled as if
fenced (removed from ISRs, leaderships moved). The same incarnation re-registering keeps its epoch
and fencing state. A fenced broker is unfenced by a heartbeat once its metadata offset reaches its
registration record (``BrokerHeartbeatManager`` / ``ReplicationControlManager.handleBrokerUnfenced``).
"""
from __future__ import annotations

import uuid

from kraftsim.metadata import NO_LEADER

from tests.kraftsim.conformance.controller_harness import (brokers, controller, create, expire_session, heartbeat,
                                                             part, register, register_raw)


def test_replication_control_registration_duplicate_only_while_session_valid(tmp_path):
    c = controller(tmp_path, **{"metadata.version": "3.9"})
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
