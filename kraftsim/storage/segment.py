"""One log segment: ``<20-digit base offset>.log`` of raw v2 batches plus an in-memory index.

Why an in-memory dense index: reads and appends must be per-batch with no per-record Python work
(≥20k acked writes/s). The index holds, per batch, its last offset and file position, which is
what Kafka's sparse ``.index`` holds (relative offset int32, position int32). It is written to
``<base>.index`` in that format when the segment becomes immutable (roll, clean close) and
deleted while the segment is active, so a stale index can never outlive an unclean shutdown.
A clean open loads it instead of scanning; if it is missing or does not match the ``.log`` the
index is rebuilt from batch headers (no CRC work), as Kafka rebuilds a corrupt index.

Writes use ``os.pwrite`` on an unbuffered descriptor: bytes reach the OS page cache at once, so
a SIGKILL of the process loses nothing, while a page-cache loss (power failure, simulated by
cutting the file) loses everything since the last fsync — exactly Kafka's exposure.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from . import records

INDEX_ENTRY = struct.Struct(">ii")


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class Segment:
    def __init__(self, directory: Path, base_offset: int, *, create: bool = False) -> None:
        self.base_offset = base_offset
        self.log_path = Path(directory) / f"{segment_name(base_offset)}.log"
        self.index_path = Path(directory) / f"{segment_name(base_offset)}.index"
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        self.fd = os.open(self.log_path, flags, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.last_offsets = array("q")  # per batch: last offset
        self.positions = array("q")  # per batch: file position of its first byte
        self.dirty = create  # bytes written since the last fsync

    # --- index -------------------------------------------------------------------------------

    @property
    def next_offset(self) -> int:
        """Offset after this segment's last batch (its base offset when empty)."""
        return self.last_offsets[-1] + 1 if self.last_offsets else self.base_offset

    def load_index(self) -> bool:
        """Load ``.index`` if it is consistent with the ``.log``; False means rebuild needed."""
        try:
            data = self.index_path.read_bytes()
        except FileNotFoundError:
            return self.size == 0
        if len(data) % INDEX_ENTRY.size:
            return False
        rel = array("i")
        pos = array("i")
        for r, p in INDEX_ENTRY.iter_unpack(data):
            rel.append(r)
            pos.append(p)
        if not rel:
            return self.size == 0
        # A dense index (ours) starts at position 0 and strictly increases in both columns; a
        # preallocated or sparse (Kafka-written) one does not pass, and is rebuilt instead.
        if pos[0] != 0 or any(a >= b for a, b in zip(rel, rel[1:])) or any(a >= b for a, b in zip(pos, pos[1:])):
            return False
        # Sanity check like Kafka's index sanityCheck: the last indexed batch must end the file.
        head = os.pread(self.fd, records.HEADER_SIZE, pos[-1])
        if len(head) < records.HEADER_SIZE:
            return False
        base, blen = records.BATCH_PREFIX.unpack_from(head, 0)
        lod = struct.unpack_from(">i", head, 23)[0]
        if pos[-1] + blen + records.LOG_OVERHEAD != self.size or base + lod != self.base_offset + rel[-1]:
            return False
        self.last_offsets = array("q", (self.base_offset + r for r in rel))
        self.positions = array("q", pos)
        return True

    def rebuild_index_from_headers(self) -> int:
        """Rebuild the index by walking batch headers (no CRC); an incomplete tail is cut.
        Returns the bytes cut (0 for a sound segment)."""
        buf = self.read_all()
        self.last_offsets = array("q")
        self.positions = array("q")
        end = 0
        for h in records.iter_batches(buf, 0, check_crc=False):
            self.last_offsets.append(h.last_offset)
            self.positions.append(h.position)
            end = h.position + h.length
        return self.truncate_bytes(end) if end != self.size else 0

    def write_index(self) -> None:
        out = bytearray()
        for last, pos in zip(self.last_offsets, self.positions):
            out += INDEX_ENTRY.pack(last - self.base_offset, pos)
        tmp = self.index_path.with_name(self.index_path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(out)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.index_path)

    def delete_index(self) -> None:
        try:
            self.index_path.unlink()
        except FileNotFoundError:
            pass

    # --- data --------------------------------------------------------------------------------

    def append(self, data: bytes, last_offsets: list[int], positions: list[int]) -> None:
        """Write already-validated batches; ``positions`` are relative to ``data``."""
        start = self.size
        n = os.pwrite(self.fd, data, start)
        if n != len(data):  # short write (disk full): undo so the file stays batch-aligned
            os.ftruncate(self.fd, start)
            raise OSError(f"{self.log_path}: short write ({n} of {len(data)} bytes)")
        self.size = start + n
        self.last_offsets.extend(last_offsets)
        self.positions.extend(p + start for p in positions)
        self.dirty = True

    def read_all(self) -> bytes:
        return os.pread(self.fd, self.size, 0) if self.size else b""

    def batch_index_for(self, offset: int) -> int:
        """Index of the first batch whose last offset ≥ ``offset`` (== len when none)."""
        return bisect_left(self.last_offsets, offset)

    def read(self, offset: int, max_bytes: int, max_offset_exclusive: int | None) -> bytes:
        """Whole batches from the one containing ``offset``; at least one batch if any qualifies."""
        lasts, poss = self.last_offsets, self.positions
        n = len(lasts)
        i = bisect_left(lasts, offset)
        if i >= n:
            return b""
        stop = n if max_offset_exclusive is None else bisect_left(lasts, max_offset_exclusive)
        if stop <= i:
            return b""
        start = poss[i]
        limit = start + max_bytes
        m = bisect_right(poss, limit)
        end_idx = m - 1 if (m < n or self.size > limit) else n
        end_idx = min(max(end_idx, i + 1), stop)
        end_pos = poss[end_idx] if end_idx < n else self.size
        return os.pread(self.fd, end_pos - start, start)

    def truncate_to_offset(self, offset: int) -> int:
        """Drop batches from the one containing ``offset``; return bytes removed."""
        i = self.batch_index_for(offset)
        if i >= len(self.last_offsets):
            return 0
        pos = self.positions[i]
        del self.last_offsets[i:], self.positions[i:]
        return self.truncate_bytes(pos)

    def truncate_bytes(self, size: int) -> int:
        removed = self.size - size
        if removed > 0:
            os.ftruncate(self.fd, size)
            self.size = size
            self.dirty = True
        return max(removed, 0)

    def flush(self) -> None:
        """LogSegment.flush → FileRecords.flush (``FileChannel.force``): unconditional, whatever
        this process wrote (a segment loaded after a crash may hold unsynced page-cache bytes)."""
        os.fsync(self.fd)
        self.dirty = False

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        for p in (self.log_path, self.index_path, self.log_path.with_suffix(".timeindex")):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
