"""Real confluent-kafka clients against a real 3-broker kraftsim.

1. acks=all, RF=3, min ISR 2, 3 partitions: 10,000 writes read back at the offsets the delivery
   reports gave.
2. SIGKILL the leader of a partition mid-stream: a new leader is elected, the producer carries
   on, and every acknowledged write is read back at its acknowledged offset.
"""
from __future__ import annotations

import signal
import time

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from tests.kraftsim.clients import TrackingProducer, create_topic, describe_partitions, read_all


def test_ten_thousand_acked_writes_read_back_at_their_offsets(kraftsim_cluster):
    c = kraftsim_cluster(brokers=3)
    create_topic(c.bootstrap, "t1", partitions=3, rf=3, min_isr=2)
    prod = TrackingProducer(c.bootstrap)
    for i in range(10_000):
        prod.send("t1", f"m{i}".encode())
    prod.flush(60)
    assert not prod.failed, list(prod.failed.items())[:5]
    assert len(prod.acked) == 10_000
    seen = read_all(c.bootstrap, "t1", [0, 1, 2])
    assert len(seen) == 10_000
    mismatched = {v: (a, seen.get(v)) for v, a in prod.acked.items() if seen.get(v) != a}
    assert not mismatched, list(mismatched.items())[:5]
    # every partition got a share, each with a dense offset range from 0
    for p in range(3):
        offs = sorted(o for (pp, o) in prod.acked.values() if pp == p)
        assert offs and offs == list(range(len(offs)))
    # the admin client sees leaders and a full ISR; DescribeTopicPartitions (api 75) agrees
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    desc = admin.describe_topics(TopicCollection(["t1"]))["t1"].result(10)
    assert sorted(len(p.isr) for p in desc.partitions) == [3, 3, 3]
    parts = describe_partitions(*c.addr(1), "t1")
    assert [sorted(p.isr_nodes) for p in parts] == [[1, 2, 3]] * 3
    assert all(p.leader_epoch >= 0 and p.leader_id in (1, 2, 3) for p in parts)


def test_idempotent_producer_writes_without_duplicates(kraftsim_cluster):
    c = kraftsim_cluster(brokers=3)
    create_topic(c.bootstrap, "ti", partitions=2, rf=3, min_isr=2)
    prod = TrackingProducer(c.bootstrap, idempotent=True)
    for i in range(2000):
        prod.send("ti", f"i{i}".encode())
    prod.flush(30)
    assert len(prod.acked) == 2000 and not prod.failed
    seen = read_all(c.bootstrap, "ti", [0, 1])
    assert seen == prod.acked


def test_sigkill_leader_mid_stream_keeps_every_acked_write(kraftsim_cluster):
    c = kraftsim_cluster(brokers=3)
    create_topic(c.bootstrap, "t2", partitions=3, rf=3, min_isr=2)
    leader = next(p.leader_id for p in describe_partitions(*c.addr(1), "t2") if p.partition_index == 0)
    prod = TrackingProducer(c.bootstrap)
    killed_at = None
    for i in range(3000):
        prod.send("t2", f"k{i}".encode())
        if i % 100 == 0:
            prod.p.poll(0.02)
        if i == 1000:
            prod.p.flush(10)
            killed_at = time.time()
            c.kill(f"broker-{leader}")
    prod.flush(60)
    elected = c.wait_event(lambda e: e["event"] == "leader_elected" and e["topic"] == "t2" and e["partition"] == 0
                           and e["leader"] != leader, after=killed_at)
    assert elected["leader_epoch"] >= 1 and leader not in elected["isr"]
    after_election = [v for v, t in prod.ack_time.items() if t > elected["wall"] and prod.acked[v][0] == 0]
    assert after_election, "the producer did not continue on partition 0 after the election"
    seen = read_all(f"{c.addr(1 if leader != 1 else 2)[0]}:{c.addr(1 if leader != 1 else 2)[1]}", "t2", [0, 1, 2])
    lost = {v: a for v, a in prod.acked.items() if seen.get(v) != a}
    assert not lost, f"{len(lost)} acknowledged writes lost or moved: {list(lost.items())[:5]}"
    assert len(prod.acked) >= 2900


def test_sigterm_is_a_clean_controlled_shutdown_and_launcher_stops_restarted_brokers(kraftsim_cluster):
    import os
    c = kraftsim_cluster(brokers=3)
    create_topic(c.bootstrap, "cl", assignment=[[1, 2, 3]], min_isr=2)
    prod = TrackingProducer(c.bootstrap)
    for i in range(200):
        prod.send("cl", f"c{i}".encode(), partition=0)
    prod.flush(10)
    old_epoch = max(e["broker_epoch"] for e in c.events() if e["event"] == "broker_registered" and e["broker"] == 1)
    t0 = time.time()
    c.signal("broker-1", signal.SIGTERM)
    moved = c.wait_event(lambda e: e["event"] == "leader_elected" and e["topic"] == "cl", after=t0)
    assert moved["reason"] == "controlled_shutdown" and moved["leader"] in (2, 3)
    fenced = c.wait_event(lambda e: e["event"] == "broker_fenced" and e["broker"] == 1, after=t0)
    assert fenced["reason"] == "controlled_shutdown"
    end = time.time() + 10
    while not (c.data_dir(1) / ".kafka_cleanshutdown").exists() and time.time() < end:
        time.sleep(0.1)
    assert (c.data_dir(1) / ".kafka_cleanshutdown").exists()
    t1 = time.time()
    c.start_broker(1)
    reg = c.wait_event(lambda e: e["event"] == "broker_registered" and e["broker"] == 1, after=t1)
    assert reg["clean_shutdown"] is True and reg["previous_broker_epoch"] == old_epoch
    c.wait_event(lambda e: e["event"] == "broker_unfenced" and e["broker"] == 1, after=t1)
    restarted = c.pid("broker-1")
    c.stop()
    assert c.launcher.returncode == 0
    assert not os.path.exists(f"/proc/{restarted}") or "Z" in open(f"/proc/{restarted}/stat").read().rsplit(")", 1)[1].split()[0]
