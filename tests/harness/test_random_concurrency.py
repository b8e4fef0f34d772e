"""Random mixes with ``concurrency: k``: overlapping faults, the same plan for the same seed,
and ``k: 1`` drawing exactly what the one-at-a-time mix drew before concurrency existed.

The "brokers" are real ``sleep`` processes of an ordinary local inventory (as in
test_schedule.py), so kill / pause / restart act on real pids and heal really restarts them;
only the partition metadata is a fixed in-test view, because no Kafka runs here. The run on
a real embedded kraftsim cluster is test_random_overlap_on_kraftsim below.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from groundwork.clock import RunClock
from groundwork.config import ConfigError, Validator
from groundwork.ledger import Ledger
from groundwork.timeline import Timeline
from nemeses.base import NemesisContext
from nemeses.random_plan import PlannedFault, plan_until
from nemeses.schedule import parse_schedule
from nemeses.schedule_runner import ScheduleRunner
from tests.harness.clirun import REPO, faultline, force_cleanup, pids_matching, proc_state, read_jsonl
from tests.harness.test_schedule import StaticView, lab, make_runner  # noqa: F401  (lab is a fixture)


class Recording(random.Random):
    """The run's generator, recording every draw the schedule makes with it."""

    def __init__(self, seed: int):
        self.draws: list[tuple[str, Any]] = []
        super().__init__(seed)

    def randrange(self, *a: Any, **k: Any) -> int:
        v = super().randrange(*a, **k)
        self.draws.append(("randrange", v))
        return v

    def choice(self, seq: Any) -> Any:
        v = super().choice(seq)
        self.draws.append(("choice", v))
        return v

    def uniform(self, a: float, b: float) -> float:
        v = super().uniform(a, b)
        self.draws.append(("uniform", round(v, 12)))
        return v


# What the one-at-a-time mix drew on main before concurrency existed (commit 8359d44,
# nemeses/schedule_runner.py run_random), for seed 7, faults [pause, kill, restart] on
# random-broker over broker-1..3: recorded by running that commit's ScheduleRunner with
# this Recording generator on the same lab of sleep processes.
MAIN_DRAWS_SEED_7 = [
    ("randrange", 1), ("choice", "broker-1"), ("uniform", 0.894823496423),
    ("randrange", 0), ("choice", "broker-1"), ("uniform", 1.321274291991),
    ("randrange", 0), ("choice", "broker-2"), ("uniform", 1.082788005903),
    ("randrange", 2), ("choice", "broker-1"), ("uniform", 0.537495658442),
    ("randrange", 1), ("choice", "broker-2"), ("uniform", 0.569855423575),
    ("randrange", 0), ("choice", "broker-3"), ("uniform", 0.924519189143),
]
MAIN_FAULTS_SEED_7 = [("kill", ("broker-1",)), ("pause", ("broker-1",)), ("pause", ("broker-2",)),
                      ("restart", ("broker-1",)), ("kill", ("broker-2",)), ("pause", ("broker-3",))]

MIX = {"faults": ["pause", "kill", "restart"], "interval": 0.05, "duration": 0.05, "start-after": 0}


def runner_with(tmp: Path, inv_path: Path, cluster: Any, raw: dict, rng: random.Random, tag: str) -> ScheduleRunner:
    sched = parse_schedule(Validator("test"), raw, "nemesis", partitions=1, host_names=set(cluster.nodes),
                           embedded_brokers=None)
    ctx = NemesisContext(nodes=dict(cluster.nodes), timeline=Timeline(tmp / f"timeline-{tag}.jsonl", RunClock()),
                         ledger=Ledger(tmp / "ledger.jsonl"), rng=rng, inventory_path=str(inv_path))
    return ScheduleRunner(ctx, StaticView(), sched)


