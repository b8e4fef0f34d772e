"""Kafka record batch v2 (magic 2) codec, byte-for-byte Kafka's ``DefaultRecordBatch`` layout.

Why exact bytes: a fault tool that cuts or corrupts real Kafka segments must do the same to
kraftsim, and real clients (librdkafka) send and receive these batches unchanged. The broker
hot path never touches individual records: ``iter_batches`` reads fixed-offset header fields
and ``rewrite_batch`` patches baseOffset / partitionLeaderEpoch and recomputes one CRC32C over
the batch (docs/seeds.md#seed-003-2-2-2: "each record (batch) has an associated offset and the leader epoch
at the time it was written to the leader's log").

Layout (big-endian, offsets in bytes)::

    0  baseOffset int64          8  batchLength int32 (bytes after this field)
    12 partitionLeaderEpoch int32  16 magic int8     17 crc uint32 (CRC32C of bytes 21..end)
    21 attributes int16          23 lastOffsetDelta int32   27 baseTimestamp int64
    35 maxTimestamp int64        43 producerId int64        51 producerEpoch int16
    53 baseSequence int32        57 recordCount int32       61 records...

Each record: length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
keyLength varint (-1 = null), key, valueLength varint, value, headerCount varint, headers
(keyLength varint, key, valueLength varint, value). Varints are zigzag-encoded.
"""

from __future__ import annotations

import struct
import time
from typing import Iterator, NamedTuple, Sequence

from crc32c import crc32c

LOG_OVERHEAD = 12  # baseOffset + batchLength: the prefix not counted in batchLength
HEADER_SIZE = 61  # Kafka's RECORD_BATCH_OVERHEAD
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # smallest legal batchLength field (49)
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers everything from here to the end of the batch
HEADER_UP_TO_MAGIC = 17  # Kafka's HEADER_SIZE_UP_TO_MAGIC: needed to tell a batch's size/magic
COMPRESSION_CODEC_MASK = 0x07
CURRENT_MAGIC = 2

BATCH_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
EPOCH_OFFSET = 12
_CRC = struct.Struct(">I")

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


class UnsupportedCompression(ValueError):
    """A batch uses a compression codec other than none; kraftsim stores such batches untouched
    but cannot decode their records."""


class CorruptRecordError(ValueError):
    """A batch failed validation (bad magic, CRC mismatch, truncated, bad length)."""


class BatchHeader(NamedTuple):
    """The fixed header of one batch, as found at ``position`` in a buffer or segment."""

    position: int
    base_offset: int
    last_offset: int
    length: int  # total bytes including the 12-byte prefix
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    attributes: int
    crc_valid: bool
    magic: int = CURRENT_MAGIC
    max_timestamp: int = -1


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def batch_length_at(buf: bytes | bytearray | memoryview, pos: int) -> int | None:
    """Total size of the batch at ``pos`` from its 12-byte prefix, or None if the prefix is cut."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    return BATCH_PREFIX.unpack_from(buf, pos)[1] + LOG_OVERHEAD


def iter_batches(
    buf: bytes | bytearray | memoryview, start_pos: int = 0, *, check_crc: bool = True
) -> Iterator[BatchHeader]:
    """Yield the header of every complete batch from ``start_pos``; stop at an incomplete one.

    Like Kafka's ``FileLogInputStream.nextBatch``: fewer than 17 bytes left, or a batch whose
    declared length runs past the buffer, ends iteration (a torn write). A declared length below
    the v2 minimum also ends iteration, because nothing after it can be located. ``crc_valid`` is
    False when the magic is not 2 or the CRC32C does not match (``check_crc=False`` skips the CRC
    computation and reports True, for trusted bytes on a clean read path).
    """
    end = len(buf)
    pos = start_pos
    unpack = _HEADER.unpack_from
    mv = memoryview(buf) if check_crc else None
    while end - pos >= HEADER_SIZE:
        (base, blen, ple, magic, crc, attrs, lod, _bts, max_ts, pid, pepoch, bseq, count) = unpack(buf, pos)
        if blen < MIN_BATCH_LENGTH:
            return
        total = blen + LOG_OVERHEAD
        if pos + total > end:
            return
        valid = magic == CURRENT_MAGIC
        if valid and check_crc:
            valid = crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + total]) == crc  # type: ignore[index]
        yield BatchHeader(pos, base, base + lod, total, ple, pid, pepoch, bseq, count, attrs, valid, magic, max_ts)
        pos += total


def validate_batch(batch: bytes | bytearray | memoryview) -> str | None:
    """None if ``batch`` is one well-formed v2 batch (trailing bytes ignored), else why not."""
    n = len(batch)
    if n < HEADER_UP_TO_MAGIC:
        return f"truncated: {n} bytes, a batch header needs at least {HEADER_UP_TO_MAGIC}"
    base, blen = BATCH_PREFIX.unpack_from(batch, 0)
    if blen < MIN_BATCH_LENGTH:
        return f"bad length: batchLength {blen} is below the minimum {MIN_BATCH_LENGTH}"
    magic = batch[MAGIC_OFFSET]
    if magic != CURRENT_MAGIC:
        return f"bad magic: {magic}, want {CURRENT_MAGIC}"
    total = blen + LOG_OVERHEAD
    if n < total:
        return f"truncated: batch at offset {base} declares {total} bytes, only {n} present"
    (_b, _l, _e, _m, crc, _a, lod, *_rest) = _HEADER.unpack_from(batch, 0)
    if lod < 0:
        return f"bad lastOffsetDelta {lod}"
    actual = crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:total])
    if actual != crc:
        return f"CRC mismatch: stored {crc:#010x}, computed {actual:#010x}"
    return None


def stamp(buf: bytearray, pos: int, base_offset: int, partition_leader_epoch: int) -> None:
    """Patch baseOffset and partitionLeaderEpoch of the batch at ``pos`` in place (CRC unchanged:
    neither field is covered by it)."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)
    _EPOCH.pack_into(buf, pos + EPOCH_OFFSET, partition_leader_epoch)


