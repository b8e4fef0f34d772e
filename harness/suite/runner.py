"""Running a suite: cells one after another, one Spark session judging them all, resumable.

Why runs as child processes (``faultline run --no-check``): each cell gets exactly the run a
user would get from the CLI (its own ledger owner, signal handling, teardown), and one cell's
leftovers cannot leak into the next one's Python state. The checker runs here, in one Spark
session for the whole suite (``checkers.job.check_run(run, spark=session)``, as
benchmarks/kip903_targeted_vs_random.py does), so the JVM starts once, not once per cell: in
the background while the first cell runs, with its Python workers kept warm while each cell runs
(checkers.session.SessionWarmup). Each cell's run converts its history while it grows
(harness/check.py CheckPrep, also under ``--no-check``), so its check finds it converted.

Why an append-only log (``suite-log.jsonl``, one JSON object per line, flushed and fsynced):
a suite is interrupted by Ctrl-C, SIGKILL or a reboot of the harness host. ``--resume DIR``
reads the log, heals what the ledger still holds (harness/heal.py), removes the run directory
of a cell that never finished (its history is incomplete), and runs only the cells without a
``cell_finished`` record. A line torn by the crash is ignored.

Why the child dies with us: it runs in its own session (a Ctrl-C in the terminal reaches only
the suite, which asks the child to stop and waits for its heal) and with
``PR_SET_PDEATHSIG=SIGTERM``, so a SIGKILLed suite does not leave its cell's run going: the
child gets SIGTERM and heals itself. ``--resume`` waits for such an orphan before healing.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from checkers.outcome import EXIT_INFRA, EXIT_OK, EXIT_UNEXPECTED
from checkers import outcome
from harness.latest import SUITE_LINK, point_latest
from harness.suite.spec import Cell, SuiteSpec

LOG = "suite-log.jsonl"
SPEC = "suite.json"

#: a cell's outcome: the verdict's (read, never judged again here), or ``error`` when the run or
#: the checker failed; only ``as-expected`` is a pass. Spelled as suite logs always spelled them.
AS_EXPECTED, UNEXPECTED, INCONCLUSIVE, ERROR = "as-expected", "unexpected", "inconclusive", "error"
CELL_OUTCOME = {outcome.AS_EXPECTED: AS_EXPECTED, outcome.UNEXPECTED: UNEXPECTED, outcome.INCONCLUSIVE: INCONCLUSIVE}


def cell_result(verdict: dict[str, Any] | None, error: str | None) -> dict[str, Any]:
    """What the suite records of a cell's verdict: its outcome and one-line reason as the
    checker decided them (verdict ``outcome``, ``outcome_reason``), and the figures the index shows."""
    if error is not None or verdict is None:
        return {"outcome": ERROR, "reason": error or "no verdict", "label": "", "lost": None, "acked": None,
                "mechanisms": {}}
    allowed = verdict.get("allowed_by") or []
    return {"outcome": CELL_OUTCOME.get(str(verdict.get("outcome")), ERROR),
            "reason": str(verdict.get("outcome_reason") or f"verdict outcome {verdict.get('outcome')!r}"),
            "label": f"allowed by configuration ({', '.join(allowed)})" if allowed else "",
            "lost": int((verdict.get("counts") or {}).get("lost_write") or 0), "acked": verdict.get("acked_writes"),
            "mechanisms": {str(k): int(n) for k, n in (verdict.get("mechanisms") or {}).items()},
            # what the run applied and what stopped on its own (the verdict's, read as written)
            "faults": verdict.get("faults"), "halts": [h.get("text") for h in verdict.get("halts") or []]}


class SuiteInterrupted(BaseException):
    """SIGINT/SIGTERM: stop the current cell (it heals), record it, leave with exit 3."""


# --- the log ----------------------------------------------------------------------------------

def append(path: Path, rec: dict[str, Any]) -> None:
    rec = {"wall": round(time.time(), 3), **rec}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(rec, default=str) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_log(path: Path) -> list[dict[str, Any]]:
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # torn by a crash mid-write
        if isinstance(rec, dict):
            out.append(rec)
    return out


def finished_cells(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["cell"]: r for r in records if r.get("event") == "cell_finished" and "cell" in r}


# --- child processes --------------------------------------------------------------------------

def _pdeathsig() -> None:
    """In the child: SIGTERM when the suite dies (Linux prctl PR_SET_PDEATHSIG = 1)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    except OSError:
        pass


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def wait_gone(pid: int, start: str | None, timeout: float) -> bool:
    """Wait for an earlier suite's orphaned cell (same pid and start time) to finish healing."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if _start_time(pid) is None or _start_time(pid) != start:
            return True
        time.sleep(0.2)
    return False


def cell_inventories(spec: SuiteSpec) -> list[Path]:
    """The distinct inventories the suite's cells run on (each cell's own, else its campaign's
    after the cell's overrides), in cell order: what ``faultline suite`` preflights first."""
    from harness.campaign import load_campaign

    out: dict[Path, None] = {}
    for cell in spec.cells:
        if cell.inventory:
            out[Path(cell.inventory).resolve()] = None
        else:
            camp = load_campaign(Path(cell.campaign), overrides=list(cell.overrides), seed=cell.seed)
            out[Path(camp.inventory_path).resolve()] = None
    return list(out)