def intervals(path: Path) -> list[dict[str, Any]]:
    """Each fault's own start and stop, paired by fault id, from a timeline."""
    got: dict[str, dict[str, Any]] = {}
    for e in read_jsonl(path):
        if e.get("kind") == "nemesis":
            f = got.setdefault(e["id"], {"fault": e["fault"], "targets": tuple(e["targets"])})
            f[e["phase"]] = e["t"]
    return list(got.values())


def most_at_once(faults: list[dict[str, Any]]) -> int:
    edges = sorted([(f["start"], 1) for f in faults] + [(f["stop"], -1) for f in faults], key=lambda x: (x[0], x[1]))
    n = best = 0
    for _, d in edges:
        n += d
        best = max(best, n)
    return best


def test_concurrency_one_draws_exactly_what_main_drew(lab) -> None:  # noqa: F811
    """Old seeds replay: at k=1 every draw of the run's generator, in order, and the faults it
    chose are those main's one-at-a-time loop made (the expected values come from main)."""
    tmp, inv_path, cluster = lab
    rng = Recording(7)
    r = runner_with(tmp, inv_path, cluster, {"schedule": "random", "random": {**MIX, "concurrency": 1}}, rng, "k1")
    r.run(until_mono=time.monotonic() + 2.0)
    assert r.heal_all() == []
    assert rng.draws[:len(MAIN_DRAWS_SEED_7)] == MAIN_DRAWS_SEED_7
    started = [(f["fault"], f["targets"]) for f in intervals(tmp / "timeline-k1.jsonl")]
    assert started[:len(MAIN_FAULTS_SEED_7)] == MAIN_FAULTS_SEED_7
    assert most_at_once(intervals(tmp / "timeline-k1.jsonl")) == 1


def _plan(seed: int, k: int = 2) -> list[PlannedFault]:
    sched = parse_schedule(Validator("t"), {"schedule": "random", "random": {
        "faults": ["kill", "pause", {"fault": "reboot", "duration": 1}], "interval": 4, "duration": 3,
        "start-after": 2, "concurrency": k}}, "nemesis", partitions=1, host_names=None, embedded_brokers=3)
    assert sched.random is not None
    return plan_until(sched.random, seed, 120.0)


