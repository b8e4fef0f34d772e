"""What a run showed against what it was expected to show, decided once: the expectation, the
outcome, and the exit codes of every faultline program.

**The expectation** (:class:`Expectation`) is what a campaign or a suite cell says the run must
show: ``no-loss`` (no acknowledged write lost and a valid history), ``loss`` (a known-bad
control lost acknowledged writes), ``loss-allowed`` (writes were lost and the configuration
permits every loss: each loss story of checkers/stories.py names the setting in ``allowed_by``,
and when the expectation names a setting, that one), ``require_errors`` (at least one send
ended with one of these Kafka errors: proof the campaign reached the state it tests), and
``require_anomalies`` / ``forbid_anomalies`` (the checker counted at least one / none of these
anomalies: how a campaign says what a bug that loses no write does instead - two active
controllers at once, an ISR change stuck - on its vulnerable side, and that it does not on its
fixed side; a required anomaly that breaks a Kafka promise, such as an uncommitted read, makes
an invalid history the expectation). It travels in run.json (``expect``, ``allowed_by``, ``require_errors``,
``require_anomalies``, ``forbid_anomalies``) from the campaign to the checker.

**The outcome** (:func:`decide`) is decided here and only here, from the checker's evidence
(:class:`Evidence`), and written into verdict.json by checkers/verdict.py: ``outcome``,
``as_expected``, ``outcome_reason``, ``expectations`` (each part of the expectation with whether
it held), ``inconclusive_because``. The run loop, suites, shrinking, report.html, the results
index and JUnit read those fields; none of them judges again. A rule that makes a run
inconclusive (too little evidence, a part of the checker that failed, too few faults applied)
is one more entry in :attr:`Evidence.thin` or :attr:`Evidence.unjudgeable`, so every reader
gets it at once. Fewer faults applied than the campaign's ``nemesis.min_applied``
(:class:`FaultCount`, run.json ``faults``) and a Kafka node that halted on its own during the run
(checkers/halts.py) are thin: the run did not test what it meant to, so finding nothing proves
nothing - but a loss it found is still a loss.

**Exit codes**: every program of the project exits with these codes, read from here:
``faultline`` (run, check, report, shrink, suite, heal, docker), ``python -m checkers``,
``python -m harness.report`` and ``python -m harness.probe`` (docs/architecture.md, "The CLI"). Why here,
in ``checkers/``: the checker's own command line cannot import the harness (it runs on Spark
workers without it, docs/architecture.md "Floors"), while the harness may import the checker;
so the one owner stands on the lower floor. Standard library only, so reading an exit code
never starts pyspark.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: the verdict was the expected one (and, for commands without a verdict: done)
EXIT_OK = 0
#: the verdict was not the expected one (a loss where none was expected, a control that did not lose,
#: a loss the configuration does not allow, a required error never seen; shrink: not reproducible)
EXIT_UNEXPECTED = 1
#: usage, configuration or unreadable input: one line naming file, field and what is wanted
EXIT_CONFIG = 2
#: infrastructure failure (target unreachable, cluster did not start, checker could not run) or interrupted
EXIT_INFRA = 3
#: inconclusive: the run found nothing but had too little evidence to show it (verdict ``outcome``)
EXIT_INCONCLUSIVE = 4


def exit_code(verdict: dict[str, Any]) -> int:
    """0 as expected, 1 not as expected, 4 inconclusive (too little evidence to tell)."""
    if verdict.get("outcome") == "inconclusive":
        return EXIT_INCONCLUSIVE
    return EXIT_OK if verdict.get("as_expected") else EXIT_UNEXPECTED


# --- the expectation ----------------------------------------------------------------------------

NO_LOSS, LOSS, LOSS_ALLOWED = "no-loss", "loss", "loss-allowed"
EXPECTS = (NO_LOSS, LOSS, LOSS_ALLOWED)
#: verdict ``outcome`` values
AS_EXPECTED, UNEXPECTED, INCONCLUSIVE = "as_expected", "unexpected", "inconclusive"
#: verdict ``mode`` of a directory that holds only Kafka's logs (checkers/events_only.py): the
#: cluster's events are read and told, but no history was checked (a history check has no ``mode``)
EVENTS_ONLY = "events-only"
#: why such a check cannot say whether acknowledged writes were lost: its outcome is inconclusive
NO_HISTORIES = "no histories: only Kafka's logs were read"


@dataclass(frozen=True)
class Expectation:
    """What the run must show (docs/campaigns.md ``expect``, ``allowed_by``, ``require_errors``)."""
    expect: str = NO_LOSS
    #: loss-allowed: the setting every loss story must name (None: any setting a story names)
    allowed_by: str | None = None
    #: at least one send must have ended with one of these Kafka error names
    require_errors: tuple[str, ...] = ()
    #: each of these anomalies (checkers/evidence.py names) must have been counted at least once
    require_anomalies: tuple[str, ...] = ()
    #: none of these anomalies may have been counted
    forbid_anomalies: tuple[str, ...] = ()

    @classmethod
    def from_run(cls, run: dict[str, Any], *, expect: str | None = None) -> "Expectation":
        """The expectation run.json carries; ``expect`` overrides its kind (``--expect``).
        Raises ValueError with one line naming the field and what is wanted."""
        kind = expect if expect is not None else run.get("expect") or NO_LOSS
        if kind not in EXPECTS:
            raise ValueError(f"field 'expect' is {kind!r}; want one of {', '.join(EXPECTS)}")
        allowed = run.get("allowed_by")
        if allowed is not None and (not isinstance(allowed, str) or not allowed.strip()):
            raise ValueError(f"field 'allowed_by' is {allowed!r}; want a setting such as "
                             "'unclean.leader.election.enable=true', or null")
        errors = run.get("require_errors") or []
        if not isinstance(errors, list) or not all(isinstance(e, str) and e for e in errors):
            raise ValueError(f"field 'require_errors' is {errors!r}; want a list of Kafka error names")
        lists = {}
        for key in ("require_anomalies", "forbid_anomalies"):
            v = run.get(key) or []
            if not isinstance(v, list) or not all(isinstance(e, str) and e for e in v):
                raise ValueError(f"field '{key}' is {v!r}; want a list of anomaly names (docs/anomalies.md)")
            lists[key] = tuple(v)
        both = sorted(set(lists["require_anomalies"]) & set(lists["forbid_anomalies"]))
        if both:
            raise ValueError(f"field 'forbid_anomalies' names {', '.join(both)}, which 'require_anomalies' "
                             "requires; want each anomaly in one of them")
        return cls(kind, allowed if kind == LOSS_ALLOWED else None, tuple(errors), **lists)

    def to_json(self) -> dict[str, Any]:
        return {"expect": self.expect, "allowed_by": self.allowed_by, "require_errors": list(self.require_errors),
                "require_anomalies": list(self.require_anomalies), "forbid_anomalies": list(self.forbid_anomalies)}


# --- the faults a run applied -------------------------------------------------------------------

#: failed faults named in an inconclusive reason before "and N more"
_NAMED_FAULTS = 5


@dataclass(frozen=True)
class FaultCount:
    """run.json ``faults``: how many of the schedule's faults applied and failed (the harness
    counts them where every fault starts, nemeses/active.py), why each failed, and the
    campaign's ``nemesis.min_applied`` (default 1 with a schedule, 0 without)."""
    applied: int
    failed: int
    failed_list: tuple[dict[str, Any], ...] = ()
    min_applied: int = 0

    @classmethod
    def from_run(cls, run: dict[str, Any]) -> "FaultCount | None":
        """The count run.json carries; None for a run written before faults were counted.
        Raises ValueError with one line naming the field and what is wanted."""
        f = run.get("faults")
        if f is None:
            return None
        if not isinstance(f, dict):
            raise ValueError(f"field 'faults' is {type(f).__name__}; want an object {{applied, failed, failed_list, min_applied}}")
        vals = {}
        for k in ("applied", "failed", "min_applied"):
            v = f.get(k, 0)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"field 'faults.{k}' is {v!r}; want a non-negative integer")
            vals[k] = v
        fl = f.get("failed_list") or []
        if not isinstance(fl, list) or not all(isinstance(x, dict) for x in fl):
            raise ValueError("field 'faults.failed_list' is not a list of {fault, targets, reason}")
        return cls(vals["applied"], vals["failed"], tuple(fl), vals["min_applied"])

    def to_json(self) -> dict[str, Any]:
        return {"applied": self.applied, "failed": self.failed, "failed_list": [dict(x) for x in self.failed_list],
                "min_applied": self.min_applied}

    def describe_failed(self, limit: int = _NAMED_FAULTS) -> str:
        """The failed faults in one line, grouped by reason (a mix repeats one failure):
        ``reboot[broker-1] (2x), reboot[broker-3]: log dir /x does not exist; kill[broker-2]: ...``,
        at most ``limit`` reasons, then "and N more"."""
        groups = self.failed_groups()
        more = len(groups) - limit
        return "; ".join(groups[:limit]) + (f"; and {more} more reason{'s' if more != 1 else ''}" if more > 0 else "")

    def failed_groups(self) -> list[str]:
        """One line per reason a fault failed: the faults that failed so, then the reason."""
        groups: dict[str, dict[str, int]] = {}
        for x in self.failed_list:
            what = f"{x.get('fault', '?')}[{','.join(map(str, x.get('targets') or []))}]"
            g = groups.setdefault(str(x.get("reason", "?")), {})
            g[what] = g.get(what, 0) + 1
        return [", ".join(w + (f" ({n}x)" if n > 1 else "") for w, n in g.items()) + f": {why}"
                for why, g in groups.items()]

    def shortfall(self) -> list[str]:
        """Why the run tested too little under faults: fewer faults applied than ``min_applied``
        (one line, naming each failed fault and its reason), else nothing. A thin reason
        (:attr:`Evidence.thin`): a run that lost writes with no fault applied still found a loss."""
        if self.applied >= self.min_applied:
            return []
        named = self.describe_failed()
        total = self.applied + self.failed
        if self.failed:
            head = (f"{self.failed} of {total} fault{'s' if total != 1 else ''} failed to start"
                    + (f", {self.applied} applied (nemesis.min_applied {self.min_applied})" if self.applied else ""))
            return [f"{head}: {named}" if named else head]
        return [f"{self.applied} fault{'s' if self.applied != 1 else ''} applied, fewer than nemesis.min_applied "
                f"{self.min_applied}: nothing was tested under faults"]


