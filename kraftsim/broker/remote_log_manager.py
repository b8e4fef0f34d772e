"""Broker side of tiered storage (KIP-405), KIP-1023 and docs/seeds.md#seed-004's local-log report, as Kafka's
RemoteLogManager.java (with the UnifiedLog and ReplicaManager hooks that use it).

Why a module of its own: the broker's replica manager only asks "is this topic tiered?", "copy
and retain now", "where does this partition's log start?"; the rules live here, each after the
Kafka method it mirrors, and so do the periodic tasks that apply them (``run``: Kafka's
RemoteLogManager schedules its own copy tasks, LogManager its retention task):
- copy task (RemoteLogManager.RLMCopyTask.copyLogSegmentsToRemote / candidateLogSegments): the
  leader copies closed segments, from the highest tiered offset + 1, whose next segment starts at
  or below the last stable offset (kraftsim has no transactions: LSO = HWM); never the active one;
- local retention (UnifiedLog.deleteOldSegments → deleteRetentionMsBreachedSegments /
  deleteRetentionSizeBreachedSegments with localRetentionMs/Bytes, deletableSegments): a segment
  goes only when it breached ``local.retention.ms`` (largest timestamp) or ``local.retention.bytes``
  (oldest first), ends at or below the HWM and is already tiered (``upperBoundOffset - 1 <=
  highestOffsetInRemoteStorage``) — an untiered segment is never deleted. Leaders and followers
  both apply it, each against its own log (followers read the tier's metadata as Kafka's
  RLMFollowerTask does);
- KIP-1023 (``follower.fetch.last.tiered.offset.enable``): an empty follower of a tiered topic
  starts at the leader's last tiered offset + 1 instead of 0 — the conditions of
  ReplicaFetcherThread.shouldFetchFromLastTieredOffset as docs/seeds.md#seed-004 quotes them (feature on,
  remote storage on for the topic, not compacted, replica empty, leader has data). The offset
  comes from the leader by ListOffsets LATEST_TIERED_TIMESTAMP (-5, KIP-1005; KIP-1023's
  EARLIEST_PENDING_UPLOAD_TIMESTAMP -6 is that + 1 and is answered too);
- docs/seeds.md#seed-004 (a proposal, not Kafka): which ISR members' local log state the leader reports.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from kraftsim.storage import records as rec
from kraftsim.storage.log import OffsetOutOfRange
from kraftsim.storage.remote import RemoteLogStorage
from kraftsim.wire import PRIVATE_LOCAL_LOG_REPORT, Client

#: ListOffsetsRequest timestamps (clients/.../ListOffsetsRequest.java; -6 from KIP-1023)
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP = -4, -5, -6


def _topic_or_broker(b: Any, topic: str, topic_key: str, broker_key: str) -> Any:
    t = b.image.topics.get(topic)
    if t is not None and topic_key in t.configs:
        return t.configs[topic_key]
    return b.cfg.values.get(broker_key)


class RemoteLogManager:
    """One per broker (Kafka's RemoteLogManager plus the ReplicaManager hooks that use it)."""

    def __init__(self, broker: Any) -> None:
        self.b = broker
        v = broker.cfg.values
        self.system_enabled = bool(v.get("remote.log.storage.system.enable"))
        root = v.get("remote.log.storage.dir")
        self.storage = RemoteLogStorage(root) if self.system_enabled and root else None
        self.follower_from_tiered = bool(v.get("follower.fetch.last.tiered.offset.enable"))
        self.task_s = int(v.get("remote.log.manager.task.interval.ms") or 1000) / 1000
        self.retention_s = int(v.get("log.retention.check.interval.ms") or 1000) / 1000
        #: docs/seeds.md#seed-004: (topic, partition) -> the local-log report last sent to the controller
        self.local_log_sent: dict[tuple[str, int], tuple] = {}

    # ------------------------------------------------------------------ configuration

    def enabled(self, topic: str) -> bool:
        """UnifiedLog.remoteLogEnabled: the system switch and the topic's ``remote.storage.enable``."""
        if self.storage is None:
            return False
        t = self.b.image.topics.get(topic)
        return t is not None and str(t.configs.get("remote.storage.enable", "false")).lower() == "true"

    def compacted(self, topic: str) -> bool:
        t = self.b.image.topics.get(topic)
        return t is not None and "compact" in str(t.configs.get("cleanup.policy", "delete"))

    def local_retention(self, topic: str) -> tuple[int, int]:
        """(local.retention.ms, local.retention.bytes): topic config over the broker's
        log.local.retention.*; -2 means retention.ms/bytes, which kraftsim does not model."""
        ms = int(_topic_or_broker(self.b, topic, "local.retention.ms", "log.local.retention.ms"))
        by = int(_topic_or_broker(self.b, topic, "local.retention.bytes", "log.local.retention.bytes"))
        return ms, by

    # ------------------------------------------------------------------ offsets

    def highest_offset(self, r: Any) -> int:
        """UnifiedLog.highestOffsetInRemoteStorage for this replica's history (-1: none)."""
        if not self.enabled(r.topic):
            return -1
        assert self.storage is not None
        return self.storage.highest_offset(r.topic, r.partition, r.log.epoch_entries(), r.log.log_end_offset)

    def log_start_offset(self, r: Any) -> int:
        """UnifiedLog.logStartOffset: the tier's first offset when the topic is tiered and the
        tier reaches down below the local log; otherwise the local log start."""
        local = r.log.log_start_offset
        if not self.enabled(r.topic):
            return local
        assert self.storage is not None
        rs = self.storage.log_start_offset(r.topic, r.partition)
        return rs if rs is not None and rs < local else local

    def read_remote(self, r: Any, offset: int, max_bytes: int, max_offset_exclusive: int) -> bytes:
        """Consumer reads below the local log start (ReplicaManager.handleOffsetOutOfRangeError →
        RemoteLogManager.read): served from the tier."""
        if not self.enabled(r.topic):
            return b""
        assert self.storage is not None
        return self.storage.read(r.topic, r.partition, offset, max_bytes, max_offset_exclusive)

    def list_offset(self, r: Any, ts: int) -> int | None:
        """UnifiedLog.fetchOffsetByTimestamp for the special timestamps of tiered storage."""
        if ts == EARLIEST_TIMESTAMP:
            return self.log_start_offset(r)
        if ts == EARLIEST_LOCAL_TIMESTAMP:
            return r.log.log_start_offset
        if ts == LATEST_TIERED_TIMESTAMP:
            return self.highest_offset(r)
        if ts == EARLIEST_PENDING_UPLOAD_TIMESTAMP:
            return self.highest_offset(r) + 1 if self.enabled(r.topic) else -1
        return None

    # ------------------------------------------------------------------ docs/seeds.md#seed-004: a replica's local log

    def batch_timestamp(self, r: Any, offset: int, end: int) -> int:
        """Max timestamp of the batch holding ``offset`` (-1 when ``offset`` >= ``end``: empty)."""
        if offset >= end:
            return -1
        try:
            if offset >= r.log.log_start_offset:
                data = r.log.read(offset, 1)
            else:
                data = self.read_remote(r, offset, 1, end)
        except OffsetOutOfRange:
            return -1
        head = next(iter(rec.iter_batches(data, 0, check_crc=False)), None)
        return head.max_timestamp if head is not None else -1

    def bytes_between(self, r: Any, start: int, end: int) -> int:
        """Bytes of the batches in [start, end), locally held or (below the local log) tiered."""
        local = r.log.log_start_offset
        total = r.log.bytes_between(max(start, local), end)
        if start < local and self.enabled(r.topic):
            assert self.storage is not None
            upto = min(end, local)
            nxt = start
            for seg in self.storage.segments(r.topic, r.partition):
                if seg.end_offset < nxt or seg.base_offset >= upto:
                    continue
                data = self.storage.read(r.topic, r.partition, max(nxt, seg.base_offset), 1 << 30, upto)
                for h in rec.iter_batches(data, 0, check_crc=False):
                    if h.base_offset >= nxt:
                        total += h.length
                        nxt = h.last_offset + 1
        return total

    # ------------------------------------------------------------------ periodic tasks

    def copy(self, r: Any) -> int:
        """RLMCopyTask.copyLogSegmentsToRemote on the leader; returns segments copied."""
        if r.role != "leader" or not self.enabled(r.topic) or self.b.lifecycle.self_fenced:
            return 0
        assert self.storage is not None
        copied = self.highest_offset(r)
        n = 0
        lso = r.hwm  # no transactions: the last stable offset is the HWM
        for base, nxt, _size in r.log.closed_segments():
            if nxt - 1 <= copied:
                continue
            if nxt > lso:  # candidateLogSegments: the next segment's base offset must be <= LSO
                break
            seg = self.storage.copy_segment(r.topic, r.partition, r.log.segment_data(base),
                                            r.log.epoch_entries(), self.b.node_id)
            copied = seg.end_offset
            n += 1
            self.b.ev.emit("segment_tiered", topic=r.topic, partition=r.partition, broker=self.b.node_id,
                           base_offset=seg.base_offset, end_offset=seg.end_offset, size=seg.size)
        return n

    def retain(self, r: Any, now_ms: int | None = None) -> int:
        """UnifiedLog.deleteOldSegments with local retention, for leader and follower alike."""
        if r.role not in ("leader", "follower") or not self.enabled(r.topic):
            return 0
        ms, by = self.local_retention(r.topic)
        if ms < 0 and by < 0:
            return 0
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        tiered = self.highest_offset(r)
        segs = r.log.closed_segments()
        diff = r.log.size_bytes - by if by >= 0 else -1
        upto = None
        for base, nxt, size in segs:
            breach = False
            if ms >= 0 and now_ms - r.log.segment_largest_timestamp(base) > ms:
                breach = True
            if by >= 0 and diff - size >= 0:
                breach = True
            # deletableSegments: below the HWM and tiered; stop at the first segment that is not
            if not breach or r.hwm < nxt or nxt - 1 > tiered:
                break
            if by >= 0:
                diff -= size
            upto = nxt
        if upto is None:
            return 0
        n = r.log.delete_segments_below(upto, reason="local_retention")
        if n:
            self.b.logs.checkpoint_log_start_offsets()
        return n

    async def run(self) -> None:
        """RemoteLogManager's copy task (``remote.log.manager.task.interval.ms``), LogManager's
        retention task (``log.retention.check.interval.ms``) with local retention, and seed
        004's local-log reports."""
        b = self.b
        if self.storage is None and not self.seed004_configured():
            return
        last_copy = last_ret = 0.0
        client = b.controller_client("local-log-report")
        try:
            while not b.stopping:
                await asyncio.sleep(min(self.task_s, self.retention_s))
                if not b.metadata.published or b.lifecycle.self_fenced:
                    continue
                now = time.monotonic()
                copy, ret = now - last_copy >= self.task_s, now - last_ret >= self.retention_s
                for r in list(b.replica_manager.partitions.values()):
                    try:
                        if copy:
                            self.copy(r)
                        if ret:
                            self.retain(r)
                    except OSError as e:
                        b.ev.log(f"remote tier {r.topic}-{r.partition}: {e}")
                last_copy = now if copy else last_copy
                last_ret = now if ret else last_ret
                await self.send_local_log_reports(client)
        finally:
            client.close()

    # ------------------------------------------------------------------ docs/seeds.md#seed-004: reports to the controller

    def seed004_configured(self, topic: str | None = None) -> bool:
        """docs/seeds.md#seed-004's preference is on when either threshold is > 0 (topic config over broker)."""
        for k in ("leader.election.eligible.local.log.ms", "leader.election.eligible.local.log.bytes"):
            t = self.b.image.topics.get(topic) if topic else None
            v = t.configs[k] if t is not None and k in t.configs else self.b.cfg.values.get(k)
            if v is not None and int(v) > 0:
                return True
        return False

    async def send_local_log_reports(self, client: Client) -> None:
        """docs/seeds.md#seed-004, "Leader aggregates and reports": for each partition it leads, the local log
        start timestamp and size of every ISR member, sent when they changed.

        The seed puts them in AlterPartition's NewIsrWithEpochs; kio's AlterPartition has no such
        fields (and kio, like the faultline proxy, refuses unknown tagged fields), so kraftsim
        sends them beside it as a private request (kraftsim/wire.py PRIVATE_LOCAL_LOG_REPORT,
        JSON) on its own connection, checked by the controller against the leader's broker
        epoch and leader epoch as AlterPartition is. Reports go at most once per
        ``remote.log.manager.task.interval.ms`` (the seed sends on every change).
        """
        b = self.b
        parts = []
        sent: dict[tuple[str, int], tuple] = {}
        for key, r in list(b.replica_manager.partitions.items()):
            if r.role != "leader" or not self.seed004_configured(r.topic):
                continue
            members = []
            for bid in r.isr:
                st = r.local_log_state(bid)
                if st is not None:
                    members.append({"broker": bid, "local_log_start_timestamp": st[0], "local_log_size_bytes": st[1]})
            snap = (r.leader_epoch, tuple((m["broker"], m["local_log_start_timestamp"], m["local_log_size_bytes"])
                                          for m in members))
            if not members or self.local_log_sent.get(key) == snap:
                continue
            parts.append({"topic": r.topic, "partition": r.partition, "leader_epoch": r.leader_epoch,
                          "replicas": members})
            sent[key] = snap
        if not parts:
            return
        body = json.dumps({"broker_id": b.node_id, "broker_epoch": b.lifecycle.broker_epoch,
                           "partitions": parts}).encode()
        try:
            resp = json.loads(await client.request_private(PRIVATE_LOCAL_LOG_REPORT, body, timeout=5))
        except (OSError, asyncio.TimeoutError, ConnectionError, ValueError):
            return  # sent again next time: nothing is marked as reported
        if resp.get("error"):
            b.ev.log(f"local log report refused: {resp['error']}")
            return
        self.local_log_sent.update(sent)

    # ------------------------------------------------------------------ follower bootstrap

    def should_fetch_from_last_tiered_offset(self, r: Any, leader_leo: int) -> bool:
        """KIP-1023's ReplicaFetcherThread.shouldFetchFromLastTieredOffset: feature on, remote
        storage on for the topic, not compacted, replica empty (offset 0), leader has data."""
        return (self.follower_from_tiered and self.enabled(r.topic) and not self.compacted(r.topic)
                and r.log.log_end_offset == 0 and r.log.log_start_offset == 0 and leader_leo > 0)

    def bootstrap_at(self, r: Any, next_offset: int, reason: str) -> bool:
        """TierStateMachine.buildRemoteLogAuxState: start the local log at ``next_offset`` (just
        past a tiered segment) and restore the leader-epoch entries stored with that segment."""
        assert self.storage is not None
        seg = self.storage.segment_for(r.topic, r.partition, next_offset - 1)
        if seg is None:
            self.b.ev.log(f"{r.topic}-{r.partition}: no remote segment holds offset {next_offset - 1}")
            return False
        r.log.truncate_fully_and_start_at(seg.end_offset + 1, reason=reason)
        r.log.assign_epochs([(int(e), int(s)) for e, s in seg.leader_epochs])
        r.hwm = max(min(r.hwm, r.log.log_end_offset), r.log.log_start_offset)
        self.b.logs.checkpoint_log_start_offsets()
        return True
