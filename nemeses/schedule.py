"""Nemesis schedules: targeted step scripts and seeded random mixes.

Why two kinds: a random mix (Jepsen's ``nemesis/compose`` with a generator: every
``interval`` seconds a random fault on a random target, healed after ``duration``) finds
what nobody thought of; a targeted script reproduces a known race step by step, such as
KIP-903's six steps (seed 000 "Proposed Changes": hold AlterPartition, wipe the follower's
disk, release, kill the leader) or Last Replica Standing (seed 003 §2.4). Targeted
scripts need to *react* to the cluster ("until partition 0's ISR contains broker-2"),
so steps may wait on conditions read from the observer's latest sample (leader, ISR,
ELR per partition) and from the cluster event logs (registrations, elections).

The language (documented with examples in docs/campaigns.md)::

    - wait: 5                                       # seconds
    - select: leader-of:0          as: L            # name a broker for later steps
    - start: kill  target: "@L"  as: k1  duration: 3  params: {...}
    - until: {isr-contains: {partition: 0, broker: "@L"}}  timeout: 60  on-timeout: fail
    - stop: k1                                      # or: stop: all
    - note: "text for the timeline"

Selectors: a host name, ``leader-of:P``, ``follower-of:P``, ``random-broker``,
``controller``, ``all-brokers``, ``@NAME`` (the broker(s) a ``select``/``start ... as``
named); with a controller quorum ``active-controller`` (the KRaft leader, from the controllers'
``controller_elected`` / ``controller_resigned`` events), ``controller-follower`` and
``controllers-majority`` (every other controller). Random choices use the run's seeded RNG, so ``--seed`` replays a schedule.

Execution needs a :class:`ClusterView` (the run loop's window onto the cluster), so this
module imports nothing of the workloads or the checkers.
"""
from __future__ import annotations

import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from groundwork.config import Checker, ConfigError, join
from nemeses.base import FaultRecord, Nemesis, NemesisContext, REGISTRY

STEP_KINDS = ("wait", "start", "stop", "until", "select", "note")
STEP_EXTRA = {"start": ("target", "as", "params", "duration"), "select": ("as",),
              "until": ("timeout", "on-timeout", "poll"), "wait": (), "stop": (), "note": ()}
SCHEDULES = ("targeted", "random", "none")
NEMESIS_KEYS = ("schedule", "steps", "random", "settings")
RANDOM_KEYS = ("faults", "interval", "duration", "targets", "seed", "start-after", "params")
SIMPLE_SELECTORS = ("random-broker", "controller", "all-brokers", "any-broker",
                    "active-controller", "controller-follower", "controllers-majority")
CONTROLLER_SELECTORS = ("active-controller", "controller-follower", "controllers-majority")
PARTITION_SELECTORS = ("leader-of", "follower-of", "replica-of")
PARTITION_CONDITIONS = ("isr-contains", "isr-excludes", "elr-contains", "elr-excludes", "leader-is", "leader-not")
NODE_CONDITIONS = ("restarted", "running", "stopped")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


class ScheduleError(RuntimeError):
    """A step could not be carried out (condition timed out, no such broker): exit 3."""


# ---------------------------------------------------------------------------------------
# the cluster as a schedule sees it

class ClusterView(Protocol):
    """What conditions and selectors read; the run loop implements it."""

    def partition_state(self, partition: int) -> dict[str, Any] | None:
        """Latest ``{"leader": id, "isr": [ids], "elr": [ids], "replicas": [ids]}`` or None."""

    def events_since(self, wall: float) -> list[dict[str, Any]]:
        """Cluster event-log records (docs/history-format.md) with ``wall >= wall``."""


#: extra condition kinds other nemesis modules may add: name -> (check_args, test)
#: check_args(checker, value, path) validates at load time; test(runner, value) -> bool
CONDITIONS: dict[str, tuple[Callable[[Checker, Any, str], None], Callable[["ScheduleRunner", Any], bool]]] = {}


def register_condition(name: str, check_args: Callable[[Checker, Any, str], None],
                       test: Callable[["ScheduleRunner", Any], bool]) -> None:
    CONDITIONS[name] = (check_args, test)


# ---------------------------------------------------------------------------------------
# parsing

@dataclass
class Step:
    kind: str
    arg: Any
    target: list[str] = field(default_factory=list)
    name: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    duration: float | None = None
    timeout: float = 60.0
    on_timeout: str = "fail"
    poll: float = 0.25
    path: str = ""