def rewrite_batch(batch: bytes | bytearray, base_offset: int, partition_leader_epoch: int) -> bytes:
    """Stamp baseOffset and partitionLeaderEpoch into one batch, as a leader does on append.

    Neither field is covered by the CRC (it starts at attributes), but Kafka recomputes the CRC
    whenever it rewrites a batch, so we do the same: one crc32c call over the batch, no
    per-record work.
    """
    buf = bytearray(batch)
    stamp(buf, 0, base_offset, partition_leader_epoch)
    _CRC.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


# --- varints (zigzag), as in Kafka's ByteUtils ---------------------------------------------


def _zigzag_varint(value: int, out: bytearray) -> None:
    v = (value << 1) ^ (value >> 63)
    v &= 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    result = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError("truncated varint in record")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes in record")
    return (result >> 1) ^ -(result & 1), pos


def _put_bytes(data: bytes | None, out: bytearray) -> None:
    if data is None:
        _zigzag_varint(-1, out)
    else:
        _zigzag_varint(len(data), out)
        out += data


HeaderList = Sequence[tuple[str | bytes, bytes | None]]


def encode_batch(
    records: Sequence[tuple[bytes | None, bytes | None, HeaderList]],
    base_offset: int = 0,
    leader_epoch: int = 0,
    timestamp_ms: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """Encode an uncompressed v2 batch; all records share ``timestamp_ms`` (default: now)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    body = bytearray()
    rec = bytearray()
    for i, (key, value, headers) in enumerate(records):
        rec.clear()
        rec.append(0)  # record attributes (unused)
        _zigzag_varint(0, rec)  # timestampDelta
        _zigzag_varint(i, rec)  # offsetDelta
        _put_bytes(key, rec)
        _put_bytes(value, rec)
        _zigzag_varint(len(headers), rec)
        for hkey, hval in headers:
            _put_bytes(hkey.encode() if isinstance(hkey, str) else hkey, rec)
            _put_bytes(hval, rec)
        _zigzag_varint(len(rec), body)
        body += rec
    count = len(records)
    header = bytearray(HEADER_SIZE)
    _HEADER.pack_into(
        header, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body), leader_epoch, CURRENT_MAGIC, 0,
        0, count - 1, ts, ts, producer_id, producer_epoch, base_sequence, count,
    )
    header += body
    _CRC.pack_into(header, CRC_OFFSET, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    return bytes(header)


def decode_records(batch: bytes | bytearray | memoryview) -> list[Record]:
    """Decode the records of one uncompressed v2 batch (codec 0), with absolute offsets."""
    reason = validate_batch(batch)
    if reason is not None:
        raise CorruptRecordError(reason)
    (base, blen, _e, _m, _c, attrs, _lod, base_ts, _mts, _p, _pe, _bs, count) = _HEADER.unpack_from(batch, 0)
    codec = attrs & COMPRESSION_CODEC_MASK
    if codec != 0:
        raise UnsupportedCompression(
            f"batch at offset {base} uses compression {COMPRESSION_NAMES.get(codec, codec)}; only none is supported"
        )
    buf = bytes(memoryview(batch)[: blen + LOG_OVERHEAD])
    pos = HEADER_SIZE
    out: list[Record] = []
    for _ in range(count):
        length, pos = _read_varint(buf, pos)
        end = pos + length
        if end > len(buf):
            raise CorruptRecordError(f"record at position {pos} runs past the batch end")
        pos += 1  # attributes
        ts_delta, pos = _read_varint(buf, pos)
        off_delta, pos = _read_varint(buf, pos)
        key, pos = _read_bytes(buf, pos)
        value, pos = _read_bytes(buf, pos)
        nh, pos = _read_varint(buf, pos)
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(nh):
            hk, pos = _read_bytes(buf, pos)
            hv, pos = _read_bytes(buf, pos)
            headers.append(((hk or b"").decode("utf-8", "replace"), hv))
        if pos != end:
            raise CorruptRecordError(f"record length {length} does not match its contents")
        out.append(Record(base + off_delta, base_ts + ts_delta, key, value, headers))
    return out


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _read_varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise CorruptRecordError("record field runs past the batch end")
    return buf[pos : pos + n], pos + n
