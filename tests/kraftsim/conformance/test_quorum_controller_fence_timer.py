"""A new active controller fences no broker until a heartbeat or a registration reaches it.

Kafka (3.4.0 through trunk): QuorumController checks broker sessions only in its deferred
``maybeFenceReplicas`` event, and only ``rescheduleMaybeFenceStaleBrokers`` schedules that event -
called from ``registerBroker`` and ``processBrokerHeartbeat`` and from the event itself, never
from ``claim``. ``ClusterControlManager.activate`` gives every registered broker a fresh session
(a new BrokerHeartbeatManager), but nothing looks at those sessions until some broker is heard
from; from then on every stale broker is fenced, one write event each (``maybeFenceOneStaleBroker``
reschedules itself while one is left).

Seen on real 3.8.0 (campaigns/controller-disk-wipe.yaml; the controller's lines are kept in
tests/checkers/kafka_logs_real/faultline-3.8.0-controller-disk-wipe-metadata-lost): "Becoming
the active controller", then no fencing for 4.2 s with a 3 s session, then "Replayed
RegisterBrokerRecord establishing a new incarnation of broker 1" and, 1 ms later, "Fencing broker
2 because its session has timed out". kraftsim before this rule fenced every silent broker at the
session timeout after it became active: this test failed there (brokers 1 and 2 fenced by the
first sweep).
"""
from __future__ import annotations

from tests.kraftsim.conformance.controller_harness import (brokers, controller, create, expire_session, heartbeat, part,
                                                             register)


def test_new_active_controller_fences_silent_brokers_only_after_it_hears_from_one(tmp_path):
    c = controller(tmp_path, **{"metadata.version": "3.8"})
    brokers(c, 1, 2, 3)
    create(c, [1, 2, 3])
    c.become_active(c.quorum.epoch)   # QuorumController.claim after a failover: fresh sessions, no timer
    for b in (1, 2):
        expire_session(c, b)           # silent for longer than broker.session.timeout.ms
    c.maybe_fence_stale_brokers()
    assert not any(c.image.brokers[b].fenced for b in (1, 2, 3)), "fenced before any broker was heard from"
    assert part(c).leader == 1

    heartbeat(c, 3)                    # processBrokerHeartbeat -> rescheduleMaybeFenceStaleBrokers
    c.maybe_fence_stale_brokers()
    assert c.image.brokers[1].fenced and c.image.brokers[2].fenced and not c.image.brokers[3].fenced
    assert part(c).leader == 3 and part(c).isr == [3]


def test_a_registration_also_starts_the_fence_timer(tmp_path):
    """registerBroker -> rescheduleMaybeFenceStaleBrokers: a new incarnation's registration is as
    good as a heartbeat (the real 3.8.0 case above: the first contact was a registration)."""
    c = controller(tmp_path, **{"metadata.version": "3.8"})
    brokers(c, 1, 2)
    c.become_active(c.quorum.epoch)
    expire_session(c, 1)
    c.maybe_fence_stale_brokers()
    assert not c.image.brokers[1].fenced
    register(c, 4)
    c.maybe_fence_stale_brokers()
    assert c.image.brokers[1].fenced and not c.image.brokers[2].fenced
