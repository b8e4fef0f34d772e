"""Kafka's checkpoint, meta.properties and clean-shutdown file formats, byte for byte, and the
LogManager that uses them (identity checks, clean-shutdown detection, recovery on crash)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kraftsim.storage import LogManager, StorageConfigError
from kraftsim.storage.checkpoints import (
    UNSYNCED_SUFFIX,
    CheckpointError,
    read_clean_shutdown,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    write_clean_shutdown,
    write_leader_epoch_checkpoint,
    write_offset_checkpoint,
)
from kraftsim.storage.records import encode_batch

# A recovery-point-offset-checkpoint as Kafka writes it (CheckpointFile, version 0).
KAFKA_OFFSET_CHECKPOINT = b"0\n3\n__consumer_offsets 7 0\norders 0 1523\norders 1 88\n"
KAFKA_EPOCH_CHECKPOINT = b"0\n2\n0 0\n3 1200\n"
KAFKA_META_PROPERTIES = (
    b"#\n#Tue Mar 05 10:12:31 UTC 2024\nnode.id=2\ndirectory.id=Jm8VrT0BR0uN7rWq6y0q2g\n"
    b"version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
)


def test_offset_checkpoint_bytes_match_kafka(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    offsets = {("orders", 1): 88, ("__consumer_offsets", 7): 0, ("orders", 0): 1523}
    write_offset_checkpoint(path, offsets)
    assert path.read_bytes() == KAFKA_OFFSET_CHECKPOINT
    assert read_offset_checkpoint(path) == offsets
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    write_offset_checkpoint(path, {})
    assert path.read_bytes() == b"0\n0\n"
    assert read_offset_checkpoint(tmp_path / "missing") == {}


def test_leader_epoch_checkpoint_bytes_match_kafka(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    write_leader_epoch_checkpoint(path, [(0, 0), (3, 1200)])
    assert path.read_bytes() == KAFKA_EPOCH_CHECKPOINT
    assert read_leader_epoch_checkpoint(path) == [(0, 0), (3, 1200)]


@pytest.mark.parametrize("text, want", [
    (b"1\n0\n", "line 1: version '1', want 0"),
    (b"0\n2\nt 0 5\n", "line 2 says 2 entries, file has 1"),
    (b"0\n1\nt 0\n", "line 3: 't 0', want 3 space-separated fields"),
    (b"0\n1\nt x 5\n", "line 3: partition 'x' is not an integer"),
    (b"0\nmany\n", "line 2: count 'many' is not an integer"),
    (b"\0\0\0\0\0\0", "line 1: malformed line"),
])
def test_malformed_checkpoint_is_one_clear_line(tmp_path, text, want):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_bytes(text)
    with pytest.raises(CheckpointError) as e:
        read_offset_checkpoint(path)
    msg = str(e.value)
    assert want in msg and str(path) in msg and "\n" not in msg


@pytest.mark.parametrize("text", [b"", b"0\n"])
def test_checkpoint_without_a_count_line_reads_empty(tmp_path, text):
    """CheckpointFile.CheckpointReadBuffer.read: readLine() == null for the version or the count
    line is an empty checkpoint, silently (a zero-length file after a lost write)."""
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(text)
    assert read_leader_epoch_checkpoint(path) == []
    assert read_offset_checkpoint(path) == {}


def test_unsynced_write_records_the_durable_content(tmp_path):
    """atomic_write(sync=False) keeps, beside the file, what the disk durably held before the
    first unsynced replace; a synced write makes the file durable and drops the record."""
    path = tmp_path / "leader-epoch-checkpoint"
    write_leader_epoch_checkpoint(path, [(0, 0), (1, 5)])
    side = tmp_path / ("leader-epoch-checkpoint" + UNSYNCED_SUFFIX)
    write_leader_epoch_checkpoint(path, [(0, 0)], sync=False)
    write_leader_epoch_checkpoint(path, [], sync=False)
    rec = json.loads(side.read_text())
    assert rec["durable"] == "0\n2\n0 0\n1 5\n" and rec["written"] >= rec["since"]
    assert read_leader_epoch_checkpoint(path) == []
    write_leader_epoch_checkpoint(path, [(2, 7)])
    assert not side.exists()


def test_reads_kafka_meta_properties_and_clean_shutdown_marker(tmp_path):
    (tmp_path / "meta.properties").write_bytes(KAFKA_META_PROPERTIES)
    assert read_meta_properties(tmp_path) == {
        "node.id": "2", "directory.id": "Jm8VrT0BR0uN7rWq6y0q2g", "version": "1",
        "cluster.id": "MkU3OEVBNTcwNTJENDM2Qk"}
    assert read_clean_shutdown(tmp_path) is None
    write_clean_shutdown(tmp_path, 42)
    assert (tmp_path / ".kafka_cleanshutdown").read_bytes() == b'{"version":0,"brokerEpoch":42}'
    assert read_clean_shutdown(tmp_path) == 42
    (tmp_path / ".kafka_cleanshutdown").write_bytes(b"")  # Kafka < 3.7: empty marker
    assert read_clean_shutdown(tmp_path) == -1


def manager(dirs, **kw) -> LogManager:
    kw.setdefault("node_id", 1)
    kw.setdefault("cluster_id", "MkU3OEVBNTcwNTJENDM2Qk")
    return LogManager(dirs, **kw)


def append(m: LogManager, topic: str, partition: int, n: int, epoch: int = 0) -> None:
    log = m.get_or_create(topic, partition)
    for i in range(n):
        log.append_as_leader(encode_batch([(None, b"v%d" % i, [])], timestamp_ms=1), epoch)


def test_manager_clean_shutdown_restart_and_crash(tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    events: list = []
    m = manager(dirs, on_event=lambda n, f: events.append((n, f)))
    m.load()
    assert m.had_clean_shutdown is False
    for d in dirs:
        props = read_meta_properties(d)
        assert props["node.id"] == "1" and props["version"] == "1" and len(props["directory.id"]) == 22
    for p in range(4):
        append(m, "orders", p, 3)
    assert {m.get("orders", p).dir.parent for p in range(4)} == set(dirs)  # spread over log dirs
    m.checkpoint_high_watermarks({("orders", p): 2 for p in range(4)})
    assert not any((d / ".kafka_cleanshutdown").exists() for d in dirs)
    m.shutdown(broker_epoch=17)
    assert all(read_clean_shutdown(d) == 17 for d in dirs)

    m = manager(dirs, on_event=lambda n, f: events.append((n, f)))
    m.load()
    assert m.had_clean_shutdown is True and m.previous_broker_epoch == 17
    assert not any((d / ".kafka_cleanshutdown").exists() for d in dirs)  # removed while running
    # one log_dir_loaded per dir and load, nothing recovered after the clean shutdown
    assert [(n, f["clean_shutdown"], f["logs"]) for n, f in events] == [
        ("log_dir_loaded", False, 0), ("log_dir_loaded", False, 0), ("log_dir_loaded", True, 2),
        ("log_dir_loaded", True, 2)]
    del events[:]
    assert {k: log.log_end_offset for k, log in m.logs().items()} == {("orders", p): 3 for p in range(4)}
    assert m.read_high_watermarks() == {("orders", p): 2 for p in range(4)}
    append(m, "orders", 0, 2)
    m.close_unclean()  # crash: no marker, no flush

    m = manager(dirs, on_event=lambda n, f: events.append((n, f)))
    m.load()
    assert m.had_clean_shutdown is False and m.previous_broker_epoch == -1
    assert sorted((f["topic"], f["partition"]) for n, f in events if n == "recovery") == [("orders", p) for p in range(4)]
    assert m.get("orders", 0).log_end_offset == 5  # page cache survived the process crash
    m.shutdown()


def test_recovery_point_checkpoint_follows_flushes(tmp_path):
    d = tmp_path / "d"
    m = manager([d], flush_interval_messages=4)
    m.load()
    append(m, "t", 0, 6)
    assert read_offset_checkpoint(d / "recovery-point-offset-checkpoint") == {("t", 0): 4}
    m.close_unclean()
    m = manager([d])
    m.load()
    assert m.get("t", 0).recovery_point == 4


@pytest.mark.parametrize("field, kw, want", [
    ("node.id", {"node_id": 3}, "node.id is '1' but this broker is node.id 3"),
    ("cluster.id", {"cluster_id": "other"}, "cluster.id is 'MkU3OEVBNTcwNTJENDM2Qk' but this cluster is 'other'"),
])
def test_meta_properties_mismatch_is_one_clear_error(tmp_path, field, kw, want):
    d = tmp_path / "d"
    m = manager([d])
    m.load()
    m.shutdown()
    with pytest.raises(StorageConfigError) as e:
        manager([d], **kw).load()
    msg = str(e.value)
    assert want in msg and str(d / "meta.properties") in msg and "\n" not in msg


def test_corrupt_checkpoint_in_a_log_dir_is_one_clear_error(tmp_path):
    d = tmp_path / "d"
    m = manager([d])
    m.load()
    append(m, "t", 0, 1)
    m.shutdown()
    (d / "recovery-point-offset-checkpoint").write_text("0\n1\nt zero 5\n")
    with pytest.raises(StorageConfigError, match=r"recovery-point-offset-checkpoint: line 3: partition 'zero'"):
        manager([d]).load()


def test_a_process_hitting_bad_storage_prints_one_line_not_a_traceback(tmp_path):
    """Bad storage, like bad configuration: the error text is fit to print as the only line."""
    d = tmp_path / "d"
    m = manager([d])
    m.load()
    m.shutdown()
    code = (
        "import sys\nfrom kraftsim.storage import LogManager, StorageConfigError\n"
        f"try:\n    LogManager([{str(d)!r}], node_id=9, cluster_id='x').load()\n"
        "except StorageConfigError as e:\n    print(e, file=sys.stderr); sys.exit(2)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "meta.properties: node.id is '1' but this broker is node.id 9" in out.stderr


def test_unopenable_segment_is_one_clear_error(tmp_path):
    d = tmp_path / "d"
    m = manager([d])
    m.load()
    m.shutdown()
    (d / "t-0" / f"{0:020d}.log").mkdir(parents=True)  # a directory where a segment should be
    with pytest.raises(StorageConfigError) as e:
        manager([d]).load()
    msg = str(e.value)
    assert "00000000000000000000.log: cannot open partition log: Is a directory" in msg and "\n" not in msg
