"""The broker's AlterPartition channel, as Kafka's AlterPartitionManager.scala.

Why its own module: what a leader proposes (Partition.prepareIsrExpand / prepareIsrShrink, in
``partition.py``) and how the proposal travels are separate in Kafka, and the travelling is where
faultline's delayed-AlterPartition faults act: one connection of its own, one request in flight,
items kept and re-sent until their partition's answer arrives or newer metadata replaces them.
Requests are v3 with broker epochs when both the broker's and the controller's software know v3
(Kafka 3.5+, gate ``alter_partition_v3``): the version is negotiated per connection from the
controller's ApiVersions, as Kafka's NetworkClient does, not bound to metadata.version; v2
otherwise (a 3.5 broker and a 3.4 controller in a rolling upgrade). Below metadata.version
3.5-IV1 a follower's epoch is -1 in v3, because its Fetch carried none. The request is kept as a
*builder* and built again for every re-send of the channel (a lost connection, NOT_CONTROLLER),
which is where Kafka 3.5.0 and 3.5.1 lost the ISR (:class:`AlterPartitionRequestBuilder`).
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kraftsim.broker.partition import Partition, PendingChange
from kraftsim.wire import build, load_request_schema


class AlterPartitionRequestBuilder:
    """clients/.../AlterPartitionRequest.java ``Builder``: the data is made once with
    NewIsrWithEpochs for every version (AlterPartitionManager.buildRequest does not know which
    version the controller supports), and ``build(version)`` makes the request of the version the
    connection negotiated. Below v3 NewIsrWithEpochs becomes NewIsr (broker ids) and is cleared.

    In Kafka 3.5.0 and 3.5.1 (gate ``alter_partition_build_not_idempotent``) ``build`` does that
    in place and unconditionally: the data's NewIsrWithEpochs is empty after the first v2 build,
    so a second build - the channel re-sending the same queued builder after a disconnect or
    NOT_CONTROLLER - sets NewIsr to the empty list, and the controller answers INVALID_REQUEST
    (the ISR must contain the leader, ReplicationControlManager.validateAlterPartitionData). From
    3.5.2 / 3.6.0 (KAFKA-15353, b41b2dfcf2f / 6f55160175a) it converts only while NewIsrWithEpochs
    is not empty, so a rebuild sends the same ISR. A v3 build of data already converted for v2
    fails as Kafka's serialisation does (a non-default NewIsr at version 3)."""
    api_key = 56
    oldest_version = 2   # kraftsim sends topic ids (v2+); Kafka's Builder allows 0+ (canUseTopicIds)

    def __init__(self, data: dict[str, Any], latest_version: int, idempotent: bool) -> None:
        self.data = data
        self.latest_version = latest_version
        self.idempotent = idempotent

    def build(self, version: int) -> Any:
        parts = [p for t in self.data["topics"] for p in t["partitions"]]
        if version < 3:
            for p in parts:
                if self.idempotent and not p["new_isr_with_epochs"]:
                    continue
                p["new_isr"] = [s["broker_id"] for s in p["new_isr_with_epochs"]]
                p["new_isr_with_epochs"] = []
        elif any(p.get("new_isr") for p in parts):
            raise ValueError("Attempted to write a non-default newIsr at version 3")
        return build(load_request_schema(self.api_key, version), self.data)

    @staticmethod
    def isr_of(pd: dict[str, Any]) -> list[int]:
        return [s["broker_id"] for s in pd["new_isr_with_epochs"]] or list(pd.get("new_isr") or [])


