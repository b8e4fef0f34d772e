"""A whole kraftsim cluster with three controllers (``kraftsim cluster --controllers 3``):
the active controller is SIGKILLed while an acks=all producer runs.

Checked (Kafka's QuorumController / KafkaRaftClient / NodeToControllerChannelManager):
- a new active controller is elected (controller_elected, a larger epoch, a majority of votes);
- brokers find it (NOT_CONTROLLER and Fetch leader hints) and keep producing: writes are
  acknowledged after the failover, and none that was acknowledged is lost;
- the new controller serves the brokers: a broker SIGKILLed afterwards is fenced by it
  (``broker_fenced``, session_timeout) and its leaderships move (``leader_elected``);
- no committed metadata record is lost: every record a broker received is at the same offset
  in the surviving controllers' metadata logs.

Before the controllers formed a quorum there was no ``--controllers``: this failed.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.kraftsim.clients import TrackingProducer, create_topic, read_all
from tests.kraftsim.conftest import FAST, _env, free_base_port

pytestmark = pytest.mark.slow
QUORUM = {"controller.quorum.election.timeout.ms": "500", "controller.quorum.fetch.timeout.ms": "1000"}
NAMES = ["controller-1", "controller-2", "controller-3"]


def _events(root: Path, name: str, event: str | None = None) -> list[dict[str, Any]]:
    f = root / name / "events.jsonl"
    out = []
    if f.exists():
        for line in f.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if event is None or e["event"] == event:
                out.append(e)
    return out


def _pid(root: Path, name: str) -> int:
    return int((root / f"{name}.pid").read_text().strip())


def _active(root: Path, exclude: set[str] = frozenset()) -> tuple[str, int]:
    """The controller with the latest controller_elected event, (name, epoch); ('', -1) if none."""
    elected = [(e["epoch"], n) for n in NAMES if n not in exclude for e in _events(root, n, "controller_elected")]
    if not elected:
        return "", -1
    epoch, name = max(elected)
    return name, epoch


@pytest.fixture
def cluster(tmp_path: Path):
    base = free_base_port(3)
    cmd = [sys.executable, "-m", "kraftsim", "cluster", "--brokers", "3", "--controllers", "3", "--dir",
           str(tmp_path), "--base-port", str(base)]
    for k, v in {**FAST, **QUORUM}.items():
        cmd += ["--set", f"{k}={v}"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                         start_new_session=True)
    try:
        line = p.stdout.readline() if p.stdout else ""
        assert line.startswith("bootstrap.servers="), f"cluster did not start: {line!r}"
        yield tmp_path, line.strip().split("=", 1)[1]
    finally:
        for f in tmp_path.glob("*.pid"):
            try:
                os.killpg(int(f.read_text().strip()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)


def test_sigkill_active_controller_brokers_keep_producing_and_follow_the_new_one(cluster):
    root, bootstrap = cluster
    create_topic(bootstrap, "t", partitions=3, rf=3, min_isr=2)
    prod = TrackingProducer(bootstrap)
    stop = threading.Event()

    def produce() -> None:
        n = 0
        while not stop.is_set():
            prod.send("t", f"v{n}".encode())
            n += 1
            time.sleep(0.005)
        prod.flush(30)

    th = threading.Thread(target=produce, daemon=True)
    th.start()
    try:
        time.sleep(1.5)
        old, epoch = _active(root)
        assert old, "no controller_elected event"
        killed_at = time.time()
        os.kill(_pid(root, old), signal.SIGKILL)
        deadline = time.time() + 15
        while True:
            new, new_epoch = _active(root, exclude={old})
            if new_epoch > epoch:
                break
            assert time.time() < deadline, "no new active controller"
            time.sleep(0.05)
        elected = [e for e in _events(root, new, "controller_elected") if e["epoch"] == new_epoch][0]
        took = elected["wall"] - killed_at
        time.sleep(2.0)
        acked_after = [v for v, t in prod.ack_time.items() if t > elected["wall"] + 0.5]
        assert acked_after, "no write acknowledged after the failover"
        # the new controller serves the brokers: it fences a killed broker and moves leaderships
        b_kill = time.time()
        os.kill(_pid(root, "broker-3"), signal.SIGKILL)
        deadline = time.time() + 15
        fenced = []
        while not fenced:
            fenced = [e for e in _events(root, new, "broker_fenced") if e["broker"] == 3 and e["wall"] > b_kill]
            assert time.time() < deadline, "the new active controller did not fence the killed broker"
            time.sleep(0.1)
        assert fenced[0]["reason"] == "session_timeout"
        time.sleep(1.5)
    finally:
        stop.set()
        th.join(60)
    assert not prod.failed or all(v not in prod.acked for v in prod.failed)
    seen = read_all(bootstrap, "t", [0, 1, 2], timeout=30)
    lost = [v for v, (p, o) in prod.acked.items() if seen.get(v) != (p, o)]
    assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {lost[:3]}"
    # committed metadata: every record a broker received is at its offset in the controllers' logs
    survivors = [n for n in NAMES if n != old]
    ctl_records = {}
    for n in survivors:
        ctl_records[n] = _controller_records(root / n / "metadata")
    for b in (1, 2):
        copy = root / f"broker-{b}" / "data" / "kraftsim-metadata" / "metadata.jsonl"
        for line in copy.read_text().splitlines():
            d = json.loads(line)
            if d["record"].get("type") == "leader_change":
                continue
            holders = [n for n in survivors if ctl_records[n].get(d["offset"]) == d["record"]]
            assert holders, f"broker {b}'s metadata offset {d['offset']} is in no surviving controller's log"
    print(f"controller failover {took:.2f} s; {len(prod.acked)} acked, {len(acked_after)} after the failover")


def _controller_records(mdir: Path) -> dict[int, dict[str, Any]]:
    """Data records of a (running) controller's metadata log, read from the segment files."""
    from kraftsim.raft.log import CONTROL_FLAG
    from kraftsim.storage import records as rec
    out: dict[int, dict[str, Any]] = {}
    for seg in sorted((mdir / "__cluster_metadata-0").glob("*.log")):
        data = seg.read_bytes()
        for h in rec.iter_batches(data, 0):
            if h.attributes & CONTROL_FLAG or not h.crc_valid:
                continue
            for r in rec.decode_records(data[h.position:h.position + h.length]):
                out[r.offset] = json.loads(r.value)
    return out


