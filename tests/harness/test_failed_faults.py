"""A fault that fails half-way is healed, and a run in which no fault applied proves nothing.

The failing fault is real: a page-cache-loss reboot told its broker's log dir is
``/nonexistent`` SIGKILLs the broker, then its cut refuses ("log dir /nonexistent does not
exist"). Before faults healed on failure the broker stayed dead: a random mix of such reboots
left every broker down ("cluster did not recover") and still ended "valid; lost 0; expected
no-loss: yes", exit 0. Now:

- a random mix whose every reboot fails (real ``faultline run`` on the embedded kraftsim
  cluster) heals each one at once - the broker is started again and re-registers with the
  controller after every failure (its ``broker_registered`` event, not just a pid) - and ends
  inconclusive, exit 4, naming the failed faults; the ledger has no open entry;
- a targeted step that fails ends the run (exit 3, after the heal) unless it says
  ``on-failure: continue``: then the script goes on and ``until: {restarted: ...}`` sees the
  broker registered again;
- `faultline heal` in a new process, with only the ledger, starts a broker a failed reboot
  left down when the process that applied it died before healing;
- `faultline suite` shows a cell whose faults all failed as inconclusive, with the reasons.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from groundwork.ledger import Ledger
from tests.harness.clirun import LOCAL_INV, REPO, env_for, faultline, force_cleanup, read_jsonl, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

FAILING = "{fault: reboot, params: {mode: truncate-unflushed, log_dirs: [/nonexistent]}}"

MIX = textwrap.dedent(f"""
    name: failing-mix
    target: {{inventory: {LOCAL_INV}}}
    topic: {{name: fm, partitions: 2, replication_factor: 3, min_insync_replicas: 2}}
    workload: {{producers: 1, consumers: 1, rate: 50, duration: 14, drain_timeout: 20, recovery_timeout: 40}}
    nemesis:
      schedule: random
      random:
        faults: [{FAILING}]
        interval: 3
        duration: 1
        start-after: 2
    expect: no-loss
""")


def _run(tmp: Path, text: str, name: str, *extra: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, Path | None]:
    state, results = tmp / "state", tmp / "results"
    camp = tmp / f"{name}.yaml"
    tmp.mkdir(parents=True, exist_ok=True)
    camp.write_text(text, encoding="utf-8")
    try:
        p = faultline(["run", str(camp), "--seed", "3", "--results-dir", str(results), "--no-progress", *extra],
                      state, timeout=timeout)
    except BaseException:
        force_cleanup(results, state)
        raise
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    return p, (Path(lines[-1]) if lines and Path(lines[-1]).is_dir() else None)


def _events(rd: Path) -> list[dict]:
    out: list[dict] = []
    for f in sorted((rd / "cluster-logs").glob("*/events.jsonl")):
        out += read_jsonl(f)
    return out


def _failed(rd: Path) -> list[dict]:
    return [r for r in read_jsonl(rd / "timeline.jsonl") if r.get("kind") == "nemesis" and r.get("phase") == "failed"]


def _registered_after(rd: Path, failure: dict) -> bool:
    """The failed reboot's broker registered with the controller again after the failure."""
    w0 = json.loads((rd / "run.json").read_text())["wall_at_t0"]
    (host,) = failure["targets"]
    node_id = int(host.rsplit("-", 1)[1])
    return any(e.get("event") == "broker_registered" and e.get("broker") == node_id and e["wall"] - w0 >= failure["t"]
               for e in _events(rd))


