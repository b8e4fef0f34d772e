"""Three real kraftsim controllers (``python -m kraftsim controller``) as one KRaft quorum.

A broker is played by the test over Kafka's wire format (kio): BrokerRegistration,
BrokerHeartbeat and the metadata Fetch, exactly the requests kraftsim brokers send. Rules
checked (Kafka's QuorumController / KafkaRaftClient):

- only the active controller serves broker requests; the others answer NOT_CONTROLLER
  (QuorumController: every write event fails with NotControllerException off the active one);
- a registration is answered once committed, and survives the active controller's SIGKILL: the
  new active controller has replayed it (same broker epoch accepted in a heartbeat);
- the new active controller gives every broker a fresh session (QuorumController.claim ->
  ClusterControlManager.activate): a broker that stopped heartbeating is fenced one session
  timeout after the takeover, not at once;
- brokers read only committed metadata, from the leader; another voter answers their Fetch with
  NOT_LEADER_OR_FOLLOWER and the current leader (KafkaRaftClient.validateLeaderOnlyRequest).

Before the controller used the raft layer there was one controller: every test here failed
(a second controller ignored ``controller.quorum.voters`` and served brokers on its own).
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from kraftsim.wire import Client, build
from tests.kraftsim.conftest import REPO
from tests.kraftsim.raft.quorum import _free_port

pytestmark = pytest.mark.slow
SESSION_MS = 1500
IDS = (1000, 1001, 1002)


class Controllers:
    def __init__(self, root: Path):
        self.root = root
        net = random.randrange(100, 250)
        self.hosts = {i: f"127.1.{net}.{k}" for k, i in enumerate(IDS, 1)}
        self.port = _free_port(list(self.hosts.values()))
        voters = ",".join(f"{i}@{h}:{self.port}" for i, h in self.hosts.items())
        self.procs: dict[int, subprocess.Popen] = {}
        for i, h in self.hosts.items():
            d = root / f"c{i}"
            d.mkdir(parents=True)
            props = {"node.id": i, "process.roles": "controller", "listeners": f"CONTROLLER://{h}:{self.port}",
                     "controller.quorum.voters": voters, "metadata.log.dir": d / "metadata",
                     "event.log": d / "events.jsonl", "broker.session.timeout.ms": SESSION_MS,
                     "controller.quorum.election.timeout.ms": 500, "controller.quorum.fetch.timeout.ms": 1000}
            (d / "c.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def start(self, i: int) -> None:
        d = self.root / f"c{i}"
        self.procs[i] = subprocess.Popen([sys.executable, "-m", "kraftsim", "controller", "--config",
                                          str(d / "c.properties")], stdout=open(d / "process.log", "ab"),
                                         stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONPATH=str(REPO)),
                                         cwd=REPO, start_new_session=True)

    def kill(self, i: int) -> float:
        t = time.time()
        os.kill(self.procs[i].pid, signal.SIGKILL)
        self.procs[i].wait(10)
        return t

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)

    def events(self, i: int, name: str | None = None) -> list[dict[str, Any]]:
        f = self.root / f"c{i}" / "events.jsonl"
        if not f.exists():
            return []
        out = []
        for line in f.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if name is None or e["event"] == name:
                out.append(e)
        return out


@pytest.fixture
def ctls(tmp_path: Path):
    c = Controllers(tmp_path)
    try:
        yield c
    finally:
        c.close()


async def call(host: str, port: int, req: Any, timeout: float = 5.0) -> Any:
    cl = Client(host, port, "test-broker")
    try:
        return await cl.request(req, timeout=timeout)
    finally:
        cl.close()


def register_req(broker: int, inc: uuid.UUID) -> Any:
    return build(load_request_schema(62, 4), {
        "broker_id": broker, "cluster_id": "kraftsim-cluster-0000000", "incarnation_id": inc,
        "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.9", "port": 9000 + broker, "security_protocol": 0}],
        "features": [], "rack": None, "previous_broker_epoch": -1})


def heartbeat_req(broker: int, epoch: int, offset: int) -> Any:
    return build(load_request_schema(63, 1), {"broker_id": broker, "broker_epoch": epoch,
                                             "current_metadata_offset": offset, "want_fence": False,
                                             "want_shut_down": False})


def fetch_req(broker: int, offset: int) -> Any:
    return build(load_request_schema(1, 12), {
        "replica_id": broker, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "topics": [{"topic": "__cluster_metadata", "partitions": [
            {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]})


async def find_active(c: Controllers, broker: int, inc: uuid.UUID, exclude: set[int] = frozenset(),
                      timeout: float = 20.0) -> tuple[int, int, dict[int, ErrorCode]]:
    """Register with every live controller until one accepts: (active id, broker epoch, the
    errors the others gave)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        errors: dict[int, ErrorCode] = {}
        for i, h in c.hosts.items():
            if i in exclude:
                continue
            try:
                r = await call(h, c.port, register_req(broker, inc))
            except (OSError, asyncio.TimeoutError, ConnectionError):
                continue
            if r.error_code == ErrorCode.none:
                return i, int(r.broker_epoch), errors
            errors[i] = r.error_code
        await asyncio.sleep(0.1)
    raise AssertionError("no controller accepted the registration")


