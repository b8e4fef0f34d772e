"""The raft layer's high watermark across states, and the errors Kafka's raft thread does not survive.

Kafka (raft/src/main/java/org/apache/kafka/raft/, 3.3.0 through 3.9.0-rc3):

- ``QuorumState.transitionToUnattached`` / ``transitionToUnattachedVotedState`` /
  ``transitionToCandidate`` / ``transitionToFollower`` pass ``state.highWatermark()`` into the new
  state; only ``transitionToLeader`` starts without one (QuorumStateTest ``testHighWatermarkRetained``).
  A voter that went through a candidacy therefore still refuses to truncate committed records.
- ``FollowerState.updateHighWatermark`` throws on a lower or unknown value (FollowerStateTest
  ``testMonotonicHighWatermark``); ``KafkaRaftClient.handleFetchResponse`` throws when the leader asks
  for a truncation below the high watermark; ``maybeTransition`` throws IllegalStateException on a
  leader inconsistent with the known one. On the raft IO thread each is fatal
  (``RaftIoThread.doWork`` → ``fatalFaultHandler.handleFault("Unexpected error in raft IO thread")``,
  ProcessTerminatingFaultHandler → ``Exit.halt(1)``; KAFKA-14644, 3.4.1 and 3.5.0). Before 3.4.1
  ``ShutdownableThread`` logged "Error due to" and only the raft thread died.

The in-process cases drive kraftsim's real RaftClient on a real metadata log with an injected halt
(so the test survives it); the process case runs ``python -m kraftsim.raft`` and sends it Kafka
requests over the wire.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from kraftsim.events import EventLog
from kraftsim.raft.client import BEGIN_QUORUM_EPOCH, VOTE, RaftClient, RaftFatalError
from kraftsim.raft.config import QuorumConfig
from kraftsim.raft.log import TOPIC, RaftLog
from kraftsim.raft.states import Candidate, Follower, Leader, QuorumState, Unattached
from kraftsim.raft.store import FileQuorumStateStore
from kraftsim.wire import Client, build
from tests.kraftsim.conftest import REPO

VOTERS = frozenset({1, 2, 3})


def _qs(tmp_path: Path) -> QuorumState:
    return QuorumState(1, VOTERS, FileQuorumStateStore(tmp_path / "quorum-state"),
                       election_timeout_ms=1000, fetch_timeout_ms=2000)


def test_high_watermark_retained(tmp_path):
    """QuorumStateTest.testHighWatermarkRetained: Follower HWM 10 → Unattached → Voted → Candidate
    all keep 10; the Leader starts without one."""
    q = _qs(tmp_path)
    q.initialize(0, 0.0)
    q.transition_to_follower(5, 2, 0.0)
    assert q.state.update_high_watermark(10)
    q.transition_to_unattached(6, 0.0)
    assert isinstance(q.state, Unattached) and q.high_watermark == 10
    q.transition_to_unattached_voted(7, 2, 0.0)
    assert q.high_watermark == 10
    q.transition_to_candidate(0.0)
    assert isinstance(q.state, Candidate) and q.high_watermark == 10
    q.state.granted.add(2)
    assert isinstance(q.transition_to_leader(10, 0.0), Leader) and q.high_watermark is None


def test_follower_high_watermark_is_monotonic(tmp_path):
    """FollowerStateTest.testMonotonicHighWatermark: 15, then unknown or 14 is refused, 15 again is
    no change."""
    f = Follower(1, 2, 0.0)
    assert f.update_high_watermark(15) is True
    with pytest.raises(ValueError):
        f.update_high_watermark(None)
    with pytest.raises(ValueError, match="Non-monotonic update of high watermark from 15 to 14"):
        f.update_high_watermark(14)
    assert f.update_high_watermark(15) is False and f.high_watermark == 15


class _Halts:
    def __init__(self) -> None:
        self.codes: list[int] = []

    def __call__(self, status: int) -> None:
        self.codes.append(status)


def _client(tmp_path: Path, fatal_fault: bool = True) -> tuple[RaftClient, _Halts, Path]:
    """Voter 1 of {1,2,3} with ten records of epoch 1 in its log, following 2 in epoch 2 with HWM 10."""
    log = RaftLog(tmp_path / "md", 1, "c", segment_bytes=1 << 20)
    for i in range(10):
        log.append_as_leader([{"i": i}], 1)
    halts = _Halts()
    events = tmp_path / "events.jsonl"
    qc = QuorumConfig(voters={v: ("127.0.0.1", 1) for v in VOTERS}, fatal_fault=fatal_fault)
    c = RaftClient(1, "c", "127.0.0.1", qc, log, EventLog(events, 1, "controller"), on_fatal=halts)
    c.quorum.initialize(log.last_fetched_epoch, time.monotonic())
    c.quorum.transition_to_follower(2, 2, time.monotonic())
    assert c.quorum.state.update_high_watermark(10)
    return c, halts, events


def _diverging(leader: int, epoch: int, end: int, div_epoch: int):
    return build(load_response_schema(1, 12), {"error_code": ErrorCode.none, "responses": [{"topic": TOPIC, "partitions": [{
        "partition_index": 0, "error_code": ErrorCode.none, "high_watermark": -1, "last_stable_offset": -1,
        "log_start_offset": 0, "records": None, "diverging_epoch": {"end_offset": end, "epoch": div_epoch},
        "current_leader": {"leader_id": leader, "leader_epoch": epoch}}]}]})


def _events(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def test_truncation_below_the_high_watermark_halts_the_process(tmp_path):
    """KafkaRaftClient.handleFetchResponse: "The leader requested truncation to offset 5, which is
    below the current high watermark 10" → fatal (3.4.1+): the process halts with status 1, the
    log keeps every committed record, and the fault is an event."""
    c, halts, events = _client(tmp_path)
    with pytest.raises(RaftFatalError):
        c._handle_fetch_response(2, _diverging(2, 2, 5, 1), time.monotonic())
    assert halts.codes == [1]
    assert c.log.end_offset == 10
    ev = [e for e in _events(events) if e["event"] == "fatal_fault"]
    assert ev and ev[0]["halted"] is True and "below the current high watermark 10" in ev[0]["error"]


def test_high_watermark_kept_through_a_candidacy_still_guards_truncation(tmp_path):
    """The follower (HWM 10) times out, stands as candidate in epoch 3, then follows 3 in epoch 4
    (QuorumState carries the HWM through). Leader 3 asks for a truncation to 5: still a fault, the
    committed records stay - without the carried HWM the guard is off and they would be cut."""
    c, halts, _ = _client(tmp_path)
    now = time.monotonic()
    c.quorum.transition_to_candidate(now)
    c.quorum.transition_to_unattached(4, now)
    c.quorum.transition_to_follower(4, 3, now)
    assert c.quorum.high_watermark == 10
    with pytest.raises(RaftFatalError):
        c._handle_fetch_response(3, _diverging(3, 4, 5, 1), now)
    assert halts.codes == [1] and c.log.end_offset == 10


def test_inconsistent_leader_halts_the_process(tmp_path):
    """KafkaRaftClient.maybeTransition: a BeginQuorumEpoch naming leader 3 in epoch 2, whose leader
    is 2, is an IllegalStateException on the raft thread → fatal."""
    c, halts, _ = _client(tmp_path)
    req = build(load_request_schema(BEGIN_QUORUM_EPOCH, 0), {"cluster_id": "c", "topics": [
        {"topic_name": TOPIC, "partitions": [{"partition_index": 0, "leader_id": 3, "leader_epoch": 2}]}]})
    with pytest.raises(RaftFatalError, match="inconsistent with current leader 2 and epoch 2"):
        asyncio.run(c.h_begin_quorum_epoch(None, req, None))
    assert halts.codes == [1]
    assert isinstance(c.quorum.state, Follower) and c.quorum.leader_id == 2


def test_before_3_4_1_the_raft_thread_dies_and_the_process_lives_on(tmp_path):
    """Kafka 3.4.0 (RaftIoThread.doWork is just client.poll(); ShutdownableThread logs "Error due
    to" and stops): no halt; the raft layer stops - requests to it are never answered."""
    c, halts, events = _client(tmp_path, fatal_fault=False)
    with pytest.raises(RaftFatalError):
        c._handle_fetch_response(2, _diverging(2, 2, 5, 1), time.monotonic())
    assert halts.codes == [] and c.dead and c.log.end_offset == 10
    assert [e["halted"] for e in _events(events) if e["event"] == "fatal_fault"] == [False]
    vote = build(load_request_schema(VOTE, 0), {"cluster_id": "c", "topics": [{"topic_name": TOPIC, "partitions": [
        {"partition_index": 0, "replica_epoch": 3, "replica_id": 3, "last_offset_epoch": 1, "last_offset": 10}]}]})

    async def ask() -> bool:
        try:
            await asyncio.wait_for(c.handlers()[VOTE](None, vote, None), 0.3)
            return True
        except asyncio.TimeoutError:
            return False
    assert asyncio.run(ask()) is False


def _free_port(host: str) -> int:
    import socket
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("kafka_version,halts", [("3.9.0", True), ("3.4.0", False)])
def test_raft_node_process_halts_on_an_inconsistent_leader(tmp_path, kafka_version, halts):
    """The same fault in a real ``python -m kraftsim.raft`` process: on 3.9.0 it exits with status 1
    and logs "Encountered fatal fault"; on 3.4.0 it keeps running (its raft thread is gone). The
    test sends BeginQuorumEpoch(epoch 5, leader 2), then (epoch 5, leader 3) over the wire."""
    host = "127.0.0.1"
    port = _free_port(host)
    d = tmp_path / "n1"
    d.mkdir()
    props = {"node.id": "1", "process.roles": "controller", "listeners": f"CONTROLLER://{host}:{port}",
             "controller.quorum.voters": f"1@{host}:{port},2@{host}:{_free_port(host)},3@{host}:{_free_port(host)}",
             "metadata.log.dir": str(d / "md"), "event.log": str(d / "events.jsonl"), "kafka.version": kafka_version}
    (d / "node.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    out = open(d / "process.log", "wb")
    p = subprocess.Popen([sys.executable, "-m", "kraftsim.raft", "--config", str(d / "node.properties")], stdout=out,
                         stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO,
                         start_new_session=True)
    try:
        async def send(leader: int) -> None:
            cl = Client(host, port, "test")
            end = time.monotonic() + 10
            while True:
                try:
                    await cl.connect()
                    break
                except OSError:
                    if time.monotonic() > end:
                        raise
                    await asyncio.sleep(0.1)
            req = build(load_request_schema(BEGIN_QUORUM_EPOCH, 0), {"cluster_id": "kraftsim-cluster-0000000", "topics": [
                {"topic_name": TOPIC, "partitions": [{"partition_index": 0, "leader_id": leader, "leader_epoch": 5}]}]})
            try:
                await asyncio.wait_for(cl.request(req, timeout=2), 3)
            except (OSError, asyncio.TimeoutError, ConnectionError):
                pass
            cl.close()
        asyncio.run(send(2))
        asyncio.run(send(3))
        try:
            code = p.wait(10)
        except subprocess.TimeoutExpired:
            code = None
        evs = _events(d / "events.jsonl")
        fault = [e for e in evs if e["event"] == "fatal_fault"]
        assert fault and fault[0]["halted"] is halts and "inconsistent with current leader 2" in fault[0]["error"], evs
        if halts:
            assert code == 1
            assert "Encountered fatal fault: Unexpected error in raft IO thread" in (d / "process.log").read_text()
        else:
            assert code is None  # still running, its raft thread dead
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
        out.close()