class AlterPartitionManager:
    def __init__(self, broker: Any) -> None:
        self.b = broker
        #: (topic, partition) -> the change to send; kept while in flight, removed with its answer
        self.queue: dict[tuple[str, int], PendingChange] = {}
        self.kick = asyncio.Event()

    def submit(self, r: Partition, new_isr: list[int], recovered: bool = False) -> None:
        """Propose an ISR change (Partition.prepareIsrExpand / prepareIsrShrink → submitAlterPartition).

        The leader's maximal ISR is the union of the committed and the proposed ISR until the
        controller answers or newer metadata arrives (KIP-497, docs/seeds.md#seed-003-2-9-2). Broker epochs of
        the new ISR are taken now, as ``addBrokerEpochToIsr`` does.
        """
        own_epoch = self.b.lifecycle.broker_epoch
        epochs = [(bid, own_epoch if bid == self.b.node_id
                   else r.followers[bid].broker_epoch if bid in r.followers else -1) for bid in new_isr]
        item = PendingChange(list(new_isr), recovered, epochs, r.leader_epoch, r.partition_epoch)
        r.pending = item
        r.maximal_isr = sorted(set(r.isr) | set(new_isr), key=lambda x: (x not in r.isr, x))
        r.note_isr()
        self.queue[(r.topic, r.partition)] = item
        self.kick.set()

    def resubmit(self, r: Partition, item: PendingChange) -> None:
        """Partition.submitAlterPartition after a retriable error: the same change, sent again."""
        self.queue[(r.topic, r.partition)] = item
        self.kick.set()

    def withdraw(self, r: Partition, item: PendingChange) -> None:
        """The partition went back to a committed state: an unsent request for ``item`` is dropped."""
        key = (r.topic, r.partition)
        if self.queue.get(key) is item:
            del self.queue[key]

    async def run(self) -> None:
        """Kafka's AlterPartitionManager: one request in flight; queued items are copied, not
        removed, and each is removed only when its partition's answer arrives. A lost connection,
        a timeout or a top-level error re-sends them ("we will not timeout AlterPartition
        request, instead letting it retry indefinitely until a response is received, or a new
        LeaderAndIsr overwrites the existing isrState"); an item whose partition moved on
        (newer metadata) is dropped instead of sent."""
        b = self.b
        client = b.controller_client("alter-partition")
        latest = 3 if b.features.alter_partition_v3 else 2
        idempotent = not b.features.alter_partition_build_not_idempotent
        while not b.stopping:
            await self.kick.wait()
            self.kick.clear()
            by_topic: dict[str, list[dict]] = {}
            sent: dict[tuple[str, int], PendingChange] = {}
            for key, item in list(self.queue.items()):
                r = b.replica_manager.partitions.get(key)
                t = b.image.topics.get(key[0])
                if r is None or t is None or r.pending is not item or r.role != "leader":
                    if self.queue.get(key) is item:
                        del self.queue[key]
                    continue
                pd: dict[str, Any] = {"partition_index": key[1], "leader_epoch": item.leader_epoch,
                                      "partition_epoch": item.partition_epoch,
                                      "leader_recovery_state": 0 if item.recovered else r.leader_recovery_state,
                                      "new_isr_with_epochs": [{"broker_id": bid, "broker_epoch": e}
                                                              for bid, e in item.isr_with_epochs],
                                      "new_isr": []}
                by_topic.setdefault(t.topic_id, []).append(pd)
                sent[key] = item
            if not sent:
                continue
            builder = AlterPartitionRequestBuilder(
                {"broker_id": b.node_id, "broker_epoch": b.lifecycle.broker_epoch,
                 "topics": [{"topic_id": uuid.UUID(tid), "partitions": parts} for tid, parts in by_topic.items()]},
                latest, idempotent)
            resp = None
            while not b.stopping:
                try:
                    # the channel re-sends this same builder until an answer arrives (Kafka's
                    # alter-partition channel never times a request out: retryTimeoutMs is
                    # Long.MaxValue; controller.socket.timeout.ms only disconnects and re-sends)
                    resp = await client.request_built(builder, timeout=30)
                    break
                except (OSError, asyncio.TimeoutError, ConnectionError):
                    await asyncio.sleep(0.2)  # reconnect backoff; then the same builder again
                except ValueError as e:
                    b.ev.log(f"AlterPartition not sent: {e}; building it again")
                    break
            if resp is None:
                await asyncio.sleep(0.05)
                self.kick.set()
                continue
            if resp.error_code is not ErrorCode.none:
                b.ev.log(f"AlterPartition top-level error {resp.error_code.name}; retrying")
                await asyncio.sleep(0.05)  # AlterPartitionManager: retry in 50 ms
                self.kick.set()
                continue
            for td in resp.topics:
                tname = b.image.topic_ids.get(str(td.topic_id))
                for pd in td.partitions:
                    key = (tname, int(pd.partition_index))
                    item = sent.pop(key, None) if tname else None
                    if item is None:
                        continue
                    if self.queue.get(key) is item:
                        del self.queue[key]
                    if pd.error_code is not ErrorCode.none:
                        b.ev.log(f"AlterPartition {tname}-{pd.partition_index} rejected: {pd.error_code.name}")
                    r = b.replica_manager.partitions.get(key)
                    if r is not None:
                        r.on_alter_result(item, pd.error_code, pd)
            if self.queue:
                # items not in the response stay queued and go again; so do retried ones
                # (Kafka re-sends at once; 50 ms keeps a persistent error from spinning)
                await asyncio.sleep(0.05)
                self.kick.set()