def test_a_mix_whose_every_reboot_fails_heals_each_and_is_inconclusive(tmp_path):
    p, rd = _run(tmp_path, MIX, "failing-mix")
    tail = "\n".join(ln for ln in p.stderr.splitlines() if "WARN" not in ln)[-2500:]
    assert rd is not None, tail
    assert p.returncode == 4, f"exit {p.returncode}, want 4 (inconclusive):\n{tail}"
    fails = _failed(rd)
    assert len(fails) >= 2, fails
    tl = read_jsonl(rd / "timeline.jsonl")
    # a failure in the mix's last seconds is healed (its broker started: no node_exit below) as the
    # run ends; whether the new process has registered by the time the logs are collected is a
    # race with the end of the run, so registration is asked of the failures before that
    # (tests/harness/test_fault_start_failure.py and the targeted test below wait for it)
    end = next(r["t"] for r in tl if r.get("kind") == "phase" and r.get("phase") == "recovery")
    for f in fails:
        # the one-line reason, and what the heal undid: the broker the reboot had killed was started
        assert "log dir /nonexistent does not exist" in f["detail"]["reason"], f
        assert f["detail"]["undone"] == {"started": f["targets"]}, f
        if f["t"] < end - 6:
            assert _registered_after(rd, f), f"{f['targets']} never registered again after the failure at t={f['t']}"
    assert any(_registered_after(rd, f) for f in fails if f["t"] < end - 6), (end, fails)
    assert not [r for r in tl if r.get("kind") == "nemesis" and r.get("phase") == "start"
                and r["id"] not in {f["id"] for f in fails}], "a fault applied: the test wants every one to fail"
    assert not [r for r in tl if "did not recover" in str(r.get("text"))], "the cluster did not recover"
    assert not [r for r in tl if r.get("kind") == "node_exit"], "a broker was left down"
    assert Ledger(tmp_path / "state" / "ledger.jsonl").open_entries() == []
    # the verdict counts the faults and says why the run proves nothing
    v = json.loads((rd / "verdict.json").read_text())
    assert v["outcome"] == "inconclusive" and v["as_expected"] is False
    assert v["faults"]["applied"] == 0 and v["faults"]["failed"] == len(fails) and v["faults"]["min_applied"] == 1
    why = " ".join(v["inconclusive_because"])
    assert f"{len(fails)} of {len(fails)} faults failed to start: reboot[broker-" in why, why
    assert "log dir /nonexistent does not exist" in why
    assert f"INCONCLUSIVE: {len(fails)} of {len(fails)} faults failed to start" in " ".join(p.stdout.split())
    run = json.loads((rd / "run.json").read_text())
    assert run["faults"]["failed"] == len(fails) and len(run["faults"]["failed_list"]) == len(fails)
    # the report draws the failed faults apart (hatched, reason on hover) and lists them
    html = (rd / "report.html").read_text()
    assert 'id="failed-fault-0"><title>reboot[broker-' in html and "FAILED TO START: truncate-unflushed: log dir /nonexistent" in html
    assert 'id="faults-applied"' in html


def test_a_targeted_step_that_fails_goes_on_only_when_told(tmp_path):
    steps = textwrap.dedent(f"""
        name: failing-step
        target: {{inventory: {LOCAL_INV}}}
        topic: {{name: fs, partitions: 1, replication_factor: 3, min_insync_replicas: 2}}
        workload: {{producers: 1, consumers: 1, rate: 50, duration: 10, drain_timeout: 20, recovery_timeout: 40}}
        nemesis:
          schedule: targeted
          steps:
            - wait: 2
            - {{start: reboot, target: broker-2, params: {{log_dirs: [/nonexistent]}}, on-failure: continue}}
            - until: {{restarted: broker-2}}
              timeout: 40
            - {{start: kill, target: broker-3, duration: 2}}
            - wait: 2
        expect: no-loss
    """)
    p, rd = _run(tmp_path / "a", steps, "failing-step")
    tail = "\n".join(ln for ln in p.stderr.splitlines() if "WARN" not in ln)[-2500:]
    assert rd is not None and p.returncode == 0, f"exit {p.returncode}:\n{tail}"
    (f,) = _failed(rd)
    assert f["targets"] == ["broker-2"] and f["detail"]["undone"] == {"started": ["broker-2"]}
    assert _registered_after(rd, f)
    assert [r["text"] for r in read_jsonl(rd / "timeline.jsonl") if r.get("kind") == "note"
            and "condition met" in str(r.get("text"))] == ["condition met: restarted(broker-2)"]
    v = json.loads((rd / "verdict.json").read_text())
    assert v["outcome"] == "as_expected" and v["faults"]["applied"] == 1 and v["faults"]["failed"] == 1
    assert Ledger(tmp_path / "a" / "state" / "ledger.jsonl").open_entries() == []

    # without on-failure: the run ends (exit 3) after the heal, naming the step and the reason
    p, rd = _run(tmp_path / "b", steps.replace(", on-failure: continue", ""), "failing-step", "--no-check")
    assert p.returncode == 3 and rd is not None, p.stderr[-1500:]
    assert "nemesis.steps[1]: reboot on broker-2 failed: truncate-unflushed: log dir /nonexistent does not exist" in p.stderr
    assert "undone: started broker-2" in p.stderr
    (f,) = _failed(rd)
    assert f["detail"]["undone"] == {"started": ["broker-2"]}
    assert Ledger(tmp_path / "b" / "state" / "ledger.jsonl").open_entries() == []


CHILD = textwrap.dedent("""
    import random, sys
    from groundwork.clock import RunClock
    from groundwork.timeline import Timeline
    from harness.cluster import Cluster
    from harness.heal import OwnedLedger
    from harness.inventory import load_inventory
    from nemeses.base import NemesisContext
    from nemeses.reboot import Reboot
    inv = sys.argv[1]
    cluster = Cluster.from_inventory(load_inventory(inv))
    ctx = NemesisContext(nodes=dict(cluster.nodes), timeline=Timeline(sys.argv[2], RunClock()), ledger=OwnedLedger(),
                         rng=random.Random(1), inventory_path=inv)
    nem = Reboot()
    nem.setup(ctx)
    try:
        nem.start(["broker-2"], log_dirs=["/nonexistent"])
    except Exception as e:
        print("failed:", e, flush=True)
        sys.exit(7)      # as if the harness died here, before it could heal
""")


