"""Delta debugging over fault steps, then simplification of each step.

Why ddmin (Zeller and Hildebrandt, "Simplifying and Isolating Failure-Inducing Input", 2002):
a lost write usually needs a few faults in the right order (the follower out of the ISR, then
the leader gone); which few is what nobody knows. ddmin finds a 1-minimal subset - removing
any single remaining step makes the failure go away - with O(n log n) tests when few steps
matter, and each test here is K real replays, so the number of tests is the cost.

Then each remaining step is simplified (shorter, fewer targets, earlier), one change at a
time, keeping a change only when the candidate still fails: a reproduction a Kafka developer
reads should not ask them to wait 20 s before the first fault.

The search is pure: ``test(steps) -> bool`` ("still fails") is given by the caller, which
caches outcomes (a resumed shrink walks the same path and pays nothing for what it knows) and
raises :class:`Exhausted` when the run or time budget is spent; the best candidate so far is
then the answer.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from harness.shrink.schedule import FaultStep


class Exhausted(Exception):
    """The run or time budget is spent: stop searching, keep the best so far."""


Test = Callable[[list[FaultStep], str], bool]


def _split(items: list[int], n: int) -> list[list[int]]:
    size, rem = divmod(len(items), n)
    out, i = [], 0
    for k in range(n):
        j = i + size + (1 if k < rem else 0)
        out.append(items[i:j])
        i = j
    return [c for c in out if c]


def ddmin(steps: list[FaultStep], test: Test, on_best: Callable[[list[FaultStep]], None] | None = None) -> list[FaultStep]:
    """A 1-minimal failing subset of ``steps`` (which must fail), in their original order."""
    idx = list(range(len(steps)))
    pick = lambda ix: [steps[i] for i in ix]  # noqa: E731
    n = 2
    while len(idx) >= 2:
        chunks = _split(idx, n)
        for c in chunks:                       # a chunk alone fails: zoom in on it
            if test(pick(c), "ddmin"):
                idx, n = c, 2
                break
        else:
            for c in chunks if n > 2 else []:  # with n == 2 the complements are the chunks
                comp = [i for i in idx if i not in c]
                if test(pick(comp), "ddmin"):
                    idx, n = comp, max(n - 1, 2)
                    break
            else:
                if n >= len(idx):
                    break
                n = min(len(idx), 2 * n)
                continue
        if on_best:
            on_best(pick(idx))
    return pick(idx)


def _compress(steps: list[FaultStep], t: float, by: float) -> list[FaultStep]:
    """Move every start and every heal at or after ``t`` earlier by ``by`` seconds: the
    timeline after ``t`` moves as a block. A step that began before ``t`` and heals after it
    (an overlap) is shortened, so whatever started while it was applied still does."""
    out = []
    for x in steps:
        at = x.at - by if x.at >= t - 1e-9 else x.at
        end = x.end - by if x.end >= t - 1e-9 else x.end
        out.append(x if (at, end) == (x.at, x.end) else replace(x, at=round(at, 2), duration=round(end - at, 2)))
    return out


def _events(steps: list[FaultStep], but: FaultStep) -> list[float]:
    """Every start and heal time of the steps other than ``but``."""
    return [t for x in steps if x is not but for t in (x.at, x.end)]


def simplify(steps: list[FaultStep], test: Test, *, min_duration: float = 1.0, min_lead: float = 1.0,
             on_best: Callable[[list[FaultStep]], None] | None = None) -> list[FaultStep]:
    """One pass over the steps, in time order: for each, try fewer targets, half the
    duration, and an earlier start; keep each change that still fails.

    Time moves as a block: shortening a step moves every start and heal after its heal
    earlier by as much, and starting a step earlier moves every later start and heal with it,
    so what a random mix made matter - "the leader died 0.4 s after the follower came
    back" - stays true while the schedule gets shorter. No change reorders the starts and
    heals (with overlapping faults: a step never shrinks past a start or heal that happened
    while it was applied, and never starts before one that happened before it), so a
    candidate asks only "is this one shorter and still failing", never "does a different
    overlap fail"."""
    best = sorted(steps, key=lambda s: s.at)

    def attempt(cand: list[FaultStep]) -> bool:
        nonlocal best
        cand = sorted(cand, key=lambda s: s.at)
        if test(cand, "simplify"):
            best = cand
            if on_best:
                on_best(best)
            return True
        return False

    for i in range(len(best)):
        cur = best[i]
        for t in list(cur.target) if len(cur.target) > 1 else []:
            cur = best[i]
            if len(cur.target) > 1 and t in cur.target:
                attempt(best[:i] + [replace(cur, target=tuple(x for x in cur.target if x != t))] + best[i + 1:])
        cur = best[i]
        inside = [t for t in _events(best, cur) if cur.at < t < cur.end]
        # half the duration, but heal after the last start or heal that happened during it
        end = cur.at + round(cur.duration / 2, 2) if not inside else max(cur.at + cur.duration / 2,
                                                                           (max(inside) + cur.end) / 2)
        shorter = round(end - cur.at, 2)
        if shorter >= min_duration and cur.duration - shorter >= 0.5:
            others = _compress(best[:i] + best[i + 1:], cur.end, cur.duration - shorter)
            attempt(others + [replace(cur, duration=shorter)])
        cur = best[i]
        before = [t for t in _events(best, cur) if t < cur.at - 1e-9]
        floor = max(before) if before else min_lead
        shift = round((cur.at - floor) / 2, 2)
        if shift >= 0.5:
            attempt(_compress(best, cur.at, shift))
    return best
