"""A lossyfs crash keeps exactly what was fsynced: data, sizes, names - byte for byte.

Each test writes through a real mount, crashes it, and compares the files read back through the
remounted mount with what POSIX says a power loss may keep at most and must keep at least: the
state at the last fsync of each file and of each directory. Every test also checks what the
crash reported, so a report that says the wrong thing fails as surely as a wrong file.
"""
from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

from tests.lossyfs.conftest import (Mount, child_until, fsync_dir, lossyfs, mounted, sigkill, start_mount,
                                    unmount_hard, write_file)


def test_write_fsync_write_keeps_exactly_the_synced_bytes(lfs: Mount) -> None:
    f = lfs.mnt / "00000000000000000000.log"
    write_file(f, b"A" * 5000, fsync=True)
    fsync_dir(lfs.mnt)
    write_file(f, b"B" * 3000)            # acknowledged from the page cache, never fsynced
    assert f.read_bytes() == b"A" * 5000 + b"B" * 3000
    st = lfs.status()
    assert [(x["path"], x["size"], x["durable_size"]) for x in st["files"]] == [(f.name, 8000, 5000)]
    report = lfs.crash()
    assert f.read_bytes() == b"A" * 5000
    assert report["files"] == [{"path": f.name, "size_before": 8000, "durable_size": 5000,
                                "dropped_bytes": 3000, "restored_bytes": 0}]
    assert report["dropped_bytes"] == 3000 and report["removed"] == []
    assert lfs.status()["files"] == []    # after the crash all that is left is durable


def test_an_overwrite_below_the_durable_size_is_undone(lfs: Mount) -> None:
    f = lfs.mnt / "index"
    write_file(f, bytes(range(256)) * 16, fsync=True)      # 4096 durable bytes
    fsync_dir(lfs.mnt)
    with open(f, "r+b") as fh:
        fh.seek(100)
        fh.write(b"\xff" * 50)
        fh.seek(4000)
        fh.write(b"\xee" * 200)           # across the durable end
    assert f.read_bytes()[100:150] == b"\xff" * 50
    report = lfs.crash()
    assert f.read_bytes() == bytes(range(256)) * 16
    assert report["files"][0]["restored_bytes"] == 50 + 96 and report["files"][0]["dropped_bytes"] == 104


def test_an_overwrite_after_an_fsync_is_kept(lfs: Mount) -> None:
    """The known-good control of the test above: the same overwrite, fsynced, survives."""
    f = lfs.mnt / "index"
    write_file(f, b"\0" * 4096, fsync=True)
    fsync_dir(lfs.mnt)
    with open(f, "r+b") as fh:
        fh.seek(100)
        fh.write(b"\xff" * 50)
        fh.flush()
        os.fsync(fh.fileno())
    lfs.crash()
    assert f.read_bytes() == b"\0" * 100 + b"\xff" * 50 + b"\0" * 3946


def test_a_truncate_is_undone(lfs: Mount) -> None:
    f, g = lfs.mnt / "seg", lfs.mnt / "grown"
    write_file(f, b"0123456789" * 100, fsync=True)
    write_file(g, b"g" * 10, fsync=True)
    fsync_dir(lfs.mnt)
    os.truncate(f, 10)                     # Kafka truncating a log on a new leader epoch
    write_file(f, b"new")                  # and appending past the cut
    os.truncate(g, 10 * 1024 * 1024)       # an index preallocated with setLength
    report = lfs.crash()
    assert f.read_bytes() == b"0123456789" * 100
    assert g.read_bytes() == b"g" * 10
    by = {x["path"]: x for x in report["files"]}
    assert by["seg"]["restored_bytes"] == 990 and by["grown"]["dropped_bytes"] == 10 * 1024 * 1024 - 10


def test_a_rename_without_a_directory_fsync_is_undone_and_with_one_survives(lfs: Mount) -> None:
    """Kafka's checkpoint pattern: write tmp, fsync it, rename over the file (CheckpointFile.write)."""
    a, b = lfs.mnt / "a", lfs.mnt / "b"
    a.mkdir()
    b.mkdir()
    fsync_dir(lfs.mnt)
    ck, moved = a / "recovery-point-offset-checkpoint", a / "moved"
    write_file(ck, b"0\n1\ntopic 0 100\n", fsync=True)
    write_file(moved, b"m", fsync=True)
    fsync_dir(a)
    tmp = a / "recovery-point-offset-checkpoint.tmp"
    write_file(tmp, b"0\n1\ntopic 0 200\n", fsync=True)
    os.replace(tmp, ck)                    # no fsync of a/
    os.rename(moved, b / "moved")          # out of a/ into b/, neither fsynced
    report = lfs.crash()
    assert ck.read_bytes() == b"0\n1\ntopic 0 100\n"
    assert not tmp.exists()
    assert (a / "moved").read_bytes() == b"m" and not (b / "moved").exists()
    assert "a/recovery-point-offset-checkpoint" in report["restored"] and "a/moved" in report["restored"]
    assert {r["path"] for r in report["removed"]} == {"a/recovery-point-offset-checkpoint"}  # the tmp's content, under its new name
    # the same with the directory fsyncs: everything survives
    write_file(tmp, b"0\n1\ntopic 0 300\n", fsync=True)
    os.replace(tmp, ck)
    os.rename(a / "moved", b / "moved")
    fsync_dir(a)
    fsync_dir(b)
    report = lfs.crash()
    assert ck.read_bytes() == b"0\n1\ntopic 0 300\n" and (b / "moved").read_bytes() == b"m"
    assert report["removed"] == report["restored"] == [] and report["dropped_bytes"] == 0


