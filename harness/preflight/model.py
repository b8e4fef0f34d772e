"""What preflight finds: per host and check, a status, a short cell and the problems with fixes.

The statuses: ``ok``; ``warn`` (a run works, degraded: emulated reboots, clocks apart, little
disk, something unknown); ``FAIL`` (a run could not inject or read: exit 3); ``-`` (not checked:
the host did not answer, or the check needs the root that the sudo line says is missing).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "-"
COLUMNS = ("reach", "sudo", "kafka", "dirs", "logs", "reboot", "clock", "disk")
_RANK = {SKIP: 0, OK: 1, WARN: 2, FAIL: 3}

@dataclass
class Issue:
    status: str      # WARN or FAIL
    problem: str     # what is wrong, one line
    fix: str = ""    # what to do, one line


@dataclass
class Check:
    """One cell of the table: a short summary and the problems behind its status."""
    summary: str
    issues: list[Issue] = field(default_factory=list)
    skipped: bool = False

    @property
    def status(self) -> str:
        if self.skipped:
            return SKIP
        return max((i.status for i in self.issues), key=_RANK.__getitem__, default=OK)

    def add(self, status: str, problem: str, fix: str = "") -> None:
        self.issues.append(Issue(status, problem, fix))


@dataclass
class HostResult:
    name: str
    role: str
    checks: dict[str, Check]


@dataclass
class Options:
    min_free_gb: float = 1.0          # FAIL below this much free space under a log dir
    clock_warn_ms: float = 100.0      # the timeline wants the hosts within ~100 ms
    clock_samples: int = 8            # the sample with the shortest round trip is kept
    results_dir: Path = Path("results")   # the embedded target: where its runs go

    @property
    def warn_free_gb(self) -> float:
        return 5 * self.min_free_gb


@dataclass
class Report:
    inventory: Path
    transport: str
    embedded: bool
    hosts: list[HostResult]
    notes: list[str] = field(default_factory=list)
    #: problems of the target as a whole (host ""): the lab lock
    target_issues: list[Issue] = field(default_factory=list)

    def problems(self) -> list[tuple[str, str, Issue]]:
        """(host, column, issue), FAILs first, in table order."""
        out = [("", "lock", i) for i in self.target_issues]
        for h in self.hosts:
            for col in COLUMNS:
                out += [(h.name, col, i) for i in h.checks[col].issues]
        return sorted(out, key=lambda x: -_RANK[x[2].status])

    @property
    def failed(self) -> bool:
        return any(i.status == FAIL for _, _, i in self.problems())


def short_line(text: str, limit: int = 200) -> str:
    """The last meaningful line of a command's output, short."""
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else "")[:limit]


def without_host(name: str, message: str) -> str:
    """A transport error names the host first (``h1: ...``); the table already does."""
    return message[len(name) + 2:] if message.startswith(f"{name}: ") else message


def gib(kb: int) -> str:
    return f"{kb / 1024 / 1024:.1f}G" if kb >= 1024 * 1024 else f"{kb / 1024:.0f}M"