def _drop(a: str, b: str) -> list[list[str]]:
    rules = []
    for src, dst in ((a, b), (b, a)):
        spec = ["INPUT", "-p", "tcp", "-s", src, "-d", dst, "-j", "DROP",
                "-m", "comment", "--comment", f"faultline-test-raft-{os.getpid()}"]
        subprocess.run(["iptables", "-I", *spec], check=True, capture_output=True)
        rules.append(spec)
    return rules


def _segments(root: Path, name: str) -> list[tuple[int, int, int]]:
    from kraftsim.storage import records as rec
    out = []
    for seg in sorted((root / name / "metadata" / "__cluster_metadata-0").glob("*.log")):
        data = seg.read_bytes()
        out += [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in rec.iter_batches(data, 0)]
    return out


def test_active_controller_cut_from_its_peers_loses_leadership_and_brokers_follow(cluster):
    """iptables DROP between the active controller and the other two, brokers still reach it:
    it cannot commit (requests it takes wait, then fail NOT_CONTROLLER when it resigns on check
    quorum, QuorumController.renounce), the other two elect, the brokers move to the new active
    controller and keep producing; after healing the three metadata logs are one."""
    root, bootstrap = cluster
    create_topic(bootstrap, "t", partitions=3, rf=3, min_isr=2)
    prod = TrackingProducer(bootstrap)
    stop = threading.Event()

    def produce() -> None:
        n = 0
        while not stop.is_set():
            prod.send("t", f"v{n}".encode())
            n += 1
            time.sleep(0.005)
        prod.flush(30)

    hosts: dict[str, str] = {}
    for n in NAMES:
        props = dict(line.split("=", 1) for line in (root / f"{n}.properties").read_text().splitlines() if "=" in line)
        hosts[n] = props["listeners"].split("//", 1)[1].rsplit(":", 1)[0]
    th = threading.Thread(target=produce, daemon=True)
    th.start()
    rules: list[list[str]] = []
    try:
        time.sleep(1.5)
        old, epoch = _active(root)
        assert old
        cut_at = time.time()
        for n in NAMES:
            if n != old:
                rules += _drop(hosts[old], hosts[n])
        deadline = time.time() + 20
        while True:
            new, new_epoch = _active(root, exclude={old})
            if new_epoch > epoch:
                break
            assert time.time() < deadline, "the majority side elected nobody"
            time.sleep(0.05)
        resigned = []
        while not resigned:
            resigned = [e for e in _events(root, old, "controller_resigned") if e["epoch"] == epoch]
            assert time.time() < deadline, "the cut-off controller never resigned"
            time.sleep(0.1)
        assert resigned[0]["reason"] == "check_quorum"
        elected = [e for e in _events(root, new, "controller_elected") if e["epoch"] == new_epoch][0]
        time.sleep(2.5)
        acked_after = [v for v, t in prod.ack_time.items() if t > elected["wall"] + 0.5]
        assert acked_after, "no write acknowledged after the majority elected"
        # brokers follow the new active controller: it unfences/fences them from now on
        b_kill = time.time()
        os.kill(_pid(root, "broker-3"), signal.SIGKILL)
        fenced = []
        deadline = time.time() + 15
        while not fenced:
            fenced = [e for e in _events(root, new, "broker_fenced") if e["broker"] == 3 and e["wall"] > b_kill]
            assert time.time() < deadline, "the new active controller did not fence the killed broker"
            time.sleep(0.1)
        # heal: the cut-off controller follows again; the three logs become one
        # taken before the first rule goes: the cut-off controller may fetch and truncate while
        # the other rules are still being deleted (iptables takes its time on a loaded machine)
        heal_at = time.time()
        for spec in rules:
            while subprocess.run(["iptables", "-D", *spec], capture_output=True).returncode == 0:
                pass
        rules = []
        deadline = time.time() + 20
        while True:
            logs = {n: _segments(root, n) for n in NAMES}
            ends = {n: (b[-1][1] if b else -1) for n, b in logs.items()}
            longest = max(logs.values(), key=len)
            one = all(b == longest[:len(b)] for b in logs.values())
            if one and max(ends.values()) - min(ends.values()) <= 3 and min(ends.values()) > resigned[0]["log_end_offset"]:
                break
            assert time.time() < deadline, f"logs never converged: ends {ends}"
            time.sleep(0.2)
        truncs = [e for e in _events(root, old, "metadata_truncation") if e["wall"] >= heal_at]
        # an uncommitted suffix the majority never fetched must go; one a follower had fetched
        # before the cut (its next fetch, which would have moved the high watermark, was dropped)
        # stays in the one log, in the old leader epoch, and nothing needs truncating
        fetched = [b for b in longest if b[2] == epoch and b[1] >= resigned[0]["high_watermark"]]
        if resigned[0]["log_end_offset"] > resigned[0]["high_watermark"] and not fetched:
            assert truncs, "the cut-off controller kept its uncommitted suffix"
    finally:
        for spec in rules:
            while subprocess.run(["iptables", "-D", *spec], capture_output=True).returncode == 0:
                pass
        stop.set()
        th.join(60)
    seen = read_all(bootstrap, "t", [0, 1, 2], timeout=30)
    lost = [v for v, (p, o) in prod.acked.items() if seen.get(v) != (p, o)]
    assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {lost[:3]}"
    print(f"cut-off controller {old} (epoch {epoch}) resigned; {new} elected (epoch {new_epoch}); "
          f"{len(acked_after)} acked after; truncations on the old one: {[(t['from_offset'], t['to_offset']) for t in truncs]}")
