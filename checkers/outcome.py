"""What a run's verdict means for the person who ran it: the exit codes of every faultline program.

Every program of the project exits with these codes, and reads them from here: ``faultline``
(run, check, report, shrink, suite, heal, docker), ``python -m checkers``, ``python -m
harness.report`` and ``python -m harness.probe`` (docs/architecture.md, "The CLI"). Why here,
in ``checkers/``: the checker's own command line cannot import the harness (it runs on Spark
workers without it, docs/architecture.md "Floors"), while the harness may import the checker;
so the one owner stands on the lower floor. Standard library only, so reading an exit code
never starts pyspark.
"""
from __future__ import annotations

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
