"""``python -m lossyfs mount|crash|status|unmount``.

- ``mount BACKING MOUNTPOINT --control SOCK [--writeback-ms N] [--foreground] [--log FILE]
  [--trace FILE]``:
  mount BACKING at MOUNTPOINT; without ``--foreground`` the daemon goes to the background and
  this command returns (printing its pid) once the mount answers. Its log: ``--log``, else
  ``SOCK.log``.
- ``crash SOCK``: drop everything not fsynced, remount; prints what was dropped (JSON).
- ``status SOCK``: every file changed since its fsync, size now and durable size (JSON).
- ``unmount MOUNTPOINT``: unmount cleanly - nothing is committed, nothing dropped: the backing
  directory keeps what it holds now.

Exit codes: 0 done; 1 the daemon or the mount failed (one line); 2 bad input (one line naming
what is wrong and what is wanted), never a traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from lossyfs.control import FSTYPE, lossyfs_mounts, mount_dev, request


class Usage(Exception):
    """Bad input: exit 2 with this line."""


class Failed(Exception):
    """The daemon or the mount failed: exit 1 with this line."""


def _mounts() -> str:
    with open("/proc/mounts", encoding="utf-8", errors="surrogateescape") as fh:
        return fh.read()


def _check_mount_args(a: argparse.Namespace) -> None:
    backing, mp, ctl = (os.path.abspath(x) for x in (a.backing, a.mountpoint, a.control))
    if not os.path.isdir(backing):
        raise Usage(f"lossyfs mount: BACKING {a.backing}: not a directory (want an existing directory)")
    if not os.path.isdir(mp):
        raise Usage(f"lossyfs mount: MOUNTPOINT {a.mountpoint}: not a directory (want an existing directory)")
    if backing == mp or backing.startswith(mp + "/") or mp.startswith(backing + "/"):
        raise Usage(f"lossyfs mount: MOUNTPOINT {a.mountpoint} and BACKING {a.backing} overlap "
                    "(want two separate directories)")
    if mount_dev(mp) is not None and any(m == mp for m, _ in lossyfs_mounts(_mounts())):
        raise Usage(f"lossyfs mount: MOUNTPOINT {a.mountpoint}: a lossyfs mount is already there")
    if any(c in ctl for c in ",\\ \t\n"):
        raise Usage(f"lossyfs mount: --control {a.control}: no commas, backslashes or white space "
                    "(the path is the mount's source in /proc/mounts)")
    if not os.path.isdir(os.path.dirname(ctl)):
        raise Usage(f"lossyfs mount: --control {a.control}: its directory does not exist")
    if os.path.exists(ctl):
        try:
            request(ctl, "ping", timeout=2)
        except OSError:
            os.unlink(ctl)   # a dead daemon's socket
        else:
            raise Usage(f"lossyfs mount: --control {a.control}: a daemon answers there already")
    if a.writeback_ms < 0:
        raise Usage(f"lossyfs mount: --writeback-ms {a.writeback_ms}: want 0 (off) or more")


def cmd_mount(a: argparse.Namespace) -> int:
    _check_mount_args(a)
    from lossyfs.daemon import Daemon, log
    d = Daemon(a.backing, a.mountpoint, a.control, a.writeback_ms, a.trace)
    if a.foreground:
        def ready(err: str | None) -> None:
            print(err or f"lossyfs: mounted {d.mountpoint} (pid {os.getpid()})", file=sys.stderr, flush=True)
        return d.serve(ready)
    log_path = a.log or a.control + ".log"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the daemon: its own session, stdio to its log
        os.close(r)
        os.setsid()
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.chdir("/")
        told = False

        def ready(err: str | None) -> None:
            nonlocal told
            if not told:
                told = True
                os.write(w, (f"error {err}\n" if err else "ok\n").encode())
                os.close(w)
        try:
            code = d.serve(ready)
        except BaseException as e:  # noqa: BLE001 - the parent gets one line, the log the traceback
            import traceback
            traceback.print_exc()
            ready(f"{type(e).__name__}: {e}")
            code = 1
        log(f"exit {code}")
        os._exit(code)
    os.close(w)
    with os.fdopen(r) as pipe:
        line = pipe.readline().strip()
    if line != "ok":
        why = line[6:] if line.startswith("error ") else f"the daemon exited ({_exit_status(pid)}; {_last_line(log_path)})"
        raise Failed(f"lossyfs mount: {why} (log: {log_path})")
    print(pid)
    return 0


def _exit_status(pid: int) -> str:
    """How the daemon ended, for the one line a failed mount prints: a daemon that says nothing
    before it exits was either killed (by whom is the question) or saw its mount go away before it
    answered (somebody unmounted it)."""
    deadline = time.monotonic() + 5
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            return f"killed by signal {sig}" if sig is not None else f"exit {os.WEXITSTATUS(status)}"
        if time.monotonic() > deadline:
            return "still running"
        time.sleep(0.05)


def _last_line(path: str) -> str:
    try:
        with open(path, "rb") as f:
            lines = [ln for ln in f.read()[-4096:].decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    return f"its log ends: {lines[-1].strip()}" if lines else "its log is empty"


def cmd_crash(a: argparse.Namespace) -> int:
    reply = _ask(a.control, "crash")
    print(json.dumps(reply, indent=1))
    return 0


def cmd_status(a: argparse.Namespace) -> int:
    print(json.dumps(_ask(a.control, "status"), indent=1))
    return 0


def _ask(control: str, cmd: str) -> dict:
    if not os.path.exists(control):
        raise Usage(f"lossyfs {cmd}: SOCK {control}: no such control socket (want the --control path of a mount)")
    try:
        reply = request(control, cmd)
    except (OSError, ValueError) as e:
        raise Failed(f"lossyfs {cmd}: {control}: the daemon did not answer ({e})") from None
    if not reply.get("ok"):
        raise Failed(f"lossyfs {cmd}: {reply.get('error')}")
    return reply


def cmd_unmount(a: argparse.Namespace) -> int:
    mp = os.path.abspath(a.mountpoint)
    found = [c for m, c in lossyfs_mounts(_mounts()) if m == mp]
    if not found:
        raise Usage(f"lossyfs unmount: MOUNTPOINT {a.mountpoint}: no {FSTYPE} mount there")
    try:
        reply = request(found[-1], "unmount", timeout=40)
        if not reply.get("ok"):
            raise OSError(reply.get("error"))
    except (OSError, ValueError):   # a dead daemon: its mount is detached and its connection aborted
        from lossyfs.daemon import detach
        detach(mp)
        try:
            os.unlink(found[-1])   # its socket (a live daemon removes its own as it exits)
        except OSError:
            pass
    deadline = time.monotonic() + 10
    while any(m == mp for m, _ in lossyfs_mounts(_mounts())):
        if time.monotonic() > deadline:
            raise Failed(f"lossyfs unmount: {mp} is still mounted")
        time.sleep(0.05)
    return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """argparse's usage lines become one line: bad input is one line and exit 2."""
        raise Usage(f"{self.prog}: {message} (see --help)")


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(prog="python -m lossyfs", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("mount", help="mount BACKING at MOUNTPOINT")
    m.add_argument("backing")
    m.add_argument("mountpoint")
    m.add_argument("--control", required=True, help="the control socket's path")
    m.add_argument("--writeback-ms", type=int, default=0,
                   help="commit what has been dirty this long (the kernel's writeback); 0: never")
    m.add_argument("--foreground", action="store_true")
    m.add_argument("--log", help="the daemon's log (default SOCK.log)")
    m.add_argument("--trace", help="append one line per write, truncate, fsync, fsyncdir, create, rename, "
                                   "unlink to this file (to see what the kernel sends)")
    m.set_defaults(fn=cmd_mount)
    for name, fn in (("crash", cmd_crash), ("status", cmd_status)):
        p = sub.add_parser(name)
        p.add_argument("control", metavar="SOCK")
        p.set_defaults(fn=fn)
    u = sub.add_parser("unmount")
    u.add_argument("mountpoint")
    u.set_defaults(fn=cmd_unmount)
    try:
        a = ap.parse_args(argv)
        return a.fn(a)
    except Usage as e:
        print(str(e), file=sys.stderr)
        return 2
    except Failed as e:
        print(str(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
