"""Which Kafka behaviours were in force during a run: the cluster's own record, read in one place.

Kafka switches protocol behaviours by the cluster's metadata.version (``MetadataVersion``), and
the boundaries are feature levels, not releases: KIP-903's broker-epoch check arrives with
IBP_3_5_IV1, so a cluster at ``3.5-IV0`` runs without it. kraftsim decides its gates exactly so
(kraftsim/features.py) and records the result twice: the launcher writes ``DIR/features.json``
(the embedded cluster's DIR is ``RUN/cluster/``) and every controller emits the same object as
its first ``features`` event (collected into ``RUN/cluster-logs/<host>/events.jsonl``). The
checker reads that record here and nowhere else: the stories ask :meth:`FeaturesInForce.gate`,
and nothing in checkers/ compares a version string with a threshold, so the checker cannot
disagree with the cluster about a gate.

No record (real Kafka, whose gates are Kafka's code and whose metadata.version is its own; or a
run older than the record): every gate is *unknown*, and a story says so rather than guessing.

The record (kraftsim ``Features.describe()``)::

    {"metadata.version": "3.5-IV0",
     "kip903": {"enabled": false, "from": "metadata.version"},
     "elr": {"enabled": false, "from": "eligible.leader.replicas.version"}, ...}

Top-level strings are versions; objects with ``enabled`` are gates, each naming in ``from``
what decided it: a version of :data:`VERSIONS` (the protocol's ``metadata.version``; the
software's ``kafka.version`` when a record carries it) or an explicit override key. A record
with more versions, or gates decided by software, reads without a change here. The record kraftsim
writes once it models a software version beside the protocol's nests its gates::

    {"kafka.version": "3.9.0", "metadata.version": "3.4-IV0",
     "gates": {"effective_min_isr": {"on": true, "decided_by": "kafka.version", ...}, ...}}

read the same way (``on`` for ``enabled``, ``decided_by`` for ``from``; ``decided_by: both`` -
both versions were needed - names both).

The gates checkers/ asks about: ``kip903`` and ``elr`` (the stories), ``effective_min_isr``
(checkers/min_isr.py: Kafka 3.7's min ISR capped at the replication factor). A run that does not
record one reads it as unknown, and each reader says what it assumed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the versions a record may carry, and what each one is: the protocol (Kafka's MetadataVersion)
#: or the software (a broker release, for fixes no metadata.version gates)
VERSIONS: dict[str, str] = {"metadata.version": "protocol", "kafka.version": "software"}

#: a nested record's ``decided_by`` when both versions decided a gate
BOTH = "both"

#: where the embedded kraftsim cluster's launcher writes the record, relative to the run directory
FEATURES_FILE = "cluster/features.json"
#: the controllers' event logs, as the harness collects them (relative to the run directory)
EVENT_LOGS = "cluster-logs/*/events.jsonl"
#: the event that carries the record
FEATURES_EVENT = "features"


@dataclass(frozen=True)
class Gate:
    """One behaviour: on, off, or not known, and what decided it."""
    name: str
    enabled: bool | None                  # None: the run does not say
    decided_by: str | None = None         # the record's ``from``: a version key or an override key
    version: str | None = None            # that version's value, when a version decided it
    unknown_because: str = ""             # why ``enabled`` is None

    @property
    def kind(self) -> str:
        """"protocol" / "software" (a version of :data:`VERSIONS` decided), "both" (both versions
        were needed), "override" (an explicit key did), "unknown" (nothing recorded)."""
        if self.enabled is None:
            return "unknown"
        if self.decided_by == BOTH:
            return "both"
        return VERSIONS.get(self.decided_by or "", "override")

    def because(self) -> str:
        """What decided it, for a sentence: ``metadata.version=3.5-IV0`` (a version),
        ``set by kip903.enabled`` (an override key), or why it is not known."""
        if self.enabled is None:
            return self.unknown_because
        if self.kind == "both":
            return self.version or "kafka.version and metadata.version"
        if self.kind in ("protocol", "software"):
            return f"{self.decided_by}={self.version}" if self.version else str(self.decided_by)
        return f"set by {self.decided_by}" if self.decided_by else "as recorded"

    def as_dict(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "decided_by": self.decided_by, "kind": self.kind,
                **({"version": self.version} if self.version else {}),
                **({"unknown_because": self.unknown_because} if self.enabled is None else {})}


@dataclass(frozen=True)
class FeaturesInForce:
    """The run's record of what was in force; :meth:`gate` answers for any gate name."""
    source: str | None                                       # file (and line) it came from; None: no record
    versions: dict[str, str] = field(default_factory=dict)   # e.g. {"metadata.version": "3.5-IV0"}
    gates: dict[str, Gate] = field(default_factory=dict)
    problem: str = ""                                        # why there is no (usable) record

    def gate(self, name: str) -> Gate:
        if name in self.gates:
            return self.gates[name]
        why = self.problem or (f"{self.source} does not record it" if self.source else NO_RECORD)
        return Gate(name, None, unknown_because=why)

    def as_dict(self) -> dict[str, Any]:
        """verdict.json ``checker.features``: what the checker read, so a reader can audit a story."""
        return {"source": self.source, "versions": dict(self.versions),
                "gates": {k: g.as_dict() for k, g in sorted(self.gates.items())},
                **({"problem": self.problem} if self.problem else {})}


