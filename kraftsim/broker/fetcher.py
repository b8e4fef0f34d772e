"""Follower replication, as Kafka's ReplicaFetcherManager.scala and ReplicaFetcherThread.scala
(with AbstractFetcherThread.scala, LeaderEndPoint and TierStateMachine.java).

Why its own module: the follower's side of replication is where acknowledged writes are lost
by truncation, so its rules - fetch with the current leader epoch and the last fetched epoch,
truncate on a diverging epoch or to the leader's end on OFFSET_OUT_OF_RANGE, take the leader's
HWM as sent, start past the tier on OFFSET_MOVED_TO_TIERED_STORAGE or (KIP-1023) an empty log -
sit together under the Kafka names that hold them. One thread (an asyncio task) per leader
broker, as ReplicaFetcherManager keeps one fetcher per source broker; its partitions are added
and removed as the partitions become followers or stop following (``partition.py``).
"""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kraftsim.broker.partition import Partition
from kraftsim.broker.replica_manager import MAX_PARTITION_BYTES
from kraftsim.wire import Client, build, load_request_schema

FETCH_VERSION = 15
#: at most one ``follower_append`` event per partition this often (a busy follower appends every
#: few milliseconds; an event each would outweigh the run's other logs)
FOLLOWER_APPEND_EVENT_INTERVAL_S = 0.1


class ReplicaFetcherManager:
    """ReplicaFetcherManager / AbstractFetcherManager: which partitions follow which leader."""

    def __init__(self, broker: Any) -> None:
        self.b = broker
        #: leader broker id -> its fetcher task
        self.threads: dict[int, asyncio.Task] = {}
        #: leader broker id -> the partitions fetched from it
        self.fetch_sets: dict[int, set[tuple[str, int]]] = {}

    def add(self, r: Partition) -> None:
        """addFetcherForPartitions: follow ``r.leader``, starting its fetcher if none runs."""
        self.remove(r)
        s = self.fetch_sets.setdefault(r.leader, set())
        s.add((r.topic, r.partition))
        t = self.threads.get(r.leader)
        if t is None or t.done():
            leader = r.leader
            self.threads[leader] = asyncio.ensure_future(
                self.b.supervise(lambda: ReplicaFetcherThread(self.b, leader).run(), "fetcher"))

    def remove(self, r: Partition) -> None:
        """removeFetcherForPartitions: a fetcher left without partitions ends by itself."""
        for s in self.fetch_sets.values():
            s.discard((r.topic, r.partition))

    def shutdown(self) -> None:
        """closeAllFetchers."""
        for t in self.threads.values():
            t.cancel()


