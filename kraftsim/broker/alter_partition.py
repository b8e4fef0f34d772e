"""The broker's AlterPartition channel, as Kafka's AlterPartitionManager.scala.

Why its own module: what a leader proposes (Partition.prepareIsrExpand / prepareIsrShrink, in
``partition.py``) and how the proposal travels are separate in Kafka, and the travelling is where
faultline's delayed-AlterPartition faults act: one connection of its own, one request in flight,
items kept and re-sent until their partition's answer arrives or newer metadata replaces them.
Requests are v3 with broker epochs from Kafka 3.5 software on (the version is negotiated with
the controller, not bound to metadata.version: gate ``alter_partition_v3``), v2 before; below
metadata.version 3.5-IV1 a follower's epoch is -1 there, because its Fetch carried none.
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from kraftsim.broker.partition import Partition, PendingChange
from kraftsim.wire import build


class AlterPartitionManager:
    def __init__(self, broker: Any) -> None:
        self.b = broker
        #: (topic, partition) -> the change to send; kept while in flight, removed with its answer
        self.queue: dict[tuple[str, int], PendingChange] = {}
        self.kick = asyncio.Event()

    def submit(self, r: Partition, new_isr: list[int], recovered: bool = False) -> None:
        """Propose an ISR change (Partition.prepareIsrExpand / prepareIsrShrink → submitAlterPartition).

        The leader's maximal ISR is the union of the committed and the proposed ISR until the
        controller answers or newer metadata arrives (KIP-497, seed 003 §2.9.2). Broker epochs of
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
        version = 3 if b.features.alter_partition_v3 else 2
        cls = load_request_schema(56, version)
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
                                      "leader_recovery_state": 0 if item.recovered else r.leader_recovery_state}
                if version >= 3:
                    pd["new_isr_with_epochs"] = [{"broker_id": bid, "broker_epoch": e} for bid, e in item.isr_with_epochs]
                else:
                    pd["new_isr"] = item.new_isr
                by_topic.setdefault(t.topic_id, []).append(pd)
                sent[key] = item
            if not sent:
                continue
            req = build(cls, {"broker_id": b.node_id, "broker_epoch": b.lifecycle.broker_epoch,
                              "topics": [{"topic_id": uuid.UUID(tid), "partitions": parts}
                                         for tid, parts in by_topic.items()]})
            try:
                resp = await client.request(req, timeout=30)
            except (OSError, asyncio.TimeoutError, ConnectionError):
                await asyncio.sleep(0.2)  # reconnect backoff; the items are still queued
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
