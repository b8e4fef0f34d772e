"""The broker's directory assignments (KIP-858), as Kafka's AssignmentsManager.

Why its own module: from metadata.version 3.7-IV2 every partition registration names the log
directory each replica lives in (the broker's ``directory.id`` in ``meta.properties``). A broker
that creates a partition's log in another directory than its registration names - a replaced
disk, newly formatted with a new ``directory.id``, is the case faultline meets - tells the
controller with AssignReplicasToDirs (ReplicaManager.applyDelta -> maybeUpdateTopicAssignment ->
``directoryEventHandler.handleAssignment``, queued by AssignmentsManager and sent on its own
channel to the active controller), and the controller writes a PartitionChangeRecord with the new
directories: the partition epoch goes up by one (ReplicationControlManager
.handleAssignReplicasToDirs). A leader's AlterPartition built on the older partition epoch is then
answered INVALID_UPDATE_VERSION, which the controller checks before anything else
(validateAlterPartitionData) - a real 4.1.0 run showed exactly that (tests/kraftsim/conformance/
test_directory_assignment.py).
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kraftsim.storage.checkpoints import directory_uuid
from kraftsim.wire import build, load_request_schema


class AssignmentsManager:
    def __init__(self, broker: Any) -> None:
        self.b = broker
        #: (topic, partition) -> the directory id to assign, until the controller has answered
        self.pending: dict[tuple[str, int], str] = {}
        self.kick = asyncio.Event()

    def maybe_update(self, keys: set[tuple[str, int]] | None) -> None:
        """ReplicaManager.maybeUpdateTopicAssignment for each published partition of ``keys``
        (None: every one) whose log this broker has: its directory differs from the one the
        partition's registration names for this broker -> queue an assignment."""
        b = self.b
        if not b.features.directory_assignment:
            return
        for ps in list(b.image.all_partitions()):
            key = (ps.topic, ps.partition)
            if keys is not None and key not in keys:
                continue
            if b.node_id not in ps.replicas or not ps.directories:
                continue
            actual = b.logs.directory_id_of(*key)
            if actual is None:
                continue
            registered = ps.directories[ps.replicas.index(b.node_id)]
            if registered != actual and self.pending.get(key) != actual:
                self.pending[key] = actual
                b.ev.log(f"assigning {key[0]}-{key[1]} to directory {actual} (registration says {registered})")
                self.kick.set()

    async def run(self) -> None:
        """Send every queued assignment in one AssignReplicasToDirs; retry on no answer or a
        top-level error; drop each partition once answered."""
        b = self.b
        client = b.controller_client("directory-assignments")
        cls = load_request_schema(73, 0)
        while not b.stopping:
            await self.kick.wait()
            self.kick.clear()
            if not self.pending or b.lifecycle.broker_epoch < 0:
                continue
            sent = dict(self.pending)
            by_dir: dict[str, dict[str, list[int]]] = {}
            for (topic, p), d in sent.items():
                t = b.image.topics.get(topic)
                if t is not None:
                    by_dir.setdefault(d, {}).setdefault(t.topic_id, []).append(p)
            req = build(cls, {"broker_id": b.node_id, "broker_epoch": b.lifecycle.broker_epoch,
                              "directories": [{"id_": directory_uuid(d), "topics": [
                                  {"topic_id": uuid.UUID(tid), "partitions": [{"partition_index": p} for p in ps]}
                                  for tid, ps in topics.items()]} for d, topics in by_dir.items()]})
            try:
                resp = await client.request(req, timeout=5)
            except (OSError, asyncio.TimeoutError, ConnectionError):
                resp = None
            if resp is None or resp.error_code is not ErrorCode.none:
                await asyncio.sleep(0.5)
                self.kick.set()
                continue
            for key, d in sent.items():
                if self.pending.get(key) == d:
                    del self.pending[key]
