"""Remote processes through a shell, shared by the SSH and Docker transports.

Both reach their host only through ``run`` (a shell on the far side), so starting a detached
process and telling whether a pid lives are one shell script each, written once here.

Why /proc and not ``kill -0``: a SIGKILLed service whose parent has gone is reparented
to the host's init; until init reaps it, it is a zombie that ``kill -0`` (and ``kill``)
still "succeed" on. A zombie is dead for faultline's purposes (same rule as
groundwork.transport.local), so liveness reads the state letter from /proc.
"""
from __future__ import annotations

import shlex
from typing import Sequence

from groundwork.transport.base import CommandFailed, Transport, to_shell


def alive_script(pid: int) -> str:
    """POSIX sh that exits 0 only when ``pid`` exists and is not a zombie (Linux hosts)."""
    p = int(pid)
    return f"[ -r /proc/{p}/stat ] && ! sed -n 's/^[^)]*) //p' /proc/{p}/stat | grep -q '^Z'"


def spawn_detached(transport: Transport, cmd: str | Sequence[str], *, log_path: str, sudo: bool,
                   env: dict[str, str] | None = None) -> int:
    """Start ``cmd`` detached on the transport's host and return its pid there: ``nohup setsid``
    gives it its own session, immune to the channel (ssh) or exec (docker) that started it
    ending, and output is appended to ``log_path`` (its directory created). ``env`` values
    are quoted for the shell; the command is ``exec``ed so the pid is the process's own."""
    envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    inner = "exec " + (f"env {envs} " if envs else "") + to_shell(cmd)
    logq = shlex.quote(log_path)
    script = (f"mkdir -p \"$(dirname {logq})\" && nohup setsid sh -c {shlex.quote(inner)} "
              f">>{logq} 2>&1 </dev/null & echo $!")
    r = transport.run(script, sudo=sudo, timeout=30)
    pid = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    if not r.ok or not pid.isdigit():
        raise CommandFailed(r)
    return int(pid)
