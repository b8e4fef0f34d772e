"""Degraded links on real namespaces (netlab lab "nem"): the paths this kernel has.

loss through iptables' statistic match, rate through tbf; delay through netem is refused
here in one line because the kernel has no sch_netem (checked by the test itself: if the
kernel ever gains netem, the delay test measures the delay instead).
"""
from __future__ import annotations

import json
import sys
import time

import pytest

from nemeses.link import LinkDegrade, Unavailable, root_qdisc
from nemeses.netfilter import tagged_rules
from tests.nemeses.nodes import TestNode, make_ctx
from tests.support.netlab import NetLab, cleanup_stale

SINK = r"""
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 9600))
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("0.0.0.0", 9601)); t.listen(8)
import threading
def tcp():
    while True:
        c, _ = t.accept()
        while c.recv(65536): pass
        c.sendall(b"k"); c.close()
threading.Thread(target=tcp, daemon=True).start()
out = open(sys.argv[1], "a", buffering=1)
while True:
    d, _ = u.recvfrom(64); out.write(d.decode() + "\n")
"""

SEND_UDP = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[3])):
    s.sendto(f"{sys.argv[2]}:{i}".encode(), (sys.argv[1], 9600)); time.sleep(0.001)
"""

SEND_TCP = r"""
import socket, sys, time
c = socket.create_connection((sys.argv[1], 9601), timeout=30)
t0 = time.monotonic(); c.sendall(b"x" * int(sys.argv[2])); c.shutdown(socket.SHUT_WR); c.recv(1)
print(time.monotonic() - t0)
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("link")
    cleanup_stale("nem")
    lab = NetLab("nem", ["h1", "h2"]).up()
    nodes = [TestNode(h, "broker", i, lab.ips[h], netns=lab.ns(h),
                      command=[sys.executable, "-c", SINK, str(tmp / f"{h}.recv")]) for i, h in enumerate(["h1", "h2"])]
    try:
        for n in nodes:
            n.start_service()
        time.sleep(0.4)
        yield nodes, tmp
    finally:
        for n in nodes:
            n.stop_service(9)
        lab.down()


def received(tmp, nonce: str) -> int:
    return sum(1 for l in (tmp / "h2.recv").read_text().splitlines() if l.startswith(nonce + ":"))


def udp_delivery(h1, h2, tmp, nonce: str, n: int = 300) -> float:
    h1.transport.run([sys.executable, "-c", SEND_UDP, h2.address, nonce, str(n)], check=True, timeout=30)
    time.sleep(0.3)
    return received(tmp, nonce) / n


def test_loss_by_statistic_match_and_heal(lab):
    (h1, h2), tmp = lab
    nem = LinkDegrade()
    nem.setup(make_ctx(tmp / "loss", [h1, h2], seed=3))
    assert udp_delivery(h1, h2, tmp, "pre") == 1.0
    rec = nem.start(["h2"], kind="loss", probability=0.5)
    try:
        frac = udp_delivery(h1, h2, tmp, "lossy")
        assert 0.3 < frac < 0.7, f"delivered {frac:.2f} with p=0.5 loss"
    finally:
        nem.stop(rec)
    assert udp_delivery(h1, h2, tmp, "post") == 1.0
    assert tagged_rules(h2.transport) == []


def test_rate_by_tbf_and_heal(lab):
    (h1, h2), tmp = lab
    nem = LinkDegrade()
    nem.setup(make_ctx(tmp / "rate", [h1, h2]))
    size = 1_000_000
    def secs() -> float:
        return float(h1.transport.run([sys.executable, "-c", SEND_TCP, h2.address, str(size)],
                                      check=True, timeout=60).stdout)
    fast = secs()
    rec = nem.start(["h1"], kind="rate", rate="8mbit")
    try:
        assert "tbf" in root_qdisc(h1.transport, rec.undo["devs"]["h1"])
        slow = secs()
        assert slow >= 0.7, f"1 MB at 8 mbit took {slow:.2f}s"
    finally:
        nem.stop(rec)
    assert "fa17:" not in root_qdisc(h1.transport, rec.undo["devs"]["h1"])
    assert secs() < max(0.5, fast * 5)


