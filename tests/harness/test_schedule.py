"""Schedules and process nemeses on real processes, without a Kafka cluster.

The "brokers" here are ``sleep`` processes started through an ordinary local inventory
(``kafka_service: {command, pidfile}``), so kill / pause / restart act on real pids and
`heal` rebuilds the nodes from the inventory file exactly as after a crash. Only the
partition metadata (leader, ISR) is given by a small in-test view, because no Kafka runs
here; the cluster-facing conditions are covered by the end-to-end tests.
"""
from __future__ import annotations

import random
import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from harness.cluster import Cluster
from groundwork.clock import RunClock
from groundwork.config import ConfigError, Validator
from harness.heal import heal_all
from harness.inventory import load_inventory
from groundwork.ledger import Ledger
from groundwork.timeline import Timeline
from groundwork.transport.local import kill_process_group
from nemeses.base import CONDITIONS, REGISTRY, NemesisContext, register_condition
from nemeses.schedule import parse_schedule
from nemeses.schedule_runner import ScheduleError, ScheduleRunner
from tests.harness.clirun import proc_state, read_jsonl, wait_for


class StaticView:
    """Partition metadata a test sets by hand (no cluster runs in these tests)."""

    def __init__(self) -> None:
        self.parts: dict[int, dict[str, Any]] = {0: {"leader": 2, "isr": [1, 2, 3], "elr": [], "replicas": [1, 2, 3]}}

    def partition_state(self, partition: int) -> dict[str, Any] | None:
        return self.parts.get(partition)

    def events_since(self, wall: float) -> list[dict[str, Any]]:
        return []


@pytest.fixture
def lab(tmp_path: Path):
    hosts = "\n".join(
        f"        broker-{i}: {{kafka_node_id: {i}, kafka_service: {{command: 'sleep 600', "
        f"pidfile: {tmp_path}/b{i}.pid, log: {tmp_path}/b{i}.log}}}}" for i in (1, 2, 3))
    inv_path = tmp_path / "inv.yaml"
    inv_path.write_text(textwrap.dedent("""
        all:
          vars: {faultline_transport: local, kafka_bootstrap: "127.0.0.1:1"}
          children:
            brokers:
              hosts:
        """) + hosts + "\n")
    cluster = Cluster.from_inventory(load_inventory(inv_path))
    for n in cluster.nodes.values():
        n.start_service()
    try:
        yield tmp_path, inv_path, cluster
    finally:
        for n in cluster.nodes.values():
            for pid in n.service_pids():
                kill_process_group(pid, signal.SIGCONT)
                kill_process_group(pid, signal.SIGKILL)


def make_runner(tmp: Path, inv_path: Path, cluster: Cluster, raw: dict, seed: int, tag: str) -> ScheduleRunner:
    sched = parse_schedule(Validator("test"), raw, "nemesis", partitions=1, host_names=set(cluster.nodes),
                           embedded_brokers=None)
    ctx = NemesisContext(nodes=dict(cluster.nodes), timeline=Timeline(tmp / f"timeline-{tag}.jsonl", RunClock()),
                         ledger=Ledger(tmp / "ledger.jsonl"), rng=random.Random(seed), inventory_path=str(inv_path))
    return ScheduleRunner(ctx, StaticView(), sched)


