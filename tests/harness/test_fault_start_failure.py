"""A fault whose start raises is healed at once, through the schedule's one door (ActiveFaults).

The "brokers" are real ``sleep`` processes of an ordinary local inventory (the ``lab`` fixture of
test_schedule.py); the failing fault is a real page-cache-loss reboot whose log dir does not
exist: it SIGKILLs its broker, then the shipped cut script refuses. Before faults healed on
failure the broker stayed dead and the schedule only noted "failed". The same on a real kraftsim
cluster, through `faultline run`, is tests/harness/test_failed_faults.py.
"""
from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from groundwork.clock import RunClock
from groundwork.config import ConfigError, Validator
from groundwork.ledger import Ledger
from groundwork.timeline import Timeline
from nemeses.active import ActiveFaults, FaultFailed
from nemeses.base import NemesisContext
from nemeses.catalog import load_nemeses
from nemeses.schedule import parse_schedule
from tests.harness.clirun import read_jsonl
from tests.harness.test_schedule import StaticView, lab, make_runner  # noqa: F401  (lab is a fixture)


def _faults(tmp: Path, cluster) -> ActiveFaults:
    load_nemeses()
    ctx = NemesisContext(nodes=dict(cluster.nodes), timeline=Timeline(tmp / "timeline.jsonl", RunClock()),
                         ledger=Ledger(tmp / "ledger.jsonl"), rng=random.Random(1), inventory_path=str(tmp / "inv.yaml"))
    return ActiveFaults(ctx)


def test_a_reboot_that_fails_after_its_kill_is_healed_and_counted(lab) -> None:
    tmp, _, cluster = lab
    b2 = cluster.nodes["broker-2"]
    before = b2.service_pids()
    faults = _faults(tmp, cluster)
    with pytest.raises(FaultFailed) as e:
        faults.start("reboot", ["broker-2"], {"log_dirs": ["/nonexistent"]})
    assert str(e.value) == ("reboot on broker-2 failed: truncate-unflushed: log dir /nonexistent does not exist (check log.dirs / "
                            "metadata.log.dir in the node's config) (undone: started broker-2)")
    now = b2.service_pids()
    assert now and now != before, "the broker the reboot killed runs again, as a new process"
    assert Ledger(tmp / "ledger.jsonl").open_entries() == []
    tl = [r for r in read_jsonl(tmp / "timeline.jsonl") if r.get("kind") == "nemesis"]
    assert [r["phase"] for r in tl] == ["start", "stop", "failed"] and len({r["id"] for r in tl}) == 1
    assert tl[2]["detail"] == {"reason": e.value.reason, "undone": {"started": ["broker-2"]}}
    # the ledger held what it did before it raised: the pids it killed
    applies = [r for r in read_jsonl(tmp / "ledger.jsonl") if r.get("op") == "apply"]
    assert applies[-1]["record"]["undo"]["killed"] == {"broker-2": before}
    assert faults.applied == {} and faults.summary() == {
        "applied": 0, "failed": 1, "failed_list": [{"fault": "reboot", "targets": ["broker-2"], "reason": e.value.reason}]}
    # a second fault that applies is counted as applied; its heal is the usual one
    a = faults.start("kill", ["broker-1"], {})
    faults.stop(a.name)
    assert faults.summary()["applied"] == 1 and cluster.nodes["broker-1"].service_pids()


def test_a_fault_that_fails_before_touching_anything_is_recorded_and_undoes_nothing(lab) -> None:
    tmp, _, cluster = lab
    faults = _faults(tmp, cluster)
    with pytest.raises(FaultFailed) as e:
        faults.start("reboot", ["broker-1"], {"mode": "hammer"})
    assert "mode must be one of" in e.value.reason and e.value.undone == "nothing was applied"
    (rec,) = [r for r in read_jsonl(tmp / "timeline.jsonl") if r.get("kind") == "nemesis"]
    assert rec["phase"] == "failed" and rec["id"] and rec["detail"]["undone"] == "nothing was applied"
    assert not (tmp / "ledger.jsonl").exists() or Ledger(tmp / "ledger.jsonl").open_entries() == []
    assert faults.summary()["failed"] == 1


def test_random_mix_goes_on_after_a_failed_fault_and_every_broker_runs(lab) -> None:
    tmp, inv_path, cluster = lab
    raw = {"schedule": "random", "random": {
        "faults": [{"fault": "reboot", "params": {"log_dirs": ["/nonexistent"]}}, "pause"],
        "interval": 0.05, "duration": 0.05, "start-after": 0}}
    r = make_runner(tmp, inv_path, cluster, raw, 5, "mix")
    r.run(until_mono=time.monotonic() + 3.0)
    assert r.heal_all() == []
    s = r.faults.summary()
    assert s["failed"] >= 1 and s["applied"] >= 1, s
    assert all(n.service_pids() for n in cluster.nodes.values()), "a failed reboot left a broker down"
    assert Ledger(tmp / "ledger.jsonl").open_entries() == []
    tl = read_jsonl(tmp / "timeline-mix.jsonl")
    assert len([x for x in tl if x.get("phase") == "failed"]) == s["failed"]
    assert not [x for x in tl if x.get("kind") == "note" and "failed" in str(x.get("text"))]


def test_on_failure_and_min_applied_are_checked_when_the_campaign_loads() -> None:
    v = Validator("c.yaml")
    base = {"schedule": "targeted", "steps": [{"start": "kill", "target": "broker-1"}]}
    sched = parse_schedule(v, base, "nemesis", partitions=1, host_names={"broker-1"}, embedded_brokers=None)
    assert sched.steps[0].on_failure == "fail" and sched.min_applied == 1
    assert parse_schedule(v, {"schedule": "none"}, "nemesis", partitions=1, host_names=None,
                          embedded_brokers=3).min_applied == 0
    assert parse_schedule(v, {**base, "min_applied": 0}, "nemesis", partitions=1, host_names={"broker-1"},
                          embedded_brokers=None).min_applied == 0
    for raw, where, want in (
            ({**base, "min_applied": -1}, "nemesis.min_applied", ">= 0"),
            ({**base, "min_applied": "all"}, "nemesis.min_applied", "integer"),
            ({"schedule": "none", "min_applied": 1}, "nemesis.min_applied", "schedule is none"),
            ({"schedule": "targeted", "steps": [{"start": "kill", "target": "broker-1", "on-failure": "retry"}]},
             "nemesis.steps[0].on-failure", "continue")):
        with pytest.raises(ConfigError) as e:
            parse_schedule(v, raw, "nemesis", partitions=1, host_names={"broker-1"}, embedded_brokers=None)
        msg = str(e.value)
        assert "\n" not in msg and where in msg and want in msg, msg
