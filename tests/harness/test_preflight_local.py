"""Preflight of an Apache Kafka host, reached over the local transport.

Apache Kafka cannot run here (no Kafka distribution on this machine), so the host is a Kafka
*install layout* - ``config/server.properties``, ``config/log4j.properties``,
``libs/kafka_2.13-3.7.0.jar`` (an empty file: preflight reads only its name), Kafka's three log
files - and its ``kafka_service`` is a real long-running process with a pid file, started and
stopped through faultline's own ClusterNode as a lab's service is. What is checked is what
preflight reads from a Kafka host: the version from the core jar's name, ``process.roles`` and
``node.id`` from server.properties, the log dirs, the log files, and the log4j levels.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.cluster import ClusterNode
from groundwork.transport.local import LocalTransport
from harness.inventory import load_inventory
from harness.preflight import FAIL, Options, preflight

REPO = Path(__file__).resolve().parents[2]
LOG4J = """\
log4j.rootLogger=INFO, stdout, kafkaAppender
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.org.apache.kafka.controller=INFO, controllerAppender
log4j.logger.state.change.logger=INFO, stateChangeAppender
"""


def kafka_host(tmp: Path, *, roles: str = "broker", node_id: int = 1, log4j: str = LOG4J) -> Path:
    """A Kafka install and its inventory (one broker on this machine); returns the inventory."""
    kafka = tmp / "kafka"
    (kafka / "config").mkdir(parents=True)
    (kafka / "libs").mkdir()
    (kafka / "libs" / "kafka_2.13-3.7.0.jar").write_bytes(b"")
    (kafka / "libs" / "kafka_2.13-3.7.0-test.jar").write_bytes(b"")
    data, logs = tmp / "data", tmp / "logs"
    data.mkdir()
    logs.mkdir()
    for f in ("server.log", "controller.log", "state-change.log"):
        (logs / f).write_text("")
    (kafka / "config" / "server.properties").write_text(
        f"process.roles={roles}\nnode.id={node_id}\nlog.dirs={data}\nlisteners=PLAINTEXT://127.0.0.1:19999\n")
    (kafka / "config" / "log4j.properties").write_text(log4j)
    doc = {"all": {"vars": {"faultline_transport": "local"}, "children": {"brokers": {"hosts": {"b1": {
        "kafka_node_id": 1, "kafka_listeners": "PLAINTEXT://127.0.0.1:19999",
        "kafka_config": str(kafka / "config" / "server.properties"),
        "kafka_data_dirs": [str(data)], "kafka_log_dir": str(logs),
        "kafka_service": {"command": "sleep 600", "pidfile": str(tmp / "kafka.pid"), "log": str(tmp / "kafka.out")},
    }}}}}}
    inv = tmp / "lab.yaml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    return inv


@pytest.fixture
def running():
    """Start each inventory's service; stop them all at the end."""
    nodes: list[ClusterNode] = []

    def start(inv_path: Path) -> ClusterNode:
        inv = load_inventory(inv_path)
        node = ClusterNode(inv.hosts["b1"], LocalTransport("b1"))
        node.start_service()
        nodes.append(node)
        # spawn returns before the child has exec'd: wait until its /proc/PID/cmdline is the
        # JVM-like command preflight reads (on a loaded machine it was still the spawner's)
        deadline = time.monotonic() + 20
        while "kafka.Kafka" in str(inv.hosts["b1"].service) and not any(
                "kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
                for pid in node.service_pids() if Path(f"/proc/{pid}").exists()):
            assert time.monotonic() < deadline, "the service never became kafka.Kafka"
            time.sleep(0.02)
        return node
    yield start
    for n in nodes:
        n.stop_service()


def cli(inv: Path, state: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "preflight", str(inv)],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "FAULTLINE_STATE_DIR": str(state), **env})


def issues(inv: Path, column: str) -> list[str]:
    rep = preflight(load_inventory(inv), Options())
    return [f"{i.status} {i.problem}" for i in rep.hosts[0].checks[column].issues]


def test_a_kafka_host_as_shipped_passes(tmp_path: Path, running):
    inv = kafka_host(tmp_path)
    running(inv)
    p = cli(inv, tmp_path / "state")
    assert p.returncode == 0, p.stdout + p.stderr
    row = next(ln for ln in p.stdout.splitlines() if ln.startswith("│b1 "))
    assert "ok 3.7.0 broker" in row and "ok 3 files, log4j ok" in row and "ok 1/1 ok" in row, row
    assert "ok same clock" in row, row


def test_a_nightly_job_with_crons_path_finds_iptables_and_tc(tmp_path: Path, running):
    """cron starts jobs with PATH=/usr/bin:/bin, and `env -i` with what it is given: Debian and
    Ubuntu install iptables and tc in /usr/sbin, so faultline started that way must still find
    them (it adds the sbin directories a PATH lacks), as root's login shell would."""
    assert not Path("/usr/bin/iptables").exists() and Path("/usr/sbin/iptables").exists()
    inv = kafka_host(tmp_path)
    running(inv)
    p = cli(inv, tmp_path / "state", PATH="/usr/bin:/bin")
    assert p.returncode == 0, p.stdout + p.stderr
    row = next(ln for ln in p.stdout.splitlines() if ln.startswith("│b1 "))
    assert "root: iptables, tc" in row, row


def test_state_change_logger_at_warn_fails_the_lab(tmp_path: Path, running):
    inv = kafka_host(tmp_path, log4j=LOG4J.replace("state.change.logger=INFO", "state.change.logger=WARN"))
    running(inv)
    p = cli(inv, tmp_path / "state")
    assert p.returncode == 3, p.stdout + p.stderr
    fails = [ln for ln in p.stdout.splitlines() if ln.startswith("FAIL ")]
    assert len(fails) == 1, fails
    assert fails[0].startswith("FAIL b1 logs: ") and "state.change.logger logs at WARN" in fails[0]
    assert "; fix: set log4j.logger.state.change.logger=INFO" in fails[0]
    assert "b1 logs" in p.stderr


def test_wrong_group_wrong_node_id_and_a_stopped_service_are_each_named(tmp_path: Path, running):
    inv = kafka_host(tmp_path, roles="controller", node_id=7)
    found = issues(inv, "kafka")   # not started
    assert any(s.startswith(FAIL) and "listed under brokers but process.roles=controller" in s for s in found), found
    assert any(s.startswith(FAIL) and "kafka_node_id is 1 but node.id=7" in s for s in found), found
    assert any(s.startswith(FAIL) and "Kafka is not running" in s for s in found), found
    running(inv)
    assert not any("not running" in s for s in issues(inv, "kafka"))


def test_a_missing_log_dir_and_an_unreadable_kafka_config(tmp_path: Path, running):
    inv = kafka_host(tmp_path)
    running(inv)
    doc = yaml.safe_load(inv.read_text())
    host = doc["all"]["children"]["brokers"]["hosts"]["b1"]
    host["kafka_config"] = str(tmp_path / "nowhere" / "server.properties")
    host["kafka_metadata_log_dir"] = str(tmp_path / "metadata")
    inv.write_text(yaml.safe_dump(doc))
    assert any(s.startswith(FAIL) and "cannot read" in s and "kafka_config" in s for s in issues(inv, "kafka"))
    dirs = issues(inv, "dirs")
    assert dirs == [f"FAIL metadata log dir {tmp_path / 'metadata'} does not exist"], dirs
