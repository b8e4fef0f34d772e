"""PartitionLog on real files: appends, reads, rolls, flush and recovery point, Kafka-style
recovery after an unclean shutdown, leader-epoch cache, truncation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kraftsim.storage import records
from kraftsim.storage.checkpoints import read_leader_epoch_checkpoint
from kraftsim.storage.log import OffsetOutOfRange, PartitionLog, UnexpectedAppendOffset
from kraftsim.storage.records import CorruptRecordError, decode_records, encode_batch, iter_batches


class Events(list):
    def __call__(self, name: str, fields: dict) -> None:
        self.append((name, fields))

    def named(self, name: str) -> list[dict]:
        return [f for n, f in self if n == name]


def batch(i: int, n: int = 2, size: int = 20) -> bytes:
    return encode_batch([(b"k%d" % i, b"%d-" % i + b"v" * size, []) for _ in range(n)], timestamp_ms=1000 + i)


def open_log(d: Path, events: Events | None = None, *, rp: int = 0, clean: bool = True, **kw) -> PartitionLog:
    return PartitionLog.open(d, "t", 0, recovery_point=rp, clean=clean, on_event=events, **kw)


def seg_path(d: Path, base: int) -> Path:
    return d / f"{base:020d}.log"


def fill(log: PartitionLog, count: int, epoch_of=lambda i: 0, start: int = 0) -> list[tuple[int, int]]:
    return [log.append_as_leader(batch(i), epoch_of(i)) for i in range(start, start + count)]


def test_append_and_read_across_segment_rolls(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d, segment_bytes=1000)
    offsets = fill(log, 60, epoch_of=lambda i: i // 20)
    assert offsets[0] == (0, 1) and offsets[-1] == (118, 119)
    assert log.log_end_offset == 120
    bases = log.segment_base_offsets()
    assert len(bases) > 3 and bases[0] == 0
    assert sorted(p.name for p in d.glob("*.log")) == [f"{b:020d}.log" for b in bases]
    # Every offset reads back from the whole batch that contains it, even in old segments.
    for off in range(0, 120, 7):
        first = next(iter_batches(log.read(off, 1)))
        assert first.base_offset <= off <= first.last_offset and first.crc_valid
        assert first.partition_leader_epoch == (off // 2) // 20
    # max_bytes smaller than a batch still returns one whole batch; larger returns several.
    assert len(list(iter_batches(log.read(50, 1)))) == 1
    assert len(list(iter_batches(log.read(50, 400)))) > 1
    # max_offset_exclusive (the HWM) stops before the batch that reaches it.
    got = list(iter_batches(log.read(0, 10**6, max_offset_exclusive=7)))
    assert [h.last_offset for h in got] == [1, 3, 5]
    assert log.read(6, 10**6, max_offset_exclusive=7) == b""
    # Reading segment by segment reproduces the files exactly.
    whole = b""
    off = 0
    while off < log.log_end_offset:
        chunk = log.read(off, 10**6)
        whole += chunk
        off = list(iter_batches(chunk))[-1].last_offset + 1
    assert whole == b"".join(seg_path(d, b).read_bytes() for b in bases)
    assert [r.offset for r in decode_records(log.read(118, 10))] == [118, 119]
    assert log.read(120, 100) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(121, 100)
    log.close(clean=True)
    again = open_log(d, segment_bytes=1000)
    assert again.log_end_offset == 120 and again.segment_base_offsets() == bases
    assert again.read(33, 10) == log_bytes_at(d, bases, 33)
    assert again.append_as_leader(batch(99), 3) == (120, 121)
    again.close(clean=True)


def log_bytes_at(d: Path, bases: list[int], offset: int) -> bytes:
    for b in bases:
        buf = seg_path(d, b).read_bytes()
        for h in iter_batches(buf):
            if h.base_offset <= offset <= h.last_offset:
                return buf[h.position:h.position + h.length]
    raise AssertionError(offset)


def test_flush_moves_the_recovery_point_and_nothing_else_does(tmp_path, monkeypatch):
    # A spy on the real os.fsync, recording which segment files were synced. (The
    # leader-epoch-checkpoint is fsynced when a new epoch starts, as in Kafka; it is not log data.)
    fsyncs: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        name = os.readlink(f"/proc/self/fd/{fd}")
        if name.endswith(".log"):
            fsyncs.append(name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    d = tmp_path / "t-0"
    log = open_log(d)
    fsyncs.clear()
    fill(log, 10)
    assert log.recovery_point == 0 and log.log_end_offset == 20
    assert not fsyncs, "appends must go through the page cache without fsync"
    log.read(0, 10**6)
    log.truncate_to(12)
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 12 and fsyncs
    fill(log, 3)
    assert log.recovery_point == 12
    log.truncate_to(4)  # truncation below the recovery point pulls it down, never up
    assert log.recovery_point == 4
    log.close(clean=False)
    assert open_log(d, rp=4, clean=False).recovery_point == 4  # recovery does not advance it


def test_flush_interval_messages_flushes_every_n_messages(tmp_path):
    log = open_log(tmp_path / "t-0", flush_interval_messages=5)
    seen = []
    for i in range(6):
        log.append_as_leader(batch(i), 0)  # 2 messages per batch
        seen.append(log.recovery_point)
    assert seen == [0, 0, 6, 6, 6, 12]


def test_segment_roll_flushes_older_segments_like_kafka(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=500)
    fill(log, 12)
    bases = log.segment_base_offsets()
    assert len(bases) >= 2
    assert log.recovery_point == bases[-1]  # everything before the active segment is durable


def test_unclean_open_truncates_a_torn_last_batch(tmp_path):
    d = tmp_path / "t-0"
    ev = Events()
    log = open_log(d)
    fill(log, 10)
    log.close(clean=False)
    path = seg_path(d, 0)
    full = path.stat().st_size
    os.truncate(path, full - 7)  # the last batch was only partly written
    log = open_log(d, ev, clean=False)
    assert log.log_end_offset == 18
    assert path.stat().st_size == full - len(batch(9))
    (tr,) = ev.named("truncation")
    assert tr["from_offset"] == 20 and tr["to_offset"] == 18
    assert tr["reason"].startswith("recovery: 00000000000000000000.log position") and "truncated: batch at offset 18" in tr["reason"]
    (rec,) = ev.named("recovery")
    assert rec == {"topic": "t", "partition": 0, "recovery_point": 0, "log_end_offset": 18,
                   "truncated_bytes": len(batch(9)) - 7, "reason": rec["reason"]}
    assert log.append_as_leader(batch(50), 1) == (18, 19)


def test_unclean_open_truncates_at_a_crc_corrupt_batch_and_drops_later_segments(tmp_path):
    d = tmp_path / "t-0"
    ev = Events()
    log = open_log(d, segment_bytes=600)
    fill(log, 20, epoch_of=lambda i: i // 5)
    bases = log.segment_base_offsets()
    assert len(bases) >= 4
    log.close(clean=False)
    victim = bases[1]
    path = seg_path(d, victim)
    buf = bytearray(path.read_bytes())
    hs = list(iter_batches(bytes(buf)))
    bad = hs[1]
    buf[bad.position + bad.length - 3] ^= 0x20  # flip a bit inside a record value
    path.write_bytes(bytes(buf))
    log = open_log(d, ev, rp=0, clean=False, segment_bytes=600)
    assert log.log_end_offset == bad.base_offset
    assert log.segment_base_offsets() == bases[:2]
    for b in bases[2:]:
        assert not seg_path(d, b).exists()
    (tr,) = ev.named("truncation")
    assert "CRC mismatch" in tr["reason"] and tr["to_offset"] == bad.base_offset
    (rec,) = ev.named("recovery")
    assert rec["log_end_offset"] == bad.base_offset and rec["truncated_bytes"] > 0
    # The epoch cache was truncated to the new LEO, on disk too.
    assert all(start < bad.base_offset for _e, start in log.epoch_entries())
    assert read_leader_epoch_checkpoint(d / "leader-epoch-checkpoint") == log.epoch_entries()


def test_bytes_past_the_recovery_point_cut_off_recover_to_the_recovery_point(tmp_path):
    """What a page-cache loss leaves: the file ends where the last fsync left it."""
    d = tmp_path / "t-0"
    ev = Events()
    log = open_log(d)
    fill(log, 8, epoch_of=lambda i: 1)
    log.flush()
    rp = log.recovery_point
    durable = seg_path(d, 0).stat().st_size
    fill(log, 8, start=8, epoch_of=lambda i: 2)  # acknowledged, never flushed
    assert log.epoch_entries() == [(1, 0), (2, 16)]
    log.close(clean=False)
    os.truncate(seg_path(d, 0), durable)
    log = open_log(d, ev, rp=rp, clean=False)
    assert log.log_end_offset == rp == 16
    assert log.recovery_point == rp
    assert log.epoch_entries() == [(1, 0)]  # epoch 2 started at 16 = the new LEO: gone
    (rec,) = ev.named("recovery")
    assert rec["recovery_point"] == 16 and rec["log_end_offset"] == 16


def test_zero_filled_tail_after_power_loss_is_truncated(tmp_path):
    d = tmp_path / "t-0"
    ev = Events()
    log = open_log(d)
    fill(log, 4)
    log.close(clean=False)
    with open(seg_path(d, 0), "ab") as f:  # some filesystems expose unwritten blocks as zeros
        f.write(bytes(300))
    log = open_log(d, ev, clean=False)
    assert log.log_end_offset == 8
    assert "bad length: batchLength 0" in ev.named("truncation")[0]["reason"]
    assert seg_path(d, 0).stat().st_size == 4 * len(batch(0))


def test_recovery_scans_only_from_the_segment_holding_the_recovery_point(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d, segment_bytes=600)
    fill(log, 20)
    bases = log.segment_base_offsets()
    log.close(clean=True)
    # Corrupt a batch in the first segment: it is below the recovery point, so Kafka trusts it.
    path = seg_path(d, bases[0])
    buf = bytearray(path.read_bytes())
    buf[-3] ^= 0x01
    path.write_bytes(bytes(buf))
    ev = Events()
    log = open_log(d, ev, rp=bases[-1], clean=False, segment_bytes=600)
    assert log.log_end_offset == 40 and not ev.named("truncation")
    log.close(clean=False)
    log = open_log(d, ev, rp=0, clean=False, segment_bytes=600)  # from the start: found
    assert log.log_end_offset < bases[1] and ev.named("truncation")


def test_clean_open_does_not_scan(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    fill(log, 6)
    log.close(clean=True)
    path = seg_path(d, 0)
    buf = bytearray(path.read_bytes())
    buf[len(batch(0)) + 70] ^= 0xFF  # CRC-corrupt the second batch
    path.write_bytes(bytes(buf))
    ev = Events()
    log = open_log(d, ev, rp=12, clean=True)
    assert log.log_end_offset == 12 and log.recovery_point == 12 and ev == []
    assert (d / "00000000000000000000.index").exists() is False  # active segment: no stale index


def test_clean_open_with_missing_index_rebuilds_from_headers(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d, segment_bytes=600)
    fill(log, 20)
    bases = log.segment_base_offsets()
    log.close(clean=True)
    for p in d.glob("*.index"):
        p.unlink()
    log = open_log(d, rp=40, clean=True, segment_bytes=600)
    assert log.log_end_offset == 40 and log.segment_base_offsets() == bases
    assert next(iter_batches(log.read(25, 1))).base_offset == 24


def test_append_validation(tmp_path):
    log = open_log(tmp_path / "t-0")
    bad = bytearray(batch(1))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        log.append_as_leader(bytes(bad), 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(batch(1)[:-4], 0)
    assert log.log_end_offset == 0
    multi = batch(1) + batch(2, n=3)
    assert log.append_as_leader(multi, 4) == (0, 4)
    assert [(h.base_offset, h.partition_leader_epoch) for h in iter_batches(log.read(0, 10**6))] == [(0, 4), (2, 4)]
    follower_batch = records.rewrite_batch(batch(3), 2, 4)
    with pytest.raises(UnexpectedAppendOffset):
        log.append_as_follower(follower_batch)


def test_follower_append_keeps_leader_offsets_and_epochs(tmp_path):
    leader = open_log(tmp_path / "leader")
    fill(leader, 3, epoch_of=lambda i: 1)
    fill(leader, 3, start=3, epoch_of=lambda i: 4)
    follower = open_log(tmp_path / "follower")
    fetched = leader.read(0, 10**6)
    assert follower.append_as_follower(fetched) == 11
    assert follower.read(0, 10**6) == fetched
    assert follower.epoch_entries() == leader.epoch_entries() == [(1, 0), (4, 6)]
    assert follower.append_as_follower(b"") == 11


def test_end_offset_for_epoch_follows_offsets_for_leader_epoch(tmp_path):
    log = open_log(tmp_path / "t-0")
    assert log.end_offset_for_epoch(0) == (-1, -1)  # empty cache
    fill(log, 2, epoch_of=lambda i: 2)  # epoch 2 starts at 0
    fill(log, 2, start=2, epoch_of=lambda i: 5)  # epoch 5 starts at 4
    fill(log, 1, start=4, epoch_of=lambda i: 7)  # epoch 7 starts at 8, LEO 10
    assert log.epoch_entries() == [(2, 0), (5, 4), (7, 8)]
    assert log.latest_epoch == 7
    assert log.end_offset_for_epoch(7) == (7, 10)  # latest epoch: the LEO
    assert log.end_offset_for_epoch(5) == (5, 8)  # start of the next epoch
    assert log.end_offset_for_epoch(6) == (5, 8)  # unknown epoch: largest epoch below it
    assert log.end_offset_for_epoch(3) == (2, 4)
    assert log.end_offset_for_epoch(1) == (1, 0)  # below the earliest epoch
    assert log.end_offset_for_epoch(8) == (-1, -1)  # above every known epoch
    assert log.end_offset_for_epoch(-1) == (-1, -1)


def test_truncate_to_updates_the_epoch_cache_and_emits_truncation(tmp_path):
    d = tmp_path / "t-0"
    ev = Events()
    log = open_log(d, ev, segment_bytes=600)
    fill(log, 10, epoch_of=lambda i: 1)
    fill(log, 10, start=10, epoch_of=lambda i: 3)
    assert log.epoch_entries() == [(1, 0), (3, 20)]
    log.truncate_to(21)  # inside the batch [20, 21]: the whole batch goes
    assert log.log_end_offset == 20
    assert log.epoch_entries() == [(1, 0)]
    assert read_leader_epoch_checkpoint(d / "leader-epoch-checkpoint") == [(1, 0)]
    assert ev.named("truncation") == [{"topic": "t", "partition": 0, "from_offset": 40, "to_offset": 20,
                                       "reason": "truncate_to"}]
    assert all(b < 20 for b in log.segment_base_offsets())
    # The divergent suffix is replaced by the new leader's epoch.
    assert log.append_as_leader(batch(77), 4) == (20, 21)
    assert log.epoch_entries() == [(1, 0), (4, 20)]
    log.truncate_to(100)  # beyond the LEO: nothing happens
    assert log.log_end_offset == 22 and len(ev.named("truncation")) == 1
    log.close(clean=True)
    again = open_log(d, rp=22, clean=True, segment_bytes=600)
    assert again.log_end_offset == 22 and again.epoch_entries() == [(1, 0), (4, 20)]


def test_truncate_fully_and_start_at(tmp_path):
    d = tmp_path / "t-0"
    ev = Events()
    log = open_log(d, ev, segment_bytes=600)
    fill(log, 20, epoch_of=lambda i: 2)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (500, 500, 500)
    assert log.epoch_entries() == []
    assert [p.name for p in d.glob("*.log")] == [f"{500:020d}.log"]
    assert ev.named("truncation")[-1]["to_offset"] == 500
    with pytest.raises(OffsetOutOfRange):
        log.read(10, 100)
    assert log.append_as_leader(batch(1), 3) == (500, 501)
    log.close(clean=True)
    again = open_log(d, rp=502, clean=True, log_start_offset=500)
    assert (again.log_start_offset, again.log_end_offset) == (500, 502)


def test_dump_tool_shows_where_valid_data_ends(tmp_path):
    import json
    import subprocess
    import sys

    d = tmp_path / "t-0"
    log = open_log(d)
    fill(log, 3)
    log.close(clean=False)
    path = seg_path(d, 0)
    os.truncate(path, path.stat().st_size - 5)
    out = subprocess.run([sys.executable, "-m", "kraftsim.storage.dump", str(path), "--records"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["base_offset"] for r in rows if "base_offset" in r] == [0, 2]
    assert [r["offset"] for r in rows if "offset" in r] == [0, 1, 2, 3]
    assert rows[-1]["valid_bytes"] == 2 * len(batch(0)) and "truncated" in rows[-1]["stops_because"]
    missing = subprocess.run([sys.executable, "-m", "kraftsim.storage.dump", str(tmp_path / "nope.log")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "cannot read" in missing.stderr


def test_recovery_keeps_epoch_entries_below_the_recovery_point(tmp_path):
    """Kafka's LogSegment.recover only adds epochs newer than the cache's latest; entries for
    trusted data below the recovery point survive, those past the new LEO go."""
    d = tmp_path / "t-0"
    log = open_log(d, segment_bytes=600)
    fill(log, 8, epoch_of=lambda i: 1)
    fill(log, 8, start=8, epoch_of=lambda i: 2)
    log.flush()
    rp = log.recovery_point
    durable_bases = log.segment_base_offsets()
    durable_size = seg_path(d, durable_bases[-1]).stat().st_size
    fill(log, 8, start=16, epoch_of=lambda i: 3)
    assert log.epoch_entries() == [(1, 0), (2, 16), (3, 32)]
    log.close(clean=False)
    for b in log.segment_base_offsets():  # page-cache loss: back to the flushed state
        if b not in durable_bases:
            seg_path(d, b).unlink()
    os.truncate(seg_path(d, durable_bases[-1]), durable_size)
    ev = Events()
    log = open_log(d, ev, rp=rp, clean=False, segment_bytes=600)
    assert log.log_end_offset == rp == 32
    assert log.epoch_entries() == [(1, 0), (2, 16)]
    assert read_leader_epoch_checkpoint(d / "leader-epoch-checkpoint") == [(1, 0), (2, 16)]
    assert ev.named("recovery")[0]["truncated_bytes"] == 0


def test_broken_index_below_the_recovery_point_recovers_that_segment_only(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d, segment_bytes=600)
    fill(log, 20)
    bases = log.segment_base_offsets()
    log.close(clean=True)
    first = seg_path(d, bases[0])
    os.truncate(first, first.stat().st_size - 3)  # its .index no longer matches
    ev = Events()
    log = open_log(d, ev, rp=40, clean=False, segment_bytes=600)
    assert log.segment_base_offsets() == bases  # later segments kept, as Kafka does
    assert log.log_end_offset == 40
    (tr,) = ev.named("truncation")
    assert (tr["from_offset"], tr["to_offset"]) == (bases[1], bases[1] - 2) and "truncated" in tr["reason"]
    assert next(iter_batches(log.read(bases[1], 1))).base_offset == bases[1]


def test_preallocated_kafka_style_index_is_rebuilt_not_trusted(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    fill(log, 5)
    log.close(clean=True)
    (d / f"{0:020d}.index").write_bytes(bytes(64))  # Kafka preallocates zero-filled indexes
    log = open_log(d, rp=10, clean=True)
    assert log.log_end_offset == 10
    assert [h.base_offset for h in iter_batches(log.read(0, 10**6))] == [0, 2, 4, 6, 8]


def test_follower_append_skips_a_partial_trailing_batch_but_refuses_corruption(tmp_path):
    leader = open_log(tmp_path / "leader")
    fill(leader, 3)
    fetched = leader.read(0, 10**6)
    follower = open_log(tmp_path / "follower")
    assert follower.append_as_follower(fetched[:-10]) == 3  # the third batch was cut by max bytes
    assert follower.log_end_offset == 4
    assert follower.append_as_follower(fetched[len(fetched) - len(batch(2)):][:30]) == 3
    bad = bytearray(fetched[len(fetched) - len(batch(2)):])
    bad[-2] ^= 0x40
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        follower.append_as_follower(bytes(bad))
    assert follower.log_end_offset == 4
    assert follower.append_as_follower(fetched[len(fetched) - len(batch(2)):]) == 5