def test_only_the_active_controller_serves_brokers_and_a_new_one_takes_over(ctls: Controllers):
    async def scenario() -> None:
        for i in IDS:
            ctls.start(i)
        inc = uuid.uuid4()
        active, epoch, errors = await find_active(ctls, 7, inc)
        assert set(errors.values()) <= {ErrorCode.not_controller}
        # the others: NOT_CONTROLLER for broker requests, NOT_LEADER_OR_FOLLOWER (with the leader)
        # for the metadata Fetch
        for i, h in ctls.hosts.items():
            if i == active:
                continue
            r = await call(h, ctls.port, register_req(8, uuid.uuid4()))
            assert r.error_code == ErrorCode.not_controller
            ct = await call(h, ctls.port, build(load_request_schema(19, 7), {
                "topics": [{"name": "x", "num_partitions": 1, "replication_factor": 1}], "timeout": 5000}))
            assert [(t.name, t.error_code) for t in ct.topics] == [("x", ErrorCode.not_controller)]
            f = await call(h, ctls.port, fetch_req(8, 0))
            p = f.responses[0].partitions[0]
            assert p.error_code == ErrorCode.not_leader_or_follower and int(p.current_leader.leader_id) == active
        # the active one: the registration is committed (the HWM passed it) and visible to brokers
        f = await call(ctls.hosts[active], ctls.port, fetch_req(7, 0))
        p = f.responses[0].partitions[0]
        assert p.error_code == ErrorCode.none and int(p.high_watermark) > epoch
        hb = await call(ctls.hosts[active], ctls.port, heartbeat_req(7, epoch, int(p.high_watermark)))
        assert hb.error_code == ErrorCode.none and not hb.is_fenced
        # SIGKILL the active controller: another one takes over with the broker's registration
        killed_at = ctls.kill(active)
        deadline = time.time() + 20
        new = None
        while new is None and time.time() < deadline:
            for i, h in ctls.hosts.items():
                if i == active:
                    continue
                try:
                    r = await call(h, ctls.port, heartbeat_req(7, epoch, int(p.high_watermark)), timeout=2)
                except (OSError, asyncio.TimeoutError, ConnectionError):
                    continue
                if r.error_code != ErrorCode.not_controller:
                    assert r.error_code == ErrorCode.none, r  # the same broker epoch: replayed
                    assert not r.is_fenced
                    new = i
            await asyncio.sleep(0.05)
        assert new is not None, "no new active controller"
        took = time.time() - killed_at
        # fresh session from the takeover: the broker stops heartbeating and is fenced about one
        # session timeout later, not at once (its last heartbeat to the old controller is older)
        fenced = None
        deadline = time.time() + 10
        while fenced is None and time.time() < deadline:
            fenced = next(iter(ctls.events(new, "broker_fenced")), None)
            await asyncio.sleep(0.1)
        assert fenced is not None and fenced["broker"] == 7 and fenced["reason"] == "session_timeout"
        elected = [e for e in ctls.events(new, "controller_elected") if e["wall"] > killed_at]
        assert elected, "the new active controller has no controller_elected event"
        gap = fenced["wall"] - elected[-1]["wall"]
        assert gap >= SESSION_MS / 1000 - 0.1, f"fenced {gap:.2f} s after the takeover"
        print(f"takeover {took:.2f} s after the kill; fenced {gap:.2f} s after the election")

    asyncio.run(scenario())
