"""The broker's metadata channel: replay ``__cluster_metadata``, publish it to the replica manager.

Kafka splits this between the broker's raft client (an observer fetching the metadata log),
MetadataLoader (records → MetadataImage) and BrokerMetadataPublisher.scala (image → ReplicaManager
.applyDelta). Why one module here: kraftsim's broker fetches the controller's log over one
connection of its own (Fetch of ``__cluster_metadata``, JSON records replayed into
:class:`MetadataImage` and persisted in a local copy), and the one rule that matters for
faultline is *when* publishing starts: BrokerServer installs the publisher only after
``initialCatchUpFuture`` (registration accepted, caught up to its record), so a restarted broker
never leads or truncates on a stale image.

The channel is a raft *observer* as Kafka's broker is (KafkaRaftClient in an observer's
FollowerState): each Fetch carries the epoch of the last record it holds (``last_fetched_epoch``,
from the LeaderChange records that open every epoch), the leader answers a log that diverged from
its own with a diverging epoch, and the observer truncates its copy there
(ReplicatedLog.truncateToEndOffset) - unless that is below its high watermark: then the quorum has
lost records the observer saw committed, and Kafka's observer throws "The leader requested
truncation to offset X, which is below the current high watermark Y"
(KafkaRaftClient.handleFetchResponse), a fatal fault that halts the broker (3.4.1+, gate
``raft_fatal_fault``; before, the raft thread dies and the broker's metadata stops). The high
watermark lives in memory only: a restarted broker has none until its first answer, and
truncates freely.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from kraftsim.controller import METADATA_TOPIC
from kraftsim.metadata import MetadataImage, MetadataLogFile
from kraftsim.storage import records as rec
from kraftsim.wire import build, load_request_schema


class BrokerMetadataPublisher:
    def __init__(self, broker: Any, path: Path) -> None:
        self.b = broker
        self.path = path
        self.file: MetadataLogFile | None = None
        self.image = MetadataImage()
        self.metadata_ready = False  # our copy reached the controller's metadata HWM
        self.published = False       # partitions are handed to the replica manager
        #: (epoch, start offset) of each epoch in our copy, from its LeaderChange records (the
        #: observer's leader-epoch cache)
        self.epochs: list[tuple[int, int]] = []
        #: FollowerState.highWatermark: min(leader's HWM, our end), never lowered; None after a start
        self.high_watermark: int | None = None
        self.dead: str | None = None  # the raft thread died (before 3.4.1): no more fetches

    def load(self) -> None:
        """Replay the local copy of the metadata log (before the broker registers)."""
        self.file = MetadataLogFile(self.path, fsync=False)
        for off, d in self.file.replay():
            self._apply(off, d)

    def _apply(self, off: int, d: dict[str, Any]) -> None:
        self.image.apply(off, d)
        if d.get("type") == "leader_change":
            self.epochs.append((int(d["epoch"]), off))

    @property
    def last_fetched_epoch(self) -> int:
        """ReplicatedLog.lastFetchedEpoch: the epoch of our last record (0 for an empty copy)."""
        return self.epochs[-1][0] if self.epochs else 0

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """LeaderEpochFileCache.endOffsetFor on our copy -> (end offset, epoch): the latest epoch's
        end is our end; an older epoch ends where the next higher one starts, answered with the
        largest epoch not above it."""
        end = self.image.next_offset
        if self.epochs and self.epochs[-1][0] == epoch:
            return end, epoch
        higher = [(e, start) for e, start in self.epochs if e > epoch]
        if not higher:
            return end, self.last_fetched_epoch   # KafkaMetadataLog.endOffsetForEpoch's fallback
        floor = [e for e, _ in self.epochs if e <= epoch]
        return higher[0][1], (floor[-1] if floor else epoch)

    def truncate_to_end_offset(self, offset: int, epoch: int) -> int:
        """ReplicatedLog.truncateToEndOffset: where an observer told of a diverging epoch cuts its
        copy; the image is rebuilt from what is left (MetadataLoader reloads)."""
        if epoch == 0:
            at = min(offset, self.image.next_offset)
        else:
            local_end, local_epoch = self.end_offset_for_epoch(epoch)
            at = min(local_end, offset) if local_epoch == epoch else local_end
        assert self.file is not None
        before = self.image.next_offset
        kept = self.file.truncate_to(at)
        self.image, self.epochs = MetadataImage(), []
        for off, d in kept:
            self._apply(off, d)
        self.b.ev.emit("metadata_truncation", topic=METADATA_TOPIC, partition=0, from_offset=before, to_offset=at,
                       reason="diverging_epoch", diverging_epoch=epoch, diverging_end_offset=offset)
        return at

    def _raft_fault(self, error: str) -> None:
        """RaftIoThread.doWork's fatal fault handler (KafkaRaftClientDriver from 3.7): the broker
        halts with status 1 (3.4.1+); before, the raft thread stops and the broker lives on with
        its metadata frozen (kraftsim/raft/client.py ``_fault`` for the controllers' side)."""
        halts = bool(self.b.features.raft_fatal_fault)
        self.b.ev.emit("fatal_fault", component="raft", fault="Unexpected error in raft IO thread", error=error,
                       halted=halts)
        if halts:
            self.b.ev.log(f"Encountered fatal fault: Unexpected error in raft IO thread: {error}")
            self.b.on_fatal(1)
        else:
            self.b.ev.log(f"raft IO thread: Error due to {error}; the raft thread stopped, the process lives on")
        self.dead = error

    def close(self) -> None:
        if self.file:
            self.file.close()

    def publish(self, keys: set[tuple[str, int]] | None) -> None:
        """Publish metadata to the replica manager (BrokerMetadataPublisher → ReplicaManager.applyDelta);
        ``keys`` None: every partition.

        Nothing is published before ``maybe_publish`` ran: BrokerServer installs the publisher only
        after ``initialCatchUpFuture`` (registration accepted, caught up to its record).
        """
        if not self.published:
            return
        self.b.replica_manager.apply_delta(keys)
        self.b.assignments.maybe_update(keys)   # ReplicaManager.applyDelta's maybeUpdateTopicAssignment

    def maybe_publish(self) -> None:
        """BrokerServer.startup: the BrokerMetadataPublisher starts publishing (first publish: every
        partition) once ``initialCatchUpFuture`` completed and our copy reached the metadata HWM;
        then the broker is ready to be unfenced (``setReadyToUnfence``: heartbeat at once)."""
        lifecycle = self.b.lifecycle
        if self.published or not (lifecycle.caught_up and self.metadata_ready):
            return
        if self.image.next_offset <= lifecycle.broker_epoch:
            return  # our own registration record is not applied yet
        self.b.start_logs()   # BrokerMetadataPublisher.initializeManagers: LogManager.startup
        self.published = True
        self.publish(None)
        lifecycle.set_ready_to_unfence()

    async def run(self) -> None:
        """Fetch the controller's metadata log from our next offset, apply and persist each record."""
        b = self.b
        client = b.controller_client("metadata")
        req_cls = load_request_schema(1, 12)
        while not b.stopping and self.dead is None:
            try:
                req = build(req_cls, {"replica_id": b.node_id, "max_wait": 500, "min_bytes": 1,
                                      "max_bytes": 8 * 1024 * 1024, "isolation_level": 0,
                                      "topics": [{"topic": METADATA_TOPIC, "partitions": [
                                          {"partition": 0, "fetch_offset": self.image.next_offset,
                                           "last_fetched_epoch": self.last_fetched_epoch,
                                           "partition_max_bytes": 8 * 1024 * 1024}]}]})
                resp = await client.request(req, timeout=5)
            except (OSError, asyncio.TimeoutError, ConnectionError, Exception) as e:
                if not isinstance(e, (OSError, asyncio.TimeoutError, ConnectionError)):
                    b.ev.log(f"metadata fetch failed: {e!r}")
                await asyncio.sleep(0.2)
                continue
            if b.stopping:  # Python 3.11's wait_for can swallow a cancellation
                return
            part = resp.responses[0].partitions[0]
            div = part.diverging_epoch
            if part.error_code is ErrorCode.none and int(div.epoch) >= 0:
                # KafkaRaftClient.handleFetchResponse: never below the high watermark
                end = int(div.end_offset)
                if self.high_watermark is not None and end < self.high_watermark:
                    self._raft_fault(f"The leader requested truncation to offset {end}, which is below the "
                                     f"current high watermark {self.high_watermark}")
                    return
                self.truncate_to_end_offset(end, int(div.epoch))
                continue
            touched: set[tuple[str, int]] = set()
            if part.records:
                items = []
                for r in rec.decode_records(part.records):
                    if r.offset != self.image.next_offset:
                        continue
                    d = json.loads(r.value)
                    self._apply(r.offset, d)
                    items.append((r.offset, d))
                    if d.get("type") == "partition":
                        touched.add((d["topic"], d["partition"]))
                assert self.file is not None
                self.file.append(items)
            if int(part.high_watermark) >= 0:   # KafkaRaftClient.updateFollowerHighWatermark
                hw = min(int(part.high_watermark), self.image.next_offset)
                if self.high_watermark is None or hw > self.high_watermark:
                    self.high_watermark = hw
            if not self.metadata_ready and self.image.next_offset >= int(part.high_watermark):
                self.metadata_ready = True
            if self.published:
                self.publish(touched)
            else:
                self.maybe_publish()
            b.notify()
