"""lossyfs on a host, through its transport: find the mounts under a node's dirs, crash them,
mount and unmount them for a run (ledger first), and unmount what a dead run left.

Why here, on the nemeses floor: the reboot nemesis (``mode: lossyfs``), preflight, heal and
the launchers of a target all need the same few operations, and each must work through any
transport (local, SSH, Docker). Everything but ``mount`` runs the stdlib script
``nemeses/scripts/lossyfs_control.py`` with the host's ``python3``, so a host needs lossyfs
itself (``python -m lossyfs``, with mfusepy and libfuse3) only where something is mounted.
faultline never imports lossyfs: the mount's own entry in /proc/mounts (source
``lossyfs:<control socket>``, type ``fuse.lossyfs``) is how a mount is found, by anyone.

A mount made for a run is a ledger entry of kind ``mount`` written before the mount exists
(as ``process`` entries are written before the process starts), so ``faultline heal`` and
the next run unmount it after a crash of the harness (:func:`heal_mount`).
"""
from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
import sys
from dataclasses import dataclass
from typing import Any

from groundwork.ledger import Ledger, new_id
from groundwork.transport.base import Transport, TransportError
from groundwork.transport.local import LocalTransport
from nemeses.scripts import script_text

#: the ledger entry kind of a mount made for a run
LEDGER_KIND = "mount"


@dataclass(frozen=True)
class LossyMount:
    mountpoint: str
    control: str
    backing: str | None = None
    #: the ledger entry that unmounts it after a crash (None: not made for a run)
    ledger_id: str | None = None


def _script(transport: Transport, *args: str, timeout: float = 150) -> Any:
    res = transport.run(["python3", "-", *args], input=script_text("lossyfs_control.py"), sudo=True,
                        timeout=timeout)
    if not res.ok:
        err = (res.stderr.strip().splitlines() or [f"lossyfs {args[0]} failed (exit {res.exit_code})"])[-1]
        raise TransportError(f"{transport.name}: {err}")
    return json.loads(res.stdout)


def mounts(transport: Transport) -> list[LossyMount]:
    """Every lossyfs mount of the host (its /proc/mounts)."""
    text = transport.read_text("/proc/mounts") or ""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "fuse.lossyfs" and parts[0].startswith("lossyfs:"):
            out.append(LossyMount(_unescape(parts[1]), _unescape(parts[0][len("lossyfs:"):])))
    return out


