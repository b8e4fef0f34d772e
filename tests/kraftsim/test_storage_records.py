"""Record batch v2 codec: exact Kafka byte layout, CRC32C, round trip.

No Kafka broker exists here, so the encoder is checked against the byte layout of Kafka's
DefaultRecordBatch as documented (https://kafka.apache.org/documentation/#recordbatch), with the
expected bytes written out field by field and the CRC32C computed by a bit-by-bit
implementation of the Castagnoli polynomial in this file, independent of the crc32c package.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from kraftsim.storage import records
from kraftsim.storage.records import (
    CorruptRecordError,
    UnsupportedCompression,
    decode_records,
    encode_batch,
    iter_batches,
    rewrite_batch,
    validate_batch,
)


def crc32c_bitwise(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_reference_crc_matches_the_standard_check_value():
    # The CRC catalogue's check value for CRC-32C over "123456789".
    assert crc32c_bitwise(b"123456789") == 0xE3069283


def test_encoder_matches_kafka_default_record_batch_layout():
    batch = encode_batch(
        [(b"k", b"v", [("h", b"x")]), (None, b"value2", [])],
        base_offset=5, leader_epoch=3, timestamp_ms=1_700_000_000_000,
        producer_id=1000, producer_epoch=2, base_sequence=7,
    )
    # Record 0: attributes 0, timestampDelta 0, offsetDelta 0, keyLength 1 (zigzag 2) "k",
    # valueLength 1 "v", 1 header: keyLength 1 "h", valueLength 1 "x". 12 bytes → length 0x18.
    rec0 = bytes.fromhex("18" "00" "00" "00" "02 6b" "02 76" "02" "02 68" "02 78")
    # Record 1: offsetDelta 1 (zigzag 2), null key (-1 → 1), valueLength 6 (0x0c) "value2", 0 headers.
    rec1 = bytes.fromhex("18" "00" "00" "02" "01" "0c") + b"value2" + bytes.fromhex("00")
    body = rec0 + rec1
    after_crc = (
        bytes.fromhex("0000")  # attributes: no compression, CreateTime
        + bytes.fromhex("00000001")  # lastOffsetDelta
        + (1_700_000_000_000).to_bytes(8, "big")  # baseTimestamp
        + (1_700_000_000_000).to_bytes(8, "big")  # maxTimestamp
        + (1000).to_bytes(8, "big")  # producerId
        + bytes.fromhex("0002")  # producerEpoch
        + bytes.fromhex("00000007")  # baseSequence
        + bytes.fromhex("00000002")  # recordCount
        + body
    )
    expected = (
        (5).to_bytes(8, "big")  # baseOffset
        + (4 + 1 + 4 + len(after_crc)).to_bytes(4, "big")  # batchLength: from partitionLeaderEpoch on
        + (3).to_bytes(4, "big")  # partitionLeaderEpoch
        + bytes([2])  # magic
        + crc32c_bitwise(after_crc).to_bytes(4, "big")  # crc over attributes..end
        + after_crc
    )
    assert batch == expected
    assert len(batch) == 61 + len(body)
    assert validate_batch(batch) is None


def test_crc_covers_attributes_to_end_but_not_offset_or_epoch():
    batch = encode_batch([(b"key", b"value", [])], timestamp_ms=1)
    assert validate_batch(batch) is None
    flipped_value = bytearray(batch)
    flipped_value[-3] ^= 0x01
    assert "CRC mismatch" in validate_batch(bytes(flipped_value))
    assert next(iter_batches(bytes(flipped_value))).crc_valid is False
    flipped_attrs = bytearray(batch)
    flipped_attrs[22] ^= 0x08  # timestamp type bit: inside the CRC
    assert "CRC mismatch" in validate_batch(bytes(flipped_attrs))
    # baseOffset and partitionLeaderEpoch are outside the CRC (a leader rewrites them).
    moved = bytearray(batch)
    struct.pack_into(">q", moved, 0, 123)
    struct.pack_into(">i", moved, 12, 9)
    assert validate_batch(bytes(moved)) is None
    bad_magic = bytearray(batch)
    bad_magic[16] = 1
    assert "bad magic" in validate_batch(bytes(bad_magic))
    assert "truncated" in validate_batch(batch[:-1])
    assert "truncated" in validate_batch(batch[:10])
    zeros = bytes(len(batch))
    assert "bad length" in validate_batch(zeros)


def test_rewrite_batch_stamps_offset_and_epoch_and_recomputes_crc():
    batch = encode_batch([(None, b"a", []), (None, b"b", []), (None, b"c", [])], timestamp_ms=10)
    out = rewrite_batch(batch, 1000, 17)
    h = next(iter_batches(out))
    assert (h.base_offset, h.last_offset, h.partition_leader_epoch, h.crc_valid) == (1000, 1002, 17, True)
    assert struct.unpack_from(">I", out, 17)[0] == crc32c_bitwise(out[21:])
    assert [r.offset for r in decode_records(out)] == [1000, 1001, 1002]
    assert out[21:] == batch[21:]


def test_iter_batches_reports_headers_and_stops_at_an_incomplete_batch():
    b1 = encode_batch([(None, b"x", [])], base_offset=0, leader_epoch=1, producer_id=7, producer_epoch=1, base_sequence=0)
    b2 = encode_batch([(None, b"y", []), (None, b"z", [])], base_offset=1, leader_epoch=2)
    b3 = encode_batch([(None, b"w" * 100, [])], base_offset=3, leader_epoch=2)
    buf = b1 + b2 + b3[: len(b3) // 2]
    hs = list(iter_batches(buf))
    assert [(h.position, h.base_offset, h.last_offset, h.length) for h in hs] == [
        (0, 0, 0, len(b1)), (len(b1), 1, 2, len(b2))]
    assert (hs[0].producer_id, hs[0].producer_epoch, hs[0].base_sequence, hs[0].record_count) == (7, 1, 0, 1)
    assert [h.partition_leader_epoch for h in hs] == [1, 2]
    assert list(iter_batches(buf, start_pos=len(b1)))[0].base_offset == 1
    assert list(iter_batches(b1 + b2[:11])) == list(iter_batches(b1))  # fewer than 12 bytes left


def test_compressed_batches_are_refused_with_a_named_codec():
    buf = bytearray(encode_batch([(None, b"x", [])], timestamp_ms=0))
    struct.pack_into(">h", buf, 21, 4)  # zstd
    struct.pack_into(">I", buf, 17, crc32c_bitwise(bytes(buf[21:])))
    assert validate_batch(bytes(buf)) is None  # still a valid batch: the broker may store it
    with pytest.raises(UnsupportedCompression, match="zstd"):
        decode_records(bytes(buf))


def test_decode_refuses_a_corrupt_batch():
    buf = bytearray(encode_batch([(None, b"x", [])]))
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        decode_records(bytes(buf))


_bytes = st.one_of(st.none(), st.binary(max_size=300))
_headers = st.lists(st.tuples(st.text(max_size=20), st.one_of(st.none(), st.binary(max_size=40))), max_size=4)


@settings(max_examples=80, deadline=None)
@given(
    recs=st.lists(st.tuples(_bytes, _bytes, _headers), min_size=1, max_size=30),
    base=st.integers(0, 2**62),
    epoch=st.integers(-1, 2**31 - 1),
    ts=st.integers(0, 2**50),
    pid=st.integers(-1, 2**62),
    pepoch=st.integers(-1, 2**15 - 1),
    seq=st.integers(-1, 2**31 - 1),
)
def test_encode_decode_round_trip(recs, base, epoch, ts, pid, pepoch, seq):
    batch = encode_batch(recs, base_offset=base, leader_epoch=epoch, timestamp_ms=ts,
                         producer_id=pid, producer_epoch=pepoch, base_sequence=seq)
    assert struct.unpack_from(">I", batch, 17)[0] == records.crc32c(batch[21:])
    (h,) = list(iter_batches(batch))
    assert (h.base_offset, h.last_offset, h.partition_leader_epoch, h.producer_id, h.producer_epoch,
            h.base_sequence, h.record_count, h.length, h.crc_valid) == (
        base, base + len(recs) - 1, epoch, pid, pepoch, seq, len(recs), len(batch), True)
    out = decode_records(batch)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in out] == [
        (base + i, ts, k, v, [(hk, hv) for hk, hv in hs]) for i, (k, v, hs) in enumerate(recs)]


# kio ships an independent record-batch writer/reader (not on kraftsim's hot path, which patches
# headers in place); byte equality with it is a second, independent check of the layout.
@settings(max_examples=40, deadline=None)
@given(
    recs=st.lists(st.tuples(_bytes, _bytes, st.lists(st.tuples(st.binary(max_size=10), st.one_of(st.none(), st.binary(max_size=10))), max_size=3)),
                  min_size=1, max_size=10),
    base=st.integers(0, 2**40), epoch=st.integers(0, 2**31 - 1), ts_s=st.integers(0, 2**32),
    pid=st.integers(-1, 2**40), pepoch=st.integers(-1, 300), seq=st.integers(-1, 2**31 - 1),
)
def test_encoder_is_byte_identical_to_kio_and_reads_what_kio_writes(recs, base, epoch, ts_s, pid, pepoch, seq):
    import datetime
    import io

    from kio.records.readers import read_batch
    from kio.records.schema import NewRecordBatch, Record as KioRecord, RecordHeader
    from kio.records.writers import write_batch
    from kio.static.primitive import i8, i16, i32, i64

    ts = datetime.datetime.fromtimestamp(ts_s, tz=datetime.timezone.utc)
    kio_recs = tuple(
        KioRecord(attributes=i8(0), timestamp=ts, offset=i64(base + i), key=k, value=v,
                  headers=tuple(RecordHeader(key=hk, value=hv) for hk, hv in hs))
        for i, (k, v, hs) in enumerate(recs))
    out = io.BytesIO()
    write_batch(out, NewRecordBatch(producer_id=i64(pid), producer_epoch=i16(pepoch), partition_leader_epoch=i32(epoch),
                                    base_sequence=i32(seq), records=kio_recs, attributes=i16(0)))
    theirs = out.getvalue()
    ours = encode_batch(recs, base_offset=base, leader_epoch=epoch, timestamp_ms=ts_s * 1000,
                        producer_id=pid, producer_epoch=pepoch, base_sequence=seq)
    assert ours == theirs
    parsed, size = read_batch(ours, 0)
    assert size == len(ours) and int(parsed.crc) == struct.unpack_from(">I", ours, 17)[0]
    assert [(r.key, r.value) for r in decode_records(theirs)] == [(k, v) for k, v, _h in recs]
