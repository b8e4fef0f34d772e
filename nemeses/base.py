"""The nemesis contract: setup / start(targets) / stop(record) = heal / teardown.

Modelled on Jepsen's ``jepsen.nemesis`` protocol and Redpanda's failure injector: a fault
is a value (:class:`FaultRecord`) that holds everything needed to undo it, written to the
heal ledger *before* it is applied, so that ``stop`` can run in a brand-new process
(`faultline heal`) with only the ledger entry and the inventory.

``stop`` must be idempotent: healing a fault twice, or healing one whose target has since
been restarted by someone else, is not an error.
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

    def brokers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.role == "broker"]


class Nemesis(abc.ABC):
    name: ClassVar[str]
    description: ClassVar[str]

    def setup(self, ctx: NemesisContext) -> None:
        self.ctx = ctx

    @abc.abstractmethod
    def start(self, targets: list[str], **params: Any) -> FaultRecord:
        """Apply the fault. Implementations call :meth:`begin` before touching anything."""

    @abc.abstractmethod
    def stop(self, record: FaultRecord) -> None:
        """Heal the fault: idempotent, and using only ``record`` and ``self.ctx``."""

    def teardown(self) -> None:
        """Release what setup acquired (helper processes, connections)."""

    # -- helpers every nemesis uses, so ledger and timeline are never forgotten --
    def begin(self, record: FaultRecord) -> FaultRecord:
        """Ledger first, then timeline: a crash after this line still heals."""
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
        running (idempotent: a target someone already restarted is left alone)."""
        started = []
        for name in record.targets:
            node = self.ctx.nodes.get(name)
            if node is not None and not node.service_pids():
                node.start_service()
                started.append(name)
        return started

    def end(self, record: FaultRecord, **detail: Any) -> None:
        self.ctx.timeline.fault_stopped(record.id, record.fault, record.targets, **detail)
        self.ctx.ledger.healed(record.id)


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
