"""A real Apache Kafka cluster for nemesis tests, started exactly as `faultline run --target
apache-kafka:V` starts one, and the probes that show what a fault did to it.

Why the launcher and not a test-only starter: the nodes a nemesis acts on here are the harness's
own ``ClusterNode``s, read from the ``RUN/inventory.yaml`` that ``targets.apache_kafka`` writes
(its ``kafka_service`` command, pid file and ``format``, each node in its network namespace), so
the code a test exercises is the code a real run uses. The nodes' disks are plain directories
(no lossyfs mount, which `faultline run` adds by default): the nemeses shown here act on Kafka's
files whatever filesystem holds them, and lossyfs's own crash is tests/lossyfs's.

The probes ask the running cluster, never the fault's own record: a TCP connect from inside one
node's namespace to another node's listener, the partition state the observer's Kafka requests
return (workloads/observer.py), the brokers the cluster lists as alive (AdminClient: Metadata
lists only unfenced brokers), the controller quorum (DescribeQuorum), the broker epoch a broker
states in its own log, a process's state in /proc.
"""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from groundwork.clock import RunClock
from groundwork.ledger import Ledger
from groundwork.timeline import Timeline
from harness.cluster import Cluster, ClusterNode
from harness.inventory import load_inventory
from nemeses.base import REGISTRY, Nemesis, NemesisContext
from nemeses.netfilter import tagged_rules
from targets import apache_kafka
from targets.apache_kafka import BROKER_PORT, CONTROLLER_PORT, EmbeddedApacheKafka
from tests.support.kafka import releases_under_test
from workloads.controller_quorum import QuorumSampler
from workloads.kafka_wire import parse_bootstrap
from workloads.observer import Observer

#: one 3.x and one 4.x release (log4j 1 and 2, KRaft without and with pre-vote, StorageTool before
#: and after its 4.0 rewrite): tests/kafka-releases.txt, which the setup script installs
RELEASES = tuple(releases_under_test())
#: seconds Kafka gets for a reaction that takes a few on an idle machine (a fence after the 3 s
#: session timeout, an election, an ISR change): others' work shared this two-core machine at load
#: averages of 20-80 while these tests were written, and a starved controller took ~30 s
SLOW = 60
#: Kafka's own statement of a registration (BrokerLifecycleManager, both releases)
REGISTERED_RE = re.compile(r"Successfully registered broker (\d+) with broker epoch (\d+)")


