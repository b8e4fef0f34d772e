"""The nemesis contract: setup / start(targets) / stop(record) = heal / teardown.

Modelled on Jepsen's ``jepsen.nemesis`` protocol and Redpanda's failure injector: a fault
is a value (:class:`FaultRecord`) that holds everything needed to undo it, written to the
heal ledger *before* it is applied, so that ``stop`` can run in a brand-new process
(`faultline heal`) with only the ledger entry and the inventory.

``stop`` must be idempotent: healing a fault twice, or healing one whose target has since
been restarted by someone else, is not an error.

A start that raises part-way is healed too (docs/nemeses.md, "Faults heal even when they fail"):
its ledger entry was written by :meth:`Nemesis.begin` before anything was touched, and every
effect since is in its record (:meth:`Nemesis.update` after each kill, rule or stopped process),
so the schedule (``nemeses.active.ActiveFaults``) calls ``stop`` with that record - the same heal,
through the same ledger, as a normal one - and `faultline heal` can do it from the ledger alone.
A heal of something never applied does nothing.
"""
from __future__ import annotations

import abc
import random
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, ClassVar, Protocol

from groundwork.config import Validator
from groundwork.ledger import Ledger, new_id
from groundwork.timeline import Timeline
from groundwork.transport.base import Transport


class Node(Protocol):
    """What a nemesis may know about a target host (see harness.inventory)."""

    name: str              # inventory host name, e.g. "broker-1"
    role: str              # "broker" | "controller"
    node_id: int
    address: str           # IP/host where its Kafka listener is reached
    transport: Transport

    def start_service(self) -> None: ...
    def stop_service(self, sig: int = 15) -> None: ...
    def service_pids(self) -> list[int]: ...


@dataclass
class FaultRecord:
    """One applied fault. ``undo`` is the nemesis's own JSON-serialisable heal data."""
    fault: str
    targets: list[str]
    params: dict[str, Any] = field(default_factory=dict)
    undo: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=new_id)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "FaultRecord":
        return cls(**d)


@dataclass
class NemesisContext:
    """What a nemesis is given: the target nodes, where to record, and a seeded RNG."""
    nodes: dict[str, Node]
    timeline: Timeline
    ledger: Ledger
    rng: random.Random
    inventory_path: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    #: ``(host, fault id) -> names``: the *other* applied faults that keep ``host``'s service
    #: down until their own heal (``Nemesis.keeps_down``). A schedule's ``ActiveFaults`` sets
    #: it, so a fault healed while another still holds the same broker down leaves the restart
    #: to that one; None (``faultline heal``, which heals every entry) holds nothing.
    service_holders: Callable[[str, str], list[str]] | None = None

    def brokers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.role == "broker"]


