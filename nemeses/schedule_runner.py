"""The interpreter of the step language: runs a :class:`~nemeses.schedule.Schedule` on a cluster.

Why apart from the language (:mod:`nemeses.schedule`): a schedule is plain data that the
campaign loader, the shrinker and the suite build and compare without a cluster; running it
needs a cluster, a clock and the run's seeded RNG. As in Jepsen, where a generator is pure data
and a separate interpreter runs it, this module is the only one that turns steps into faults.

What it does at step time: resolves selectors from a :class:`ClusterView` (the run loop's window
onto the observer's latest sample and the cluster event logs: leaders move, so a selector is
resolved when its step runs, never at load), waits on conditions, sleeps while firing the
automatic stops of faults given a ``duration``, and hands every fault start and stop to
:class:`~nemeses.active.ActiveFaults`. Random choices use ``ctx.rng`` (seeded by the run), so
``--seed`` replays the same targets. It imports nothing of the workloads or the checkers.
"""
from __future__ import annotations

import random
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Protocol

from nemeses.active import ActiveFaults, FaultConflict, FaultFailed
from nemeses.base import CONDITIONS, FaultRecord, NemesisContext
from nemeses.random_plan import PlannedFault, slot_plan
from nemeses.schedule import (CONTROLLER_CONDITIONS, CONTROLLER_SELECTORS, NODE_CONDITIONS, PARTITION_CONDITIONS,
                              PARTITION_SELECTORS,
                              RandomMix, Schedule, Step)

#: how long the one-at-a-time random mix waits for a drawn fault's selector to name a host (an
#: election in progress: KRaft's takes well under this) before it skips the fault and draws again
RANDOM_RESOLVE_WAIT_S = 10.0

class ScheduleError(RuntimeError):
    """A step could not be carried out (condition timed out, no such broker): exit 3."""


class ClusterView(Protocol):
    """What conditions and selectors read; the run loop implements it."""

    def partition_state(self, partition: int) -> dict[str, Any] | None:
        """Latest ``{"leader": id, "isr": [ids], "elr": [ids], "replicas": [ids]}`` or None."""

    def events_since(self, wall: float) -> list[dict[str, Any]]:
        """Cluster event-log records (docs/history-format.md) with ``wall >= wall``."""

    def has_events(self, node: Any) -> bool:
        """Whether ``node``'s events can be read during the run (optional: without it, a node's
        spec ``event_log`` decides)."""


