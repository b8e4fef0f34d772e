"""lossyfs from the harness's side: found through /proc/mounts, healed from the ledger, refused
where it is not, reported by preflight, and its command line's bad input.

Every test uses a real mount (tests/lossyfs/conftest.py) and the real local transport.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from groundwork.ledger import Ledger
from groundwork.transport.local import LocalTransport
from harness.heal import heal_all
from nemeses import lossyfs
from nemeses.active import ActiveFaults, FaultFailed
from nemeses.reboot import Reboot  # noqa: F401 - registers the reboot nemesis for ActiveFaults
from tests.lossyfs.conftest import ROOT, Mount, lossyfs as lossyfs_cli, mounted, start_mount, unmount_hard
from tests.nemeses.nodes import TestNode, make_ctx

LOCAL = LocalTransport("local")


def kill_daemon(pid: int) -> None:
    """SIGKILL a lossyfs daemon and wait until it is gone: its mount is left dead (ENOTCONN)."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_mount_is_found_by_its_dirs_and_crashed_through_the_transport(lfs: Mount) -> None:
    (lfs.mnt / "topic-0").mkdir()
    (lfs.mnt / "topic-0" / "seg").write_bytes(b"unsynced")
    found = lossyfs.mounts(LOCAL)
    m = lossyfs.covering(found, str(lfs.mnt / "topic-0"))
    assert m == lossyfs.LossyMount(str(lfs.mnt), str(lfs.ctl))
    assert lossyfs.covering(found, str(lfs.backing)) is None            # the backing dir is not on it
    assert lossyfs.covering(found, str(lfs.mnt) + "-other") is None     # a sibling with the same prefix
    st = lossyfs.status(LOCAL, m)
    assert st["files"] == [{"path": "topic-0/seg", "size": 8, "durable_size": 0, "overwritten_bytes": 0}]
    report = lossyfs.crash(LOCAL, m)
    assert {r["path"] for r in report["removed"]} == {"topic-0", "topic-0/seg"}
    assert not (lfs.mnt / "topic-0").exists()
    with pytest.raises(ValueError, match=r"b1: .*elsewhere is on no lossyfs mount"):
        lossyfs.mounts_under(LOCAL, [str(lfs.mnt), "/elsewhere"], "b1")


def test_reboot_lossyfs_on_a_node_without_lossyfs_fails_in_one_line_and_kills_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    node = TestNode("b1", "broker", 1, "127.0.0.1", command=["sleep", "300"], pid_file=str(tmp_path / "b1.pid"))
    node.log_dirs = [str(data)]
    node.start_service()
    try:
        ctx = make_ctx(tmp_path, [node])
        active = ActiveFaults(ctx)
        pid = node.service_pids()
        with pytest.raises(FaultFailed, match=r"reboot on b1 failed: b1: .*data is on no lossyfs mount"):
            active.start("reboot", ["b1"], {"mode": "lossyfs"})
        assert node.service_pids() == pid                     # not killed, nothing to heal
        assert ctx.ledger.open_entries() == []                # the failed start was healed
        lines = (tmp_path / "timeline.jsonl").read_text()
        assert "is on no lossyfs mount" in lines
    finally:
        node.stop_service(signal.SIGKILL)


def test_heal_unmounts_a_dead_runs_mount_from_the_ledger(tmp_path: Path) -> None:
    """A run mounted lossyfs (ledger first) and died: its daemon was SIGKILLed too, leaving a
    dead mount (ENOTCONN). ``faultline heal``'s replay unmounts it from the entry alone, and
    removes the dead daemon's control socket (a live one removes its own as it exits)."""
    backing, mnt = tmp_path / "backing", tmp_path / "mnt"
    backing.mkdir()
    mnt.mkdir()
    ledger = Ledger(tmp_path / "ledger.jsonl")
    pid = None
    try:
        m = lossyfs.mount(LOCAL, str(backing), str(mnt), ledger=ledger, python=sys.executable, cwd=str(ROOT),
                          control=str(tmp_path / "ctl.sock"))
        pid = int(lossyfs.status(LOCAL, m)["pid"])
        kill_daemon(pid)
        with pytest.raises(OSError):
            os.listdir(mnt)                                   # Transport endpoint is not connected
        assert mounted(mnt)
        report = heal_all(ledger)
        assert report.failed == [] and any("mount" in h for h in report.healed), report
        assert not mounted(mnt) and ledger.open_entries() == []
        assert not (tmp_path / "ctl.sock").exists()
    finally:
        unmount_hard(mnt, pid)