#: what a run without a record says for every gate (real Kafka, or a run from before kraftsim
#: recorded them: a real cluster's gates are Kafka's code, not something to guess from a version)
NO_RECORD = "the run has no features.json or controller 'features' event"


def from_record(record: dict[str, Any], source: str) -> FeaturesInForce:
    """Versions and gates of one record (``features.json`` or a ``features`` event's fields).

    A gate that is not ``{"enabled": bool, ...}`` reads as unknown, naming the source and field.
    """
    versions = {k: v for k, v in record.items() if k in VERSIONS and isinstance(v, str)}
    entries: list[tuple[str, Any, Any, str]] = [
        (name, e.get("enabled"), e.get("from"), f"{name}.enabled") for name, e in record.items()
        if isinstance(e, dict) and "enabled" in e]
    nested = record.get("gates")
    if isinstance(nested, dict):
        entries += [(name, e.get("on"), e.get("decided_by"), f"gates.{name}.on") for name, e in nested.items()
                    if isinstance(e, dict) and "on" in e]
    gates: dict[str, Gate] = {}
    for name, on, by, field_name in entries:
        if not isinstance(on, bool):
            gates[name] = Gate(name, None, unknown_because=f"{source}: field '{field_name}' is {on!r}; "
                                                           "want true or false")
            continue
        by = by if isinstance(by, str) and by else None
        if by == BOTH:
            version = ", ".join(f"{k}={versions[k]}" for k in VERSIONS if k in versions) or None
        else:
            version = versions.get(by) if by else None
        gates[name] = Gate(name, on, by, version)
    return FeaturesInForce(source, versions, gates)


def _read_file(path: Path, rel: str) -> FeaturesInForce | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return FeaturesInForce(None, problem=f"{rel}: not readable as JSON ({type(e).__name__}); "
                                             "want the object kraftsim's launcher writes")
    if not isinstance(data, dict):
        return FeaturesInForce(None, problem=f"{rel}: top level is {type(data).__name__}; want a JSON object")
    return from_record(data, rel)


def _events(run_dir: Path) -> list[tuple[dict[str, Any], str]]:
    """Every ``features`` event of the collected event logs, with ``file line N`` (file order)."""
    out: list[tuple[dict[str, Any], str]] = []
    needle = f'"{FEATURES_EVENT}"'.encode()
    for path in sorted(run_dir.glob(EVENT_LOGS)):
        rel = path.relative_to(run_dir).as_posix()
        try:
            with open(path, "rb") as fh:
                for n, raw in enumerate(fh, 1):
                    if needle not in raw or not raw.endswith(b"\n"):
                        continue          # cheap skip; a torn last line is no record
                    try:
                        rec = json.loads(raw)
                    except ValueError:
                        continue
                    if isinstance(rec, dict) and rec.get("event") == FEATURES_EVENT:
                        out.append(({k: v for k, v in rec.items() if k not in ("wall", "node", "role", "event")},
                                    f"{rel} line {n}"))
        except OSError:
            continue
    return out


def _merge(found: list[FeaturesInForce]) -> FeaturesInForce:
    """Several controllers (or restarts) each emit the record; they agree unless the cluster was
    reconfigured mid-run. A gate they disagree on is unknown, naming both."""
    first = found[0]
    gates = dict(first.gates)
    for other in found[1:]:
        for name, g in other.gates.items():
            mine = gates.get(name)
            if mine is not None and mine.enabled is not None and g.enabled is not None and mine.enabled != g.enabled:
                gates[name] = Gate(name, None, unknown_because=f"the controllers recorded it both on and off "
                                                               f"({first.source}; {other.source})")
            elif mine is None:
                gates[name] = g
    return FeaturesInForce(first.source, first.versions, gates)


def read(run_dir: str | Path) -> FeaturesInForce:
    """What was in force during the run at ``run_dir``: ``cluster/features.json``, else the
    controllers' ``features`` events, else nothing known (:data:`NO_RECORD`)."""
    rd = Path(run_dir)
    got = _read_file(rd / FEATURES_FILE, FEATURES_FILE)
    if got is not None and got.source is not None:
        return got
    events = [from_record(rec, where) for rec, where in _events(rd)]
    if events:
        return _merge(events)
    return got if got is not None else FeaturesInForce(None, problem=NO_RECORD)
