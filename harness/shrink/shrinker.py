"""`faultline shrink RUN`: from a run that lost writes to the smallest campaign that still does.

Why: a random mix that lost writes leaves forty faults on a timeline and one question - which
of them matter? The run recorded every fault with its targets, params and timing
(``timeline.jsonl``) and what each target was at that moment (``observer.jsonl``);
:mod:`harness.shrink.schedule` turns that into a targeted step script, :mod:`harness.shrink.ddmin`
cuts it down, and every candidate is replayed for real on the source run's target
configuration (its resolved ``campaign.yaml``: inventory, settings, topic, workload), K times
with different seeds. A candidate *still fails* when at least one replay loses acknowledged
writes by the same mechanism as the source run (:mod:`harness.shrink.judge`).

Order of the search: the full schedule first (not reproducible in K replays: exit 1, nothing
to shrink; no loss and its faults failed to apply in some replay: inconclusive, exit 4 - a replay
whose faults did not apply did not test the schedule, checkers/outcome.py ``fault_shortfall``); then the faults around the lost writes by time (:meth:`Shrinker.suspects`; often
the whole answer in one test); then ddmin; then one simplification pass; then the minimal
schedule's replays are completed to K so its header says honestly how often it loses.

Replays are ``faultline run CANDIDATE --no-check --wait`` subprocesses (on a lab each takes
the lab lock for its run, waiting for another job's run to end): each heals its own faults
(the run loop's ``finally``), and one SparkSession started by this process judges them.
Every replay and every candidate outcome is appended (and flushed) to ``shrink.json`` (JSON
Lines) as it happens, so an interrupted shrink resumes where it stopped: candidates already
decided are not replayed again.

Outputs in ``RUN/shrink/``: ``minimal.yaml`` (or ``--out``) with a header comment (source
run, k of K replays, mechanism), ``shrink.json`` (the log), ``shrink.html`` (original and
minimal schedules on one timeline), ``replays/`` (the replay run directories), ``logs/``.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from checkers.outcome import EXIT_CONFIG, EXIT_INCONCLUSIVE, EXIT_OK, EXIT_UNEXPECTED, INCONCLUSIVE, fault_shortfall
from groundwork.config import ConfigError
from harness.cluster import InfraError
from harness.shrink.ddmin import Exhausted, ddmin, simplify
from harness.shrink.judge import Judge, acked_missing, mechanisms, primary, same_mechanism
from harness.shrink.schedule import (FaultStep, SourceRun, campaign_yaml, candidate_campaign, canon,
                                     extract_steps, read_jsonl, schedule_key)

#: shrink's outcomes in the project's exit codes: shrunk, the loss never came back, nothing to shrink
EXIT_SHRUNK, EXIT_NOT_REPRODUCIBLE, EXIT_REFUSED = EXIT_OK, EXIT_UNEXPECTED, EXIT_CONFIG


@dataclass
class ShrinkOptions:
    replays: int = 3                  # K: replays per candidate
    max_runs: int | None = None       # replays this invocation may start
    time_budget: float | None = None  # seconds this invocation may search
    out: Path | None = None           # the minimal campaign (default RUN/shrink/minimal.yaml)
    overrides: list[str] = field(default_factory=list)  # --set for every replay
    tail: float = 5.0                 # workload seconds after a candidate's last heal
    run_timeout: float = 900.0        # one replay, seconds
    simplify: bool = True             # after ddmin, shorten / thin / move the steps earlier


@dataclass
class Progress:
    """What the live display shows; written by the shrink, read by the CLI."""
    phase: str = "starting"
    started: float = field(default_factory=time.monotonic)
    original: int = 0
    current: int = 0
    best: int = 0
    candidates: int = 0
    runs: int = 0
    replay: str = "-"
    last: str = "-"
    mechanism: str = "-"


@dataclass
class ShrinkResult:
    code: int
    message: str
    out: Path | None = None
    page: Path | None = None
    original_steps: int = 0
    minimal_steps: int = 0
    candidates: int = 0
    runs: int = 0
    wall_s: float = 0.0


class Refused(Exception):
    """The run cannot be shrunk (no loss, no faults, bad arguments): exit 2, one line."""


class Log:
    """``shrink.json``: JSON Lines, appended and flushed per record (resume reads it back)."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.rows = read_jsonl(path)

    def append(self, rec: dict[str, Any]) -> None:
        rec = {"wall": round(time.time(), 3), **rec}
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.rows.append(rec)