def test_unmount_dead_finds_a_mount_no_ledger_knows(tmp_path: Path) -> None:
    m, live = start_mount(tmp_path), None
    try:
        (tmp_path / "live").mkdir()
        live = start_mount(tmp_path / "live")
        kill_daemon(m.pid)
        assert lossyfs.unmount_dead(LOCAL) == [str(m.mnt)]
        assert not mounted(m.mnt) and mounted(live.mnt)       # the living one stays
        assert not m.ctl.exists() and live.ctl.exists()       # with its socket; the dead one's is gone
    finally:
        unmount_hard(m.mnt, m.pid)
        if live is not None:
            unmount_hard(live.mnt, live.pid)


def test_detaching_a_mount_never_aborts_the_next_mount_made_on_the_host(tmp_path: Path, monkeypatch) -> None:
    """Two mounts of one host (two daemons, two runs, two test workers): one is detached (a crash
    or an unmount) while the other is being made. The kernel names a FUSE connection by its
    superblock's device number and hands the lowest free number to the next mount, so a mount
    made right after the first one's lazy unmount usually gets its number. The interleaving is
    forced here: the second mount is made the moment ``fusermount3 -u -z`` of the first returns,
    inside ``detach``. It must still answer afterwards - an abort by number after the unmount
    (the order detach had) ended it, as it ended a test's fresh mount in a CI run."""
    from lossyfs import daemon

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = start_mount(tmp_path / "a"), None
    real_run = subprocess.run

    def run_then_mount(argv, *args, **kwargs):
        nonlocal second
        out = real_run(argv, *args, **kwargs)
        if argv[:3] == ["fusermount3", "-u", "-z"] and second is None:
            second = start_mount(tmp_path / "b")
        return out

    try:
        monkeypatch.setattr(daemon.subprocess, "run", run_then_mount)
        daemon.detach(str(first.mnt))
        monkeypatch.undo()
        assert second is not None, "detach did not unmount through fusermount3"
        assert second.status()["pid"] == second.pid          # the second mount's daemon still serves it
        assert os.listdir(second.mnt) == []
    finally:
        monkeypatch.undo()
        unmount_hard(first.mnt, first.pid)
        if second is not None:
            unmount_hard(second.mnt, second.pid)


def test_preflight_reboot_column_says_lossyfs(tmp_path: Path) -> None:
    from harness.inventory import load_inventory
    from harness.preflight import Options, preflight
    from tests.harness.test_preflight_local import kafka_host

    inv = kafka_host(tmp_path)
    data = tmp_path / "data"

    def reboot_check():
        return preflight(load_inventory(inv), Options()).hosts[0].checks["reboot"]
    before = reboot_check()
    assert "lossyfs" not in before.summary and any("no log dir on lossyfs" in i.problem for i in before.issues)
    (tmp_path / "backing").mkdir()
    m = lossyfs.mount(LOCAL, str(tmp_path / "backing"), str(data), python=sys.executable, cwd=str(ROOT),
                      control=str(tmp_path / "ctl.sock"))
    try:
        after = reboot_check()
        assert "lossyfs" in after.summary and after.issues == [], (after.summary, after.issues)
    finally:
        lossyfs.unmount(LOCAL, m)
        unmount_hard(data, None)


def test_preflight_names_a_log_dir_on_a_dead_mount_and_how_to_unmount_it(tmp_path: Path) -> None:
    """A log dir on a lossyfs mount whose daemon died looks missing (ENOTCONN), and mkdir there
    fails: preflight names the dead mount and the unmount, not "create it". The same dir on the
    mount while its daemon lives is fine (the control)."""
    from harness.inventory import load_inventory
    from harness.preflight import FAIL, Options, preflight
    from tests.harness.test_preflight_local import kafka_host

    inv = kafka_host(tmp_path)
    data = tmp_path / "data"
    (tmp_path / "backing").mkdir()

    def dirs_check():
        return preflight(load_inventory(inv), Options()).hosts[0].checks["dirs"]
    pid = None
    try:
        m = lossyfs.mount(LOCAL, str(tmp_path / "backing"), str(data), python=sys.executable, cwd=str(ROOT),
                          control=str(tmp_path / "ctl.sock"))
        pid = int(lossyfs.status(LOCAL, m)["pid"])
        alive = dirs_check()
        assert alive.issues == [], alive.issues
        kill_daemon(pid)
        dead = dirs_check()
        assert [i.status for i in dead.issues] == [FAIL], dead.issues
        assert f"log dir {data} is on a dead lossyfs mount at {data}" in dead.issues[0].problem
        assert f"fusermount3 -u -z {data}" in dead.issues[0].fix and "create it" not in dead.issues[0].fix
    finally:
        unmount_hard(data, pid)