@dataclass
class RandomMix:
    faults: list[tuple[str, dict[str, Any]]]
    interval: float = 10.0
    duration: float = 5.0
    targets: list[str] = field(default_factory=lambda: ["random-broker"])
    seed: int | None = None
    start_after: float = 2.0


@dataclass
class Schedule:
    kind: str = "none"
    steps: list[Step] = field(default_factory=list)
    random: RandomMix | None = None
    #: ``nemesis.settings``: passed to every nemesis as ``ctx.settings`` (e.g. ``proxy: {...}``)
    settings: dict[str, Any] = field(default_factory=dict)

    def faults(self) -> list[str]:
        if self.kind == "targeted":
            return [s.arg for s in self.steps if s.kind == "start"]
        if self.kind == "random" and self.random:
            return [f for f, _ in self.random.faults]
        return []


def load_nemeses() -> dict[str, str]:
    """Import every module in the nemeses package so it registers; return import failures
    (module -> one-line reason) rather than raising, so one broken module does not stop a
    campaign that does not use it."""
    import importlib
    import pkgutil

    import nemeses

    failures: dict[str, str] = {}
    for m in pkgutil.iter_modules(nemeses.__path__):
        if m.name in ("base", "schedule") or m.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"nemeses.{m.name}")
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            failures[m.name] = f"{type(e).__name__}: {e}".splitlines()[0]
    return failures


