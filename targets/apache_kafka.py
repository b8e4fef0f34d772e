"""The embedded Apache Kafka target: a real KRaft cluster of ``kafka.Kafka`` JVMs for one run.

Why: every claim faultline makes about Kafka must hold on Kafka. This launcher starts a real
cluster of any release 3.3+ from the release cache (targets/releases.py) on this machine, each
node a JVM of its own with its own address (a network namespace, targets/netns.py), log dirs,
metadata log dir, server.properties and log4j files, and then describes it as kraftsim's
launcher does: ``RUN/inventory.yaml``, a plain local inventory (``kafka_service: {command,
pidfile, log, format}``, ``kafka_data_dirs``, ``kafka_metadata_log_dir``, ``kafka_config``,
``kafka_log_dir``). From there the run loop, the nemeses, `faultline heal` and preflight treat it
exactly like a lab - the code a real-Kafka test exercises is the code a lab run uses.

The cluster: dedicated controllers (1 or 3, a static quorum: ``controller.quorum.voters``, each
node formatted plainly with ``kafka-storage format -t ID -c FILE [-r metadata.version]``; with
``kraft.version: 1`` KIP-853's dynamic quorum: ``controller.quorum.bootstrap.servers``, the first
format ``--initial-controllers`` with a directory id per voter, a disk wipe's re-format
``--no-initial-controllers``) and
brokers; or, ``combined``, nodes that are both. Node names and ids are kraftsim's
(``controller`` or ``controller-1..N`` with ids 1000.., ``broker-1..N`` with ids 1..N), so a
campaign's selectors mean the same on both targets. Settings are sorted by
targets/kafka_settings.py. JVMs get small heaps, the serial collector and C1 only: six of them
share two cores here, and none of that changes what Kafka decides.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

import yaml

from groundwork.config import ConfigError
from groundwork.ledger import Ledger, new_id
from groundwork.transport.local import LocalTransport
from targets import kafka_cds, releases
from targets.base import InfraError
from targets.kafka_log4j import write as write_log4j
from targets.kafka_security import ListenerSecurity, issue as issue_certificate
from targets.kafka_settings import KafkaSettings, random_uuid, server_properties, sort
from targets.kraftsim import check_settings, kill_embedded, kill_pid_files
from targets.netns import ClusterNet, remove as remove_net

BROKER_PORT = 9092
CONTROLLER_PORT = 9093
CONTROLLER_ID = 1000   # kraftsim's numbering (kraftsim/cluster.py)
#: JVM options every node gets (kafka-run-class.sh's -Djava.awt.headless, plus what keeps six JVMs
#: on two cores: small heaps, the serial collector, C1 only)
JVM_OPTS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true")
#: heap per role: the broker allocates its log cleaner's 128 MiB dedupe buffer
#: (log.cleaner.dedupe.buffer.size) from its heap
HEAP = {"broker": "512m", "controller": "256m", "combined": "512m"}
READY_RE = re.compile(r"Kafka Server started|\[KafkaRaftServer nodeId=\d+\] Kafka Server started")
#: KafkaConfig/AbstractConfig.logUnused: a key Kafka does not know is only a warning in its log
UNKNOWN_KEY_RE = re.compile(r"The configuration '([^']+)' was supplied but isn't a known config")


class Disks(Protocol):
    """Mounts a node's disk for the run and removes it at the end (the harness passes lossyfs's,
    nemeses/lossyfs.py RunDisks: each mount its own heal-ledger entry, written before it exists)."""

    def mount(self, backing: Path, mountpoint: Path) -> Any: ...

    def unmount(self, handle: Any) -> None: ...


@dataclass
class NodePlan:
    name: str
    role: str          # broker | controller | combined
    node_id: int
    address: str = ""
    netns: str = ""

    @property
    def is_broker(self) -> bool:
        return self.role in ("broker", "combined")

    @property
    def is_controller(self) -> bool:
        return self.role in ("controller", "combined")


def plan_nodes(brokers: int, controllers: int, combined: bool) -> list[NodePlan]:
    """kraftsim's names and ids; combined: the first ``controllers`` brokers are voters too."""
    if combined:
        if controllers > brokers:
            raise ConfigError(None, "apache_kafka.controllers", f"{controllers} voters in combined mode need as many "
                              f"nodes; the cluster has {brokers}")
        return [NodePlan(f"broker-{i}", "combined" if i <= controllers else "broker", i) for i in range(1, brokers + 1)]
    names = ["controller"] if controllers == 1 else [f"controller-{k}" for k in range(1, controllers + 1)]
    return [NodePlan(n, "controller", CONTROLLER_ID + k) for k, n in enumerate(names)] + \
        [NodePlan(f"broker-{i}", "broker", i) for i in range(1, brokers + 1)]


