"""The controller's rules, driven in-process through its real request handlers (no sockets).

Fast, deterministic companions to the end-to-end tests: the same kio request objects a broker
sends, the same metadata log on disk. They pin down docs/seeds.md#seed-003-2-9-2 (AlterPartition checks),
docs/seeds.md#seed-000 (KIP-903 INELIGIBLE_REPLICA only with v3 and the switch on; metadata.version < 3.5
turns it off), docs/seeds.md#seed-001 (KIP-704 RECOVERING rules), KIP-966 (ELR on fencing, unclean restart)
and the replay of the persisted log by a new controller.
"""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from kraftsim.config import load
from kraftsim.controller import Controller
from kraftsim.events import EventLog
from kraftsim.wire import Peer, build

PEER = Peer("127.0.0.1", 1)


def _controller(tmp: Path, **settings: str) -> Controller:
    cfg_file = tmp / "controller.properties"
    lines = {"node.id": "1000", "listeners": "CONTROLLER://127.0.0.1:1", "metadata.log.dir": str(tmp / "md"),
             **settings}
    cfg_file.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    c = Controller(load(cfg_file, "controller"), EventLog(tmp / "events.jsonl", 1000, "controller"))
    c.load()
    return c


def run(coro):
    return asyncio.new_event_loop().run_until_complete(coro)


async def register(c: Controller, broker: int, prev: int = -1, inc: uuid.UUID | None = None) -> int:
    req = build(load_request_schema(62, 4), {"broker_id": broker, "cluster_id": c.cfg["cluster.id"],
                                             "incarnation_id": inc or uuid.uuid4(),
                                             "listeners": [{"name": "PLAINTEXT", "host": "h", "port": broker,
                                                            "security_protocol": 0}],
                                             "features": [], "rack": None, "previous_broker_epoch": prev})
    resp = await c.h_registration(None, req, PEER)
    assert resp.error_code is ErrorCode.none, resp
    return int(resp.broker_epoch)


async def heartbeat(c: Controller, broker: int, epoch: int, shut: bool = False):
    req = build(load_request_schema(63, 1), {"broker_id": broker, "broker_epoch": epoch,
                                             "current_metadata_offset": len(c.records), "want_fence": False,
                                             "want_shut_down": shut})
    return await c.h_heartbeat(None, req, PEER)


async def create(c: Controller, name: str, replicas: list[int], min_isr: int = 1) -> None:
    req = build(load_request_schema(19, 7), {"topics": [{"name": name, "num_partitions": -1, "replication_factor": -1,
                                                         "assignments": [{"partition_index": 0, "broker_ids": replicas}],
                                                         "configs": [{"name": "min.insync.replicas",
                                                                      "value": str(min_isr)}]}]})
    resp = await c.h_create_topics(None, req, PEER)
    assert resp.topics[0].error_code is ErrorCode.none


async def alter(c: Controller, version: int, leader: int, leader_epoch_b: int, topic: str, isr_epochs: dict[int, int],
                lrs: int = 0, partition_epoch: int | None = None):
    ps = c.image.partition(topic, 0)
    pd = {"partition_index": 0, "leader_epoch": ps.leader_epoch,
          "partition_epoch": ps.partition_epoch if partition_epoch is None else partition_epoch,
          "leader_recovery_state": lrs}
    if version >= 3:
        pd["new_isr_with_epochs"] = [{"broker_id": b, "broker_epoch": e} for b, e in isr_epochs.items()]
    else:
        pd["new_isr"] = list(isr_epochs)
    req = build(load_request_schema(56, version), {
        "broker_id": leader, "broker_epoch": leader_epoch_b,
        "topics": [{"topic_id": uuid.UUID(c.image.topics[topic].topic_id), "partitions": [pd]}]})
    resp = await c.h_alter_partition(None, req, PEER)
    if not resp.topics:  # a request-level error (Kafka: STALE_BROKER_EPOCH fails the whole request)
        return resp.error_code
    return resp.topics[0].partitions[0].error_code


def _stale_epoch_scenario(c: Controller, version: int):
    """A leads with ISR [1]; B (2) restarts with a new epoch; AlterPartition names B's old one."""
    async def go():
        e1 = await register(c, 1)
        await heartbeat(c, 1, e1)
        e2_first = await register(c, 2)
        await heartbeat(c, 2, e2_first)
        await create(c, "t", [1, 2])
        c.fence(2, "session_timeout")           # B out of the ISR
        assert c.image.partition("t", 0).isr == [1]
        e2_old = await register(c, 2)            # B back; A learns this epoch from its Fetch
        await heartbeat(c, 2, e2_old)
        c.fence(2, "session_timeout")            # steps 2-3: B hard-fails, is fenced
        e2_new = await register(c, 2)
        await heartbeat(c, 2, e2_new)
        assert e2_new > e2_old
        return await alter(c, version, 1, e1, "t", {1: e1, 2: e2_old})
    return run(go())


def test_kip903_on_rejects_stale_broker_epoch_with_ineligible_replica(tmp_path):
    c = _controller(tmp_path)
    assert _stale_epoch_scenario(c, 3) is ErrorCode.ineligible_replica
    assert c.image.partition("t", 0).isr == [1]


