"""Two ``faultline run`` on one lab at once: real runs against sshd lab hosts running kraftsim.

Run A kills broker-3 for a while. While broker-3 is down (A's fault is in the heal ledger,
owned by A): a second ``faultline run`` of the same campaign on the same inventory exits 3 at
once with one line naming A (its pid and run directory), and A's fault is still applied and
still open in the ledger afterwards (the refused run healed nothing); ``faultline heal``
without --force skips it too (the ledger's owner check protects a live run). A third run with
``--wait`` waits, says for whom, and starts only after A has healed and released the lab; it
heals nothing of A's either, and both runs complete. The lab: kraftsim on every sshd host
(tests/remote/sshlab.py ``kraftsim_inventory``), started by the inventory's ``kafka_service``
before faultline arrives.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from harness.cluster import ClusterNode, make_transport
from harness.inventory import load_inventory
from tests.harness.clirun import faultline, read_jsonl, spawn, wait_for
from tests.remote.sshlab import SshLab, kraftsim_inventory

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
HOSTS = ["controller", "broker-1", "broker-2", "broker-3"]


def campaign(tmp: Path, inventory: Path) -> Path:
    doc = {
        "name": "lab-lock", "description": "kill broker-3 for most of the workload",
        "target": {"inventory": str(inventory)},
        "topic": {"name": "faultline", "partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
        "workload": {"producers": 1, "consumers": 0, "rate": 40, "duration": 24, "idempotence": True,
                     "drain_timeout": 20, "recovery_timeout": 30},
        "nemesis": {"schedule": "targeted", "steps": [
            {"wait": 2},
            {"start": "kill", "target": "broker-3", "as": "k", "duration": 18},
        ]},
        "expect": "no-loss",
    }
    p = tmp / "lab-lock.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def open_entries(state: Path) -> dict[str, dict]:
    applied: dict[str, dict] = {}
    for e in read_jsonl(state / "ledger.jsonl"):
        if e.get("op") == "apply":
            applied[e["id"]] = e
        elif e.get("op") == "healed":
            applied.pop(e.get("id"), None)
    return applied


def test_a_second_run_on_a_held_lab_is_refused_or_waits_and_heals_nothing(tmp_path: Path):
    lab = SshLab(HOSTS)
    procs = []
    state = tmp_path / "state"
    try:
        lab.up()
        inv_path = kraftsim_inventory(lab, tmp_path / "ssh-lab.yaml")
        inv = load_inventory(inv_path)
        nodes = {s.name: ClusterNode(s, make_transport(inv, s)) for s in inv.hosts.values()}
        for n in sorted(nodes.values(), key=lambda n: n.role != "controller"):
            n.start_service()
        camp = campaign(tmp_path, inv_path)
        results = tmp_path / "results"
        args = ["run", str(camp), "--no-check", "--no-progress", "--results-dir", str(results)]

        a = spawn(args, state, tmp_path / "a.log")
        procs.append(a)
        kill = wait_for(lambda: next((e for e in open_entries(state).values() if e.get("nemesis") == "kill"), None),
                        150, "run A's kill of broker-3 in the heal ledger")
        assert kill["owner"]["pid"] == a.pid
        wait_for(lambda: not nodes["broker-3"].service_pids(), 20, "broker-3 down")
        a_dir = wait_for(lambda: next(iter(results.glob("lab-lock-*")), None), 10, "run A's directory")

        # B: refused at once, one line naming A; nothing of A's healed
        t0 = time.monotonic()
        b = faultline(args, state, timeout=120)
        took = time.monotonic() - t0
        assert b.returncode == 3, b.stderr
        errors = [ln for ln in b.stderr.splitlines() if ln.startswith("faultline:")]
        assert len(errors) == 1, b.stderr
        print(f"run B ({took:.1f}s): {errors[0]}")
        assert f"the lab is in use by run {a_dir} (pid {a.pid}, since " in errors[0], errors
        assert took < 30, took
        assert kill["id"] in open_entries(state)
        assert not nodes["broker-3"].service_pids(), "the refused run restarted broker-3"
        # `faultline heal` without --force leaves a live run's faults alone
        h = faultline(["heal"], state, timeout=120)
        assert h.returncode == 0 and "skipped: fault kill" in h.stderr, h.stdout + h.stderr
        assert kill["id"] in open_entries(state) and not nodes["broker-3"].service_pids()
        assert a.poll() is None

        # C: waits for A, then runs - calm and short: what it shows is the wait and that it heals
        # nothing of A's, not another kill
        c = spawn(args + ["--wait", "--set", "workload.duration=4", "--set", "nemesis.steps=[{wait: 1}]"],
                  state, tmp_path / "c.log")
        procs.append(c)
        wait_for(lambda: "waiting for the lab" in (tmp_path / "c.log").read_text(), 60, "run C waiting")
        assert a.wait(timeout=300) == 0, (tmp_path / "a.log").read_text()[-2000:]
        assert c.wait(timeout=300) == 0, (tmp_path / "c.log").read_text()[-2000:]
        c_log = (tmp_path / "c.log").read_text()
        print("run C: " + next(ln for ln in c_log.splitlines() if "waiting for the lab" in ln))
        assert f"in use by run {a_dir} (pid {a.pid}" in c_log
        assert "left by an earlier run" not in c_log        # C healed nothing of A's
        runs = sorted(results.glob("lab-lock-*"), key=lambda d: json.loads((d / "run.json").read_text())["started_wall"])
        assert len(runs) == 2 and runs[0] == a_dir
        ra, rc = (json.loads((d / "run.json").read_text()) for d in runs)
        assert rc["started_wall"] > ra["ended_wall"], "run C started before run A had healed and finished"
        # A healed its own kill; every entry closed, every lock released
        tl = [json.loads(ln) for ln in (a_dir / "timeline.jsonl").read_text().splitlines() if ln.strip()]
        assert {(e.get("fault"), e.get("phase")) for e in tl if e.get("kind") == "nemesis"} >= {("kill", "start"), ("kill", "stop")}
        assert open_entries(state) == {}
        assert not list((state / "locks").glob("*.json"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        faultline(["heal", "--force"], state, timeout=120)
        lab.down()
