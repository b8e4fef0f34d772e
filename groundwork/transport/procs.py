"""Shell snippets about remote processes, shared by the SSH and Docker transports.

Why /proc and not ``kill -0``: a SIGKILLed service whose parent has gone is reparented
to the host's init; until init reaps it, it is a zombie that ``kill -0`` (and ``kill``)
still "succeed" on. A zombie is dead for faultline's purposes (same rule as
groundwork.transport.local), so liveness reads the state letter from /proc.
"""
from __future__ import annotations


def alive_script(pid: int) -> str:
    """POSIX sh that exits 0 only when ``pid`` exists and is not a zombie (Linux hosts)."""
    p = int(pid)
    return f"[ -r /proc/{p}/stat ] && ! sed -n 's/^[^)]*) //p' /proc/{p}/stat | grep -q '^Z'"
