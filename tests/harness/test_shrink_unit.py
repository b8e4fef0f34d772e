"""The pure parts of `faultline shrink`: schedule extraction, ddmin, simplification, mechanisms.

Why separate from the end-to-end shrink tests: the search is where a subtle bug (a step
dropped from a candidate it should be in, a role read from the wrong moment) would silently
make every shrink worse; these run in well under a second and pin that logic down. The
source run here is a hand-written run directory (timeline + observer, the formats of
docs/history-format.md); the end-to-end tests start from real runs.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from groundwork.config import Validator
from harness.shrink.ddmin import Exhausted, ddmin, simplify
from harness.shrink.judge import attribution_mechanism, mechanisms, primary
from harness.shrink.schedule import (FaultStep, SourceRun, candidate_campaign, canon, extract_steps, schedule_key,
                                    to_step_script)
from tests.harness.clirun import read_jsonl
from tests.harness.test_schedule import lab  # noqa: F401  (a fixture: sleep processes as brokers)
from nemeses.schedule import parse_schedule

REPO = Path(__file__).resolve().parents[2]


def _write_run(d: Path) -> None:
    tl = [
        {"t": 5.0, "kind": "phase", "phase": "nemesis", "detail": {}},
        {"t": 7.0, "kind": "nemesis", "phase": "start", "id": "f-a", "fault": "kill", "targets": ["broker-1"], "detail": {}},
        {"t": 10.0, "kind": "nemesis", "phase": "stop", "id": "f-a", "fault": "kill", "targets": ["broker-1"], "detail": {"restarted": ["broker-1"]}},
        {"t": 12.5, "kind": "nemesis", "phase": "start", "id": "f-b", "fault": "reboot", "targets": ["broker-2"],
         "detail": {"mode": "truncate-unflushed", "seed": 9}},
        {"t": 16.5, "kind": "nemesis", "phase": "stop", "id": "f-b", "fault": "reboot", "targets": ["broker-2"], "detail": {}},
        {"t": 18.0, "kind": "nemesis", "phase": "start", "id": "f-c", "fault": "pause", "targets": ["broker-3"], "detail": {}},
        {"t": 19.0, "kind": "nemesis", "phase": "stop", "id": "f-c", "fault": "pause", "targets": ["broker-3"], "detail": {}},
    ]
    obs = [
        {"t": 6.9, "partition": 0, "leader": 1, "isr": [1, 2], "replicas": [1, 2], "error": None},
        {"t": 7.1, "partition": 0, "leader": -1, "isr": [2], "replicas": [1, 2], "error": None},  # after the kill: not seen at 7.0
        {"t": 12.0, "partition": 0, "leader": 2, "isr": [2], "replicas": [1, 2], "error": None},
        {"t": 17.9, "partition": 0, "leader": 1, "isr": [1, 2], "replicas": [1, 2], "error": None},
    ]
    (d / "timeline.jsonl").write_text("".join(json.dumps(r) + "\n" for r in tl))
    (d / "observer.jsonl").write_text("".join(json.dumps(r) + "\n" for r in obs) + '{"t": 20, "torn')


def test_extract_steps_roles_timing_params(tmp_path: Path) -> None:
    _write_run(tmp_path)
    steps = extract_steps(tmp_path)
    assert [s.fault for s in steps] == ["kill", "reboot", "pause"]
    # the role at the fault's start, from the latest observer sample at or before it
    assert steps[0].target == ("leader-of:0",)            # broker-1 led at 6.9
    assert steps[1].target == ("leader-of:0",)            # broker-2 led at 12.0
    assert steps[2].target == ("broker-3",)               # not a replica: its name
    assert [s.at for s in steps] == [2.0, 7.5, 13.0]       # from the nemesis phase's start
    assert [s.duration for s in steps] == [3.0, 4.0, 1.0]
    assert steps[1].params_dict == {"mode": "truncate-unflushed", "seed": 9}
    assert steps[0].hosts == ("broker-1",) and steps[0].source_id == "f-a"


def test_a_fault_whose_start_failed_is_not_a_step(tmp_path: Path) -> None:
    """A fault whose start raised (healed at once: its start, stop and failed records) did not
    apply as meant: the run's loss is not its, and a replay of it would fail again."""
    _write_run(tmp_path)
    with (tmp_path / "timeline.jsonl").open("a") as fh:
        for r in ({"t": 20.0, "kind": "nemesis", "phase": "start", "id": "f-d", "fault": "reboot", "targets": ["broker-1"],
                   "detail": {"log_dirs": ["/nonexistent"]}},
                  {"t": 20.2, "kind": "nemesis", "phase": "stop", "id": "f-d", "fault": "reboot", "targets": ["broker-1"],
                   "detail": {"started": ["broker-1"]}},
                  {"t": 20.2, "kind": "nemesis", "phase": "failed", "id": "f-d", "fault": "reboot", "targets": ["broker-1"],
                   "detail": {"reason": "log dir /nonexistent does not exist", "undone": {"started": ["broker-1"]}}}):
            fh.write(json.dumps(r) + "\n")
    assert [s.source_id for s in extract_steps(tmp_path)] == ["f-a", "f-b", "f-c"]


