"""Last Replica Standing (docs/seeds.md#seed-003-2-4 note, KIP-966 ELR).

RF 3, min ISR 2, leader A (broker 1), followers B (2) and C (3). Writes are acknowledged while
the ISR has >= 2 members. B, then C, are cut from the controller only (a relay in front of
the controller drops their connections), so the controller fences them one after the other
until the ISR is A alone. A is then SIGKILLed, its segments cut back to the recovery point
(page-cache loss) and restarted.

- ``eligible.leader.replicas.version=0``: A stays in the ISR as the last replica standing, is
  re-elected with its short log, C truncates to A when it returns: acknowledged writes lost.
- ``eligible.leader.replicas.version=1``: C went into the ELR when it left the ISR; A's restart
  is unclean (PreviousBrokerEpoch -1) so A leaves the ELR; C is elected when it returns and no
  acknowledged write is lost (the partition is unavailable meanwhile, and the events say so).
"""
from __future__ import annotations

import time

import pytest

from tests.kraftsim.clients import (ControllerRelay, TrackingProducer, create_topic, cut_to_recovery_point,
                                    describe_partitions, read_all)
from tests.kraftsim.conftest import free_base_port


def _wait(pred, timeout=20.0, what=""):
    end = time.time() + timeout
    while time.time() < end:
        try:
            v = pred()
            if v:
                return v
        except Exception:  # noqa: BLE001 - transient NOT_LEADER etc. while leadership settles
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("elr", [0, 1], ids=["elr0-loses", "elr1-keeps"])
def test_last_replica_standing(kraftsim_cluster, elr):
    base = free_base_port(3)
    relay = ControllerRelay(("127.0.0.1", base))
    try:
        c = kraftsim_cluster(brokers=3, base_port=base, settings={
            "eligible.leader.replicas.version": elr,
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{relay.listen[1]}"})
        create_topic(c.bootstrap, "lrs", assignment=[[1, 2, 3]], min_isr=2)
        a_addr = f"{c.addr(1)[0]}:{c.addr(1)[1]}"
        prod = TrackingProducer(a_addr, **{"message.timeout.ms": 5000})
        for i in range(200):
            prod.send("lrs", f"a{i}".encode(), partition=0)
        prod.flush(10)
        # B cut from the controller: fenced, ISR [1, 3]; writes still acknowledged by A and C.
        t0 = time.time()
        relay.cut("127.0.0.3")
        c.wait_event(lambda e: e["event"] == "isr_changed" and e["topic"] == "lrs" and e["isr"] == [1, 3], after=t0)
        for i in range(200):
            prod.send("lrs", f"b{i}".encode(), partition=0)
        prod.flush(10)
        assert len(prod.acked) == 400, prod.failed
        # C cut too: the ISR is A alone (with ELR 1, C is in the ELR).
        t1 = time.time()
        relay.cut("127.0.0.4")
        ev = c.wait_event(lambda e: e["event"] == "isr_changed" and e["topic"] == "lrs" and e["isr"] == [1], after=t1)
        assert ev["elr"] == ([3] if elr else [])
        if elr:
            # the leader's metadata image follows the controller's log a moment later
            _wait(lambda: list(describe_partitions(*c.addr(1), "lrs")[0].eligible_leader_replicas) == [3],
                  what="ELR [3] in DescribeTopicPartitions")
        # A crashes and loses its page cache.
        c.kill("broker-1")
        c.wait_event(lambda e: e["event"] == "broker_fenced" and e["broker"] == 1, after=t1)
        rp = cut_to_recovery_point(c.data_dir(1), "lrs", 0)
        assert rp < 400
        t2 = time.time()
        c.start_broker(1)
        reg = c.wait_event(lambda e: e["event"] == "broker_registered" and e["broker"] == 1, after=t2)
        assert reg["clean_shutdown"] is False and reg["previous_broker_epoch"] == -1
        rec = c.wait_event(lambda e: e["event"] == "recovery" and e["topic"] == "lrs", name="broker-1", after=t2)
        assert rec["log_end_offset"] == rp
        if elr:
            c.wait_event(lambda e: e["event"] == "isr_changed" and e["topic"] == "lrs" and 1 not in e["elr"]
                         and e["reason"] == "unclean_shutdown", after=t2)
            c.wait_event(lambda e: e["event"] == "broker_unfenced" and e["broker"] == 1, after=t2)
            time.sleep(0.5)
            assert not [e for e in c.events() if e["event"] == "leader_elected" and e["topic"] == "lrs"
                        and e["wall"] >= t2], "A must not lead after an unclean restart"
        else:
            c.wait_event(lambda e: e["event"] == "leader_elected" and e["topic"] == "lrs" and e["leader"] == 1, after=t2)
        # The followers come back.
        t3 = time.time()
        relay.heal("127.0.0.4")
        relay.heal("127.0.0.3")
        if elr:
            el = c.wait_event(lambda e: e["event"] == "leader_elected" and e["topic"] == "lrs", after=t3)
            assert el["leader"] == 3 and el["reason"] == "elr"
            leader = 3
        else:
            c.wait_event(lambda e: e["event"] == "truncation" and e["topic"] == "lrs", name="broker-3", after=t3)
            leader = 1
        host, port = c.addr(leader)
        _wait(lambda: len(describe_partitions(host, port, "lrs")[0].isr_nodes) >= 2, what="ISR >= 2")
        _wait(lambda: read_all(f"{host}:{port}", "lrs", [0], timeout=5), what="readable") if elr else None
        seen = read_all(f"{host}:{port}", "lrs", [0], timeout=10)
        lost = [v for v, a in prod.acked.items() if seen.get(v) != a]
        if elr:
            assert not lost, f"{len(lost)} acknowledged writes lost with ELR"
        else:
            assert len(lost) >= 400 - rp, f"expected the writes past A's recovery point lost, lost {len(lost)}"
    finally:
        relay.close()
