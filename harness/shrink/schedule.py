"""From a run's recorded faults to a targeted step script that can be replayed and cut down.

Why from the timeline and not from the seed: a random mix replays by seed only on the same
leader placement and the same timing; the timeline says what actually happened (which fault,
on which host, with which params, from when to when), and the observer says what that host
*was* at that moment. A step keeps the host's role ("the leader of partition 0") rather than
its name where the role names it unambiguously, so the script means the same thing when the
replay's leader is another broker - the same reason targeted campaigns select ``leader-of:P``
(docs/campaigns.md, "Selectors").

The role is read from the observer's latest sample at or before the fault's start
(``observer.jsonl``, the same clock as the timeline): that is exactly what ``leader-of:P`` and
``follower-of:P`` would have resolved to at that moment, because the schedule's selectors read
the same observer (nemeses/schedule_runner.py, ``ScheduleRunner.resolve``).
"""
from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from checkers.attribution import fault_intervals
from nemeses.alter_partition import is_placement


@dataclass(frozen=True)
class FaultStep:
    """One fault of a schedule: what, on whom, when (seconds after the schedule began), how long."""
    fault: str
    target: tuple[str, ...]          # selectors: leader-of:P, follower-of:P, or a host name
    at: float                        # start, seconds after the nemesis phase began
    duration: float                  # healed automatically after this many seconds
    params: str = "{}"               # the nemesis params as canonical JSON (hashable)
    hosts: tuple[str, ...] = ()      # the hosts it hit in the source run (for people)
    source_id: str = ""              # the source run's fault id, "" for derived steps

    @property
    def params_dict(self) -> dict[str, Any]:
        return json.loads(self.params)

    @property
    def end(self) -> float:
        return self.at + self.duration

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["target"], d["hosts"], d["params"] = list(self.target), list(self.hosts), self.params_dict
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "FaultStep":
        return cls(fault=d["fault"], target=tuple(d["target"]), at=float(d["at"]), duration=float(d["duration"]),
                   params=canon(d.get("params") or {}), hosts=tuple(d.get("hosts") or ()),
                   source_id=d.get("source_id", ""))

    def label(self) -> str:
        p = self.params_dict
        extra = f" {','.join(f'{k}={v}' for k, v in p.items())}" if p else ""
        return f"{self.fault}{extra} → {'+'.join(self.target)} at {self.at:.1f}s for {self.duration:.1f}s"


def canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), default=str)


def schedule_key(steps: list[FaultStep], salt: str = "") -> str:
    """A stable name for a candidate: the same steps (and replay overrides) are the same test."""
    body = canon([[s.fault, list(s.target), round(s.at, 2), round(s.duration, 2), s.params] for s in steps])
    return hashlib.sha1((salt + body).encode()).hexdigest()[:12]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue  # a torn last line of a killed run
        if isinstance(d, dict):
            rows.append(d)
    return rows


class Observed:
    """Partition state over time from ``observer.jsonl``: leader and ISR as of a run-clock time."""

    def __init__(self, samples: list[dict[str, Any]]):
        self.by_part: dict[int, list[tuple[float, dict[str, Any]]]] = {}
        for s in samples:
            if s.get("error") or not isinstance(s.get("t"), (int, float)) or s.get("partition") is None:
                continue
            self.by_part.setdefault(int(s["partition"]), []).append((float(s["t"]), s))
        for v in self.by_part.values():
            v.sort(key=lambda x: x[0])

    def at(self, partition: int, t: float) -> dict[str, Any] | None:
        rows = self.by_part.get(partition) or []
        best = None
        for ts, s in rows:
            if ts > t:
                break
            best = s
        return best


