"""Nemeses against a real kraftsim cluster (real processes, real Kafka-format storage).

Truncate-unflushed loses exactly the unflushed suffix (segment files read back; kraftsim's
recovery logs the same log end). A disk wipe leaves an empty log and a greater broker epoch
(controller's event log). The proxy placed in front of the running cluster by DNAT holds the
AlterPartition re-adding X while heartbeats and acks=all produce traffic flow; X's
re-registration releases it; KIP-903's INELIGIBLE_REPLICA is recorded.
"""
from __future__ import annotations

import json
import signal
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from nemeses.alter_partition import AlterPartitionDelay
from nemeses.disk_wipe import DiskWipe
from nemeses.netfilter import tagged_rules
from nemeses.reboot import Reboot
from tests.nemeses.kraftsim_cluster import KraftsimCluster, wait_for
from tests.nemeses.nodes import make_ctx
from tests.nemeses.segments import log_end_offset

BASE_PORT = 19740


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = KraftsimCluster(tmp_path_factory.mktemp("ks") / "cluster", base_port=BASE_PORT,
                        settings={"log.flush.interval.messages": 40})
    try:
        c.start()
        yield c
    finally:
        c.stop()


def create_topic(c: KraftsimCluster, name: str, rf: int = 3, min_isr: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})

    def attempt() -> bool:   # a broker restarted by the previous test may not be unfenced yet
        fut = admin.create_topics([NewTopic(name, 1, rf, config={"min.insync.replicas": str(min_isr)})])[name]
        try:
            fut.result(30)
            return True
        except Exception as e:
            if "TOPIC_ALREADY_EXISTS" in str(e):
                return True
            if "INVALID_REPLICATION_FACTOR" not in str(e):
                raise
            return False
    wait_for(attempt, 30, f"topic {name} created", poll=0.5)
    wait_for(lambda: any(e.get("event") == "leader_elected" and e.get("topic") == name
                         for e in c.events("controller")), 30, f"{name} has a leader")


def produce(c: KraftsimCluster, topic: str, n: int, prefix: str = "m") -> int:
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 0, "message.timeout.ms": 20000})
    acked = []
    for i in range(n):
        p.produce(topic, f"{prefix}{i}".encode(), partition=0,
                  on_delivery=lambda err, msg: acked.append(err is None))
        p.poll(0)
        if i % 20 == 19:
            p.flush(20)
    p.flush(30)
    return sum(acked)


def partition_state(c: KraftsimCluster, topic: str) -> dict:
    st: dict = {}
    for e in c.events("controller"):
        if e.get("topic") == topic and e.get("event") in ("leader_elected", "isr_changed"):
            st = {"leader": e.get("leader"), "isr": e.get("isr", [])}
    return st


def test_truncate_unflushed_on_a_kraftsim_broker(cluster, tmp_path):
    create_topic(cluster, "pcl")
    assert produce(cluster, "pcl", 230) == 230
    time.sleep(1.0)
    ctx = make_ctx(tmp_path, list(cluster.nodes.values()))
    nem = Reboot()
    nem.setup(ctx)
    results = {}
    for name, cut in (("broker-2", "recovery-point"), ("broker-3", "random")):
        node = cluster.nodes[name]
        pdir = next(p for p in (cluster.root / name / "data").iterdir() if p.name == "pcl-0")
        rec = nem.start([name], mode="truncate-unflushed", cut=cut, seed=11, restart=False)
        part = rec.undo["detail"][name]["partitions"]["pcl-0"]
        # the segment files now end where the cut says: recovery point, or a torn tail past it
        assert log_end_offset(pdir) == part["expected_log_end_offset"]
        if cut == "recovery-point":
            assert part["expected_log_end_offset"] == part["recovery_point"]
        assert part["recovery_point"] <= part["expected_log_end_offset"] <= part["log_end_offset_before"]
        assert part["log_end_offset_before"] == 230
        start_wall = time.time()
        nem.stop(rec)                                   # heal = start the broker again
        ev = wait_for(lambda: [e for e in cluster.events(name) if e.get("event") == "recovery"
                               and e.get("wall", 0) >= start_wall - 1 and e.get("topic") == "pcl"],
                      30, f"{name} logs its recovery")
        assert ev[0]["log_end_offset"] == part["expected_log_end_offset"], (ev, part)
        results[name] = (part, ev[0])
    # something was actually lost on disk in at least the recovery-point case
    assert results["broker-2"][0]["truncated_bytes"] > 0 or results["broker-2"][0]["recovery_point"] == 230


def test_disk_wipe_on_a_kraftsim_broker(cluster, tmp_path):
    def epochs(b: int) -> list[int]:
        return [e["broker_epoch"] for e in cluster.events("controller")
                if e.get("event") == "broker_registered" and e.get("broker") == b]
    before = max(epochs(3))
    ctx = make_ctx(tmp_path, list(cluster.nodes.values()))
    nem = DiskWipe()
    nem.setup(ctx)
    rec = nem.start(["broker-3"], restart=False)
    data = cluster.root / "broker-3" / "data"
    assert sorted(p.name for p in data.iterdir()) == ["meta.properties"]
    nem.stop(rec)
    new = wait_for(lambda: [e for e in epochs(3) if e > before], 30, "broker-3 re-registers")
    assert new[0] > before
    assert wait_for(lambda: cluster.nodes["broker-3"].service_pids(), 5, "broker-3 runs")