def test_delay_without_netem_says_so_in_one_line_and_leaves_nothing(lab):
    (h1, h2), tmp = lab
    nem = LinkDegrade()
    nem.setup(make_ctx(tmp / "delay", [h1, h2]))
    has_netem = h1.transport.run("tc qdisc add dev lo root handle fe: netem delay 0ms && tc qdisc del dev lo root").ok
    if has_netem:   # a kernel with netem: the delay must really be there
        rec = nem.start(["h1"], kind="delay", delay_ms=200)
        try:
            t0 = time.monotonic()
            h1.transport.run(["ping", "-c", "1", "-W", "2", h2.address], check=True)
            assert time.monotonic() - t0 >= 0.2
        finally:
            nem.stop(rec)
        return
    with pytest.raises(Unavailable) as e:
        nem.start(["h1"], kind="delay", delay_ms=200)
    msg = str(e.value)
    assert "\n" not in msg and "h1" in msg and "netem" in msg
    assert "fa17:" not in root_qdisc(h1.transport, "flv6n0")
    ledger = [json.loads(l) for l in (tmp / "delay" / "ledger.jsonl").read_text().splitlines()]
    assert [e["op"] for e in ledger] == ["apply", "healed"]
    tl = [json.loads(l) for l in (tmp / "delay" / "timeline.jsonl").read_text().splitlines()]
    assert "netem" in tl[-1]["detail"]["error"]


def test_a_rate_that_fails_on_its_second_host_removes_the_first_hosts_qdisc(lab):
    """A rate on h1 and h2 where h2's interface already has someone else's root qdisc: h1 gets
    its tbf, h2 refuses. Through the schedule's door (ActiveFaults) the start fails, and the
    heal removes h1's qdisc - it was ledgered as it was added - and leaves h2's own alone.
    Before, the qdiscs were recorded only once all were added, and h1's stayed."""
    from nemeses.active import ActiveFaults, FaultFailed
    from nemeses.catalog import load_nemeses
    load_nemeses()
    (h1, h2), tmp = lab
    devs = {n.name: [ln.split()[1] for ln in n.transport.run("ip -o -4 addr show", sudo=True).stdout.splitlines()
                     if n.address in ln][0] for n in (h1, h2)}
    h2.transport.run(["tc", "qdisc", "add", "dev", devs["h2"], "root", "handle", "1:", "tbf", "rate", "100mbit",
                      "burst", "32kbit", "latency", "400ms"], sudo=True, check=True)
    try:
        faults = ActiveFaults(make_ctx(tmp / "partial", [h1, h2]))
        with pytest.raises(FaultFailed) as e:
            faults.start("link", ["h1", "h2"], {"kind": "rate", "rate": "8mbit"})
        assert "h2" in e.value.reason and "already has a root qdisc" in e.value.reason
        assert "fa17:" not in root_qdisc(h1.transport, devs["h1"]), "h1's tbf was left behind"
        assert "tbf 1:" in root_qdisc(h2.transport, devs["h2"])
        tl = [json.loads(ln) for ln in (tmp / "partial" / "timeline.jsonl").read_text().splitlines()]
        assert [r["phase"] for r in tl if r["kind"] == "nemesis"] == ["start", "stop", "failed"]
        ledger = [json.loads(ln) for ln in (tmp / "partial" / "ledger.jsonl").read_text().splitlines()]
        assert ledger[-1]["op"] == "healed" and any(r.get("record", {}).get("undo", {}).get("devs") == {"h1": devs["h1"]}
                                                    for r in ledger)
    finally:
        h2.transport.run(["tc", "qdisc", "del", "dev", devs["h2"], "root"], sudo=True)
