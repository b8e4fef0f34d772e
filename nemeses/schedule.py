"""The nemesis step language: targeted step scripts and seeded random mixes, as plain data.

Why two kinds: a random mix (Jepsen's ``nemesis/compose`` with a generator: every
``interval`` seconds a random fault on a random target, healed after ``duration``; with
``concurrency: k``, k such generators side by side, so up to k faults overlap) finds
what nobody thought of; a targeted script reproduces a known race step by step, such as
KIP-903's six steps (docs/seeds.md#seed-000 "Proposed Changes": hold AlterPartition, wipe the follower's
disk, release, kill the leader) or Last Replica Standing (docs/seeds.md#seed-003-2-4). Targeted
scripts need to *react* to the cluster ("until partition 0's ISR contains broker-2"),
so steps may wait on conditions read from the observer's latest sample (leader, ISR,
ELR per partition) and from the cluster event logs (registrations, elections).

The language (documented with examples in docs/campaigns.md)::

    - wait: 5                                       # seconds
    - select: leader-of:0          as: L            # name a broker for later steps
    - start: kill  target: "@L"  as: k1  duration: 3  params: {...}  on-failure: fail
    - until: {isr-contains: {partition: 0, broker: "@L"}}  timeout: 60  on-timeout: fail
    - stop: k1                                      # or: stop: all
    - note: "text for the timeline"

Selectors: a host name, ``leader-of:P``, ``follower-of:P``, ``random-broker``,
``controller``, ``all-brokers``, ``stopped-brokers`` (every broker with no process now: the ones
Kafka halted, for an operator's restart), ``@NAME`` (the broker(s) a ``select``/``start ... as``
named); with a controller quorum ``active-controller`` (the KRaft leader, from the controllers'
``controller_elected`` / ``controller_resigned`` events), ``controller-follower`` and
``controllers-majority`` (every other controller); ``unnamed-controller`` (a controller no earlier
``select`` named: the third of three once two have roles).

This module only reads a campaign's ``nemesis:`` section into :class:`Schedule` (a bad step is
one :class:`~groundwork.config.ConfigError` line: file: path: want); nothing here touches a host.
Running it is :mod:`nemeses.schedule_runner`'s job, as Jepsen's generators are pure data run by
a separate interpreter: the shrinker and the suite can build, compare and rewrite schedules
without a cluster, and the interpreter resolves selectors at step time (leaders move) with the
run's seeded RNG, so ``--seed`` replays a schedule.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from groundwork.config import ConfigError, Validator, join
from nemeses.base import CONDITIONS, REGISTRY
from nemeses.catalog import load_nemeses

STEP_KINDS = ("wait", "start", "stop", "until", "select", "note")
STEP_EXTRA = {"start": ("target", "as", "params", "duration", "on-failure"), "select": ("as",),
              "until": ("timeout", "on-timeout", "poll"), "wait": (), "stop": (), "note": ()}
SCHEDULES = ("targeted", "random", "none")
NEMESIS_KEYS = ("schedule", "steps", "random", "settings", "min_applied")
RANDOM_KEYS = ("faults", "interval", "duration", "targets", "seed", "start-after", "params", "concurrency")
SIMPLE_SELECTORS = ("random-broker", "controller", "all-brokers", "any-broker", "stopped-brokers",
                    "active-controller", "controller-follower", "controllers-majority", "unnamed-controller")
CONTROLLER_SELECTORS = ("active-controller", "controller-follower", "controllers-majority", "unnamed-controller")
PARTITION_SELECTORS = ("leader-of", "follower-of", "replica-of")
PARTITION_CONDITIONS = ("isr-contains", "isr-excludes", "elr-contains", "elr-excludes", "leader-is", "leader-not")
NODE_CONDITIONS = ("restarted", "running", "stopped")
#: the KRaft quorum's active controller (the ``active-controller`` selector's answer) is / is not
#: one of SEL's hosts: "a new active controller was elected" on kraftsim and real Kafka alike
CONTROLLER_CONDITIONS = ("active-controller-is", "active-controller-not")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


@dataclass
class Step:
    """One targeted step as written: ``kind`` is one of STEP_KINDS and ``arg`` its value (seconds,
    a fault name, a selector, a condition mapping, a name to stop or a note); selectors stay
    unresolved (the interpreter resolves them when the step runs). ``path`` names the step in
    the campaign file for error messages."""
    kind: str
    arg: Any
    target: list[str] = field(default_factory=list)
    name: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    duration: float | None = None
    timeout: float = 60.0
    on_timeout: str = "fail"
    #: ``start``: a fault whose start fails (healed, recorded) ends the run (``fail``, exit 3) or
    #: the script goes on without it (``continue``: the verdict counts it, ``nemesis.min_applied``)
    on_failure: str = "fail"
    poll: float = 0.25
    path: str = ""


@dataclass
class RandomMix:
    """``schedule: random``: the faults to draw from (each with its params), how often, for how
    long, on which selectors; every draw is made by the interpreter from the run's seeded RNG.
    ``concurrency``: up to this many faults active at once, each slot its own generator
    (:mod:`nemeses.random_plan`); 1 is the original one-at-a-time loop."""
    faults: list[tuple[str, dict[str, Any]]]
    interval: float = 10.0
    duration: float = 5.0
    targets: list[str] = field(default_factory=lambda: ["random-broker"])
    seed: int | None = None
    start_after: float = 2.0
    concurrency: int = 1
    #: a fault's own ``targets`` / ``duration`` (by its index in ``faults``), where it has them:
    #: "kill the leader, wipe the follower" rather than every fault on a random broker
    fault_targets: dict[int, list[str]] = field(default_factory=dict)
    fault_durations: dict[int, float] = field(default_factory=dict)

    def targets_of(self, i: int) -> list[str]:
        return self.fault_targets.get(i, self.targets)

    def duration_of(self, i: int) -> float:
        return self.fault_durations.get(i, self.duration)


@dataclass
class Schedule:
    """A campaign's ``nemesis:`` section: ``none``, ``targeted`` (``steps``) or ``random``."""
    kind: str = "none"
    steps: list[Step] = field(default_factory=list)
    random: RandomMix | None = None
    #: ``nemesis.settings``: passed to every nemesis as ``ctx.settings`` (e.g. ``proxy: {...}``)
    settings: dict[str, Any] = field(default_factory=dict)
    #: ``nemesis.min_applied`` as written (None: the default, :attr:`min_applied`)
    min_applied_set: int | None = None

    @property
    def min_applied(self) -> int:
        """How many faults must apply for the run to have tested anything under faults: the
        campaign's ``nemesis.min_applied``, else 1 with a schedule that starts a fault and 0
        without one (no schedule, or steps that only wait: a calm control run). Fewer, and a run
        that found nothing is inconclusive (checkers/outcome.py, run.json ``faults``)."""
        if self.min_applied_set is not None:
            return self.min_applied_set
        return 1 if self.faults() else 0

    def faults(self) -> list[str]:
        if self.kind == "targeted":
            return [s.arg for s in self.steps if s.kind == "start"]
        if self.kind == "random" and self.random:
            return [f for f, _ in self.random.faults]
        return []