def test_hold_alter_partition_on_kraftsim(cluster, tmp_path):
    create_topic(cluster, "hold")
    assert produce(cluster, "hold", 20, "a") == 20
    st = wait_for(lambda: (s := partition_state(cluster, "hold")) and len(s["isr"]) == 3 and s, 30, "full ISR")
    leader = st["leader"]
    x = next(b for b in (1, 2, 3) if b != leader)
    xname = f"broker-{x}"
    ctx = make_ctx(tmp_path, list(cluster.nodes.values()), proxy={
        "control_dir": str(tmp_path / "proxy"), "listen": f"127.0.0.1:{BASE_PORT + 50}", "upstream": "auto",
        "events": str(tmp_path / "proxy-events.jsonl"), "placement": "dnat"})
    nem = AlterPartitionDelay()
    nem.setup(ctx)
    placement_id = nem.placement.id
    try:
        # every broker reconnects to the controller through the proxy
        wait_for(lambda: nem.status().get("counts", {}).get("63", 0) > 6, 20, "heartbeats through the proxy")
        rec = nem.start([xname], partition=0, max_hold_s=60)
        node = cluster.nodes[xname]
        node.stop_service(9)                                   # X hard-fails (docs/seeds.md#seed-000 step 2)
        wait_for(lambda: x not in partition_state(cluster, "hold").get("isr", [x]), 30, "X leaves the ISR")
        node.start_service()                                   # X comes back, catches up...
        wait_for(lambda: nem.is_held(rec), 45, "the AlterPartition re-adding X is held")
        held_wall = time.time()
        # while held: heartbeats flow (nobody is fenced) and acks=all writes succeed
        assert produce(cluster, "hold", 20, "b") == 20
        time.sleep(2.0)
        assert x not in partition_state(cluster, "hold")["isr"], "X joined the ISR while its AlterPartition was held"
        fenced = [e for e in cluster.events("controller") if e.get("event") == "broker_fenced" and e["wall"] > held_wall]
        assert fenced == []
        # X restarts (new broker epoch) -> the proxy releases the stale AlterPartition
        node.stop_service(9)
        node.start_service()
        wait_for(lambda: nem.release_info(rec), 30, "release once X re-registered and was unfenced")
        wait_for(lambda: x in partition_state(cluster, "hold").get("isr", []), 45, "X rejoins the ISR afterwards")
        nem.stop(rec)
    finally:
        nem.teardown()
    t = cluster.nodes["broker-1"].transport      # all brokers share this host's netfilter
    assert tagged_rules(t, placement_id, table="nat") == [] and tagged_rules(t, placement_id) == []
    ev = [json.loads(l) for l in (tmp_path / "proxy-events.jsonl").read_text().splitlines()]
    hold = next(e for e in ev if e["event"] == "proxy_hold")
    assert hold["leader"] == leader and x in hold["new_isr"] and hold["partition"] == 0
    rel = next(e for e in ev if e["event"] == "proxy_release")
    assert rel["reason"] == f"broker {x} registered again and was unfenced"
    after = [e for e in ev if e["event"] == "alter_partition" and e["wall"] >= rel["wall"]]
    assert after and after[0]["error_code"] == 107 and after[0]["error"] == "INELIGIBLE_REPLICA", after[:2]


def test_faultline_heal_undoes_placement_hold_and_proxy_from_the_ledger_alone(cluster, tmp_path):
    """As after a SIGKILLed harness: heal_all (what `faultline heal` runs) with nothing but the
    ledger removes the DNAT rules, releases the hold and kills the proxy process."""
    from harness.heal import heal_all
    ctx = make_ctx(tmp_path, list(cluster.nodes.values()), proxy={
        "control_dir": str(tmp_path / "proxy"), "listen": "127.0.0.1:0", "upstream": "auto", "placement": "dnat"})
    nem = AlterPartitionDelay()
    nem.setup(ctx)
    pid, placement_id = nem.handle.pid, nem.placement.id
    t = cluster.nodes["broker-1"].transport
    try:
        rec = nem.start(["broker-3"], partition=0)
        assert tagged_rules(t, placement_id, table="nat") and t.pid_alive(pid)
        report = heal_all(ctx.ledger)             # a fresh nemesis per entry, no settings, no nodes
        assert report.failed == [], report.failed
        assert tagged_rules(t, placement_id, table="nat") == [] and tagged_rules(t, placement_id) == []
        wait_for(lambda: not t.pid_alive(pid), 10, "the proxy process is gone")
        assert ctx.ledger.open_entries() == []
        assert rec.id in " ".join(report.healed)
    finally:   # a failed assertion above must not leave the proxy or its DNAT rules behind
        heal_all(ctx.ledger)
        if t.pid_alive(pid):
            t.signal(pid, signal.SIGKILL)
