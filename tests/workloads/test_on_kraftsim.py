"""The workloads against a real 3-broker kraftsim cluster (one cluster for this module).

What it shows (the history recording of docs/history-format.md):
* an acks=all producer writing N messages leaves N invokes and N oks with offsets;
* the tailing consumer and the final drain read them back at the same offsets;
* the observer sees leaders and ISR, and a leader change after SIGKILL of a leader, while
  the producer and consumer keep recording through the fault;
* a producer process killed with SIGKILL leaves a readable history (torn tail tolerated).

The leader-kill test runs last: it leaves one broker dead.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from groundwork.clock import RunClock
from workloads.admin import AdminError, create_topic, describe
from workloads.consumer import ConsumerWorkload
from workloads.drain import drain
from workloads.epochless_reader import EpochlessReaderWorkload
from workloads.history import ReadStats, read_jsonl
from workloads.observer import Observer
from workloads.producer import ProducerWorkload

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Kraftsim:
    bootstrap: str
    dir: Path
    proc: subprocess.Popen

    def broker_pid(self, node_id: int) -> int:
        return int((self.dir / f"broker-{node_id}.pid").read_text().split()[0])


def _kill_all(proc: subprocess.Popen, cdir: Path) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    for sig_target in [proc.pid]:
        try:
            os.killpg(sig_target, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pf in cdir.glob("*.pid"):  # nodes restarted outside the group, if any
        try:
            os.kill(int(pf.read_text().split()[0]), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass
    proc.wait(5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("kraftsim")
    cdir = base / "cluster"
    log_path = base / "cluster.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kraftsim", "cluster", "--brokers", "3", "--dir", str(cdir)],
                                stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        bootstrap = None
        while bootstrap is None:
            for line in log_path.read_text(errors="replace").splitlines():
                if line.startswith("bootstrap.servers="):
                    bootstrap = line.split("=", 1)[1].strip()
            assert proc.poll() is None, f"kraftsim exited: {log_path.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "kraftsim printed no bootstrap.servers= line in 90 s"
            time.sleep(0.1)
        yield Kraftsim(bootstrap, cdir, proc)
    finally:
        _kill_all(proc, cdir)


@pytest.fixture
def to_stop():
    """Workload clients started by a test; SIGKILLed if the test did not stop them."""
    made: list = []
    yield made
    for w in made:
        if w.alive() and w.pid:
            os.kill(w.pid, signal.SIGKILL)


def sends(path: Path) -> tuple[dict[int, dict], dict[int, list[dict]]]:
    invokes: dict[int, dict] = {}
    done: dict[int, list[dict]] = {}
    for r in read_jsonl(path):
        if r["type"] == "invoke":
            invokes[r["op"]] = r
        else:
            done.setdefault(r["op"], []).append(r)
    return invokes, done


N = 1500


def test_acks_all_producer_then_consumer_and_drain_agree(cluster, tmp_path, to_stop):
    topic = "wl-basic"
    info = create_topic(cluster.bootstrap, topic, 3, 3, min_insync_replicas=2)
    assert sorted(info) == [0, 1, 2] and all(p.leader is not None for p in info.values())
    clock = RunClock()
    consumer = ConsumerWorkload("consumer-0", cluster.bootstrap, topic, 3, tmp_path, clock.now)
    to_stop.append(consumer)
    consumer.start()
    producer = ProducerWorkload("producer-0", cluster.bootstrap, topic, 3, tmp_path, clock.now,
                                max_sends=N)
    to_stop.append(producer)
    producer.start()
    assert producer.wait_completed(N, timeout=60), producer.stats()
    assert producer.stop(timeout=10) == {"invoked": N, "ok": N, "fail": 0, "info": 0}

    invokes, done = sends(tmp_path / "producer-0.jsonl")
    assert len(invokes) == N and len(done) == N
    assert all(len(v) == 1 and v[0]["type"] == "ok" for v in done.values())
    acked = {(r["partition"], r["offset"]): r["value"] for (r,) in done.values()}
    assert len(acked) == N, "two acks at one offset"
    for op, (r,) in done.items():
        assert r["partition"] == invokes[op]["partition"] == op % 3 and r["value"] == invokes[op]["value"]
        assert r["t"] >= invokes[op]["t"]
    per_part = Counter(p for p, _ in acked)
    for p, n in per_part.items():  # one writer, no faults: offsets 0..n-1 exactly
        assert sorted(o for q, o in acked if q == p) == list(range(n))

    deadline = time.monotonic() + 30
    while consumer.stats()["ok"] < N and time.monotonic() < deadline:
        time.sleep(0.05)
    consumer.stop(timeout=5)
    polled = {(r["partition"], r["offset"]): r["value"]
              for r in read_jsonl(tmp_path / "consumer-0.jsonl") if r["f"] == "poll" and r["type"] == "ok"}
    assert polled == acked

    ends = drain(cluster.bootstrap, topic, 3, tmp_path, clock.now, timeout=30)
    assert ends == dict(per_part)
    recs = list(read_jsonl(tmp_path / "drain.jsonl"))
    drained = {(r["partition"], r["offset"]): r["value"] for r in recs if r["f"] == "drain"}
    assert drained == acked
    assert sorted((r["partition"], r["type"], r["offset"]) for r in recs if r["f"] == "drain-end") == \
        [(p, "ok", per_part[p]) for p in range(3)]


def test_idempotent_producer_records_the_same_way(cluster, tmp_path, to_stop):
    topic = "wl-idempotent"
    create_topic(cluster.bootstrap, topic, 2, 3, min_insync_replicas=2)
    clock = RunClock()
    producer = ProducerWorkload("producer-i", cluster.bootstrap, topic, 2, tmp_path, clock.now,
                                idempotence=True, max_in_flight=5, max_sends=500)
    to_stop.append(producer)
    producer.start()
    assert producer.wait_completed(500, timeout=60), producer.stats()
    assert producer.stop(timeout=10) == {"invoked": 500, "ok": 500, "fail": 0, "info": 0}
    invokes, done = sends(tmp_path / "producer-i.jsonl")
    offsets = sorted((r["partition"], r["offset"]) for (r,) in done.values())
    assert offsets == sorted((p, o) for p in range(2) for o in range(250))


def test_admin_create_is_checked_and_idempotent_only_when_asked(cluster):
    with pytest.raises(AdminError, match=r"min.insync.replicas=4 must be between 1 and the replication factor 3"):
        create_topic(cluster.bootstrap, "wl-bad", 1, 3, min_insync_replicas=4)
    create_topic(cluster.bootstrap, "wl-twice", 1, 3, min_insync_replicas=2)
    with pytest.raises(AdminError, match="TOPIC_ALREADY_EXISTS"):
        create_topic(cluster.bootstrap, "wl-twice", 1, 3, min_insync_replicas=2)
    info = create_topic(cluster.bootstrap, "wl-twice", 1, 3, min_insync_replicas=2, exist_ok=True)
    assert info[0].leader in info[0].isr and sorted(info[0].replicas) == [1, 2, 3]
    with pytest.raises(AdminError, match="wl-missing"):
        describe(cluster.bootstrap, "wl-missing", timeout=5)


def test_epochless_reader_reads_every_acked_write_at_its_offset(cluster, tmp_path, to_stop):
    """The Fetch v11 reader without a leader epoch (workloads/epochless_reader.py, KAFKA-14704's
    reader) records what it read as poll oks: every acknowledged write, at its offset, once."""
    topic = "wl-epochless"
    create_topic(cluster.bootstrap, topic, 3, 3, min_insync_replicas=2)
    clock = RunClock()
    producer = ProducerWorkload("producer-0", cluster.bootstrap, topic, 3, tmp_path, clock.now, max_sends=300)
    to_stop.append(producer)
    producer.start()
    assert producer.wait_completed(300, timeout=60), producer.stats()
    producer.stop(timeout=10)
    _, done = sends(tmp_path / "producer-0.jsonl")
    acked = {(r["partition"], r["offset"]): r["value"] for (r,) in done.values() if r["type"] == "ok"}
    assert len(acked) == 300
    reader = EpochlessReaderWorkload("reader-0", cluster.bootstrap, topic, 3, tmp_path, clock.now, fetch_wait_ms=50)
    to_stop.append(reader)
    reader.start()
    deadline = time.monotonic() + 30
    while reader.stats()["ok"] < 300 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reader.stop(timeout=5)["ok"] == 300 and reader.error() is None
    recs = list(read_jsonl(tmp_path / "reader-0.jsonl"))
    assert all(r["f"] == "poll" and r["process"] == "reader-0" for r in recs)
    assert {(r["partition"], r["offset"]): r["value"] for r in recs if r["type"] == "ok"} == acked
    # its wire trace beside the history: the leaders learned, and an answer line for every offset read
    trace = (tmp_path / "reader-0.client.log").read_text()
    assert re.search(r"metadata from \S+: leader now 0->\d 1->\d 2->\d", trace), trace[:500]
    traced = {(int(p), o) for p, a, b in re.findall(r"partition=(\d+) offset=\d+ high_watermark=\d+ read (\d+)\.\.(\d+)", trace)
              for o in range(int(a), int(b) + 1)}
    assert traced == set(acked)


def test_producer_history_readable_after_sigkill(cluster, tmp_path, to_stop):
    topic = "wl-kill-producer"
    create_topic(cluster.bootstrap, topic, 2, 3, min_insync_replicas=2)
    clock = RunClock()
    producer = ProducerWorkload("producer-k", cluster.bootstrap, topic, 2, tmp_path, clock.now)
    to_stop.append(producer)
    producer.start()
    deadline = time.monotonic() + 30
    while producer.stats()["ok"] < 300 and time.monotonic() < deadline:
        time.sleep(0.02)
    acked_before = producer.stats()["ok"]
    time.sleep(0.6)  # > FLUSH_INTERVAL_S: everything recorded by now must reach the file
    os.kill(producer.pid, signal.SIGKILL)
    while producer.alive():
        time.sleep(0.02)
    st = ReadStats()
    recs = list(read_jsonl(tmp_path / "producer-k.jsonl", st))
    assert st.bad_lines == 0
    oks = [r for r in recs if r["type"] == "ok"]
    assert acked_before >= 300
    assert len(oks) >= acked_before, "acks recorded 0.6 s before the kill must be on disk (200 ms flush)"
    invoked_ops = {r["op"] for r in recs if r["type"] == "invoke"}
    assert all(r["op"] in invoked_ops and r["offset"] is not None for r in oks)


def test_observer_sees_leader_change_after_sigkill_while_clients_keep_recording(cluster, tmp_path, to_stop):
    """Runs last in this module: it leaves the killed broker down."""
    topic = "wl-leader-kill"
    create_topic(cluster.bootstrap, topic, 3, 3, min_insync_replicas=2)
    clock = RunClock()
    obs = Observer(cluster.bootstrap, topic, tmp_path / "observer.jsonl", clock.now, interval=0.1)
    obs.start()
    try:
        assert obs.wait_until(lambda s: all(_leader_ok(s, p) for p in range(3)), timeout=20), obs.latest()
        before = obs.latest()[0]
        assert len(before["isr"]) == 3 and sorted(before["isr"]) == sorted(describe(cluster.bootstrap, topic)[0].isr)
        producer = ProducerWorkload("producer-0", cluster.bootstrap, topic, 3, tmp_path, clock.now, rate=300)
        consumer = ConsumerWorkload("consumer-0", cluster.bootstrap, topic, 3, tmp_path, clock.now)
        to_stop += [producer, consumer]
        producer.start()
        consumer.start()
        time.sleep(1.0)
        victim = before["leader"]
        killed_at = clock.now()
        os.kill(cluster.broker_pid(victim), signal.SIGKILL)
        assert obs.wait_until(lambda s: _leader_ok(s, 0) and s[0]["leader"] != victim
                              and s[0]["leader_epoch"] > before["leader_epoch"], timeout=30), obs.latest()
        assert obs.wait_until(lambda s: victim not in s[0]["isr"], timeout=30), obs.latest()
        after = obs.latest()[0]
        read_at_change = consumer.stats()["ok"]
        ok_at_change = producer.stats()["ok"]
        time.sleep(1.5)
        assert producer.stats()["ok"] > ok_at_change, "producer stopped getting acks after the election"
        assert consumer.stats()["ok"] > read_at_change, "consumer stopped reading after the election"
        producer.stop(timeout=10)
        consumer.stop(timeout=5)
    finally:
        obs.stop()
    recs = [r for r in read_jsonl(tmp_path / "observer.jsonl") if r["partition"] == 0 and r["error"] is None]
    leaders = [(r["leader"], r["leader_epoch"]) for r in recs]
    assert (victim, before["leader_epoch"]) in leaders and (after["leader"], after["leader_epoch"]) in leaders
    change_t = min(r["t"] for r in recs if r["leader"] == after["leader"] and r["leader_epoch"] == after["leader_epoch"])
    assert change_t >= killed_at
    # the producer's history stays well formed across the fault: every invoke completed once
    invokes, done = sends(tmp_path / "producer-0.jsonl")
    assert set(done) == set(invokes) and all(len(v) == 1 for v in done.values())
    acked = {(r["partition"], r["offset"]): r["value"] for (r,) in done.values() if r["type"] == "ok"}
    assert acked
    # the final drain works with the leader's broker still dead, and finds every ack in place
    ends = drain(cluster.bootstrap, topic, 3, tmp_path, clock.now, timeout=30)
    recs = list(read_jsonl(tmp_path / "drain.jsonl"))
    assert sorted((r["partition"], r["type"]) for r in recs if r["f"] == "drain-end") == \
        [(0, "ok"), (1, "ok"), (2, "ok")]
    drained = {(r["partition"], r["offset"]): r["value"] for r in recs if r["f"] == "drain"}
    assert all(drained.get(k) == v for k, v in acked.items())
    assert all(ends[p] == 1 + max(o for q, o in drained if q == p) for p in range(3))


def _leader_ok(state: dict, p: int) -> bool:
    rec = state.get(p)
    return bool(rec) and rec["error"] is None and rec["leader"] is not None


def test_a_seeded_placement_is_the_topics_assignment_on_a_real_controller(cluster):
    """topic.placement: seeded - the harness creates the topic with the assignment drawn from
    the run's seed (CreateTopics with a manual assignment), and the controller keeps it: each
    partition's replicas in that order, the first its leader (harness/placement.py)."""
    from confluent_kafka.admin import AdminClient

    from harness.campaign import load_campaign
    from harness.placement import seeded_assignment
    from harness.runner import create_topic

    camp = load_campaign(REPO / "campaigns" / "chaos-vulnerable.yaml", seed=3,
                         overrides=["topic.name=placed", "topic.partitions=6"])
    create_topic(cluster.bootstrap, camp)
    md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics("placed", timeout=10)
    parts = md.topics["placed"].partitions
    want = seeded_assignment(sorted(md.brokers), 6, 2, 3)
    assert [list(parts[p].replicas) for p in range(6)] == want
    deadline = time.monotonic() + 10
    while [parts[p].leader for p in range(6)] != [r[0] for r in want] and time.monotonic() < deadline:
        time.sleep(0.2)
        parts = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics("placed", timeout=10).topics["placed"].partitions
    assert [parts[p].leader for p in range(6)] == [r[0] for r in want]
