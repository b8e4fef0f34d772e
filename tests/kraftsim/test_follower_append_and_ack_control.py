"""kraftsim's ``follower_append`` event and the checker control ``faultline.control.ack_without_replication``.

Real 3-broker clusters, a real confluent-kafka producer (acks=all).

1. ``follower_append``: each follower states its own log end offset as it appends; the events of
   one follower and partition are at least 100 ms apart, their offsets never go backwards (no
   truncation happened), and each ``from_offset`` is at least the previous ``log_end_offset`` -
   the property checkers/replicas.py builds its upper bounds on.
2. The control: with both followers stopped (SIGSTOP, shorter than replica.lag.time.max.ms and
   the session timeout, so the ISR stays [1, 2, 3]), a leader with the control on acknowledges
   acks=all writes only it holds; with the key absent - the default - the same writes wait.
"""
from __future__ import annotations

import signal
import time

from tests.kraftsim.clients import TrackingProducer, create_topic, describe_partitions

LONG = {"replica.lag.time.max.ms": "30000", "broker.session.timeout.ms": "30000"}


def test_followers_state_their_own_log_end_at_most_every_100_ms(kraftsim_cluster):
    c = kraftsim_cluster(brokers=3)
    create_topic(c.bootstrap, "fa", partitions=1, rf=3, min_isr=2)
    prod = TrackingProducer(c.bootstrap)
    for i in range(3000):                          # 30 acknowledged bursts over a few seconds
        prod.send("fa", f"m{i}".encode(), partition=0)
        if i % 100 == 99:
            prod.flush(15)
            time.sleep(0.05)
    assert len(prod.acked) == 3000 and not prod.failed
    leader = describe_partitions(*c.addr(1), "fa")[0].leader_id
    time.sleep(0.5)
    for b in (1, 2, 3):
        ev = [e for e in c.events(f"broker-{b}") if e["event"] == "follower_append" and e["topic"] == "fa"]
        if b == leader:
            assert ev == [], "the leader never follows here"
            continue
        assert len(ev) >= 10, f"broker {b}: {len(ev)} events"
        assert {(e["broker"], e["partition"], e["leader"]) for e in ev} == {(b, 0, leader)}
        assert len({e["broker_epoch"] for e in ev}) == 1 and ev[0]["broker_epoch"] > 0
        for prev, e in zip(ev, ev[1:]):
            assert e["wall"] - prev["wall"] >= 0.099, (prev, e)
            assert e["from_offset"] >= prev["log_end_offset"], (prev, e)
        assert all(e["log_end_offset"] > e["from_offset"] for e in ev)
        assert ev[-1]["log_end_offset"] <= 3000


def _acked_while_followers_stopped(c, topic: str) -> tuple[int, list[int]]:
    create_topic(c.bootstrap, topic, partitions=1, rf=3, min_isr=2)
    leader = describe_partitions(*c.addr(1), topic)[0].leader_id
    prod = TrackingProducer(c.bootstrap)
    prod.send(topic, b"warm", partition=0)
    prod.flush(15)
    followers = [b for b in (1, 2, 3) if b != leader]
    for b in followers:
        c.signal(f"broker-{b}", signal.SIGSTOP)
    try:
        for i in range(20):
            prod.send(topic, f"during{i}".encode(), partition=0)
        prod.flush(3)
        acked = sum(1 for v in prod.acked if v.startswith(b"during"))
        isr = sorted(describe_partitions(*c.addr(leader), topic)[0].isr_nodes)
    finally:
        for b in followers:
            c.signal(f"broker-{b}", signal.SIGCONT)
    prod.flush(30)
    return acked, isr


def test_the_control_acknowledges_what_only_the_leader_holds(kraftsim_cluster):
    c = kraftsim_cluster(brokers=3, settings={**LONG, "faultline.control.ack_without_replication": "true"})
    acked, isr = _acked_while_followers_stopped(c, "ctl")
    assert acked == 20 and isr == [1, 2, 3]
    log = "".join((c.dir / f"broker-{b}" / "process.log").read_text() for b in (1, 2, 3))
    assert "CHECKER CONTROL faultline.control.ack_without_replication=true" in log


def test_without_the_key_acks_all_waits_for_the_followers(kraftsim_cluster):
    c = kraftsim_cluster(brokers=3, settings=LONG)
    acked, isr = _acked_while_followers_stopped(c, "noctl")
    assert acked == 0 and isr == [1, 2, 3]
    assert "CHECKER CONTROL" not in "".join((c.dir / f"broker-{b}" / "process.log").read_text() for b in (1, 2, 3))