def test_the_same_seed_gives_the_same_plan_in_any_process() -> None:
    """The plan is drawn from the seed alone: the same in another interpreter with another
    hash seed (a slot generator seeded by Python's per-process hash() would differ there)."""
    here = [(p.slot, p.n, p.fault, p.delay, p.duration, p.pick) for p in _plan(7, 3)]
    code = ("from tests.harness.test_random_concurrency import _plan; import json; "
            "print(json.dumps([(p.slot, p.n, p.fault, p.delay, p.duration, p.pick) for p in _plan(7, 3)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                         env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout
    assert [tuple(x) for x in json.loads(out)] == here
    assert _plan(8, 3) != _plan(7, 3)


def test_a_plan_overlaps_up_to_k_faults_each_with_its_own_duration() -> None:
    for k in (2, 3):
        ps = _plan(11, k)
        spans = [{"start": p.nominal, "stop": p.nominal + p.duration} for p in ps]
        assert most_at_once(spans) == k, f"k={k}: the slots never all overlap in 120 s"
        for s in range(k):
            mine = [p for p in ps if p.slot == s]
            assert [p.n for p in mine] == list(range(len(mine)))
            # a slot's next fault begins only after its previous one is healed
            assert all(b.nominal >= a.nominal + a.duration for a, b in zip(mine, mine[1:]))
        # durations drawn per fault around the fault's own duration (reboot: 1 s; others 3 s)
        for p in ps:
            base = 1.0 if p.fault == "reboot" else 3.0
            assert 0.5 * base <= p.duration <= 1.5 * base
        assert len({p.duration for p in ps}) > len(ps) // 2
        # the slots are not in step: their first faults start at different times
        assert len({p.nominal for p in ps if p.n == 0}) == k


def test_two_slots_overlap_on_real_processes_and_every_fault_heals(lab) -> None:  # noqa: F811
    tmp, inv_path, cluster = lab
    raw = {"schedule": "random", "random": {"faults": ["pause", "kill"], "interval": 0.2, "duration": 0.6,
                                            "start-after": 0, "concurrency": 2}}
    r = runner_with(tmp, inv_path, cluster, raw, random.Random(5), "k2")
    started: list[tuple[PlannedFault, str | None]] = []
    plain = r._start_planned

    def spy(mix: Any, p: PlannedFault, until: float | None) -> str | None:
        name = plain(mix, p, until)
        started.append((p, name))
        return name

    r._start_planned = spy  # type: ignore[method-assign]
    r.run(until_mono=time.monotonic() + 5.0)
    assert r.heal_all() == []
    faults = intervals(tmp / "timeline-k2.jsonl")
    assert all("stop" in f for f in faults), "a fault was never healed"
    assert most_at_once(faults) == 2, faults
    # never two process faults on one broker at once: the second would just replace the first
    for a in faults:
        for b in faults:
            if a is not b and set(a["targets"]) & set(b["targets"]):
                assert a["stop"] <= b["start"] or b["stop"] <= a["start"], (a, b)
    # every fault started is the plan's: its targets are what its own generator picks
    brokers = sorted(cluster.nodes)
    applied = [(p, n) for p, n in started if n]
    assert len(applied) == len(faults) >= 6
    for p, _ in applied:
        assert p.fault in ("pause", "kill")
    picked = [(p.fault, (random.Random(p.pick).choice(brokers),)) for p, _ in applied]
    assert sorted(picked) == sorted((f["fault"], f["targets"]) for f in faults)
    assert Ledger(tmp / "ledger.jsonl").open_entries() == []
    for n in cluster.nodes.values():
        pids = n.service_pids()
        assert pids and proc_state(pids[0]) in ("S", "R"), f"{n.name} is not running free after the heal"


def test_two_faults_holding_one_broker_down_restart_it_once_the_last_heals(lab) -> None:  # noqa: F811
    """A targeted schedule may overlap two faults on one broker. The first heal must not bring
    back a broker the other still holds down; the last heal does, in either order, and the
    heal ledger closes both."""
    tmp, inv_path, cluster = lab
    b1 = cluster.nodes["broker-1"]
    for first, second in (("a", "b"), ("b", "a")):
        raw = {"schedule": "targeted", "steps": [{"start": "kill", "target": "broker-1", "as": "a"},
                                                 {"start": "kill", "target": "broker-1", "as": "b"},
                                                 {"stop": first}, {"stop": second}]}
        r = make_runner(tmp, inv_path, cluster, raw, 1, f"hold-{first}")
        for s in r.schedule.steps[:3]:
            r.run_step(s)
        assert b1.service_pids() == [], f"healing {first} restarted broker-1 while {second} still holds it down"
        notes = [e["text"] for e in read_jsonl(tmp / f"timeline-hold-{first}.jsonl") if e.get("kind") == "note"]
        assert any(f"{second} still holds it" in t for t in notes), notes
        r.run_step(r.schedule.steps[3])
        assert b1.service_pids(), f"healing {second}, the last holder, did not restart broker-1"
        assert Ledger(tmp / "ledger.jsonl").open_entries() == []
    # interrupted with both applied: heal_all (newest first) leaves it to the older one, which starts it
    raw = {"schedule": "targeted", "steps": [{"start": "kill", "target": "broker-1", "as": "a"},
                                             {"start": "kill", "target": "broker-1", "as": "b"}]}
    r = make_runner(tmp, inv_path, cluster, raw, 1, "hold-int")
    r.run()
    assert b1.service_pids() == []
    assert r.heal_all() == []
    assert b1.service_pids() and Ledger(tmp / "ledger.jsonl").open_entries() == []


def test_a_kill_during_a_pause_ends_it_and_both_heal(lab) -> None:  # noqa: F811
    """Allowed in a targeted schedule: the kill ends the pause's process, the kill's heal
    starts a new one (a pause holds nothing down), and the pause's heal (SIGCONT to the pid
    it stopped, now gone) is harmless."""
    tmp, inv_path, cluster = lab
    b2 = cluster.nodes["broker-2"]
    raw = {"schedule": "targeted", "steps": [{"start": "pause", "target": "broker-2", "as": "p"},
                                             {"start": "kill", "target": "broker-2", "as": "k"},
                                             {"stop": "k"}, {"stop": "p"}]}
    r = make_runner(tmp, inv_path, cluster, raw, 1, "pk")
    old = b2.service_pids()
    r.run()
    new = b2.service_pids()
    assert new and new != old and proc_state(new[0]) in ("S", "R")
    assert Ledger(tmp / "ledger.jsonl").open_entries() == []


@pytest.mark.parametrize("value, want", [(0, "expected an integer >= 1, got 0"),
                                         ("two", "expected an integer, got a string 'two'"),
                                         (1.5, "expected an integer, got a number 1.5")])
def test_concurrency_is_validated_in_one_line(value: Any, want: str) -> None:
    raw = {"schedule": "random", "random": {"faults": ["kill"], "concurrency": value}}
    with pytest.raises(ConfigError) as e:
        parse_schedule(Validator("c.yaml"), raw, "nemesis", partitions=1, host_names=None, embedded_brokers=3)
    assert str(e.value) == f"c.yaml: nemesis.random.concurrency: {want}"


def test_a_faults_own_targets_and_duration_are_validated() -> None:
    raw = {"schedule": "random", "random": {"faults": [{"fault": "kill", "targets": "leader-of:4"}]}}
    with pytest.raises(ConfigError, match=r"nemesis.random.faults\[0\].targets: leader-of:P needs a partition number below 1"):
        parse_schedule(Validator("c.yaml"), raw, "nemesis", partitions=1, host_names=None, embedded_brokers=3)
    raw = {"schedule": "random", "random": {"faults": [{"fault": "kill", "duration": -1}]}}
    with pytest.raises(ConfigError, match=r"nemesis.random.faults\[0\].duration: expected a number >= 0"):
        parse_schedule(Validator("c.yaml"), raw, "nemesis", partitions=1, host_names=None, embedded_brokers=3)


def test_random_overlap_on_kraftsim(tmp_path: Path) -> None:
    """A real embedded kraftsim cluster under a random mix with two slots: the timeline shows
    moments with two faults active (each its own start and stop), every fault heals, the run
    completes and leaves no open ledger entry and no process behind."""
    state, results = tmp_path / "state", tmp_path / "results"
    try:
        r = faultline(["run", str(REPO / "campaigns" / "random-mix.yaml"), "--seed", "3",
                       "--set", "workload.duration=20", "--set", "workload.producers=1",
                       "--set", "nemesis.random.concurrency=2", "--set", "nemesis.random.interval=1",
                       "--set", "nemesis.random.start-after=1",
                       "--results-dir", str(results), "--no-progress", "--no-check"], state, timeout=300)
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-2000:]}"
        run_dir = Path([ln for ln in r.stdout.splitlines() if ln.strip()][-1])
        faults = intervals(run_dir / "timeline.jsonl")
        assert faults and all("stop" in f for f in faults), faults
        assert most_at_once(faults) == 2, faults
        notes = [e for e in read_jsonl(run_dir / "timeline.jsonl") if e.get("kind") == "note"]
        assert any(e.get("concurrency") == 2 and isinstance(e.get("plan_seed"), int) for e in notes)
        assert Ledger(state / "ledger.jsonl").open_entries() == []
        assert pids_matching(str(run_dir)) == []
    finally:
        force_cleanup(results, state)