def check_selector(c: Validator, v: Any, path: str, *, partitions: int, host_names: set[str] | None,
                   embedded_brokers: int | None, names: set[str] | None = None) -> str:
    s = c.string(v, path)
    if s in SIMPLE_SELECTORS:
        return s
    if s.startswith("@"):
        if names is not None and s[1:] not in names:
            raise c.fail(path, f"{s} names nothing an earlier step selected or started 'as' {s[1:]}")
        return s
    kind, sep, rest = s.partition(":")
    if sep and kind in PARTITION_SELECTORS:
        if not rest.isdigit() or int(rest) >= partitions:
            raise c.fail(path, f"{kind}:P needs a partition number below {partitions}, got {rest!r}")
        return s
    if host_names is not None:
        if s not in host_names:
            raise c.fail(path, f"unknown host {s!r}; expected a host of the inventory "
                         f"({', '.join(sorted(host_names))}) or a selector ({', '.join(SIMPLE_SELECTORS)}, leader-of:P, follower-of:P, @NAME)")
    elif embedded_brokers is not None:
        m = re.fullmatch(r"broker-(\d+)|controller-\d", s)
        if s != "controller" and not m:
            raise c.fail(path, f"unknown host {s!r}; the embedded cluster's hosts are broker-<node id> and controller "
                         "(controller-<k> with a controller quorum), "
                         "or use a selector (random-broker, leader-of:P, follower-of:P, @NAME)")
    return s


def _check_partition_cond(ctx_check: Callable[..., str], c: Validator, v: Any, path: str, partitions: int) -> None:
    m = c.mapping(v, path, allow_none=False)
    c.keys(m, path, ["partition", "broker"], required=["partition", "broker"])
    c.integer(m["partition"], join(path, "partition"), min=0, max=partitions - 1)
    ctx_check(m["broker"], join(path, "broker"))