def faults_of(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    return [(e["fault"], tuple(e["targets"])) for e in read_jsonl(path) if e.get("kind") == "nemesis" and e["phase"] == "start"]


def test_random_mix_replays_with_the_same_seed(lab) -> None:
    tmp, inv_path, cluster = lab
    raw = {"schedule": "random", "random": {"faults": ["pause", "kill", "restart"], "interval": 0.05,
                                            "duration": 0.05, "start-after": 0}}
    seqs = {}
    for tag, seed in (("a", 7), ("b", 7), ("c", 8)):
        r = make_runner(tmp, inv_path, cluster, raw, seed, tag)
        r.run(until_mono=time.monotonic() + 2.0)
        assert r.heal_all() == []
        seqs[tag] = faults_of(tmp / f"timeline-{tag}.jsonl")
    n = min(len(seqs["a"]), len(seqs["b"]))
    assert n >= 4, seqs
    assert seqs["a"][:n] == seqs["b"][:n]
    assert seqs["a"][:n] != seqs["c"][:n], "a different seed should choose differently"
    assert all(n.service_pids() for n in cluster.nodes.values()), "every broker runs again after heal"
    assert Ledger(tmp / "ledger.jsonl").open_entries() == []


def test_targeted_steps_select_pause_kill_and_conditions(lab) -> None:
    tmp, inv_path, cluster = lab
    raw = {"schedule": "targeted", "steps": [
        {"select": "leader-of:0", "as": "L"},
        {"start": "pause", "target": "@L", "as": "p", "duration": 0.5},
        {"start": "kill", "target": "follower-of:0", "as": "k"},
        {"until": {"stopped": "@k"}, "timeout": 5},
        {"stop": "k"},
        {"until": {"running": "@k"}, "timeout": 5},
    ]}
    r = make_runner(tmp, inv_path, cluster, raw, 3, "t")
    leader = cluster.nodes["broker-2"]
    steps = r.schedule.steps
    r.run_step(steps[0])
    assert r.names["L"] == ["broker-2"]
    pid = leader.service_pids()[0]
    r.run_step(steps[1])
    wait_for(lambda: proc_state(pid) == "T", 5, "SIGSTOP to take effect")
    for s in steps[2:]:
        r.run_step(s)
    killed = r.names["k"][0]
    assert killed in ("broker-1", "broker-3")
    r.sleep(0.6)  # the pause's automatic stop fires inside the schedule's sleeps
    wait_for(lambda: proc_state(pid) == "S", 5, "SIGCONT to take effect")
    tl = read_jsonl(tmp / "timeline-t.jsonl")
    assert [(e["fault"], e["phase"]) for e in tl if e.get("kind") == "nemesis"] == [
        ("pause", "start"), ("kill", "start"), ("kill", "stop"), ("pause", "stop")]


def test_until_timeout_fails_or_continues(lab) -> None:
    tmp, inv_path, cluster = lab
    raw = {"schedule": "targeted", "steps": [
        {"until": {"isr-excludes": {"partition": 0, "broker": "broker-1"}}, "timeout": 0.3},
        {"until": {"isr-excludes": {"partition": 0, "broker": "broker-1"}}, "timeout": 0.3, "on-timeout": "continue"},
    ]}
    r = make_runner(tmp, inv_path, cluster, raw, 1, "u")
    with pytest.raises(ScheduleError, match="not met within 0.3s"):
        r.run_step(r.schedule.steps[0])
    r.run_step(r.schedule.steps[1])  # no exception


def test_heal_from_ledger_in_a_fresh_context(lab) -> None:
    """What `faultline heal` does after a crash: only the ledger and the inventory file."""
    tmp, inv_path, cluster = lab
    raw = {"schedule": "targeted", "steps": [{"start": "kill", "target": "broker-1", "as": "k"},
                                             {"start": "pause", "target": "broker-3", "as": "p"}]}
    r = make_runner(tmp, inv_path, cluster, raw, 1, "h")
    paused = cluster.nodes["broker-3"].service_pids()[0]
    r.run()
    assert cluster.nodes["broker-1"].service_pids() == []
    wait_for(lambda: proc_state(paused) == "T", 5, "SIGSTOP to take effect")
    ledger = Ledger(tmp / "ledger.jsonl")
    assert len(ledger.open_entries()) == 2
    rep = heal_all(ledger)  # a new ScheduleRunner-free heal, nodes rebuilt from inv.yaml
    assert rep.failed == [] and len(rep.healed) == 2
    assert cluster.nodes["broker-1"].service_pids(), "the killed broker was restarted"
    wait_for(lambda: proc_state(paused) == "S", 5, "SIGCONT to take effect")
    assert ledger.open_entries() == []


def test_a_condition_a_nemesis_module_registers_reads_the_faults_the_schedule_applied(lab) -> None:
    """Nemesis modules register ``until:`` conditions beside the fault registry (nemeses.base),
    and the interpreter hands them its applied faults by name, so a nemesis module needs no
    import of the schedule modules (which load every nemesis module)."""
    tmp, inv_path, cluster = lab
    seen: list[str | None] = []

    def applied(faults, name) -> bool:
        got = faults.active_fault(str(name))
        seen.append(got[1].fault if got else None)
        return got is not None

    register_condition("test-applied", lambda c, v, p: c.string(v, p), applied)
    raw = {"schedule": "targeted", "steps": [
        {"start": "pause", "target": "broker-1", "as": "p"},
        {"until": {"test-applied": "p"}, "timeout": 2},
        {"stop": "p"},
        {"until": {"test-applied": "p"}, "timeout": 0.3},
    ]}
    try:
        r = make_runner(tmp, inv_path, cluster, raw, 1, "c")
        steps = r.schedule.steps
        for s in steps[:3]:
            r.run_step(s)
        assert seen == ["pause"]
        with pytest.raises(ScheduleError, match="not met within 0.3s"):
            r.run_step(steps[3])
        assert seen[-1] is None
        assert r.heal_all() == []
    finally:
        CONDITIONS.pop("test-applied", None)


def test_the_alter_partition_conditions_are_known_once_the_nemeses_load() -> None:
    raw = {"schedule": "targeted", "steps": [{"start": "alter-partition", "target": "broker-1", "as": "hold"},
                                             {"until": {"alter-partition-held": "hold"}},
                                             {"until": {"alter-partition-released": "hold"}}]}
    sched = parse_schedule(Validator("test"), raw, "nemesis", partitions=1, host_names=None, embedded_brokers=3)
    assert [s.kind for s in sched.steps] == ["start", "until", "until"]


def test_an_unknown_fault_names_the_nemesis_modules_that_failed_to_import(monkeypatch) -> None:
    """A fault's name is not its module's (``partition`` lives in nemeses/network_partition.py),
    so a fault missing because its module failed to import is explained by every failure."""
    import nemeses.schedule as language
    from nemeses.catalog import load_nemeses

    assert load_nemeses() == {}
    monkeypatch.delitem(REGISTRY, "partition")
    monkeypatch.setattr(language, "load_nemeses", lambda: {"network_partition": "OSError: no iptables here"})
    raw = {"schedule": "targeted", "steps": [{"start": "partition", "target": "broker-1"}]}
    with pytest.raises(ConfigError, match=r"nemesis.steps\[0\].start: unknown fault 'partition' "
                       r"\(module nemeses.network_partition failed to import: OSError: no iptables here\)"):
        parse_schedule(Validator("c.yaml"), raw, "nemesis", partitions=1, host_names=None, embedded_brokers=3)


def test_min_applied_defaults_to_one_only_when_the_schedule_starts_a_fault() -> None:
    """A schedule that only waits (a calm control run) has no fault to apply, so it cannot fall
    short of one; a schedule that starts a fault must apply at least one to have tested anything."""
    def sched(raw):
        return parse_schedule(Validator("test"), raw, "nemesis", partitions=1, host_names=None, embedded_brokers=3)
    assert sched({"schedule": "targeted", "steps": [{"wait": 1}]}).min_applied == 0
    assert sched({"schedule": "targeted", "steps": [{"wait": 1}, {"start": "kill", "target": "broker-1"}]}).min_applied == 1
    assert sched({"schedule": "random", "random": {"faults": ["kill"]}}).min_applied == 1
    assert sched({"schedule": "targeted", "steps": [{"wait": 1}], "min_applied": 2}).min_applied == 2
