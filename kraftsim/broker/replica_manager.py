"""This broker's partitions, as Kafka's ReplicaManager.scala holds them.

Why its own module: between the request handlers (``apis.py``) and one partition's rules
(``partition.py``) Kafka puts ReplicaManager - the map of partitions, ``applyDelta`` from the
metadata publisher, ``appendRecords`` with its DelayedProduce wait, ``fetchMessages`` /
``readFromLog`` with the follower-fetch bookkeeping and the tiered-offset branch, and the
periodic ISR-expiration and high-watermark-checkpoint tasks. Changes to how a leader change
treats waiting acks=all requests (``makeLeader``) or how partitions are made leaders and
followers belong here and in ``partition.py``.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from kio.schema.errors import ErrorCode

from kraftsim.broker.partition import Partition
from kraftsim.storage import records as rec
from kraftsim.storage.log import OffsetOutOfRange

#: the most a Fetch reads for one partition (and what a follower asks for)
MAX_PARTITION_BYTES = 1024 * 1024


class ReplicaManager:
    def __init__(self, broker: Any) -> None:
        self.b = broker
        self.partitions: dict[tuple[str, int], Partition] = {}
        #: the high watermarks checkpointed by the last run, read at startup
        self.hwm_checkpoint: dict[tuple[str, int], int] = {}
        #: checker control, not Kafka: acks=all answered without waiting for the ISR (docs/kraftsim.md)
        self.ack_without_replication = bool(broker.cfg["faultline.control.ack_without_replication"])
        if self.ack_without_replication:
            broker.ev.log("CHECKER CONTROL faultline.control.ack_without_replication=true: acks=all writes are "
                          "acknowledged without replication - a deliberately broken broker, not Kafka")

    # ------------------------------------------------------------------ partitions

    def load_high_watermarks(self) -> None:
        """ReplicaManager.startup reads ``replication-offset-checkpoint`` (after the logs loaded)."""
        self.hwm_checkpoint = self.b.logs.read_high_watermarks()

    def get_or_create(self, topic: str, p: int) -> Partition:
        """ReplicaManager.getOrCreatePartition, with the log and its checkpointed HWM."""
        r = self.partitions.get((topic, p))
        if r is None:
            r = Partition(self.b, topic, p, self.b.logs.get_or_create(topic, p))
            hw = self.hwm_checkpoint.get((topic, p))
            if hw is not None:
                r.hwm = min(hw, r.log.log_end_offset)
            self.partitions[(topic, p)] = r
        return r

    def apply_delta(self, keys: set[tuple[str, int]] | None) -> None:
        """ReplicaManager.applyDelta: each partition of ``keys`` (None: all) this broker holds or
        is assigned becomes leader, follower or neither as the image says."""
        b = self.b
        for ps in list(b.image.all_partitions()):
            key = (ps.topic, ps.partition)
            if keys is not None and key not in keys:
                continue
            if b.node_id in ps.replicas or key in self.partitions:
                r = self.get_or_create(*key)
                if b.lifecycle.self_fenced:
                    r.replicas, r.isr = list(ps.replicas), list(ps.isr)
                    continue
                r.apply(ps)

    def stop_all(self, why: str) -> None:
        """Every partition stops leading and following (docs/seeds.md#seed-002's self-fencing only)."""
        for r in self.partitions.values():
            r.stop(why)

    def fail_all_waiters(self, code: ErrorCode) -> None:
        for r in self.partitions.values():
            r.fail_waiters(code)

    def leader_replica(self, topic: str, p: int) -> tuple[Partition | None, ErrorCode]:
        """ReplicaManager.getPartitionOrError + Partition.leaderLogIfLocal: the partition if this
        broker leads it, else the error to answer."""
        b = self.b
        if topic not in b.image.topics or p not in b.image.topics[topic].partitions:
            return None, ErrorCode.unknown_topic_or_partition
        r = self.partitions.get((topic, p))
        if r is None or r.role != "leader" or b.lifecycle.self_fenced:
            return None, ErrorCode.not_leader_or_follower
        return r, ErrorCode.none

    def replica_for_consumer(self, topic: str, p: int) -> tuple[Partition | None, ErrorCode]:
        """A consumer's Fetch from v11 (KIP-392): KafkaApis.handleFetchRequest gives it
        ClientMetadata, so ``FetchParams.fetchOnlyLeader`` (``isFromFollower || (isFromConsumer &&
        clientMetadata.isEmpty)``) is false and Partition.getLocalLog serves it from any replica
        holding the log - the leader or a follower, read up to that replica's own HWM. Which
        replica a consumer asks is the client's choice: a leader points KIP-392 clients at a
        follower only through ``replica.selector.class`` (not configured: kraftsim never names a
        preferred read replica), and a client whose metadata still names a demoted leader keeps
        asking it. Before v11 (no ClientMetadata) only the leader serves consumers."""
        b = self.b
        if topic not in b.image.topics or p not in b.image.topics[topic].partitions:
            return None, ErrorCode.unknown_topic_or_partition
        r = self.partitions.get((topic, p))
        if r is None or r.role not in ("leader", "follower") or b.lifecycle.self_fenced:
            return None, ErrorCode.not_leader_or_follower
        return r, ErrorCode.none

    # ------------------------------------------------------------------ produce

    async def append_records(self, topic: str, p: int, data: bytes | None, acks: int,
                             timeout: float) -> tuple[ErrorCode, int]:
        """ReplicaManager.appendRecords for one partition: Partition.appendRecordsToLeader, then
        for acks=all the DelayedProduce wait. Returns (error, base offset)."""
        r, err = self.leader_replica(topic, p)
        if r is None:
            return err, -1
        if not data:
            return ErrorCode.corrupt_message, -1
        if acks == -1 and len(r.isr) < r.effective_min_isr:
            # Partition.appendRecordsToLeader: ISR size < effectiveMinIsr → NotEnoughReplicas
            return ErrorCode.not_enough_replicas, -1
        headers = list(rec.iter_batches(data, 0))
        if not headers:
            return ErrorCode.corrupt_message, -1
        code, dup = r.check_sequence(headers[0])
        if code is not ErrorCode.none:
            return code, -1
        if dup is not None:
            base, last = dup
        else:
            try:
                base, last = r.append(bytes(data))
            except Exception as e:
                self.b.ev.log(f"produce to {topic}-{p} rejected: {e}")
                return ErrorCode.corrupt_message, -1
        if acks != -1 or self.ack_without_replication:
            return ErrorCode.none, base
        fut = r.wait_for_hwm(last)
        try:
            code = await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            return ErrorCode.request_timed_out, -1
        return code, base if code is ErrorCode.none else -1

    # ------------------------------------------------------------------ fetch

    def fetch_messages(self, req: Any, rid: int, repoch: int, v: int,
                       update_fetch_state: bool = True) -> tuple[list[dict], int]:
        """One pass of ReplicaManager.fetchMessages over a Fetch request: (topic responses,
        bytes read); the handler long-polls by calling it again with ``update_fetch_state`` False -
        a follower's fetch state is updated by the first read only (``readFromLog(...,
        readFromPurgatory = false)``; DelayedFetch.onComplete reads with ``readFromPurgatory = true``,
        ``Partition.fetchRecords(updateFetchState = false)``)."""
        total = 0
        responses = []
        for td in req.topics:
            if v >= 13:
                tname = self.b.image.topic_ids.get(str(td.topic_id))
                tkey: dict[str, Any] = {"topic_id": td.topic_id}
            else:
                tname = td.topic
                tkey = {"topic": td.topic}
            parts = []
            for pd in td.partitions:
                out, n = self.fetch_partition(tname, pd, rid, repoch, v, update_fetch_state)
                parts.append(out)
                total += n
            responses.append({**tkey, "partitions": parts})
        return responses, total

    def fetch_partition(self, tname: str | None, pd: Any, rid: int, repoch: int, v: int,
                        update_fetch_state: bool = True) -> tuple[dict, int]:
        """ReplicaManager.readFromLog for one partition (Partition.fetchRecords: leader epoch
        checks, the diverging epoch for a follower, updateFollowerFetchState; the remote tier via
        handleOffsetOutOfRangeError). Returns (partition response, bytes read)."""
        b = self.b
        p = int(pd.partition)
        base = {"partition_index": p, "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                "aborted_transactions": None, "records": b""}
        if tname is None:
            return {**base, "error_code": ErrorCode.unknown_topic_id if v >= 13 else ErrorCode.unknown_topic_or_partition}, 0
        cle = int(pd.current_leader_epoch)
        if rid < 0 and v >= 11:
            r, err = self.replica_for_consumer(tname, p)
        else:
            r, err = self.leader_replica(tname, p)
        if r is None:
            return {**base, "error_code": err}, 0
        if cle >= 0 and cle != r.leader_epoch:  # Partition.checkCurrentLeaderEpoch (-1: not checked)
            return {**base, "error_code": ErrorCode.fenced_leader_epoch if cle < r.leader_epoch
                    else ErrorCode.unknown_leader_epoch}, 0
        off = int(pd.fetch_offset)
        log = r.log
        log_start = b.rlm.log_start_offset(r)  # UnifiedLog.logStartOffset: remote data included
        base.update(high_watermark=r.hwm, last_stable_offset=r.hwm, log_start_offset=log_start,
                    current_leader={"leader_id": r.leader, "leader_epoch": r.leader_epoch})
        # ReplicaManager.handleOffsetOutOfRangeError: an offset in the remote tier only
        tiered = log_start <= off < log.log_start_offset
        if rid >= 0:  # follower fetch
            if rid not in r.replicas:
                return {**base, "error_code": ErrorCode.not_leader_or_follower}, 0
            if tiered:  # the follower builds its state from the tier (TierStateMachine.start)
                return {**base, "error_code": ErrorCode.offset_moved_to_tiered_storage}, 0
            lfe = int(getattr(pd, "last_fetched_epoch", -1))
            if lfe >= 0:
                e, end = log.end_offset_for_epoch(lfe)
                if e >= 0 and end >= 0 and (e < lfe or end < off):
                    return {**base, "error_code": ErrorCode.none,
                            "diverging_epoch": {"epoch": e, "end_offset": end}}, 1
            if off > log.log_end_offset or off < log.log_start_offset:
                return {**base, "error_code": ErrorCode.offset_out_of_range}, 0
            if update_fetch_state:
                err = r.on_follower_fetch(rid, off, repoch)
                if err is not ErrorCode.none:
                    return {**base, "error_code": err}, 0
                # docs/seeds.md#seed-004: the follower's local log start, from which the leader derives the local
                # log state the seed's new Fetch fields would carry (see Partition.local_log_state)
                r.followers[rid].local_log_start_offset = int(getattr(pd, "log_start_offset", -1))
            base.update(high_watermark=r.hwm, last_stable_offset=r.hwm)
            data = log.read(off, min(int(pd.partition_max_bytes), MAX_PARTITION_BYTES))
        else:
            if tiered:  # consumers read the remote tier (RemoteLogManager.read via DelayedRemoteFetch)
                data = b.rlm.read_remote(r, off, int(pd.partition_max_bytes) or MAX_PARTITION_BYTES, r.hwm)
                if not data and off < r.hwm:
                    return {**base, "error_code": ErrorCode.offset_out_of_range}, 0
                return {**base, "error_code": ErrorCode.none, "records": data}, len(data)
            if off > log.log_end_offset or off < log.log_start_offset:
                return {**base, "error_code": ErrorCode.offset_out_of_range}, 0
            try:
                data = log.read(off, int(pd.partition_max_bytes) or MAX_PARTITION_BYTES, max_offset_exclusive=r.hwm) if off < r.hwm else b""
            except OffsetOutOfRange:
                return {**base, "error_code": ErrorCode.offset_out_of_range}, 0
        return {**base, "error_code": ErrorCode.none, "records": data}, len(data)

    # ------------------------------------------------------------------ periodic tasks

    async def run(self) -> None:
        """ReplicaManager's scheduled tasks: ``isr-expiration`` (Partition.maybeShrinkIsr, seed
        003 §2.9) and ``highwatermark-checkpoint``."""
        b = self.b
        last_ckpt = 0.0
        ckpt_s = int(b.cfg["replica.high.watermark.checkpoint.interval.ms"]) / 1000
        while not b.stopping:
            await asyncio.sleep(b.cfg.isr_expiration_s)
            for r in list(self.partitions.values()):
                r.maybe_shrink_isr()
            if time.monotonic() - last_ckpt > ckpt_s:
                last_ckpt = time.monotonic()
                b.logs.checkpoint_high_watermarks(self.hwm_snapshot())

    def hwm_snapshot(self) -> dict[tuple[str, int], int]:
        """HWMs to checkpoint: the partitions' own, and the loaded checkpoint for logs not handed to
        the replica manager yet (before the first publish a checkpoint must not forget them)."""
        logs = self.b.logs.logs()
        out = {k: v for k, v in self.hwm_checkpoint.items() if k in logs}
        out.update({k: r.hwm for k, r in self.partitions.items()})
        return out
