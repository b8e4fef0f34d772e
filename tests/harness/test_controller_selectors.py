"""Selectors for a KRaft controller quorum: active-controller, controller-follower,
controllers-majority — resolved from the controllers' controller_elected / controller_resigned
events (docs/kraftsim-raft.md), the way a KRaft leader announces itself. No process runs here:
resolving a selector reads the view only. Before these selectors existed the schedule refused
them at load time (unknown host), so each of these tests failed."""
from __future__ import annotations

import random
import textwrap
from pathlib import Path
from typing import Any

import pytest

from groundwork.clock import RunClock
from groundwork.config import Validator
from groundwork.ledger import Ledger
from groundwork.timeline import Timeline
from harness.cluster import Cluster
from harness.inventory import load_inventory
from nemeses.base import NemesisContext
from nemeses.schedule import parse_schedule
from nemeses.schedule_runner import ScheduleError, ScheduleRunner


class EventView:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def partition_state(self, partition: int) -> dict[str, Any] | None:
        return None

    def events_since(self, wall: float) -> list[dict[str, Any]]:
        return [e for e in self.events if e["wall"] >= wall]


def _runner(tmp_path: Path, view: EventView) -> tuple[ScheduleRunner, Cluster]:
    lines = ["all:", "  vars: {faultline_transport: local, kafka_bootstrap: '127.0.0.1:1'}", "  children:",
             "    brokers:", "      hosts:"]
    lines += [f"        broker-{i}: {{kafka_node_id: {i}, kafka_service: {{command: 'sleep 1', pidfile: {tmp_path}/b{i}.pid}}}}"
              for i in (1, 2, 3)]
    lines += ["    controllers:", "      hosts:"]
    lines += [f"        controller-{k}: {{kafka_node_id: {999 + k}, kafka_service: {{command: 'sleep 1', "
              f"pidfile: {tmp_path}/c{k}.pid}}}}" for k in (1, 2, 3)]
    inv = tmp_path / "inv.yaml"
    inv.write_text("\n".join(lines) + "\n")
    cluster = Cluster.from_inventory(load_inventory(inv))
    raw = {"schedule": "targeted", "steps": [{"start": "kill", "target": "active-controller"},
                                             {"start": "pause", "target": "controller-follower"},
                                             {"start": "partition", "target": "controllers-majority"}]}
    sched = parse_schedule(Validator("test"), raw, "nemesis", partitions=1, host_names=set(cluster.nodes),
                           embedded_brokers=None)
    ctx = NemesisContext(nodes=dict(cluster.nodes), timeline=Timeline(tmp_path / "t.jsonl", RunClock()),
                         ledger=Ledger(tmp_path / "ledger.jsonl"), rng=random.Random(1), inventory_path=str(inv))
    return ScheduleRunner(ctx, view, sched), cluster


def test_active_controller_follows_the_latest_election_and_its_resignation(tmp_path: Path) -> None:
    view = EventView()
    r, _ = _runner(tmp_path, view)
    with pytest.raises(ScheduleError, match="no active controller"):
        r.resolve("active-controller")
    view.events.append({"wall": 1.0, "node": 1000, "event": "controller_elected", "epoch": 1, "leader": 1000})
    assert r.resolve("active-controller") == ["controller-1"]
    view.events.append({"wall": 2.0, "node": 1000, "event": "controller_resigned", "epoch": 1, "leader": 1000})
    with pytest.raises(ScheduleError):
        r.resolve("active-controller")
    view.events.append({"wall": 3.0, "node": 1001, "event": "controller_elected", "epoch": 3, "leader": 1001})
    view.events.append({"wall": 3.1, "node": 1002, "event": "controller_elected", "epoch": 2, "leader": 1002})
    assert r.resolve("active-controller") == ["controller-2"]  # the largest epoch wins, not the latest line
    assert r.resolve("controller-follower")[0] in ("controller-1", "controller-3")
    assert r.resolve("controllers-majority") == ["controller-1", "controller-3"]


