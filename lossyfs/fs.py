"""The passthrough filesystem: every operation goes to the backing directory at once, after
:class:`lossyfs.durability.Durability` has noted what it puts at risk.

Why passthrough (write-through): reads and appends then cost no memory and run at the backing
disk's speed, and the backing directory always holds what a program that never crashes would
see. Only fsync / fdatasync / fsyncdir commit (:meth:`LossyOps.fsync`, :meth:`LossyOps.fsyncdir`);
flush and release commit nothing, as on a real disk whose page cache is lost.

File handles are backing file descriptors, so read, write, fsync and truncate through a handle
keep working on a file unlinked while open (``hard_remove``: no ``.fuse_hidden`` renames that
would show up as changes of names).

While a crash runs, :attr:`LossyOps.down` makes every operation fail with EIO: the machine is
off, and a dying process's last writes, or the kernel writing back a dead process's dirty
mapped pages, must not land after the crash restored the durable state.
"""
from __future__ import annotations

import errno
import functools
import os
import stat
import threading
from typing import Any, Callable

import mfusepy

from lossyfs.durability import STATE_DIR, Durability

#: RENAME_NOREPLACE / RENAME_EXCHANGE (linux/fs.h)
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
#: FUSE_CAP_WRITEBACK_CACHE (libfuse3 fuse_common.h): never wanted - the kernel would hold
#: writes back from us and send them late, merged, or not at all before a crash
FUSE_CAP_WRITEBACK_CACHE = 1 << 16


