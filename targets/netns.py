"""A network of one's own for every node of an embedded cluster: a bridge and a namespace per node.

Why: a partition cuts the packets between two nodes by their addresses (nemeses/network_partition.py:
iptables rules in each victim's INPUT chain, by source address). kraftsim binds every outgoing
connection to its node's own loopback address, so its nodes can share this machine's ``lo``.
A real Kafka JVM does not: Kafka's NetworkClient never binds a local address, so every connection
between two nodes on ``lo`` comes from 127.0.0.1 and no rule could tell broker 2 from broker 3.
Each real node therefore runs in a network namespace of its own, with one veth on a bridge, as
on a lab of separate hosts; the harness and the clients reach them through the bridge's address.

Addresses come from faultline's own subnet (10.250.0.0/16, docs/architecture.md): a free /24 in
10.250.64.0/18 per cluster, refused when anything on this machine already routes it. Needs root
(CAP_NET_ADMIN), as every network fault does.

Everything is created after its names are in the heal ledger (``record()``), and
:func:`remove` undoes it from that record alone, so `faultline heal` removes what a killed run
left: processes in the namespaces, the namespaces, the veths, the bridge and its FORWARD rule.
"""
from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from targets.base import InfraError

#: per-namespace /etc files ``ip netns exec`` binds over /etc (ip-netns(8))
ETC_NETNS = Path("/etc/netns")
#: where the embedded clusters' subnets come from: the upper quarter of faultline's 10.250.0.0/16
#: (the test labs use 10.250.1-63.0/24, tests/support/netlab.py)
POOL = ipaddress.ip_network("10.250.64.0/18")
#: the comment of the FORWARD rule that lets the bridge forward (dockerd sets FORWARD's policy to DROP
#: and loads br_netfilter, which would drop traffic between the namespaces)
FORWARD_TAG = "faultline-net:"