def test_faultline_heal_starts_a_broker_a_failed_reboot_left_down(tmp_path):
    """The process that applied the failing reboot dies before it heals: `faultline heal`, a new
    process with only the ledger, starts the broker, which registers again."""
    from harness.cluster import Cluster
    from targets.kraftsim import EmbeddedKraftsim
    from harness.heal import OwnedLedger
    from harness.inventory import load_inventory

    state = tmp_path / "state"
    os.environ["FAULTLINE_STATE_DIR"] = str(state)       # this process's cluster entry: owner alive, not healed
    try:
        emb = EmbeddedKraftsim(tmp_path / "run", 3, {}, OwnedLedger())
        emb.start()
        inv = emb.write_inventory()
        cluster = Cluster.from_inventory(load_inventory(inv))
        b2 = cluster.nodes["broker-2"]
        old = b2.service_pids()
        assert old
        child = subprocess.run([sys.executable, "-c", CHILD, str(inv), str(tmp_path / "timeline.jsonl")],
                               capture_output=True, text=True, timeout=120, env=env_for(state), cwd=REPO)
        assert child.returncode == 7 and "log dir /nonexistent does not exist" in child.stdout, child.stderr[-1500:]
        assert b2.service_pids() == [], "the failed reboot did not kill broker-2 (nothing to heal)"
        entry, = [e for e in Ledger(state / "ledger.jsonl").open_entries() if e.get("kind") == "fault"]
        assert entry["record"]["undo"]["killed"] == {"broker-2": old}     # what it did, in its record
        healed_at = time.time()
        h = faultline(["heal"], state, timeout=120)
        assert h.returncode == 0, h.stdout + h.stderr
        wait_for(b2.service_pids, 20, "broker-2 running again")
        ev = Path(emb.dir) / "controller" / "events.jsonl"
        ev = ev if ev.exists() else next(Path(emb.dir).glob("controller*/events.jsonl"))
        wait_for(lambda: [e for e in read_jsonl(ev) if e.get("event") == "broker_registered" and e.get("broker") == 2
                          and e["wall"] >= healed_at], 30, "broker-2 registered again")
        assert [e for e in Ledger(state / "ledger.jsonl").open_entries() if e.get("kind") == "fault"] == []
    finally:
        os.environ.pop("FAULTLINE_STATE_DIR", None)
        try:
            emb.stop()
        except Exception:  # noqa: BLE001
            pass
        force_cleanup(tmp_path / "run", state)


def test_suite_shows_a_cell_whose_faults_all_failed_as_inconclusive(tmp_path):
    camp = tmp_path / "failing-mix.yaml"
    camp.write_text(MIX.replace("duration: 14", "duration: 9"), encoding="utf-8")
    suite = tmp_path / "suite.yaml"
    suite.write_text(textwrap.dedent(f"""
        name: failing
        cells:
          - {{name: all-fail, campaign: {camp}, expect: no-loss, seeds: 4}}
    """), encoding="utf-8")
    state, results = tmp_path / "state", tmp_path / "results"
    try:
        p = faultline(["suite", str(suite), "--results-dir", str(results), "--no-progress", "--no-preflight"],
                      state, timeout=900)
    except BaseException:
        force_cleanup(results, state)
        raise
    assert p.returncode == 1, p.stderr[-2000:]     # a suite fails on an inconclusive cell
    sd = Path(p.stdout.strip().splitlines()[-1])
    fin = [r for r in read_jsonl(sd / "suite-log.jsonl") if r.get("event") == "cell_finished"]
    assert [r["outcome"] for r in fin] == ["inconclusive"]
    assert "failed to start" in fin[0]["reason"] and fin[0]["faults"]["applied"] == 0
    html = (sd / "index.html").read_text()
    row = html[html.index('data-cell="all-fail"'):]
    row = row[:row.index("</tr>")]
    assert 'class="inconclusive"' in html and ">inconclusive<" in row
    assert "failed faults: reboot[broker-" in row and "log dir /nonexistent does not exist" in row
    assert row.count("log dir /nonexistent does not exist") == 3     # reason, failed faults, hover: grouped once each
    assert f"0 / {fin[0]['faults']['failed']}" in row
    junit = (sd / "junit.xml").read_text()
    assert 'type="Inconclusive"' in junit and "failed faults: reboot[broker-" in junit
