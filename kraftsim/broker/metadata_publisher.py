"""The broker's metadata channel: replay ``__cluster_metadata``, publish it to the replica manager.

Kafka splits this between the broker's raft client (an observer fetching the metadata log),
MetadataLoader (records → MetadataImage) and BrokerMetadataPublisher.scala (image → ReplicaManager
.applyDelta). Why one module here: kraftsim's broker fetches the controller's log over one
connection of its own (Fetch of ``__cluster_metadata``, JSON records replayed into
:class:`MetadataImage` and persisted in a local copy), and the one rule that matters for
faultline is *when* publishing starts: BrokerServer installs the publisher only after
``initialCatchUpFuture`` (registration accepted, caught up to its record), so a restarted broker
never leads or truncates on a stale image.
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

    def load(self) -> None:
        """Replay the local copy of the metadata log (before the broker registers)."""
        self.file = MetadataLogFile(self.path, fsync=False)
        for off, d in self.file.replay():
            self.image.apply(off, d)

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
        while not b.stopping:
            try:
                req = build(req_cls, {"replica_id": b.node_id, "max_wait": 500, "min_bytes": 1,
                                      "max_bytes": 8 * 1024 * 1024, "isolation_level": 0,
                                      "topics": [{"topic": METADATA_TOPIC, "partitions": [
                                          {"partition": 0, "fetch_offset": self.image.next_offset,
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
            if part.error_code is ErrorCode.offset_out_of_range:
                # The controller's log is shorter than our copy: it was rebuilt. Start over.
                b.ev.log("controller metadata log is behind our copy; replaying from 0")
                self.image = MetadataImage()
                assert self.file is not None
                self.file.reset()
                continue
            touched: set[tuple[str, int]] = set()
            if part.records:
                items = []
                for r in rec.decode_records(part.records):
                    if r.offset != self.image.next_offset:
                        continue
                    d = json.loads(r.value)
                    self.image.apply(r.offset, d)
                    items.append((r.offset, d))
                    if d.get("type") == "partition":
                        touched.add((d["topic"], d["partition"]))
                assert self.file is not None
                self.file.append(items)
            if not self.metadata_ready and self.image.next_offset >= int(part.high_watermark):
                self.metadata_ready = True
            if self.published:
                self.publish(touched)
            else:
                self.maybe_publish()
            b.notify()
