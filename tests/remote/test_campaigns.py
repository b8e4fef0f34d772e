"""The default kill/restart campaign, unchanged, against Docker and SSH targets.

Only the inventory differs from the embedded run (``--set target.inventory=FILE``): a
kraftsim cluster in containers made by ``faultline docker up``'s code, and one on
sshd-in-namespace lab hosts started with the inventory's ``kafka_service`` commands. Each
run must end with a verdict (valid, as expected: no acknowledged write lost), event logs
collected through the transport, and the kills recorded in the timeline.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.docker import cluster as docker_cluster
from harness.cluster import ClusterNode, make_transport
from harness.inventory import load_inventory
from tests.remote import dockerlab
from tests.remote.sshlab import SshLab, kraftsim_inventory

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
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


def check_run(run_dir: Path, transport: str, inventory: Path) -> None:
    run = json.loads((run_dir / "run.json").read_text())
    assert Path(run["inventory"]).resolve() == inventory.resolve()
    assert load_inventory(inventory).transport == transport
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["valid"] is True and verdict["as_expected"] is True, verdict.get("counts")
    assert verdict["acked_writes"] > 100
    timeline = [json.loads(ln) for ln in (run_dir / "timeline.jsonl").read_text().splitlines() if ln.strip()]
    kills = [e for e in timeline if e.get("kind") == "nemesis" and e.get("fault") == "kill"]
    assert {(k["fault"], k["phase"]) for k in kills} >= {("kill", "start"), ("kill", "stop")}
    ctl_events = (run_dir / "cluster-logs" / "controller" / "events.jsonl").read_text()
    # every kill led to a re-registration with a new broker epoch (docs/seeds.md#seed-003: broker epochs)
    regs = [json.loads(ln) for ln in ctl_events.splitlines() if '"broker_registered"' in ln]
    assert len(regs) >= 3 + sum(1 for k in kills if k["phase"] == "start")


def test_kill_restart_campaign_against_docker(tmp_path: Path):
    dockerlab.ensure_dockerd()
    dockerlab.remove_test_objects()
    assert dockerlab.build_image() == "faultline/kraftsim:latest"
    inv_path = dockerlab.test_inventory(tmp_path, brokers=3)
    inv = load_inventory(inv_path)
    try:
        docker_cluster.up(inv, extra_labels=dockerlab.TEST_LABEL)
        run_dir = run_campaign(inv_path, tmp_path)
        check_run(run_dir, "docker", inv_path)
    finally:
        docker_cluster.down(inv)
        dockerlab.remove_test_objects()


def test_kill_restart_campaign_against_ssh_lab_hosts(tmp_path: Path):
    lab = SshLab(["controller", "broker-1", "broker-2", "broker-3"])
    try:
        lab.up()
        inv_path = kraftsim_inventory(lab, tmp_path / "ssh-lab.yaml")
        inv = load_inventory(inv_path)
        # the lab's Kafka is running before faultline arrives, as on a real lab
        for spec in sorted(inv.hosts.values(), key=lambda s: s.role != "controller"):
            ClusterNode(spec, make_transport(inv, spec)).start_service()
        run_dir = run_campaign(inv_path, tmp_path)
        check_run(run_dir, "ssh", inv_path)
    finally:
        lab.down()
