"""The AlterPartition proxy: hold the AlterPartition adding X while heartbeats flow; release
on X's re-registration; record the controller's answer (INELIGIBLE_REPLICA with KIP-903).

The proxy is the real process (started through LocalTransport, registered in the ledger);
the controller behind it is the in-test kio fake of tests/nemeses/kafka_fake.py (FAKE:
kraftsim's controller is exercised in test_kraftsim_nemeses.py).
"""
from __future__ import annotations

import dataclasses
import json
import socket
import time
import uuid
from pathlib import Path

import pytest

from nemeses.alter_partition import AlterPartitionDelay
from nemeses.base import FaultRecord
from tests.nemeses.kafka_fake import BrokerClient, FakeController, read_frame
from tests.nemeses.nodes import TestNode, make_ctx

TOPIC = uuid.UUID("7d9a35e2-5f0c-4a56-9b7d-3c8e1f00aa01")


def events(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def rig(tmp_path):
    fakes, nems = [], []

    def make(kip903: bool):
        ctl = FakeController(kip903=kip903)
        fakes.append(ctl)
        nodes = [TestNode(f"b{i}", "broker", i, "127.0.0.1") for i in (1, 2, 3)]
        ctx = make_ctx(tmp_path, nodes, proxy={"control_dir": str(tmp_path / "proxy"), "listen": "127.0.0.1:0",
                                               "upstream": f"127.0.0.1:{ctl.port}",
                                               "events": str(tmp_path / "proxy-events.jsonl")})
        nem = AlterPartitionDelay()
        nem.setup(ctx)
        nems.append(nem)
        host, port = nem.handle.listen.split(":")
        return ctl, nem, (host, int(port)), ctx

    yield make
    for n in nems:
        n.teardown()
    for c in fakes:
        c.close()


def heartbeat_latencies(client: BrokerClient, epoch: int, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        assert int(client.heartbeat(epoch).error_code) == 0
        out.append(time.monotonic() - t0)
        time.sleep(0.05)
    return out


@pytest.mark.parametrize("kip903", [False, True])
def test_hold_until_x_reregisters_while_heartbeats_flow(rig, tmp_path, kip903):
    ctl, nem, addr, ctx = rig(kip903)
    life1, ap1, life2 = BrokerClient(addr, 1), BrokerClient(addr, 1), BrokerClient(addr, 2)
    try:
        e1, e2 = life1.register(), life2.register()
        rec = nem.start(["b2"], partition=0, then_delay_ms=800)   # until X (=2) is back and unfenced
        ap1.send_alter_partition(TOPIC, 0, {1: e1, 2: e2}, e1)    # leader 1 adds 2 (docs/seeds.md#seed-000 step 1)
        assert nem.wait(lambda: nem.is_held(rec), timeout=5)
        # while held: heartbeats on the lifecycle channel keep flowing, and other APIs pass
        # byte for byte (the fake echoes unknown API keys)
        assert max(heartbeat_latencies(life1, e1, 10)) < 0.5
        odd = (12345).to_bytes(2, "big") + b"\x00\x01" + b"\x00\x00\x00\x09" + bytes(range(40))
        life1.sock.sendall(len(odd).to_bytes(4, "big") + odd)
        assert read_frame(life1.sock) == odd
        with pytest.raises(socket.timeout):
            ap1.recv(56, 3, timeout=0.5)
        assert not any(e[0] == "alter_partition" for e in ctl.log), "the controller saw the held request"
        # docs/seeds.md#seed-000 steps 2-5: X fails and comes back (new broker epoch) -> the condition releases
        life2.close()
        life2 = BrokerClient(addr, 2)
        new_e2 = life2.register()
        assert new_e2 > e2
        time.sleep(0.3)
        assert nem.is_held(rec), "registered but still fenced: not eligible yet (KIP-841)"
        assert int(life2.heartbeat(new_e2).error_code) == 0        # the controller unfences X
        resp = ap1.recv(56, 3, timeout=5)
        code = int(resp.topics[0].partitions[0].error_code)
        assert code == (107 if kip903 else 0)
        # then_delay_ms: the leader's next AlterPartition (its ISR shrink) is delayed as well
        t0 = time.monotonic()
        ap1.send_alter_partition(TOPIC, 0, {1: e1}, e1)
        ap1.recv(56, 3, timeout=5)
        assert time.monotonic() - t0 >= 0.5
        nem.stop(rec)                                             # heal ends the delay window
        t0 = time.monotonic()
        ap1.send_alter_partition(TOPIC, 0, {1: e1}, e1)
        ap1.recv(56, 3, timeout=5)
        assert time.monotonic() - t0 < 0.5
    finally:
        for c in (life1, ap1, life2):
            c.close()
    ev = events(tmp_path / "proxy-events.jsonl")
    names = [e["event"] for e in ev]
    assert names.index("proxy_hold") < names.index("proxy_release") < names.index("alter_partition")
    rel = next(e for e in ev if e["event"] == "proxy_release")
    assert rel["reason"] == "broker 2 registered again and was unfenced" and rel["held_ms"] >= 500
    assert [e["event"] for e in ev].count("proxy_delay") == 1
    ap = next(e for e in ev if e["event"] == "alter_partition")
    assert ap["role"] == "proxy" and ap["partition"] == 0 and ap["new_isr"] == [1, 2]
    assert ap["broker_epochs"] == {"1": e1, "2": e2} and ap["version"] == 3
    if kip903:
        assert (ap["accepted"], ap["error"], ap["error_code"]) == (False, "INELIGIBLE_REPLICA", 107)
    else:
        assert (ap["accepted"], ap["error_code"], ap["isr"]) == (True, 0, [1, 2])
    tl = [json.loads(l) for l in (tmp_path / "timeline.jsonl").read_text().splitlines()]
    assert [(t["phase"], t["fault"]) for t in tl] == [("start", "alter-partition"), ("stop", "alter-partition")]
    assert tl[1]["detail"]["released"]["reason"] == "broker 2 registered again and was unfenced"
    assert [e["broker"] for e in ev if e["event"] == "broker_unfenced_seen"] == [2]


def test_hold_is_specific_and_heal_from_a_fresh_process_releases(rig, tmp_path):
    """An AlterPartition that does not add X passes; `faultline heal` (a new nemesis object
    knowing only the ledger record) releases a held one; the proxy process is in the ledger."""
    ctl, nem, addr, ctx = rig(False)
    life, ap = BrokerClient(addr, 1), BrokerClient(addr, 1)
    try:
        e1 = life.register()
        ap.send_alter_partition(TOPIC, 0, {1: e1, 3: 7}, e1)          # 3 joins; no hold armed
        assert int(ap.recv(56, 3).topics[0].partitions[0].error_code) == 0
        rec = nem.start(["b3"], partition=0, until={"after_s": 60})
        ap.send_alter_partition(TOPIC, 0, {1: e1, 3: 7}, e1)          # 3 already in ISR: not an add
        assert int(ap.recv(56, 3, timeout=3).topics[0].partitions[0].error_code) == 0
        ap.send_alter_partition(TOPIC, 1, {1: e1, 3: 7}, e1)          # other partition: passes
        assert int(ap.recv(56, 3, timeout=3).topics[0].partitions[0].error_code) == 0
        ap.send_alter_partition(TOPIC, 0, {1: e1}, e1)                # shrink: 3 leaves
        ap.recv(56, 3, timeout=3)
        ap.send_alter_partition(TOPIC, 0, {1: e1, 3: 7}, e1)          # 3 added again: held
        assert nem.wait(lambda: nem.is_held(rec), timeout=5)
        open_ids = [e["id"] for e in ctx.ledger.open_entries()]
        assert rec.id in open_ids and nem.handle.ledger_id in open_ids
        fresh = AlterPartitionDelay()
        fresh.setup(dataclasses.replace(ctx, nodes={}, settings={}))  # as `faultline heal`: no settings
        fresh.stop(FaultRecord.from_json(json.loads(json.dumps(rec.to_json()))))
        assert int(ap.recv(56, 3, timeout=5).topics[0].partitions[0].error_code) == 0
    finally:
        life.close()
        ap.close()
    nem.teardown()
    assert [e["id"] for e in ctx.ledger.open_entries()] == []
    rel = [e for e in events(tmp_path / "proxy-events.jsonl") if e["event"] == "proxy_release"]
    assert [r["reason"] for r in rel] == ["released by control"]


def test_delay_mode_delays_alter_partition_only(rig, tmp_path):
    ctl, nem, addr, ctx = rig(False)
    life, ap = BrokerClient(addr, 1), BrokerClient(addr, 1)
    try:
        e1 = life.register()
        rec = nem.start(["b2"], mode="delay", delay_ms=600)
        time.sleep(0.2)
        t0 = time.monotonic()
        ap.send_alter_partition(TOPIC, 0, {1: e1, 2: 5}, e1, version=2)
        assert max(heartbeat_latencies(life, e1, 3)) < 0.4
        ap.recv(56, 2, timeout=5)
        assert time.monotonic() - t0 >= 0.6
        nem.stop(rec)
        time.sleep(0.2)
        t0 = time.monotonic()
        ap.send_alter_partition(TOPIC, 0, {1: e1, 2: 5}, e1, version=2)
        ap.recv(56, 2, timeout=5)
        assert time.monotonic() - t0 < 0.5
    finally:
        life.close()
        ap.close()
    ap_ev = [e for e in events(tmp_path / "proxy-events.jsonl") if e["event"] == "alter_partition"]
    assert [e["version"] for e in ap_ev] == [2, 2] and ap_ev[0]["broker_epochs"] == {}


def test_delay_all_mode_delays_every_frame_both_ways_by_arrival(rig, tmp_path):
    """mode delay-all is the userspace slow link where the kernel has no netem (nemeses.link):
    heartbeats as well as AlterPartitions wait delay_ms each way, pipelined requests keep their
    spacing (a 5-deep pipeline costs one round trip of delay, not five), and heal ends it."""
    ctl, nem, addr, ctx = rig(False)
    life, ap = BrokerClient(addr, 1), BrokerClient(addr, 1)
    try:
        e1 = life.register()
        assert max(heartbeat_latencies(life, e1, 3)) < 0.3
        rec = nem.start(["b1"], mode="delay-all", delay_ms=400)
        lat = heartbeat_latencies(life, e1, 3)
        assert min(lat) >= 0.8, lat                       # 400 ms out + 400 ms back
        t0 = time.monotonic()
        for _ in range(5):
            ap.send_alter_partition(TOPIC, 0, {1: e1}, e1, version=2)
        for _ in range(5):
            ap.recv(56, 2, timeout=10)
        took = time.monotonic() - t0
        # by arrival: about 0.8 s; serialized per frame it was 0.4 + 5 x 0.4 = 2.4 s
        assert 0.8 <= took < 1.8, took
        nem.stop(rec)
        time.sleep(0.2)
        assert max(heartbeat_latencies(life, e1, 3)) < 0.3
    finally:
        life.close()
        ap.close()


def test_proxy_bad_listen_address_is_one_line(tmp_path):
    import subprocess, sys
    p = subprocess.run([sys.executable, "-m", "nemeses.proxy", "--listen", "127.0.0.1:notaport", "--upstream",
                        "127.0.0.1:1", "--control-dir", str(tmp_path), "--events", str(tmp_path / "e")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--listen" in p.stderr and "Traceback" not in p.stderr


def test_a_held_request_follows_the_broker_to_the_next_controller(tmp_path):
    """Two controllers behind one proxy (one listener each). The AlterPartition adding X is
    held on its way to controller 1; controller 1 dies; the proxy closes the broker's
    connection, the broker re-sends the same request to controller 2 (as Kafka's
    NodeToControllerRequestThread does on a disconnect), and the copy stays held until X has
    registered again - with controller 2 - and only then reaches controller 2, the one that
    answers. Before the proxy had one listener per controller this could not be set up; a
    hold did not survive its connection (the re-send passed at once)."""
    c1, c2 = FakeController(kip903=True), FakeController(kip903=True)
    nodes = [TestNode(f"b{i}", "broker", i, "127.0.0.1") for i in (1, 2)]
    ctx = make_ctx(tmp_path, nodes, proxy={"control_dir": str(tmp_path / "proxy"), "listen": "127.0.0.1:0",
                                           "upstream": f"127.0.0.1:{c1.port},127.0.0.1:{c2.port}",
                                           "events": str(tmp_path / "proxy-events.jsonl")})
    nem = AlterPartitionDelay()
    nem.setup(ctx)
    clients: list[BrokerClient] = []
    try:
        l1, l2 = [(h, int(p)) for h, p in (a.split(":") for a in nem.handle.listens)]
        life1, life2, ap = BrokerClient(l1, 1), BrokerClient(l1, 2), BrokerClient(l1, 1)
        clients += [life1, life2, ap]
        e1, e2 = life1.register(), life2.register()
        rec = nem.start(["b2"], partition=0)
        ap.send_alter_partition(TOPIC, 0, {1: e1, 2: e2}, e1)
        assert nem.wait(lambda: nem.is_held(rec), timeout=5)
        c1.kill()
        with pytest.raises((AssertionError, OSError)):   # the broker sees its controller go
            ap.recv(56, 3, timeout=5)
        ap2 = BrokerClient(l2, 1)
        clients.append(ap2)
        ap2.send_alter_partition(TOPIC, 0, {1: e1, 2: e2}, e1)   # the same request, re-sent
        with pytest.raises(socket.timeout):
            ap2.recv(56, 3, timeout=0.7)
        assert nem.is_held(rec) and not any(e[0] == "alter_partition" for e in c2.log)
        # X comes back and registers with controller 2 first (docs/seeds.md#seed-000, step 5)
        x = BrokerClient(l2, 2)
        clients.append(x)
        new_e2 = x.register()
        assert int(x.heartbeat(new_e2).error_code) == 0
        resp = ap2.recv(56, 3, timeout=5)
        assert int(resp.topics[0].partitions[0].error_code) == 107   # the new controller's answer
    finally:
        for c in clients:
            c.close()
        nem.teardown()
        c1.close()
        c2.close()
    ev = events(tmp_path / "proxy-events.jsonl")
    hold = next(e for e in ev if e["event"] == "proxy_hold")
    followed = next(e for e in ev if e["event"] == "proxy_hold_followed")
    answer = next(e for e in ev if e["event"] == "alter_partition")
    assert hold["upstream"] == f"127.0.0.1:{c1.port}"
    assert followed["upstream"] == answer["upstream"] == f"127.0.0.1:{c2.port}" and followed["held"] is True
    assert (answer["accepted"], answer["error_code"]) == (False, 107)


def test_two_delays_of_one_mode_cannot_overlap_but_a_hold_and_a_delay_can(rig, tmp_path):
    """The proxy has one delay per mode and one hold: healing one of two overlapping delays
    would drop the other's, and a second hold would replace the first's spec. So a schedule
    refuses the second (one line naming both), while a hold and a delay compose; once the
    first delay is healed another may start."""
    from nemeses.active import ActiveFaults, FaultConflict

    ctl, nem, addr, ctx = rig(False)
    faults = ActiveFaults(ctx)
    d1 = faults.start("alter-partition", ["b2"], {"mode": "delay", "delay_ms": 300})
    with pytest.raises(FaultConflict) as e:
        faults.start("alter-partition", ["b3"], {"mode": "delay", "delay_ms": 900})
    assert "\n" not in str(e.value) and d1.name in str(e.value) and "alter-partition:delay" in str(e.value)
    hold = faults.start("alter-partition", ["b3"], {"partition": 0, "until": {"after_s": 60}})
    with pytest.raises(FaultConflict, match="alter-partition:hold"):
        faults.start("alter-partition", ["b2"], {"partition": 0, "until": {"after_s": 60}})
    faults.stop(d1.name)
    d2 = faults.start("alter-partition", ["b2"], {"mode": "delay", "delay_ms": 300})
    assert sorted(faults.applied) == sorted([hold.name, d2.name])
    assert faults.heal_all() == []
    assert [x for x in ctx.ledger.open_entries() if x["id"] in (d1.record.id, d2.record.id, hold.record.id)] == []
