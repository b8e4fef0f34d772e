"""Retention for a results directory: keep the newest N run and suite directories, delete the rest.

Why: a lab's nightly job writes a run or suite directory every night (histories, cluster logs,
checker output: tens to hundreds of MB each); over months they fill the disk the next run needs.
``faultline prune RESULTS --keep-last N`` (or ``faultline suite --keep-last N`` after a suite)
deletes the oldest beyond N, never one that is in use.

What counts: a *run directory* (``run.json`` or ``history/``) and a *suite directory*
(``suite.json`` + ``suite-log.jsonl``, its runs inside it) directly under RESULTS; N applies to
each kind on its own (a nightly suite's directories do not push out the runs started by hand).
Anything else under RESULTS is left alone. Age is the start time the directory records
(``run.json`` ``started_wall``, the suite log's first record), else its modification time.

In use, so never deleted (whatever its age):
- a lab lock names it, or something inside it, as its run (harness/lock.py);
- a ``run.json`` in it (a run, a suite's cell, a shrink replay) names a live owner (pid +
  kernel start time, as the heal ledger's entries do; harness.heal.owner_alive);
- a suite whose log has no ``suite_finished``/``suite_interrupted`` after its last start and
  whose process is alive;
- anything in it was written in the last ``RECENT_S`` seconds (a ``faultline check`` or a
  shrink between replays writes into an old run without being a run itself).
"""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.heal import owner_alive
from harness.lock import holders

RUN, SUITE = "run", "suite"
RECENT_S = 600.0


@dataclass
class Entry:
    path: Path
    kind: str
    started: float
    size: int = 0
    newest_write: float = 0.0
    in_use: str | None = None


@dataclass
class PruneResult:
    removed: list[Entry] = field(default_factory=list)
    kept: list[Entry] = field(default_factory=list)
    in_use: list[Entry] = field(default_factory=list)
    failed: list[tuple[Entry, str]] = field(default_factory=list)

    @property
    def freed(self) -> int:
        return sum(e.size for e in self.removed)


def _json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _suite_records(d: Path) -> list[dict]:
    out = []
    try:
        lines = (d / "suite-log.jsonl").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return out
    for ln in lines:
        try:
            rec = json.loads(ln)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def kind_of(d: Path) -> str | None:
    if (d / "suite.json").is_file() and (d / "suite-log.jsonl").is_file():
        return SUITE
    if (d / "run.json").is_file() or (d / "history").is_dir():
        return RUN
    return None


def _started(d: Path, kind: str) -> float:
    if kind == RUN:
        w = _json(d / "run.json").get("started_wall")
    else:
        recs = _suite_records(d)
        w = recs[0].get("wall") if recs else None
    if isinstance(w, (int, float)) and not isinstance(w, bool):
        return float(w)
    return d.stat().st_mtime


def _walk(d: Path) -> tuple[int, float, list[Path]]:
    """(bytes, newest modification time, run.json files) under ``d``; symlinks not followed."""
    size, newest, runs = 0, d.lstat().st_mtime, []
    for root, dirs, files in os.walk(d):
        for name in files + dirs:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            newest = max(newest, st.st_mtime)
            if name in files:
                size += st.st_size
                if name == "run.json":
                    runs.append(Path(root) / name)
    return size, newest, runs


def _pid_alive(pid: object) -> bool:
    try:
        os.kill(int(pid), 0)  # type: ignore[arg-type]
    except (OSError, TypeError, ValueError):
        return False
    return True


def use_of(e: Entry, runs: list[Path], locked: list[Path], now: float) -> str | None:
    """Why ``e`` is in use, or None."""
    for rd in locked:
        if rd == e.path or e.path in rd.parents:
            return f"the lab lock names {rd}"
    for rj in runs:
        o = _json(rj).get("owner")
        if isinstance(o, dict) and owner_alive({"owner": o}):
            return f"its run {rj.parent.name} is running (pid {o.get('pid')})"
    if e.kind == SUITE:
        recs = _suite_records(e.path)
        starts = [i for i, r in enumerate(recs) if r.get("event") in ("suite_started", "suite_resumed")]
        if starts:
            last = starts[-1]
            ended = any(r.get("event") in ("suite_finished", "suite_interrupted") for r in recs[last:])
            if not ended and _pid_alive(recs[last].get("pid")):
                return f"the suite is running (pid {recs[last].get('pid')})"
    if now - e.newest_write < RECENT_S:
        return f"written {now - e.newest_write:.0f}s ago"
    return None


def scan(results: Path, now: float | None = None) -> list[Entry]:
    """Every run and suite directory directly under ``results``, with size and use, newest first."""
    now = time.time() if now is None else now
    locked = [Path(h.run_dir) for h in holders() if h.run_dir]
    out = []
    for d in sorted(results.iterdir()):
        if not d.is_dir() or d.is_symlink():
            continue
        kind = kind_of(d)
        if kind is None:
            continue
        e = Entry(d, kind, _started(d, kind))
        e.size, e.newest_write, runs = _walk(d)
        e.in_use = use_of(e, runs, locked, now)
        out.append(e)
    return sorted(out, key=lambda x: -x.started)


def prune(results: Path, keep_last: int, *, dry_run: bool = False, keep: set[Path] | None = None) -> PruneResult:
    """Delete the run and suite directories beyond the newest ``keep_last`` of each kind that
    are not in use (``keep``: directories never to delete, e.g. the suite that prunes)."""
    res = PruneResult()
    keep = {p.resolve() for p in (keep or set())}
    entries = scan(results)
    for kind in (RUN, SUITE):
        mine = [e for e in entries if e.kind == kind]
        for i, e in enumerate(mine):
            if i < keep_last or e.path.resolve() in keep:
                res.kept.append(e)
            elif e.in_use:
                res.in_use.append(e)
            elif dry_run:
                res.removed.append(e)
            else:
                # look again right before deleting: a run may have started using it since the scan
                _, newest, runs = _walk(e.path)
                e.newest_write = newest
                e.in_use = use_of(e, runs, [Path(h.run_dir) for h in holders() if h.run_dir], time.time())
                if e.in_use:
                    res.in_use.append(e)
                    continue
                try:
                    shutil.rmtree(e.path)
                    res.removed.append(e)
                except OSError as err:
                    res.failed.append((e, str(err)))
    return res


def human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"