def _op(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Every operation: EIO while the machine is down; OSErrors become their errno."""
    @functools.wraps(fn)
    def wrapper(self: "LossyOps", *args: Any) -> Any:
        if self.down:
            raise mfusepy.FuseOSError(errno.EIO)
        try:
            return fn(self, *args)
        except mfusepy.FuseOSError:
            raise
        except OSError as e:
            raise mfusepy.FuseOSError(e.errno or errno.EIO) from None
    return wrapper


class LossyOps(mfusepy.Operations):
    """One mount generation's operations over a :class:`Durability`."""

    use_ns = True

    def __init__(self, dur: Durability, trace: Callable[[str], None] | None = None):
        self.dur = dur
        self.down = False
        #: ``--trace``: one line per write, truncate, fsync, fsyncdir and change of names, to see
        #: what the kernel really sends (a JVM's MappedByteBuffer.force, say)
        self.trace = trace
        #: set when the kernel's FUSE_INIT arrived: the mount answers
        self.ready = threading.Event()
        #: the capabilities the kernel and libfuse agreed on (``status`` reports them)
        self.want = 0

    def init_with_config(self, conn: Any, config: Any) -> None:
        """Honest options, set here so no library default decides them: no writeback cache, no
        direct I/O (shared writable mmap needs page-cache I/O), no kernel caching of data or
        attributes across opens, zero attribute and entry timeouts, real unlinks."""
        if conn is not None:
            conn.want &= ~FUSE_CAP_WRITEBACK_CACHE
            self.want = int(conn.want)
        if config is not None:
            config.attr_timeout = 0.0
            config.entry_timeout = 0.0
            config.negative_timeout = 0.0
            config.ac_attr_timeout_set = 0
            config.direct_io = 0
            config.kernel_cache = 0
            config.auto_cache = 0
            config.hard_remove = 1
            config.use_ino = 1
            config.nullpath_ok = 1
        self.ready.set()

    def _name(self, path: str | None, fh: int | None) -> str:
        """For the trace: the mount path, from the handle when libfuse gave none."""
        if path is None and fh is not None:
            try:
                full = os.readlink(f"/proc/self/fd/{fh}")
            except OSError:
                return f"fh:{fh}"
            return "/" + os.path.relpath(full, self.dur.root).lstrip(".") if full != self.dur.root else "/"
        return str(path)

    # -- attributes and reads ------------------------------------------------------------------
    @_op
    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self.dur.full(path or "/"))
        return {"st_mode": st.st_mode, "st_ino": st.st_ino, "st_nlink": st.st_nlink, "st_uid": st.st_uid,
                "st_gid": st.st_gid, "st_size": st.st_size, "st_blocks": st.st_blocks,
                "st_blksize": st.st_blksize, "st_rdev": st.st_rdev, "st_atime": st.st_atime_ns,
                "st_mtime": st.st_mtime_ns, "st_ctime": st.st_ctime_ns}

    @_op
    def opendir(self, path: str) -> int:
        """A backing directory descriptor: readdir and fsyncdir may come without a path."""
        return os.open(self.dur.full(path), os.O_RDONLY | os.O_DIRECTORY)

    def releasedir(self, path: str | None, fh: int) -> int:
        try:
            os.close(fh)
        except OSError:
            pass
        return 0

    @_op
    def readdir(self, path: str | None, fh: int) -> list[tuple[str, dict[str, int], int]]:
        """Names with their inode numbers (``use_ino``: an entry of inode 0 would be skipped by
        the C library's readdir) and types."""
        here = os.fstat(fh)
        out = [(".", {"st_ino": here.st_ino, "st_mode": here.st_mode}, 0),
               ("..", {"st_ino": 1, "st_mode": stat.S_IFDIR}, 0)]
        with os.scandir(fh) as it:
            for e in it:
                if e.name == STATE_DIR and here.st_ino == self.dur.root_ino:
                    continue
                st = e.stat(follow_symlinks=False)
                out.append((e.name, {"st_ino": st.st_ino, "st_mode": st.st_mode}, 0))
        return out

    @_op
    def readlink(self, path: str) -> str:
        return os.readlink(self.dur.full(path))

    @_op
    def access(self, path: str, amode: int) -> int:
        if not os.access(self.dur.full(path), amode, follow_symlinks=False):
            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    @_op
    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self.dur.root)
        return {k: getattr(sv, k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                                             "f_files", "f_ffree", "f_favail", "f_flag", "f_namemax")}

    @_op
    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    # -- opens -----------------------------------------------------------------------------------
    @_op
    def open(self, path: str, flags: int) -> int:
        return self.dur.open(self.dur.full(path), flags)

    @_op
    def create(self, path: str, mode: int, flags: int) -> int:
        if self.trace:
            self.trace(f"create {path}")
        return self.dur.create(self.dur.full(path), flags, mode)

    @_op
    def flush(self, path: str | None, fh: int) -> int:
        return 0   # close(2) commits nothing

    def release(self, path: str | None, fh: int) -> int:
        try:
            self.dur.release(fh)
        except OSError:
            pass
        return 0

    # -- data --------------------------------------------------------------------------------
    @_op
    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        if self.trace:
            self.trace(f"write {self._name(path, fh)} {offset} {len(data)}")
        return self.dur.write(fh, data, offset)

    @_op
    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        if self.trace:
            self.trace(f"truncate {self._name(path, fh)} {length}")
        if fh is not None:
            self.dur.truncate(fh, length)
            return 0
        if path is None:
            raise mfusepy.FuseOSError(errno.EBADF)
        fd = os.open(self.dur.full(path), os.O_RDWR)
        try:
            self.dur.truncate(fd, length)
        finally:
            os.close(fd)
        return 0

    @_op
    def fallocate(self, path: str | None, mode: int, offset: int, size: int, fh: int) -> int:
        if mode != 0:
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
        self.dur.fallocate(fh, offset, size)
        return 0

    @_op
    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        if self.trace:
            self.trace(f"{'fdatasync' if datasync else 'fsync'} {self._name(path, fh)}")
        self.dur.commit_file(fh)
        return 0

    @_op
    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        if self.trace:
            self.trace(f"fsyncdir {self._name(path, fh)}")
        self.dur.commit_dir(fh)
        return 0

    # -- names -------------------------------------------------------------------------------
    @_op
    def mknod(self, path: str, mode: int, dev: int) -> int:
        self.dur.mknod(self.dur.full(path), mode, dev)
        return 0

    @_op
    def mkdir(self, path: str, mode: int) -> int:
        self.dur.mkdir(self.dur.full(path), mode)
        return 0

    @_op
    def rmdir(self, path: str) -> int:
        self.dur.rmdir(self.dur.full(path))
        return 0

    @_op
    def unlink(self, path: str) -> int:
        if self.trace:
            self.trace(f"unlink {path}")
        self.dur.unlink(self.dur.full(path))
        return 0

    @_op
    def symlink(self, target: str, source: str) -> int:
        # mfusepy: symlink(target=the new link's path, source=what it points to)
        self.dur.symlink(source, self.dur.full(target))
        return 0

    @_op
    def link(self, target: str, source: str) -> int:
        # mfusepy: link(target=the new name, source=the existing file)
        self.dur.link(self.dur.full(source), self.dur.full(target))
        return 0

    @_op
    def rename(self, old: str, new: str, flags: int = 0) -> int:
        if self.trace:
            self.trace(f"rename {old} {new}")
        if flags & RENAME_EXCHANGE or flags & ~RENAME_NOREPLACE:
            raise mfusepy.FuseOSError(errno.EINVAL)
        if flags & RENAME_NOREPLACE and os.path.lexists(self.dur.full(new)):
            raise mfusepy.FuseOSError(errno.EEXIST)
        self.dur.rename(self.dur.full(old), self.dur.full(new))
        return 0

    # -- metadata (not tracked: a crash keeps what it is now) ------------------------------------
    # (no path: libfuse gives none only for a file unlinked while open, whose metadata no
    # name will show again)
    @_op
    def chmod(self, path: str | None, mode: int) -> int:
        if path is not None:
            os.chmod(self.dur.full(path), mode)
        return 0

    @_op
    def chown(self, path: str | None, uid: int, gid: int) -> int:
        if path is not None:
            os.chown(self.dur.full(path), uid, gid, follow_symlinks=False)
        return 0

    @_op
    def utimens(self, path: str | None, times: tuple[int, int] | None = None) -> int:
        if path is None:
            return 0
        full = self.dur.full(path)
        if times:
            os.utime(full, ns=times, follow_symlinks=False)
        else:
            os.utime(full, follow_symlinks=False)
        return 0


class LossyFUSE(mfusepy.FUSE):
    """mfusepy's FUSE with rename's flags passed on (mfusepy 3.1 drops them, which would let
    ``RENAME_NOREPLACE`` replace a file), and truncate's file handle (mfusepy 3.1 drops it, so an
    ``ftruncate`` - Java's ``RandomAccessFile.setLength`` - would come with neither a path
    (``nullpath_ok``) nor a handle)."""

    def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
        return self.ftruncate(path, length, fip)

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:  # noqa: D401 - libfuse callback
        return self.operations.rename(old.decode(self.encoding, self.errors),
                                      new.decode(self.encoding, self.errors), flags)