def check_selector(c: Checker, v: Any, path: str, *, partitions: int, host_names: set[str] | None,
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


def _check_partition_cond(ctx_check: Callable[..., str], c: Checker, v: Any, path: str, partitions: int) -> None:
    m = c.mapping(v, path, allow_none=False)
    c.keys(m, path, ["partition", "broker"], required=["partition", "broker"])
    c.integer(m["partition"], join(path, "partition"), min=0, max=partitions - 1)
    ctx_check(m["broker"], join(path, "broker"))


def parse_schedule(c: Checker, raw: Any, path: str, *, partitions: int, host_names: set[str] | None,
                   embedded_brokers: int | None) -> Schedule:
    sched = _parse_schedule(c, raw, path, partitions=partitions, host_names=host_names,
                            embedded_brokers=embedded_brokers)
    if isinstance(raw, dict) and raw.get("settings") is not None:
        sched.settings = dict(c.mapping(raw["settings"], join(path, "settings")))
    return sched


def _parse_schedule(c: Checker, raw: Any, path: str, *, partitions: int, host_names: set[str] | None,
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
            why = f" (module nemeses.{f} failed to import: {failures[f]})" if f in failures else ""
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
                elif cname in NODE_CONDITIONS:
                    sel(cval, cp)
                elif cname == "event":
                    em = c.mapping(cval, cp, allow_none=False)
                    c.string(em.get("event"), join(cp, "event"))
                    for fk, fv in em.items():
                        c.scalar(fv, join(cp, fk))
                elif cname in CONDITIONS:
                    CONDITIONS[cname][0](c, cval, cp)
                else:
                    allc = [*PARTITION_CONDITIONS, *NODE_CONDITIONS, "event", *CONDITIONS]
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
    common = dict(c.mapping(r.get("params"), join(rp, "params")))
    for i, f in enumerate(faults_raw):
        fp = f"{rp}.faults[{i}]"
        if isinstance(f, dict):
            c.keys(f, fp, ["fault", "params"], required=["fault"])
            faults.append((fault_name(f["fault"], join(fp, "fault")), {**common, **c.mapping(f.get("params"), join(fp, "params"))}))
        else:
            faults.append((fault_name(f, fp), dict(common)))
    tl = r.get("targets", ["random-broker"])
    tl = tl if isinstance(tl, list) else [tl]
    mix = RandomMix(
        faults=faults,
        interval=c.number(r.get("interval", 10), join(rp, "interval"), positive=True),
        duration=c.number(r.get("duration", 5), join(rp, "duration"), min=0),
        targets=[sel(t, join(rp, "targets")) for t in tl],
        seed=c.integer(r["seed"], join(rp, "seed"), min=0) if r.get("seed") is not None else None,
        start_after=c.number(r.get("start-after", 2), join(rp, "start-after"), min=0),
    )
    return Schedule("random", random=mix)


# ---------------------------------------------------------------------------------------
# execution

@dataclass
class Active:
    nemesis: Nemesis
    record: FaultRecord
    name: str
    started_wall: float
    stop_at: float | None = None   # monotonic deadline for an automatic stop


class ScheduleRunner:
    """Drives one schedule against a cluster; every fault goes through ledger + timeline
    (Nemesis.begin/end), and :meth:`heal_all` stops whatever is still applied."""

    def __init__(self, ctx: NemesisContext, view: ClusterView, schedule: Schedule, *,
                 stop_event: threading.Event | None = None, on_fault: Callable[[str], None] | None = None):
        self.ctx, self.view, self.schedule = ctx, view, schedule
        self.stop_event = stop_event or threading.Event()
        self.on_fault = on_fault or (lambda s: None)
        self.nemeses: dict[str, Nemesis] = {}
        self.active: dict[str, Active] = {}
        self.names: dict[str, list[str]] = {}           # @NAME -> host names
        self.last_fault_wall: dict[str, float] = {}     # host -> wall time a fault last hit it
        self.started_wall = time.time()
        self._lock = threading.RLock()
        self._seq = 0

    # -- helpers --------------------------------------------------------------------------
    def nemesis(self, fault: str) -> Nemesis:
        if fault not in self.nemeses:
            n = REGISTRY[fault]()
            n.setup(self.ctx)
            self.nemeses[fault] = n
        return self.nemeses[fault]

    def broker_by_id(self, node_id: int | None) -> str | None:
        for n in self.ctx.nodes.values():
            if n.role == "broker" and n.node_id == node_id:
                return n.name
        return None

    def _state(self, partition: int) -> dict[str, Any]:
        st = self.view.partition_state(partition)
        if not st:
            raise ScheduleError(f"no metadata yet for partition {partition}")
        return st

    def resolve(self, selector: str) -> list[str]:
        """A selector → host names, now (leaders move, so resolve at the step's time)."""
        brokers = sorted(n.name for n in self.ctx.nodes.values() if n.role == "broker")
        rng = self.ctx.rng
        if selector.startswith("@"):
            if selector[1:] not in self.names:
                raise ScheduleError(f"{selector}: nothing was selected under that name yet")
            return list(self.names[selector[1:]])
        if selector in ("random-broker", "any-broker"):
            return [rng.choice(brokers)]
        if selector == "all-brokers":
            return brokers
        if selector in CONTROLLER_SELECTORS:
            return self._resolve_controllers(selector)
        if selector == "controller":
            ctrl = sorted(n.name for n in self.ctx.nodes.values() if n.role == "controller")
            if not ctrl:
                raise ScheduleError("controller: the target has no controller host")
            return [ctrl[0]]
        kind, sep, rest = selector.partition(":")
        if sep and kind in PARTITION_SELECTORS:
            st = self._state(int(rest))
            leader = self.broker_by_id(st.get("leader"))
            if kind == "leader-of":
                if leader is None:
                    raise ScheduleError(f"{selector}: partition {rest} has no leader now")
                return [leader]
            pool_ids = st.get("isr") or st.get("replicas") or []
            if kind == "replica-of":
                pool_ids = st.get("replicas") or pool_ids
            pool = sorted({b for b in (self.broker_by_id(i) for i in pool_ids) if b})
            if kind == "follower-of":
                pool = [b for b in pool if b != leader] or [b for b in brokers if b != leader]
            if not pool:
                raise ScheduleError(f"{selector}: no candidate broker")
            return [rng.choice(pool)]
        if selector not in self.ctx.nodes:
            raise ScheduleError(f"unknown host {selector!r}; hosts: {', '.join(sorted(self.ctx.nodes))}")
        return [selector]

    def active_controller(self) -> str | None:
        """The controller host leading the KRaft quorum now, from the controllers' events: the
        latest ``controller_elected`` epoch, unless that leader has since resigned it (a KRaft
        leader announces both; docs/kraftsim-raft.md). A lone controller without such events is
        the active one."""
        ctrls = {n.node_id: n.name for n in self.ctx.nodes.values() if n.role == "controller"}
        best: tuple[int, int] | None = None
        resigned: set[tuple[int, int]] = set()
        for e in self.view.events_since(0.0):
            if e.get("event") == "controller_elected" and e.get("leader") in ctrls:
                key = (int(e["epoch"]), int(e["leader"]))
                best = key if best is None or key > best else best
            elif e.get("event") == "controller_resigned":
                resigned.add((int(e.get("epoch", -1)), int(e.get("leader", -1))))
        if best is None:
            return ctrls[min(ctrls)] if len(ctrls) == 1 else None
        return None if best in resigned else ctrls[best[1]]

    def _resolve_controllers(self, selector: str) -> list[str]:
        """active-controller; controller-follower (a random other controller); controllers-majority
        (every controller but the active one: the side that elects without it)."""
        ctrl = sorted(n.name for n in self.ctx.nodes.values() if n.role == "controller")
        if not ctrl:
            raise ScheduleError(f"{selector}: the target has no controller host")
        active = self.active_controller()
        if active is None:
            raise ScheduleError(f"{selector}: no active controller now")
        if selector == "active-controller":
            return [active]
        others = [n for n in ctrl if n != active]
        if not others or (selector == "controllers-majority" and len(others) < len(ctrl) // 2 + 1):
            raise ScheduleError(f"{selector}: {len(ctrl)} controller(s): no {selector.split('-')[1]} without the active one")
        return [self.ctx.rng.choice(others)] if selector == "controller-follower" else others

    def resolve_soon(self, selector: str, within: float = 10.0) -> list[str]:
        """Resolve, retrying for a while when the answer is not there yet (a partition
        between leaders just after a kill, no observer sample yet)."""
        deadline = time.monotonic() + within
        while True:
            try:
                return self.resolve(selector)
            except ScheduleError:
                if time.monotonic() >= deadline or self.stop_event.is_set():
                    raise
            self._sleep(0.2)

    def _sleep(self, seconds: float) -> None:
        """Sleep, running automatic stops on time, and return early when asked to stop."""
        end = time.monotonic() + seconds
        while not self.stop_event.is_set():
            self._auto_stops()
            left = end - time.monotonic()
            if left <= 0:
                return
            self.stop_event.wait(min(left, 0.1))

    def _auto_stops(self) -> None:
        now = time.monotonic()
        for name, a in list(self.active.items()):
            if a.stop_at is not None and now >= a.stop_at:
                self.stop(name)

    def _current(self) -> None:
        self.on_fault(", ".join(f"{a.record.fault}→{'+'.join(a.record.targets) or '*'}" for a in self.active.values()) or "-")

    # -- faults ---------------------------------------------------------------------------
    def start(self, fault: str, targets: list[str], params: dict[str, Any], name: str | None = None,
              duration: float | None = None) -> FaultRecord:
        with self._lock:
            self._seq += 1
            name = name or f"{fault}-{self._seq}"
            nem = self.nemesis(fault)
            rec = nem.start(list(targets), **params)
            wall = time.time()
            for t in targets:
                self.last_fault_wall[t] = wall
            self.active[name] = Active(nem, rec, name, wall,
                                       None if duration is None else time.monotonic() + duration)
            self.names.setdefault(name, list(targets))
            self._current()
            return rec

    def stop(self, name: str) -> None:
        with self._lock:
            a = self.active.pop(name, None)
            if a is None:
                return
            try:
                a.nemesis.stop(a.record)
            finally:
                self._current()

    def heal_all(self) -> list[str]:
        """Stop every active fault, newest first; returns one line per failure (and goes on)."""
        errors = []
        for name in reversed(list(self.active)):
            try:
                self.stop(name)
            except Exception as e:  # noqa: BLE001 - heal everything we can, report the rest
                errors.append(f"{name}: {type(e).__name__}: {e}")
                self.active.pop(name, None)
        for n in self.nemeses.values():
            try:
                n.teardown()
            except Exception as e:  # noqa: BLE001
                errors.append(f"teardown {n.name}: {e}")
        return errors

    # -- conditions -----------------------------------------------------------------------
    def condition(self, cond: dict[str, Any], since_wall: float) -> bool:
        (cname, cval), = cond.items()
        if cname in PARTITION_CONDITIONS:
            st = self.view.partition_state(int(cval["partition"]))
            if not st:
                return False
            hosts = set(self.resolve(str(cval["broker"])))
            ids = {self.ctx.nodes[h].node_id for h in hosts}
            if cname.startswith("leader"):
                is_leader = st.get("leader") in ids
                return is_leader if cname == "leader-is" else (st.get("leader") is not None and not is_leader)
            members = set(st.get("isr" if cname.startswith("isr") else "elr") or [])
            return ids <= members if cname.endswith("contains") else not (ids & members)
        if cname in NODE_CONDITIONS:
            hosts = self.resolve(str(cval))
            for h in hosts:
                node = self.ctx.nodes[h]
                running = bool(node.service_pids())
                if cname == "stopped":
                    if running:
                        return False
                    continue
                if not running:
                    return False
                if cname == "restarted" and getattr(getattr(node, "spec", None), "event_log", True):
                    # with an event log, "restarted" means registered again with the controller;
                    # without one (a lab host with no kafka_event_log) running is all we can see
                    since = self.last_fault_wall.get(h, since_wall)
                    evs = self.view.events_since(since)
                    if not any(e.get("event") in ("broker_registered", "broker_unfenced")
                               and e.get("broker") == node.node_id for e in evs):
                        return False
            return True
        if cname == "event":
            want = dict(cval)
            return any(all(e.get(k) == v for k, v in want.items()) for e in self.view.events_since(since_wall))
        if cname in CONDITIONS:
            return bool(CONDITIONS[cname][1](self, cval))
        raise ScheduleError(f"unknown condition {cname}")

    # -- the two schedules ----------------------------------------------------------------
    def run(self, until_mono: float | None = None) -> None:
        """Run the schedule. Targeted: every step once. Random: until ``until_mono``."""
        if self.schedule.kind == "targeted":
            for step in self.schedule.steps:
                if self.stop_event.is_set():
                    return
                self.run_step(step)
        elif self.schedule.kind == "random" and self.schedule.random:
            self.run_random(self.schedule.random, until_mono)

    def run_step(self, step: Step) -> None:
        tl = self.ctx.timeline
        if step.kind == "wait":
            self._sleep(step.arg)
        elif step.kind == "note":
            tl.event("note", text=step.arg)
        elif step.kind == "select":
            hosts = self.resolve_soon(step.arg)
            self.names[step.name] = hosts
            tl.event("note", text=f"select {step.arg} as {step.name}", hosts=hosts)
        elif step.kind == "start":
            targets: list[str] = []
            for s in step.target:
                targets += [t for t in self.resolve_soon(s) if t not in targets]
            self.start(step.arg, targets, step.params, step.name, step.duration)
        elif step.kind == "stop":
            if step.arg == "all":
                for name in reversed(list(self.active)):
                    self.stop(name)
            else:
                self.stop(step.arg)
        elif step.kind == "until":
            since = time.time()
            deadline = time.monotonic() + step.timeout
            while not self.stop_event.is_set():
                self._auto_stops()
                try:
                    if self.condition(step.arg, since):
                        tl.event("note", text=f"condition met: {_fmt(step.arg)}")
                        return
                except ScheduleError:
                    pass  # metadata not there yet: keep waiting until the timeout
                if time.monotonic() >= deadline:
                    msg = f"{step.path}: condition {_fmt(step.arg)} not met within {step.timeout:g}s"
                    tl.event("note", text=msg, timeout=True)
                    if step.on_timeout == "fail":
                        raise ScheduleError(msg)
                    return
                self.stop_event.wait(step.poll)

    def run_random(self, mix: RandomMix, until_mono: float | None) -> None:
        """Jepsen-style mix: after ``start-after``, every ``interval`` (jittered ±50% by the
        seeded RNG) one random fault on the selected target, healed after ``duration``."""
        rng = self.ctx.rng
        self._sleep(mix.start_after)
        while not self.stop_event.is_set() and (until_mono is None or time.monotonic() < until_mono):
            fault, params = mix.faults[rng.randrange(len(mix.faults))]
            targets: list[str] = []
            try:
                for s in mix.targets:
                    targets += [t for t in self.resolve(s) if t not in targets]
            except ScheduleError as e:
                self.ctx.timeline.event("note", text=f"random schedule skipped a fault: {e}")
                self._sleep(1.0)
                continue
            try:
                name = self.start(fault, targets, params).id
            except Exception as e:  # noqa: BLE001 - a random fault that cannot apply now is skipped
                self.ctx.timeline.event("note", text=f"random schedule: {fault} on {', '.join(targets)} failed: "
                                        f"{type(e).__name__}: {e}")
                self._sleep(1.0)
                continue
            self._sleep(min(mix.duration, max(0.0, (until_mono or float("inf")) - time.monotonic())))
            # the fault was registered under an auto name; stop the newest of that fault
            for n in [k for k, a in self.active.items() if a.record.id == name]:
                self.stop(n)
            self._sleep(mix.interval * rng.uniform(0.5, 1.5))


def _fmt(cond: dict[str, Any]) -> str:
    (k, v), = cond.items()
    if isinstance(v, dict):
        return f"{k}(" + ", ".join(f"{a}={b}" for a, b in v.items()) + ")"
    return f"{k}({v})"


def make_rng(seed: int) -> random.Random:
    return random.Random(seed)


__all__ = ["ClusterView", "ConfigError", "Schedule", "ScheduleError", "ScheduleRunner", "Step",
           "load_nemeses", "parse_schedule", "register_condition"]