# --- progress -------------------------------------------------------------------------------

@dataclass
class Progress:
    """What the live display shows: cell k of n, elapsed, ETA from the finished cells' mean."""
    total: int
    done: int = 0
    current: str = "-"
    phase: str = "starting"
    started: float = field(default_factory=time.monotonic)
    cell_started: float = field(default_factory=time.monotonic)
    durations: list[float] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def eta(self) -> float | None:
        if not self.durations:
            return None
        left = self.total - self.done
        mean = sum(self.durations) / len(self.durations)
        return max(0.0, left * mean - (time.monotonic() - self.cell_started))


# --- the runner -----------------------------------------------------------------------------------

class SuiteRunner:
    def __init__(self, spec: SuiteSpec, suite_dir: Path, *, progress: Progress | None = None,
                 say: Callable[[str], None] = lambda s: None, python: str = sys.executable):
        self.spec, self.dir, self.say, self.python = spec, suite_dir, say, python
        self.log = suite_dir / LOG
        self.runs = suite_dir / "runs"
        self.cells_dir = suite_dir / "cells"
        self.progress = progress or Progress(total=len(spec.cells))
        self.spark: Any = None        # a session given to use (and leave running); else the warm-up's
        self._warmup: Any = None      # checkers.session.SessionWarmup: one session for every cell
        self.notes: list[str] = []
        self.child: subprocess.Popen[str] | None = None
        self.run_args: list[str] = []  # more `faultline run` options for every cell (--wait)

    # -- creation and resume -------------------------------------------------------------------
    @classmethod
    def create(cls, spec: SuiteSpec, results_dir: Path, **kw: Any) -> "SuiteRunner":
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        for i in range(1000):
            d = results_dir / (f"suite-{spec.name}-{stamp}" + (f"-{i}" if i else ""))
            try:
                d.mkdir(parents=True, exist_ok=False)
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover
            raise OSError(f"cannot create a suite directory under {results_dir}")
        point_latest(results_dir, d, SUITE_LINK)   # RESULTS/latest-suite: the newest suite
        (d / SPEC).write_text(json.dumps(spec.to_json(), indent=2) + "\n", encoding="utf-8")
        shutil.copyfile(spec.path, d / "suite.yaml")
        r = cls(spec, d, **kw)
        append(r.log, {"event": "suite_started", "suite": spec.name, "cells": len(spec.cells), "pid": os.getpid()})
        return r

    @classmethod
    def load(cls, suite_dir: Path, **kw: Any) -> "SuiteRunner":
        spec = SuiteSpec.from_json(json.loads((suite_dir / SPEC).read_text(encoding="utf-8")))
        return cls(spec, suite_dir, **kw)

    def recover(self) -> list[str]:
        """Before resuming: wait for an orphaned cell, heal the ledger, drop unfinished runs."""
        from harness.heal import OwnedLedger, heal_all

        notes: list[str] = []
        recs = read_log(self.log)
        done = finished_cells(recs)
        for r in recs:
            if r.get("event") == "cell_started" and r.get("cell") not in done and r.get("child_pid"):
                if not wait_gone(int(r["child_pid"]), r.get("child_start"), 120.0):
                    try:
                        os.killpg(int(r["child_pid"]), signal.SIGKILL)
                    except OSError:
                        pass
                    notes.append(f"cell {r['cell']}: its run (pid {r['child_pid']}) was still going; killed")
        rep = heal_all(OwnedLedger())
        if rep.healed or rep.failed:
            notes.append(f"healed {len(rep.healed)} ledger entries left by the interrupted suite"
                         + (f"; {len(rep.failed)} failed: {'; '.join(rep.failed)}" if rep.failed else ""))
        keep = {Path(r["run_dir"]).name for r in done.values() if r.get("run_dir")}
        if self.runs.is_dir():
            for d in sorted(self.runs.iterdir()):
                if d.is_dir() and not d.is_symlink() and d.name not in keep:
                    shutil.rmtree(d, ignore_errors=True)
                    notes.append(f"removed the unfinished run {d.name}")
        append(self.log, {"event": "suite_resumed", "pid": os.getpid(), "finished": len(done), "notes": notes})
        return notes

    # -- one cell ----------------------------------------------------------------------------------
    def _start_warmup(self) -> None:
        """Start Spark while the first cell runs (its JVM start costs a minute on a loaded box);
        its output goes to the suite's checker.log. The warm-up owns the session only if it
        started it, and then only it stops it (:meth:`run`'s end)."""
        from checkers.session import SessionWarmup

        self._warmup = SessionWarmup(app_name=f"faultline-suite-{self.spec.name}", log=self.dir / "checker.log").start()

    def _session(self) -> Any:
        """The suite's session for a check; None when Spark could not start in the background
        (the check then starts and stops its own, as a lone `faultline check` does; noted)."""
        if self.spark is not None:
            return self.spark
        if self._warmup is None:
            self._start_warmup()
        self.progress.phase = "starting Spark"
        spark = self._warmup.take()
        if spark is None:
            note = f"Spark could not start in the background ({self._warmup.error}); each check starts its own"
            if note not in self.notes:
                self.notes.append(note)
        return spark

    def _run_child(self, cell: Cell) -> tuple[int, Path | None, str]:
        """`faultline run --no-check` for the cell; (exit code, run dir, last error line)."""
        self.runs.mkdir(parents=True, exist_ok=True)
        self.cells_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.cells_dir / f"{cell.index:03d}.log"
        cmd = cell.command(self.python, str(self.runs)) + self.run_args
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(log_path, "w", encoding="utf-8") as errf:
            errf.write("$ " + " ".join(cmd) + "\n")
            errf.flush()
            self.child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errf, text=True, env=env,
                                          start_new_session=True, preexec_fn=_pdeathsig,
                                          cwd=os.getcwd())
            append(self.log, {"event": "cell_started", "cell": cell.id, "index": cell.index,
                              "child_pid": self.child.pid, "child_start": _start_time(self.child.pid),
                              "command": cmd})
            try:
                out, _ = self.child.communicate(timeout=cell.timeout)
                code = self.child.returncode
            except subprocess.TimeoutExpired:
                self._stop_child()
                out, code = "", EXIT_INFRA
                errf.write(f"\nfaultline suite: the run took longer than {cell.timeout:g}s; stopped\n")
            except BaseException:  # interrupted: the run heals and stops before we leave
                self._stop_child()
                raise
            finally:
                self.child = None
        lines = [ln for ln in (out or "").splitlines() if ln.strip()]
        run_dir = Path(lines[-1].strip()) if lines and Path(lines[-1].strip()).is_dir() else None
        last_err = ""
        for ln in reversed(log_path.read_text(encoding="utf-8", errors="replace").splitlines()):
            if ln.startswith("faultline:"):
                last_err = ln.split(":", 1)[1].strip().removeprefix("error:").strip()
                break
        return code, run_dir, last_err

    def _stop_child(self, grace: float = 60.0) -> None:
        ch = self.child
        if ch is None or ch.poll() is not None:
            return
        try:
            os.killpg(ch.pid, signal.SIGTERM)  # the run heals, collects and stops its cluster
            ch.wait(timeout=grace)
        except (OSError, subprocess.TimeoutExpired):
            try:
                os.killpg(ch.pid, signal.SIGKILL)
            except OSError:
                pass
            ch.wait()

    def _check(self, run_dir: Path) -> tuple[dict[str, Any] | None, str | None, list[str]]:
        """check_and_report in the suite's one Spark session: (verdict, error, notes)."""
        from harness.check import check_and_report

        spark = self._session()
        try:
            checked = check_and_report(run_dir, spark=spark,   # the cell's expectation is in run.json
                                       phase=lambda name: setattr(self.progress, "phase", name))
        finally:
            if self._warmup is not None:
                self._warmup.resume()        # warm Python workers for the next cell's check
        notes = checked.notes + [n for n in self.notes if spark is None]
        return checked.verdict, None if checked.verdict is not None else checked.message, notes

    def run_cell(self, cell: Cell) -> dict[str, Any]:
        t0 = time.time()
        self.progress.current, self.progress.phase = cell.id, "running"
        self.progress.cell_started = time.monotonic()
        code, run_dir, last_err = self._run_child(cell)
        return self.finish_cell(cell, code, run_dir, last_err, t0)

    def finish_cell(self, cell: Cell, code: int, run_dir: Path | None, last_err: str, t0: float) -> dict[str, Any]:
        """After the cell's run exited with ``code``: check it (its verdict.json, report.html
        and junit.xml judge the cell's own expectation, carried in run.json) and record in the
        suite log what the verdict decided."""
        verdict: dict[str, Any] | None = None
        notes: list[str] = []
        error: str | None = None
        if code == EXIT_OK and run_dir is not None:
            verdict, error, notes = self._check(run_dir)
        else:
            error = f"run exited {code}: {last_err or 'see ' + str(self.cells_dir / f'{cell.index:03d}.log')}"
        rec = {"event": "cell_finished", "cell": cell.id, "index": cell.index, **cell_result(verdict, error),
               "expect": cell.expect, "run_exit": code, "run_dir": str(run_dir) if run_dir else None,
               "duration_s": round(time.time() - t0, 1), "notes": notes,
               "availability": availability(run_dir) if run_dir else None,
               "send_errors": (verdict or {}).get("send_errors") or {}}
        append(self.log, rec)
        return rec

    # -- the suite -----------------------------------------------------------------------------------
    def run(self) -> int:
        done = finished_cells(read_log(self.log))
        todo = [c for c in self.spec.cells if c.id not in done]
        self.progress.total, self.progress.done = len(self.spec.cells), len(self.spec.cells) - len(todo)
        for r in done.values():
            self.progress.counts[r["outcome"]] = self.progress.counts.get(r["outcome"], 0) + 1
        if todo and self.spark is None:
            self._start_warmup()
        try:
            for cell in todo:
                rec = self.run_cell(cell)
                self.progress.done += 1
                self.progress.durations.append(rec["duration_s"])
                self.progress.counts[rec["outcome"]] = self.progress.counts.get(rec["outcome"], 0) + 1
                self.say(f"[{self.progress.done}/{self.progress.total}] {cell.id}: {rec['outcome']}: {rec['reason']}")
                self.write_outputs()
        except SuiteInterrupted as e:
            self._stop_child()
            append(self.log, {"event": "suite_interrupted", "signal": str(e)})
            self.write_outputs()
            return EXIT_INFRA
        finally:
            # the warm-up stops the session only if it started it; interrupted while Spark still
            # starts, it does not wait for it (a minute on a loaded box): the session is stopped
            # once up, and its JVM exits with this process anyway (pyspark's gateway watches our pipe)
            if self._warmup is not None:
                self._warmup.close()
                self._warmup = None
        code = self.exit_code()
        append(self.log, {"event": "suite_finished", "exit": code})
        self.write_outputs()
        return code

    def results(self) -> list[dict[str, Any]]:
        done = finished_cells(read_log(self.log))
        return [done[c.id] for c in self.spec.cells if c.id in done]

    def exit_code(self) -> int:
        outcomes = [r["outcome"] for r in self.results()]
        if any(o in (UNEXPECTED, INCONCLUSIVE) for o in outcomes):
            return EXIT_UNEXPECTED
        if any(o == ERROR for o in outcomes) or len(outcomes) < len(self.spec.cells):
            return EXIT_INFRA
        return EXIT_OK

    def write_outputs(self) -> None:
        from harness.report.suite import write_suite_index, write_suite_junit

        write_suite_index(self.dir)
        write_suite_junit(self.dir)