def test_an_unlink_without_a_directory_fsync_is_undone_and_with_one_survives(lfs: Mount) -> None:
    d = lfs.mnt / "topic-0"
    d.mkdir()
    fsync_dir(lfs.mnt)
    seg, other = d / "00000000000000000000.log", d / "other"
    write_file(seg, b"S" * 1000, fsync=True)
    write_file(other, b"O" * 10, fsync=True)
    fsync_dir(d)
    write_file(seg, b"unsynced")
    seg.unlink()
    assert not seg.exists()
    report = lfs.crash()
    assert seg.read_bytes() == b"S" * 1000       # the name and the durable content are back
    assert report["restored"] == ["topic-0/00000000000000000000.log"]
    other.unlink()
    fsync_dir(d)
    lfs.crash()
    assert not other.exists() and sorted(p.name for p in d.iterdir()) == [seg.name]
    assert not any((lfs.backing / ".lossyfs" / "aside").iterdir())   # nothing kept aside once durable


def test_a_removed_directory_comes_back_and_a_new_one_goes(lfs: Mount) -> None:
    old, new = lfs.mnt / "old", lfs.mnt / "new"
    old.mkdir()
    write_file(old / "f", b"f", fsync=True)
    fsync_dir(old)
    fsync_dir(lfs.mnt)
    (old / "f").unlink()
    fsync_dir(old)
    old.rmdir()
    new.mkdir()
    write_file(new / "g", b"g", fsync=True)
    fsync_dir(new)                          # but not the root: new/ itself is not durable
    report = lfs.crash()
    assert old.is_dir() and not any(old.iterdir()) and not new.exists()
    assert {r["path"] for r in report["removed"]} == {"new", "new/g"}


def test_a_created_file_without_a_directory_fsync_disappears(lfs: Mount) -> None:
    ghost, empty = lfs.mnt / "ghost", lfs.mnt / "empty"
    write_file(ghost, b"fsynced, but its name never was", fsync=True)
    report = lfs.crash()
    assert not ghost.exists()
    assert report["removed"] == [{"path": "ghost", "size": 31}] and report["dropped_bytes"] == 31
    write_file(empty, b"named, but its data never fsynced")
    fsync_dir(lfs.mnt)
    lfs.crash()
    assert empty.exists() and empty.read_bytes() == b""


def test_a_dying_process_loses_its_last_unsynced_writes(lfs: Mount) -> None:
    """A child appends, fsyncs, appends again and is SIGKILLed before its next fsync: its
    writes reached the page cache (they read back) but not the disk."""
    f = lfs.mnt / "log"
    script = textwrap.dedent(f"""
        import os, sys, time
        fd = os.open({str(f)!r}, os.O_CREAT | os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"D" * 4096); os.fsync(fd)
        dfd = os.open({str(lfs.mnt)!r}, os.O_RDONLY); os.fsync(dfd)
        for _ in range(64):
            os.write(fd, b"U" * 1024)
        print("written", flush=True)
        time.sleep(60)
    """)
    with child_until([sys.executable, "-c", script], "written") as child:
        assert f.stat().st_size == 4096 + 64 * 1024
        sigkill(child)
    report = lfs.crash()
    assert f.read_bytes() == b"D" * 4096
    assert report["files"][0]["dropped_bytes"] == 64 * 1024


MMAP_CHILD = textwrap.dedent("""
    import mmap, os, sys, time
    path = sys.argv[1]
    fd = os.open(path, os.O_RDWR)
    m = mmap.mmap(fd, 3 * 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    m[0:4] = b"KEEP"
    m.flush(0, 4096)              # msync(MS_SYNC) of the first page: WRITE, then FSYNC
    m[4096:4100] = b"LOST"        # the second page is dirty and never forced
    print("mapped", flush=True)
    time.sleep(60)
""")


