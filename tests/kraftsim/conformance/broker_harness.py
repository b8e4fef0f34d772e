"""A real kraftsim :class:`~kraftsim.broker.server.BrokerServer`, not started, driven from a test.

Why: Kafka's own PartitionTest drives ``Partition`` directly (makeLeader, follower fetches,
AlterPartition completions). The same cases here drive kraftsim's broker and partition objects:
a real config file, real log dirs (``LogManager``), a real metadata image fed with the
controller's own record shapes, real record batches. Nothing is stubbed; the broker's network
loops are simply not started, so the test plays the controller and the followers.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from kraftsim import config as kconfig
from kraftsim.broker.partition import Partition
from kraftsim.broker.server import BrokerServer
from kraftsim.events import EventLog
from kraftsim.metadata import NO_LEADER
from kraftsim.storage import records as rec
from kraftsim.wire import build

TOPIC = "t"
TOPIC_ID = "00000000-0000-4000-8000-000000000001"


def broker_epoch_of(bid: int) -> int:
    return 100 + bid


class BrokerSim:
    """Broker ``node`` with partition ``t-0``; the test plays controller and followers."""

    def __init__(self, tmp: Path, *, node: int = 1, replicas: list[int] | None = None,
                 isr: list[int] | None = None, leader: int = 1, min_isr: int = 1,
                 settings: dict[str, Any] | None = None, leader_epoch: int = 5, partition_epoch: int = 1):
        tmp.mkdir(parents=True, exist_ok=True)
        self.replicas = replicas or [1, 2]
        props = {"node.id": node, "process.roles": "broker", "listeners": f"PLAINTEXT://127.0.0.{node + 1}:1",
                 "controller.quorum.bootstrap.servers": "127.0.0.1:1", "log.dirs": str(tmp / "data"),
                 "replica.lag.time.max.ms": 30000, **(settings or {})}
        path = tmp / f"broker-{node}.properties"
        path.write_text("".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in props.items()))
        self.cfg = kconfig.load(path, "broker")
        self.b = BrokerServer(self.cfg, EventLog(tmp / "events.jsonl", node, "broker"))
        self.b.logs.load()
        self.md_offset = 0
        for bid in self.replicas:
            self.record({"type": "register_broker", "broker": bid, "broker_epoch": broker_epoch_of(bid),
                         "incarnation_id": f"inc-{bid}", "host": f"127.0.0.{bid + 1}", "port": 1})
            self.record({"type": "unfence_broker", "broker": bid, "broker_epoch": broker_epoch_of(bid)})
        self.record({"type": "topic", "name": TOPIC, "topic_id": TOPIC_ID,
                     "configs": {"min.insync.replicas": str(min_isr)}})
        # the broker is registered, caught up and publishing metadata to its replica manager
        self.b.lifecycle.broker_epoch = broker_epoch_of(node)
        self.b.metadata.metadata_ready = True
        self.b.metadata.published = True
        self.partition(leader=leader, isr=isr if isr is not None else list(self.replicas),
                       leader_epoch=leader_epoch, partition_epoch=partition_epoch)

    # ------------------------------------------------------------------ the controller's side

    def record(self, d: dict[str, Any]) -> None:
        self.b.image.apply(self.md_offset, d)
        self.md_offset += 1

    def partition(self, *, leader: int, isr: list[int], leader_epoch: int, partition_epoch: int,
                  elr: list[int] | None = None) -> None:
        """A PartitionChangeRecord as the controller writes it, then the broker's publish step."""
        self.record({"type": "partition", "topic": TOPIC, "partition": 0, "replicas": list(self.replicas),
                     "isr": list(isr), "leader": leader, "leader_epoch": leader_epoch,
                     "partition_epoch": partition_epoch, "elr": list(elr or []), "last_known_elr": [],
                     "leader_recovery_state": 0, "last_leader": NO_LEADER})
        self.b.metadata.publish({(TOPIC, 0)})

    def fence(self, bid: int) -> None:
        self.record({"type": "fence_broker", "broker": bid, "broker_epoch": broker_epoch_of(bid)})

    def shutting_down(self, bid: int) -> None:
        self.record({"type": "shutdown_broker", "broker": bid, "broker_epoch": broker_epoch_of(bid)})

    def alter_response(self, isr: list[int], partition_epoch: int, leader_epoch: int | None = None) -> Any:
        """One partition of an AlterPartition v3 response, as kio decodes it."""
        cls = load_response_schema(56, 3)
        resp = build(cls, {"error_code": ErrorCode.none, "topics": [{"topic_id": None, "partitions": [{
            "partition_index": 0, "leader_id": self.r.leader, "isr": isr, "partition_epoch": partition_epoch,
            "leader_epoch": self.r.leader_epoch if leader_epoch is None else leader_epoch,
            "leader_recovery_state": 0}]}]})
        return resp.topics[0].partitions[0]

    def answer(self, code: ErrorCode, resp: Any | None = None) -> None:
        """The controller's answer to the queued AlterPartition, delivered as the broker's
        alter-partition channel does: the item leaves the queue, then the replica handles it."""
        item = self.b.alter_partition_manager.queue.pop((TOPIC, 0), None)
        if item is not None and hasattr(self.r, "on_alter_result"):
            self.r.on_alter_result(item, code, resp)
        else:  # the code before the pending-change model: the queue was emptied at send time
            self.r.on_alter_response(code, resp)

    @property
    def pending_isr(self) -> list[int] | None:
        """The ISR this leader has asked the controller for and not yet had answered."""
        item = self.b.alter_partition_manager.queue.get((TOPIC, 0))
        if item is None:
            return None
        return list(item[0]) if isinstance(item, tuple) else list(item.new_isr)

    # ------------------------------------------------------------------ the partition

    @property
    def r(self) -> Partition:
        return self.b.replica_manager.partitions[(TOPIC, 0)]

    def append(self, n: int = 1, **producer: int) -> tuple[int, int]:
        """Append one batch of ``n`` records as leader (what a produce request does)."""
        data = rec.encode_batch([(None, f"v{i}".encode(), []) for i in range(n)], **producer)
        return self.r.append(data)

    def fetch(self, rid: int, offset: int) -> None:
        """A follower Fetch at ``offset`` with the broker epoch the metadata image has for it."""
        self.r.on_follower_fetch(rid, offset, broker_epoch_of(rid))

    async def produce(self, data: bytes, acks: int = -1, timeout: float = 5.0) -> tuple[ErrorCode, int]:
        return await self.b.replica_manager.append_records(TOPIC, 0, data, acks, timeout)


def batch(n: int = 1, **producer: int) -> bytes:
    return rec.encode_batch([(None, f"v{i}".encode(), []) for i in range(n)], **producer)


def run(coro: Any) -> Any:
    return asyncio.run(coro)