def host_node_ids(run_dir: Path) -> dict[str, int]:
    """Host name -> node id. The embedded cluster names brokers ``broker-<id>``; a lab inventory
    (RUN/inventory.yaml, else the run's inventory) says it per host."""
    ids: dict[str, int] = {}
    try:
        recorded = [Path(json.loads((run_dir / "run.json").read_text()).get("inventory") or "")]
    except (OSError, ValueError):
        recorded = []
    for cand in (run_dir / "inventory.yaml", run_dir / "cluster" / "inventory.yaml", *recorded):
        if cand == Path(""):
            continue
        if cand.exists():
            try:
                from harness.inventory import load_inventory
                inv = load_inventory(cand)
                ids.update({h.name: int(h.node_id) for h in inv.hosts.values()})
                break
            except Exception:  # noqa: BLE001 - fall back on the naming rule below
                pass
    return ids


def node_id_of(host: str, ids: dict[str, int]) -> int | None:
    if host in ids:
        return ids[host]
    if host.startswith("broker-") and host[7:].isdigit():
        return int(host[7:])
    return None


def role_selector(host: str, state: dict[str, Any] | None, partition: int, ids: dict[str, int]) -> str:
    """``leader-of:P`` when the host led P then; ``follower-of:P`` when it was the only other
    ISR member (so the selector cannot pick a different broker on replay); else the host name."""
    nid = node_id_of(host, ids)
    if state is None or nid is None:
        return host
    if state.get("leader") == nid:
        return f"leader-of:{partition}"
    followers = [b for b in (state.get("isr") or []) if b != state.get("leader")]
    if followers == [nid]:
        return f"follower-of:{partition}"
    return host


