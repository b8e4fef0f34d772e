"""The metadata image: cluster state materialised from the metadata log (docs/seeds.md#seed-003-1-2-1).

Why one module for controller and broker: the controller appends records and the brokers
replay the very same records in the same order, so both sides share ``MetadataImage.apply``.
Records are JSON objects (the values of the ``__cluster_metadata`` partition the brokers
fetch). A partition record always carries the full partition state (Kafka's PartitionRecord
plus its PartitionChangeRecord deltas, materialised; docs/seeds.md#seed-003-2-3-2).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

NO_LEADER = -1
RECOVERED, RECOVERING = 0, 1


@dataclass
class BrokerReg:
    broker: int
    broker_epoch: int
    incarnation_id: str
    host: str
    port: int
    fenced: bool = True
    shutting_down: bool = False
    #: RegisterBrokerRecord.LogDirs (KIP-858): the directory.id of each log dir; empty below
    #: metadata.version 3.7-IV2 (the record has no such field)
    log_dirs: list[str] = field(default_factory=list)


@dataclass
class PartitionState:
    topic: str
    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)
    leader_recovery_state: int = RECOVERED
    last_leader: int = NO_LEADER
    #: PartitionRecord.Directories (KIP-858): each replica's log directory id, in replica order;
    #: None below metadata.version 3.7-IV2 (Kafka's DirectoryId.MIGRATING for every replica)
    directories: list[str] | None = None

    def to_record(self) -> dict[str, Any]:
        return {"type": "partition", **asdict(self)}


@dataclass
class TopicState:
    name: str
    topic_id: str
    configs: dict[str, str]
    partitions: dict[int, PartitionState] = field(default_factory=dict)


class MetadataImage:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerReg] = {}
        self.topics: dict[str, TopicState] = {}
        self.topic_ids: dict[str, str] = {}
        self.next_offset = 0  # offset of the next record to apply

    def apply(self, offset: int, rec: dict[str, Any]) -> None:
        t = rec.get("type")
        if t == "register_broker":
            self.brokers[rec["broker"]] = BrokerReg(rec["broker"], rec["broker_epoch"], rec["incarnation_id"],
                                                    rec["host"], rec["port"], fenced=True,
                                                    log_dirs=list(rec.get("log_dirs") or []))
        elif t == "fence_broker":
            b = self.brokers.get(rec["broker"])
            if b and b.broker_epoch == rec["broker_epoch"]:
                b.fenced = True
                b.shutting_down = False
        elif t == "unfence_broker":
            b = self.brokers.get(rec["broker"])
            if b and b.broker_epoch == rec["broker_epoch"]:
                b.fenced = False
        elif t == "shutdown_broker":
            b = self.brokers.get(rec["broker"])
            if b and b.broker_epoch == rec["broker_epoch"]:
                b.shutting_down = True
        elif t == "topic":
            self.topics[rec["name"]] = TopicState(rec["name"], rec["topic_id"], dict(rec.get("configs") or {}))
            self.topic_ids[rec["topic_id"]] = rec["name"]
        elif t == "partition":
            d = {k: v for k, v in rec.items() if k != "type"}
            ps = PartitionState(**d)
            topic = self.topics.get(ps.topic)
            if topic is not None:
                topic.partitions[ps.partition] = ps
        self.next_offset = offset + 1

    def partition(self, topic: str, p: int) -> PartitionState | None:
        t = self.topics.get(topic)
        return t.partitions.get(p) if t else None

    def all_partitions(self) -> Iterator[PartitionState]:
        for t in self.topics.values():
            yield from t.partitions.values()

    def unfenced(self, broker: int) -> bool:
        b = self.brokers.get(broker)
        return b is not None and not b.fenced


class MetadataLogFile:
    """Durable JSON-lines copy of the metadata log: ``{"offset": n, "record": {...}}`` per line.

    The controller fsyncs every append (a committed metadata record survives a crash, as a
    committed KRaft record does); a broker's copy is its local replica of the log, so a
    restarted broker replays it before fetching the rest (docs/seeds.md#seed-003-1-2-1). A torn last line
    (crash mid-write) is ignored on replay.
    """

    def __init__(self, path: Path, fsync: bool):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.fh = open(self.path, "a")

    def replay(self) -> list[tuple[int, dict[str, Any]]]:
        out = []
        good_bytes = 0
        with open(self.path, "rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    break
                try:
                    d = json.loads(raw)
                except ValueError:
                    break
                if d.get("offset") != len(out):
                    break
                out.append((d["offset"], d["record"]))
                good_bytes += len(raw)
        if good_bytes != self.path.stat().st_size:
            self.fh.close()
            os.truncate(self.path, good_bytes)
            self.fh = open(self.path, "a")
        return out

    def append(self, items: list[tuple[int, dict[str, Any]]]) -> None:
        for off, rec in items:
            self.fh.write(json.dumps({"offset": off, "record": rec}, separators=(",", ":")) + "\n")
        self.fh.flush()
        if self.fsync:
            os.fsync(self.fh.fileno())

    def reset(self) -> None:
        self.fh.close()
        self.fh = open(self.path, "w")

    def truncate_to(self, offset: int) -> list[tuple[int, dict[str, Any]]]:
        """Keep the records below ``offset`` (a replica told its log diverged); returns them."""
        kept = [(o, r) for o, r in self.replay() if o < offset]
        self.reset()
        self.append(kept)
        return kept

    def close(self) -> None:
        self.fh.close()