class ScheduleRunner:
    """Drives one schedule against a cluster; every fault goes through ledger + timeline
    (Nemesis.begin/end, in :class:`ActiveFaults`), and :meth:`heal_all` stops whatever is
    still applied."""

    def __init__(self, ctx: NemesisContext, view: ClusterView, schedule: Schedule, *,
                 stop_event: threading.Event | None = None, on_fault: Callable[[str], None] | None = None):
        self.ctx, self.view, self.schedule = ctx, view, schedule
        self.stop_event = stop_event or threading.Event()
        #: the faults applied now; ``on_fault`` hears a one-line summary whenever that changes
        self.faults = ActiveFaults(ctx, on_change=on_fault)
        self.names: dict[str, list[str]] = {}           # @NAME -> host names
        self.selected: set[str] = set()                 # hosts a ``select`` step named (unnamed-controller)
        self.started_wall = time.time()

    # -- time -----------------------------------------------------------------------------
    def wait_until(self, until_mono: float) -> None:
        """Wait until the monotonic time ``until_mono``, stopping each fault whose duration
        runs out on time, and return early when the run asks the schedule to stop. The run
        loop waits out the workload phase with it after the steps are done."""
        while not self.stop_event.is_set():
            self.faults.stop_due()
            left = until_mono - time.monotonic()
            if left <= 0:
                return
            self.stop_event.wait(min(left, 0.1))

    def sleep(self, seconds: float) -> None:
        """:meth:`wait_until` ``seconds`` from now (``wait: S``; automatic stops still fire)."""
        self.wait_until(time.monotonic() + seconds)

    # -- selectors ------------------------------------------------------------------------
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
        if selector == "stopped-brokers":
            # none down: nothing for the step to act on (a kill refuses no targets; a step that may
            # find none says on-failure: continue)
            return [b for b in brokers if not self.ctx.nodes[b].service_pids()]
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
            ev = e.get("event")
            if ev == "controller_elected" and e.get("leader") in ctrls:
                key = (int(e["epoch"]), int(e["leader"]))
                best = key if best is None or key > best else best
            elif ev == "controller_activated" and e.get("node") in ctrls:
                # real Kafka (checkers/kafkalog): QuorumController's "Becoming the active
                # controller at epoch E" - the same fact for the selector
                key = (int(e["controller_epoch"]), int(e["node"]))
                best = key if best is None or key > best else best
            elif ev == "controller_resigned":
                resigned.add((int(e.get("epoch", -1)), int(e.get("leader", -1))))
            elif ev == "controller_renounced":
                resigned.add((int(e.get("controller_epoch", -1)), int(e.get("node", -1))))
        if best is None:
            return ctrls[min(ctrls)] if len(ctrls) == 1 else None
        return None if best in resigned else ctrls[best[1]]

    def _resolve_controllers(self, selector: str) -> list[str]:
        """active-controller; controller-follower (a random other controller); controllers-majority
        (every controller but the active one: the side that elects without it); unnamed-controller
        (a random controller no ``select`` step named yet, leader or not: a schedule that gives
        each of three controllers its own part names the last one so, whoever leads by then; a
        fault's ``as`` does not count, it names a fault over several hosts)."""
        ctrl = sorted(n.name for n in self.ctx.nodes.values() if n.role == "controller")
        if not ctrl:
            raise ScheduleError(f"{selector}: the target has no controller host")
        if selector == "unnamed-controller":
            free = [n for n in ctrl if n not in self.selected]
            if not free:
                raise ScheduleError(f"{selector}: every controller ({', '.join(ctrl)}) is named already")
            return [self.ctx.rng.choice(free)]
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
            self.sleep(0.2)

    def _resolve_all(self, selectors: list[str], resolve: Callable[[str], list[str]]) -> list[str]:
        """Every selector's hosts, in order, each host once."""
        targets: list[str] = []
        for s in selectors:
            targets += [t for t in resolve(s) if t not in targets]
        return targets

    # -- faults ---------------------------------------------------------------------------
    def start(self, fault: str, targets: list[str], params: dict[str, Any], name: str | None = None,
              duration: float | None = None) -> FaultRecord:
        """Apply one fault on hosts already resolved; ``name`` becomes ``@name`` for later steps."""
        a = self.faults.start(fault, targets, params, name, duration)
        self.names.setdefault(a.name, list(targets))
        return a.record

    def stop(self, name: str) -> None:
        self.faults.stop(name)

    def heal_all(self) -> list[str]:
        """Stop every active fault, newest first; returns one line per failure (and goes on)."""
        return self.faults.heal_all()

    # -- conditions -----------------------------------------------------------------------
    def _has_events(self, node: Any) -> bool:
        """Whether the view can read ``node``'s events (ClusterView.has_events, when it has one)."""
        has = getattr(self.view, "has_events", None)
        if has is not None:
            return bool(has(node))
        return bool(getattr(getattr(node, "spec", None), "event_log", True))

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
                if cname == "restarted" and self._has_events(node):
                    # with events (kraftsim's log, or real Kafka's own logs read live), "restarted"
                    # means registered again with the controller; without (a lab host with no
                    # kafka_event_log and no Kafka log dir) running is all we can see
                    since = self.faults.last_hit_wall.get(h, since_wall)
                    evs = self.view.events_since(since)
                    if not any(e.get("event") in ("broker_registered", "broker_unfenced")
                               and e.get("broker") == node.node_id for e in evs):
                        return False
            return True
        if cname in CONTROLLER_CONDITIONS:
            active = self.active_controller()
            if active is None:
                return False
            hosts = set(self.resolve(str(cval)))
            return (active in hosts) if cname == "active-controller-is" else (active not in hosts)
        if cname == "event":
            want = dict(cval)
            return any(all(e.get(k) == v for k, v in want.items()) for e in self.view.events_since(since_wall))
        if cname in CONDITIONS:
            return bool(CONDITIONS[cname][1](self.faults, cval))
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
            self.sleep(step.arg)
        elif step.kind == "note":
            tl.event("note", text=step.arg)
        elif step.kind == "select":
            hosts = self.resolve_soon(step.arg)
            self.names[step.name] = hosts
            self.selected.update(hosts)
            tl.event("note", text=f"select {step.arg} as {step.name}", hosts=hosts)
        elif step.kind == "start":
            targets = self._resolve_all(step.target, self.resolve_soon)
            try:
                self.start(step.arg, targets, step.params, step.name, step.duration)
            except FaultConflict as e:
                raise ScheduleError(f"{step.path}: {e}") from None
            except FaultFailed as e:
                # already healed and on the timeline (ActiveFaults); a script whose fault failed
                # did not set up what it tests, unless it says it can go on without it
                if step.on_failure == "fail":
                    raise ScheduleError(f"{step.path}: {e}") from None
        elif step.kind == "stop":
            if step.arg == "all":
                self.faults.stop_all()
            else:
                self.stop(step.arg)
        elif step.kind == "until":
            self._until(step)

    def _until(self, step: Step) -> None:
        tl = self.ctx.timeline
        since = time.time()
        deadline = time.monotonic() + step.timeout
        while not self.stop_event.is_set():
            self.faults.stop_due()
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
        seeded RNG) one random fault on the selected target, healed after ``duration``.
        ``concurrency`` above 1: :meth:`run_slots`. This loop stays as it was, draw for draw,
        so a seed recorded before concurrency existed replays the same faults."""
        if mix.concurrency > 1:
            self.run_slots(mix, until_mono)
            return
        rng = self.ctx.rng
        self.sleep(mix.start_after)
        while not self.stop_event.is_set() and (until_mono is None or time.monotonic() < until_mono):
            i = rng.randrange(len(mix.faults))
            fault, params = mix.faults[i]
            try:
                # a selector that names no host this instant (no active controller during an
                # election) is waited for, not replaced by another draw: a failed resolve draws
                # nothing, so the seed's next faults stay the same whatever the election's timing
                targets = self._resolve_all(mix.targets_of(i),
                                            lambda sel: self.resolve_soon(sel, within=RANDOM_RESOLVE_WAIT_S))
            except ScheduleError as e:
                self.ctx.timeline.event("note", text=f"random schedule skipped a fault: {e}")
                self.sleep(1.0)
                continue
            try:
                applied = self.faults.start(fault, targets, params)
            except FaultFailed:   # healed, and its failed record is on the timeline: the mix goes on
                self.sleep(1.0)
                continue
            except Exception as e:  # noqa: BLE001 - a random fault that cannot apply now is skipped
                self.ctx.timeline.event("note", text=f"random schedule skipped {fault} on {', '.join(targets)}: "
                                        f"{type(e).__name__}: {e}")
                self.sleep(1.0)
                continue
            self.sleep(min(mix.duration_of(i), max(0.0, (until_mono or float("inf")) - time.monotonic())))
            self.stop(applied.name)
            self.sleep(mix.interval * rng.uniform(0.5, 1.5))

    def run_slots(self, mix: RandomMix, until_mono: float | None) -> None:
        """``concurrency: k``: k slots side by side, each running its own part of the plan
        (:mod:`nemeses.random_plan`): wait the planned gap, start the planned fault with its
        own targets for its own duration, and once it is healed wait the next gap. So up to k
        faults are active at once. One thread and one loop start what is due and fire the
        automatic stops, so a start and a heal never race; a slot whose fault cannot start
        (no target now, a conflicting fault, an error) notes why and waits its next gap.
        The plan's seed is the run generator's one draw here, noted on the timeline."""
        seed = self.ctx.rng.getrandbits(63)
        k = mix.concurrency
        self.ctx.timeline.event("note", text=f"random mix: up to {k} faults at once, plan seed {seed}",
                                concurrency=k, plan_seed=seed)
        plans = [slot_plan(mix, seed, s) for s in range(k)]
        nxt = [next(g) for g in plans]
        now = time.monotonic()
        due = [now + p.delay for p in nxt]
        running: list[str | None] = [None] * k
        while not self.stop_event.is_set():
            self.faults.stop_due()
            if until_mono is not None and time.monotonic() >= until_mono:
                return
            for s in sorted(range(k), key=lambda i: (due[i], i)):
                if running[s] is not None:
                    if running[s] in self.faults.applied:
                        continue
                    running[s], due[s] = None, time.monotonic() + nxt[s].delay   # healed: its gap begins
                if time.monotonic() < due[s] or self.stop_event.is_set():
                    continue
                if until_mono is not None and time.monotonic() >= until_mono:
                    return
                p, nxt[s] = nxt[s], next(plans[s])
                running[s] = self._start_planned(mix, p, until_mono)
                if running[s] is None:
                    due[s] = time.monotonic() + nxt[s].delay
            idle = [d for d, r in zip(due, running) if r is None]
            self.stop_event.wait(max(0.0, min([*idle, time.monotonic() + 0.1]) - time.monotonic()))

    def _start_planned(self, mix: RandomMix, p: PlannedFault, until_mono: float | None) -> str | None:
        """Start one planned fault; its name, or None when it was skipped (noted)."""
        tl = self.ctx.timeline
        with self._drawing_from(random.Random(p.pick)):
            try:
                targets = self._resolve_all(mix.targets_of(p.index), self.resolve)
            except ScheduleError as e:
                tl.event("note", text=f"random schedule (slot {p.slot}) skipped {p.fault}: {e}")
                return None
            why = self.faults.conflict(p.fault, targets, p.params, one_service_fault_per_host=True)
            if why:
                tl.event("note", text=f"random schedule (slot {p.slot}) skipped {why}")
                return None
            left = float("inf") if until_mono is None else until_mono - time.monotonic()
            try:
                return self.faults.start(p.fault, targets, p.params, duration=max(0.0, min(p.duration, left))).name
            except FaultFailed:   # healed, and its failed record is on the timeline
                return None
            except Exception as e:  # noqa: BLE001 - a random fault that cannot apply now is skipped
                tl.event("note", text=f"random schedule (slot {p.slot}) skipped {p.fault} on {', '.join(targets)}: "
                         f"{type(e).__name__}: {e}")
                return None

    @contextmanager
    def _drawing_from(self, rng: random.Random) -> Iterator[None]:
        """Every draw made while one planned fault starts - its targets, and its nemesis's own
        (a reboot's cut seed, a partition's random halves) - comes from that fault's generator,
        so the plan does not depend on which slot's fault happened to start first."""
        run_rng, self.ctx.rng = self.ctx.rng, rng
        try:
            yield
        finally:
            self.ctx.rng = run_rng


def _fmt(cond: dict[str, Any]) -> str:
    (k, v), = cond.items()
    if isinstance(v, dict):
        return f"{k}(" + ", ".join(f"{a}={b}" for a, b in v.items()) + ")"
    return f"{k}({v})"


__all__ = ["ClusterView", "ScheduleError", "ScheduleRunner"]