@pytest.mark.parametrize("args, needle", [
    (["mount", "/nonexistent-backing", "/tmp", "--control", "/tmp/x.sock"], "BACKING /nonexistent-backing: not a directory"),
    (["mount", "/tmp", "/tmp", "--control", "/tmp/x.sock"], "overlap"),
    (["crash", "/nonexistent/ctl.sock"], "no such control socket"),
    (["unmount", "/tmp"], "no fuse.lossyfs mount there"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    r = lossyfs_cli(*args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_a_bad_control_path_is_refused(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "m").mkdir()
    r = subprocess.run([sys.executable, "-m", "lossyfs", "mount", str(tmp_path / "b"), str(tmp_path / "m"),
                        "--control", str(tmp_path / "a,b.sock")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no commas" in r.stderr
    assert not mounted(tmp_path / "m")


def kafka_layout_on(mnt: Path) -> Path:
    """A broker's log dir on the mount as Kafka leaves it between two flushes: orders-0 with
    segments 0 and 15 fsynced at their rolls (and the partition dir, by the roll's flush), the
    newest, 25, appended since; the recovery-point checkpoint not yet written (empty, as Kafka's
    CheckpointFile constructor creates it)."""
    from tests.lossyfs.conftest import fsync_dir
    from tests.nemeses.segments import write_partition

    data = mnt / "data"
    data.mkdir()
    pdir = write_partition(data, "orders", 0, {0: [(0, 5), (5, 5), (10, 5)], 15: [(15, 5), (20, 5)],
                                                25: [(25, 5), (30, 5)]})
    (data / "recovery-point-offset-checkpoint").write_bytes(b"")
    for seg in ("00000000000000000000.log", "00000000000000000015.log"):
        fd = os.open(pdir / seg, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    fsync_dir(pdir)
    fsync_dir(data)
    fsync_dir(mnt)
    return pdir


@pytest.mark.parametrize("flushed_newest", [False, True])
def test_reboot_auto_on_lossyfs_compares_the_cut_with_what_was_fsynced(tmp_path: Path, flushed_newest: bool) -> None:
    """``mode: auto`` is lossyfs on a node whose dirs are on lossyfs; ``compare_cut`` sets the
    truncate-unflushed cut's dry run beside the crash, segment by segment. Known-bad control:
    when the newest segment was fsynced by something the cut does not know of (a topic's
    flush.messages not given to it), the cut removes bytes lossyfs kept, and the count says so."""
    m = start_mount(tmp_path)
    node = TestNode("b1", "broker", 1, "127.0.0.1", command=["sleep", "300"], pid_file=str(tmp_path / "b1.pid"))
    try:
        pdir = kafka_layout_on(m.mnt)
        newest = pdir / "00000000000000000025.log"
        if flushed_newest:
            fd = os.open(newest, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        size = newest.stat().st_size
        node.log_dirs = [str(m.mnt / "data")]
        node.start_service()
        ctx = make_ctx(tmp_path, [node])
        rec = ActiveFaults(ctx).start("reboot", ["b1"], {"mode": "auto", "compare_cut": True, "restart": False,
                                                          "kafka_config": {"log.flush.interval.messages": 2 ** 63 - 1}})
        d = rec.record.undo["detail"]["b1"]
        assert d["mode"] == "lossyfs" and d["requested"] == "auto"
        cmp = d["cut_compared"]
        assert cmp["segments"] == 3 and cmp["unknown"] == [] and cmp["size_mismatch"] == []
        assert cmp["cut_removed"] == size                 # the cut takes the newest segment
        assert cmp["cut_removed_kept"] == (size if flushed_newest else 0)
        assert cmp["lossyfs_dropped"] == (0 if flushed_newest else size)
        assert cmp["cut_kept_dropped"] == 0
        assert "the truncate-unflushed cut would have removed" in (tmp_path / "timeline.jsonl").read_text()
    finally:
        node.stop_service(signal.SIGKILL)
        unmount_hard(m.mnt, m.pid)


def test_reboot_auto_without_lossyfs_is_the_page_cache_cut(tmp_path: Path) -> None:
    """kraftsim's and a lab's plain disks: ``auto`` is ``truncate-unflushed``, as before."""
    from tests.nemeses.segments import write_partition

    data = tmp_path / "data"
    write_partition(data, "orders", 0, {0: [(0, 5)], 5: [(5, 5)]})
    node = TestNode("b1", "broker", 1, "127.0.0.1", command=["sleep", "300"], pid_file=str(tmp_path / "b1.pid"))
    node.log_dirs = [str(data)]
    node.start_service()
    try:
        rec = ActiveFaults(make_ctx(tmp_path, [node])).start("reboot", ["b1"], {"mode": "auto", "restart": False})
        d = rec.record.undo["detail"]["b1"]
        assert d["mode"] == "truncate-unflushed" and d["requested"] == "auto"
        assert d["partitions"]["orders-0"]["expected_log_end_offset"] == 5   # cut at the newest segment
    finally:
        node.stop_service(signal.SIGKILL)