def test_a_shared_mapping_keeps_the_forced_page_and_loses_the_other(lfs: Mount) -> None:
    f = lfs.mnt / "00000000000000000000.index"
    write_file(f, b"\0" * 3 * 4096, fsync=True)
    fsync_dir(lfs.mnt)
    with child_until([sys.executable, "-c", MMAP_CHILD, str(f)], "mapped") as child:
        with open(f, "rb") as fh:        # the other process sees both pages (one page cache)
            data = fh.read()
        assert data[0:4] == b"KEEP" and data[4096:4100] == b"LOST"
        sigkill(child)
    lfs.crash()
    data = f.read_bytes()
    assert data[0:4] == b"KEEP"
    assert data[4096:4100] == b"\0\0\0\0" and len(data) == 3 * 4096


def test_a_writeback_interval_makes_old_writes_durable(tmp_path: Path) -> None:
    m = start_mount(tmp_path, "--writeback-ms", "200")
    try:
        f = m.mnt / "log"
        write_file(f, b"old")
        deadline = time.monotonic() + 30
        while m.status()["files"] or m.status()["dirs"]:   # the writeback committed it (>= 200 ms)
            assert time.monotonic() < deadline, m.status()
            time.sleep(0.1)
        report = m.crash()
        assert f.read_bytes() == b"old" and report["dropped_bytes"] == 0
    finally:
        unmount_hard(m.mnt, m.pid)
    assert not mounted(m.mnt)


def test_a_crash_with_a_file_still_open_remounts(lfs: Mount) -> None:
    """A process that survived the crash (it should not, but a test harness might) holds a
    file of the old mount: its descriptor is dead (the connection was aborted), the new mount
    answers and holds only durable data."""
    f = lfs.mnt / "held"
    write_file(f, b"x" * 10, fsync=True)
    fsync_dir(lfs.mnt)
    fd = os.open(f, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"y" * 10)
        lfs.crash()
        assert f.read_bytes() == b"x" * 10
        try:
            os.write(fd, b"z")
            wrote = True
        except OSError:
            wrote = False
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    assert not wrote and f.read_bytes() == b"x" * 10


def test_unmount_commits_nothing_and_drops_nothing(tmp_path: Path) -> None:
    m = start_mount(tmp_path)
    try:
        write_file(m.mnt / "f", b"unsynced")
        assert mounted(m.mnt)
        r = lossyfs("unmount", str(m.mnt))
        assert r.returncode == 0, r.stderr
        assert not mounted(m.mnt)
        assert (m.backing / "f").read_bytes() == b"unsynced"   # the backing directory as it was
        assert not (m.backing / ".lossyfs").exists() and not m.ctl.exists()
    finally:
        unmount_hard(m.mnt, m.pid)


def test_a_jvm_keeps_what_it_forced_and_loses_the_rest(tmp_path: Path) -> None:
    """Java 17's own calls, as Kafka makes them (tests/lossyfs/java/KafkaLikeWrites.java):
    FileChannel.force arrives as FSYNC, MappedByteBuffer.force(index, length) as WRITE of the
    dirty page then FDATASYNC, the directory's FileChannel.force as FSYNCDIR - so after SIGKILL
    and a crash the forced bytes are there and the others are not. The trace shows what came."""
    trace = tmp_path / "trace"
    m = start_mount(tmp_path, "--trace", str(trace))
    try:
        src = Path(__file__).parent / "java" / "KafkaLikeWrites.java"
        with child_until(["java", str(src), str(m.mnt)], "ready") as child:
            sigkill(child)
        report = m.crash()
        seg, idx = m.mnt / "00000000000000000000.log", m.mnt / "00000000000000000000.index"
        assert seg.read_bytes() == b"D" * 4096
        data = idx.read_bytes()
        assert len(data) == 3 * 4096 and data[0:4] == b"KEEP" and data[4096:4100] == b"\0\0\0\0"
        assert {f["path"]: f["dropped_bytes"] for f in report["files"]}["00000000000000000000.log"] == 1000
        ops = [line.split()[1:] for line in trace.read_text().splitlines()]
        index_ops = [o for o in ops if o[1:2] == ["/00000000000000000000.index"]]
        # MappedByteBuffer.force is msync(MS_SYNC): the page's WRITE, then FDATASYNC
        forced = index_ops.index(["fdatasync", "/00000000000000000000.index"])
        assert ["write", "/00000000000000000000.index", "0", "4096"] in index_ops[:forced], index_ops
        # the page never forced came too - when the killed JVM's mapping closed (FUSE writes a
        # shared mapping's dirty pages back then) - and was dropped as never synced
        assert ["write", "/00000000000000000000.index", "4096", "4096"] in index_ops[forced:], index_ops
        assert ["fsyncdir", "/"] in ops
    finally:
        unmount_hard(m.mnt, m.pid)
