"""What a crash keeps: the durable state of every file and directory, and how to go back to it.

Why in one place, apart from FUSE: the filesystem (``lossyfs/fs.py``) calls these hooks before it
changes the backing directory, the daemon's ``crash`` calls :meth:`Durability.restore`, and both
must agree on one model of durability - POSIX's, strictly:

- a file's data and size are durable up to its last ``fsync`` / ``fdatasync`` (close, flush and
  release commit nothing);
- a directory's names are durable up to its last ``fsync`` of the directory: a file created, a
  rename, an unlink, a mkdir or rmdir since then is undone by a crash, even if the file itself
  was fsynced.

Nothing is copied until it would be lost: a file is tracked from its first change after a commit
(its durable size is its size then), a directory from its first change of names (its listing then
is the durable one). Bytes below the durable size are saved once, the first time they are
overwritten or truncated away (their pre-image); appends cost nothing. Files and directories that
leave a durable name are moved aside (``BACKING/.lossyfs/aside``) instead of deleted, until the
directories that named them are fsynced.

Objects are known by their backing inode number, which stays theirs while a name or the aside
area holds them, so a rename is followed wherever it goes.
"""
from __future__ import annotations

import bisect
import contextlib
import errno
import os
import shutil
import stat
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

#: lossyfs's own directory at the root of the backing directory (hidden from the mount)
STATE_DIR = ".lossyfs"