def availability(run_dir: Path | None) -> dict[str, Any] | None:
    """Seconds of the workload without one acknowledged write, and failed/indeterminate sends,
    from the checker's aggregates/throughput.csv (one row per second with sends): what a fixed
    configuration trades for no loss (ELR keeps a partition offline rather than electing a
    replica that lost the tail, KIP-966). A second with no row had no completed send at all."""
    if run_dir is None:
        return None
    agg = run_dir / "aggregates" / "throughput.csv"
    parts = [agg] if agg.is_file() else sorted(agg.glob("*.csv")) if agg.is_dir() else []
    if not parts:
        return None
    import csv

    ok_by_s: dict[int, int] = {}
    fail = info = 0
    for p in parts:
        with open(p, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                try:
                    sec = int(float(row["second"]))
                    ok_by_s[sec] = ok_by_s.get(sec, 0) + int(float(row.get("ok") or 0))
                    fail += int(float(row.get("fail") or 0))
                    info += int(float(row.get("info") or 0))
                except (KeyError, ValueError):
                    continue
    if not ok_by_s:
        return None
    span = range(min(ok_by_s), max(ok_by_s) + 1)
    return {"seconds": len(span), "seconds_without_ack": sum(1 for x in span if not ok_by_s.get(x)),
            "failed": fail, "indeterminate": info}