def test_follower_role_only_when_unambiguous(tmp_path: Path) -> None:
    from harness.shrink.schedule import role_selector
    assert role_selector("broker-2", {"leader": 1, "isr": [1, 2]}, 0, {}) == "follower-of:0"
    # two followers: follower-of:0 could pick the other one on replay, so keep the name
    assert role_selector("broker-2", {"leader": 1, "isr": [1, 2, 3]}, 0, {}) == "broker-2"
    assert role_selector("broker-2", {"leader": 1, "isr": [1]}, 0, {}) == "broker-2"   # out of the ISR
    assert role_selector("broker-2", None, 0, {}) == "broker-2"


def test_step_script_is_valid_campaign_language(tmp_path: Path) -> None:
    _write_run(tmp_path)
    steps = extract_steps(tmp_path)
    script = to_step_script(steps)
    assert script[0] == {"wait": 2.0}
    assert script[1] == {"start": "kill", "target": "leader-of:0", "as": "f1", "on-failure": "continue", "duration": 3.0}
    assert script[2] == {"wait": 5.5}
    sched = parse_schedule(Validator(tmp_path / "c.yaml"), {"schedule": "targeted", "steps": script}, "nemesis",
                           partitions=1, host_names=None, embedded_brokers=3)
    assert [s.kind for s in sched.steps] == ["wait", "start", "wait", "start", "wait", "start"]
    # a replay goes on past a fault that failed; min_applied (every step) makes it inconclusive
    assert {s.on_failure for s in sched.steps if s.kind == "start"} == {"continue"}
    src = SourceRun(run_dir=tmp_path, run={"seed": 3},
                    campaign={"name": "x", "target": {"inventory": str(REPO / "inventory/local.yaml")},
                              "workload": {"duration": 60}, "nemesis": {"schedule": "random", "settings": {"a": 1}}})
    doc = candidate_campaign(src, steps[:1], tail=5)
    assert doc["workload"]["duration"] == 10.0 and doc["expect"] == "loss"   # last heal at 5.0 + tail
    assert doc["nemesis"]["settings"] == {"a": 1} and doc["nemesis"]["schedule"] == "targeted"
    assert doc["nemesis"]["min_applied"] == 1


def _steps(n: int) -> list[FaultStep]:
    return [FaultStep(fault="kill", target=(f"broker-{i % 3 + 1}",), at=float(4 * i), duration=4.0) for i in range(n)]


def test_ddmin_finds_the_two_steps_that_matter() -> None:
    steps = _steps(12)
    need = {steps[3], steps[8]}
    calls: list[int] = []

    def test(c: list[FaultStep], phase: str) -> bool:
        calls.append(tuple(c))
        return need <= set(c)

    got = ddmin(steps, test)
    assert got == [steps[3], steps[8]]
    # the shrink caches outcomes: distinct candidates are what costs replays
    assert len(set(calls)) <= 24, len(set(calls))   # far fewer than the 4096 subsets