def fault_shortfall(run: dict[str, Any]) -> list[str]:
    """:meth:`FaultCount.shortfall` of a run.json (none when it carries no count): the one rule,
    read by the verdict and by shrinking's replays that skip the checker."""
    fc = FaultCount.from_run(run)
    return fc.shortfall() if fc is not None else []


# --- the evidence and the decision --------------------------------------------------------------

@dataclass
class Evidence:
    """What the checker found that the expectation is judged by (checkers/verdict.py fills it)."""
    lost: int                               # counts.lost_write
    acked: int | None                       # acknowledged writes
    valid: bool                             # no anomaly that breaks a Kafka promise
    invalid_because: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    #: the loss stories (checkers/stories.py): topic, partition, mechanism, label, allowed_by
    stories: list[dict[str, Any]] = field(default_factory=list)
    #: sends that ended fail/info per Kafka error name (counted when the expectation requires errors)
    send_errors: dict[str, int] = field(default_factory=dict)
    #: why finding nothing proves nothing here (no acknowledged write, partitions never read
    #: completely, ...): the run is inconclusive when it found nothing and this is not empty
    thin: list[str] = field(default_factory=list)
    #: why this run cannot be judged at all, whatever it found (e.g. a part of the checker failed)
    unjudgeable: list[str] = field(default_factory=list)
    #: false when there were no histories to check (only the cluster's logs, :data:`EVENTS_ONLY`):
    #: nothing about acknowledged writes was tested, so no part of the expectation is judged
    histories: bool = True


