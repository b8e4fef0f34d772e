"""The lab lock (harness/lock.py) between real processes on this machine.

A holder is a real Python process that takes the lock the way ``faultline run`` does; it
is killed with SIGKILL where a crashed run is the case. The inventories name network namespaces
that do not exist: the lock never touches a host, and a ``faultline run`` refused by the lock
must stop before it would (it names the holder instead of failing to reach the hosts). The
real runs against sshd lab hosts are in tests/remote/test_lab_lock.py.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.inventory import load_inventory
from harness.lock import LabLock, LockHeld, lab_lock, target_keys
from tests.harness.clirun import REPO, faultline, read_jsonl

HOLD = """
import sys, time
from groundwork.ledger import new_id
from harness.heal import OwnedLedger
from harness.inventory import load_inventory
from harness.lock import LabLock
inv, run_dir, hold_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
lock = LabLock(load_inventory(inv))
lock.acquire("faultline run test-holder")
lock.set_run_dir(run_dir)
if len(sys.argv) > 4:   # a process of "its run", in the heal ledger as a run records one
    OwnedLedger().apply(new_id("p"), "process", {"what": "sleep", "pid": int(sys.argv[4]), "match": "sleep 600"})
print("held", flush=True)
time.sleep(hold_s)
lock.release()
print("released", flush=True)
"""


def inventory(tmp: Path, name: str, hosts: dict[str, str], cluster_id: str | None = None) -> Path:
    """A local inventory of brokers in (nonexistent) network namespaces."""
    doc = {"all": {"vars": {"faultline_transport": "local", **({"kafka_cluster_id": cluster_id} if cluster_id else {})},
                   "children": {"brokers": {"hosts": {
                       h: {"kafka_node_id": i, "faultline_netns": ns, "kafka_listeners": f"PLAINTEXT://10.250.9.{i}:9092",
                           "kafka_service": {"command": "sleep 600", "pidfile": f"/tmp/fl-lock-test-{ns}.pid"}}
                       for i, (h, ns) in enumerate(hosts.items(), 1)}}}}}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


@pytest.fixture
def state(tmp_path: Path, monkeypatch):
    d = tmp_path / "state"
    d.mkdir()
    monkeypatch.setenv("FAULTLINE_STATE_DIR", str(d))
    return d


@pytest.fixture
def holders(state: Path):
    procs: list[subprocess.Popen] = []

    def hold(inv: Path, run_dir: str, seconds: float = 600, *extra: str) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", HOLD, str(inv), run_dir, str(seconds), *extra],
                             stdout=subprocess.PIPE, text=True, cwd=REPO,
                             env={**os.environ, "FAULTLINE_STATE_DIR": str(state)})
        procs.append(p)
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
        return p
    yield hold
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_held_lab_refuses_a_second_run_naming_the_holder(tmp_path: Path, state: Path, holders):
    a = inventory(tmp_path, "a", {"b1": "fl-lk-1", "b2": "fl-lk-2"})
    p = holders(a, "/results/run-A")
    lock = LabLock(load_inventory(a))
    h = lock.try_acquire("second")
    assert h is not None and h.pid == p.pid and h.run_dir == "/results/run-A"
    with pytest.raises(LockHeld) as e:
        lock.acquire("second")
    assert f"the lab is in use by run /results/run-A (pid {p.pid}, since " in str(e.value)
    assert str(a.resolve()) in str(e.value) and "--wait" in str(e.value)
    # an inventory sharing one host is the same target; a disjoint one is not
    sub = inventory(tmp_path, "sub", {"x": "fl-lk-2"})
    assert LabLock(load_inventory(sub)).try_acquire("third") is not None
    other = LabLock(load_inventory(inventory(tmp_path, "c", {"b1": "fl-lk-3"})))
    assert other.try_acquire("fourth") is None
    other.release()
    # the embedded target takes no lock: each run has its own cluster
    assert lab_lock(load_inventory(REPO / "inventory" / "local.yaml")) is None


def test_the_cluster_id_is_part_of_the_target(tmp_path: Path, state: Path, holders):
    a = inventory(tmp_path, "a", {"b1": "fl-lk-1"}, cluster_id="lab-cluster-1")
    b = inventory(tmp_path, "b", {"b1": "fl-lk-9"}, cluster_id="lab-cluster-1")
    assert "kafka-cluster:lab-cluster-1" in target_keys(load_inventory(a))
    holders(a, "/results/run-A")
    assert LabLock(load_inventory(b)).try_acquire("b") is not None


def test_waiting_takes_the_lab_when_the_holder_releases_it(tmp_path: Path, state: Path, holders):
    a = inventory(tmp_path, "a", {"b1": "fl-lk-1"})
    p = holders(a, "/results/run-A", 3)
    said: list[str] = []
    t0 = time.monotonic()
    lock = LabLock(load_inventory(a))
    lock.acquire("waiter", wait=True, say=said.append, poll=0.2)
    assert p.wait(timeout=10) == 0 and time.monotonic() - t0 > 1.5
    assert said and "waiting for the lab" in said[0] and f"pid {p.pid}" in said[0]
    assert lock.took_over == []   # released, not taken from a dead holder
    lock.release()
    with pytest.raises(LockHeld) as e:
        holders(a, "/results/run-B")
        LabLock(load_inventory(a)).acquire("late", wait=True, timeout=1.0, poll=0.2)
    assert "after waiting 1s" in str(e.value)


def test_a_killed_holders_lock_is_taken_over_and_heal_releases_one(tmp_path: Path, state: Path, holders):
    a = inventory(tmp_path, "a", {"b1": "fl-lk-1"})
    p = holders(a, "/results/run-A")
    p.send_signal(signal.SIGKILL)
    p.wait()
    lock = LabLock(load_inventory(a))
    said: list[str] = []
    lock.acquire("next run", say=said.append)
    assert [h.pid for h in lock.took_over] == [p.pid]
    assert said == [f"took over the lab lock of {lock.took_over[0].describe()}: that faultline process is gone"]
    lock.release()
    assert not list((state / "locks").glob("*.json"))
    # a SIGKILLed holder nobody took over: `faultline heal` releases its lock
    q = holders(a, "/results/run-B")
    q.send_signal(signal.SIGKILL)
    q.wait()
    r = faultline(["heal"], state)
    assert r.returncode == 0, r.stderr
    assert f"released the lab lock of run /results/run-B (pid {q.pid}" in r.stdout
    assert not list((state / "locks").glob("*.json"))


def test_a_recycled_pid_is_not_the_holder(tmp_path: Path, state: Path, holders):
    """A lock file whose pid now belongs to another process (different kernel start time)."""
    a = inventory(tmp_path, "a", {"b1": "fl-lk-1"})
    p = holders(a, "/results/run-A")
    other = subprocess.Popen(["sleep", "600"])
    try:
        for f in (state / "locks").glob("*.json"):
            doc = json.loads(f.read_text())
            f.write_text(json.dumps({**doc, "pid": other.pid}))
        p.kill()
        p.wait()
        lock = LabLock(load_inventory(a))
        assert lock.try_acquire("next") is None and [h.pid for h in lock.took_over] == [other.pid]
        lock.release()
    finally:
        other.kill()
        other.wait()


def test_faultline_run_refused_by_the_lock_heals_nothing(tmp_path: Path, state: Path, holders):
    """The holder has a process of its run in the heal ledger; a second `faultline run` on the
    same lab exits 3 at once with one line naming the holder, and the holder's entry and its
    process are untouched (the lock is taken before the leftover heal)."""
    a = inventory(tmp_path, "a", {"broker-1": "fl-lk-1", "broker-2": "fl-lk-2", "broker-3": "fl-lk-3"})
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        p = holders(a, "/results/run-A", 600, str(sleeper.pid))
        t0 = time.monotonic()
        r = faultline(["run", "campaigns/kill-restart.yaml", "--set", f"target.inventory={a}", "--no-check",
                       "--no-progress", "--results-dir", str(tmp_path / "results")], state, timeout=120)
        assert r.returncode == 3, r.stdout + r.stderr
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("faultline:")]
        assert len(errors) == 1, r.stderr
        assert errors[0].startswith(f"faultline: error: {a.resolve()}: the lab is in use by run /results/run-A "
                                    f"(pid {p.pid}, since ")
        assert errors[0].endswith("); `faultline run --wait` waits for it"), errors
        assert "healed" not in r.stderr
        assert not (tmp_path / "results").exists()      # no run directory for a refused run
        assert time.monotonic() - t0 < 60
        assert sleeper.poll() is None
        entries = [e for e in read_jsonl(state / "ledger.jsonl") if e.get("op") == "apply"]
        assert len(entries) == 1 and not any(e.get("op") == "healed" for e in read_jsonl(state / "ledger.jsonl"))
        # --wait with a timeout waits, says who it waits for, and gives up with one line
        w = faultline(["run", "campaigns/kill-restart.yaml", "--set", f"target.inventory={a}", "--no-check",
                       "--no-progress", "--wait", "--wait-timeout", "2", "--results-dir", str(tmp_path / "results")],
                      state, timeout=120)
        assert w.returncode == 3
        assert f"waiting for the lab (0s): in use by run /results/run-A (pid {p.pid}" in w.stderr
        assert "after waiting 2s" in w.stderr.splitlines()[-1]
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