def test_embedded_campaign_accepts_controller_hosts_and_selectors() -> None:
    raw = {"schedule": "targeted", "steps": [{"start": "kill", "target": "controller-2"},
                                             {"start": "kill", "target": "active-controller"}]}
    sched = parse_schedule(Validator("test"), raw, "nemesis", partitions=1, host_names=None, embedded_brokers=3)
    assert [s.target for s in sched.steps if s.kind == "start"] == [["controller-2"], ["active-controller"]]


def test_embedded_inventory_takes_a_controller_count(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(textwrap.dedent("""
        all:
          vars:
            faultline_transport: local
            faultline_embedded: kraftsim
            kraftsim: {brokers: 3, controllers: 3}
        """))
    assert load_inventory(inv).embedded_controllers == 3
    inv.write_text(inv.read_text().replace("controllers: 3", "controllers: 0"))
    with pytest.raises(Exception, match="all.vars.kraftsim.controllers"):
        load_inventory(inv)


def test_real_kafka_activations_name_the_active_controller_and_the_condition_waits_for_a_new_one(tmp_path: Path) -> None:
    """On real Kafka the controllers' events come from their logs (checkers/kafkalog):
    ``controller_activated`` (QuorumController's "Becoming the active controller at epoch E") and
    ``controller_renounced``, with the controller as ``node``. The selector reads them as it reads
    kraftsim's elections, and ``active-controller-not: SEL`` (a new active controller elected)
    holds only once another controller has activated."""
    view = EventView()
    r, _ = _runner(tmp_path, view)
    view.events.append({"wall": 1.0, "node": 1001, "event": "controller_activated", "controller_epoch": 4})
    assert r.resolve("active-controller") == ["controller-2"]
    r.names["ctl"] = ["controller-2"]
    assert r.condition({"active-controller-is": "@ctl"}, 0.0) and not r.condition({"active-controller-not": "@ctl"}, 0.0)
    view.events.append({"wall": 2.0, "node": 1001, "event": "controller_renounced", "controller_epoch": 4})
    assert not r.condition({"active-controller-not": "@ctl"}, 0.0)   # nobody active: not yet
    view.events.append({"wall": 3.0, "node": 1002, "event": "controller_activated", "controller_epoch": 5})
    assert r.resolve("active-controller") == ["controller-3"] and r.condition({"active-controller-not": "@ctl"}, 0.0)


def test_unnamed_controller_is_the_one_no_step_named_yet(tmp_path: Path) -> None:
    """Three controllers, each with its own part: after two are selected, the third is the only
    answer - whoever leads - and with all three selected the step fails instead of reusing one."""
    r, _ = _runner(tmp_path, EventView())
    assert r.resolve("unnamed-controller")[0] in ("controller-1", "controller-2", "controller-3")
    r.selected.update(["controller-2", "controller-3"])
    assert {r.resolve("unnamed-controller")[0] for _ in range(20)} == {"controller-1"}
    r.selected.add("controller-1")
    with pytest.raises(ScheduleError, match="named already"):
        r.resolve("unnamed-controller")


def test_stopped_brokers_are_the_ones_with_no_process_now(tmp_path: Path) -> None:
    """An operator's restart after Kafka halted some brokers: the selector names exactly the brokers
    whose pidfile names no live process (a real process here for broker-2), none when all run."""
    import subprocess
    r, _ = _runner(tmp_path, EventView())
    assert r.resolve("stopped-brokers") == ["broker-1", "broker-2", "broker-3"]   # nothing started yet
    procs = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]
    try:
        for i, p in enumerate(procs, 1):
            (tmp_path / f"b{i}.pid").write_text(f"{p.pid}\n")
        assert r.resolve("stopped-brokers") == []
        procs[1].kill()
        procs[1].wait()
        assert r.resolve("stopped-brokers") == ["broker-2"]
    finally:
        for p in procs:
            p.kill()
            p.wait()