class ReplicaFetcherThread:
    """Pull-based replication from one leader broker (docs/seeds.md#seed-003-2-2)."""

    def __init__(self, broker: Any, leader: int) -> None:
        self.b = broker
        self.leader = leader
        self.client: Client | None = None
        #: (topic, partition) -> when its last ``follower_append`` was emitted (monotonic)
        self.append_noted: dict[tuple[str, int], float] = {}
        #: replica.fetch.backoff.ms: the pause after a partition error (at least 200 ms after a
        #: lost connection, kraftsim's floor against reconnect storms)
        self.backoff_s = int(broker.cfg["replica.fetch.backoff.ms"]) / 1000
        #: replica.fetch.wait.max.ms: the Fetch's MaxWaitMs (ReplicaFetcherThread's maxWait)
        self.max_wait_ms = int(broker.cfg["replica.fetch.wait.max.ms"])

    async def run(self) -> None:
        b, leader = self.b, self.leader
        partitions = b.replica_manager.partitions
        fetch_sets = b.fetcher_manager.fetch_sets
        cls = load_request_schema(1, FETCH_VERSION)
        while not b.stopping:
            keys = [k for k in fetch_sets.get(leader, set())
                    if k in partitions and partitions[k].role == "follower" and partitions[k].leader == leader]
            if not keys:
                await asyncio.sleep(0.05)
                if not fetch_sets.get(leader):
                    break
                continue
            reg = b.image.brokers.get(leader)
            if reg is None:
                await asyncio.sleep(0.1)
                continue
            client = self.client
            if client is None or (client.host, client.port) != (reg.host, reg.port):
                if client:
                    client.close()
                client = self.client = Client(reg.host, reg.port, f"kraftsim-replica-{b.node_id}", local_host=b.host)
            for k in keys:
                if not partitions[k].tier_start_checked:
                    await self.maybe_start_from_tiered_offset(partitions[k])
            by_topic: dict[str, list[dict]] = {}
            for k in keys:
                r = partitions[k]
                t = b.image.topics.get(k[0])
                if t is None:
                    continue
                by_topic.setdefault(t.topic_id, []).append({
                    "partition": k[1], "current_leader_epoch": r.leader_epoch, "fetch_offset": r.log.log_end_offset,
                    "last_fetched_epoch": r.log.latest_epoch, "log_start_offset": r.log.log_start_offset,
                    "partition_max_bytes": MAX_PARTITION_BYTES})
            # KIP-903: ReplicaState.ReplicaEpoch only from Fetch v15 (MetadataVersion.fetchRequestVersion,
            # IBP_3_5_IV1); an older Fetch carries none, which is what -1 says here
            epoch = b.lifecycle.broker_epoch if b.features.kip903 else -1
            req = build(cls, {"replica_state": {"replica_id": b.node_id, "replica_epoch": epoch},
                              "max_wait": self.max_wait_ms, "min_bytes": 1, "max_bytes": 16 * 1024 * 1024, "isolation_level": 0,
                              "session_id": 0, "session_epoch": -1,
                              "topics": [{"topic_id": uuid.UUID(tid), "partitions": ps} for tid, ps in by_topic.items()]})
            try:
                resp = await client.request(req, timeout=5 + self.max_wait_ms / 1000)
            except (OSError, asyncio.TimeoutError, ConnectionError):
                await asyncio.sleep(max(self.backoff_s, 0.2))  # AbstractFetcherThread: fetchBackOffMs
                continue
            items = []
            for td in resp.responses:
                tname = b.image.topic_ids.get(str(td.topic_id))
                for pd in td.partitions:
                    r = partitions.get((tname, int(pd.partition_index))) if tname else None
                    if r is None or r.role != "follower" or r.leader != leader:
                        continue
                    items.append((r, pd))
            if await self.process_fetch_response(items):
                await asyncio.sleep(self.backoff_s)  # delayPartitions(..., fetchBackOffMs)
        if self.client:
            self.client.close()

    async def process_fetch_response(self, items: list[tuple[Partition, Any]]) -> bool:
        """AbstractFetcherThread.processFetchRequest over one Fetch response: every partition's
        answer in turn (errors; ``processPartitionData``: append, then the leader's HWM), the
        diverging epochs collected, and the truncations only after the whole response
        (``truncateOnFetchResponse``), one partition after another. True: back off.

        What happens first to a diverging partition is the ``fetcher_truncates_before_hwm`` gate
        (KAFKA-14704): from 3.4.1 a partition with a diverging epoch is not processed at all (its
        HWM is taken by the next fetch, after the truncation); up to 3.4.0 its data is processed
        first, so the follower takes the leader's HWM - capped at its own LEO, divergent tail
        included - and holds it until its truncation runs.

        Kafka's fetcher is a thread of its own while request handler threads serve consumers (a
        follower serves consumer Fetches from Fetch v11, KIP-392). kraftsim yields to its event
        loop between two partitions' steps, so a consumer Fetch can be read there as it can
        between two steps of Kafka's fetcher thread; the truncations' own work (UnifiedLog
        .truncateTo and, per partition, the recovery-point checkpoint of LogManager.truncateTo)
        is real work here too. Parked consumer Fetches are woken after the whole response, as
        ReplicaFetcherThread.doWork completes the delayed fetches after processFetchRequest."""
        backoff = False
        diverging: list[tuple[Partition, int, int, int]] = []
        hwm_moved = False
        for i, (r, pd) in enumerate(items):
            if i:
                await asyncio.sleep(0)
            if r.role != "follower":
                continue
            code = pd.error_code
            if code is not ErrorCode.none:
                backoff |= await self.handle_partition_error(r, code)
                continue
            div = pd.diverging_epoch
            is_diverging = int(div.epoch) >= 0 and int(div.end_offset) >= 0  # FetchResponse.isDivergingEpoch
            if not (is_diverging and self.b.features.fetcher_truncates_before_hwm):
                before = r.hwm
                backoff |= self.process_partition_data(r, pd)
                hwm_moved |= r.hwm != before
            if is_diverging:
                diverging.append((r, r.leader_epoch, int(div.epoch), int(div.end_offset)))
        for r, leader_epoch, epoch, end_offset in diverging:
            await asyncio.sleep(0)
            # a partition that stopped following this leader meanwhile is no longer in the
            # fetcher's partitionStates, and truncateOnFetchResponse skips it
            if r.role == "follower" and r.leader == self.leader and r.leader_epoch == leader_epoch:
                self.truncate_on_diverging_epoch(r, epoch, end_offset)
                hwm_moved = True
        if hwm_moved:
            self.b.notify()  # ReplicaFetcherThread.completeDelayedFetchRequests
        return backoff

    async def handle_partition_response(self, r: Partition, pd: Any) -> bool:
        """One partition's answer as a response of its own. True: back off before the next fetch."""
        return await self.process_fetch_response([(r, pd)])

    async def handle_partition_error(self, r: Partition, code: ErrorCode) -> bool:
        """The error branches of processFetchRequest. True: back off (partitionsWithError)."""
        b = self.b
        if code is ErrorCode.offset_out_of_range:
            await self.truncate_to_leader_end(r)
            return False
        if code is ErrorCode.offset_moved_to_tiered_storage:
            # TierStateMachine.start: the leader's local log start (EARLIEST_LOCAL_TIMESTAMP), then
            # buildRemoteLogAuxState: start just past the tiered segment below it
            off = await self.list_offset(r, -4)
            if off is None or b.rlm.storage is None:
                return True
            if not b.rlm.bootstrap_at(r, off, reason="offset_moved_to_tiered_storage"):
                return True
            b.ev.emit("follower_tiered_start", topic=r.topic, partition=r.partition, broker=b.node_id,
                      leader=r.leader, fetch_offset=r.log.log_end_offset, reason="offset_moved_to_tiered_storage")
            return False
        return True

    def process_partition_data(self, r: Partition, pd: Any) -> bool:
        """ReplicaFetcherThread.processPartitionData: append the leader's records, then take its
        HWM (UnifiedLog.maybeUpdateHighWatermark → updateHighWatermark: the leader's HWM as sent,
        bounded by log start and end offsets - it may go down; only the leader's
        maybeIncrementHighWatermark is monotonic). True: the append failed (back off)."""
        if pd.records:
            before = r.log.log_end_offset
            try:
                r.log.append_as_follower(bytes(pd.records))
            except Exception as e:
                self.b.ev.log(f"follower append {r.topic}-{r.partition} failed: {e}")
                return True
            self.note_follower_append(r, before)
        r.hwm = max(min(int(pd.high_watermark), r.log.log_end_offset), r.log.log_start_offset)
        return False

    def truncate_on_diverging_epoch(self, r: Partition, epoch: int, end_offset: int) -> None:
        """AbstractFetcherThread.truncateOnFetchResponse → getOffsetTruncationState → truncate:
        to the leader's end offset of the diverging epoch, or our own end of that epoch if lower;
        ReplicaFetcherThread.truncate → Partition.truncateTo → UnifiedLog.truncateTo, also at or
        past the log end, where only the leader-epoch cache is cut. Kafka warns "Truncating <tp>
        to offset <o> below high watermark <hw>" when the follower's HWM was above the target;
        the ``truncation`` event carries the HWM the truncation found."""
        fe, fo = r.log.end_offset_for_epoch(epoch)
        target = min(end_offset, fo if fe >= 0 and fo >= 0 else r.log.log_end_offset)
        r.log.truncate_to(max(target, r.log.log_start_offset), reason="diverging_epoch", high_watermark=r.hwm)
        # UnifiedLog.truncateTo: "if (highWatermark >= localLog.logEndOffset) updateHighWatermark(...)"
        r.hwm = min(r.hwm, r.log.log_end_offset)

    def note_follower_append(self, r: Partition, before: int) -> None:
        """Emit ``follower_append`` (the follower's own log end offset, from ``before`` to its LEO
        now) for the append Partition.appendRecordsToFollowerOrFutureReplica just made; at most every
        ``FOLLOWER_APPEND_EVENT_INTERVAL_S`` per partition, always for the first after a quieter spell.

        Not a Kafka behaviour: the record the checker's ``ack_below_min_isr`` judges acks by,
        written by the follower, not by the leader whose acks are judged (checkers/replicas.py).
        ``from_offset`` is exact at emission, so a skipped append never weakens the bound.
        """
        leo = r.log.log_end_offset
        if leo <= before:
            return
        key, now = (r.topic, r.partition), time.monotonic()
        if now - self.append_noted.get(key, -FOLLOWER_APPEND_EVENT_INTERVAL_S) < FOLLOWER_APPEND_EVENT_INTERVAL_S:
            return
        self.append_noted[key] = now
        self.b.ev.emit("follower_append", topic=r.topic, partition=r.partition, broker=self.b.node_id,
                       broker_epoch=self.b.lifecycle.broker_epoch, leader=r.leader, leader_epoch=r.leader_epoch,
                       from_offset=before, log_end_offset=leo)

    async def truncate_to_leader_end(self, r: Partition) -> None:
        """OFFSET_OUT_OF_RANGE (AbstractFetcherThread.handleOffsetOutOfRange): ListOffsets v7
        LATEST to the leader, truncate to its log end when ours is longer."""
        assert self.client is not None
        cls = load_request_schema(2, 7)
        req = build(cls, {"replica_id": self.b.node_id, "isolation_level": 0, "topics": [
            {"name": r.topic, "partitions": [{"partition_index": r.partition, "current_leader_epoch": r.leader_epoch,
                                              "timestamp": -1}]}]})
        try:
            resp = await self.client.request(req, timeout=5)
        except (OSError, asyncio.TimeoutError, ConnectionError):
            return
        p = resp.topics[0].partitions[0]
        if p.error_code is ErrorCode.none and int(p.offset) < r.log.log_end_offset:
            r.log.truncate_to(max(int(p.offset), r.log.log_start_offset), reason="offset_out_of_range")
            r.hwm = min(r.hwm, r.log.log_end_offset)

    async def list_offset(self, r: Partition, ts: int) -> int | None:
        """ListOffsets v9 to the leader for one special timestamp (LeaderEndPoint.fetchEarliestLocalOffset,
        fetchLatestOffset, the KIP-1023 tiered offset); None when it fails."""
        assert self.client is not None
        cls = load_request_schema(2, 9)
        req = build(cls, {"replica_id": self.b.node_id, "isolation_level": 0, "topics": [
            {"name": r.topic, "partitions": [{"partition_index": r.partition, "current_leader_epoch": r.leader_epoch,
                                              "timestamp": ts}]}]})
        try:
            resp = await self.client.request(req, timeout=5)
        except (OSError, asyncio.TimeoutError, ConnectionError):
            return None
        p = resp.topics[0].partitions[0]
        return int(p.offset) if p.error_code is ErrorCode.none else None

    async def maybe_start_from_tiered_offset(self, r: Partition) -> None:
        """KIP-1023: an empty follower of a tiered topic starts at the leader's last tiered
        offset + 1 (ReplicaFetcherThread.shouldFetchFromLastTieredOffset)."""
        b = self.b
        r.tier_start_checked = True
        if not (b.rlm.follower_from_tiered and b.rlm.enabled(r.topic) and r.log.log_end_offset == 0):
            return
        leader_leo = await self.list_offset(r, -1)
        if leader_leo is None or not b.rlm.should_fetch_from_last_tiered_offset(r, leader_leo):
            return
        tiered = await self.list_offset(r, -5)  # LATEST_TIERED_TIMESTAMP (KIP-1005)
        if tiered is None or tiered < 0:
            return  # nothing tiered yet: fetch from 0 as before
        if b.rlm.bootstrap_at(r, tiered + 1, reason="kip1023_last_tiered_offset"):
            b.ev.emit("follower_tiered_start", topic=r.topic, partition=r.partition, broker=b.node_id,
                      leader=r.leader, fetch_offset=r.log.log_end_offset, reason="last_tiered_offset")