def test_ddmin_single_culprit_and_order_kept() -> None:
    steps = _steps(7)
    assert ddmin(steps, lambda c, p: steps[6] in c) == [steps[6]]
    got = ddmin(steps, lambda c, p: steps[1] in c and steps[5] in c and steps[2] in c)
    assert got == [steps[1], steps[2], steps[5]]


def test_simplify_shortens_moves_earlier_keeps_what_is_needed() -> None:
    a = FaultStep(fault="kill", target=("follower-of:0",), at=20.0, duration=8.0)
    b = FaultStep(fault="kill", target=("leader-of:0", "broker-3"), at=28.5, duration=8.0)

    def test(c: list[FaultStep], phase: str) -> bool:
        x, y = c
        # needs: a at least 4 s long, b on the leader, b starting within 1 s of a's heal
        return x.duration >= 4 and "leader-of:0" in y.target and 0 <= y.at - x.end <= 1.0

    got = simplify([a, b], test)
    x, y = got
    assert y.target == ("leader-of:0",)
    assert x.duration == 4.0 and x.at < 20.0 and test(got, "")
    assert y.duration < 8.0 and y.at < 28.5 - 4.0   # moved with a's shorter duration, then earlier


def test_budget_exhaustion_propagates() -> None:
    def test(c: list[FaultStep], phase: str) -> bool:
        raise Exhausted()
    with pytest.raises(Exhausted):
        ddmin(_steps(4), test)


def test_schedule_key_is_stable_and_salted() -> None:
    s = _steps(3)
    assert schedule_key(s) == schedule_key(list(s))
    assert schedule_key(s) != schedule_key(s[:2]) and schedule_key(s, "x") != schedule_key(s)


def test_mechanisms_prefer_the_checkers_own_then_attribution() -> None:
    assert mechanisms({"mechanisms": {"unclean_election": 7, "unexplained": 0}, "counts": {"lost_write": 7}}) == \
        {"unclean_election": 7}
    assert mechanisms({"counts": {"lost_write": 0}, "attribution": []}) == {}
    row = {"ack_t": 20.0,
           "elections": ["t=26.492 leader_elected @controller/1000 leader=1 leader_epoch=2 isr=[1] reason=unclean",
                         "t=26.548 became_leader @broker-1/1 broker=1 leader_epoch=2 log_end_offset=1845"],
           "removed_by": ["t=27.202 truncation @broker-2/2 from_offset=3846 to_offset=1843 reason=diverging_epoch"]}
    assert attribution_mechanism(row) == "unclean_election"
    lossy_leader = {"ack_t": 10.0, "elections": ["t=1.4 leader_elected @controller/1000 leader=1 reason=initial"],
                    "removed_by": ["t=18.3 recovery @broker-1/1 recovery_point=0 log_end_offset=0 reason=unclean_shutdown",
                                   "t=18.9 truncation @broker-2/2 from_offset=2971 to_offset=0 reason=diverging_epoch"]}
    assert attribution_mechanism(lossy_leader) == "truncated_to_lossy_leader"
    v = {"counts": {"lost_write": 3}, "attribution": [row, row, lossy_leader]}
    assert primary(mechanisms(v)) == "unclean_election"


# ---- overlapping faults (a random mix with concurrency) ------------------------------------

def _order(steps: list[FaultStep]) -> list[tuple[str, int]]:
    """The order of every start and heal; a heal at the instant of a start comes first."""
    idx = {id(s): i for i, s in enumerate(sorted(steps, key=lambda s: s.at))}
    ev = [(s.at, 1, "start", idx[id(s)]) for s in steps] + [(s.end, 0, "stop", idx[id(s)]) for s in steps]
    return [(k, i) for _, _, k, i in sorted(ev)]


