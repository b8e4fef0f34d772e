"""Check a run directory and write its report: the one way ``faultline run``, ``faultline
check``, suites and shrinking do it.

Why one function: each of them used to carry its own copy of "run the checker with Spark's
output sent to checker.log, turn its failures into exit codes, then write report.html and
junit.xml", and the copies drifted (which failures were exit 2 or 3, whether the report was
rewritten after a re-check). :func:`check_and_report` does it once: the checker decides the
outcome (checkers/outcome.py) and writes verdict.json; the report pages read it; the caller
gets the exit code and one line, also decided from the verdict (:func:`verdict_summary`).
"""
from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from checkers.outcome import EVENTS_ONLY, EXIT_CONFIG, EXIT_INCONCLUSIVE, EXIT_INFRA, EXIT_OK, exit_code


@dataclass
class Checked:
    """What :func:`check_and_report` did to one run directory."""
    run_dir: Path
    verdict: dict[str, Any] | None   # None: the checker could not give one (see code, message)
    code: int                        # the verdict's exit code (0, 1, 4), or 2 unreadable input, 3 checker failed
    message: str                     # one line for the user
    notes: list[str] = field(default_factory=list)   # report problems: the verdict stands without the page


@contextlib.contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` for a while: the Spark JVM the checker starts
    inherits it, so its log4j chatter lands in the run directory instead of the terminal."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def validity_word(verdict: dict[str, Any]) -> str:
    """valid / INVALID / unknown (a checker family failed): Jepsen's merge-valid, as verdict.json's
    ``validity`` says; older verdicts have only ``valid``."""
    v = verdict.get("validity") or ("valid" if verdict.get("valid") else "invalid")
    return "INVALID" if v == "invalid" else v


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def verdict_summary(verdict: dict[str, Any]) -> tuple[int, str]:
    """The exit code and one line for a checked run, as the checker decided (checkers/outcome.py)."""
    code = exit_code(verdict)
    if verdict.get("mode") == EVENTS_ONLY:
        told = verdict.get("event_stories") or []
        return code, (f"events only: {len(told)} stor{'y' if len(told) == 1 else 'ies'} of what the cluster's logs "
                      f"say happened; {verdict.get('outcome_reason')}")
    msg = (f"verdict: {validity_word(verdict)}; lost acknowledged writes: "
           f"{(verdict.get('counts') or {}).get('lost_write', '?')} of {verdict.get('acked_writes', '?')}; "
           f"expected {verdict.get('expected', '?')}: "
           f"{'yes' if code == EXIT_OK else 'INCONCLUSIVE' if code == EXIT_INCONCLUSIVE else 'NO'}")
    return code, f"{msg}; {verdict['outcome_reason']}" if verdict.get("outcome_reason") else msg


#: CPU niceness of a Spark started during a run (JVM, Python workers): the run's processes first
SPARK_NICE = 10


class CheckPrep:
    """The check of a run, prepared while the run runs (:meth:`start` at its beginning).

    Two things the check used to do only after the last fault healed: start Spark (a JVM and
    its Python workers: most of a small run's check) and convert the history to Parquet (most
    of a large one's). Here the session starts in the background (checkers.session
    .SessionWarmup; its JVM's log goes to ``RUN/checker.log``) and the history is converted
    while it grows (checkers.follow.HistoryFollower); when the writers are done (after the
    drain) the last round runs at once, beside the log collection and the cluster's stop.

    Never makes a run fail: what cannot be prepared is left to the check, which does it as it
    always did, and :attr:`notes` says so (the run's notes). The owner - the run - calls
    :meth:`close`, which stops the session only if this prep started it.
    """

    def __init__(self, run_dir: Path, *, spark: bool = True, spark_master: str | None = None):
        self.run_dir, self.want_spark, self.spark_master = Path(run_dir), spark, spark_master
        self.follower: Any = None
        self.warmup: Any = None
        self.notes: list[str] = []
        #: history bytes the last round converted after the writers were done (None: it did not run)
        self.tail_bytes: int | None = None

    def start(self) -> "CheckPrep":
        try:
            from checkers.follow import HistoryFollower
            self.follower = HistoryFollower(self.run_dir).start()
        except Exception as e:  # noqa: BLE001 - the check converts the whole history instead
            self.notes.append(f"history not converted during the run ({_first_line(e)}); the check converted it")
        if self.want_spark:
            try:
                from checkers.session import SessionWarmup
                self.warmup = SessionWarmup(self.spark_master, log=self.run_dir / "checker.log", nice=SPARK_NICE).start()
            except Exception as e:  # noqa: BLE001 - the check starts Spark as before
                self.notes.append(f"Spark not started during the run ({_first_line(e)}); the check started it")
        return self

    def writers_done(self) -> None:
        """Every history writer has closed its file (clients stopped, drain done): convert
        the rest now, in the follower's thread, while the run collects logs and stops."""
        if self.follower is not None:
            self.follower.finish()

    def stop_following(self) -> None:
        """Wait for the round in progress (the last one, after :meth:`writers_done`) and stop."""
        if self.follower is not None:
            self.follower.stop()
            self.tail_bytes = self.follower.final_bytes
            if self.follower.error:
                self.notes.append(f"history conversion during the run stopped ({self.follower.error}); "
                                  "the check converted the rest")
            self.follower = None

    def session(self) -> Any:
        """The warmed-up session, or None: the check starts one itself (noted)."""
        if self.warmup is None:
            return None
        spark = self.warmup.take()
        if spark is None:
            self.notes.append(f"Spark could not start during the run ({self.warmup.error or 'unknown error'}); "
                              "the check started it after the run")
        return spark

    def take_notes(self) -> list[str]:
        """What could not be prepared, one line each, once (the run's notes)."""
        notes, self.notes = self.notes, []
        return notes

    def close(self) -> None:
        """Stop following, and stop the session if this prep started it."""
        self.stop_following()
        if self.warmup is not None:
            self.warmup.close()
            self.warmup = None


def check_and_report(run_dir: str | os.PathLike[str], *, spark: Any = None, spark_master: str | None = None,
                     expect: str | None = None, report: bool = True,
                     phase: Callable[[str], None] = lambda name: None, prep: CheckPrep | None = None) -> Checked:
    """Run the checker on ``run_dir`` (verdict.json, anomalies/, aggregates/; Spark's log in
    ``RUN/checker.log``), then write report.html and junit.xml unless ``report`` is false
    (shrinking's replays: only their loss mechanism is wanted). ``spark``: a session to use
    and leave running (a suite or a shrink checks many runs in one); ``expect`` overrides
    run.json's kind of expectation (``faultline check --expect``); ``phase`` is told "check"
    and "report" as each begins (progress displays); ``prep``: what the run prepared (its
    session and converted history; the caller closes it). Never raises for a checker failure:
    unreadable input is code 2, any other failure code 3, with one line."""
    rd = Path(run_dir)
    if prep is not None:
        prep.stop_following()
        spark = spark or prep.session()
    try:
        from checkers.job import check_run
        from checkers.load import CheckerInputError
    except Exception as e:  # noqa: BLE001 - pyspark missing or broken: infrastructure
        return Checked(rd, None, EXIT_INFRA, f"checker unavailable: {_first_line(e)}")
    phase("check")
    try:
        with stderr_to(rd / "checker.log"):
            verdict = check_run(rd, spark=spark, spark_master=spark_master, expect=expect)
    except CheckerInputError as e:   # unreadable input: the checker's own one line (file, field, want)
        return Checked(rd, None, EXIT_CONFIG, str(e).strip().replace("\n", " "))
    except (ValueError, FileNotFoundError) as e:
        return Checked(rd, None, EXIT_CONFIG, f"{rd}: {_first_line(e)}")
    except Exception as e:  # noqa: BLE001 - the checker failing is infrastructure
        return Checked(rd, None, EXIT_INFRA, f"checker failed: {_first_line(e)} (log: {rd / 'checker.log'})")
    if report:
        phase("report")
    notes = write_report(rd) if report else []
    return Checked(rd, verdict, *verdict_summary(verdict), notes)


def write_report(run_dir: Path) -> list[str]:
    """report.html and junit.xml from the run's files; what went wrong, one line each (a page
    that cannot be drawn does not take the verdict with it)."""
    try:
        from harness.report import write_junit, write_report as write_html
    except Exception as e:  # noqa: BLE001
        return [f"report unavailable: {_first_line(e)}"]
    notes = []
    for fn in (write_html, write_junit):
        try:
            fn(run_dir)
        except Exception as e:  # noqa: BLE001
            notes.append(f"{fn.__name__}: {_first_line(e)}")
    return notes