@dataclass
class Check:
    """One part of the expectation and whether the run met it (one JUnit test case each)."""
    name: str
    kind: str          # "loss" | "validity" | "errors" | "anomalies": which evidence explains a failure
    ok: bool
    message: str       # one line: what was expected and what was found


@dataclass
class Outcome:
    outcome: str                                   # as_expected | unexpected | inconclusive
    reason: str                                    # one line
    checks: list[Check] = field(default_factory=list)
    inconclusive_because: list[str] = field(default_factory=list)
    allowed_by: list[str] = field(default_factory=list)   # settings that permitted the loss

    @property
    def as_expected(self) -> bool:
        return self.outcome == AS_EXPECTED

    def to_verdict(self, exp: Expectation) -> dict[str, Any]:
        """The verdict.json fields this decision owns (docs/verdict-format.md)."""
        return {"outcome": self.outcome, "outcome_reason": self.reason,
                "inconclusive_because": list(self.inconclusive_because),
                "expected": exp.expect, "expectation": exp.to_json(), "as_expected": self.as_expected,
                "expectations": [asdict(c) for c in self.checks], "allowed_by": list(self.allowed_by)}


def _found(ev: Evidence) -> str:
    return (f"{ev.lost} lost acknowledged write{'s' if ev.lost != 1 else ''} of "
            f"{ev.acked if ev.acked is not None else '?'} acknowledged")


