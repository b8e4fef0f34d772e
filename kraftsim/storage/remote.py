"""The remote log tier (KIP-405): a directory standing in for object storage.

Why a directory: docs/seeds.md#seed-004's question is which replica a controller elects when one replica's
*local* log is short because the older data lives only in the remote tier (KIP-1023). kraftsim
needs just enough of KIP-405 for that: the leader copies closed segments to a store every broker
can read, replicas delete local segments already tiered beyond local retention, and reads below
a leader's local log start are served from the store, so a short-log leader loses nothing.
Kafka's own test plugin does the same (``storage/src/test/java/.../LocalTieredStorage.java``: a
RemoteStorageManager writing segments under a directory). ``remote.log.storage.dir`` is shared by
every broker on the machine (the embedded cluster puts it under its run directory); a wiped disk
does not wipe it, as a replaced disk does not wipe object storage.

Layout under the directory, per partition ``<topic>-<partition>/``:
- ``<base offset>-<segment id>.log``: a byte copy of a closed local segment (batches as written,
  so a copy read back is what the leader served) — Kafka's RemoteLogSegmentId is a UUID, so two
  leaders copying overlapping segments never collide;
- ``remote-log-segments.json``: the segments' metadata (Kafka keeps it in the
  ``__remote_log_metadata`` topic through the RemoteLogMetadataManager): base and end offset,
  size, largest timestamp and the segment's leader-epoch entries
  (``RemoteLogSegmentMetadata.segmentLeaderEpochs``). Written atomically (tmp + rename) under a
  file lock, after the segment itself is durable, so a reader never sees metadata of a
  half-copied segment (Kafka: COPY_SEGMENT_STARTED → COPY_SEGMENT_FINISHED).
"""
from __future__ import annotations

import fcntl
import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import records

METADATA_FILE = "remote-log-segments.json"


@dataclass
class RemoteSegment:
    """Kafka's RemoteLogSegmentMetadata (the fields kraftsim uses)."""
    base_offset: int
    end_offset: int                      # last offset in the segment (inclusive), as Kafka's endOffset
    size: int
    max_timestamp: int
    file: str
    #: the leader-epoch entries up to the segment's end (its LEADER_EPOCH index); the last one is
    #: the segment's latest epoch (segmentLeaderEpochs)
    leader_epochs: list[list[int]] = field(default_factory=list)
    broker: int = -1


