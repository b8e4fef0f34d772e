"""The observer records the active controller and its epoch (``RUN/controller-quorum.jsonl``).

Real processes: a three-controller kraftsim cluster (the fixture of
tests/kraftsim/raft/test_controller_failover_cluster.py) and the real Observer, which asks a
broker with DescribeQuorum (workloads/controller_quorum.py). The active controller is
SIGKILLed mid-run: the file must show the first leader, then another controller in a higher
epoch, and ``observer.jsonl`` must keep its one schema (partition rows only).

Before the observer knew DescribeQuorum there was no controller-quorum.jsonl: this failed.
The stand-in test (a broker without api 55) guards the other side: nothing is written and
nothing is asked again and again.
"""
from __future__ import annotations

import os
import signal
import time

import pytest

from groundwork.clock import RunClock
from tests.kraftsim.clients import create_topic
from tests.kraftsim.raft.test_controller_failover_cluster import NAMES, _events, _pid, cluster  # noqa: F401
from tests.workloads.kio_broker import KioBroker, PartitionState
from workloads.history import read_jsonl
from workloads.observer import Observer


def _name_of(root, node: int) -> str:
    return next(n for n in NAMES if any(e.get("node") == node for e in _events(root, n)))


def _quorum_lines(path) -> list[dict]:
    return list(read_jsonl(path)) if path.exists() else []


@pytest.mark.slow
def test_observer_records_active_controller_and_epoch_across_a_failover(cluster, tmp_path) -> None:
    root, bootstrap = cluster
    create_topic(bootstrap, "cq", partitions=2, rf=3, min_isr=2)
    out = tmp_path / "run"
    obs = Observer(bootstrap, "cq", out / "observer.jsonl", RunClock().now, interval=0.1)
    obs.start()
    try:
        qpath = out / "controller-quorum.jsonl"
        deadline = time.time() + 15
        while not (obs.quorum and obs.quorum.latest and obs.quorum.latest["leader_id"] is not None):
            assert time.time() < deadline, f"no quorum sample: {obs.quorum and obs.quorum.last_error}"
            time.sleep(0.1)
        first = obs.quorum.latest
        os.kill(_pid(root, _name_of(root, first["leader_id"])), signal.SIGKILL)
        deadline = time.time() + 20
        while True:
            now = obs.quorum.latest
            if now["leader_id"] not in (None, first["leader_id"]):
                break
            assert time.time() < deadline, f"no new leader recorded: {now}"
            time.sleep(0.1)
    finally:
        obs.stop()
    lines = _quorum_lines(qpath)
    led = [(r["leader_id"], r["leader_epoch"]) for r in lines if r["leader_id"] is not None]
    assert led[0] == (first["leader_id"], first["leader_epoch"])
    new = [x for x in led if x[0] != first["leader_id"]]
    assert new and new[0][1] > first["leader_epoch"], lines
    assert all(set(r) >= {"t", "leader_id", "leader_epoch", "high_watermark", "voters", "error"} for r in lines)
    assert len({len(r["voters"]) for r in lines if r["voters"] is not None}) == 1
    assert [r["t"] for r in lines] == sorted(r["t"] for r in lines)
    # one line per change (plus a heartbeat every few seconds), not one per 0.1 s sample
    assert len(lines) < 20, len(lines)
    part_rows = list(read_jsonl(out / "observer.jsonl"))
    assert part_rows and all("partition" in r and "leader_id" not in r for r in part_rows)


def test_broker_without_describe_quorum_records_nothing(tmp_path) -> None:
    b = KioBroker(1, "obs", {0: PartitionState(1, 4, [1])})
    try:
        obs = Observer(b.address, "obs", tmp_path / "observer.jsonl", RunClock().now, interval=0.05)
        obs.start()
        time.sleep(0.6)
        obs.stop()
        assert obs.quorum is not None and obs.quorum.last_error is None
        assert not (tmp_path / "controller-quorum.jsonl").exists()
        assert 55 not in b.requests
        assert b.requests.count(18) <= 2  # one handshake each for the partition and the quorum sampler
        assert (tmp_path / "observer.jsonl").exists()
    finally:
        b.close()
