"""Kafka brokers never fence themselves (docs/seeds.md#seed-002 is a draft Kafka did not adopt).

Kafka's ``BrokerLifecycleManager`` keeps heartbeating and only ever changes state on the
controller's answers; nothing in ``BrokerServer`` or ``ReplicaManager`` stops leading because
the controller went quiet. A leader cut off from the controller keeps its partitions until new
metadata reaches it; what keeps acknowledged writes safe is that its followers, now following
the new leader, stop fetching from it, so its HWM cannot move (``Partition.maybeIncrementLeaderHW``).
kraftsim models docs/seeds.md#seed-002's self-fencing only behind ``seed002.self.fence.enable`` (default false).
"""
from __future__ import annotations

import time

import pytest

from tests.kraftsim.clients import ControllerRelay, TrackingProducer, create_topic, read_all
from tests.kraftsim.conftest import free_base_port


@pytest.mark.slow
def test_broker_cut_from_controller_does_not_fence_itself(kraftsim_cluster):
    """Leader 1 of [1,2,3] (min ISR 2) is cut from the controller only: the controller fences it
    and elects another leader; broker 1 writes no ``self_fenced`` event even after twice the
    self-fence timeout docs/seeds.md#seed-002 would use, and no acknowledged write is lost."""
    base = free_base_port(3)
    relay = ControllerRelay(("127.0.0.1", base))
    try:
        c = kraftsim_cluster(brokers=3, base_port=base, settings={
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{relay.listen[1]}"})
        create_topic(c.bootstrap, "nf", assignment=[[1, 2, 3]], min_isr=2)
        prod = TrackingProducer(c.bootstrap, **{"message.timeout.ms": 15000})
        for i in range(200):
            prod.send("nf", f"n{i}".encode(), partition=0)
        prod.flush(10)
        t0 = time.time()
        relay.cut("127.0.0.2")
        c.wait_event(lambda e: e["event"] == "broker_fenced" and e["broker"] == 1, after=t0)
        el = c.wait_event(lambda e: e["event"] == "leader_elected" and e["topic"] == "nf", after=t0)
        for i in range(200, 400):
            prod.send("nf", f"n{i}".encode(), partition=0)
        prod.flush(20)
        time.sleep(max(0.0, t0 + 2 * 2 * 1.5 + 0.5 - time.time()))  # 2x docs/seeds.md#seed-002's 2x session timeout
        assert not [e for e in c.events("broker-1") if e["event"] == "self_fenced"]
        host, port = c.addr(el["leader"])
        seen = read_all(f"{host}:{port}", "nf", [0], timeout=10)
        lost = {v: a for v, a in prod.acked.items() if seen.get(v) != a}
        assert not lost, f"{len(lost)} acknowledged writes lost"
    finally:
        relay.close()