class EmbeddedApacheKafka:
    """A real KRaft cluster for one run, registered in the heal ledger before anything exists."""

    def __init__(self, run_dir: Path, *, version: str | None, brokers: int, controllers: int,
                 settings: dict[str, Any], ledger: Ledger, combined: bool = False,
                 say: Callable[[str], None] = lambda s: None, java: str | None = None,
                 disks: Disks | None = None, security: ListenerSecurity | None = None):
        self.run_dir = run_dir
        self.dir = run_dir / "cluster"
        self.ledger = ledger
        self.say = say
        self.java = java or shutil.which("java") or "java"
        self.kafka: KafkaSettings = sort(settings)
        self.version = resolve_release(version, self.kafka)
        self.controller_version = self.kafka.controller_release or self.version
        self.cluster_id = self.kafka.cluster_id or random_uuid()
        self._voter_dirs: dict[str, str] = {}   # KIP-853: each voter's metadata log dir id (initial_controllers)
        self.nodes = plan_nodes(brokers, controllers, combined)
        self.entry_id = new_id("p")
        self.bootstrap = ""
        self.net: ClusterNet | None = None
        self.metadata_version: str | None = None
        self.releases: dict[str, releases.Release] = {}
        self._commands: dict[str, str] = {}     # node -> its JVM command line (the inventory's restart command)
        self.disks = disks
        #: the brokers' listener when secured (SASL_SSL or SSL, targets/kafka_security.py); None: PLAINTEXT
        self.security = security
        self._mounts: list[Any] = []

    # -- layout ---------------------------------------------------------------------------
    def node_dir(self, n: NodePlan) -> Path:
        return self.dir / n.name

    def disk(self, n: NodePlan) -> Path:
        """The node's disk: its log dirs and metadata log dir, and nothing else (its log4j files and
        process log stay beside it, as a host's /var/log outlives a lost page cache). With
        :attr:`disks` it is a lossyfs mount of ``disk.backing``, so a crash keeps exactly what Kafka
        fsynced (reboot ``mode: lossyfs``)."""
        return self.node_dir(n) / "disk"

    def data_dir(self, n: NodePlan) -> Path:
        return self.disk(n) / "data"

    def metadata_dir(self, n: NodePlan) -> Path:
        """A controller's KRaft metadata log (``metadata.log.dir``); a broker keeps its copy in its
        first log dir, Kafka's default."""
        return self.disk(n) / ("metadata" if n.role == "controller" else "data")

    def tls_dir(self, n: NodePlan) -> Path:
        return self.node_dir(n) / "tls"

    @property
    def listener(self) -> str:
        """The brokers' listener name (and protocol): PLAINTEXT, or the secured one."""
        return self.security.listener if self.security else "PLAINTEXT"

    def release_of(self, n: NodePlan) -> releases.Release:
        return self.releases[self.controller_version if n.role == "controller" else self.version]

    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{n.address}:{CONTROLLER_PORT}" for n in self.nodes if n.is_controller)

    @property
    def dynamic_quorum(self) -> bool:
        return self.kafka.kraft_version == "1"

    def initial_controllers(self) -> str:
        """``--initial-controllers``: every voter as id@host:port:directory-id (KIP-853). The ids are
        drawn once per cluster; the format writes each into its node's metadata log dir."""
        if not self._voter_dirs:
            self._voter_dirs = {n.name: random_uuid() for n in self.nodes if n.is_controller}
        return ",".join(f"{n.node_id}@{n.address}:{CONTROLLER_PORT}:{self._voter_dirs[n.name]}"
                        for n in self.nodes if n.is_controller)

    def properties(self, n: NodePlan) -> dict[str, str]:
        """server.properties of one node: its identity and layout, then the campaign's settings."""
        boot = ",".join(f"{c.address}:{CONTROLLER_PORT}" for c in self.nodes if c.is_controller)
        return node_properties(n.role, n.node_id, n.address, voters=self.voters(),
                               bootstrap=boot if self.dynamic_quorum else None,
                               log_dirs=[str(self.data_dir(n) if n.is_broker else self.metadata_dir(n))],
                               metadata_log_dir=str(self.metadata_dir(n)) if n.role == "controller" else None,
                               brokers=sum(1 for x in self.nodes if x.is_broker), settings=self.kafka,
                               listener=self.listener,
                               secured=self.security.broker_properties(self.tls_dir(n)) if self.security else None)

    def jvm_command(self, n: NodePlan, log4j_prop: str) -> str:
        rel = self.release_of(n)
        return jvm_command(self.java, n.role, rel.classpath, self.node_dir(n) / "logs", log4j_prop,
                           self.dir / f"{n.name}.properties", kafka_cds.java_options(rel, self.java))

    def format_command(self, n: NodePlan, first: bool = False) -> str:
        """The node's format; ``first``: the cluster's own first format (a dynamic quorum's voters
        are named then), else a replaced disk's (the inventory's command: it joins as an observer)."""
        rel = self.release_of(n)
        quorum: tuple[str, ...] = ()
        if self.dynamic_quorum:
            quorum = (("--initial-controllers", self.initial_controllers()) if first and n.is_controller
                      else ("--no-initial-controllers",))
        return format_command(self.java, rel.classpath, self.cluster_id, self.dir / f"{n.name}.properties",
                              self.kafka, kafka_cds.java_options(rel, self.java), quorum)

    # -- start ---------------------------------------------------------------------------
    def start(self, timeout: float = 180.0) -> str:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.net = ClusterNet.plan([n.name for n in self.nodes])
        # the heal ledger first: a run killed from here on leaves nothing `faultline heal` cannot remove
        self.ledger.apply(self.entry_id, "process", {"what": "apache-kafka cluster", "dir": str(self.dir),
                                                     "net": self.net.record()})
        for v in sorted({self.version, self.controller_version}):
            self.releases[v] = releases.ensure(v, say=self.say)
            kafka_cds.ensure(self.releases[v], self.java, JVM_OPTS, self.say, self.dir / "cds")
        self.net.up()   # may move to another free /24 than planned: addresses are read after it
        for n in self.nodes:
            n.address, n.netns = self.net.nodes[n.name].address, self.net.nodes[n.name].netns
            if self.security and n.is_broker:
                issue_certificate(self.security, self.tls_dir(n), n.address, n.name)
        log4j = {kind: write_log4j(self.dir, kind) for kind in {r.logging for r in self.releases.values()}}
        for n in self.nodes:
            for d in (self.node_dir(n) / "logs", self.data_dir(n) if n.is_broker else self.metadata_dir(n)):
                d.mkdir(parents=True, exist_ok=True)
            props = self.properties(n)
            (self.dir / f"{n.name}.properties").write_text(
                "# generated by faultline: the embedded Apache Kafka target\n"
                + "".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        self.say(f"formatting {len(self.nodes)} nodes' storage (Apache Kafka {self.version}) ...")
        self._format_all()
        if self.disks is not None:
            self._mount_disks()
        self.say(f"starting {len(self.nodes)} Kafka JVMs ...")
        deadline = time.monotonic() + timeout
        controllers_first = [n for n in self.nodes if n.role == "controller"]
        for group in (controllers_first, [n for n in self.nodes if n.role != "controller"]):
            for n in group:
                cmd = self.jvm_command(n, log4j[self.release_of(n).logging][1])
                pid = LocalTransport(n.name, netns=n.netns).spawn(cmd, log_path=str(self.node_dir(n) / "process.log"))
                (self.dir / f"{n.name}.pid").write_text(f"{pid}\n")
                self._commands[n.name] = cmd
            if group is controllers_first and group:
                self._wait_active_controller(group, deadline)
        self.bootstrap = ",".join(f"{n.address}:{BROKER_PORT}" for n in self.nodes if n.is_broker)
        self._wait_ready(timeout)
        self._refuse_unknown_keys()
        (self.dir / "features.json").write_text(json.dumps(self._features(), indent=1) + "\n", encoding="utf-8")
        return self.bootstrap

    def _format_all(self) -> None:
        """Every node's ``kafka-storage format`` at once (a JVM start each; two cores overlap them)."""
        # a SCRAM user goes into the bootstrap metadata of this first format only (its password on a
        # command line that is run, never stored: the inventory's re-format command has no --add-scram)
        scram = " ".join(shlex.quote(a) for a in self.security.format_args()) if self.security else ""
        procs = {n.name: subprocess.Popen(f"{self.format_command(n, first=True)} {scram}".strip(), shell=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for n in self.nodes}
        for name, p in procs.items():
            out, _ = p.communicate(timeout=120)
            (self.dir / name / "format.log").write_text(out or "", encoding="utf-8")
            if p.returncode != 0:
                last = _first_error(out or "")
                if "release version" in last.lower() or "metadata.version" in last.lower() or "feature" in last.lower():
                    raise ConfigError(None, "target.settings", f"Apache Kafka {self.release_of(self._node(name)).version} "
                                      f"refused to format {name}: {last}")
                raise InfraError(f"{name}: kafka-storage format failed: {last} (log: {self.dir / name / 'format.log'})")
            m = re.search(r"with metadata\.version (\S+?)\.?$", out or "", re.M)
            if m:
                self.metadata_version = m.group(1)

    def _mount_disks(self) -> None:
        """Every node's formatted disk moves to ``disk.backing`` and comes back as a lossyfs mount of
        it: what the format wrote is the durable start (a disk as provisioned), and from here on only
        what Kafka fsyncs survives a crash."""
        assert self.disks is not None
        self.say(f"mounting {len(self.nodes)} nodes' disks on lossyfs ...")
        for n in self.nodes:
            backing = self.node_dir(n) / "disk.backing"
            os.replace(self.disk(n), backing)
            self.disk(n).mkdir()
            self._mounts.append(self.disks.mount(backing, self.disk(n)))

    def _node(self, name: str) -> NodePlan:
        return next(n for n in self.nodes if n.name == name)

    def _wait_active_controller(self, controllers: list[NodePlan], deadline: float) -> None:
        """Until a controller's log says it became the active controller (QuorumController's
        "Becoming the active controller at epoch E"): the brokers start after that. Why: six JVMs
        starting at once on two loaded cores starved the quorum's 0.5-1 s raft timeouts, which
        elected 35-51 times in a minute (3.4.0, 3.9.0), and a broker gave up registering
        (initial.broker.registration.timeout.ms). A controller that exits first ends the wait."""
        while time.monotonic() < deadline:
            for n in controllers:
                pid = int((self.dir / f"{n.name}.pid").read_text().split()[0])
                if not LocalTransport(n.name).pid_alive(pid):
                    raise self._died(n)
                log = self.node_dir(n) / "logs" / "controller.log"
                try:
                    if "Becoming the active controller" in log.read_text(encoding="utf-8", errors="replace"):
                        return
                except OSError:
                    pass
            time.sleep(0.5)

    def _wait_ready(self, timeout: float) -> None:
        """Until every broker is registered and unfenced; a JVM that exits first ends the wait
        with its own last error line."""
        def check() -> None:
            for n in self.nodes:
                pid = int((self.dir / f"{n.name}.pid").read_text().split()[0])
                if not LocalTransport(n.name).pid_alive(pid):
                    raise self._died(n)

        want = sum(1 for n in self.nodes if n.is_broker)
        seen = wait_registered(self.bootstrap, want, timeout, check, client=self._client_settings())
        if seen < want:
            raise InfraError(f"Apache Kafka {self.version}: {seen} of {want} brokers registered within {timeout:g}s "
                             f"(logs: {self.dir}/<node>/logs/server.log)")

    def _client_settings(self) -> dict[str, str]:
        """librdkafka's settings for the readiness probe on a secured listener (the run's own clients
        get theirs from the generated inventory's kafka_client)."""
        sec = self.security
        if sec is None:
            return {}
        conf = {"security.protocol": sec.protocol, "ssl.ca.location": sec.ca_cert}
        if sec.protocol == "SASL_SSL":
            conf.update({"sasl.mechanism": str(sec.mechanism), "sasl.username": str(sec.username),
                         "sasl.password": sec.password()})
        return conf

    def _died(self, n: NodePlan) -> Exception:
        text = ""
        for f in (self.node_dir(n) / "logs" / "server.log", self.node_dir(n) / "process.log"):
            if f.exists():
                text += f.read_text(encoding="utf-8", errors="replace")
        last = _first_error(text) or "no error logged"
        m = re.search(r"(?:ConfigException|IllegalArgumentException): (.*)", text)
        if m:
            return ConfigError(None, "target.settings", f"Apache Kafka {self.release_of(n).version} refused "
                               f"{n.name}'s configuration: {m.group(1).strip()[:300]}")
        return InfraError(f"{n.name} (Apache Kafka {self.release_of(n).version}) exited while starting: {last} "
                          f"(log: {self.node_dir(n) / 'logs' / 'server.log'})")

    def _refuse_unknown_keys(self) -> None:
        """A key of the campaign that Kafka says it does not know (a typo Kafka itself only warns
        about) is the user's mistake: exit 2 naming it, not a run against defaults."""
        for n in self.nodes:
            f = self.node_dir(n) / "logs" / "server.log"
            text = f.read_text(encoding="utf-8", errors="replace") if f.exists() else ""
            unknown = sorted(set(UNKNOWN_KEY_RE.findall(text)) & self.kafka.given)
            if unknown:
                raise ConfigError(None, f"target.settings.{unknown[0]}", f"Apache Kafka {self.release_of(n).version} "
                                  "does not know this key (KafkaConfig: \"was supplied but isn't a known config\")")

    # -- the run's view of it -------------------------------------------------------------
    def write_inventory(self) -> Path:
        """RUN/inventory.yaml: the running cluster as a plain local inventory, one host per node in
        its own network namespace (``faultline_netns``) at its own address."""
        brokers: dict[str, Any] = {}
        controllers: dict[str, Any] = {}
        for n in self.nodes:
            host: dict[str, Any] = {
                "ansible_host": n.address, "faultline_netns": n.netns, "kafka_node_id": n.node_id,
                "kafka_listeners": (f"{self.listener}://{n.address}:{BROKER_PORT}" if n.is_broker
                                    else f"CONTROLLER://{n.address}:{CONTROLLER_PORT}"),
                "kafka_service": {"command": self._commands[n.name], "pidfile": str(self.dir / f"{n.name}.pid"),
                                  "log": str(self.node_dir(n) / "process.log"), "format": self.format_command(n)},
                "kafka_config": str(self.dir / f"{n.name}.properties"),
                "kafka_log_dir": str(self.node_dir(n) / "logs"),
                "kafka_version": self.release_of(n).version,
            }
            if n.is_broker:
                host["kafka_data_dirs"] = [str(self.data_dir(n))]
            if n.role == "controller":
                host["kafka_metadata_log_dir"] = str(self.metadata_dir(n))
            (controllers if n.role == "controller" else brokers)[n.name] = host
        assert self.net is not None
        gvars: dict[str, Any] = {"faultline_transport": "local", "kafka_bootstrap": self.bootstrap,
                                 "kafka_cluster_id": self.cluster_id, "kafka_implementation": "apache-kafka",
                                 "faultline_harness_address": self.net.gateway}
        if self.security:
            gvars["kafka_client"] = self.security.client(Path(self.security.ca_cert))
        doc = {"all": {"vars": gvars,
                       "children": {"brokers": {"hosts": brokers},
                                    **({"controllers": {"hosts": controllers}} if controllers else {})}}}
        path = self.run_dir / "inventory.yaml"
        path.write_text(GENERATED_HEADER + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        return path

    def features(self) -> dict[str, Any]:
        """``RUN/cluster/features.json`` as :meth:`start` wrote it (checkers/features.py reads it)."""
        return json.loads((self.dir / "features.json").read_text(encoding="utf-8"))

    def _features(self) -> dict[str, Any]:
        """What the cluster runs (:func:`features_of`), with the metadata.version the format wrote."""
        return features_of(self.version, self.kafka, self.metadata_version, self.cluster_id)

    def stop(self) -> None:
        """SIGKILL every JVM (the run's logs are already collected), unmount the disks, kill
        whatever else names the cluster's directory, remove the network, done.

        Why the JVMs by their pid files first and the rest only after the unmount: a lossyfs
        daemon's command line names the cluster's directory too, and one killed before it is
        asked to unmount leaves its control socket in /tmp and its pre-images in the backing
        directory; asked while alive, it removes both as it exits."""
        kill_pid_files(self.dir)
        problems = []
        for m in reversed(self._mounts):
            try:
                self.disks.unmount(m)  # type: ignore[union-attr]
            except Exception as e:  # noqa: BLE001 - the rest still goes; the ledger entry stays for heal
                problems.append(f"{getattr(m, 'mountpoint', m)}: {e}")
        self._mounts.clear()
        kill_embedded({"dir": str(self.dir)})
        left = remove_net(self.net.record()) if self.net is not None else []
        if left or problems:
            raise InfraError(f"could not remove the cluster's {'network: ' + ', '.join(left) if left else ''}"
                             f"{'; disks: ' + '; '.join(problems) if problems else ''} (run `faultline heal`)")
        self.ledger.healed(self.entry_id)


# -- what every real Kafka node needs, wherever it runs (this launcher, `faultline docker up`, a lab) --
def node_properties(role: str, node_id: int, address: str, *, voters: str, log_dirs: list[str],
                    metadata_log_dir: str | None, brokers: int, settings: KafkaSettings,
                    listener: str = "PLAINTEXT", secured: dict[str, str] | None = None,
                    bootstrap: str | None = None) -> dict[str, str]:
    """server.properties of one KRaft node (``role``: broker | controller | combined): its
    identity, listeners on ``address`` (a broker's named ``listener``, with ``secured``'s TLS/SASL
    properties when it is not PLAINTEXT) and layout, the internal topics sized for ``brokers``,
    then the campaign's settings (:func:`targets.kafka_settings.server_properties`)."""
    is_broker, is_controller = role in ("broker", "combined"), role in ("controller", "combined")
    roles = {"broker": "broker", "controller": "controller", "combined": "broker,controller"}[role]
    lst = listener
    p: dict[str, str] = {"process.roles": roles, "node.id": str(node_id),
                         "controller.listener.names": "CONTROLLER",
                         "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{lst}:{lst}"}
    if bootstrap:   # KIP-853: the voters are in the metadata log (VotersRecord), not the config
        p["controller.quorum.bootstrap.servers"] = bootstrap
    else:
        p["controller.quorum.voters"] = voters
    listeners = []
    if is_broker:
        listeners.append(f"{lst}://{address}:{BROKER_PORT}")
        p["advertised.listeners"] = f"{lst}://{address}:{BROKER_PORT}"  # 3.4-3.8 controllers refuse it
        p["inter.broker.listener.name"] = lst
        p.update(secured or {})
    if is_controller:
        listeners.append(f"CONTROLLER://{address}:{CONTROLLER_PORT}")
    p["listeners"] = ",".join(listeners)
    p["log.dirs"] = ",".join(log_dirs)
    if metadata_log_dir:
        p["metadata.log.dir"] = metadata_log_dir
    # the internal topics fit the cluster (Kafka's defaults want 3 brokers and 50 partitions)
    p.update({"offsets.topic.replication.factor": str(min(3, brokers)), "offsets.topic.num.partitions": "3",
              "transaction.state.log.replication.factor": str(min(3, brokers)),
              "transaction.state.log.min.isr": str(min(2, brokers)), "group.initial.rebalance.delay.ms": "0",
              # a broker restarted by a fault keeps trying to register while a starved quorum
              # elects (Kafka's 60 s, then the broker exits: "unable to register with the
              # controller quorum"); a campaign may still set its own
              "initial.broker.registration.timeout.ms": "300000"})
    p.update(server_properties(settings))
    return p


def jvm_command(java: str, role: str, classpath: str, logs_dir: Path | str, log4j_prop: str,
                config: Path | str, archive: tuple[str, ...] = ()) -> str:
    """The node's ``kafka.Kafka`` JVM as one shell command line (what kafka-server-start.sh runs):
    heap by role, :data:`JVM_OPTS`, the release's class archive (targets/kafka_cds.py), ``kafka.logs.dir``
    and the log4j config."""
    args = [java, f"-Xms{HEAP[role]}", f"-Xmx{HEAP[role]}", *JVM_OPTS, *archive, f"-Dkafka.logs.dir={logs_dir}", log4j_prop,
            "-cp", classpath, "kafka.Kafka", str(config)]
    return " ".join(shlex.quote(a) for a in args)


def format_command(java: str, classpath: str, cluster_id: str, config: Path | str, settings: KafkaSettings,
                   archive: tuple[str, ...] = (), quorum: tuple[str, ...] = ()) -> str:
    """``kafka-storage format`` as the release requires it for this node: the cluster's id, the
    campaign's metadata.version and features; ``--ignore-formatted`` so it formats only what a
    disk wipe emptied (the operator's command after a disk replacement)."""
    args = [java, "-Xmx128m", *JVM_OPTS, *archive, "-cp", classpath, "kafka.tools.StorageTool", "format",
            "-t", cluster_id, "-c", str(config), "--ignore-formatted"]
    if settings.metadata_version:
        args += ["-r", settings.metadata_version]
    for k, v in settings.features.items():
        args += ["--feature", f"{k}={v}"]
    args += quorum
    return " ".join(shlex.quote(a) for a in args)


def wait_registered(bootstrap: str, want: int, timeout: float, check: Callable[[], None] = lambda: None, *,
                    client: dict[str, str] | None = None) -> int:
    """Wait until ``want`` brokers are registered and unfenced (the Metadata response lists them);
    returns how many were seen last. ``check`` runs each round and raises to end the wait (a JVM
    that exited); ``client``: librdkafka's security settings for a secured listener. No client
    before every bootstrap port answers: librdkafka would log each refused connect."""
    from confluent_kafka.admin import AdminClient

    addrs = [(h, int(p)) for h, _, p in (x.rpartition(":") for x in bootstrap.split(","))]
    admin = None
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        check()
        if admin is None and all(_listening(h, p) for h, p in addrs):
            admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, **(client or {})})
        try:
            seen = len(admin.list_topics(timeout=2).brokers) if admin is not None else 0
        except Exception:  # noqa: BLE001 - not up yet
            seen = 0
        if seen >= want:
            return seen
        time.sleep(0.25)
    return seen


#: the first line of every inventory this launcher writes (harness/heal.py knows generated ones by it)
GENERATED_HEADER = "# generated by faultline: the embedded Apache Kafka cluster of this run\n"


def features_of(version: str, s: KafkaSettings, metadata_version: str | None = None,
                cluster_id: str | None = None) -> dict[str, Any]:
    """What a real cluster of ``version`` with settings ``s`` runs: the releases, the metadata.version
    (the one the format wrote, else the campaign's), and the gates kraftsim's table of Kafka's
    versions gives that pair (kraftsim/features.py: each gate cites the Kafka code and release), so
    the stories can name what decided a mechanism on real Kafka too. Starts nothing but
    ``python -m kraftsim cluster --check``."""
    sets: dict[str, Any] = {"kafka.version": version, **s.features}
    if metadata_version or s.metadata_version:
        sets["metadata.version"] = metadata_version or s.metadata_version
    if s.controller_release and s.controller_release != version:
        sets["controller.kafka.version"] = s.controller_release
    try:
        doc = check_settings(1, 1, sets)
    except (ConfigError, InfraError) as e:
        doc = {"kafka.version": version, "metadata.version": metadata_version, "gates_unknown": str(e)}
    doc.update({"implementation": "apache-kafka", "gates_source": "kraftsim/features.py (Kafka's versions, cited)"})
    if cluster_id:
        doc["cluster.id"] = cluster_id
    return doc


def planned_features(version: str | None, settings: dict[str, Any]) -> dict[str, Any]:
    """:func:`features_of` for a campaign not yet run (`faultline campaign check`): ConfigError for
    what real Kafka would refuse, nothing started."""
    s = sort(settings)
    return features_of(resolve_release(version, s), s)


def resolve_release(version: str | None, s: KafkaSettings) -> str:
    """The brokers' release: the target's version, else the campaign's ``kafka.version``, else the
    release that introduced its metadata.version (x.y.0, as kraftsim defaults it), else 4.1.0 -
    kraftsim's default metadata.version. A target version and a kafka.version that differ are
    refused: one campaign, one software."""
    if version and s.release and version != s.release:
        raise ConfigError(None, "target.settings.kafka.version", f"{s.release} differs from the target's release "
                          f"{version} (apache-kafka:{version}); give one of them")
    v = version or s.release
    if v is None and s.metadata_version:
        m = re.match(r"^(\d+)\.(\d+)", s.metadata_version)
        v = f"{m.group(1)}.{m.group(2)}.0" if m else None
    v = v or "4.1.0"
    try:
        releases.parse(v)
    except ValueError as e:
        raise ConfigError(None, "target.settings.kafka.version", str(e)) from None
    return v


def heal(record: dict[str, Any]) -> None:
    """`faultline heal` of a dead run's cluster: its JVMs, then its network."""
    kill_embedded(record)
    if record.get("net"):
        left = remove_net(record["net"])
        if left:
            raise InfraError(f"could not remove {', '.join(left)}")


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if " ERROR " in f" {ln} " or "Exception" in ln:
            return re.sub(r"^\[[^\]]*\]\s*", "", ln)[:300]
    return (lines[-1] if lines else "")[:300]
