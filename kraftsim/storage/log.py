"""``PartitionLog``: the local log of one ``<topic>-<partition>`` replica, stored like Kafka's.

What it models (docs/seeds.md#seed-003-2-2-2, §2.4.1 note, §2.7):
- the LEO, the log start offset, and the leader-epoch cache used for divergence detection;
- asynchronous storage: appends go to the OS page cache with no fsync. ``flush()`` fsyncs and is
  the ONLY thing that advances the recovery point; it runs every ``log.flush.interval.messages``
  messages when set, on segment roll (Kafka flushes the old segments when it rolls) and on a
  clean close. An abrupt power loss therefore loses whatever lies past the recovery point, which
  is how the Last Replica Standing issue loses acknowledged writes;
- recovery after an unclean shutdown like Kafka's ``LogLoader``: from the segment holding the
  recovery point, validate every batch (size, magic, CRC32C, increasing offsets), truncate at the
  first invalid or incomplete one, delete every later segment, rebuild the epoch cache from the
  batches and truncate it to the new LEO. A clean open trusts the files and does not scan.

Events go to ``on_event(name, fields)`` using the shared contract's ``recovery`` and
``truncation`` shapes; the broker adds wall/node/role.
"""

from __future__ import annotations

import re
import threading
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Callable, Iterable

from . import records
from .checkpoints import LEADER_EPOCH_CHECKPOINT, fsync_dir
from .producer_state import ProducerStateManager
from .epoch_cache import LeaderEpochCache
from .records import CorruptRecordError
from .segment import Segment

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")

EventSink = Callable[[str, dict], None]


class OffsetOutOfRange(ValueError):
    """A read asked for an offset below the log start offset or above the LEO."""


class UnexpectedAppendOffset(ValueError):
    """A follower append whose first offset is below the LEO (Kafka's UnexpectedAppendOffsetException)."""