def _loss_check(exp: Expectation, ev: Evidence) -> tuple[Check, list[str]]:
    name, found = f"lost acknowledged writes: expect {exp.expect}", _found(ev)
    if exp.expect == NO_LOSS:
        return (Check(name, "loss", True, f"expected no-loss; {found}") if ev.lost == 0 else
                Check(name, "loss", False, f"UNEXPECTED LOSS: expected no-loss; {found}")), []
    if ev.lost == 0:
        return Check(name, "loss", False, f"EXPECTED LOSS NOT REPRODUCED: campaign expects {exp.expect}; {found}"), []
    if exp.expect == LOSS:
        return Check(name, "loss", True, f"expected loss; {found}"), []
    # loss-allowed: every story must name a setting that permits its loss (checkers/stories.py)
    if not ev.stories:
        return Check(name, "loss", False, f"LOSS NOT ALLOWED BY CONFIGURATION: {found}; no loss story names "
                     "a setting that permits it"), []
    for s in ev.stories:
        by = s.get("allowed_by")
        if not by or (exp.allowed_by is not None and by != exp.allowed_by):
            why = f"{s.get('label') or s.get('mechanism') or 'unexplained'}" + \
                (f", allowed by {by}, not by {exp.allowed_by}" if by else "")
            return Check(name, "loss", False, f"LOSS NOT ALLOWED BY CONFIGURATION: {found}; "
                         f"{s.get('topic')}@{s.get('partition')}: {why}"), []
    settings = sorted({str(s["allowed_by"]) for s in ev.stories})
    return Check(name, "loss", True, f"allowed by configuration ({', '.join(settings)}); {found}"), settings