class Nemesis(abc.ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    #: the fault acts on its targets' Kafka process (kill, pause, restart, reboot, disk-wipe).
    #: A random mix never has two of these on one host at once: the second would not add a
    #: failure but replace the first (a kill ends a pause) (docs/nemeses.md, "Overlapping faults").
    acts_on_service: ClassVar[bool] = False

    def setup(self, ctx: NemesisContext) -> None:
        self.ctx = ctx
        #: the record the latest :meth:`begin` wrote: a start that raises after it is healed
        #: from it (``ActiveFaults``); None until a start begins
        self.begun: FaultRecord | None = None
        #: ids this instance healed (:meth:`end`), and what the latest heal did (its stop detail)
        self.healed_ids: set[str] = set()
        self.last_heal: dict[str, Any] = {}

    @abc.abstractmethod
    def start(self, targets: list[str], **params: Any) -> FaultRecord:
        """Apply the fault. Implementations call :meth:`begin` before touching anything."""

    @abc.abstractmethod
    def stop(self, record: FaultRecord) -> None:
        """Heal the fault: idempotent, and using only ``record`` and ``self.ctx``."""

    def teardown(self) -> None:
        """Release what setup acquired (helper processes, connections)."""

    def exclusive(self, targets: list[str], params: dict[str, Any]) -> set[str]:
        """What this fault must have to itself while applied: a second fault claiming any of
        the same keys is refused while the first is applied, because one's start or heal would
        undo the other (one proxy hold; one root qdisc per interface). Default: nothing, for
        faults that compose (iptables rules tagged per fault id, processes: see
        :meth:`keeps_down`)."""
        return set()

    def keeps_down(self, record: FaultRecord) -> list[str]:
        """The targets whose service this applied fault keeps stopped until its own heal
        starts it again (a kill; a reboot or disk wipe with ``restart: false``). Another
        fault's heal on the same host leaves the restart to this one."""
        return []

    # -- helpers every nemesis uses, so ledger and timeline are never forgotten --
    def begin(self, record: FaultRecord) -> FaultRecord:
        """Ledger first, then timeline: a crash after this line still heals."""
        self.begun = record
        self.ctx.ledger.apply(record.id, "fault", record.to_json(), nemesis=self.name,
                              inventory=self.ctx.inventory_path)
        self.ctx.timeline.fault_started(record.id, record.fault, record.targets, **record.params)
        return record

    def update(self, record: FaultRecord) -> None:
        """Re-record a fault whose undo data grew while it was applied (new pids, rules)."""
        self.ctx.ledger.apply(record.id, "fault", record.to_json(), nemesis=self.name,
                              inventory=self.ctx.inventory_path)

    def start_stopped_targets(self, record: FaultRecord) -> list[str]:
        """The usual heal of a crash-like fault: start every target whose service is not
        running (idempotent: a target someone already restarted is left alone), unless
        another applied fault still keeps it down (:meth:`start_unless_held`)."""
        started = []
        for name in record.targets:
            node = self.ctx.nodes.get(name)
            if node is not None and not node.service_pids() and self.start_unless_held(node, record):
                started.append(name)
        return started

    def start_unless_held(self, node: Node, record: FaultRecord) -> bool:
        """Start ``node``'s service on behalf of ``record``, unless another applied fault keeps
        it down (``ctx.service_holders``): then the restart is that fault's, and the timeline
        says so. Why: with overlapping faults, the first heal must not bring back a broker
        that a longer fault (a kill without a duration, a disk wipe with ``restart: false``)
        still holds down; the last holder's heal starts it, and its ledger entry stays open
        until then, so `faultline heal` after a crash still starts it."""
        holders = self.ctx.service_holders(node.name, record.id) if self.ctx.service_holders else []
        if holders:
            self.ctx.timeline.event("note", fault_id=record.id, host=node.name,
                                    text=f"{record.fault}: {node.name} left down: {', '.join(holders)} still holds it")
            return False
        node.start_service()
        return True

    def end(self, record: FaultRecord, **detail: Any) -> None:
        self.ctx.timeline.fault_stopped(record.id, record.fault, record.targets, **detail)
        self.ctx.ledger.healed(record.id)
        if not hasattr(self, "healed_ids"):   # a subclass whose setup did not call ours
            self.healed_ids = set()
        self.healed_ids.add(record.id)
        self.last_heal = dict(detail)


#: registry filled by each nemesis module: name -> class
REGISTRY: dict[str, type[Nemesis]] = {}


def register(cls: type[Nemesis]) -> type[Nemesis]:
    REGISTRY[cls.name] = cls
    return cls


class FaultsView(Protocol):
    """What a schedule condition added by a nemesis module may read of a running schedule:
    the faults it applied, by the name a step started them ``as``."""

    def active_fault(self, name: str) -> tuple[Nemesis, FaultRecord] | None:
        """The nemesis and record of the fault applied as ``name``, or None when none is now."""


#: check_args(validator, value, path) validates a condition's argument when the campaign loads
ConditionCheck = Callable[[Validator, Any, str], None]
#: test(faults, value) -> bool, polled while an ``until`` step waits
ConditionTest = Callable[[FaultsView, Any], bool]

#: extra ``until:`` condition kinds nemesis modules add to the step language: name -> (check, test).
#: Here, beside the fault registry, so that a nemesis module never imports the schedule modules
#: (which load every nemesis module).
CONDITIONS: dict[str, tuple[ConditionCheck, ConditionTest]] = {}


def register_condition(name: str, check_args: ConditionCheck, test: ConditionTest) -> None:
    CONDITIONS[name] = (check_args, test)
