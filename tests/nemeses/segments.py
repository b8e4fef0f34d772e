"""Kafka log directories built in tests with kio's record batch writer (magic v2, CRC32C)."""
from __future__ import annotations

import datetime
import io
from pathlib import Path

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_batch
from kio.static.primitive import i8, i16, i32, i64

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def batch_bytes(base: int, count: int, epoch: int = 0) -> bytes:
    recs = tuple(Record(attributes=i8(0), timestamp=T0, offset=i64(base + i), key=None,
                        value=f"v{base + i}".encode() * 8, headers=()) for i in range(count))
    buf = io.BytesIO()
    write_batch(buf, NewRecordBatch(producer_id=i64(-1), producer_epoch=i16(-1), partition_leader_epoch=i32(epoch),
                                    base_sequence=i32(-1), records=recs, attributes=i16(0)))
    return buf.getvalue()


def write_partition(log_dir: Path, topic: str, partition: int, segments: dict[int, list[tuple[int, int]]]) -> Path:
    """segments: base offset -> [(batch base, record count)]; index files are written too."""
    pdir = log_dir / f"{topic}-{partition}"
    pdir.mkdir(parents=True, exist_ok=True)
    for base, batches in segments.items():
        (pdir / f"{base:020d}.log").write_bytes(b"".join(batch_bytes(b, n) for b, n in batches))
        (pdir / f"{base:020d}.index").write_bytes(b"\0" * 64)
        (pdir / f"{base:020d}.timeindex").write_bytes(b"\0" * 64)
    return pdir


def write_checkpoint(log_dir: Path, name: str, entries: dict[tuple[str, int], int]) -> None:
    lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for (t, p), o in entries.items()]
    (log_dir / name).write_text("\n".join(lines) + "\n")


def complete_batches(pdir: Path) -> list[tuple[int, int]]:
    """(base offset, last offset) of every whole batch kio can read, over all segments."""
    out = []
    for seg in sorted(pdir.glob("*.log")):
        data, pos = seg.read_bytes(), 0
        while pos + 12 <= len(data):
            length = int.from_bytes(data[pos + 8:pos + 12], "big")
            if pos + 12 + length > len(data):
                break
            b, n = read_batch(data, pos)
            out.append((int(b.base_offset), int(b.base_offset) + int(b.last_offset_delta)))
            pos += n
    return out


def log_end_offset(pdir: Path) -> int:
    b = complete_batches(pdir)
    return b[-1][1] + 1 if b else 0