@pytest.mark.parametrize("settings,version", [({"kip903.enabled": "false"}, 2),
                                              ({"metadata.version": "3.4"}, 2),
                                              ({}, 2)])
def test_without_kip903_the_stale_request_is_accepted(tmp_path, settings, version):
    """Without KIP-903 the broker sends AlterPartition v2 (no broker epochs) and the controller has
    nothing to check. Kafka's controller checks the epochs whenever a request carries them
    (ReplicationControlManager.ineligibleReplicasForIsr), whatever the metadata.version."""
    c = _controller(tmp_path, **settings)
    assert _stale_epoch_scenario(c, version) is ErrorCode.none
    assert c.image.partition("t", 0).isr == [1, 2]


def test_alter_partition_checks_of_seed_003(tmp_path):
    c = _controller(tmp_path)

    async def go():
        e1, e2, e3 = [await register(c, b) for b in (1, 2, 3)]
        for b, e in ((1, e1), (2, e2), (3, e3)):
            await heartbeat(c, b, e)
        await create(c, "t", [1, 2, 3])
        assert await alter(c, 3, 1, e1 + 100, "t", {1: e1}) is ErrorCode.stale_broker_epoch
        assert await alter(c, 3, 1, e1, "t", {1: e1}, partition_epoch=99) is ErrorCode.not_controller
        assert await alter(c, 3, 2, e2, "t", {2: e2}) is ErrorCode.invalid_request
        c.fence(3, "session_timeout")
        ps = c.image.partition("t", 0)
        assert ps.isr == [1, 2] and ps.leader == 1
        # KIP-841: a fenced broker can never be added, whatever the switches say
        assert await alter(c, 3, 1, e1, "t", {1: e1, 2: e2, 3: e3}) is ErrorCode.ineligible_replica
        # KIP-704: RECOVERING with more than the leader in the ISR is invalid
        assert await alter(c, 3, 1, e1, "t", {1: e1, 2: e2}, lrs=1) is ErrorCode.invalid_request
        assert await alter(c, 3, 1, e1, "t", {1: e1}) is ErrorCode.none
        assert c.image.partition("t", 0).isr == [1]
    run(go())


def test_elr_and_unclean_restart_and_replay(tmp_path):
    c = _controller(tmp_path, **{"eligible.leader.replicas.version": "1"})

    async def go():
        e = {b: await register(c, b) for b in (1, 2, 3)}
        for b in (1, 2, 3):
            await heartbeat(c, b, e[b])
        await create(c, "t", [1, 2, 3], min_isr=2)
        c.fence(2, "session_timeout")      # ISR [1, 3] >= min ISR: no ELR
        assert c.image.partition("t", 0).elr == []
        c.fence(3, "session_timeout")      # ISR [1] < min ISR: 3 is eligible
        assert c.image.partition("t", 0).elr == [3]
        c.fence(1, "session_timeout")      # the last ISR member leaves too
        ps = c.image.partition("t", 0)
        assert ps.isr == [] and sorted(ps.elr) == [1, 3] and ps.leader == -1
        assert ps.last_known_elr == [1]           # KIP-966: the last known leader
        e1b = await register(c, 1, prev=-1)   # crash restart: unclean, leaves the ELR
        await heartbeat(c, 1, e1b)
        ps = c.image.partition("t", 0)
        assert ps.elr == [3] and ps.leader == -1   # 1 is not elected: 3 may hold more
        resp = await heartbeat(c, 3, e[3])     # 3 comes back (same incarnation)
        assert not resp.is_fenced
        ps = c.image.partition("t", 0)
        assert ps.leader == 3 and ps.isr == [3]
    run(go())
    # a new controller replays the log into the same image
    c2 = _controller(tmp_path, **{"eligible.leader.replicas.version": "1"})
    assert c2.image.partition("t", 0) == c.image.partition("t", 0)
    assert {b: r.broker_epoch for b, r in c2.image.brokers.items()} == {b: r.broker_epoch for b, r in c.image.brokers.items()}


def test_elr_zero_keeps_the_last_replica_standing(tmp_path):
    c = _controller(tmp_path, **{"eligible.leader.replicas.version": "0"})

    async def go():
        e = {b: await register(c, b) for b in (1, 2)}
        for b in (1, 2):
            await heartbeat(c, b, e[b])
        await create(c, "t", [1, 2], min_isr=2)
        c.fence(2, "session_timeout")
        c.fence(1, "session_timeout")
        ps = c.image.partition("t", 0)
        assert ps.isr == [1] and ps.leader == -1 and ps.elr == []
        e1b = await register(c, 1, prev=-1)
        await heartbeat(c, 1, e1b)
        assert c.image.partition("t", 0).leader == 1   # re-elected, whatever its disk lost
    run(go())


def test_clean_restart_is_recognised_by_previous_broker_epoch(tmp_path):
    c = _controller(tmp_path)

    async def go():
        e1 = await register(c, 1)
        await heartbeat(c, 1, e1)
        await heartbeat(c, 1, e1, shut=True)   # controlled shutdown: fenced at once
        assert c.image.brokers[1].fenced
        await register(c, 1, prev=e1)
    run(go())
    regs = [e for e in (tmp_path / "events.jsonl").read_text().splitlines() if "broker_registered" in e]
    assert '"clean_shutdown":false' in regs[0] and '"clean_shutdown":true' in regs[1]
