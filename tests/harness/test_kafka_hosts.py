"""Real Kafka on an inventory's hosts (harness/kafka_hosts.py) and what `faultline docker up`
checks before it creates anything for a Kafka image (harness/docker/cluster.py kafka_setup).

The inventory is the shipped inventory/docker-kafka.yaml; what its hosts' server.properties
say is checked against Kafka's own rules for a KRaft cluster (a static quorum's voters name
every controller's CONTROLLER listener; a controller keeps its metadata log in its
metadata.log.dir; a broker advertises where it listens). Bad inventories each get one line
naming the field. The real cluster these files make runs in tests/remote/test_real_kafka.py.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from groundwork.config import ConfigError
from harness import kafka_hosts
from harness.docker.cluster import DockerInventoryError, kafka_setup, plan_of
from harness.inventory import load_inventory

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "inventory" / "docker-kafka.yaml"
KAFKA_IMAGE = {"org.faultline.image": "kafka", "org.faultline.kafka-version": "4.1.0"}


def variant(tmp: Path, edit) -> Path:
    doc = yaml.safe_load(SHIPPED.read_text())
    edit(doc)
    path = tmp / "inv.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_shipped_inventory_gives_each_node_its_kraft_properties():
    inv = load_inventory(SHIPPED)
    settings = kafka_setup(inv, plan_of(inv), KAFKA_IMAGE)
    assert settings is not None
    ctl = kafka_hosts.properties(inv, inv.hosts["controller"], settings)
    b2 = kafka_hosts.properties(inv, inv.hosts["broker-2"], settings)
    assert ctl["process.roles"] == "controller" and ctl["node.id"] == "1000"
    assert ctl["listeners"] == "CONTROLLER://10.250.12.10:9093" and "advertised.listeners" not in ctl
    assert ctl["metadata.log.dir"] == ctl["log.dirs"] == "/var/lib/kafka/metadata"
    assert b2["process.roles"] == "broker" and b2["node.id"] == "2" and "metadata.log.dir" not in b2
    assert b2["listeners"] == b2["advertised.listeners"] == "PLAINTEXT://10.250.12.12:9092"
    assert b2["log.dirs"] == "/var/lib/kafka/data"
    assert ctl["controller.quorum.voters"] == b2["controller.quorum.voters"] == "1000@10.250.12.10:9093"
    # the inventory's settings and the fast timing profile, on every node
    for p in (ctl, b2):
        assert p["min.insync.replicas"] == "2" and p["unclean.leader.election.enable"] == "false"
        assert p["replica.lag.time.max.ms"] == "3000"
    assert kafka_hosts.format_argv(inv, inv.hosts["broker-2"])[2:5] == ["-t", "faultline-dockerkafkaA", "-c"]


@pytest.mark.parametrize("edit, field, words", [
    (lambda d: d["all"]["vars"]["docker_kafka_settings"].update({"metadata.version": "3.9"}),
     "all.vars.docker_kafka_settings.metadata.version", "kafka_service.format (-r)"),
    (lambda d: d["all"]["vars"]["docker_kafka_settings"].update({"kafka.version": "3.9.1"}),
     "all.vars.docker_kafka_settings.kafka.version", "the release is the image's"),
    (lambda d: d["all"]["vars"]["kafka_service"].update(
        format="/opt/kafka/bin/kafka-storage.sh format -t AAAAAAAAAAAAAAAAAAAAAQ -c /etc/kafka/server.properties"),
     "controller.kafka_service.format", "differs from kafka_cluster_id"),
    (lambda d: d["all"]["vars"]["kafka_service"].pop("format"), "controller.kafka_service.format", "is wanted"),
    (lambda d: d["all"]["children"]["brokers"]["hosts"]["broker-3"].update(
        kafka_listeners="PLAINTEXT://10.250.12.13:19092"), "broker-3.kafka_listeners", "PLAINTEXT://ADDRESS:9092"),
    (lambda d: d["all"]["vars"].update(kafka_version="3.9.1"), "controller.kafka_version", "holds Apache Kafka 4.1.0"),
    (lambda d: d["all"]["vars"].update(kafka_implementation="kraftsim"), "controller.kafka_implementation",
     "runs Apache Kafka"),
    # (a CA file that exists: the loader checks it; docker up refuses before reading it)
    (lambda d: d["all"]["vars"].update(kafka_client={"security.protocol": "SSL", "ssl.ca.location": str(SHIPPED)}),
     "all.vars.kafka_client", "writes PLAINTEXT listeners"),
])
def test_a_bad_kafka_docker_inventory_is_one_line_naming_the_field(tmp_path: Path, edit, field, words):
    inv = load_inventory(variant(tmp_path, edit))
    with pytest.raises(DockerInventoryError) as e:
        kafka_setup(inv, plan_of(inv), KAFKA_IMAGE)
    msg = str(e.value)
    assert "\n" not in msg and f": {field}: " in msg and words in msg, msg
    assert e.value.exit_code == 2


def test_the_kraftsim_image_refuses_kafka_settings_and_takes_kraftsim_hosts(tmp_path: Path):
    inv = load_inventory(SHIPPED)
    with pytest.raises(DockerInventoryError, match="runs kraftsim; set kafka_implementation: kraftsim"):
        kafka_setup(inv, plan_of(inv), {"org.faultline.image": "kraftsim"})
    kraftsim = load_inventory(REPO / "inventory" / "docker.yaml")
    assert kafka_setup(kraftsim, plan_of(kraftsim), {"org.faultline.image": "kraftsim"}) is None


def test_sort_settings_names_the_format_option_a_key_belongs_to():
    with pytest.raises(ConfigError, match=r"^x\.eligible\.leader\.replicas\.version: .*\(--feature\)"):
        kafka_hosts.sort_settings({"eligible.leader.replicas.version": 1}, "x")
    assert kafka_hosts.sort_settings({"num.io.threads": 2}, "x").properties == {"num.io.threads": "2"}


@pytest.mark.parametrize("version, words", [("4.1", "an Apache Kafka release like 4.1.0"), ("2.8.0", "from 3.3.0")])
def test_build_image_refuses_a_release_it_cannot_run_before_building_anything(version: str, words: str):
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "docker", "build-image",
                        "--kafka", version, "--base", "faultline/test-base:never-built"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("faultline docker build-image: --kafka: "), p.stderr
    assert words in lines[0] and not p.stdout