def _ip(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    p = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise InfraError(f"ip {' '.join(args)}: {(p.stderr or p.stdout).strip()[:200]}")
    return p


def can_create() -> str | None:
    """None when this process may create namespaces, else why not (one line)."""
    if os.geteuid() != 0:
        return ("the embedded Apache Kafka cluster gives every node a network namespace of its own "
                "(real Kafka cannot be partitioned on one loopback): run faultline as root")
    if subprocess.run(["ip", "-V"], capture_output=True).returncode != 0:
        return "the embedded Apache Kafka cluster needs the ip command (iproute2)"
    return None


def routed_subnets() -> list[ipaddress.IPv4Network]:
    out = _ip("-4", "-o", "route", "show", "table", "all", check=False).stdout
    nets = []
    for line in out.splitlines():
        first = line.split()[0] if line.split() else ""
        if first in ("local", "broadcast", "unreachable", "prohibit", "blackhole"):
            first = line.split()[1]
        if first == "default":
            continue
        try:
            nets.append(ipaddress.ip_network(first, strict=False))
        except ValueError:
            continue
    return nets


def free_subnet(rng: random.Random | None = None) -> ipaddress.IPv4Network:
    """A /24 of :data:`POOL` that nothing on this machine routes."""
    used = routed_subnets()
    cands = list(POOL.subnets(new_prefix=24))
    (rng or random.SystemRandom()).shuffle(cands)
    for c in cands:
        if not any(c.overlaps(u) for u in used if u.prefixlen > 0):
            return c
    raise InfraError(f"no free /24 left in {POOL} for an embedded cluster's network (see `ip route`)")


@dataclass
class NodeNet:
    host: str
    netns: str
    veth: str          # the host end, on the bridge
    address: str


@dataclass
class ClusterNet:
    """The bridge, its gateway (this machine as the nodes see it) and one namespace per node."""
    tag: str                                  # 4 hex digits: unique per cluster, part of every name
    subnet: ipaddress.IPv4Network
    nodes: dict[str, NodeNet] = field(default_factory=dict)

    @property
    def bridge(self) -> str:
        return f"flk{self.tag}"

    @property
    def gateway(self) -> str:
        return str(self.subnet.network_address + 1)

    @classmethod
    def plan(cls, hosts: list[str], subnet: ipaddress.IPv4Network | None = None) -> "ClusterNet":
        tag = os.urandom(2).hex()
        net = cls(tag, subnet or free_subnet())
        for i, h in enumerate(hosts):
            net.nodes[h] = NodeNet(h, f"flk{tag}-{h}", f"flk{tag}v{i}", str(net.subnet.network_address + 10 + i))
        return net

    def record(self) -> dict[str, Any]:
        """What :func:`remove` needs (the heal ledger holds it before anything exists)."""
        return {"bridge": self.bridge, "netns": [n.netns for n in self.nodes.values()],
                "veths": [n.veth for n in self.nodes.values()], "subnet": str(self.subnet)}

    def up(self) -> None:
        why = can_create()
        if why:
            raise InfraError(why)
        # one cluster at a time between "is this /24 free?" and its bridge holding the route, so two
        # runs starting together (a suite's tests on two workers) never pick the same subnet
        with _subnet_lock():
            held = [u for u in routed_subnets() if u.prefixlen > 0 and u.overlaps(self.subnet)]
            if held:
                self.subnet = free_subnet()
                for i, n in enumerate(self.nodes.values()):
                    n.address = str(self.subnet.network_address + 10 + i)
            self._create()

    def _write_etc(self, n: NodeNet) -> None:
        _write_etc_files(n.netns, {x.host: x.address for x in self.nodes.values()})

    def _create(self) -> None:
        try:
            # dockerd loads br_netfilter (frames between the nodes go through the host's FORWARD chain)
            # and sets FORWARD's policy to DROP: let this bridge forward. The bridge's own
            # nf_call_iptables switch cannot do it - the kernel calls iptables when either it or the
            # namespace's net.bridge.bridge-nf-call-iptables is on (br_netfilter_hooks.c)
            _ip("link", "add", self.bridge, "type", "bridge")
            subprocess.run(["iptables", "-I", "FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT",
                            "-m", "comment", "--comment", FORWARD_TAG + self.bridge], capture_output=True, check=False)
            _ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for n in self.nodes.values():
                _ip("netns", "add", n.netns)
                self._write_etc(n)
                _ip("link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.netns)
                _ip("link", "set", n.veth, "master", self.bridge)
                _ip("link", "set", n.veth, "up")
                for args in (("addr", "add", f"{n.address}/{self.subnet.prefixlen}", "dev", "eth0"),
                             ("link", "set", "eth0", "up"), ("link", "set", "lo", "up"),
                             ("route", "add", "default", "via", self.gateway)):
                    _ip("-n", n.netns, *args)
        except BaseException:
            remove(self.record())
            raise


def _etc(netns: str) -> Path:
    return ETC_NETNS / netns


def _write_etc_files(netns: str, names: dict[str, str]) -> None:
    """``/etc/netns/NS/hosts`` and ``resolv.conf``, which ``ip netns exec`` binds over /etc inside the
    namespace: every node's name and address, and no name server. Why: a JVM in the namespace
    resolves addresses - Kafka's SASL server asks the listener address's host name before it
    creates a SaslServer (SaslServerAuthenticator.createSaslServer, serverAddress().getHostName()) -
    and the machine's own name server is unreachable from the cluster's network, so every lookup
    waited out its timeouts (SASL handshakes hung past the clients' 5 s)."""
    d = _etc(netns)
    d.mkdir(parents=True, exist_ok=True)
    lines = ["127.0.0.1 localhost", f"127.0.1.1 {socket.gethostname()}"] + [f"{a} {h}" for h, a in names.items()]
    (d / "hosts").write_text("# faultline: the embedded cluster's nodes\n" + "\n".join(lines) + "\n")
    (d / "resolv.conf").write_text("# faultline: no name server in the embedded cluster's network\n"
                                   "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")


@contextlib.contextmanager
def _subnet_lock() -> Iterator[None]:
    """An exclusive lock for this machine (flock: released when the process dies). Not in the
    state dir: subnets are the machine's, and runs with state dirs of their own (tests set
    FAULTLINE_STATE_DIR per run) must not pick one /24 together either."""
    with open(Path(tempfile.gettempdir()) / "faultline-cluster-net.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def remove(record: dict[str, Any], timeout: float = 10.0) -> list[str]:
    """Undo :meth:`ClusterNet.up` from its ledger record: kill what runs in each namespace,
    delete the namespaces, the veths and the bridge, and drop its FORWARD rule. Idempotent;
    returns what could not be removed (empty when all went)."""
    left: list[str] = []
    for ns in record.get("netns") or []:
        pids = _ip("netns", "pids", ns, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except (OSError, ValueError):
                pass
        _ip("netns", "del", ns, check=False)
        shutil.rmtree(_etc(ns), ignore_errors=True)
    veths = list(record.get("veths") or [])
    for v in veths:
        _ip("link", "del", "dev", v, check=False)
    bridge = record.get("bridge")
    if bridge:
        _ip("link", "del", "dev", bridge, check=False)
        while subprocess.run(["iptables", "-D", "FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT", "-m", "comment",
                              "--comment", FORWARD_TAG + bridge], capture_output=True).returncode == 0:
            pass
    deadline = time.monotonic() + timeout
    names = [*veths, *([bridge] if bridge else [])]
    while time.monotonic() < deadline:
        still = [v for v in names if _ip("link", "show", "dev", v, check=False).returncode == 0]
        still += [ns for ns in record.get("netns") or [] if os.path.exists(f"/var/run/netns/{ns}")]
        if not still:
            return []
        for v in still:
            _ip("link", "del", "dev", v, check=False)
        time.sleep(0.05)
    left += still
    return left