def _play(script: list[dict]) -> list[tuple[str, int]]:
    """The step script on a virtual clock, every start instant: the order it starts and heals in."""
    clock, ev = 0.0, []
    for st in script:
        if "wait" in st:
            clock += st["wait"]
        elif "start" in st:
            n = int(st["as"][1:]) - 1
            ev.append((clock, 1, "start", n))
            if "duration" in st:
                ev.append((clock + st["duration"], 0, "stop", n))
        elif "stop" in st:
            ev.append((clock, 0, "stop", int(st["stop"][1:]) - 1))
    return [(k, i) for _, _, k, i in sorted(ev)]


def _write_overlapping_run(d: Path) -> None:
    """A recorded random run with concurrency 2: B inside A, C across A's heal, D alone."""
    def f(fid: str, fault: str, host: str, t0: float, t1: float) -> list[dict]:
        return [{"t": t0, "kind": "nemesis", "phase": "start", "id": fid, "fault": fault, "targets": [host], "detail": {}},
                {"t": t1, "kind": "nemesis", "phase": "stop", "id": fid, "fault": fault, "targets": [host], "detail": {}}]
    tl = [{"t": 1.0, "kind": "phase", "phase": "nemesis", "detail": {}},
          *f("f-a", "kill", "broker-1", 3.0, 11.0), *f("f-b", "pause", "broker-2", 5.0, 8.0),
          *f("f-c", "reboot", "broker-3", 9.0, 13.0), *f("f-d", "kill", "broker-2", 15.0, 16.0)]
    tl.sort(key=lambda r: r["t"])
    (d / "timeline.jsonl").write_text("".join(json.dumps(r) + "\n" for r in tl))
    (d / "observer.jsonl").write_text("")


def test_overlapping_faults_replay_as_overlapping(tmp_path: Path) -> None:
    _write_overlapping_run(tmp_path)
    steps = extract_steps(tmp_path)
    assert [(s.fault, s.at, s.duration) for s in steps] == [("kill", 2.0, 8.0), ("pause", 4.0, 3.0),
                                                            ("reboot", 8.0, 4.0), ("kill", 14.0, 1.0)]
    script = to_step_script(steps)
    # A and C have another start or heal inside them: started as a name, healed by a stop step
    # at its place; B and D have nothing inside and heal themselves after their duration
    assert script == [{"wait": 2.0}, {"start": "kill", "target": "broker-1", "as": "f1", "on-failure": "continue"},
                      {"wait": 2.0}, {"start": "pause", "target": "broker-2", "as": "f2", "on-failure": "continue", "duration": 3.0},
                      {"wait": 4.0}, {"start": "reboot", "target": "broker-3", "as": "f3", "on-failure": "continue"},
                      {"wait": 2.0}, {"stop": "f1"}, {"wait": 2.0}, {"stop": "f3"},
                      {"wait": 2.0}, {"start": "kill", "target": "broker-2", "as": "f4", "on-failure": "continue", "duration": 1.0}]
    assert _play(script) == _order(steps)
    sched = parse_schedule(Validator(tmp_path / "c.yaml"), {"schedule": "targeted", "steps": script}, "nemesis",
                           partitions=1, host_names=None, embedded_brokers=3)
    assert [s.kind for s in sched.steps].count("stop") == 2


def test_ddmin_over_overlapping_faults_keeps_the_overlap_in_a_valid_campaign(tmp_path: Path) -> None:
    _write_overlapping_run(tmp_path)
    a, b, c, d = extract_steps(tmp_path)

    def still_fails(cand: list[FaultStep], phase: str) -> bool:   # "C began while A was applied"
        return a in cand and c in cand

    got = ddmin([a, b, c, d], still_fails)
    assert got == [a, c]
    script = to_step_script(got)
    assert _play(script) == _order(got) == [("start", 0), ("start", 1), ("stop", 0), ("stop", 1)]
    src = SourceRun(run_dir=tmp_path, run={"seed": 3},
                    campaign={"name": "x", "target": {"inventory": str(REPO / "inventory/local.yaml")},
                              "workload": {"duration": 60}, "nemesis": {"schedule": "random"}})
    doc = candidate_campaign(src, got, tail=5)
    parse_schedule(Validator(tmp_path / "c.yaml"), doc["nemesis"], "nemesis", partitions=1, host_names=None,
                   embedded_brokers=3)
    assert doc["workload"]["duration"] == 17.0     # C heals at 12 + tail


