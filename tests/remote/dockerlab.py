"""A kraftsim cluster in real Docker containers for the remote tests, made the documented way.

Why through ``faultline docker build-image`` and ``harness.docker.cluster.up``: the tests
must exercise the image and the containers users get, not a test-only variant. The test
inventory differs from inventory/docker.yaml only in names (``fl-test-*``, network
``fl-test``) and the ``faultline.test=1`` label, so a developer's own cluster is never
touched and teardown can remove exactly what the tests made.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import yaml

from harness.inventory import Inventory, load_inventory

REPO = Path(__file__).resolve().parents[2]
TEST_LABEL = {"faultline.test": "1"}
NETWORK = "fl-test"


def ensure_dockerd() -> None:
    """Start dockerd when no engine answers (as setup-test-host.sh does)."""
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        subprocess.Popen(["dockerd"], stdout=open("/tmp/dockerd.log", "ab"), stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
        for _ in range(120):
            if subprocess.run(["docker", "info"], capture_output=True).returncode == 0:
                break
            time.sleep(0.5)


def build_image() -> str:
    """The documented command; cached base, image rebuilt only when the source changed."""
    p = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "docker", "build-image"], cwd=REPO,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"faultline docker build-image failed: {p.stderr.strip().splitlines()[-1:]}"
    return p.stdout.strip().splitlines()[-1]


def test_inventory(tmp: Path, brokers: int = 2, **extra_vars) -> Path:
    """inventory/docker.yaml with test names; ``brokers`` broker hosts."""
    doc = yaml.safe_load((REPO / "inventory" / "docker.yaml").read_text())
    v = doc["all"]["vars"]
    v["docker_network"] = NETWORK
    v.update(extra_vars)
    ctl = doc["all"]["children"]["controllers"]["hosts"]
    ctl["controller"]["faultline_container"] = "fl-test-controller"
    b = doc["all"]["children"]["brokers"]["hosts"]
    for name in list(b):
        b.pop(name)
    for i in range(1, brokers + 1):
        b[f"broker-{i}"] = {"faultline_container": f"fl-test-broker-{i}", "kafka_node_id": i,
                            "kafka_listeners": f"PLAINTEXT://10.250.3.{10 + i}:9092"}
    v["docker_kraftsim_settings"] = {**v["docker_kraftsim_settings"],
                                     "min.insync.replicas": min(2, brokers),
                                     "default.replication.factor": brokers}
    path = tmp / "docker-test.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def remove_test_objects() -> None:
    """Every container, volume and network labelled faultline.test=1 (and the test network)."""
    import docker
    c = docker.from_env()
    for ct in c.containers.list(all=True, filters={"label": "faultline.test=1"}):
        ct.remove(force=True, v=True)
    for vol in c.volumes.list(filters={"label": "faultline.test=1"}):
        vol.remove(force=True)
    for n in c.networks.list(filters={"label": "faultline.test=1"}):
        n.remove()


def load(path: Path) -> Inventory:
    return load_inventory(path)


