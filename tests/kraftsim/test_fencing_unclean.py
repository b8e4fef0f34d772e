"""Unclean election (KIP-704) and self-fencing (docs/seeds.md#seed-002).

1. Two topics on one cluster, replicas [1, 2, 3], leader 1, min ISR 2: ``uoff`` with
   ``unclean.leader.election.enable=false`` and ``uon`` with it true (a topic-level override, as
   in Kafka). Broker 3 falls out of the ISR (SIGKILL), writes go on, then 2 and 1 die. When 3
   alone returns, only ``uon`` elects it, marked RECOVERING (1) first and RECOVERED (0) after
   the leader's AlterPartition; ``uoff`` stays leaderless.
2. With docs/seeds.md#seed-002's draft switched on (``seed002.self.fence.enable=true``; Kafka brokers never
   fence themselves): the leader of a partition is cut from the controller only: it fences
   itself, the controller fences it and elects another leader, and every acknowledged write is
   still there.
"""
from __future__ import annotations

import time

from tests.kraftsim.clients import (ControllerRelay, TrackingProducer, create_topic, describe_partitions,
                                    read_all)
from tests.kraftsim.conftest import free_base_port


def test_unclean_election_only_when_enabled_and_recovering_first(kraftsim_cluster):
    c = kraftsim_cluster(brokers=3)
    create_topic(c.bootstrap, "uoff", assignment=[[1, 2, 3]], min_isr=2)
    create_topic(c.bootstrap, "uon", assignment=[[1, 2, 3]], min_isr=2,
                 config={"unclean.leader.election.enable": "true"})
    t0 = time.time()
    c.kill("broker-3")
    for t in ("uoff", "uon"):
        c.wait_event(lambda e, t=t: e["event"] == "isr_changed" and e["topic"] == t and e["isr"] == [1, 2], after=t0)
    prod = TrackingProducer(f"{c.addr(1)[0]}:{c.addr(1)[1]}")
    for i in range(100):
        prod.send("uoff", f"x{i}".encode(), partition=0)
        prod.send("uon", f"y{i}".encode(), partition=0)
    prod.flush(10)
    assert len(prod.acked) == 200
    t1 = time.time()
    c.kill("broker-2")
    c.kill("broker-1")
    for b in (1, 2):
        c.wait_event(lambda e, b=b: e["event"] == "broker_fenced" and e["broker"] == b, after=t1)
    t2 = time.time()
    c.start_broker(3)
    el = c.wait_event(lambda e: e["event"] == "leader_elected" and e["topic"] == "uon", after=t2)
    assert el["leader"] == 3 and el["reason"] == "unclean" and el["leader_recovery_state"] == 1
    assert el["isr"] == [3]
    rec = c.wait_event(lambda e: e["event"] == "isr_changed" and e["topic"] == "uon"
                       and e["leader_recovery_state"] == 0, after=el["wall"])
    assert rec["leader"] == 3 and rec["isr"] == [3] and rec["partition_epoch"] > el["partition_epoch"]
    ap = c.wait_event(lambda e: e["event"] == "alter_partition" and e["topic"] == "uon" and e["accepted"], after=t2)
    assert ap["leader_recovery_state"] == 0
    time.sleep(0.5)
    assert not [e for e in c.events() if e["event"] == "leader_elected" and e["topic"] == "uoff" and e["wall"] >= t2]
    parts = describe_partitions(*c.addr(3), "uoff")
    assert parts[0].leader_id == -1
    # the unclean leader lost what broker 3 never had: the writes after it left the ISR
    seen = read_all(f"{c.addr(3)[0]}:{c.addr(3)[1]}", "uon", [0], timeout=3)
    assert not any(v.startswith(b"y") for v in seen)


def test_broker_cut_from_controller_fences_itself_and_acks_nothing_after(kraftsim_cluster):
    base = free_base_port(3)
    relay = ControllerRelay(("127.0.0.1", base))
    try:
        c = kraftsim_cluster(brokers=3, base_port=base, settings={
            "seed002.self.fence.enable": True,
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{relay.listen[1]}"})
        create_topic(c.bootstrap, "sf", assignment=[[1, 2, 3]], min_isr=2)
        prod = TrackingProducer(c.bootstrap, **{"message.timeout.ms": 20000})
        stop_at = None
        t0 = None
        i = 0
        while True:
            prod.send("sf", f"s{i}".encode(), partition=0)
            i += 1
            prod.p.poll(0.002)
            if i == 300:
                t0 = time.time()
                relay.cut("127.0.0.2")  # broker 1: the leader
            if t0 and stop_at is None and i % 50 == 0 and [e for e in c.events("broker-1") if e["event"] == "self_fenced"]:
                stop_at = i + 300
            if stop_at and i >= stop_at:
                break
            if time.time() - (t0 or time.time()) > 30:
                raise AssertionError("broker 1 never fenced itself")
        prod.flush(30)
        assert not prod.failed, set(prod.failed.values())
        fenced = c.wait_event(lambda e: e["event"] == "broker_fenced" and e["broker"] == 1, after=t0)
        assert fenced["reason"] == "session_timeout"
        el = c.wait_event(lambda e: e["event"] == "leader_elected" and e["topic"] == "sf", after=t0)
        assert el["leader"] in (2, 3)
        selff = c.wait_event(lambda e: e["event"] == "self_fenced", name="broker-1", after=t0)
        assert selff["wall"] > fenced["wall"], "broker side timeout must be longer than the controller's"
        # while cut off, broker 1 still listens — but acknowledged nothing that is not in the log
        host, port = c.addr(el["leader"])
        seen = read_all(f"{host}:{port}", "sf", [0], timeout=10)
        lost = {v: a for v, a in prod.acked.items() if seen.get(v) != a}
        assert not lost, f"{len(lost)} acknowledged writes lost: {list(lost.items())[:3]}"
        assert any(t > el["wall"] for t in prod.ack_time.values()), "producer did not continue on the new leader"
        # heal: broker 1 is unfenced again and rejoins the ISR as a follower
        t1 = time.time()
        relay.heal("127.0.0.2")
        c.wait_event(lambda e: e["event"] == "broker_unfenced" and e["broker"] == 1, after=t1)
    finally:
        relay.close()