def _checks(exp: Expectation, ev: Evidence) -> tuple[list[Check], list[str]]:
    loss, allowed = _loss_check(exp, ev)
    checks = [loss]
    required_invalid = [a for a in exp.require_anomalies if a in ev.invalid_because]
    if exp.expect == NO_LOSS and required_invalid:
        # the vulnerable side of a bug whose effect breaks a Kafka promise without losing a write
        # (a reader shown never-committed records): it expects an invalid history, and what the
        # required anomaly brings along (the same records read at two offsets, a reader's reset)
        # is its consequence, not a surprise; the fixed side forbids it and keeps the validity check
        others = [a for a in ev.invalid_because if a != "lost_write" and a not in exp.require_anomalies]
        checks.append(Check("history invalid as required", "validity", True,
                            "invalid by " + ", ".join(f"{a}={ev.counts.get(a, '?')}" for a in required_invalid)
                            + (" (with " + ", ".join(f"{a}={ev.counts.get(a, '?')}" for a in others) + ")"
                               if others else "")))
    elif exp.expect == NO_LOSS:   # no-loss also promises a valid history
        others = [a for a in ev.invalid_because if a != "lost_write"] or \
            (["(the checker gave no reason)"] if not ev.valid and not ev.invalid_because else [])
        name = "history valid: no other anomaly breaks a Kafka promise"
        checks.append(Check(name, "validity", False, "UNEXPECTED ANOMALIES: " + ", ".join(
            f"{a}={ev.counts.get(a, '?')}" for a in others)) if others else
            Check(name, "validity", True, "no anomaly besides lost writes invalidates the history"))
    if exp.require_errors:
        seen = {e: n for e, n in ev.send_errors.items() if e in exp.require_errors and n}
        name = f"a send ended with {' or '.join(exp.require_errors)}"
        checks.append(Check(name, "errors", True, ", ".join(f"{e}={n}" for e, n in sorted(seen.items()))) if seen else
                      Check(name, "errors", False, f"NO SEND ENDED WITH {' OR '.join(exp.require_errors)}: "
                            "the campaign did not reach the state it tests"))
    for a in exp.require_anomalies:
        n = int(ev.counts.get(a, 0) or 0)
        checks.append(Check(f"anomaly {a} shown", "anomalies", True, f"{a}={n}") if n else
                      Check(f"anomaly {a} shown", "anomalies", False,
                            f"REQUIRED ANOMALY NOT SHOWN: {a}=0: the campaign did not reach the state it tests"))
    for a in exp.forbid_anomalies:
        n = int(ev.counts.get(a, 0) or 0)
        checks.append(Check(f"anomaly {a} absent", "anomalies", True, f"{a}=0") if not n else
                      Check(f"anomaly {a} absent", "anomalies", False, f"FORBIDDEN ANOMALY SHOWN: {a}={n}"))
    return checks, allowed


def decide(exp: Expectation, ev: Evidence) -> Outcome:
    """Whether the run met its expectation: the one place that decides.

    A run that found what it looked for, or broke a promise, is conclusive. A run that found
    nothing (no lost write, and for ``no-loss`` no broken promise either) only shows something
    when it tested something: with :attr:`Evidence.thin` reasons it is inconclusive, never a
    pass and never "not reproduced". :attr:`Evidence.unjudgeable` reasons make any run
    inconclusive. Without histories (:attr:`Evidence.histories` false) nothing is judged: the
    outcome is inconclusive because of :data:`NO_HISTORIES`, with no checks."""
    if not ev.histories:
        why = [NO_HISTORIES, *ev.unjudgeable]
        return Outcome(INCONCLUSIVE, "INCONCLUSIVE: " + "; ".join(why), [], why)
    checks, allowed = _checks(exp, ev)
    found_nothing = ev.lost == 0 and (exp.expect != NO_LOSS or ev.valid)
    why_not = list(ev.unjudgeable) + (list(ev.thin) if found_nothing else [])
    if why_not:
        return Outcome(INCONCLUSIVE, "INCONCLUSIVE: " + "; ".join(why_not), checks, why_not)
    failed = [c for c in checks if not c.ok]
    if failed:
        return Outcome(UNEXPECTED, "; ".join(c.message for c in failed), checks)
    return Outcome(AS_EXPECTED, "; ".join(c.message for c in checks if c.kind != "validity"), checks,
                   allowed_by=allowed)
