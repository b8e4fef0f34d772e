"""The replicated metadata log: ``__cluster_metadata-0`` on kraftsim's segment storage.

Why kraftsim's PartitionLog: Kafka's KafkaMetadataLog is a UnifiedLog, so the metadata log has
the same segments, recovery point, leader-epoch checkpoint and recovery rules as any partition
log, and a page-cache-loss reboot of a controller cuts it exactly the way it cuts a broker's
partition. What differs is *when* it is flushed: the raft client flushes the log itself —
the leader after every append before counting its own end offset (KafkaRaftClient.flushLeaderLog)
and a voter after every follower append before its next Fetch (KafkaRaftClient.appendAsFollower:
"the leader only requires that voters have flushed their log before sending a Fetch request").
So ``log.flush.interval.messages`` does not apply here; ``append_*`` flush.

Offset/epoch rules mirror ReplicatedLog.java (validateOffsetAndEpoch, truncateToEndOffset) and
KafkaMetadataLog.scala (endOffsetForEpoch, lastFetchedEpoch). No snapshots: the log starts at 0.

Each leader epoch begins with a LeaderChange control batch (LeaderState.appendStartOfEpochControlRecords),
encoded as Kafka encodes it: control attribute bit set, key ``ControlRecordType`` (version 0,
type 2 = LEADER_CHANGE), value ``LeaderChangeMessage`` v0 (leaderId, voters, grantingVoters).
Control batches never reach the state machine (Kafka's RecordsIterator skips them).
"""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Callable, Iterator

from crc32c import crc32c

from kraftsim.storage import LogManager
from kraftsim.storage import records as rec
from kraftsim.storage.log import EventSink

TOPIC = "__cluster_metadata"
PARTITION = 0
CONTROL_FLAG = 0x20  # DefaultRecordBatch.CONTROL_FLAG_MASK
LEADER_CHANGE = 2  # ControlRecordType.LEADER_CHANGE


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def leader_change_value(leader: int, voters: list[int], granting: list[int]) -> bytes:
    """LeaderChangeMessage v0 (flexible): Version int16, LeaderId int32, Voters and
    GrantingVoters as compact arrays of {VoterId int32, tags}, then the message's tags."""
    def arr(ids: list[int]) -> bytes:
        return _uvarint(len(ids) + 1) + b"".join(struct.pack(">i", v) + b"\x00" for v in ids)
    return struct.pack(">hi", 0, leader) + arr(voters) + arr(granting) + b"\x00"


def control_batch(key: bytes, value: bytes, epoch: int) -> bytes:
    """One control batch: encode, set the control attribute, recompute the CRC (it covers attributes)."""
    buf = bytearray(rec.encode_batch([(key, value, [])], leader_epoch=epoch))
    attrs = struct.unpack_from(">h", buf, rec.ATTRIBUTES_OFFSET)[0] | CONTROL_FLAG
    struct.pack_into(">h", buf, rec.ATTRIBUTES_OFFSET, attrs)
    struct.pack_into(">I", buf, rec.CRC_OFFSET, crc32c(memoryview(buf)[rec.ATTRIBUTES_OFFSET:]))
    return bytes(buf)


class RaftLog:
    """Kafka's ReplicatedLog over kraftsim storage, in ``<metadata.log.dir>/__cluster_metadata-0``."""

    def __init__(self, metadata_dir: Path, node_id: int, cluster_id: str, *, segment_bytes: int,
                 on_event: EventSink | None = None):
        self.manager = LogManager([Path(metadata_dir)], node_id=node_id, cluster_id=cluster_id,
                                  on_event=on_event, flush_interval_messages=None, segment_bytes=segment_bytes)
        self.manager.load()
        self.log = self.manager.get_or_create(TOPIC, PARTITION)
        self.dir = self.log.dir

    # ---------------------------------------------------------------- offsets and epochs

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_fetched_epoch(self) -> int:
        """KafkaMetadataLog.lastFetchedEpoch: the latest epoch in the log, 0 when empty."""
        e = self.log.latest_epoch
        return e if e is not None and e >= 0 else 0

    def end_offset_and_epoch(self) -> tuple[int, int]:
        """(LEO, last fetched epoch): what a Vote request carries (KafkaRaftClient.endOffset)."""
        return self.end_offset, self.last_fetched_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """KafkaMetadataLog.endOffsetForEpoch -> (end offset, epoch): the leader-epoch cache's
        answer, or (LEO, lastFetchedEpoch) when the cache has none."""
        found_epoch, offset = self.log.end_offset_for_epoch(epoch)
        if found_epoch < 0 or offset < 0:
            return self.end_offset, self.last_fetched_epoch
        return offset, found_epoch

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> tuple[bool, tuple[int, int]]:
        """ReplicatedLog.validateOffsetAndEpoch: (valid, (offset, epoch)); when not valid the pair
        is the diverging epoch and its end offset the follower must truncate to."""
        if offset == 0:
            return True, (0, 0)
        end, found = self.end_offset_for_epoch(epoch)
        if found != epoch or end < offset:
            return False, (end, found)
        return True, (offset, epoch)

    def truncate_to_end_offset(self, offset: int, epoch: int) -> int:
        """ReplicatedLog.truncateToEndOffset: where the follower cuts after a diverging epoch."""
        if epoch == 0:
            at = min(offset, self.end_offset)
        else:
            local_end, local_epoch = self.end_offset_for_epoch(epoch)
            at = min(local_end, offset) if local_epoch == epoch else local_end
        self.log.truncate_to(at, reason="diverging_epoch")
        return at

    # ---------------------------------------------------------------- appends (always flushed)

    def append_as_leader(self, values: list[dict[str, Any]], epoch: int) -> tuple[int, int]:
        batch = rec.encode_batch([(None, json.dumps(v, separators=(",", ":")).encode(), []) for v in values],
                                 leader_epoch=epoch)
        first, last = self.log.append_as_leader(batch, epoch)
        self.log.flush()
        return first, last

    def append_leader_change(self, epoch: int, leader: int, voters: list[int], granting: list[int]) -> int:
        key = struct.pack(">hh", 0, LEADER_CHANGE)
        first, _ = self.log.append_as_leader(control_batch(key, leader_change_value(leader, voters, granting), epoch), epoch)
        self.log.flush()
        return first

    def append_as_follower(self, data: bytes) -> int:
        last = self.log.append_as_follower(data)
        self.log.flush()
        return last

    def read(self, offset: int, max_bytes: int = 1 << 20, max_offset_exclusive: int | None = None) -> bytes:
        return self.log.read(offset, max_bytes, max_offset_exclusive)

    def committed(self, start: int, high_watermark: int) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """(offset, epoch, record) of every data record in [start, high_watermark): what the state
        machine may see. Control batches are skipped; a batch straddling ``start`` yields only
        its records from ``start`` on."""
        pos = start
        while pos < high_watermark:
            data = self.log.read(pos, 1 << 20, high_watermark)
            if not data:
                return
            for h in rec.iter_batches(data, 0, check_crc=False):
                if h.last_offset >= high_watermark:
                    return
                if not h.attributes & CONTROL_FLAG:
                    for r in rec.decode_records(data[h.position:h.position + h.length]):
                        if r.offset >= start and r.value is not None:
                            yield r.offset, h.partition_leader_epoch, json.loads(r.value)
                pos = h.last_offset + 1

    def close(self, clean: bool = True) -> None:
        if clean:
            self.manager.shutdown()
        else:
            self.manager.close_unclean()


Callback = Callable[[list[tuple[int, int, dict[str, Any]]]], None]
