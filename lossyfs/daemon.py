"""The lossyfs daemon: the mount, its control socket, the crash and the remount.

Why the daemon remounts itself: a reboot takes the kernel's caches of the filesystem with it
(pages, attributes, names). Dropping the mount and mounting a new one does the same, and the
daemon already knows the mount's arguments, so a caller says only ``crash``.

How a crash runs (:meth:`Daemon.crash`): under the durability lock every operation of the
current mount starts failing with EIO (the machine is off: a dying process's last writes and a
late writeback of dirty mapped pages are refused, not kept), the backing directory is restored
to its durable state, then the mount is detached (``fusermount3 -u -z``) and its FUSE
connection aborted (``/sys/fs/fuse/connections/N/abort``), so the FUSE loop returns even if a
process still holds a file open there (it gets ENOTCONN, as from a dead disk). The main thread
then mounts a fresh generation; the answer goes back once it answers.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from lossyfs.control import SOURCE_PREFIX, mount_dev
from lossyfs.durability import Durability
from lossyfs.fs import FUSE_CAP_WRITEBACK_CACHE, LossyFUSE, LossyOps

FUSECTL = "/sys/fs/fuse/connections"


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} lossyfs[{os.getpid()}]: {msg}", file=sys.stderr, flush=True)


def abort_connection(dev: int | None) -> bool:
    """Abort the FUSE connection ``dev`` through fusectl (mounted here if it is not yet)."""
    if dev is None:
        return False
    if not os.path.isdir(os.path.join(FUSECTL, str(dev))):
        subprocess.run(["mount", "-t", "fusectl", "fusectl", FUSECTL], capture_output=True)
    try:
        with open(os.path.join(FUSECTL, str(dev), "abort"), "w") as fh:
            fh.write("1")
        return True
    except OSError:
        return False


def detach(mountpoint: str) -> int | None:
    """Abort the connection of the mount at ``mountpoint``, then detach the mount; returns its
    device.

    Why in this order: while the mount exists, its superblock holds the device number, so the
    abort can reach only this mount's connection. Once a lazy unmount has let the superblock go,
    the number is free, and the kernel hands the lowest free number to the next mount made on the
    host (another daemon's, another run's): an abort by number after the unmount ended such a
    mount just as it came up. The abort loses nothing a clean unmount would keep: lossyfs never
    lets the kernel cache writes (no writeback cache), so only requests in flight fail, as they
    would on a crash."""
    dev = mount_dev(mountpoint)
    if dev is not None:
        abort_connection(dev)
        r = subprocess.run(["fusermount3", "-u", "-z", mountpoint], capture_output=True, text=True)
        if r.returncode:
            log(f"fusermount3 -u -z {mountpoint}: {r.stderr.strip()}")
    return dev


class Daemon:
    def __init__(self, backing: str, mountpoint: str, control: str, writeback_ms: int = 0,
                 trace: str | None = None):
        self.backing = os.path.abspath(backing)
        self.mountpoint = os.path.abspath(mountpoint)
        self.control = os.path.abspath(control)
        self.writeback_ms = writeback_ms
        self._trace = open(trace, "a", buffering=1) if trace else None
        self.dur: Durability | None = None
        self.ops: LossyOps | None = None
        self.generation = 0
        self.crashes = 0
        self.mounted = threading.Condition()
        self.crash_lock = threading.Lock()
        self.remounting = False
        #: set by a crash once the old mount is gone: the main thread may mount the next one
        #: (not before: a new connection may get the old one's device number, and the crash's
        #: abort must not hit it)
        self.may_remount = threading.Event()
        self.stopping = False
        self.finished = threading.Event()
        #: the answer to ``unmount`` went out (the process may end)
        self.replied = threading.Event()
        self.error: str | None = None

    # -- the main thread -------------------------------------------------------------------------
    def serve(self, on_ready: Callable[[str | None], None]) -> int:
        """Mount and serve until unmounted (not by a crash); ``on_ready(None)`` once the first
        mount answers, ``on_ready(error)`` when it cannot come up."""
        self.dur = Durability(self.backing)
        server = self._listen()
        threading.Thread(target=self._accept, args=(server,), daemon=True, name="control").start()
        if self.writeback_ms > 0:
            threading.Thread(target=self._writeback, daemon=True, name="writeback").start()
        first = True
        try:
            while True:
                ops = LossyOps(self.dur, self.trace if self._trace else None)
                with self.mounted:
                    self.ops = ops
                if first:
                    threading.Thread(target=self._announce, args=(ops, on_ready), daemon=True).start()
                    first = False
                else:
                    threading.Thread(target=self._wait_answering, args=(ops,), daemon=True).start()
                try:
                    # one FUSE thread: libfuse's worker threads only contend for the GIL (measured
                    # with benchmarks/lossyfs_throughput.py: 16 KiB appends 26 MB/s with threads,
                    # 75 MB/s without, on the loaded 2-core box); no operation here blocks
                    LossyFUSE(ops, self.mountpoint, foreground=True, nothreads=True, fsname=SOURCE_PREFIX + self.control,
                              subtype="lossyfs", allow_other=True, default_permissions=True,
                              attr_timeout=0, entry_timeout=0, negative_timeout=0, hard_remove=True,
                              use_ino=True)
                except RuntimeError as e:   # libfuse's exit status after an aborted connection
                    if not self.remounting and not self.stopping:
                        self.error = f"the FUSE loop ended: {e}"
                if not ops.ready.is_set():
                    self.error = self.error or f"cannot mount {self.mountpoint} (see the log above)"
                    on_ready(self.error)
                    return 1
                if self.remounting:
                    self.may_remount.wait()
                    self.may_remount.clear()
                    self.remounting = False
                    self.dur.thaw()
                    continue
                # a mount taken away (unmounted by someone else) before it first answered: the
                # waiting parent hears why instead of a silent exit (a no-op once it was told ok)
                on_ready(self.error or f"{self.mountpoint} was unmounted before it first answered")
                return 0
        finally:
            server.close()
            try:
                os.unlink(self.control)
            except OSError:
                pass
            # nothing was committed: the backing directory stays as it is (current state)
            shutil.rmtree(self.dur.state_dir, ignore_errors=True)
            log("unmounted")
            self.finished.set()
            if self.stopping:
                self.replied.wait(5)

    def trace(self, line: str) -> None:
        assert self._trace is not None
        self._trace.write(f"{time.monotonic():.6f} {line}\n")

    def _answering(self, ops: LossyOps, timeout: float = 30.0) -> bool:
        if not ops.ready.wait(timeout):
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.statvfs(self.mountpoint)
                if mount_dev(self.mountpoint) is not None:
                    return True
            except OSError:
                pass
            time.sleep(0.01)
        return False

    def _announce(self, ops: LossyOps, on_ready: Callable[[str | None], None]) -> None:
        if self._answering(ops):
            log(f"mounted {self.backing} at {self.mountpoint}, control {self.control}, "
                f"writeback {f'{self.writeback_ms} ms' if self.writeback_ms else 'off'}, kernel writeback cache "
                f"{'ON' if ops.want & FUSE_CAP_WRITEBACK_CACHE else 'off'}")
            on_ready(None)

    def _wait_answering(self, ops: LossyOps) -> None:
        ok = self._answering(ops)
        with self.mounted:
            self.generation += 1
            self.mounted.notify_all()
        if not ok:
            log("the new mount did not answer")

    def _writeback(self) -> None:
        interval = self.writeback_ms / 1000.0
        while not self.finished.is_set():
            time.sleep(max(interval / 4, 0.005))
            dur = self.dur
            if dur is not None:
                dur.writeback(interval)

    # -- the control socket ----------------------------------------------------------------------
    def _listen(self) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(self.control)
        os.chmod(self.control, 0o600)
        s.listen(8)
        return s

    def _accept(self, server: socket.socket) -> None:
        while not self.finished.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                buf = b""
                while not buf.endswith(b"\n"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    buf += chunk
                cmd = json.loads(buf).get("cmd")
                if cmd == "crash":
                    reply = self.crash()
                elif cmd == "status":
                    reply = self.status()
                elif cmd == "ping":
                    reply = {"ok": True, "pid": os.getpid()}
                elif cmd == "unmount":
                    reply = self.unmount()
                else:
                    reply = {"ok": False, "error": f"unknown command {cmd!r} (crash, status, unmount, ping)"}
            except Exception as e:  # noqa: BLE001 - the caller gets the one line, the log the rest
                log(f"command failed: {type(e).__name__}: {e}")
                reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            try:
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:
                pass
            if self.stopping:
                self.replied.set()

    # -- commands ----------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        assert self.dur is not None
        ops = self.ops
        return {"ok": True, "pid": os.getpid(), "backing": self.backing, "mountpoint": self.mountpoint,
                "control": self.control, "writeback_ms": self.writeback_ms, "crashes": self.crashes,
                "writeback_cache": bool(ops and ops.want & FUSE_CAP_WRITEBACK_CACHE), **self.dur.status()}

    def crash(self) -> dict[str, Any]:
        assert self.dur is not None
        with self.crash_lock:
            if self.stopping:
                return {"ok": False, "error": "the mount is being unmounted"}
            t0 = time.monotonic()
            with self.mounted:
                ops, gen = self.ops, self.generation
            assert ops is not None
            with self.dur.lock:
                ops.down = True
                report = self.dur.restore()
            self.remounting = True
            detach(self.mountpoint)
            self.may_remount.set()
            with self.mounted:
                ok = self.mounted.wait_for(lambda: self.generation > gen, timeout=60)
            if not ok:
                return {"ok": False, "error": f"{self.mountpoint} did not come back after the crash "
                                              "(is a process holding it, and fusectl unavailable?)"}
            self.crashes += 1
            log(f"crash {self.crashes}: dropped {report['dropped_bytes']} bytes, "
                f"{len(report['files'])} files cut, {len(report['removed'])} removed, "
                f"{len(report['restored'])} restored")
            return {"ok": True, "crash": report, "seconds": round(time.monotonic() - t0, 3)}

    def unmount(self) -> dict[str, Any]:
        with self.crash_lock:
            self.stopping = True
            detach(self.mountpoint)
            if not self.finished.wait(30):
                return {"ok": False, "error": f"{self.mountpoint}: the FUSE loop did not end"}
            return {"ok": True}