def parse_schedule(c: Validator, raw: Any, path: str, *, partitions: int, host_names: set[str] | None,
                   embedded_brokers: int | None) -> Schedule:
    sched = _parse_schedule(c, raw, path, partitions=partitions, host_names=host_names,
                            embedded_brokers=embedded_brokers)
    if isinstance(raw, dict) and raw.get("settings") is not None:
        sched.settings = dict(c.mapping(raw["settings"], join(path, "settings")))
    if isinstance(raw, dict) and raw.get("min_applied") is not None:
        sched.min_applied_set = c.integer(raw["min_applied"], join(path, "min_applied"), min=0)
        if sched.kind == "none" and sched.min_applied_set > 0:
            raise c.fail(join(path, "min_applied"), "is above 0 but schedule is none: no fault can apply")
    return sched


def _parse_schedule(c: Validator, raw: Any, path: str, *, partitions: int, host_names: set[str] | None,
                    embedded_brokers: int | None) -> Schedule:
    if raw is None:
        return Schedule("none")
    m = c.mapping(raw, path, allow_none=False)
    c.keys(m, path, NEMESIS_KEYS, required=["schedule"])
    kind = c.string(m["schedule"], join(path, "schedule"), choices=SCHEDULES)
    failures = load_nemeses()
    known = sorted(REGISTRY)

    def fault_name(v: Any, p: str) -> str:
        f = c.string(v, p)
        if f not in REGISTRY:
            # a module that failed to import may be the one that registers f (a fault's name
            # is not its module's: alter-partition, partition, kill), so name every failure
            why = "".join(f" (module nemeses.{m} failed to import: {failures[m]})" for m in sorted(failures))
            raise c.fail(p, f"unknown fault {f!r}{why}; expected one of: {', '.join(known)}")
        return f

    names: set[str] = set()

    def sel(v: Any, p: str) -> str:
        return check_selector(c, v, p, partitions=partitions, host_names=host_names,
                              embedded_brokers=embedded_brokers, names=names)

    if kind == "none":
        if m.get("steps") or m.get("random"):
            raise c.fail(join(path, "schedule"), "is none but steps/random are given")
        return Schedule("none")
    if kind == "targeted":
        if m.get("random") is not None:
            raise c.fail(join(path, "random"), "only valid with schedule: random")
        steps_raw = m.get("steps")
        if not isinstance(steps_raw, list) or not steps_raw:
            raise c.fail(join(path, "steps"), f"expected a non-empty list of steps, got {type(steps_raw).__name__ if steps_raw is not None else 'nothing'}")
        steps: list[Step] = []
        started: set[str] = set()
        for i, sr in enumerate(steps_raw):
            sp = f"{path}.steps[{i}]"
            s = c.mapping(sr, sp, allow_none=False)
            kinds = [k for k in s if k in STEP_KINDS]
            if len(kinds) != 1:
                raise c.fail(sp, f"a step has exactly one of {', '.join(STEP_KINDS)}; got {', '.join(s) or 'none'}")
            k = kinds[0]
            c.keys(s, sp, (k, *STEP_EXTRA[k]))
            step = Step(kind=k, arg=s[k], path=sp)
            if k == "wait":
                step.arg = c.number(s[k], join(sp, "wait"), min=0)
            elif k == "note":
                step.arg = c.string(s[k], join(sp, "note"))
            elif k == "select":
                step.arg = sel(s[k], join(sp, "select"))
                if "as" not in s:
                    raise c.fail(join(sp, "as"), "missing required key (select names a broker for later steps)")
            elif k == "start":
                step.arg = fault_name(s[k], join(sp, "start"))
                if s.get("target") is not None:
                    tl = s["target"] if isinstance(s["target"], list) else [s["target"]]
                    step.target = [sel(t, f"{sp}.target[{j}]" if isinstance(s["target"], list) else join(sp, "target"))
                                   for j, t in enumerate(tl)]
                step.params = dict(c.mapping(s.get("params"), join(sp, "params")))
                if s.get("duration") is not None:
                    step.duration = c.number(s["duration"], join(sp, "duration"), min=0)
                step.on_failure = c.string(s.get("on-failure", "fail"), join(sp, "on-failure"),
                                           choices=["fail", "continue"])
            elif k == "stop":
                step.arg = c.string(s[k], join(sp, "stop"))
                if step.arg != "all" and step.arg not in started:
                    raise c.fail(join(sp, "stop"), f"no earlier step started a fault 'as' {step.arg!r} (or use stop: all)")
            elif k == "until":
                cond = c.mapping(s[k], join(sp, "until"), allow_none=False)
                if len(cond) != 1:
                    raise c.fail(join(sp, "until"), "give exactly one condition, e.g. {isr-contains: {partition: 0, broker: '@L'}}")
                (cname, cval), = cond.items()
                cp = join(join(sp, "until"), cname)
                if cname in PARTITION_CONDITIONS:
                    _check_partition_cond(sel, c, cval, cp, partitions)
                elif cname in NODE_CONDITIONS or cname in CONTROLLER_CONDITIONS:
                    sel(cval, cp)
                elif cname == "event":
                    em = c.mapping(cval, cp, allow_none=False)
                    c.string(em.get("event"), join(cp, "event"))
                    for fk, fv in em.items():
                        c.scalar(fv, join(cp, fk))
                elif cname in CONDITIONS:
                    CONDITIONS[cname][0](c, cval, cp)
                else:
                    allc = [*PARTITION_CONDITIONS, *NODE_CONDITIONS, *CONTROLLER_CONDITIONS, "event", *CONDITIONS]
                    raise c.fail(cp, f"unknown condition; expected one of: {', '.join(allc)}")
                step.timeout = c.number(s.get("timeout", 60), join(sp, "timeout"), positive=True)
                step.on_timeout = c.string(s.get("on-timeout", "fail"), join(sp, "on-timeout"), choices=["fail", "continue"])
                step.poll = c.number(s.get("poll", 0.25), join(sp, "poll"), positive=True)
            if "as" in s:
                nm = c.string(s["as"], join(sp, "as"))
                if not NAME_RE.match(nm) or nm == "all":
                    raise c.fail(join(sp, "as"), f"a name is letters, digits, '_', '.', '-' (not 'all'), got {nm!r}")
                step.name = nm
                names.add(nm)
                if k == "start":
                    started.add(nm)
            steps.append(step)
        return Schedule("targeted", steps=steps)
    # random
    if m.get("steps") is not None:
        raise c.fail(join(path, "steps"), "only valid with schedule: targeted")
    rp = join(path, "random")
    r = c.mapping(m.get("random"), rp, allow_none=False)
    c.keys(r, rp, RANDOM_KEYS, required=["faults"])
    faults_raw = r["faults"] if isinstance(r["faults"], list) else [r["faults"]]
    if not faults_raw:
        raise c.fail(join(rp, "faults"), "expected at least one fault")
    faults: list[tuple[str, dict[str, Any]]] = []
    fault_targets: dict[int, list[str]] = {}
    fault_durations: dict[int, float] = {}
    common = dict(c.mapping(r.get("params"), join(rp, "params")))
    for i, f in enumerate(faults_raw):
        fp = f"{rp}.faults[{i}]"
        if isinstance(f, dict):
            c.keys(f, fp, ["fault", "params", "targets", "duration"], required=["fault"])
            faults.append((fault_name(f["fault"], join(fp, "fault")), {**common, **c.mapping(f.get("params"), join(fp, "params"))}))
            if f.get("targets") is not None:
                ftl = f["targets"] if isinstance(f["targets"], list) else [f["targets"]]
                fault_targets[i] = [sel(t, join(fp, "targets")) for t in ftl]
            if f.get("duration") is not None:
                fault_durations[i] = c.number(f["duration"], join(fp, "duration"), min=0)
        else:
            faults.append((fault_name(f, fp), dict(common)))
    tl = r.get("targets", ["random-broker"])
    tl = tl if isinstance(tl, list) else [tl]
    mix = RandomMix(
        faults=faults, fault_targets=fault_targets, fault_durations=fault_durations,
        interval=c.number(r.get("interval", 10), join(rp, "interval"), positive=True),
        duration=c.number(r.get("duration", 5), join(rp, "duration"), min=0),
        targets=[sel(t, join(rp, "targets")) for t in tl],
        seed=c.integer(r["seed"], join(rp, "seed"), min=0) if r.get("seed") is not None else None,
        start_after=c.number(r.get("start-after", 2), join(rp, "start-after"), min=0),
        concurrency=c.integer(r.get("concurrency", 1), join(rp, "concurrency"), min=1),
    )
    return Schedule("random", random=mix)


__all__ = ["ConfigError", "RandomMix", "Schedule", "Step", "check_selector", "parse_schedule"]
