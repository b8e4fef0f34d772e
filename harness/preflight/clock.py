"""How far a host's clock is from the harness's, and how sure we are of it.

Why it matters: the run's timeline maps every host's event times (kraftsim's event log, Kafka's
log4j lines) onto the harness's run clock through wall time, so an election logged on a host
whose clock is 300 ms ahead lands 300 ms late on the timeline, past the write it explains.

How, like NTP's offset without its filter: the harness reads its clock (t0), the host reads its
own, the harness reads again (t1); the host read between the two, so its offset is
``remote - (t0 + t1) / 2`` give or take ``(t1 - t0) / 2``. The sample with the shortest round
trip is kept. Over SSH the exchange runs on one open channel with one Python process on the
host answering each line with ``time.time()``: a fresh ``date`` per sample would put the session
set-up and the process start inside every round trip, all of it before the host reads its clock,
which skews the midpoint by half of it (measured here: 130-300 ms round trips, offsets of +half
of them, on a host sharing this machine's clock). A local host (a network namespace) and a
container of a local Docker engine read this machine's own clock: nothing to measure.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from groundwork.transport.base import Transport

#: the host's side of the ping-pong: one line in, its wall clock out (python3 is on every lab
#: host already: the page-cache cut and the disk wipe run as python3 scripts there)
PONG = "import sys, time\nfor _ in sys.stdin:\n    sys.stdout.write(repr(time.time()) + '\\n')\n    sys.stdout.flush()\n"


@dataclass
class Offset:
    offset_ms: float
    uncertainty_ms: float
    how: str


def _same_machine(t: Transport) -> str | None:
    kind = type(t).__name__
    if kind == "LocalTransport":
        return "this machine's clock"
    if kind == "DockerTransport" and os.environ.get("DOCKER_HOST", "unix://").startswith("unix://"):
        return "the local Docker engine's clock (this machine's)"
    return None


def _best(samples: list[tuple[float, float, float]]) -> Offset | None:
    """(t0, remote, t1) samples -> the offset of the one with the shortest round trip."""
    if not samples:
        return None
    t0, remote, t1 = min(samples, key=lambda s: s[2] - s[0])
    return Offset((remote - (t0 + t1) / 2) * 1000, (t1 - t0) / 2 * 1000, "")


def _ping_pong(t: Transport, samples: int) -> Offset | None:
    chan = t.exec_channel(["python3", "-u", "-c", PONG])  # type: ignore[attr-defined]
    chan.settimeout(15)
    buf, got = b"", []
    try:
        for i in range(samples + 1):
            t0 = time.time()
            chan.sendall(b"\n")
            while b"\n" not in buf:
                data = chan.recv(4096)
                if not data:
                    return None          # no python3 there: the caller falls back to date
                buf += data
            t1 = time.time()
            line, buf = buf.split(b"\n", 1)
            if i:                        # the first answer waited for python to start
                got.append((t0, float(line), t1))
    except (OSError, ValueError):
        return None
    finally:
        chan.close()
    off = _best(got)
    if off is not None:
        off.how = "one channel"
    return off


def _one_shot(t: Transport, samples: int) -> Offset | str:
    got = []
    for _ in range(samples):
        t0 = time.time()
        r = t.run(["date", "+%s.%N"], timeout=30)
        t1 = time.time()
        try:
            got.append((t0, float(r.stdout.strip()), t1))
        except ValueError:
            return f"`date +%s.%N` said {(r.stdout or r.stderr).strip()[:60]!r}"
    off = _best(got)
    assert off is not None
    off.how = "date per sample"
    return off


def measure(t: Transport, samples: int = 8) -> Offset | str:
    """The host's clock offset (ms, + = ahead of the harness), or why it could not be read."""
    same = _same_machine(t)
    if same:
        return Offset(0.0, 0.0, same)
    if hasattr(t, "exec_channel"):
        off = _ping_pong(t, samples)
        if off is not None:
            return off
    return _one_shot(t, max(1, samples // 2))
