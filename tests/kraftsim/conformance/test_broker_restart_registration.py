"""A restarted broker acts on partitions only after its new registration is accepted and it has
caught up with the metadata log.

Kafka: ``BrokerServer.startup`` installs the ``BrokerMetadataPublisher`` (which hands partitions
to the ``ReplicaManager``) only after ``BrokerLifecycleManager.initialCatchUpFuture`` completes —
the controller accepted the registration and a heartbeat answered ``isCaughtUp`` (the broker's
metadata offset reached its registration record) — and it enables request processing only
after the controller unfenced it (``setReadyToUnfence`` → ``initialUnfenceFuture``). Before
that a restarted broker neither leads, follows nor truncates on its replayed metadata.
"""
from __future__ import annotations

import time

import pytest

from tests.kraftsim.clients import TrackingProducer, create_topic


@pytest.mark.slow
def test_restarted_leader_waits_for_registration(kraftsim_cluster):
    """Leader 1 of [1,2] is SIGKILLed and restarted at once, while the controller still holds its
    old session (3 s) and refuses the new incarnation (DUPLICATE_BROKER_REGISTRATION): broker 1's
    new incarnation writes no ``became_leader`` (and no truncation) before the controller's
    ``broker_registered`` for it, and acknowledges no write before then (a producer keeps
    writing to it throughout)."""
    c = kraftsim_cluster(brokers=2, settings={"broker.session.timeout.ms": 3000})
    create_topic(c.bootstrap, "r", assignment=[[1, 2]], min_isr=1)
    prod = TrackingProducer(f"{c.addr(1)[0]}:{c.addr(1)[1]}")
    for i in range(100):
        prod.send("r", f"r{i}".encode(), partition=0)
    prod.flush(10)
    assert len(prod.acked) == 100
    old = max(e["broker_epoch"] for e in c.events() if e["event"] == "broker_registered" and e["broker"] == 1)
    c.kill("broker-1")
    t0 = time.time()
    c.start_broker(1)
    reg = None
    i = 100
    while reg is None and time.time() - t0 < 20:
        prod.send("r", f"r{i}".encode(), partition=0)
        i += 1
        prod.p.poll(0.01)
        reg = next((e for e in c.events() if e["event"] == "broker_registered" and e["broker"] == 1
                    and e["broker_epoch"] > old), None)
    assert reg is not None, "the restarted broker was never registered"
    prod.flush(15)
    # once the controller fenced the old incarnation, broker 2 leads and acknowledges (as Kafka's
    # would): only acks before that can have come from broker 1 (a loaded machine can delay the
    # new registration past the fencing)
    took_over = min((e["wall"] for e in c.events("broker-2") if e["event"] == "became_leader" and e["wall"] >= t0),
                    default=reg["wall"])
    early_acks = [v for v, t in prod.ack_time.items() if t0 <= t < min(reg["wall"], took_over)]
    assert not early_acks, f"{len(early_acks)} writes acknowledged by the unregistered incarnation"
    time.sleep(1.0)
    early = [e for e in c.events("broker-1") if e["wall"] >= t0 and e["wall"] < reg["wall"]
             and e["event"] in ("became_leader", "truncation")]
    assert not early, f"acted on replayed metadata before its registration was accepted: {early[:2]}"