def test_simplify_never_reorders_overlapping_starts_and_heals() -> None:
    """Every candidate simplification tries keeps the order of the starts and heals (B inside
    A, C across A's heal), so no replay is spent on a different overlap; and it still gets
    shorter."""
    a = FaultStep(fault="kill", target=("follower-of:0",), at=2.0, duration=10.0)
    b = FaultStep(fault="alter-partition", target=("broker-2",), at=5.0, duration=4.0)
    c = FaultStep(fault="kill", target=("leader-of:0", "broker-3"), at=10.0, duration=6.0)
    want = _order([a, b, c])
    seen: list[list[tuple[str, int]]] = []

    def test(cand: list[FaultStep], phase: str) -> bool:
        seen.append(_order(cand))
        return True

    got = simplify([a, b, c], test)
    assert seen and all(o == want for o in seen), [o for o in seen if o != want]
    assert max(s.end for s in got) < 16.0 and sum(s.duration for s in got) < 20.0


def test_overlapping_steps_keep_their_order_on_real_processes(lab) -> None:
    """The replay of a recorded overlap on real processes: B's start takes a second (a clean
    restart with downtime, as a reboot's cut or a disk wipe takes time), so a script of
    self-healing steps alone would heal A before C starts; with A healed by a stop step at
    its place, C still starts while A is applied."""
    from tests.harness.test_schedule import make_runner

    tmp, inv_path, cluster = lab
    a = FaultStep(fault="kill", target=("broker-1",), at=0.0, duration=3.0)
    b = FaultStep(fault="restart", target=("broker-2",), at=1.0, duration=1.5, params=canon({"downtime": 1.0}))
    c = FaultStep(fault="pause", target=("broker-3",), at=2.8, duration=1.0)
    r = make_runner(tmp, inv_path, cluster, {"schedule": "targeted", "steps": to_step_script([a, b, c])}, 1, "ov")
    r.run()
    assert r.heal_all() == []
    names = {"kill": 0, "restart": 1, "pause": 2}
    got = [(e["phase"], names[e["fault"]]) for e in read_jsonl(tmp / "timeline-ov.jsonl") if e.get("kind") == "nemesis"]
    assert got == _order([a, b, c]), got


def test_the_proxy_placement_is_not_a_step(tmp_path: Path) -> None:
    """A run with the AlterPartition proxy placed by DNAT records the placement as a fault of
    its own (so `faultline heal` removes the rules). It is the nemesis's setup, not a fault the
    schedule applied: replayed as a step it would start a second alter-partition (a hold on
    the controller's node id) beside the run's real hold."""
    def f(fid: str, targets: list[str], t0: float, t1: float, detail: dict) -> list[dict]:
        return [{"t": t0, "kind": "nemesis", "phase": "start", "id": fid, "fault": "alter-partition",
                 "targets": targets, "detail": detail},
                {"t": t1, "kind": "nemesis", "phase": "stop", "id": fid, "fault": "alter-partition",
                 "targets": targets, "detail": {}}]
    tl = [{"t": 1.0, "kind": "phase", "phase": "nemesis", "detail": {}},
          *f("f-p", ["broker-1", "broker-2"], 4.0, 30.0, {"placement": "dnat", "upstream": "127.0.0.1:9093", "proxy": "127.0.0.1:4000"}),
          *f("f-h", ["broker-2"], 4.1, 20.0, {"partition": 0, "then_delay_ms": 15000})]
    tl.sort(key=lambda r: r["t"])
    (tmp_path / "timeline.jsonl").write_text("".join(json.dumps(r) + "\n" for r in tl))
    (tmp_path / "observer.jsonl").write_text("")
    steps = extract_steps(tmp_path)
    assert [(s.source_id, s.params_dict) for s in steps] == [("f-h", {"partition": 0, "then_delay_ms": 15000})]
