"""The KIP-903 race (docs/seeds.md#seed-000, "Proposed Design" steps 1-6), scripted.

Two replicas A (broker 1, leader) and B (broker 2), min ISR 1. B is out of the ISR; A's
AlterPartition adding B is held in a relay in front of the controller (step 1); B hard-fails
(step 2) and is fenced (step 3); B comes back with a wiped disk (step 4) and registers with a
new broker epoch (step 5); then the held AlterPartition is released (step 6).

B's fetches to A are dropped by a tagged iptables rule while B is wiped, so B cannot catch up
by luck, and A is SIGSTOPped while the controller decides, so A's own ISR shrink cannot
undo the decision: the outcome depends only on the controller's AlterPartition validation.

- ``kip903.enabled=false`` (no replica epochs, as below metadata.version 3.5-IV1): the
  controller puts empty B in the ISR; A dies; B is elected and the acknowledged writes are gone.
- ``kip903.enabled=true``: AlterPartition v3 carries B's old broker epoch, the controller answers
  INELIGIBLE_REPLICA (107), B is never elected, and after A returns every acked write is there.

The cluster runs metadata.version 3.6: from 3.7-IV2 B's wiped disk is a new log directory, and
B's directory assignment moves the partition epoch before the held request arrives, which the
controller then answers INVALID_UPDATE_VERSION whatever KIP-903 says (KIP-858, Kafka 4.1.0 did so:
tests/kraftsim/conformance/test_directory_assignment.py). Here only the KIP-903 check decides.
"""
from __future__ import annotations

import shutil
import signal
import time

import pytest

from tests.kraftsim.clients import (ControllerRelay, IptablesDrop, TrackingProducer, create_topic,
                                    describe_partitions, read_all)
from tests.kraftsim.conftest import free_base_port

N = 300


@pytest.mark.parametrize("kip903", [False, True], ids=["kip903-off-loses", "kip903-on-keeps"])
def test_kip903_race(kraftsim_cluster, kip903):
    base = free_base_port(2)
    relay = ControllerRelay(("127.0.0.1", base))
    drop = None
    try:
        c = kraftsim_cluster(brokers=2, base_port=base, settings={
            "metadata.version": "3.6", "kip903.enabled": kip903, "broker.session.timeout.ms": 3000,
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{relay.listen[1]}"})
        create_topic(c.bootstrap, "k", assignment=[[1, 2]], min_isr=1)
        # B out of the ISR: kill it and let the controller fence it.
        t0 = time.time()
        c.kill("broker-2")
        c.wait_event(lambda e: e["event"] == "isr_changed" and e["topic"] == "k" and e["isr"] == [1], after=t0)
        prod = TrackingProducer(f"{c.addr(1)[0]}:{c.addr(1)[1]}")
        for i in range(N):
            prod.send("k", f"w{i}".encode(), partition=0)
        prod.flush(20)
        assert len(prod.acked) == N, prod.failed
        # Step 1: B restarts and catches up; A's AlterPartition adding B is held.
        relay.hold_alter_partition()
        t_restart = time.time()
        c.start_broker(2)
        end = time.time() + 20
        while relay.held_count == 0 and time.time() < end:
            time.sleep(0.05)
        assert relay.held_count >= 1, "A never proposed B for the ISR"
        # B must be unfenced before its crash, or the controller has nothing to fence (step 3);
        # on a loaded machine the unfencing can come after A's proposal.
        c.wait_event(lambda e: e["event"] == "broker_unfenced" and e["broker"] == 2, after=t_restart)
        epoch_old = max(e["broker_epoch"] for e in c.events() if e["event"] == "broker_registered" and e["broker"] == 2)
        # Steps 2-3: B hard-fails and is fenced.
        t1 = time.time()
        c.kill("broker-2")
        c.wait_event(lambda e: e["event"] == "broker_fenced" and e["broker"] == 2, after=t1)
        # Step 4: B's disk is replaced; B may not fetch from A (so it stays empty).
        shutil.rmtree(c.data_dir(2))
        drop = IptablesDrop("127.0.0.3", "127.0.0.2", c.addr(1)[1])
        t2 = time.time()
        c.start_broker(2)
        # Step 5: the controller sees B's new registration first.
        reg = c.wait_event(lambda e: e["event"] == "broker_unfenced" and e["broker"] == 2, after=t2)
        assert reg["broker_epoch"] > epoch_old
        # Step 6: the stale AlterPartition arrives (A frozen so it cannot shrink the ISR meanwhile).
        c.signal("broker-1", signal.SIGSTOP)
        t3 = time.time()
        relay.release()
        ap = c.wait_event(lambda e: e["event"] == "alter_partition" and e["topic"] == "k" and 2 in e["new_isr"], after=t3)
        c.kill("broker-1")
        if not kip903:
            # Kafka 3.5+ software sends AlterPartition v3 whatever the protocol gate; without
            # KIP-903's Fetch v15 epochs B's epoch in it is -1, which the controller does not check
            assert ap["accepted"] is True and ap["version"] == 3 and "2" not in ap["broker_epochs"]
            el = c.wait_event(lambda e: e["event"] == "leader_elected" and e["topic"] == "k" and e["leader"] == 2, after=t3)
            assert el["isr"] == [2]
            # the winner's own side of the election (docs/seeds.md#seed-004): it took over with an empty log
            took = c.wait_event(lambda e: e["event"] == "became_leader" and e["topic"] == "k"
                                and e["leader_epoch"] == el["leader_epoch"], name="broker-2", after=t3)
            assert (took["broker"], took["log_end_offset"], took["local_log_size_bytes"],
                    took["local_log_start_timestamp"]) == (2, 0, 0, -1), took
            drop.remove()
            seen = read_all(f"{c.addr(2)[0]}:{c.addr(2)[1]}", "k", [0], timeout=5)
            lost = [v for v in prod.acked if v not in seen]
            assert len(lost) == N, f"expected all {N} acked writes lost, lost {len(lost)}"
        else:
            assert ap["accepted"] is False and ap["error_code"] == 107 and ap["version"] == 3
            assert ap["broker_epochs"]["2"] == epoch_old
            t4 = time.time()
            c.wait_event(lambda e: e["event"] == "broker_fenced" and e["broker"] == 1, after=t3)
            time.sleep(1.0)
            assert not [e for e in c.events() if e["event"] == "leader_elected" and e["topic"] == "k"
                        and e["leader"] == 2 and e["wall"] >= t3], "empty B must never lead"
            drop.remove()
            c.start_broker(1)
            back = c.wait_event(lambda e: e["event"] == "leader_elected" and e["topic"] == "k" and e["leader"] == 1,
                                after=t4)
            took = c.wait_event(lambda e: e["event"] == "became_leader" and e["topic"] == "k"
                                and e["leader_epoch"] == back["leader_epoch"], name="broker-1", after=t4)
            # A kept every acknowledged write: its log reaches past them all, and has a start time
            assert took["log_end_offset"] >= N and took["local_log_size_bytes"] > 0, took
            assert took["local_log_start_timestamp"] > 0, took
            end = time.time() + 20
            while time.time() < end:
                try:
                    parts = describe_partitions(*c.addr(1), "k")
                    if parts and parts[0].leader_id == 1:
                        break
                except OSError:
                    pass
                time.sleep(0.2)
            seen = read_all(f"{c.addr(1)[0]}:{c.addr(1)[1]}", "k", [0])
            lost = [v for v in prod.acked if seen.get(v) != prod.acked[v]]
            assert not lost, f"{len(lost)} acknowledged writes lost with KIP-903 on"
    finally:
        if drop:
            drop.remove()
        relay.close()