def load_source(run_dir: Path) -> SourceRun:
    for name in ("run.json", "campaign.yaml", "timeline.jsonl"):
        if not (run_dir / name).exists():
            raise ConfigError(run_dir, name, "missing; shrink needs a run directory written by `faultline run`")
    try:
        run = json.loads((run_dir / "run.json").read_text())
    except ValueError as e:
        raise ConfigError(run_dir / "run.json", "", f"not JSON ({e})") from None
    try:
        camp = yaml.safe_load((run_dir / "campaign.yaml").read_text())
    except yaml.YAMLError as e:
        raise ConfigError(run_dir / "campaign.yaml", "", f"not YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(camp, dict):
        raise ConfigError(run_dir / "campaign.yaml", "", "expected a campaign mapping")
    return SourceRun(run_dir=run_dir, run=run, campaign=camp, steps=extract_steps(run_dir))


class Shrinker:
    def __init__(self, run_dir: Path, opts: ShrinkOptions, *, progress: Progress | None = None,
                 stop_event: threading.Event | None = None, say: Callable[[str], None] | None = None):
        self.run_dir = run_dir.resolve()
        self.opts = opts
        self.progress = progress or Progress()
        self.stop_event = stop_event or threading.Event()
        self.say = say or (lambda s: None)
        self.dir = self.run_dir / "shrink"
        self.out = (opts.out or self.dir / "minimal.yaml").resolve()
        self.salt = canon([opts.overrides, opts.tail])
        self.judge = Judge(self.dir / "checker.log")
        self.proc: subprocess.Popen[str] | None = None
        self.started = time.monotonic()
        self.runs = 0
        self.wanted = ""
        self.src: SourceRun | None = None
        self.log: Log | None = None
        self.outcomes: dict[str, dict[str, Any]] = {}     # key -> candidate record
        self.replays: dict[str, list[dict[str, Any]]] = {}  # key -> replay records
        self.best: list[FaultStep] = []

    # -- setup ------------------------------------------------------------------------------
    def prepare(self) -> None:
        if self.opts.replays < 1:
            raise Refused("--replays: want at least 1")
        if self.opts.max_runs is not None and self.opts.max_runs < 1:
            raise Refused("--max-runs: want at least 1")
        self.src = src = load_source(self.run_dir)
        if not src.steps:
            raise Refused(f"{self.run_dir}: the run applied no faults; there is nothing to shrink")
        verdict_path = self.run_dir / "verdict.json"
        if verdict_path.exists():
            try:
                verdict = json.loads(verdict_path.read_text())
            except ValueError:
                raise Refused(f"{verdict_path}: not JSON; run `faultline check {self.run_dir}`") from None
        else:
            if not (self.run_dir / "history").is_dir():
                raise Refused(f"{self.run_dir}: no history/ to judge (the run did not get to its workload)")
            if acked_missing(self.run_dir) == 0:   # the drain read back every acknowledged write
                raise Refused(f"{self.run_dir}: refusing to shrink a run that lost no acknowledged writes "
                              "(its final drain read back every acknowledged write)")
            self.progress.phase = "judging the source run"
            checked = self.judge.check(self.run_dir, expect=None, report=True)   # as `faultline check` would
            if checked.verdict is None:
                if checked.code == EXIT_CONFIG:   # its history is unreadable: nothing to shrink
                    raise Refused(checked.message)
                raise InfraError(checked.message)
            verdict = checked.verdict
        mech = mechanisms(verdict)
        lost = int((verdict.get("counts") or {}).get("lost_write", 0) or 0)
        if not lost or not mech:
            raise Refused(f"{self.run_dir}: refusing to shrink a run that lost no acknowledged writes "
                          f"(lost_write {lost} of {verdict.get('acked_writes', '?')} acknowledged)")
        self.wanted = primary(mech) or "unexplained"
        self.progress.mechanism = self.wanted
        self.progress.original = self.progress.current = self.progress.best = len(src.steps)
        self.best = list(src.steps)
        # every replay runs the same validated campaign shape: a bad --set fails here, exit 2
        from harness.campaign import load_campaign
        probe = self.candidate_file(src.steps, "probe")
        try:
            load_campaign(probe)
        finally:
            probe.unlink(missing_ok=True)
        self.log = Log(self.dir / "shrink.json")
        for r in self.log.rows:
            if r.get("type") == "candidate" and r.get("salt") == self.salt and r.get("replays_wanted") == self.opts.replays:
                self.outcomes[r["key"]] = r
            elif r.get("type") == "replay" and r.get("salt") == self.salt:
                self.replays.setdefault(r["key"], []).append(r)
        resumed = sum(1 for r in self.log.rows if r.get("type") == "start")
        self.log.append({"type": "start", "run": str(self.run_dir), "run_id": src.run.get("run_id"),
                         "replays": self.opts.replays, "overrides": self.opts.overrides, "tail": self.opts.tail,
                         "mechanism": self.wanted, "mechanisms": mech, "lost_write": lost,
                         "original": [s.to_json() for s in src.steps], "resumed": resumed})

    def candidate_file(self, steps: list[FaultStep], key: str) -> Path:
        from harness.campaign import apply_overrides
        assert self.src is not None
        doc = candidate_campaign(self.src, steps, tail=self.opts.tail)
        apply_overrides(doc, list(self.opts.overrides))
        p = self.dir / "candidates" / f"{key}.yaml"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(campaign_yaml(doc), encoding="utf-8")
        return p

    # -- budgets ----------------------------------------------------------------------------
    def budget_left(self) -> bool:
        if self.stop_event.is_set():
            return False
        if self.opts.max_runs is not None and self.runs >= self.opts.max_runs:
            return False
        if self.opts.time_budget is not None and time.monotonic() - self.started >= self.opts.time_budget:
            return False
        return True

    # -- one replay -------------------------------------------------------------------------
    def run_replay(self, cand: Path, key: str, i: int) -> dict[str, Any]:
        assert self.src is not None
        seed = self.src.seed + i
        logs = self.dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        # --wait: a replay on a lab takes the lab lock per run; another job's run holding it
        # is a wait, not an infrastructure failure of the shrink (docs/targets.md)
        cmd = [sys.executable, "-c", "from harness.cli import main; main()", "run", str(cand), "--seed", str(seed),
               "--results-dir", str(self.dir / "replays"), "--no-progress", "--no-check", "--wait"]
        t0 = time.monotonic()
        for attempt in (1, 2):
            with open(logs / f"{key}-{i}.log", "a", encoding="utf-8") as lf:
                self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=lf, text=True,
                                             start_new_session=True)
                try:
                    out, _ = self.proc.communicate(timeout=self.opts.run_timeout)
                except subprocess.TimeoutExpired:
                    self._end_child()
                    out = ""
                finally:
                    rc = self._end_child()
            self.runs += 1
            self.progress.runs = self.runs
            lines = [ln for ln in (out or "").splitlines() if ln.strip()]
            rd = Path(lines[-1]) if lines and Path(lines[-1]).is_dir() else None
            err = None
            if rd is not None and (rd / "run.json").exists():
                try:
                    err = json.loads((rd / "run.json").read_text()).get("error")
                except ValueError:
                    err = None
            rec: dict[str, Any] = {"type": "replay", "key": key, "salt": self.salt, "i": i, "seed": seed,
                                   "rc": rc, "run_dir": str(rd) if rd else None}
            if rc == EXIT_OK and rd is not None:
                break
            if rc == EXIT_CONFIG:
                raise Refused(f"{cand}: the replay refused its campaign: {(err or self._last_line(logs / f'{key}-{i}.log'))}")
            if err and str(err).startswith("schedule:"):
                # the cluster never reached the state a step needs (no leader to select):
                # this candidate's replay cannot lose anything; not the infrastructure's fault
                rec.update(outcome="schedule-error", error=str(err)[:300])
                rec["wall_s"] = round(time.monotonic() - t0, 1)
                return rec
            if self.stop_event.is_set():
                raise InfraError("interrupted")
            if attempt == 2:
                raise InfraError(f"replay of {cand.name} failed twice: "
                                 f"{err or self._last_line(logs / f'{key}-{i}.log')}")
        missing = acked_missing(rd)  # type: ignore[arg-type]
        rec["acked_missing"] = missing
        try:
            short = fault_shortfall(json.loads((rd / "run.json").read_text()))  # type: ignore[union-attr]
        except (OSError, ValueError) as e:
            short = [f"run.json unreadable: {e}"]
        if missing == 0 and short:
            # its faults did not apply: it did not test this candidate (checkers/outcome.py)
            rec.update(lost=0, mechanisms={}, outcome="inconclusive", reason="; ".join(short)[:300])
        elif missing == 0:
            rec.update(lost=0, mechanisms={}, outcome="no-loss")
        else:
            self.progress.replay = f"judging {rd.name}"  # type: ignore[union-attr]
            v = self.judge.verdict(rd)  # type: ignore[arg-type]   # InfraError when the checker fails
            mech = mechanisms(v)
            rec.update(lost=int((v.get("counts") or {}).get("lost_write", 0) or 0), mechanisms=mech,
                       outcome="loss" if mech else "inconclusive" if v.get("outcome") == INCONCLUSIVE else "no-loss")
            if rec["outcome"] == "inconclusive":
                rec["reason"] = "; ".join(v.get("inconclusive_because") or [])[:300]
        rec["match"] = same_mechanism(self.wanted, rec.get("mechanisms") or {})
        rec["wall_s"] = round(time.monotonic() - t0, 1)
        return rec

    @staticmethod
    def _last_line(p: Path) -> str:
        try:
            lines = [ln for ln in p.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "no output"
        return lines[-1][:300] if lines else "no output"

    def _end_child(self) -> int | None:
        """Stop the replay (if it still runs) the way a user would: SIGTERM, which its run
        loop turns into heal-and-leave; SIGKILL only if it does not finish healing in time."""
        p, self.proc = self.proc, None
        if p is None:
            return None
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        return p.returncode

    def abort(self) -> None:
        """Interrupted: stop the running replay (it heals), then heal whatever is left open."""
        self.stop_event.set()
        self._end_child()

    # -- the test ddmin calls ------------------------------------------------------------------
    def test(self, steps: list[FaultStep], phase: str, *, full: bool = False) -> bool:
        """Does this schedule still lose writes by the wanted mechanism in one of K replays?
        ``full``: run all K replays even after a match (the minimal schedule's k of K)."""
        assert self.log is not None
        key = schedule_key(steps, self.salt)
        known = self.outcomes.get(key)
        if known is not None and not (full and known.get("replays_done", 0) < self.opts.replays):
            return known["outcome"] == "fails"
        self.progress.current = len(steps)
        self.progress.candidates = len({*self.outcomes, key})
        reps = list(self.replays.get(key, []))
        cand = self.candidate_file(steps, key)
        t0 = time.monotonic()
        while len(reps) < self.opts.replays and (full or not any(r.get("match") for r in reps)):
            if not self.budget_left():
                raise Exhausted()
            self.progress.replay = f"{len(reps) + 1}/{self.opts.replays} of a {len(steps)}-step candidate"
            rec = self.run_replay(cand, key, len(reps))
            self.log.append(rec)
            reps.append(rec)
            self.replays.setdefault(key, []).append(rec)
        k = sum(1 for r in reps if r.get("match"))
        # no match, and some replay did not test the candidate (its faults failed): not "passes"
        outcome = "fails" if k else "inconclusive" if any(r.get("outcome") == "inconclusive" for r in reps) else "passes"
        rec = {"type": "candidate", "key": key, "salt": self.salt, "phase": phase, "size": len(steps),
               "steps": [s.to_json() for s in steps], "replays_wanted": self.opts.replays,
               "replays_done": len(reps), "matches": k, "outcome": outcome,
               "replay_runs": [{"run_dir": r.get("run_dir"), "outcome": r.get("outcome"),
                                "mechanisms": r.get("mechanisms"), "match": r.get("match")} for r in reps],
               "wall_s": round(time.monotonic() - t0, 1)}
        self.log.append(rec)
        self.outcomes[key] = rec
        self.progress.candidates = len(self.outcomes)
        self.progress.last = f"{len(steps)} steps: {outcome} ({k}/{len(reps)})"
        self.progress.replay = "-"
        return outcome == "fails"

    def _on_best(self, steps: list[FaultStep]) -> None:
        if len(steps) <= len(self.best):
            self.best = list(steps)
            self.progress.best = len(steps)

    # -- the whole shrink ------------------------------------------------------------------------
    def run(self) -> ShrinkResult:
        try:
            self.prepare()
        except Refused as e:
            return ShrinkResult(EXIT_REFUSED, str(e))
        assert self.src is not None and self.log is not None
        src = self.src
        try:
            return self._search(src)
        finally:
            self.judge.close()

    def _search(self, src: SourceRun) -> ShrinkResult:
        assert self.log is not None
        exhausted = False
        try:
            self.progress.phase = "replaying the original"
            reproduced = self.test(src.steps, "original")
        except Exhausted:
            msg = (f"the budget (--max-runs/--time-budget) was spent before the original {len(src.steps)}-step "
                   f"schedule had its {self.opts.replays} replays; nothing was shrunk")
            self.log.append({"type": "result", "code": EXIT_REFUSED, "message": msg})
            return ShrinkResult(EXIT_REFUSED, msg, original_steps=len(src.steps), runs=self.runs)
        try:
            rec = self.outcomes[schedule_key(src.steps, self.salt)]
            if not reproduced and rec["outcome"] == "inconclusive":
                why = next((r.get("reason") for r in self.replays.get(rec["key"], []) if r.get("reason")), "")
                msg = (f"inconclusive: the original {len(src.steps)}-step schedule lost no writes by {self.wanted} "
                       f"in {rec['replays_done']} replay(s), and in some its faults failed to apply: {why}")
                self.log.append({"type": "result", "code": EXIT_INCONCLUSIVE, "message": msg})
                return ShrinkResult(EXIT_INCONCLUSIVE, msg, original_steps=len(src.steps),
                                    candidates=len(self.outcomes), runs=self.runs,
                                    wall_s=round(time.monotonic() - self.started, 1))
            if not reproduced:
                msg = (f"not reproducible in {self.opts.replays} replays: the original {len(src.steps)}-step schedule "
                       f"lost no writes by {self.wanted} on replay ({rec['replays_done']} run(s))")
                self.log.append({"type": "result", "code": EXIT_NOT_REPRODUCIBLE, "message": msg})
                return ShrinkResult(EXIT_NOT_REPRODUCIBLE, msg, original_steps=len(src.steps),
                                    candidates=len(self.outcomes), runs=self.runs,
                                    wall_s=round(time.monotonic() - self.started, 1))
            suspects = self.suspects(src)
            if suspects and len(suspects) < len(self.best):
                self.progress.phase = "trying the faults around the loss"
                if self.test(suspects, "suspects"):
                    self._on_best(suspects)
            self.progress.phase = "ddmin"
            self.best = ddmin(self.best, self.test, on_best=self._on_best)
            self.progress.best = len(self.best)
            if self.opts.simplify:
                self.progress.phase = "simplifying steps"
                self.best = simplify(self.best, self.test, on_best=self._on_best)
        except Exhausted:
            exhausted = True
        if not exhausted:
            try:
                self.progress.phase = "confirming the minimal schedule"
                self.test(self.best, "confirm", full=True)
            except Exhausted:
                exhausted = True
        return self.finish(exhausted)

    def suspects(self, src: SourceRun, lead: float = 5.0) -> list[FaultStep]:
        """The steps that can have mattered, by time: a fault that ended more than ``lead``
        seconds before the first lost write was acknowledged, or began after the last
        decisive removal (the first truncation/recovery that cut a lost write), cannot have
        let these writes be acknowledged and then removed. ``lead`` covers the fault that
        took the follower out of the ISR before the leader acked alone."""
        try:
            v = json.loads((self.run_dir / "verdict.json").read_text())
        except (OSError, ValueError):
            return []
        rows = v.get("attribution") or []
        acks = [float(r["ack_t"]) for r in rows if isinstance(r.get("ack_t"), (int, float))]
        cuts = []
        for r in rows:
            ts = [float(m.group(1)) for m in (re.match(r"^t=(-?[\d.]+) ", str(x)) for x in r.get("removed_by") or []) if m]
            if ts:
                cuts.append(min(ts))
            elif isinstance(r.get("miss_t"), (int, float)):
                cuts.append(float(r["miss_t"]))
        if not acks or not cuts:
            return []
        lo, hi = min(acks) - lead, max(cuts)
        from checkers.attribution import fault_intervals
        tl = read_jsonl(self.run_dir / "timeline.jsonl")
        span = {f.id: (f.start, f.stop if f.stop is not None else float("inf")) for f in fault_intervals(tl)}
        return [s for s in src.steps if s.source_id in span
                and span[s.source_id][0] is not None and span[s.source_id][0] <= hi and span[s.source_id][1] >= lo]

    def finish(self, exhausted: bool) -> ShrinkResult:
        assert self.src is not None and self.log is not None
        key = schedule_key(self.best, self.salt)
        rec = self.outcomes.get(key) or {}
        k, n = int(rec.get("matches", 0)), int(rec.get("replays_done", 0))
        header = [
            f"Minimal reproduction by `faultline shrink` of run {self.src.run.get('run_id') or self.run_dir.name}",
            f"  source: {self.run_dir}",
            f"  {len(self.src.steps)} fault steps -> {len(self.best)}; {k} of {n} replays of this schedule lost "
            f"acknowledged writes by {self.wanted}" + (" (search stopped by its budget)" if exhausted else ""),
            f"  mechanism: {self.wanted}; {len(self.outcomes)} candidates, {self.runs} replays this invocation",
            f"  replay: faultline run {self.out}",
        ]
        doc = candidate_campaign(self.src, self.best, tail=self.opts.tail, name=f"{self.src.campaign.get('name', 'run')}-minimal")
        from harness.campaign import apply_overrides
        apply_overrides(doc, list(self.opts.overrides))
        doc = {"name": doc.pop("name"),
               "description": f"shrunk from {self.src.run.get('run_id') or self.run_dir.name}: "
                              f"loses acknowledged writes by {self.wanted}", **doc}
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(campaign_yaml(doc, header), encoding="utf-8")
        wall = round(time.monotonic() - self.started, 1)
        page = None
        try:
            from harness.report.shrink import write_shrink_page
            page = write_shrink_page(self.dir / "shrink.html", run_dir=self.run_dir, original=self.src.steps,
                                     minimal=self.best, mechanism=self.wanted, matches=k, replays=n,
                                     log_rows=self.log.rows, campaign=self.out)
        except Exception as e:  # noqa: BLE001 - the page is a view; the campaign is the result
            self.say(f"note: shrink page not written: {type(e).__name__}: {e}")
        msg = (f"shrunk {len(self.src.steps)} -> {len(self.best)} steps ({k} of {n} replays lost writes by "
               f"{self.wanted}; {len(self.outcomes)} candidates, {self.runs} replays, {wall:.0f} s"
               + ("; budget spent" if exhausted else "") + ")")
        self.log.append({"type": "result", "code": EXIT_SHRUNK, "message": msg, "minimal": [s.to_json() for s in self.best],
                         "out": str(self.out), "exhausted": exhausted, "matches": k, "replays_done": n})
        return ShrinkResult(EXIT_SHRUNK, msg, out=self.out, page=page, original_steps=len(self.src.steps),
                            minimal_steps=len(self.best), candidates=len(self.outcomes), runs=self.runs, wall_s=wall)