def _unescape(field: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash as three octal digits."""
    out, i = [], 0
    while i < len(field):
        code = field[i + 1:i + 4]
        if field[i] == "\\" and len(code) == 3 and code.isdigit():
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def covering(found: list[LossyMount], path: str) -> LossyMount | None:
    """The lossyfs mount ``path`` lies on: the deepest mountpoint that is ``path`` or above it
    (paths as the host names them; a symlink into a mount is not followed)."""
    p = posixpath.normpath(path)
    best = None
    for m in found:
        mp = posixpath.normpath(m.mountpoint)
        if (p == mp or p.startswith(mp.rstrip("/") + "/")) and (best is None or len(mp) > len(best.mountpoint)):
            best = m
    return best


def mounts_under(transport: Transport, dirs: list[str], host: str) -> list[LossyMount]:
    """The lossyfs mounts holding ``dirs``, each once; raises ValueError (one line) naming the
    dirs that are on no lossyfs mount."""
    found = mounts(transport)
    out: list[LossyMount] = []
    missing = []
    for d in dirs:
        m = covering(found, d)
        if m is None:
            missing.append(d)
        elif m not in out:
            out.append(m)
    if missing:
        raise ValueError(f"{host}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} on no lossyfs mount "
                         "(mount them with python -m lossyfs, or use mode: truncate-unflushed)")
    return out


def crash(transport: Transport, m: LossyMount) -> dict[str, Any]:
    """Crash one mount: the daemon restores the durable state and remounts; its report."""
    return _script(transport, "crash", m.control)["crash"]


def status(transport: Transport, m: LossyMount) -> dict[str, Any]:
    """Per file: size now and durable size (the truth a later comparison needs)."""
    return _script(transport, "status", m.control)


def default_control(mountpoint: str) -> str:
    """A control socket path short enough for a unix socket (108 bytes) wherever the mount is."""
    return f"/tmp/lossyfs-{hashlib.sha1(posixpath.normpath(mountpoint).encode()).hexdigest()[:12]}.sock"


def mount(transport: Transport, backing: str, mountpoint: str, *, ledger: Ledger | None = None,
          control: str | None = None, python: str = "python3", writeback_ms: int = 0,
          host: str | None = None, inventory: str = "", cwd: str | None = None) -> LossyMount:
    """Mount ``backing`` at ``mountpoint`` for a run: the ledger entry first (kind ``mount``),
    then ``python -m lossyfs mount`` on the host (``python`` must import lossyfs there; ``cwd``
    where to run it, e.g. a checkout). Returns once the mount answers; raises TransportError
    with the daemon's one line otherwise (and the entry is closed: nothing was mounted)."""
    control = control or default_control(mountpoint)
    eid = new_id("m")
    record = {"what": "lossyfs mount", "mountpoint": mountpoint, "backing": backing, "control": control,
              "host": host}
    if ledger is not None:
        ledger.apply(eid, LEDGER_KIND, record, inventory=inventory)
    # the daemon's log beside the mountpoint (a node's directory, collected with the run), not
    # beside its socket in /tmp, where every mount of every run would leave one
    argv = [python, "-m", "lossyfs", "mount", backing, mountpoint, "--control", control,
            "--log", posixpath.join(posixpath.dirname(posixpath.normpath(mountpoint)), "lossyfs.log")]
    if writeback_ms:
        argv += ["--writeback-ms", str(int(writeback_ms))]
    cmd = " ".join(_q(a) for a in argv)
    res = transport.run(f"cd {_q(cwd)} && {cmd}" if cwd else cmd, sudo=True, timeout=90)
    if not res.ok:
        if ledger is not None:
            unmount(transport, LossyMount(mountpoint, control, backing, eid), ledger=ledger)
        err = (res.stderr.strip().splitlines() or [f"exit {res.exit_code}"])[-1]
        raise TransportError(f"{host or transport.name}: lossyfs mount {mountpoint}: {err}")
    return LossyMount(mountpoint, control, backing, eid if ledger is not None else None)


def _q(s: str) -> str:
    return shlex.quote(str(s))


def unmount(transport: Transport, m: LossyMount | str, *, ledger: Ledger | None = None) -> bool:
    """Unmount cleanly (nothing committed, nothing dropped); a mount already gone is fine.
    Closes its ledger entry. Returns whether something was unmounted."""
    mp = m if isinstance(m, str) else m.mountpoint
    done = bool(_script(transport, "unmount", mp, timeout=90).get("unmounted"))
    if ledger is not None and not isinstance(m, str) and m.ledger_id:
        ledger.healed(m.ledger_id)
    return done


def heal_mount(record: dict[str, Any], transport: Transport) -> bool:
    """The heal of a ``mount`` ledger entry (a dead run's mount): unmount it if it is there."""
    return unmount(transport, str(record["mountpoint"]))


def dead_mounts(transport: Transport) -> list[str]:
    """The mountpoints of the host's lossyfs mounts whose daemon no longer answers (a dead run's,
    or a daemon killed by hand): every access under them fails with ``Transport endpoint is not
    connected``, so a log dir there looks missing and no one can create it."""
    return [m["mountpoint"] for m in _script(transport, "mounts") if not m["answers"]]


def unmount_dead(transport: Transport) -> list[str]:
    """Unmount every lossyfs mount of the host whose daemon no longer answers (a dead run's,
    left without a ledger). Returns their mountpoints."""
    gone = dead_mounts(transport)
    for mp in gone:
        _script(transport, "unmount", mp, timeout=90)
    return gone


#: Kafka's segment files (``<20-digit base offset>.log``): the files whose kept size says which
#: records survived a crash
SEGMENT_SUFFIX = ".log"


def crash_summary(report: dict[str, Any]) -> dict[str, Any]:
    """What the timeline keeps of one mount's crash: every file cut (its size before, its
    durable size, bytes dropped, pre-image bytes written back), every segment file left whole
    (``kept``: path and size - with ``files``, what every segment holds after the crash, so which
    offsets survived is read from the record batches), every path removed (with its size) and
    every durable name restored. Other files left whole (indexes, checkpoints) are not listed:
    a broker of many partitions has thousands."""
    return {"dropped_bytes": int(report.get("dropped_bytes") or 0), "files": report.get("files", []),
            "kept": [f for f in report.get("kept", []) if str(f.get("path", "")).endswith(SEGMENT_SUFFIX)],
            "removed": report.get("removed", []), "restored": report.get("restored", []),
            "unnamed": report.get("unnamed", [])}


class RunDisks:
    """The disks of an embedded cluster's nodes as lossyfs mounts, for the launcher to make and
    remove (targets/apache_kafka.py ``Disks``): on this machine, each mount its own ledger entry
    written before it exists, so a harness that dies leaves nothing `faultline heal` cannot unmount.

    ``writeback_ms``: lossyfs's stand-in for the kernel's flushing of dirty pages (0, the default:
    nothing reaches the disk but what Kafka fsyncs, LazyFS's worst case)."""

    def __init__(self, ledger: Ledger, *, writeback_ms: int = 0, python: str | None = None,
                 inventory: str = ""):
        self.transport = LocalTransport("this machine")
        self.ledger, self.writeback_ms, self.inventory = ledger, writeback_ms, inventory
        self.python = python or sys.executable

    def mount(self, backing: Any, mountpoint: Any) -> LossyMount:
        return mount(self.transport, str(backing), str(mountpoint), ledger=self.ledger, python=self.python,
                     writeback_ms=self.writeback_ms, inventory=self.inventory)

    def unmount(self, handle: LossyMount) -> None:
        unmount(self.transport, handle, ledger=self.ledger)
