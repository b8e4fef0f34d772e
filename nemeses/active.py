"""The faults one schedule has applied and not yet healed: where a fault starts and stops.

Why a module of its own: the interpreter (:mod:`nemeses.schedule_runner`) decides *when* and
*on what* a fault starts; this decides what starting and stopping one fault means (one nemesis
instance per fault kind, set up once; the record kept under a name until it is healed; an
automatic stop after its duration; every heal attempted even when one fails). Every start and
stop of a schedule goes through :meth:`ActiveFaults.start` and :meth:`ActiveFaults.stop`, so
the handling of one fault's outcome - and several faults overlapping, each with its own
targets, start and duration - has exactly one place to live.

The ledger and the timeline are written by the nemesis itself (``Nemesis.begin``/``end``):
ledger first, so a run killed at any point is healed by `faultline heal`.

Overlapping faults (docs/nemeses.md, "Overlapping faults"): faults compose unless they would
undo each other. A fault that claims what an applied one has to itself (``Nemesis.exclusive``:
the proxy's hold, an interface's root qdisc) is refused (:class:`FaultConflict`). Two faults
keeping one broker down (``Nemesis.keeps_down``) each heal, but only the last one's heal
starts the broker again (``NemesisContext.service_holders``, answered by :meth:`holders_of`).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from nemeses.base import REGISTRY, FaultRecord, Nemesis, NemesisContext


class FaultConflict(ValueError):
    """A fault cannot start while another applied one holds what it needs (one line)."""


@dataclass
class ActiveFault:
    """One applied fault: its nemesis, its record (the ledger entry), the name a step gave it
    (or an automatic one) and the monotonic time it stops on its own, if any."""
    nemesis: Nemesis
    record: FaultRecord
    name: str
    started_wall: float
    stop_at: float | None = None


class ActiveFaults:
    """Start, stop and heal the faults of one schedule; implements ``nemeses.base.FaultsView``
    for the conditions nemesis modules register. Thread-safe: the run loop heals from its
    ``finally`` while the schedule thread may still be starting a fault."""

    def __init__(self, ctx: NemesisContext, *, registry: Mapping[str, type[Nemesis]] = REGISTRY,
                 on_change: Callable[[str], None] | None = None):
        self.ctx = ctx
        self.registry = registry
        self.on_change = on_change or (lambda s: None)
        self.nemeses: dict[str, Nemesis] = {}
        self.applied: dict[str, ActiveFault] = {}
        #: host -> wall time a fault last hit it (``restarted`` waits for a registration after it)
        self.last_hit_wall: dict[str, float] = {}
        self._lock = threading.RLock()
        self._seq = 0
        if ctx.service_holders is None:
            ctx.service_holders = self.holders_of

    def nemesis(self, fault: str) -> Nemesis:
        """The one instance of a fault kind for this schedule, set up on first use."""
        with self._lock:
            if fault not in self.nemeses:
                n = self.registry[fault]()
                n.setup(self.ctx)
                self.nemeses[fault] = n
            return self.nemeses[fault]

    def start(self, fault: str, targets: list[str], params: dict[str, Any], name: str | None = None,
              duration: float | None = None) -> ActiveFault:
        """Apply one fault now; with ``duration`` it is stopped by :meth:`stop_due` after that long.
        Raises :class:`FaultConflict` (nothing applied) when an applied fault holds what it needs."""
        with self._lock:
            why = self.conflict(fault, targets, params)
            if why:
                raise FaultConflict(why)
            self._seq += 1
            name = name or f"{fault}-{self._seq}"
            nem = self.nemesis(fault)
            rec = nem.start(list(targets), **params)
            wall = time.time()
            for t in targets:
                self.last_hit_wall[t] = wall
            a = ActiveFault(nem, rec, name, wall, None if duration is None else time.monotonic() + duration)
            self.applied[name] = a
            self._changed()
            return a

    def stop(self, name: str) -> None:
        """Heal the fault applied as ``name`` (nothing when none is)."""
        with self._lock:
            a = self.applied.pop(name, None)
            if a is None:
                return
            try:
                a.nemesis.stop(a.record)
            finally:
                self._changed()

    def stop_all(self) -> None:
        """Heal every applied fault, newest first (``stop: all``); the first failure raises."""
        for name in reversed(list(self.applied)):
            self.stop(name)

    def stop_due(self) -> None:
        """Heal every fault whose duration has run out."""
        now = time.monotonic()
        for name, a in list(self.applied.items()):
            if a.stop_at is not None and now >= a.stop_at:
                self.stop(name)

    def heal_all(self) -> list[str]:
        """Stop every applied fault, newest first, and tear every nemesis down; returns one
        line per failure (and goes on, so one failed heal never leaves the others applied)."""
        errors = []
        for name in reversed(list(self.applied)):
            try:
                self.stop(name)
            except Exception as e:  # noqa: BLE001 - heal everything we can, report the rest
                errors.append(f"{name}: {type(e).__name__}: {e}")
                self.applied.pop(name, None)
        for n in self.nemeses.values():
            try:
                n.teardown()
            except Exception as e:  # noqa: BLE001
                errors.append(f"teardown {n.name}: {e}")
        return errors

    # -- overlapping faults -----------------------------------------------------------------
    def conflict(self, fault: str, targets: list[str], params: dict[str, Any], *,
                 one_service_fault_per_host: bool = False) -> str | None:
        """Why ``fault`` on ``targets`` cannot start now, or None. Always: an applied fault has
        what it claims (``Nemesis.exclusive``). With ``one_service_fault_per_host`` (random
        mixes) also: an applied fault already acts on the Kafka process of one of its hosts."""
        with self._lock:
            nem = self.nemesis(fault)
            claims = nem.exclusive(list(targets), dict(params))
            for a in self.applied.values():
                shared = claims & a.nemesis.exclusive(a.record.targets, a.record.params)
                if shared:
                    return (f"{fault} on {'+'.join(targets) or '*'}: {a.name} ({a.record.fault}) already holds "
                            f"{', '.join(sorted(shared))}; heal it first")
                if one_service_fault_per_host and nem.acts_on_service and a.nemesis.acts_on_service:
                    both = [t for t in targets if t in a.record.targets]
                    if both:
                        return f"{fault} on {'+'.join(both)}: {a.name} ({a.record.fault}) already acts on its process"
            return None

    def holders_of(self, host: str, fault_id: str) -> list[str]:
        """The applied faults other than ``fault_id`` that keep ``host``'s service down."""
        with self._lock:
            return [a.name for a in self.applied.values()
                    if a.record.id != fault_id and host in a.nemesis.keeps_down(a.record)]

    def active_fault(self, name: str) -> tuple[Nemesis, FaultRecord] | None:
        a = self.applied.get(name)
        return (a.nemesis, a.record) if a is not None else None

    def _changed(self) -> None:
        self.on_change(", ".join(f"{a.record.fault}→{'+'.join(a.record.targets) or '*'}"
                                 for a in self.applied.values()) or "-")
