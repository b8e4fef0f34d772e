"""Observer over real sockets and Kafka wire bytes (kio), against metadata stand-ins.

See kio_broker.py for why a stand-in: DescribeTopicPartitions/ELR and the stale-broker
merge cannot be driven on kraftsim here. The kraftsim tests cover leader changes live.
"""
from __future__ import annotations

import socket
import time

import pytest

from groundwork.clock import RunClock
from tests.workloads.kio_broker import KioBroker, PartitionState
from workloads.history import read_jsonl
from workloads.observer import Observer

TOPIC = "obs"


@pytest.fixture
def brokers():
    made: list[KioBroker] = []
    yield made
    for b in made:
        b.close()


def test_describe_topic_partitions_gives_leader_epoch_isr_and_elr(tmp_path, brokers):
    b1 = KioBroker(1, TOPIC, {0: PartitionState(1, 4, [1], elr=[2, 3]),
                              1: PartitionState(2, 7, [2, 3, 1], elr=[])})
    brokers.append(b1)
    obs = Observer(b1.address, TOPIC, tmp_path / "observer.jsonl", RunClock().now)
    recs = obs.sample()
    obs.stop()
    by_part = {r["partition"]: r for r in recs}
    assert by_part[0]["leader"] == 1 and by_part[0]["leader_epoch"] == 4
    assert by_part[0]["isr"] == [1] and by_part[0]["elr"] == [2, 3]
    assert by_part[1]["isr"] == [2, 3, 1] and by_part[1]["elr"] == []
    assert all(r["error"] is None and r["broker"] == 1 for r in recs)
    assert 75 in b1.requests, "DescribeTopicPartitions must be used when advertised"


def test_metadata_v12_fallback_marks_elr_unknown(tmp_path, brokers):
    b1 = KioBroker(1, TOPIC, {0: PartitionState(3, 2, [3, 1])}, supports_dtp=False)
    brokers.append(b1)
    obs = Observer(b1.address, TOPIC, tmp_path / "observer.jsonl", RunClock().now)
    (rec,) = obs.sample()
    obs.stop()
    assert (rec["leader"], rec["leader_epoch"], rec["isr"], rec["elr"]) == (3, 2, [3, 1], None)
    assert 75 not in b1.requests


def test_stale_broker_loses_to_higher_leader_epoch_and_failover(tmp_path, brokers):
    # broker 1 still serves leader epoch 3 (cut off from the controller); broker 2 knows epoch 5
    stale = KioBroker(1, TOPIC, {0: PartitionState(1, 3, [1, 2, 3])})
    fresh = KioBroker(2, TOPIC, {0: PartitionState(2, 5, [2, 3])})
    stale.peers.append(fresh)  # the bootstrap broker names its peer in Metadata
    brokers += [stale, fresh]
    out = tmp_path / "observer.jsonl"
    obs = Observer(stale.address, TOPIC, out, RunClock().now, interval=0.05)
    obs.start()
    assert obs.wait_until(lambda latest: latest.get(0, {}).get("leader_epoch") == 5, timeout=5)
    assert obs.latest()[0]["leader"] == 2 and obs.latest()[0]["broker"] == 2
    fresh.close()  # the fresh broker dies: the observer keeps sampling through the stale one
    n = obs.samples
    assert obs.wait_until(lambda latest: latest[0]["broker"] == 1, timeout=5)
    assert obs.samples > n
    obs.stop()
    recs = list(read_jsonl(out))
    assert {r["broker"] for r in recs} == {1, 2}
    assert all(set(r) >= {"t", "topic", "partition", "leader", "leader_epoch", "isr", "elr", "error"}
               for r in recs)
    ts = [r["t"] for r in recs]
    assert ts == sorted(ts)


def test_no_broker_answering_is_one_error_record(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    obs = Observer(f"127.0.0.1:{port}", TOPIC, tmp_path / "observer.jsonl", RunClock().now)
    t0 = time.monotonic()
    (rec,) = obs.sample()
    obs.stop()
    assert time.monotonic() - t0 < 2
    assert rec["partition"] is None and rec["error"].startswith("NO_BROKER_ANSWERED")
    assert obs.latest() == {}
