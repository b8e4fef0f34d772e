"""The control socket's protocol and what lossyfs reads of the host's mounts.

One request per connection: a JSON line ``{"cmd": "crash"|"status"|"unmount"|"ping"}``, answered
by one JSON line when the command is done (``{"ok": true, ...}`` or ``{"ok": false, "error":
"..."}``). A unix socket, so only the host's own users reach it, through any transport that can
run a command there.

The mount names its control socket as its source (``lossyfs:/path/ctl.sock`` in
``/proc/mounts``, type ``fuse.lossyfs``), so whoever finds the mount finds the daemon, with no
state of its own.
"""
from __future__ import annotations

import json
import socket
from typing import Any

FSTYPE = "fuse.lossyfs"
SOURCE_PREFIX = "lossyfs:"


def request(sock_path: str, cmd: str, timeout: float = 120.0) -> dict[str, Any]:
    """Send one command and wait for its answer (raises OSError when nobody answers)."""
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
        raise ConnectionError(f"{sock_path}: the daemon closed the connection without answering")
    return json.loads(buf)


def unescape(field: str) -> str:
    """/proc/mounts escapes space, tab, newline and backslash as octal (``\\040``)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def lossyfs_mounts(mounts_text: str) -> list[tuple[str, str]]:
    """(mountpoint, control socket) of every lossyfs mount in a /proc/mounts text."""
    out = []
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] == FSTYPE and parts[0].startswith(SOURCE_PREFIX):
            out.append((unescape(parts[1]), unescape(parts[0][len(SOURCE_PREFIX):])))
    return out


def mount_dev(mountpoint: str) -> int | None:
    """The device number (kernel encoding: major << 20 | minor) of the mount at ``mountpoint``
    in this process's mount namespace, from /proc/self/mountinfo; None when nothing is mounted
    there. It names the FUSE connection under /sys/fs/fuse/connections."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
        found = None
        for line in fh:
            parts = line.split()
            if len(parts) > 4 and unescape(parts[4]) == mountpoint:
                major, minor = (int(x) for x in parts[2].split(":"))
                found = (major << 20) | minor   # the last mount at a path is the one on top
    return found
