"""A real kraftsim :class:`~kraftsim.controller.Controller`, driven in-process from a test.

Why: Kafka's PartitionChangeBuilderTest and ReplicationControlManagerTest drive the controller's
state machines directly (a PartitionRegistration, a set of registered/fenced brokers, one event).
The ports here do the same through kraftsim's real request handlers (BrokerRegistration,
BrokerHeartbeat, AlterPartition, CreateTopics with the kio request objects a broker sends) and
its real metadata log on disk. Where a Kafka case starts from a partition state that is tedious
to reach by events (an ELR and a LastKnownELR already populated), the test appends that state as
a metadata record, exactly as a replayed PartitionRecord would set it.
"""
from __future__ import annotations

import asyncio
import base64
import time
import uuid
from pathlib import Path
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from kraftsim.config import load
from kraftsim.controller import Controller
from kraftsim.events import EventLog
from kraftsim.metadata import PartitionState
from kraftsim.wire import Peer, build

PEER = Peer("127.0.0.1", 1)


def directory_uuid(text: str) -> uuid.UUID:
    """A Kafka Uuid as printed (``directory.id``: base64url without padding) as the wire's 16 bytes."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
TOPIC = "foo"


def controller(tmp: Path, **settings: str) -> Controller:
    cfg_file = tmp / "controller.properties"
    lines = {"node.id": "1000", "listeners": "CONTROLLER://127.0.0.1:1", "metadata.log.dir": str(tmp / "md"),
             **settings}
    cfg_file.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    c = Controller(load(cfg_file, "controller"), EventLog(tmp / "events.jsonl", 1000, "controller"))
    c.load()
    return c


def run(coro: Any) -> Any:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def register_raw(c: Controller, broker: int, prev: int = -1, inc: uuid.UUID | None = None,
                 log_dirs: list[str] = ()) -> Any:
    """A BrokerRegistration v4; ``log_dirs``: the broker's log dirs' directory.id (Kafka Uuid text)."""
    req = build(load_request_schema(62, 4), {"broker_id": broker, "cluster_id": c.cfg["cluster.id"],
                                             "incarnation_id": inc or uuid.uuid4(),
                                             "listeners": [{"name": "PLAINTEXT", "host": "h", "port": broker,
                                                            "security_protocol": 0}],
                                             "features": [], "rack": None, "previous_broker_epoch": prev,
                                             "log_dirs": tuple(directory_uuid(d) for d in log_dirs)})
    return run(c.h_registration(None, req, PEER))


def register(c: Controller, broker: int, prev: int = -1, inc: uuid.UUID | None = None,
             log_dirs: list[str] = ()) -> int:
    resp = register_raw(c, broker, prev, inc, log_dirs)
    assert resp.error_code is ErrorCode.none, resp
    return int(resp.broker_epoch)


def heartbeat(c: Controller, broker: int, shut: bool = False) -> Any:
    """A heartbeat whose metadata offset is caught up (unfences a fenced broker, as Kafka's
    BrokerHeartbeatManager does once the broker has replayed its own registration)."""
    epoch = c.image.brokers[broker].broker_epoch
    req = build(load_request_schema(63, 1), {"broker_id": broker, "broker_epoch": epoch,
                                             "current_metadata_offset": len(c.records), "want_fence": False,
                                             "want_shut_down": shut})
    return run(c.h_heartbeat(None, req, PEER))


def brokers(c: Controller, *ids: int) -> dict[int, int]:
    """Register and unfence brokers; returns their broker epochs."""
    out = {}
    for b in ids:
        out[b] = register(c, b)
        heartbeat(c, b)
    assert all(not c.image.brokers[b].fenced for b in ids)
    return out


def create(c: Controller, replicas: list[int], min_isr: int = 1, unclean: bool = False, name: str = TOPIC) -> None:
    configs = [{"name": "min.insync.replicas", "value": str(min_isr)}]
    if unclean:
        configs.append({"name": "unclean.leader.election.enable", "value": "true"})
    req = build(load_request_schema(19, 7), {"topics": [{"name": name, "num_partitions": -1, "replication_factor": -1,
                                                         "assignments": [{"partition_index": 0, "broker_ids": replicas}],
                                                         "configs": configs}]})
    resp = run(c.h_create_topics(None, req, PEER))
    assert resp.topics[0].error_code is ErrorCode.none, resp


def part(c: Controller, name: str = TOPIC) -> PartitionState:
    ps = c.image.partition(name, 0)
    assert ps is not None
    return ps


def set_partition(c: Controller, name: str = TOPIC, **fields: Any) -> PartitionState:
    """Replay a partition record with these fields changed (a Kafka test's PartitionRegistration)."""
    ps = part(c, name)
    rec = {**ps.to_record(), **fields}
    rec["partition_epoch"] = ps.partition_epoch + 1
    c.append([rec])
    return part(c, name)


def fence_quietly(c: Controller, broker: int) -> None:
    """Mark a broker fenced in the image without any partition change (a Kafka test that builds
    a PartitionRegistration and an acceptor rejecting that broker)."""
    reg = c.image.brokers[broker]
    c.append([{"type": "fence_broker", "broker": broker, "broker_epoch": reg.broker_epoch, "reason": "test"}])


def expire_session(c: Controller, broker: int) -> None:
    """The broker's last heartbeat is older than broker.session.timeout.ms (BrokerHeartbeatManager
    would no longer call its session valid), but the fencing sweep has not run yet."""
    c.last_hb[broker] = time.monotonic() - 10 * c.session_s


def alter(c: Controller, leader: int, isr: list[int] | dict[int, int], version: int = 3, lrs: int = 0,
          leader_epoch: int | None = None, partition_epoch: int | None = None, broker_epoch: int | None = None,
          name: str = TOPIC) -> Any:
    """An AlterPartition from ``leader``; ``isr`` as ids (their current broker epochs are sent
    with v3) or as {id: broker epoch}. Returns (top-level error, partition error, partition data)."""
    ps = part(c, name)
    if not isinstance(isr, dict):
        isr = {b: c.image.brokers[b].broker_epoch if b in c.image.brokers else -1 for b in isr}
    pd: dict[str, Any] = {"partition_index": 0,
                          "leader_epoch": ps.leader_epoch if leader_epoch is None else leader_epoch,
                          "partition_epoch": ps.partition_epoch if partition_epoch is None else partition_epoch,
                          "leader_recovery_state": lrs}
    if version >= 3:
        pd["new_isr_with_epochs"] = [{"broker_id": b, "broker_epoch": e} for b, e in isr.items()]
    else:
        pd["new_isr"] = list(isr)
    be = c.image.brokers[leader].broker_epoch if broker_epoch is None else broker_epoch
    req = build(load_request_schema(56, version), {
        "broker_id": leader, "broker_epoch": be,
        "topics": [{"topic_id": uuid.UUID(c.image.topics[name].topic_id), "partitions": [pd]}]})
    resp = run(c.h_alter_partition(None, req, PEER))
    if not resp.topics or not resp.topics[0].partitions:
        return resp.error_code, None, None
    p = resp.topics[0].partitions[0]
    top = resp.error_code
    return top, p.error_code, p


def assign_dir(c: Controller, broker: int, directory: str, name: str = TOPIC, broker_epoch: int | None = None) -> Any:
    """An AssignReplicasToDirs from ``broker``: partition 0 of ``name`` is in log dir ``directory``."""
    be = c.image.brokers[broker].broker_epoch if broker_epoch is None else broker_epoch
    req = build(load_request_schema(73, 0), {
        "broker_id": broker, "broker_epoch": be,
        "directories": [{"id_": directory_uuid(directory), "topics": [
            {"topic_id": uuid.UUID(c.image.topics[name].topic_id), "partitions": [{"partition_index": 0}]}]}]})
    return run(c.h_assign_replicas_to_dirs(None, req, PEER))
