"""The default kill/restart campaign, unchanged, against real Apache Kafka on the remote targets.

Only the inventory differs from the embedded run (``--set target.inventory=FILE``). Docker: the
image `faultline docker build-image --kafka 4.1.0` builds (a JRE and the release's jars from the
cache), containers made by `faultline docker up`'s code from inventory/docker-kafka.yaml (test
names). SSH: ``kafka.Kafka`` JVMs on sshd-in-namespace lab hosts, started over SSH with the
inventory's ``kafka_service`` before faultline arrives, as a lab's Kafka would be (their
server.properties and storage format written and run through the same transports); `faultline
preflight` reads the release from the JVM's classpath and the log4j levels it runs with, and
names a logger raised to WARN (the known-bad control). The SSH lab is reached only through a jump
host named in an ssh config file (tests/remote/test_ssh_jump.py has the transport's own cases
and the control that the hosts refuse ssh without it).

Each run must end valid with no acknowledged write lost, and its events must come from the
hosts' own Kafka logs (cluster-logs/<host>/server.log, controller.log, state-change.log), every
line the reader met understood. kraftsim on these targets runs in test_lab_lock.py (SSH) and
tests/nemeses/test_remote_nemeses.py (Docker, SSH); these two were kraftsim's until real Kafka
could run here, and would double this serial group's longest tests if both were kept. About 2
to 4 minutes each on a loaded 2-core machine (JVM starts, a 20 s workload, the Spark check); the
image is cached by content, the release by version.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from checkers import kafkalog
from harness.cluster import make_transport
from harness.docker import cluster as docker_cluster
from harness.inventory import load_inventory
from harness.preflight import Options, preflight
from tests.remote import dockerlab, kafkalab
from tests.remote.sshlab import SshLab, ssh_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = REPO / "campaigns" / "kill-restart.yaml"


def run_campaign(inventory: Path, tmp: Path) -> Path:
    env = {**os.environ, "FAULTLINE_STATE_DIR": str(tmp / "state")}
    p = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", str(CAMPAIGN),
                        "--set", f"target.inventory={inventory}", "--results-dir", str(tmp / "results"),
                        "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=840, env=env)
    tail = "\n".join(ln for ln in p.stderr.splitlines() if "WARN" not in ln)[-1500:]
    assert p.returncode == 0, f"faultline run exited {p.returncode}:\n{tail}"
    run_dir = Path(p.stdout.strip().splitlines()[-1])
    assert run_dir.is_dir(), p.stdout
    return run_dir


def check_real_kafka_run(run_dir: Path, transport: str, inventory: Path) -> None:
    run = json.loads((run_dir / "run.json").read_text())
    inv = load_inventory(inventory)
    assert Path(run["inventory"]).resolve() == inventory.resolve() and inv.transport == transport
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["valid"] is True and verdict["as_expected"] is True, verdict.get("outcome_reason")
    assert verdict["counts"]["lost_write"] == 0 and verdict["acked_writes"] > 100, verdict["outcome_reason"]
    timeline = [json.loads(ln) for ln in (run_dir / "timeline.jsonl").read_text().splitlines() if ln.strip()]
    kills = [e for e in timeline if e.get("kind") == "nemesis" and e.get("fault") == "kill" and e.get("phase") == "start"]
    assert len(kills) >= 2
    # the events are Kafka's own, read from each host's log4j files, not a kraftsim event log
    logs = run_dir / "cluster-logs"
    for name in inv.hosts:
        assert (logs / name / "server.log").stat().st_size > 0, f"{name}: no server.log collected"
        assert not (logs / name / "events.jsonl").exists()
    assert (logs / "controller" / "controller.log").stat().st_size > 0
    st = kafkalog.Stats()
    events = kafkalog.read_cluster_logs(logs, stats=st)
    assert st.not_understood == 0 and not st.problems, st
    kinds = [e["event"] for e in events]
    # every broker registered with the controller, and the kills moved leadership
    assert kinds.count("broker_registered") >= len(inv.brokers) and "leader_elected" in kinds, kinds
    assert not [n for n in run.get("notes", []) if "kafka logs" in n], run.get("notes")


def test_kill_restart_on_real_kafka_in_docker(tmp_path: Path):
    dockerlab.ensure_dockerd()
    dockerlab.remove_test_objects()
    assert kafkalab.build_image() == f"faultline/kafka:{kafkalab.VERSION}"
    inv_path = kafkalab.docker_inventory(tmp_path)
    inv = load_inventory(inv_path)
    try:
        docker_cluster.up(inv, extra_labels=dockerlab.TEST_LABEL)
        check_real_kafka_run(run_campaign(inv_path, tmp_path), "docker", inv_path)
    finally:
        docker_cluster.down(inv)
        dockerlab.remove_test_objects()


def preflight_cli(inv: Path, state: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "preflight", str(inv)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "FAULTLINE_STATE_DIR": str(state), "COLUMNS": "250"})


def only(inv_path: Path, host: str, out: Path) -> Path:
    """The inventory with one broker host (preflight checks each host on its own)."""
    doc = yaml.safe_load(inv_path.read_text())
    doc["all"]["children"] = {"brokers": {"hosts": {host: doc["all"]["children"]["brokers"]["hosts"][host]}}}
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def test_kill_restart_on_real_kafka_over_ssh_through_a_jump_host_after_preflight(tmp_path: Path):
    """The lab as a company has it: the Kafka hosts refuse ssh from anyone but a bastion, which
    only the ssh config file the inventory names knows of (``ProxyJump``)."""
    lab = SshLab(["jump", "controller", "broker-1", "broker-2", "broker-3"])
    try:
        lab.up()
        lab.only_via("jump")
        inv_path = kafkalab.ssh_inventory(lab, tmp_path / "ssh-kafka.yaml",
                                          ssh_config=ssh_config(lab, tmp_path / "ssh_config"))
        assert "ProxyJump" not in inv_path.read_text() and "bastion" not in inv_path.read_text()
        inv = load_inventory(inv_path)
        assert set(inv.hosts) == {"controller", "broker-1", "broker-2", "broker-3"}
        assert all([j.alias for j in make_transport(inv, spec).jumps] == ["bastion"] for spec in inv.hosts.values())
        kafkalab.start_ssh_cluster(inv_path)
        p = preflight_cli(inv_path, tmp_path / "state")
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-1500:]
        rows = {ln.split("│")[1].strip(): ln for ln in p.stdout.splitlines() if ln.startswith("│")}
        for name in ("controller", "broker-1", "broker-2", "broker-3"):
            role = "controller" if name == "controller" else "broker"
            # the release from the running JVM's classpath (the cache's libs/*), the levels from its log4j2.yaml
            assert f"ok {kafkalab.VERSION} {role}" in rows[name] and "ok 3 files, log4j ok" in rows[name], rows[name]
        # the known-bad control: broker-2's state-change logger raised to WARN is named, and stops a run
        log4j = Path(load_inventory(inv_path).hosts["broker-2"].config or "").parent / "log4j2.yaml"
        good = log4j.read_text()
        log4j.write_text(re.sub(r"(- name: state\.change\.logger\n\s+level: )INFO", r"\1WARN", good))
        rep = preflight(load_inventory(only(inv_path, "broker-2", tmp_path / "broker-2.yaml")), Options())
        fails = [f"{host} {check}: {i.problem}" for host, check, i in rep.problems() if i.status == "FAIL"]
        assert rep.failed and len(fails) == 1 and fails[0].startswith("broker-2 logs: "), fails
        assert "state.change.logger logs at WARN" in fails[0], fails
        log4j.write_text(good)
        check_real_kafka_run(run_campaign(inv_path, tmp_path), "ssh", inv_path)
    finally:
        lab.down()