def wait_for(pred: Callable[[], Any], timeout: float, what: str, poll: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(poll)


def nemesis(name: str, ctx: NemesisContext) -> Nemesis:
    """A nemesis of the registry, set up on ``ctx`` as a schedule sets one up."""
    nem = REGISTRY[name]()
    nem.setup(ctx)
    return nem


def meta_properties(d: Path) -> dict[str, str]:
    """A log dir's meta.properties: who the node is (node.id, cluster.id, directory.id)."""
    return dict(ln.split("=", 1) for ln in (d / "meta.properties").read_text().splitlines()
                if "=" in ln and not ln.startswith("#"))


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root`` (/proc/mounts; octal escapes as the kernel writes them)."""
    top = str(root)
    with open("/proc/mounts", encoding="utf-8") as fh:
        points = [ln.split()[1].encode().decode("unicode_escape") for ln in fh if len(ln.split()) > 1]
    return [m for m in points if m == top or m.startswith(top.rstrip("/") + "/")]


def proc_state(pid: int) -> str | None:
    """The process's state letter (R, S, T, Z, ...), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


#: run inside a node's namespace: connect to every (name, host, port) at once, print {name: ok}
_PROBE = """
import json, socket, sys, threading
out = {}
def go(name, host, port):
    try:
        socket.create_connection((host, port), timeout=float(sys.argv[2])).close()
        out[name] = True
    except OSError:
        out[name] = False
ts = [threading.Thread(target=go, args=t) for t in json.loads(sys.argv[1])]
[t.start() for t in ts]
[t.join() for t in ts]
print(json.dumps(out))
"""


_UDP_LISTEN = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.settimeout(1.5)
print("ready", flush=True)
try:
    s.recv(64)
    print("got")
except OSError:
    print("none")
"""
_UDP_SEND = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(5):
    s.sendto(b"faultline", (sys.argv[1], int(sys.argv[2])))
    time.sleep(0.05)
"""

_TCP_SINK = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
while c.recv(65536):
    pass
c.sendall(b"k")
c.close()
"""
_TCP_SOURCE = """
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60)
t = time.monotonic()
c.sendall(b"x" * int(sys.argv[3]))
c.shutdown(socket.SHUT_WR)
c.recv(1)
print(time.monotonic() - t)
"""


class RealCluster:
    """One embedded Apache Kafka cluster in ``root`` (a run directory of its own)."""

    def __init__(self, root: Path, version: str, *, controllers: int = 1, brokers: int = 3,
                 settings: dict[str, Any] | None = None):
        self.root, self.version = root, version
        root.mkdir(parents=True, exist_ok=True)
        self.ledger = Ledger(root / "ledger.jsonl")
        self.k = EmbeddedApacheKafka(root, version=version, brokers=brokers, controllers=controllers,
                                     settings=dict(settings or {}), ledger=self.ledger)
        self.cluster: Cluster | None = None
        self.nodes: dict[str, ClusterNode] = {}
        self.bootstrap = ""

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> "RealCluster":
        self.bootstrap = self.k.start()
        inv = load_inventory(self.k.write_inventory())
        self.cluster = Cluster.from_inventory(inv, embedded=self.k)
        self.nodes = dict(self.cluster.nodes)
        self.inventory = inv
        return self

    def record(self) -> dict[str, Any]:
        """What `faultline heal` would get from the ledger for this cluster."""
        return {"dir": str(self.k.dir), **({"net": self.k.net.record()} if self.k.net is not None else {})}

    def stop(self) -> None:
        """Stop everything, whatever state a failed test left (idempotent)."""
        try:
            self.k.stop()
        finally:
            apache_kafka.heal(self.record())

    def leftovers(self, timeout: float = 10.0) -> list[str]:
        """What of this cluster still exists on the machine: JVMs naming its directory, its
        namespaces, this machine's end of its network (waiting ``timeout`` s for SIGKILLed JVMs to
        finish exiting)."""
        deadline = time.monotonic() + timeout
        while (left := self._leftovers()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left

    def _leftovers(self) -> list[str]:
        out = [f"pid {p}" for p in subprocess.run(["pgrep", "-f", "--", str(self.k.dir)], capture_output=True,
                                                    text=True).stdout.split()]
        net = self.k.net.record() if self.k.net is not None else {}
        have = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
        out += [f"netns {ns}" for ns in net.get("netns", []) if ns in have]
        out += [f"/etc/netns/{ns}" for ns in net.get("netns", []) if Path("/etc/netns", ns).exists()]
        out += [f"mount {m}" for m in mounts_under(self.root)]
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        out += [f"link {d}" for d in [net.get("bridge"), *net.get("veths", [])]
                if d and re.search(rf"^\d+: {re.escape(d)}[@:]", links, re.M)]
        return out

    # -- nemesis plumbing --------------------------------------------------------------------
    def ctx(self, tmp: Path, seed: int = 7, **settings: Any) -> NemesisContext:
        """A nemesis context over the cluster's own nodes, with a ledger and timeline in ``tmp``."""
        tmp.mkdir(parents=True, exist_ok=True)
        # the faults' ledger names a copy of the run's inventory without its "generated" first line:
        # `faultline heal` of a generated (dead run's) inventory also kills that run's cluster once
        # its faults are healed (harness/heal.py), and this cluster must outlive each test
        inv = tmp / "inventory.yaml"
        inv.write_text("".join((self.root / "inventory.yaml").read_text().splitlines(keepends=True)[1:]))
        return NemesisContext(nodes=dict(self.nodes), timeline=Timeline(tmp / "timeline.jsonl", RunClock()),
                              ledger=Ledger(tmp / "ledger.jsonl"), rng=random.Random(seed),
                              inventory_path=str(inv),
                              settings={"bootstrap.servers": self.bootstrap, **settings})

    def node(self, name: str) -> ClusterNode:
        return self.nodes[name]

    def pid(self, name: str) -> int | None:
        pids = self.nodes[name].service_pids()
        return pids[0] if pids else None

    def brokers(self) -> list[str]:
        return [n for n, x in self.nodes.items() if x.role == "broker"]

    def controllers(self) -> list[str]:
        return [n for n, x in self.nodes.items() if x.role == "controller"]

    def name_of(self, node_id: int) -> str:
        return next(n for n, x in self.nodes.items() if x.node_id == node_id)

    def port(self, name: str) -> int:
        return BROKER_PORT if self.nodes[name].role == "broker" else CONTROLLER_PORT

    # -- Kafka's view --------------------------------------------------------------------------
    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def alive_brokers(self) -> set[int]:
        """Broker ids the cluster lists (Metadata: registered and unfenced); empty when none answers."""
        admin = self.admin()   # held: a future of a collected client fails with _DESTROY
        try:
            return {n.id for n in admin.describe_cluster(request_timeout=5).result(timeout=8).nodes}
        except Exception:  # noqa: BLE001 - a cluster that does not answer lists nobody
            return set()

    def create_topic(self, name: str, partitions: int = 1, rf: int = 3, min_isr: int = 2,
                     config: dict[str, str] | None = None) -> None:
        admin = self.admin()

        def attempt() -> bool:   # a broker a previous test restarted may not be unfenced yet
            fut = admin.create_topics([NewTopic(name, partitions, rf, config={
                "min.insync.replicas": str(min_isr), **(config or {})})])[name]
            try:
                fut.result(30)
                return True
            except Exception as e:  # noqa: BLE001
                if "TOPIC_ALREADY_EXISTS" in str(e):
                    return True
                if "INVALID_REPLICATION_FACTOR" not in str(e):
                    raise
                return False
        wait_for(attempt, 60, f"topic {name} created", poll=0.5)
        wait_for(lambda: (s := self.state(name)) and len(s) == partitions
                 and all(p["leader"] is not None and len(p["isr"] or []) == rf for p in s.values()),
                 60, f"every partition of {name} led with a full ISR")

    def produce(self, topic: str, n: int, prefix: str = "m", partition: int | None = 0) -> int:
        """``n`` acks=all writes; how many were acknowledged."""
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5,
                      "message.timeout.ms": 30000, "enable.idempotence": True})
        acked: list[bool] = []
        for i in range(n):
            kw = {} if partition is None else {"partition": partition}
            p.produce(topic, f"{prefix}{i}".encode(), on_delivery=lambda err, msg: acked.append(err is None), **kw)
            p.poll(0)
        p.flush(40)
        return sum(acked)

    def state(self, topic: str) -> dict[int, dict[str, Any]]:
        """Every partition's leader, leader epoch and ISR, as the observer's requests get them."""
        obs = Observer(self.bootstrap, topic, self.root / "probe-observer.jsonl", time.time, quorum_path=None)
        try:
            return {r["partition"]: r for r in obs.sample() if r["partition"] is not None and r["error"] is None}
        except Exception:  # noqa: BLE001 - no broker answered
            return {}
        finally:
            obs.stop()

    def wait_state(self, topic: str, pred: Callable[[dict[str, Any]], bool], timeout: float, what: str,
                   partition: int = 0) -> dict[str, Any]:
        return wait_for(lambda: (p := self.state(topic).get(partition)) is not None and pred(p) and p,
                        timeout, what, poll=0.25)

    def quorum(self) -> dict[str, Any]:
        """DescribeQuorum through a broker (it forwards to the controllers): the active controller
        (``leader_id``), its epoch, each voter's log end offset; {} when no broker answers."""
        q = QuorumSampler(lambda: parse_bootstrap(self.bootstrap), self.root / "probe-quorum.jsonl", time.time,
                          request_timeout=3.0)
        try:
            rec = q.sample()
        finally:
            q.stop()
        return rec if rec and rec.get("error") is None else {}

    def server_log(self, name: str) -> str:
        """The node's server.log with the files log4j rolled it into every hour (server.log.HOUR),
        oldest first."""
        logs = Path(self.nodes[name].spec.log_dir or "")
        rolled = sorted(logs.glob("server.log.*"))
        return "".join(f.read_text(errors="replace") for f in [*rolled, logs / "server.log"] if f.exists())

    def broker_epochs(self, name: str) -> list[int]:
        """Every broker epoch the broker says it registered with, in order (its server.log)."""
        return [int(e) for b, e in REGISTERED_RE.findall(self.server_log(name)) if int(b) == self.nodes[name].node_id]

    # -- the network, as the nodes see it ------------------------------------------------------
    def reach(self, sources: list[str] | None = None, timeout: float = 1.5) -> dict[tuple[str, str], bool]:
        """(source, destination) -> whether a TCP connection from inside the source's namespace to
        the destination's Kafka listener is established, for every ordered pair of nodes."""
        names = list(self.nodes)
        procs = {}
        for s in sources or names:
            targets = [(d, self.nodes[d].address, self.port(d)) for d in names if d != s]
            procs[s] = subprocess.Popen(["ip", "netns", "exec", self.nodes[s].transport.netns, sys.executable, "-c",
                                         _PROBE, json.dumps(targets), str(timeout)],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out: dict[tuple[str, str], bool] = {}
        for s, p in procs.items():
            so, se = p.communicate(timeout=30)
            assert p.returncode == 0, f"probe from {s} failed: {se[-500:]}"
            out.update({(s, d): ok for d, ok in json.loads(so).items()})
        return out

    def udp_delivered(self, src: str, dst: str, port: int = 39091) -> bool:
        """Whether datagrams sent from inside ``src``'s namespace reach a socket in ``dst``'s: one
        direction alone, where a TCP connect needs both."""
        listen = subprocess.Popen(["ip", "netns", "exec", self.nodes[dst].transport.netns, sys.executable, "-c",
                                   _UDP_LISTEN, str(port)], stdout=subprocess.PIPE, text=True)
        try:
            assert listen.stdout is not None and listen.stdout.readline().strip() == "ready"
            subprocess.run(["ip", "netns", "exec", self.nodes[src].transport.netns, sys.executable, "-c", _UDP_SEND,
                            self.nodes[dst].address, str(port)], check=True, timeout=30)
            out, _ = listen.communicate(timeout=30)
            return out.strip() == "got"
        finally:
            if listen.poll() is None:
                listen.kill()

    def send_seconds(self, src: str, dst: str, nbytes: int, port: int = 39092) -> float:
        """Seconds to push ``nbytes`` over TCP from inside ``src``'s namespace to ``dst``'s, until
        the receiver has read them all (its acknowledgement closes the measure)."""
        listen = subprocess.Popen(["ip", "netns", "exec", self.nodes[dst].transport.netns, sys.executable, "-c",
                                   _TCP_SINK, str(port)], stdout=subprocess.PIPE, text=True)
        try:
            assert listen.stdout is not None and listen.stdout.readline().strip() == "ready"
            out = subprocess.run(["ip", "netns", "exec", self.nodes[src].transport.netns, sys.executable, "-c",
                                  _TCP_SOURCE, self.nodes[dst].address, str(port), str(nbytes)],
                                 capture_output=True, text=True, check=True, timeout=120).stdout
            listen.wait(30)
            return float(out.strip())
        finally:
            if listen.poll() is None:
                listen.kill()

    def faultline_rules(self) -> dict[str, list[list[str]]]:
        """Every faultline-tagged iptables rule in any node's namespace (filter and nat)."""
        out = {}
        for n, x in self.nodes.items():
            rules = tagged_rules(x.transport) + tagged_rules(x.transport, table="nat")
            if rules:
                out[n] = rules
        return out
