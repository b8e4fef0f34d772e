"""Each partition shape cuts exactly the intended links, heal restores all.

Real namespaces (netlab lab "part"), real iptables. Reachability is measured by connection
attempts: every host sends a UDP datagram to every other host (directed, so one-way cuts
are seen as one-way) and TCP connects are tried for the symmetric shapes.
"""
from __future__ import annotations

import itertools
import json
import sys
import time

import pytest

from nemeses.netfilter import tagged_rules
from nemeses.network_partition import NetworkPartition
from tests.nemeses.nodes import TestNode, make_ctx
from tests.support.netlab import NetLab, cleanup_stale

HOSTS = ["c1", "b1", "b2", "b3"]
UDP_PORT, TCP_PORT = 9500, 9501

LISTENER = r"""
import socket, sys, threading
out = open(sys.argv[1], "a", buffering=1)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", %d))
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("0.0.0.0", %d)); t.listen(64)
def acc():
    while True:
        c, _ = t.accept(); c.close()
threading.Thread(target=acc, daemon=True).start()
while True:
    d, a = u.recvfrom(256); out.write(d.decode() + "\n")
""" % (UDP_PORT, TCP_PORT)

PROBE = r"""
import socket, sys, json
me, nonce, targets = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tcp = {}
for name, ip in targets.items():
    try:
        s.sendto(f"{nonce}:{me}".encode(), (ip, %d))
    except OSError:  # an OUTPUT DROP refuses locally (EPERM)
        pass
if len(sys.argv) > 4:
    for name, ip in targets.items():
        c = socket.socket(); c.settimeout(0.4)
        try:
            c.connect((ip, %d)); tcp[name] = True
        except OSError:
            tcp[name] = False
        c.close()
print(json.dumps(tcp))
""" % (UDP_PORT, TCP_PORT)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("part")
    cleanup_stale("part")
    lab = NetLab("part", HOSTS).up()
    nodes = []
    try:
        for i, h in enumerate(HOSTS):
            n = TestNode(h, "controller" if h == "c1" else "broker", i, lab.ips[h], netns=lab.ns(h),
                         command=[sys.executable, "-c", LISTENER, str(tmp / f"{h}.recv")],
                         log_path=str(tmp / f"{h}.log"))
            n.start_service()
            nodes.append(n)
        time.sleep(0.5)
        yield lab, nodes, tmp
    finally:
        for n in nodes:
            n.stop_service(9)
        lab.down()


def reach(lab, nodes, tmp, nonce: str, tcp: bool = False) -> tuple[set, set]:
    """Directed UDP reachability (src, dst) and TCP connectability (src, dst)."""
    udp_ok, tcp_ok = set(), set()
    for n in nodes:
        others = {m.name: m.address for m in nodes if m is not n}
        argv = [sys.executable, "-c", PROBE, n.name, nonce, json.dumps(others)] + (["tcp"] if tcp else [])
        out = n.transport.run(argv, timeout=30, check=True).stdout
        tcp_ok |= {(n.name, d) for d, ok in json.loads(out).items() if ok}
    time.sleep(0.3)
    for m in nodes:
        for line in (tmp / f"{m.name}.recv").read_text().splitlines():
            got_nonce, src = line.split(":")
            if got_nonce == nonce:
                udp_ok.add((src, m.name))
    return udp_ok, tcp_ok


ALL = {(a, b) for a, b in itertools.permutations(HOSTS, 2)}


def both(*pairs):
    return {p for a, b in pairs for p in ((a, b), (b, a))}


@pytest.mark.parametrize("shape,targets,params,cut", [
    ("isolate", ["b1"], {}, both(("b1", "c1"), ("b1", "b2"), ("b1", "b3"))),
    ("halves", ["c1", "b1"], {}, both(("c1", "b2"), ("c1", "b3"), ("b1", "b2"), ("b1", "b3"))),
    ("bridge", ["b1"], {"nodes": ["c1", "b1", "b2", "b3"]}, both(("c1", "b3"), ("c1", "b2"))),
    ("one-way", [], {"from": "b2", "to": "b3"}, {("b2", "b3")}),
    ("between", ["b1", "b3"], {}, both(("b1", "b3"))),
    ("controller", ["b2"], {}, both(("b2", "c1"))),
])
def test_shape_cuts_exactly_the_intended_links_and_heal_restores(lab, shape, targets, params, cut):
    netlab, nodes, tmp = lab
    ctx = make_ctx(tmp / shape, nodes)
    nem = NetworkPartition()
    nem.setup(ctx)
    assert reach(netlab, nodes, tmp, f"pre-{shape}")[0] == ALL
    rec = nem.start(targets, shape=shape, **params)
    try:
        udp, tcp = reach(netlab, nodes, tmp, f"cut-{shape}", tcp=shape != "one-way")
        assert ALL - udp == cut, f"{shape}: cut {sorted(ALL - udp)}, wanted {sorted(cut)}"
        if shape != "one-way":
            # TCP needs both directions: a connection fails exactly where a link is cut
            assert {p for p in ALL if p not in tcp} == cut
    finally:
        nem.stop(rec)
    assert reach(netlab, nodes, tmp, f"healed-{shape}")[0] == ALL
    for n in nodes:
        assert tagged_rules(n.transport) == [], f"{n.name} still has a faultline rule"
    entries = [json.loads(l) for l in (tmp / shape / "ledger.jsonl").read_text().splitlines()]
    assert [e["op"] for e in entries] == ["apply", "healed"]
    phases = [json.loads(l)["phase"] for l in (tmp / shape / "timeline.jsonl").read_text().splitlines()]
    assert phases == ["start", "stop"]


def test_heal_is_idempotent_and_leaves_foreign_rules(lab):
    """Heal twice is fine, and a rule someone else added on the host stays."""
    netlab, nodes, tmp = lab
    b1 = nodes[1]
    b1.transport.run(["iptables", "-I", "INPUT", "-s", "10.250.99.99", "-j", "DROP"], check=True)
    try:
        nem = NetworkPartition()
        nem.setup(make_ctx(tmp / "idem", nodes))
        rec = nem.start(["b1"], shape="isolate")
        assert tagged_rules(b1.transport, rec.id)
        nem.stop(rec)
        nem.stop(rec)
        assert tagged_rules(b1.transport) == []
        assert "10.250.99.99" in b1.transport.run(["iptables", "-S", "INPUT"]).stdout
    finally:
        b1.transport.run(["iptables", "-D", "INPUT", "-s", "10.250.99.99", "-j", "DROP"])


def test_bad_shape_is_one_clear_line(lab):
    netlab, nodes, tmp = lab
    nem = NetworkPartition()
    nem.setup(make_ctx(tmp / "bad", nodes))
    with pytest.raises(ValueError, match="shape must be one of"):
        nem.start(["b1"], shape="triangle")
    with pytest.raises(ValueError, match="unknown node"):
        nem.start(["b9"], shape="controller")
