"""A real lossyfs mount per test, in the test's own tmp dir, always unmounted afterwards.

Why real FUSE mounts: what the kernel sends (writes of mapped pages, fsync, fsyncdir, the
order of a dying process's writes) is the thing under test; nothing here fakes it.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lossyfs(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lossyfs", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@dataclass
class Mount:
    backing: Path
    mnt: Path
    ctl: Path
    pid: int

    def crash(self) -> dict[str, Any]:
        r = lossyfs("crash", str(self.ctl))
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["crash"]

    def status(self) -> dict[str, Any]:
        r = lossyfs("status", str(self.ctl))
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


def mounted(mnt: Path) -> bool:
    return any(line.split()[1] == str(mnt) for line in Path("/proc/mounts").read_text().splitlines())


def unmount_hard(mnt: Path, pid: int | None) -> None:
    """Whatever happened in the test: no mount and no daemon are left."""
    if mounted(mnt):
        lossyfs("unmount", str(mnt), timeout=60)
    if mounted(mnt):
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
    if pid:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except OSError:
                return
            time.sleep(0.05)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def start_mount(tmp: Path, *extra: str) -> Mount:
    backing, mnt = tmp / "backing", tmp / "mnt"
    backing.mkdir(exist_ok=True)
    mnt.mkdir(exist_ok=True)
    ctl = tmp / "ctl.sock"
    r = lossyfs("mount", str(backing), str(mnt), "--control", str(ctl), *extra)
    if r.returncode != 0:
        unmount_hard(mnt, None)
        raise AssertionError(f"lossyfs mount failed: {r.stderr}")
    return Mount(backing, mnt, ctl, int(r.stdout.strip()))


@pytest.fixture
def lfs(tmp_path: Path) -> Iterator[Mount]:
    m = start_mount(tmp_path)
    try:
        yield m
    finally:
        unmount_hard(m.mnt, m.pid)
        assert not mounted(m.mnt)


def write_file(path: Path, data: bytes, *, fsync: bool = False, mode: str = "ab") -> None:
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def child_until(argv: list[str], ready: str) -> Iterator[subprocess.Popen[str]]:
    """A writer process, once it printed ``ready``; the block SIGKILLs it (a broker's reboot),
    and whatever happens it is gone afterwards."""
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == ready
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(10)


def sigkill(child: subprocess.Popen[str]) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(10)
