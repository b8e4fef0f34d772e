"""On-host lossyfs client (stdlib only; run as ``python3 - COMMAND ARG`` with this file on stdin).

Why a script of its own: the reboot nemesis, preflight, heal and the launchers reach a host
only through its transport (local, SSH, Docker); this speaks the lossyfs control protocol
(one JSON line each way over the mount's unix socket, lossyfs/control.py) where the socket is,
without lossyfs or its FUSE binding installed there.

Commands (output: one JSON line on stdout; errors: one line on stderr, exit 1):

- ``mounts``: every lossyfs mount of the host ``[{"mountpoint", "control", "answers"}]`` from
  /proc/mounts (type ``fuse.lossyfs``, source ``lossyfs:<control socket>``);
- ``crash SOCK`` / ``status SOCK``: the daemon's answer;
- ``unmount MOUNTPOINT``: ask the daemon to unmount; if it does not answer (a dead run's
  daemon), detach the mount (``fusermount3 -u -z``, else ``umount -l``) and remove its dead
  control socket. ``{"unmounted": bool}``
  (false: nothing of lossyfs was mounted there).
"""
import json
import os
import socket
import stat
import subprocess
import sys


def ask(sock_path, cmd, timeout=120.0):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(json.dumps({"cmd": cmd}).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    if not buf:
        raise OSError("the daemon closed the connection without answering")
    return json.loads(buf)


def unescape(field):
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit() and len(field[i + 1:i + 4]) == 3:
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts():
    out = []
    with open("/proc/mounts", encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "fuse.lossyfs" and parts[0].startswith("lossyfs:"):
                out.append({"mountpoint": unescape(parts[1]), "control": unescape(parts[0][len("lossyfs:"):])})
    return out


def answers(control):
    try:
        return bool(ask(control, "ping", timeout=5).get("ok"))
    except (OSError, ValueError):
        return False


def unmount(mountpoint):
    mp = os.path.abspath(mountpoint)
    found = [m for m in mounts() if m["mountpoint"] == mp]
    if not found:
        return {"unmounted": False}
    control = found[-1]["control"]
    dead = False
    try:
        reply = ask(control, "unmount", timeout=40)
        ok = reply.get("ok")
    except (OSError, ValueError):
        ok, dead = False, True
    if not ok or any(m["mountpoint"] == mp for m in mounts()):
        r = subprocess.run(["fusermount3", "-u", "-z", mp], capture_output=True, text=True)
        if r.returncode != 0:
            r = subprocess.run(["umount", "-l", mp], capture_output=True, text=True)
        if r.returncode != 0 and any(m["mountpoint"] == mp for m in mounts()):
            raise OSError(f"cannot unmount {mp}: {r.stderr.strip()}")
    if dead:
        remove_dead_socket(control)
    return {"unmounted": True}


def remove_dead_socket(path):
    """A dead daemon's control socket (a live daemon removes its own as it exits): removed
    only if it is a socket and nothing answers on it."""
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            return
        ask(path, "ping", timeout=2)
    except (OSError, ValueError):
        try:
            os.unlink(path)
        except OSError:
            pass


def main(argv):
    if not argv or argv[0] not in ("mounts", "crash", "status", "unmount") or (argv[0] != "mounts" and len(argv) != 2):
        print("usage: lossyfs_control.py mounts | crash SOCK | status SOCK | unmount MOUNTPOINT", file=sys.stderr)
        return 2
    try:
        if argv[0] == "mounts":
            out = [dict(m, answers=answers(m["control"])) for m in mounts()]
        elif argv[0] == "unmount":
            out = unmount(argv[1])
        else:
            out = ask(argv[1], argv[0])
            if not out.get("ok"):
                raise OSError(out.get("error") or "the daemon refused")
    except (OSError, ValueError) as e:
        print(f"lossyfs {argv[0]} {' '.join(argv[1:])}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