def focus_partition(run_dir: Path) -> int:
    """The partition whose roles name the steps: the one that lost the most writes."""
    v = run_dir / "verdict.json"
    try:
        by = json.loads(v.read_text()).get("lost_writes_by_partition") or {}
    except (OSError, ValueError):
        by = {}
    def part(key: str) -> int:  # "<topic>@<partition>" (older verdicts: "<topic>-<partition>")
        tail = key.rsplit("@", 1)[1] if "@" in key else key.rsplit("-", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    if by:
        return part(max(by.items(), key=lambda kv: (kv[1], -part(kv[0])))[0])
    return 0


def extract_steps(run_dir: Path, partition: int | None = None) -> list[FaultStep]:
    """Every fault the run applied, as steps timed from the start of its nemesis phase."""
    tl = read_jsonl(run_dir / "timeline.jsonl")
    t0 = next((float(r["t"]) for r in tl if r.get("kind") == "phase" and r.get("phase") == "nemesis"), 0.0)
    end = max((float(r["t"]) for r in tl if isinstance(r.get("t"), (int, float))), default=t0)
    part = focus_partition(run_dir) if partition is None else partition
    obs = Observed(read_jsonl(run_dir / "observer.jsonl"))
    ids = host_node_ids(run_dir)
    steps: list[FaultStep] = []
    for f in fault_intervals(tl):
        if f.start is None or not f.fault:
            continue
        stop = f.stop if f.stop is not None else end
        params = f.detail if isinstance(f.detail, dict) else {}
        if is_placement(f.fault, params):
            continue   # the AlterPartition proxy's placement: the replay's setup redoes it
        if f.failed is not None:
            continue   # its start failed (and was healed at once): the run's loss is not its
        state = obs.at(part, f.start)
        target = tuple(dict.fromkeys(role_selector(h, state, part, ids) for h in f.targets))
        steps.append(FaultStep(fault=f.fault, target=target, at=round(max(0.0, f.start - t0), 2),
                               duration=round(max(0.0, stop - f.start), 2), params=canon(params),
                               hosts=tuple(f.targets), source_id=f.id))
    steps.sort(key=lambda s: s.at)
    return steps


def overlapping(step: FaultStep, steps: list[FaultStep]) -> bool:
    """Whether another step starts or stops while ``step`` is applied (strictly inside it)."""
    return any(o is not step and (step.at < o.at < step.end or step.at < o.end < step.end) for o in steps)


def to_step_script(steps: list[FaultStep]) -> list[dict[str, Any]]:
    """The targeted step language (nemeses/schedule.py): a wait up to each start, then the
    fault. A fault that nothing else starts or stops during heals itself after ``duration``.
    A fault during which another one starts or stops (a random mix with ``concurrency``)
    is started ``as`` a name and healed by a ``stop:`` step at its place among the others'
    starts and stops, so the replay keeps the order of every start and heal - "B started
    while A was still applied" - even when a start takes a while (a reboot's cut, a
    disk wipe): waits are relative to the step before, and an automatic stop is timed from
    its own start, so drift could otherwise heal A before B begins. A fault whose start fails
    does not end the replay (``on-failure: continue``): the candidate's ``nemesis.min_applied``
    (every step) makes such a replay inconclusive rather than "did not reproduce"."""
    ordered = sorted(steps, key=lambda s: s.at)
    explicit = [overlapping(s, ordered) for s in ordered]
    # (time, stops before starts at one instant, index): a fault healed as the next begins
    # is not an overlap
    events = sorted([(s.at, 1, i) for i, s in enumerate(ordered)]
                    + [(s.end, 0, i) for i, s in enumerate(ordered) if explicit[i]])
    out: list[dict[str, Any]] = []
    cursor = 0.0
    for t, is_start, i in events:
        s = ordered[i]
        gap = round(t - cursor, 2)
        if gap > 0:
            out.append({"wait": gap})
        cursor = max(cursor, t)
        if not is_start:
            out.append({"stop": f"f{i + 1}"})
            continue
        st: dict[str, Any] = {"start": s.fault, "target": s.target[0] if len(s.target) == 1 else list(s.target),
                              "as": f"f{i + 1}", "on-failure": "continue"}
        if not explicit[i]:
            st["duration"] = s.duration
        if s.params_dict:
            st["params"] = s.params_dict
        out.append(st)
    return out


@dataclass
class SourceRun:
    """What the shrink needs from the source run directory."""
    run_dir: Path
    run: dict[str, Any]
    campaign: dict[str, Any]
    steps: list[FaultStep] = field(default_factory=list)

    @property
    def seed(self) -> int:
        return int(self.run.get("seed") or self.campaign.get("seed") or 1)


def candidate_campaign(src: SourceRun, steps: list[FaultStep], *, tail: float, name: str | None = None) -> dict[str, Any]:
    """The source campaign (target, settings, topic, workload) with ``steps`` as its schedule;
    the workload lasts until ``tail`` seconds after the last heal (shorter replays)."""
    doc = copy.deepcopy(src.campaign)
    doc["name"] = name or f"{src.campaign.get('name', 'run')}-shrink"
    nem = dict(doc.get("nemesis") or {})
    settings = nem.get("settings")
    # every step must apply: a replay in which one failed did not test this candidate
    doc["nemesis"] = {"schedule": "targeted", "steps": to_step_script(steps), "min_applied": len(steps)}
    if settings:
        doc["nemesis"]["settings"] = settings
    wl = dict(doc.get("workload") or {})
    last = max((s.end for s in steps), default=0.0)
    wl["duration"] = round(max(5.0, last + tail), 1)
    doc["workload"] = wl
    doc["expect"] = "loss"          # the minimal campaign must lose, by the mechanism shrink chose
    doc.pop("allowed_by", None)     # (the source's loss-allowed or required errors are not its question)
    doc.pop("require_errors", None)
    doc.pop("require_anomalies", None)
    doc.pop("forbid_anomalies", None)
    doc.pop("seed", None)
    doc.pop("description", None)
    return doc


def campaign_yaml(doc: dict[str, Any], header: list[str] | None = None) -> str:
    head = "".join(f"# {h}\n" for h in header or [])
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


__all__ = ["FaultStep", "SourceRun", "candidate_campaign", "campaign_yaml", "extract_steps", "overlapping",
           "replace", "schedule_key", "to_step_script"]
