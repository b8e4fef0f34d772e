"""Test hosts in network namespaces on one dedicated subnet, created and removed by tests.

Why: partitions, SSH reconnects and per-host faults need hosts with their own IPs and
their own iptables, and this machine can reach no network but its own. Every lab uses
10.250.<lab>.0/24 on a bridge of its own, namespaces named ``fl-<lab>-<host>``; nothing
is ever sent outside that subnet. ``NetLab`` is a context manager and also registers an
atexit cleanup, so a failing test still removes what it made; ``cleanup_stale`` removes
leftovers of a previous crashed session.

Names are reused: the next lab of the same name creates the same veth names. The kernel
destroys a deleted namespace, and the veth pairs inside it, asynchronously, so a host end can
outlive ``ip netns del`` long enough for the next ``ip link add`` to fail with "File exists".
So ``down`` deletes every host-side veth itself and waits until the kernel no longer lists it,
and ``up`` removes a stale link of its own name first (saying so on stderr).
"""
from __future__ import annotations

import atexit
import subprocess
import sys
import time
from dataclasses import dataclass, field

SUBNET_PREFIX = "10.250"

#: one third octet per lab, so suites that run at the same time never collide. "docker" and
#: "nemdock" are Docker networks (tests/remote/dockerlab.py, tests/nemeses/test_remote_nemeses.py),
#: never a NetLab; 10.250.9.x names hosts that do not exist (inventories that must not connect);
#: "jump" is the SSH lab whose hosts only a jump host may reach (tests/remote/test_ssh_jump.py).
LABS = {"ssh": 1, "part": 2, "docker": 3, "kraft": 4, "e2e": 5, "nem": 6, "misc": 7, "nemdock": 8,
        "jump": 10}


def sh(*args: str, check: bool = True, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, input=input, timeout=timeout)


@dataclass
class NetLab:
    lab: str
    hosts: list[str]
    bridge: str = ""
    ips: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        octet = LABS[self.lab]
        self.bridge = self.bridge or f"flbr-{self.lab}"[:15]
        self.gateway = f"{SUBNET_PREFIX}.{octet}.1"
        for i, h in enumerate(self.hosts):
            self.ips[h] = f"{SUBNET_PREFIX}.{octet}.{10 + i}"

    def ns(self, host: str) -> str:
        return f"fl-{self.lab}-{host}"

    @property
    def subnet(self) -> str:
        return f"{SUBNET_PREFIX}.{LABS[self.lab]}.0/24"

    def up(self) -> "NetLab":
        atexit.register(self.down)
        self.down()
        # another device routing this subnet (a Docker network left by a killed run, say) takes
        # the host's traffic to the lab: every connection would time out, with no clue why
        held = [l.split(" dev ")[1].split()[0] for l in sh("ip", "-o", "route", "show", self.subnet).stdout.splitlines()
                if " dev " in l]
        if held:
            raise RuntimeError(f"netlab {self.lab}: {self.subnet} is already routed via {', '.join(held)} - "
                               "a leftover Docker network or lab? (see `ip route`, `docker network ls`)")
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        # dockerd sets FORWARD's policy to DROP and loads br_netfilter, which silently drops
        # traffic between namespaces on one bridge; let this lab's own bridge forward.
        sh("iptables", "-I", "FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT",
           "-m", "comment", "--comment", f"netlab-{self.lab}")
        for i, h in enumerate(self.hosts):
            ns = self.ns(h)
            veth_host, veth_ns = self.veths(i)
            stale = [n for n in (veth_host, veth_ns) if link_exists(n)]
            if stale:
                print(f"netlab {self.lab}: removing stale link(s) {', '.join(stale)} before creating them",
                      file=sys.stderr)
                delete_links(stale)
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", veth_host, "type", "veth", "peer", "name", veth_ns)
            sh("ip", "link", "set", veth_ns, "netns", ns)
            sh("ip", "link", "set", veth_host, "master", self.bridge)
            sh("ip", "link", "set", veth_host, "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{self.ips[h]}/24", "dev", veth_ns)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", veth_ns, "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            sh("ip", "netns", "exec", ns, "ip", "route", "add", "default", "via", self.gateway)
        return self

    def veths(self, i: int) -> tuple[str, str]:
        """The host end and the namespace end of host ``i``'s veth pair."""
        return f"flv{LABS[self.lab]}h{i}", f"flv{LABS[self.lab]}n{i}"

    def exec(self, host: str, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return sh("ip", "netns", "exec", self.ns(host), *args, check=check, timeout=timeout)

    def down(self) -> None:
        for h in self.hosts:
            ns = self.ns(h)
            # kill anything still running inside the namespace, then remove it
            pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                sh("kill", "-9", pid, check=False)
            sh("ip", "netns", "del", ns, check=False)
        # the host ends outlive their namespace until the kernel gets round to it: delete them
        # here and wait, so the next lab of this name can create them again
        delete_links([self.veths(i)[0] for i in range(len(self.hosts))])
        sh("ip", "link", "del", self.bridge, check=False)
        _drop_forward_rules(self.bridge, self.lab)

    def __enter__(self) -> "NetLab":
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()


def link_exists(name: str) -> bool:
    return sh("ip", "link", "show", "dev", name, check=False).returncode == 0


def delete_links(names: list[str], timeout: float = 10.0) -> None:
    """Delete each link and wait (bounded) until the kernel no longer lists any of them; a
    link still listed after ``timeout`` is an error that names it, not a later "File exists"."""
    for name in names:
        sh("ip", "link", "del", "dev", name, check=False)
    deadline = time.monotonic() + timeout
    left = [n for n in names if link_exists(n)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        for n in left:
            sh("ip", "link", "del", "dev", n, check=False)
        left = [n for n in left if link_exists(n)]
    if left:
        raise RuntimeError(f"netlab: the kernel still lists {', '.join(left)} {timeout:.0f}s after deleting it")


def _drop_forward_rules(bridge: str, lab: str) -> None:
    while sh("iptables", "-D", "FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT",
             "-m", "comment", "--comment", f"netlab-{lab}", check=False).returncode == 0:
        pass


def cleanup_stale(lab: str) -> None:
    """Remove namespaces and the bridge of ``lab`` left by an earlier crashed run."""
    out = sh("ip", "netns", "list", check=False).stdout
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(f"fl-{lab}-"):
            for pid in sh("ip", "netns", "pids", name, check=False).stdout.split():
                sh("kill", "-9", pid, check=False)
            sh("ip", "netns", "del", name, check=False)
    prefix = f"flv{LABS[lab]}"
    links = [line.split(":")[1].strip().split("@")[0]
             for line in sh("ip", "-o", "link", "show", check=False).stdout.splitlines() if line.count(":") >= 2]
    delete_links([n for n in links if n.startswith(prefix)])
    sh("ip", "link", "del", f"flbr-{lab}"[:15], check=False)
    _drop_forward_rules(f"flbr-{lab}"[:15], lab)
