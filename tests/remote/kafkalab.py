"""Real Apache Kafka on the SSH lab's hosts and in Docker containers, for the remote tests.

Why real JVMs over SSH: a lab's Kafka is a ``kafka.Kafka`` JVM started by a command on a host
faultline reaches through sshd; the lab's hosts are network namespaces sharing this machine's
filesystem, so each host runs the cached release's jars (targets/releases.py) in place, with the
command line, server.properties, log4j config and storage format the embedded target would give
it (targets/apache_kafka.py) - written and run through the inventory's own transports
(harness/kafka_hosts.py), as `faultline docker up` does for containers.

The Docker inventory is inventory/docker-kafka.yaml with test names (``fl-test-kafka-*``, network
``fl-test-kafka`` on the lab ``dockafka``'s subnet) and the ``faultline.test=1`` label, so teardown
removes exactly what the tests made (tests/remote/dockerlab.py).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from harness.cluster import ClusterNode, make_transport
from harness.inventory import load_inventory
from harness import kafka_hosts
from targets import releases
from targets.apache_kafka import format_command, jvm_command
from targets.kafka_log4j import write as write_log4j
from tests.remote.sshlab import SshLab
from tests.support.netlab import LABS

REPO = Path(__file__).resolve().parents[2]
VERSION = "4.1.0"
CLUSTER_ID = "faultline-sshlabkafkaA"   # a Kafka Uuid: 22 base64url characters
SETTINGS: dict[str, Any] = {"unclean.leader.election.enable": "false", "min.insync.replicas": 2,
                            "default.replication.factor": 3}
NETWORK = "fl-test-kafka"


def ssh_inventory(lab: SshLab, path: Path, version: str = VERSION, *, ssh_config: Path | None = None) -> Path:
    """An ssh inventory of the lab's hosts (``controller``, ``broker-N``) running Apache Kafka
    ``version``: root logins with the lab's key, each host's files under its lab dir. Other
    hosts (a jump host) are not Kafka's; ``ssh_config``: the OpenSSH client config the
    transport reads (``none`` without one: never this machine's ~/.ssh/config)."""
    rel = releases.ensure(version)
    java = shutil.which("java") or "java"
    settings = kafka_hosts.sort_settings(SETTINGS, "SETTINGS")
    groups: dict[str, dict] = {"controllers": {"hosts": {}}, "brokers": {"hosts": {}}}
    for name, h in lab.by_name.items():
        if name != "controller" and not name.startswith("broker-"):
            continue
        role = "controller" if name == "controller" else "broker"
        d = h.dir / "kafka"
        d.mkdir(exist_ok=True)
        cfg = d / "server.properties"
        _, log4j_prop = write_log4j(d, rel.logging)
        listeners = f"CONTROLLER://{h.ip}:9093" if role == "controller" else f"PLAINTEXT://{h.ip}:9092"
        groups[role + "s"]["hosts"][name] = {
            "ansible_host": h.ip, "kafka_node_id": 1000 if role == "controller" else int(name.rsplit("-", 1)[1]),
            "kafka_listeners": listeners, "kafka_config": str(cfg), "kafka_log_dir": str(d / "logs"),
            "kafka_version": rel.version,
            **({"kafka_metadata_log_dir": str(d / "metadata")} if role == "controller" else
               {"kafka_data_dirs": [str(d / "data")]}),
            "kafka_service": {"command": jvm_command(java, role, rel.classpath, d / "logs", log4j_prop, cfg),
                              "pidfile": str(d / "kafka.pid"), "log": str(d / "kafka.out"),
                              "format": format_command(java, rel.classpath, CLUSTER_ID, cfg, settings)},
        }
    doc = {"all": {"vars": {"faultline_transport": "ssh", "ansible_user": "root",
                            "ansible_ssh_private_key_file": lab.client_key, "faultline_known_hosts": lab.known_hosts,
                            "faultline_ssh_config": str(ssh_config) if ssh_config else "none",
                            "kafka_cluster_id": CLUSTER_ID, "kafka_implementation": "apache-kafka"},
                   "children": groups}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def start_ssh_cluster(path: Path, timeout: float = 150.0) -> None:
    """Bring the lab's Kafka up over SSH, before faultline arrives (as a lab's would be running):
    server.properties, storage formatted with each host's own format command, the JVMs started
    with ``kafka_service`` (controllers first), until every broker is registered."""
    inv = load_inventory(path)
    transports = {name: make_transport(inv, spec) for name, spec in inv.hosts.items()}
    kafka_hosts.write_configs(inv, transports, kafka_hosts.sort_settings(SETTINGS, "SETTINGS"))
    kafka_hosts.format_storage(inv, transports)
    for spec in sorted(inv.hosts.values(), key=lambda s: s.role != "controller"):
        ClusterNode(spec, transports[spec.name]).start_service()
    kafka_hosts.wait_ready(inv, timeout)


def build_image(version: str = VERSION) -> str:
    """The documented command; cached base, image rebuilt only when what goes into it changed."""
    p = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "docker", "build-image",
                        "--kafka", version], cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, f"faultline docker build-image --kafka {version} failed: {p.stderr.strip()[-800:]}"
    return p.stdout.strip().splitlines()[-1]


def docker_inventory(tmp: Path) -> Path:
    """inventory/docker-kafka.yaml with test names, on the ``dockafka`` lab's subnet."""
    doc = yaml.safe_load((REPO / "inventory" / "docker-kafka.yaml").read_text())
    v = doc["all"]["vars"]
    octet = LABS["dockafka"]
    v["docker_network"], v["docker_subnet"] = NETWORK, f"10.250.{octet}.0/24"
    for group in doc["all"]["children"].values():
        for name, h in group["hosts"].items():
            h["faultline_container"] = f"fl-test-kafka-{name}"
            scheme, _, rest = h["kafka_listeners"].partition("://")
            ip, _, port = rest.rpartition(":")
            h["kafka_listeners"] = f"{scheme}://10.250.{octet}.{ip.rsplit('.', 1)[1]}:{port}"
    path = tmp / "docker-kafka-test.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