@dataclass
class FileState:
    """One file changed since its last commit: its durable size and the pre-images of durable
    bytes overwritten or truncated away since (sorted, non-overlapping ``(start, bytes)``)."""
    durable_size: int
    dirty_since: float = field(default_factory=time.monotonic)
    starts: list[int] = field(default_factory=list)
    saved: list[bytes] = field(default_factory=list)

    def saved_bytes(self) -> int:
        return sum(len(b) for b in self.saved)

    def gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of [start, end) below the durable size not saved yet."""
        end = min(end, self.durable_size)
        if start >= end:
            return []
        out = []
        i = max(bisect.bisect_right(self.starts, start) - 1, 0)
        pos = start
        while pos < end and i < len(self.starts):
            s, e = self.starts[i], self.starts[i] + len(self.saved[i])
            if e <= pos:
                i += 1
                continue
            if s > pos:
                out.append((pos, min(s, end)))
            pos = max(pos, e)
            i += 1
        if pos < end:
            out.append((pos, end))
        return out

    def save(self, start: int, data: bytes) -> None:
        i = bisect.bisect_left(self.starts, start)
        self.starts.insert(i, start)
        self.saved.insert(i, data)


@dataclass
class DirState:
    """One directory whose names changed since its last fsync: the names it durably holds,
    each ``name -> (inode, is_dir)``."""
    durable: dict[str, tuple[int, bool]]
    dirty_since: float = field(default_factory=time.monotonic)


class Durability:
    """The durable state of one backing directory, and the crash that returns to it.

    Every method that changes the backing directory runs under :attr:`lock`, so a crash (or a
    writeback tick) never sees half an operation."""

    def __init__(self, backing: str):
        self.root = os.path.abspath(backing)
        self.state_dir = os.path.join(self.root, STATE_DIR)
        self.aside = os.path.join(self.state_dir, "aside")
        self.lock = threading.RLock()
        self.files: dict[int, FileState] = {}
        self.dirs: dict[int, DirState] = {}
        #: set by :meth:`restore` (the crash): no change lands until the next mount (:meth:`thaw`)
        self.frozen = False
        #: open backing descriptor -> its inode (a descriptor always names one file)
        self.ino_of: dict[int, int] = {}
        # a previous daemon's leftovers: what it kept aside belonged to a durable state nobody
        # knows any more (it died); the backing directory as it is now is the durable state
        shutil.rmtree(self.state_dir, ignore_errors=True)
        os.makedirs(self.aside)
        self.root_ino = os.lstat(self.root).st_ino

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """The lock, for an operation that changes the backing directory: refused (EIO) once a
        crash has begun - an operation that waited for the lock while the crash restored the
        durable state must not land after it."""
        with self.lock:
            if self.frozen:
                raise OSError(errno.EIO, "lossyfs: the machine is down (crash in progress)")
            yield

    # -- paths -------------------------------------------------------------------------------
    def full(self, rel: str) -> str:
        """The backing path of a mount path (``/a/b``); lossyfs's own directory is not in it."""
        rel = rel.lstrip("/")
        if rel.split("/", 1)[0] == STATE_DIR:
            raise FileNotFoundError(2, "reserved by lossyfs", rel)
        return os.path.join(self.root, rel) if rel else self.root

    def _listing(self, path: str) -> dict[str, tuple[int, bool]]:
        out = {}
        with os.scandir(path) as it:
            for e in it:
                if e.name == STATE_DIR and os.path.normpath(path) == self.root:
                    continue
                st = e.stat(follow_symlinks=False)
                out[e.name] = (st.st_ino, stat.S_ISDIR(st.st_mode))
        return out

    # -- file data ---------------------------------------------------------------------------
    def _file(self, ino: int, size_now: int) -> FileState:
        st = self.files.get(ino)
        if st is None:
            st = self.files[ino] = FileState(durable_size=size_now)
        return st

    def _preserve(self, fd: int, st: FileState, start: int, end: int) -> None:
        for a, b in st.gaps(start, end):
            data = os.pread(fd, b - a, a)
            st.save(a, data + bytes(b - a - len(data)))

    def _ino(self, fd: int) -> int:
        ino = self.ino_of.get(fd)
        if ino is None:
            ino = self.ino_of[fd] = os.fstat(fd).st_ino
        return ino

    def release(self, fd: int) -> None:
        """The kernel let go of a handle (close commits nothing)."""
        self.ino_of.pop(fd, None)
        os.close(fd)

    def write(self, fd: int, data: bytes, offset: int) -> int:
        """The hot path: one dict lookup per write once the file is tracked (appends copy nothing)."""
        with self._changing():
            st = self.files.get(self._ino(fd))
            if st is None:
                fs = os.fstat(fd)
                st = self._file(fs.st_ino, fs.st_size)
            if offset < st.durable_size:
                self._preserve(fd, st, offset, offset + len(data))
            return os.pwrite(fd, data, offset)

    def truncate(self, fd: int, length: int) -> None:
        with self._changing():
            fs = os.fstat(fd)
            if length != fs.st_size:
                st = self._file(fs.st_ino, fs.st_size)
                if length < st.durable_size:
                    self._preserve(fd, st, length, st.durable_size)
            os.ftruncate(fd, length)

    def fallocate(self, fd: int, offset: int, length: int) -> None:
        """Mode 0 only: it can only grow the file, so nothing durable is at risk; the growth
        itself is not durable until an fsync."""
        with self._changing():
            fs = os.fstat(fd)
            if offset + length > fs.st_size:
                self._file(fs.st_ino, fs.st_size)
            os.posix_fallocate(fd, offset, length)

    def commit_file(self, fd: int) -> None:
        """fsync / fdatasync: the file's data and size are durable as they are now."""
        with self._changing():
            self.files.pop(self._ino(fd), None)

    # -- names ---------------------------------------------------------------------------------
    def _touch_dir(self, dir_path: str) -> None:
        """Before the first change of names in a directory since its fsync: its listing now is
        the durable one."""
        ino = os.lstat(dir_path).st_ino
        if ino not in self.dirs:
            self.dirs[ino] = DirState(durable=self._listing(dir_path))

    def _referenced(self, ino: int) -> bool:
        return any(ino == e[0] for d in self.dirs.values() for e in d.durable.values())

    def _remove(self, path: str, st: os.stat_result) -> None:
        """Take a name away: what a durable name still holds goes aside, the rest is deleted."""
        is_dir = stat.S_ISDIR(st.st_mode)
        if self._referenced(st.st_ino):
            dest = os.path.join(self.aside, str(st.st_ino))
            if not os.path.lexists(dest):
                os.rename(path, dest)
                return
        if is_dir:
            os.rmdir(path)
        else:
            os.unlink(path)
            if st.st_nlink <= 1:
                self.files.pop(st.st_ino, None)

    def create(self, path: str, flags: int, mode: int) -> int:
        """open(O_CREAT): a new file is durable nowhere, and empty."""
        with self._changing():
            self._touch_dir(os.path.dirname(path))
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
            except FileExistsError:
                if flags & os.O_EXCL:
                    raise
                return self.open(path, flags)
            self.files[os.fstat(fd).st_ino] = FileState(durable_size=0)
            return fd

    def open(self, path: str, flags: int) -> int:
        """open: the backing file is opened read-write whatever the caller asked (the kernel
        reads pages through any handle of a shared mapping, and pre-images are read through
        it), without O_APPEND (the kernel gives the offset); O_TRUNC is a tracked truncate."""
        with self._changing():
            try:
                fd = os.open(path, os.O_RDWR | (flags & os.O_NOFOLLOW))
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.EACCES, errno.EISDIR, errno.EROFS):
                    raise
                fd = os.open(path, flags & ~(os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_APPEND))
            if flags & os.O_TRUNC:
                self.truncate(fd, 0)
            return fd

    def mknod(self, path: str, mode: int, dev: int) -> None:
        with self._changing():
            self._touch_dir(os.path.dirname(path))
            os.mknod(path, mode, dev)
            if stat.S_ISREG(mode):
                self.files[os.lstat(path).st_ino] = FileState(durable_size=0)

    def mkdir(self, path: str, mode: int) -> None:
        with self._changing():
            self._touch_dir(os.path.dirname(path))
            os.mkdir(path, mode)

    def symlink(self, target: str, path: str) -> None:
        with self._changing():
            self._touch_dir(os.path.dirname(path))
            os.symlink(target, path)

    def link(self, existing: str, path: str) -> None:
        with self._changing():
            self._touch_dir(os.path.dirname(path))
            os.link(existing, path)

    def unlink(self, path: str) -> None:
        with self._changing():
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(21, "is a directory", path)
            self._touch_dir(os.path.dirname(path))
            self._remove(path, st)

    def rmdir(self, path: str) -> None:
        with self._changing():
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(20, "not a directory", path)
            if os.listdir(path):
                raise OSError(39, "directory not empty", path)
            self._touch_dir(os.path.dirname(path))
            self._remove(path, st)

    def rename(self, old: str, new: str) -> None:
        with self._changing():
            src = os.lstat(old)
            try:
                dst: os.stat_result | None = os.lstat(new)
            except FileNotFoundError:
                dst = None
            if dst is not None and dst.st_ino == src.st_ino:
                return   # POSIX: two names of one file, nothing happens
            if dst is not None:
                if stat.S_ISDIR(src.st_mode) != stat.S_ISDIR(dst.st_mode):
                    raise (IsADirectoryError(21, "is a directory", new) if stat.S_ISDIR(dst.st_mode)
                           else NotADirectoryError(20, "not a directory", new))
                if stat.S_ISDIR(dst.st_mode) and os.listdir(new):
                    raise OSError(39, "directory not empty", new)
            self._touch_dir(os.path.dirname(old))
            self._touch_dir(os.path.dirname(new))
            if dst is not None:
                self._remove(new, dst)
            os.rename(old, new)

    def commit_dir(self, fd: int) -> None:
        """fsync of a directory (its descriptor): its names are durable as they are now; what
        only its old names held aside is gone for good."""
        with self._changing():
            self.dirs.pop(os.fstat(fd).st_ino, None)
            self._drop_unreferenced()

    def _drop_unreferenced(self) -> None:
        held = {e[0] for d in self.dirs.values() for e in d.durable.values()}
        for name in os.listdir(self.aside):
            if int(name) not in held:
                p = os.path.join(self.aside, name)
                st = os.lstat(p)
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    os.unlink(p)
                    if st.st_nlink <= 1:
                        self.files.pop(st.st_ino, None)

    def thaw(self) -> None:
        """A new mount generation: what is in the backing directory now is durable."""
        with self.lock:
            self.ino_of.clear()
            self.frozen = False

    # -- the kernel's writeback ------------------------------------------------------------------
    def writeback(self, older_than: float) -> int:
        """Commit every file and directory dirty for at least ``older_than`` seconds (the
        kernel writing back old dirty pages, the filesystem's journal committing names).
        Returns how many were committed."""
        with self.lock:
            if self.frozen:
                return 0
            cut = time.monotonic() - older_than
            files = [i for i, s in self.files.items() if s.dirty_since <= cut]
            dirs = [i for i, s in self.dirs.items() if s.dirty_since <= cut]
            for i in files:
                del self.files[i]
            for i in dirs:
                del self.dirs[i]
            if dirs:
                self._drop_unreferenced()
            return len(files) + len(dirs)

    # -- what is pending ---------------------------------------------------------------------
    def _walk(self) -> tuple[dict[int, list[str]], dict[int, os.stat_result]]:
        """Every object of the backing tree (lossyfs's own directory left out): inode -> its
        relative paths, and its stat."""
        where: dict[int, list[str]] = {}
        stats: dict[int, os.stat_result] = {}

        def visit(rel: str) -> None:
            full = os.path.join(self.root, rel) if rel else self.root
            with os.scandir(full) as it:
                entries = sorted(it, key=lambda e: e.name)
            for e in entries:
                if not rel and e.name == STATE_DIR:
                    continue
                st = e.stat(follow_symlinks=False)
                r = f"{rel}/{e.name}" if rel else e.name
                where.setdefault(st.st_ino, []).append(r)
                stats[st.st_ino] = st
                if stat.S_ISDIR(st.st_mode):
                    visit(r)
        visit("")
        return where, stats

    def status(self) -> dict[str, Any]:
        """The truth a later comparison needs: every file changed since its last fsync with
        its size now and its durable size, and every directory with names not yet durable."""
        with self.lock:
            where, stats = self._walk()
            files = []
            for ino, st in sorted(self.files.items(), key=lambda kv: (where.get(kv[0]) or ["~"])[0]):
                paths = where.get(ino)
                files.append({"path": paths[0] if paths else None, "size": stats[ino].st_size if paths else None,
                              "durable_size": st.durable_size, "overwritten_bytes": st.saved_bytes()})
            dirs = []
            for ino, d in self.dirs.items():
                paths = where.get(ino) or ([""] if ino == self.root_ino else [])
                now = self._listing(os.path.join(self.root, paths[0])) if paths else {}
                dirs.append({"path": paths[0] if paths else None,
                             "created": sorted(n for n in now if now[n] != d.durable.get(n)),
                             "removed": sorted(n for n in d.durable if now.get(n) != d.durable[n])})
            return {"files": files, "dirs": sorted(dirs, key=lambda d: d["path"] or "~")}

    # -- the crash ---------------------------------------------------------------------------
    def _durable_tree(self, where: dict[int, list[str]], stats: dict[int, os.stat_result],
                      aside: dict[int, bool]) -> list[tuple[str, int, bool]]:
        """(path, inode, is_dir) of the durable tree, parents first."""
        out: list[tuple[str, int, bool]] = []
        placed_dirs: set[int] = set()

        def listing(ino: int, rel: str) -> dict[str, tuple[int, bool]]:
            if ino in self.dirs:
                return self.dirs[ino].durable
            paths = [""] if ino == self.root_ino else where.get(ino)
            if paths:
                return self._listing(os.path.join(self.root, paths[0]))
            return {}   # a directory aside was empty when it left

        def visit(ino: int, rel: str) -> None:
            for name, (child, is_dir) in sorted(listing(ino, rel).items()):
                r = f"{rel}/{name}" if rel else name
                if is_dir and child in placed_dirs:
                    continue   # one directory cannot be in two places
                out.append((r, child, is_dir))
                if is_dir:
                    placed_dirs.add(child)
                    visit(child, r)
        visit(self.root_ino, "")
        return out

    def restore(self) -> dict[str, Any]:
        """The crash: make the backing directory exactly its durable state, and say what went.

        Content first is impossible (a file's durable place may differ from where it is), so:
        when any directory's names changed, every object is moved into a flat stage by inode,
        the durable tree is built from it (the first name of a file by rename, further names
        by hard link), what the stage still holds is deleted; then every surviving file changed
        since its fsync is cut to its durable size and its pre-images written back."""
        with self.lock:
            self.frozen = True
            t0 = time.monotonic()
            where, stats = self._walk()
            aside: dict[int, bool] = {}
            for name in os.listdir(self.aside):
                st = os.lstat(os.path.join(self.aside, name))
                aside[int(name)] = stat.S_ISDIR(st.st_mode)
                stats.setdefault(int(name), st)
            before = {p: ino for ino, ps in where.items() for p in ps}
            placed: dict[int, str] = {}
            removed: list[dict[str, Any]] = []
            restored: list[str] = []
            moved: list[str] = []
            if self.dirs:
                tree = self._durable_tree(where, stats, aside)
                stage = os.path.join(self.state_dir, "stage")
                os.makedirs(stage)
                # children before parents, so every directory is empty when it moves
                for p in sorted(before, key=lambda p: p.count("/"), reverse=True):
                    ino, dest = before[p], os.path.join(stage, str(before[p]))
                    src = os.path.join(self.root, p)
                    if os.path.lexists(dest):
                        os.unlink(src)
                    else:
                        os.rename(src, dest)
                for ino in aside:
                    src = os.path.join(self.aside, str(ino))
                    if os.path.lexists(os.path.join(stage, str(ino))):
                        os.unlink(src)   # another name of a file the tree still holds
                    else:
                        os.rename(src, os.path.join(stage, str(ino)))
                for rel, ino, is_dir in tree:
                    dest, src = os.path.join(self.root, rel), os.path.join(stage, str(ino))
                    if os.path.lexists(src):
                        os.rename(src, dest)
                        placed.setdefault(ino, rel)
                    elif ino in placed and not is_dir:
                        os.link(os.path.join(self.root, placed[ino]), dest)
                    else:   # cannot happen while every object is kept; said, not hidden
                        raise RuntimeError(f"lossyfs: the durable object of {rel} (inode {ino}) is gone")
                    if before.get(rel) != ino:
                        restored.append(rel)
                for p, ino in sorted(before.items()):
                    if ino in placed:
                        continue
                    st = stats[ino]
                    removed.append({"path": p, **({"size": st.st_size} if stat.S_ISREG(st.st_mode) else
                                                  {"dir": True} if stat.S_ISDIR(st.st_mode) else {})})
                tree_paths = {rel for rel, _, _ in tree}
                moved = sorted(p for p, ino in before.items() if ino in placed and p not in tree_paths)
                shutil.rmtree(stage)
            else:
                placed = {ino: ps[0] for ino, ps in where.items()}
            files = []
            for ino, st in self.files.items():
                rel = placed.get(ino)
                if rel is None:
                    continue
                full = os.path.join(self.root, rel)
                size_before = stats[ino].st_size
                fd = os.open(full, os.O_WRONLY)
                try:
                    os.ftruncate(fd, st.durable_size)
                    for start, data in zip(st.starts, st.saved):
                        os.pwrite(fd, data, start)
                finally:
                    os.close(fd)
                files.append({"path": rel, "size_before": size_before, "durable_size": st.durable_size,
                              "dropped_bytes": max(size_before - st.durable_size, 0),
                              "restored_bytes": st.saved_bytes()})
            self.files.clear()
            self.dirs.clear()
            files.sort(key=lambda f: f["path"])
            # removed: objects no durable name held (with their sizes); restored: durable names
            # brought back; unnamed: names taken away from objects that live on elsewhere
            return {"files": files, "removed": removed, "restored": sorted(restored), "unnamed": moved,
                    "dropped_bytes": sum(f["dropped_bytes"] for f in files)
                    + sum(r.get("size", 0) for r in removed),
                    "seconds": round(time.monotonic() - t0, 3)}
