"""The fault plan of a random mix with ``concurrency: k``: k independent slots, all from one seed.

Why slots: a mix that applies one fault at a time (start, wait ``duration``, heal, wait) can
never produce the overlaps the losses we hunt are made of - a wiped follower *while* its
AlterPartition is held *while* the leader dies (docs/seeds.md#seed-000), a follower out of the ISR *while*
the leader loses its page cache (docs/seeds.md#seed-003-2-4). Jepsen gets overlaps by composing
independent generators (``nemesis/compose``, one generator per fault family, run side by
side). Here each of the k slots is such a generator: after a gap it draws a fault, a
duration and the seed its targets are picked with, the fault is healed after that duration,
and the slot waits its next gap. Up to k faults are therefore active at once, each with its
own targets, start and duration.

Why every slot has its own generator (seeded from the mix's seed and the slot number): the
plan must not depend on timing. With one shared generator, which slot drew first would decide
every later draw, and the slots' order varies with how long a reboot took. So each planned
fault also carries ``pick``, the seed of the generator its targets (``random-broker``,
``follower-of:P``) and its nemesis's own draws (a reboot's cut seed, a partition's halves) are
made with at start time: the same seed gives the same plan, whatever order the slots' faults
happen to start in. Plain data, no cluster: the interpreter (:mod:`nemeses.schedule_runner`)
runs it, the tests compare plans without one.

``concurrency: 1`` is not this: the interpreter keeps the original single loop, so seeds
recorded before concurrency existed replay the same faults.
"""
from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import Any, Iterator

from nemeses.schedule import RandomMix


@dataclass(frozen=True)
class PlannedFault:
    """One fault of a slot: ``delay`` seconds after the slot's previous fault was healed (for
    the first, after the schedule began: ``start-after`` plus the slot's stagger), ``fault``
    (``index`` in the mix's list) with ``params`` for ``duration`` seconds; ``pick`` seeds the
    generator its targets and its nemesis's own draws are made with. ``nominal`` is its start
    time if every fault started and healed instantly (for ordering and for people; the
    interpreter runs by ``delay``)."""
    slot: int
    n: int
    delay: float
    index: int
    fault: str
    params: dict[str, Any] = field(hash=False)
    duration: float = 0.0
    pick: int = 0
    nominal: float = 0.0


def slot_seed(seed: int, slot: int) -> str:
    """The seed of one slot's generator. A string seed is hashed by ``random.Random`` with
    SHA-512 (not Python's per-process hash), so it is stable across processes and versions."""
    return f"faultline-random-mix:{seed}:slot-{slot}"


def slot_plan(mix: RandomMix, seed: int, slot: int) -> Iterator[PlannedFault]:
    """Slot ``slot``'s faults, forever: fault and duration (its ``duration`` ±50%) drawn from the
    slot's generator, then the gap to the next one (``interval`` ±50%, as the one-at-a-time
    mix waits). Slot 0 begins at ``start-after``; every other slot a random part of one
    fault-and-gap later, so the slots do not move in step."""
    rng = random.Random(slot_seed(seed, slot))
    delay = mix.start_after + (0.0 if slot == 0 else rng.uniform(0.0, mix.duration + mix.interval))
    t, n = 0.0, 0
    while True:
        i = rng.randrange(len(mix.faults))
        fault, params = mix.faults[i]
        duration = round(mix.duration_of(i) * rng.uniform(0.5, 1.5), 3)
        pick = rng.getrandbits(32)
        t += delay
        yield PlannedFault(slot=slot, n=n, delay=round(delay, 3), index=i, fault=fault, params=dict(params),
                           duration=duration, pick=pick, nominal=round(t, 3))
        t += duration
        delay = mix.interval * rng.uniform(0.5, 1.5)
        n += 1


def plan(mix: RandomMix, seed: int) -> Iterator[PlannedFault]:
    """Every slot's faults merged in nominal start order (ties: lower slot first), forever."""
    k = max(1, int(mix.concurrency))
    return heapq.merge(*(slot_plan(mix, seed, s) for s in range(k)), key=lambda p: (p.nominal, p.slot))


def plan_until(mix: RandomMix, seed: int, horizon: float) -> list[PlannedFault]:
    """The plan's faults that nominally start before ``horizon`` seconds (for tests and people)."""
    out = []
    for p in plan(mix, seed):
        if p.nominal >= horizon:
            break
        out.append(p)
    return out


__all__ = ["PlannedFault", "plan", "plan_until", "slot_plan", "slot_seed"]
