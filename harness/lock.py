"""The lab lock: one faultline run per target at a time.

Why: nightly jobs share a lab. Two runs on one cluster would inject faults into each other's
workloads (a verdict of one is then about faults it never recorded), and the second run's
start-up heal could undo the first one's faults if the first looked dead. So a run on a lab
takes the lock *before* it heals leftovers or sets anything up, and gives it back once its
own heal is done (before the checker, which does not touch the lab). A second run on the
same target exits at once (exit 3) with one line naming the holder, or waits (``--wait``).

What "the same target" is: every host of the inventory (ssh: its resolved address and port;
docker: the engine and container; local: the network namespace, else the listener) and the
inventory's ``kafka_cluster_id`` when it has one. Each is one lock file; a run takes all of
them or none, so two inventories that share any host (a subset, another file naming the
same machines) exclude each other, which is what matters for faults. The embedded target
(``faultline_embedded``) starts a fresh cluster per run in its own run directory: no lock.

Where and how: one JSON file per key in ``STATE/locks/`` (``groundwork.ledger.state_dir``,
beside the heal ledger, so it is found without knowing which run took it). A short
``flock`` on ``STATE/locks/.guard`` makes "check every key, then write every key" atomic
between processes. A holder is a faultline process (pid + kernel start time, the heal
ledger's owner, harness.heal.owner_alive), so a run killed by SIGKILL leaves a lock that the
next run takes over and ``faultline heal`` removes once it sees the holder is gone; a
recycled pid is not mistaken for the holder. The lock is per harness machine: jobs that share
a lab must run from one machine (or one state dir on it).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from groundwork.ledger import Ledger, state_dir
from harness.heal import owner, owner_alive
from harness.inventory import HostSpec, Inventory, _listener_hostport

GUARD = ".guard"


def lock_dir() -> Path:
    d = state_dir() / "locks"
    d.mkdir(parents=True, exist_ok=True)
    return d


@dataclass
class Holder:
    """Who holds a lab: the faultline process, its run directory, since when, for what."""
    pid: int
    start: str | None
    since: float
    inventory: str
    command: str
    run_dir: str | None = None
    keys: list[str] = field(default_factory=list)

    def alive(self) -> bool:
        """Whether the holding process still runs (False for this very process)."""
        return owner_alive({"owner": {"pid": self.pid, "start": self.start}})

    def is_me(self) -> bool:
        me = owner()
        return self.pid == me["pid"] and self.start == me["start"]

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        what = f"run {self.run_dir}" if self.run_dir else f"`{self.command}` (setting up)"
        return f"{what} (pid {self.pid}, since {when})"

    @classmethod
    def from_json(cls, doc: dict) -> "Holder":
        return cls(pid=int(doc["pid"]), start=doc.get("start"), since=float(doc.get("since", 0)),
                   inventory=str(doc.get("inventory", "")), command=str(doc.get("command", "")),
                   run_dir=doc.get("run_dir"), keys=list(doc.get("keys") or []))


class LockHeld(RuntimeError):
    """The lab is in use by another live run (one line naming it)."""

    def __init__(self, holder: Holder, inventory: str, waited: float | None = None):
        self.holder = holder
        waited_s = f" after waiting {waited:.0f}s" if waited is not None else ""
        hint = "" if waited is not None else "; `faultline run --wait` waits for it"
        super().__init__(f"{inventory}: the lab is in use by {holder.describe()}{waited_s}{hint}")


# --- what a target is -----------------------------------------------------------------------

def _resolved(address: str) -> str:
    """A host name as the address it resolves to (two names for one machine are one lab host);
    the name itself when it does not resolve here."""
    try:
        return sorted({ai[4][0] for ai in socket.getaddrinfo(address, None, type=socket.SOCK_STREAM)})[0]
    except (OSError, IndexError, UnicodeError):
        return address


def host_key(inv: Inventory, spec: HostSpec) -> str:
    if inv.transport == "ssh":
        return f"ssh:{_resolved(spec.address)}:{spec.port or 22}"
    if inv.transport == "docker":
        return f"docker:{os.environ.get('DOCKER_HOST', 'local')}:{spec.container}"
    if spec.netns:
        return f"netns:{spec.netns}"
    hp = _listener_hostport(spec.listeners) if spec.listeners else None
    return f"local:{hp[0]}:{hp[1]}" if hp else f"local:{spec.address}:{spec.name}"


def target_keys(inv: Inventory) -> list[str]:
    """What a run on ``inv`` locks: each host, and the cluster id; none for the embedded target."""
    if inv.embedded:
        return []
    keys = {host_key(inv, s) for s in inv.hosts.values()}
    if inv.cluster_id:
        keys.add(f"kafka-cluster:{inv.cluster_id}")
    return sorted(keys)


def _file(directory: Path, key: str) -> Path:
    return directory / (hashlib.sha256(key.encode()).hexdigest()[:24] + ".json")


@contextlib.contextmanager
def _guard(directory: Path) -> Iterator[None]:
    fd = os.open(directory / GUARD, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the flock


def _read(path: Path) -> Holder | None:
    try:
        return Holder.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: Path, holder: Holder, key: str) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({**asdict(holder), "key": key}) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# --- the lock -------------------------------------------------------------------------------------

class LabLock:
    """The lock of one inventory's target, taken by this process."""

    def __init__(self, inv: Inventory, *, directory: Path | None = None):
        self.inventory = str(inv.path)
        self.keys = target_keys(inv)
        self.dir = directory or lock_dir()
        self.mine: Holder | None = None
        #: dead holders whose lock this one took over (their runs were killed)
        self.took_over: list[Holder] = []

    def holder(self) -> Holder | None:
        """The live holder of any of this target's keys (None: free, or only dead holders)."""
        for k in self.keys:
            h = _read(_file(self.dir, k))
            if h is not None and h.alive():
                return h
        return None

    def try_acquire(self, command: str, run_dir: str | None = None) -> Holder | None:
        """Take every key (over dead holders); None when taken, else the live holder."""
        with _guard(self.dir):
            stale: dict[tuple[int, str | None], Holder] = {}
            for k in self.keys:
                h = _read(_file(self.dir, k))
                if h is None or h.is_me():
                    continue
                if h.alive():
                    return h
                stale[(h.pid, h.start)] = h
            me = owner()
            self.mine = Holder(pid=me["pid"], start=me["start"], since=time.time(), inventory=self.inventory,
                               command=command, run_dir=run_dir, keys=list(self.keys))
            for k in self.keys:
                _write(_file(self.dir, k), self.mine, k)
            self.took_over = list(stale.values())
            return None

    def acquire(self, command: str, *, wait: bool = False, timeout: float | None = None,
                say: Callable[[str], None] = lambda s: None, poll: float = 1.0,
                report_every: float = 30.0) -> None:
        """Take the lock, or raise :class:`LockHeld`; with ``wait``, poll until it is free (or
        ``timeout`` seconds pass), saying who holds it now and then."""
        t0 = time.monotonic()
        last_said = -report_every
        while True:
            h = self.try_acquire(command)
            if h is None:
                for d in self.took_over:
                    say(f"took over the lab lock of {d.describe()}: that faultline process is gone")
                return
            waited = time.monotonic() - t0
            if not wait:
                raise LockHeld(h, self.inventory)
            if timeout is not None and waited >= timeout:
                raise LockHeld(h, self.inventory, waited)
            if waited - last_said >= report_every:
                last_said = waited
                say(f"waiting for the lab ({waited:.0f}s): in use by {h.describe()}")
            time.sleep(poll)

    def set_run_dir(self, run_dir: str | Path) -> None:
        """Name the run directory in the lock once it exists (who holds it, for the next run)."""
        if self.mine is None:
            return
        with _guard(self.dir):
            self.mine.run_dir = str(run_dir)
            for k in self.keys:
                h = _read(_file(self.dir, k))
                if h is not None and h.is_me():
                    _write(_file(self.dir, k), self.mine, k)

    def release_if_healed(self, ledger: Ledger) -> bool:
        """Give the lab back once this process has nothing open in the heal ledger (its run loop
        healed every fault and stopped its processes). A fault that failed to heal keeps the
        lab locked until this process ends; the next run then takes the lock over and heals
        it as a dead run's leftover, instead of starting on a lab with it still applied."""
        me = owner()
        if any((e.get("owner") or {}) == me for e in ledger.open_entries()):
            return False
        self.release()
        return True

    def release(self) -> None:
        """Give the lab back (only the keys this process holds; safe to call twice)."""
        if self.mine is None:
            return
        with _guard(self.dir):
            for k in self.keys:
                f = _file(self.dir, k)
                h = _read(f)
                if h is not None and h.is_me():
                    f.unlink(missing_ok=True)
        self.mine = None


def lab_lock(inv: Inventory) -> LabLock | None:
    """The lock a run on ``inv`` takes; None for the embedded target (a fresh cluster per run)."""
    return LabLock(inv) if target_keys(inv) else None


def holders(directory: Path | None = None) -> list[Holder]:
    """Every live holder of some lab (one per process)."""
    d = directory or lock_dir()
    out: dict[tuple[int, str | None], Holder] = {}
    for f in sorted(d.glob("*.json")):
        h = _read(f)
        if h is not None and h.alive():
            out[(h.pid, h.start)] = h
    return list(out.values())


def clear_stale(directory: Path | None = None) -> list[Holder]:
    """Remove the locks of faultline processes that are gone (``faultline heal``); returns them."""
    d = directory or lock_dir()
    gone: dict[tuple[int, str | None], Holder] = {}
    with _guard(d):
        for f in sorted(d.glob("*.json")):
            h = _read(f)
            if h is None or (not h.alive() and not h.is_me()):
                f.unlink(missing_ok=True)
                if h is not None:
                    gone[(h.pid, h.start)] = h
    return list(gone.values())