class PartitionLog:
    """Segments of one partition; all public methods are thread-safe."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        *,
        segment_bytes: int,
        flush_interval_messages: int | None,
        on_event: EventSink | None,
        epoch_checkpoint_sync_on_truncation: bool = True,
    ) -> None:
        self.dir = Path(directory)
        self.topic = topic
        self.partition = partition
        self.segment_bytes = segment_bytes
        self.flush_interval_messages = flush_interval_messages
        self._on_event = on_event
        self.on_flush: Callable[[PartitionLog], None] | None = None  # LogManager checkpoints here
        #: LogManager.truncateTo / truncateFullyAndStartAt: checkpoint recovery points right after
        self.on_truncate: Callable[[PartitionLog], None] | None = None
        #: idempotent-producer state (Kafka's ProducerStateManager); built on first use
        self._producer_state = ProducerStateManager()
        self._producers_built = False
        self._lock = threading.RLock()
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._log_start_offset = 0
        self._recovery_point = 0
        self._dir_dirty = False
        self._closed = False
        self.epoch_cache = LeaderEpochCache(self.dir / LEADER_EPOCH_CHECKPOINT, log_end_offset=lambda: self.log_end_offset,
                                            sync_truncation=epoch_checkpoint_sync_on_truncation)

    # ------------------------------------------------------------------ opening and recovery

    @classmethod
    def open(
        cls,
        directory: Path | str,
        topic: str,
        partition: int,
        *,
        recovery_point: int,
        clean: bool,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        flush_interval_messages: int | None = None,
        on_event: EventSink | None = None,
        log_start_offset: int | None = None,
        epoch_checkpoint_sync_on_truncation: bool = True,
    ) -> "PartitionLog":
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        log = cls(directory, topic, partition, segment_bytes=segment_bytes,
                  flush_interval_messages=flush_interval_messages, on_event=on_event,
                  epoch_checkpoint_sync_on_truncation=epoch_checkpoint_sync_on_truncation)
        log._load(recovery_point, clean, log_start_offset or 0)
        return log

    def _load(self, recovery_point: int, clean: bool, log_start_checkpoint: int) -> None:
        bases = sorted(int(m.group(1)) for p in self.dir.iterdir() if (m := _SEGMENT_RE.match(p.name)))
        for p in self.dir.glob("*.index"):  # an index without its .log is garbage (Kafka deletes it)
            if not p.with_suffix(".log").exists():
                p.unlink()
        if not bases:
            self._add_segment(Segment(self.dir, log_start_checkpoint, create=True))
            self._log_start_offset = log_start_checkpoint
            self._recovery_point = log_start_checkpoint
            self.epoch_cache.truncate_from_end(log_start_checkpoint)
            return
        for base in bases:
            self._add_segment(Segment(self.dir, base))
        if clean:
            for seg in self._segments:
                if not seg.load_index():
                    cut = seg.rebuild_index_from_headers()
                    if cut:  # a torn batch in a cleanly shut down log: not normal, so say so
                        self._emit_truncation(cut, (f"{seg.log_path.name}: incomplete batch at position {seg.size}",
                                                    seg.next_offset), seg.next_offset)
                    if seg is not self._segments[-1]:
                        seg.write_index()
        else:
            self._recover(recovery_point)
        self._log_start_offset = max(log_start_checkpoint, self._bases[0])
        leo = self.log_end_offset
        if self._log_start_offset > leo:  # Kafka: deleteSegmentsIfLogStartGreaterThanLogEnd
            self._truncate_fully(self._log_start_offset, reason="log_start_offset_beyond_log_end")
            return
        # Kafka's LogLoader: clean → recovery point = LEO; unclean → min(checkpoint, LEO). Recovery
        # itself never advances it: only a flush makes recovered bytes durable.
        self._recovery_point = leo if clean else min(recovery_point, leo)
        self.epoch_cache.truncate_from_end(leo)
        self.active.delete_index()  # the active segment never has an on-disk index

    def _recover(self, recovery_point: int) -> None:
        start = max(bisect_right(self._bases, recovery_point) - 1, 0)
        for seg in self._segments[:start]:
            # Below the recovery point the data is trusted; only a broken index (e.g. a segment
            # cut by hand) makes Kafka recover that one segment, keeping the later ones.
            if not seg.load_index():
                self._recover_segment(seg, None, recovery_point)
        truncated = 0
        cut_at = len(self._segments)
        expected = self._segments[start - 1].next_offset if start > 0 else None
        first_problem: tuple[str, int] | None = None
        for idx in range(start, len(self._segments)):
            seg = self._segments[idx]
            cut, expected, problem = self._scan_segment(seg, expected)
            if cut:
                truncated += cut
                first_problem = problem
                cut_at = idx + 1
                break
        for seg in self._segments[cut_at:]:
            truncated += seg.size
            seg.delete()
        del self._segments[cut_at:], self._bases[cut_at:]
        for seg in self._segments[start:-1]:  # scanned and immutable: persist the fresh index
            seg.write_index()
        self._finish_recovery(recovery_point, truncated, first_problem)

    def _recover_segment(self, seg: Segment, expected: int | None, recovery_point: int) -> None:
        cut, _next, problem = self._scan_segment(seg, expected)
        if cut:
            self._emit_truncation(cut, problem, seg.next_offset)
        seg.write_index()  # the segment is immutable; its index is now correct again

    def _scan_segment(self, seg: Segment, expected: int | None) -> tuple[int, int | None, tuple[str, int] | None]:
        """Validate every batch of ``seg`` (Kafka's ``LogSegment.recover``), rebuild its index and
        the epoch cache, cut the segment at the first bad batch.

        Returns (bytes cut, next expected offset, (reason, offset the bad data claimed to reach)).
        """
        buf = seg.read_all()
        seg.last_offsets = array("q")
        seg.positions = array("q")
        valid_end = 0
        problem = None
        claimed = -1
        floor = expected if expected is not None else seg.base_offset
        cache = self.epoch_cache
        for h in records.iter_batches(buf, 0, check_crc=True):
            if not h.crc_valid:
                problem = "bad magic" if h.magic != records.CURRENT_MAGIC else "CRC mismatch"
            elif h.last_offset < h.base_offset:
                problem = "negative lastOffsetDelta"
            elif h.base_offset < floor:
                problem = f"offset {h.base_offset} below the expected {floor}"
            if problem:
                claimed = h.last_offset + 1
                break
            seg.last_offsets.append(h.last_offset)
            seg.positions.append(h.position)
            # Like Kafka's LogSegment.recover: only an epoch newer than the cache's latest is added.
            if h.partition_leader_epoch >= 0 and h.partition_leader_epoch > cache.latest_epoch:
                cache.assign(h.partition_leader_epoch, h.base_offset)
            floor = h.last_offset + 1
            valid_end = h.position + h.length
        if valid_end >= seg.size:
            return 0, floor, None
        if problem is None:
            tail = buf[valid_end:]
            problem = records.validate_batch(tail) or "invalid batch"
            if len(tail) >= 27:  # a torn batch still names its offsets in its first 27 bytes
                claimed = int.from_bytes(tail[0:8], "big", signed=True) + int.from_bytes(tail[23:27], "big", signed=True) + 1
        reason = f"{seg.log_path.name} position {valid_end}: {problem}"
        return seg.truncate_bytes(valid_end), floor, (reason, claimed)

    def _emit_truncation(self, truncated: int, problem: tuple[str, int] | None, to_offset: int) -> None:
        reason, claimed = problem or ("segments deleted", to_offset)
        self._emit("truncation", from_offset=max(claimed, to_offset), to_offset=to_offset,
                   reason=f"recovery: {reason}", truncated_bytes=truncated)

    def _finish_recovery(self, recovery_point: int, truncated: int, problem: tuple[str, int] | None) -> None:
        leo = self.log_end_offset
        if truncated:
            self._emit_truncation(truncated, problem, leo)
        reason = "unclean_shutdown" + (f": {problem[0]}" if problem else "")
        self._emit("recovery", recovery_point=recovery_point, log_end_offset=leo,
                   truncated_bytes=truncated, reason=reason)

    # ------------------------------------------------------------------ properties

    @property
    def active(self) -> Segment:
        return self._segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset if self._segments else self._log_start_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    # ------------------------------------------------------------------ appends

    def append_as_leader(self, batch: bytes, leader_epoch: int) -> tuple[int, int]:
        """Assign offsets from the LEO and stamp ``leader_epoch`` into every batch of ``batch``.

        The producer's CRC is validated first (Kafka's LogValidator); baseOffset and
        partitionLeaderEpoch lie outside the CRC's range, so patching them keeps it valid.
        Returns (base offset of the first batch, last offset of the last batch).
        """
        with self._lock:
            buf = bytearray(batch)
            updates: list[tuple[int, int, int, int, int, int]] = []
            next_offset = self.log_end_offset
            first_base = next_offset
            lasts: list[int] = []
            poss: list[int] = []
            end = 0
            for h in records.iter_batches(buf, 0, check_crc=True):
                if not h.crc_valid:
                    raise CorruptRecordError(records.validate_batch(memoryview(buf)[h.position:]) or "invalid batch")
                records.stamp(buf, h.position, next_offset, leader_epoch)
                poss.append(h.position)
                delta = h.last_offset - h.base_offset
                if h.producer_id >= 0 and self._producers_built:
                    updates.append((h.producer_id, h.producer_epoch, h.base_sequence,
                                    h.base_sequence + delta, next_offset, next_offset + delta))
                next_offset += delta + 1
                lasts.append(next_offset - 1)
                end = h.position + h.length
            if end != len(buf) or not lasts:
                raise CorruptRecordError(records.validate_batch(memoryview(buf)[end:]) or "trailing bytes after the last batch")
            if self.epoch_cache.latest_epoch != leader_epoch:
                self.epoch_cache.assign(leader_epoch, first_base)
            self._write(bytes(buf), lasts, poss)
            self._update_producers(updates)  # after a roll's snapshot, as UnifiedLog.append does
            return first_base, lasts[-1]

    def append_as_follower(self, batches: bytes) -> int:
        """Append batches fetched from the leader, keeping its offsets and epochs; returns the
        last offset (LEO - 1 when ``batches`` is empty)."""
        with self._lock:
            if not batches:
                return self.log_end_offset - 1
            expected = self.log_end_offset
            lasts: list[int] = []
            poss: list[int] = []
            updates: list[tuple[int, int, int, int, int, int]] = []
            end = 0
            for h in records.iter_batches(batches, 0, check_crc=True):
                if not h.crc_valid:
                    raise CorruptRecordError(records.validate_batch(memoryview(batches)[h.position:]) or "invalid batch")
                if h.base_offset < expected or h.last_offset < h.base_offset:
                    raise UnexpectedAppendOffset(
                        f"{self.topic}-{self.partition}: follower append at offset {h.base_offset}, LEO {self.log_end_offset}")
                if h.partition_leader_epoch != self.epoch_cache.latest_epoch:
                    self.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
                if h.producer_id >= 0 and self._producers_built:  # UnifiedLog.append(REPLICATION)
                    updates.append((h.producer_id, h.producer_epoch, h.base_sequence,
                                    h.base_sequence + h.last_offset - h.base_offset, h.base_offset, h.last_offset))
                lasts.append(h.last_offset)
                poss.append(h.position)
                expected = h.last_offset + 1
                end = h.position + h.length
            if end != len(batches):
                why = records.validate_batch(memoryview(batches)[end:]) or "trailing bytes after the last batch"
                # A fetch response may end in a partial batch (the leader hit max bytes); Kafka's
                # record iterator skips it and so do we. Anything else is corruption.
                if not why.startswith("truncated"):
                    raise CorruptRecordError(why)
            if not lasts:
                return self.log_end_offset - 1
            self._write(bytes(memoryview(batches)[:end]), lasts, poss)
            self._update_producers(updates)
            return lasts[-1]

    def _update_producers(self, updates: list[tuple[int, int, int, int, int, int]]) -> None:
        for u in updates:
            self._producer_state.update(*u)

    def _write(self, data: bytes, lasts: list[int], poss: list[int]) -> None:
        seg = self.active
        if seg.size > 0 and seg.size + len(data) > self.segment_bytes:
            seg = self._roll(self._first_base(data))
        seg.append(data, lasts, poss)
        if self.flush_interval_messages and self.log_end_offset - self._recovery_point >= self.flush_interval_messages:
            self.flush()

    @staticmethod
    def _first_base(data: bytes) -> int:
        return int.from_bytes(data[0:8], "big", signed=True)

    def _roll(self, base_offset: int) -> Segment:
        """Start a new segment; like Kafka, flush everything before it first."""
        self.flush()
        old = self.active
        old.write_index()
        if self._producers_built:  # UnifiedLog.roll → producerStateManager.takeSnapshot()
            self._producer_state.take_snapshot(base_offset)
        new = Segment(self.dir, base_offset, create=True)
        self._add_segment(new)
        self._dir_dirty = True
        return new

    def _add_segment(self, seg: Segment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base_offset)

    # ------------------------------------------------------------------ flush

    def flush(self, force: bool = False) -> None:
        """fsync the segments from the recovery point on, then move the recovery point to the LEO.

        Mirrors UnifiedLog.flush → LocalLog.flush(offset): every segment of
        ``segments.values(recoveryPoint, offset)`` is forced (``LogSegment.flush`` does not look
        at what this process wrote: a segment reloaded after a crash is forced too), and the
        directory when one of them starts at or past the recovery point (a new segment). Nothing
        happens unless the flush offset is past the recovery point; ``force`` (clean shutdown,
        Kafka's ``flush(forceFlushActiveSegment = true)``) flushes up to LEO + 1, i.e. always
        includes the active segment.
        """
        with self._lock:
            leo = self.log_end_offset
            rp = self._recovery_point
            flush_offset = leo + 1 if force else leo
            if flush_offset <= rp:
                return
            # LogSegments.values(from, to): the segment holding `from` (floor) up to those below `to`
            first = max(bisect_right(self._bases, rp) - 1, 0)
            segs = [seg for seg in self._segments[first:] if seg.base_offset < flush_offset]
            for seg in segs:
                seg.flush()
            if self._dir_dirty or any(seg.base_offset >= rp for seg in segs):
                fsync_dir(self.dir)
                self._dir_dirty = False
            moved = leo != rp
            self._recovery_point = leo
        if moved and self.on_flush is not None:
            self.on_flush(self)

    # ------------------------------------------------------------------ reads

    def read(self, start_offset: int, max_bytes: int, max_offset_exclusive: int | None = None) -> bytes:
        """Whole batches from the one containing ``start_offset``, up to ``max_bytes`` (always at
        least one batch), excluding batches that reach ``max_offset_exclusive`` (e.g. the HWM)."""
        with self._lock:
            leo = self.log_end_offset
            if start_offset < self._log_start_offset or start_offset > leo:
                raise OffsetOutOfRange(
                    f"{self.topic}-{self.partition}: offset {start_offset} outside [{self._log_start_offset}, {leo}]")
            if start_offset == leo:
                return b""
            i = max(bisect_right(self._bases, start_offset) - 1, 0)
            for seg in self._segments[i:]:
                data = seg.read(start_offset, max_bytes, max_offset_exclusive)
                if data or (max_offset_exclusive is not None and seg.next_offset >= max_offset_exclusive):
                    return data
            return b""

    # ------------------------------------------------------------------ tiered storage (KIP-405)

    @property
    def local_log_start_offset(self) -> int:
        """UnifiedLog.localLogStartOffset: the first offset held by a local segment. A
        PartitionLog is Kafka's LocalLog, so this equals ``log_start_offset``; the partition's
        overall log start (remote data included) is the broker's to compute."""
        return self._log_start_offset

    def closed_segments(self) -> list[tuple[int, int, int]]:
        """(base offset, next offset, size) of every non-empty segment but the active one."""
        with self._lock:
            return [(s.base_offset, s.next_offset, s.size) for s in self._segments[:-1] if s.size]

    def segment_data(self, base_offset: int) -> bytes:
        with self._lock:
            i = bisect_right(self._bases, base_offset) - 1
            if i < 0 or self._bases[i] != base_offset:
                raise OffsetOutOfRange(f"{self.topic}-{self.partition}: no segment at {base_offset}")
            return self._segments[i].read_all()

    def bytes_between(self, start: int, end: int) -> int:
        """Bytes of the local batches lying wholly in [start, end) (docs/seeds.md#seed-004's local log size of a
        replica whose log runs from ``start`` to ``end``)."""
        with self._lock:
            total = 0
            for seg in self._segments:
                lasts, poss = seg.last_offsets, seg.positions
                n = len(lasts)
                if not n or lasts[-1] < start or seg.base_offset >= end:
                    continue
                i, j = bisect_left(lasts, start), bisect_left(lasts, end)
                if j > i:
                    total += (poss[j] if j < n else seg.size) - poss[i]
            return total

    def segment_largest_timestamp(self, base_offset: int) -> int:
        """LogSegment.largestTimestamp (the largest batch max timestamp), from batch headers."""
        data = self.segment_data(base_offset)
        return max((h.max_timestamp for h in records.iter_batches(data, 0, check_crc=False)), default=-1)

    def local_log_start_timestamp(self) -> int:
        """docs/seeds.md#seed-004's LocalLogStartTimestamp: the time index's first entry for the local log start
        (the first batch's max timestamp); -1 for an empty log."""
        with self._lock:
            for seg in self._segments:
                if seg.size:
                    head = next(iter(records.iter_batches(seg.read(seg.base_offset, 1, None), 0, check_crc=False)), None)
                    return head.max_timestamp if head is not None else -1
            return -1

    def delete_segments_below(self, offset: int, reason: str) -> int:
        """Delete whole local segments that end at or below ``offset`` (never the active one) and
        advance the local log start offset to the first one kept (UnifiedLog.deleteOldSegments →
        deleteSegments → maybeIncrementLocalLogStartOffset). Returns the segments deleted."""
        with self._lock:
            n = 0
            while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
                seg = self._segments.pop(0)
                self._bases.pop(0)
                seg.delete()
                n += 1
            if n:
                self._dir_dirty = True
                old = self._log_start_offset
                self._log_start_offset = self._bases[0]
                self._producer_state.delete_snapshots_below(self._log_start_offset)
                self._emit("local_log_start_advanced", from_offset=old, to_offset=self._log_start_offset,
                           reason=reason, segments_deleted=n)
            return n

    def assign_epochs(self, entries: list[tuple[int, int]]) -> None:
        """Leader-epoch entries restored from the remote tier (TierStateMachine.buildRemoteLogAuxState:
        ``leaderEpochCache.assign(epochs)``), for a replica that starts past offsets it never held."""
        with self._lock:
            for e, s in entries:
                self.epoch_cache.assign(e, s, persist=False)
            self.epoch_cache.flush()

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int, reason: str = "truncate_to", high_watermark: int | None = None) -> None:
        """Remove everything at and after ``offset`` (follower divergence, docs/seeds.md#seed-003-2-2-2).

        Truncation happens at a batch boundary: a batch containing ``offset`` is removed whole,
        so the LEO afterwards is that batch's base offset. ``high_watermark``: the replica's HWM
        when it truncated, recorded in the ``truncation`` event (Kafka's fetcher warns when it
        truncates below it: ReplicaFetcherThread.truncate).
        """
        with self._lock:
            old_leo = self.log_end_offset
            if offset >= old_leo:
                # UnifiedLog.truncateTo: "Always truncate epoch cache since we may have a
                # conflicting epoch entry at the end of the log from the leader" - a broker that
                # became leader (entry (e, LEO)) but appended nothing
                self.epoch_cache.truncate_from_end(old_leo)
                return
            if offset < self._bases[0]:
                self._truncate_fully(offset, reason=reason, high_watermark=high_watermark)
            else:
                self._truncate_to(offset, old_leo, reason, high_watermark)
        # LogManager.truncateTo → checkpointRecoveryOffsetsInDir: the checkpoint never names an
        # offset the log no longer has (a page-cache loss right after must not keep those bytes).
        if self.on_truncate is not None:
            self.on_truncate(self)

    def _truncate_to(self, offset: int, old_leo: int, reason: str, high_watermark: int | None = None) -> None:
        keep = bisect_right(self._bases, offset)
        for seg in self._segments[keep:]:
            seg.delete()
        del self._segments[keep:], self._bases[keep:]
        self.active.truncate_to_offset(offset)
        self.active.delete_index()
        leo = self.log_end_offset
        self._recovery_point = min(self._recovery_point, leo)
        self.epoch_cache.truncate_from_end(leo)
        if self._producers_built:  # UnifiedLog.truncateTo → rebuildProducerState(targetOffset)
            self._producer_state.truncate_and_reload(self._log_start_offset, leo, self._idempotent_batches)
        self._emit("truncation", from_offset=old_leo, to_offset=leo, reason=reason,
                   **({"high_watermark": high_watermark} if high_watermark is not None else {}))

    def truncate_fully_and_start_at(self, offset: int, reason: str = "truncate_fully") -> None:
        """Delete every segment and restart the log empty at ``offset`` (a follower whose fetch
        offset is below the leader's log start offset)."""
        with self._lock:
            self._truncate_fully(offset, reason=reason)
        # LogManager.truncateFullyAndStartAt → checkpointRecoveryOffsetsInDir
        if self.on_truncate is not None:
            self.on_truncate(self)

    def _truncate_fully(self, offset: int, *, reason: str, high_watermark: int | None = None) -> None:
        old_leo = self.log_end_offset
        for seg in self._segments:
            seg.delete()
        self._segments.clear()
        self._bases.clear()
        self._add_segment(Segment(self.dir, offset, create=True))
        self._dir_dirty = True
        self._log_start_offset = offset
        self._recovery_point = offset
        self.epoch_cache.clear()
        self._producer_state.clear()
        self._emit("truncation", from_offset=old_leo, to_offset=offset, reason=reason,
                   **({"high_watermark": high_watermark} if high_watermark is not None else {}))

    # ------------------------------------------------------------------ producer state

    def producer_state(self) -> ProducerStateManager:
        """The producer state, built from the log's batch headers on first use (Kafka loads it
        with the log: ``UnifiedLog.loadProducerState``), then maintained by every append."""
        with self._lock:
            if not self._producers_built:
                ps = self._producer_state
                ps.clear()
                for i, seg in enumerate(self._segments):
                    if i:  # the snapshot a roll would have taken here
                        ps.take_snapshot(seg.base_offset)
                    if seg.size == 0:
                        continue
                    for u in self._segment_batches(seg, 0, self.log_end_offset):
                        ps.update(*u)
                self._producers_built = True
            return self._producer_state

    @staticmethod
    def _segment_batches(seg: Segment, start: int, end: int) -> Iterable[tuple[int, int, int, int, int, int]]:
        for h in records.iter_batches(seg.read_all(), 0, check_crc=False):
            if h.producer_id >= 0 and start <= h.base_offset < end:
                yield (h.producer_id, h.producer_epoch, h.base_sequence,
                       h.base_sequence + h.last_offset - h.base_offset, h.base_offset, h.last_offset)

    def _idempotent_batches(self, start: int, end: int) -> Iterable[tuple[int, int, int, int, int, int]]:
        """The idempotent batches of [start, end): what rebuildProducerState replays after a snapshot."""
        for i, seg in enumerate(self._segments):
            nxt = self._bases[i + 1] if i + 1 < len(self._bases) else None
            if (nxt is not None and nxt <= start) or seg.base_offset >= end or seg.size == 0:
                continue
            yield from self._segment_batches(seg, start, end)

    # ------------------------------------------------------------------ epoch cache

    def epoch_entries(self) -> list[tuple[int, int]]:
        with self._lock:
            return self.epoch_cache.entries()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest epoch ≤ ``epoch``, start of the next epoch or LEO)."""
        with self._lock:
            return self.epoch_cache.end_offset_for(epoch)

    # ------------------------------------------------------------------ close

    def close(self, clean: bool = True) -> None:
        """Clean: flush and write the active segment's index. Unclean: just drop the descriptors
        (what a SIGKILL leaves behind: page-cache contents intact, recovery point not advanced)."""
        with self._lock:
            if self._closed:
                return
            if clean:
                self.flush(force=True)
                self.active.write_index()
            for seg in self._segments:
                seg.close()
            self._closed = True

    def _emit(self, event: str, **fields: object) -> None:
        if self._on_event is not None:
            self._on_event(event, {"topic": self.topic, "partition": self.partition, **fields})