class RemoteLogStorage:
    """The remote tier of every partition, rooted at ``remote.log.storage.dir``."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def _pdir(self, topic: str, partition: int) -> Path:
        return self.root / f"{topic}-{partition}"

    # ------------------------------------------------------------------ metadata

    def segments(self, topic: str, partition: int) -> list[RemoteSegment]:
        """Every finished copy, sorted by base offset (RemoteLogMetadataManager.listRemoteLogSegments)."""
        path = self._pdir(topic, partition) / METADATA_FILE
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            return []
        except ValueError:
            return []  # written by rename, so only a hand-edited file can be torn: treat as empty
        segs = [RemoteSegment(**d) for d in doc.get("segments", [])]
        return sorted(segs, key=lambda s: (s.base_offset, s.end_offset))

    def highest_offset(self, topic: str, partition: int, epochs: list[tuple[int, int]] | None = None,
                       log_end_offset: int | None = None) -> int:
        """The highest offset copied to the remote tier, -1 when none.

        RemoteLogManager.findHighestRemoteOffset walks the leader's epoch cache and takes, for the
        latest epoch the tier knows, the highest copied offset of that epoch below the epoch's end
        (so data of a diverged history does not count). Given the replica's epoch entries,
        kraftsim counts a remote segment only if its last epoch entry appears in them with the
        same start offset and the segment ends below that epoch's end; without entries, every
        segment counts.
        """
        best = -1
        starts = dict((e, s) for e, s in epochs) if epochs else None
        ordered = sorted(starts) if starts else []
        for seg in self.segments(topic, partition):
            if starts is not None:
                if not seg.leader_epochs:
                    continue
                e, s = seg.leader_epochs[-1]
                if starts.get(e) != s:
                    continue
                later = [x for x in ordered if x > e]
                end = starts[later[0]] if later else (log_end_offset if log_end_offset is not None else 1 << 62)
                if seg.end_offset >= end:
                    continue
            best = max(best, seg.end_offset)
        return best

    def log_start_offset(self, topic: str, partition: int) -> int | None:
        """Lowest offset the tier holds (None when empty): the partition's log start offset when it
        is below the local one (UnifiedLog.logStartOffset covers local and remote data)."""
        segs = self.segments(topic, partition)
        return segs[0].base_offset if segs else None

    def segment_for(self, topic: str, partition: int, offset: int) -> RemoteSegment | None:
        """RemoteLogManager.fetchRemoteLogSegmentMetadata: the copy holding ``offset`` (the one
        reaching furthest when copies overlap; their bytes for committed offsets are the same)."""
        hit = None
        for seg in self.segments(topic, partition):
            if seg.base_offset <= offset <= seg.end_offset and (hit is None or seg.end_offset > hit.end_offset):
                hit = seg
        return hit

    # ------------------------------------------------------------------ copy

    def copy_segment(self, topic: str, partition: int, data: bytes, leader_epochs: list[tuple[int, int]],
                     broker: int) -> RemoteSegment:
        """RemoteLogManager.copyLogSegment: write the segment durably, then publish its metadata."""
        pdir = self._pdir(topic, partition)
        pdir.mkdir(parents=True, exist_ok=True)
        headers = list(records.iter_batches(data, 0, check_crc=False))
        if not headers:
            raise ValueError(f"{topic}-{partition}: an empty segment is never copied")
        base, end = headers[0].base_offset, headers[-1].last_offset
        name = f"{base:020d}-{uuid.uuid4().hex[:12]}.log"
        tmp = pdir / (name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, pdir / name)
        # the leader-epoch checkpoint up to the segment's end, as Kafka stores it with each segment
        # (RemoteStorageManager.IndexType.LEADER_EPOCH): a follower starting past it restores these
        epochs = [[e, s] for e, s in leader_epochs if s <= end]
        seg = RemoteSegment(base_offset=base, end_offset=end, size=len(data),
                            max_timestamp=max(h.max_timestamp for h in headers), file=name,
                            leader_epochs=epochs, broker=broker)
        self._publish(pdir, seg)
        return seg

    def _publish(self, pdir: Path, seg: RemoteSegment) -> None:
        with open(pdir / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            path = pdir / METADATA_FILE
            try:
                doc = json.loads(path.read_text())
            except (FileNotFoundError, ValueError):
                doc = {"segments": []}
            doc["segments"].append(asdict(seg))
            tmp = pdir / (METADATA_FILE + ".tmp")
            tmp.write_text(json.dumps(doc, indent=1))
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)

    # ------------------------------------------------------------------ read

    def read(self, topic: str, partition: int, offset: int, max_bytes: int,
             max_offset_exclusive: int | None = None) -> bytes:
        """Whole batches from the one holding ``offset`` within one remote segment (Kafka's
        RemoteLogManager.read: at least one batch, never past the segment), excluding batches
        that reach ``max_offset_exclusive``; b'' when the tier does not hold ``offset``."""
        seg = self.segment_for(topic, partition, offset)
        if seg is None:
            return b""
        data = (self._pdir(topic, partition) / seg.file).read_bytes()
        start = end = -1
        for h in records.iter_batches(data, 0, check_crc=False):
            if h.last_offset < offset:
                continue
            if max_offset_exclusive is not None and h.last_offset >= max_offset_exclusive:
                break
            if start < 0:
                start = h.position
            elif h.position + h.length - start > max_bytes:
                break
            end = h.position + h.length
        return data[start:end] if start >= 0 else b""
