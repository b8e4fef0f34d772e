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

Faults heal even when they fail (docs/nemeses.md): a start that raises part-way - a reboot that
killed its broker and then found no log dir - has a ledger entry (``Nemesis.begin`` came first)
holding what it did, so :meth:`ActiveFaults.start` calls the nemesis's own heal with that record
before the schedule goes on, writes the fault's ``failed`` record on the timeline (its one-line
reason and what the heal undid) and raises :class:`FaultFailed`. The faults applied and failed are
counted here (:meth:`ActiveFaults.summary`, run.json ``faults``): a run in which too few applied
proves nothing (checkers/outcome.py).

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

from groundwork.ledger import new_id
from nemeses.base import REGISTRY, FaultRecord, Nemesis, NemesisContext


class FaultConflict(ValueError):
    """A fault cannot start while another applied one holds what it needs (one line)."""


class FaultFailed(RuntimeError):
    """A fault's start raised; what it had done is healed (unless ``heal_error`` says why not).
    The message is one line: the fault, its targets, the reason and what was undone."""

    def __init__(self, fault: str, targets: list[str], reason: str, undone: dict[str, Any] | str,
                 heal_error: str | None = None):
        self.fault, self.targets, self.reason, self.undone, self.heal_error = fault, list(targets), reason, undone, heal_error
        what = f"heal failed: {heal_error}" if heal_error else f"undone: {describe_undone(undone)}"
        super().__init__(f"{fault} on {'+'.join(targets) or '*'} failed: {reason} ({what})")


def one_line(e: BaseException) -> str:
    """An exception as one line: its message's first line, else its type's name."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def describe_undone(undone: dict[str, Any] | str) -> str:
    """What a heal did, from its stop detail (``started: [broker-1]``, ``rules_removed: 4``)."""
    if isinstance(undone, str):
        return undone
    parts = []
    for k, v in undone.items():
        if v in (None, [], {}, 0, False):
            continue
        parts.append(f"{k.replace('_', ' ')} {', '.join(map(str, v)) if isinstance(v, list) else v}")
    return "; ".join(parts) or "nothing left to undo"


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
        #: every fault this schedule started: ``{"fault", "targets", "id", "applied", "reason"}``
        self.started: list[dict[str, Any]] = []
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
            nem: Nemesis | None = None
            try:
                nem = self.nemesis(fault)
                nem.begun = None
                rec = nem.start(list(targets), **params)
            except Exception as e:  # noqa: BLE001 - whatever the start did is healed, then it is one line
                raise self._heal_failed(fault, list(targets), nem, e) from e
            wall = time.time()
            for t in targets:
                self.last_hit_wall[t] = wall
            a = ActiveFault(nem, rec, name, wall, None if duration is None else time.monotonic() + duration)
            self.applied[name] = a
            self.started.append({"fault": fault, "targets": list(targets), "id": rec.id, "applied": True})
            self._changed()
            return a

    def _heal_failed(self, fault: str, targets: list[str], nem: Nemesis | None, err: Exception) -> FaultFailed:
        """Heal what a failed start did, from the record its ``begin`` wrote (None: it failed
        before touching anything), record the failure on the timeline, and return the error to
        raise. A nemesis that healed itself before raising (partition, link) is not healed twice.
        A heal that raises leaves the ledger entry open: the run's final heal and `faultline heal`
        retry it."""
        reason = one_line(err)
        rec = getattr(nem, "begun", None) if nem is not None else None
        undone: dict[str, Any] | str = "nothing was applied"
        heal_error = None
        if rec is not None:
            wall = time.time()
            for t in targets:
                self.last_hit_wall[t] = wall
            if rec.id in getattr(nem, "healed_ids", set()):
                undone = dict(getattr(nem, "last_heal", {}) or {}) or "healed by the fault itself"
            else:
                try:
                    nem.stop(rec)   # type: ignore[union-attr] - the same heal as a normal stop, ledger included
                    undone = dict(getattr(nem, "last_heal", {}) or {})
                except Exception as he:  # noqa: BLE001 - the ledger entry stays open for the final heal
                    heal_error = one_line(he)
        fid = rec.id if rec is not None else new_id()
        detail: dict[str, Any] = {"reason": reason, "undone": undone}
        if heal_error:
            detail["heal_error"] = heal_error
        self.ctx.timeline.fault_failed(fid, fault, targets, **detail)
        self.started.append({"fault": fault, "targets": list(targets), "id": fid, "applied": False, "reason": reason})
        return FaultFailed(fault, targets, reason, undone, heal_error)

    def summary(self) -> dict[str, Any]:
        """run.json ``faults``: how many of this schedule's faults applied and failed, and why
        each failed (docs/verdict-format.md)."""
        with self._lock:
            failed = [{"fault": f["fault"], "targets": f["targets"], "reason": f["reason"]}
                      for f in self.started if not f["applied"]]
            return {"applied": sum(1 for f in self.started if f["applied"]), "failed": len(failed),
                    "failed_list": failed}

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
            try:
                nem = self.nemesis(fault)
            except Exception:  # noqa: BLE001 - a nemesis that cannot set up fails in start, where it is recorded
                return None
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
