"""``faultline prune RESULTS --keep-last N`` on run and suite directories as faultline writes them.

Run directories come from tests/report/runs.py (the run-directory contract: run.json,
histories, verdict, cluster logs); suite directories have the layout ``faultline suite`` writes
(suite.json, suite-log.jsonl, runs/). Their files are dated back a day, as a nightly's are by
the time a later night prunes them; a directory written in the last minutes counts as in use.
One test prunes while a real ``faultline run`` (the embedded cluster) is going: it must survive.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from harness.prune import RECENT_S, prune, scan
from tests.harness.clirun import REPO, faultline, force_cleanup, spawn, wait_for
from tests.report.runs import WALL0, make_clean_run, make_loss_run

DAY = 86_400.0


def age(d: Path, seconds: float = DAY) -> None:
    """Date every file under ``d`` back (a run of an earlier night)."""
    t = time.time() - seconds
    for root, dirs, files in os.walk(d):
        for n in files + dirs:
            os.utime(os.path.join(root, n), (t, t), follow_symlinks=False)
    os.utime(d, (t, t))


def du(d: Path) -> int:
    return sum(os.lstat(os.path.join(r, f)).st_size for r, _, fs in os.walk(d) for f in fs)


def make_suite(root: Path, name: str, wall: float, *, pid: int | None = None, finished: bool = True) -> Path:
    d = root / name
    make_clean_run(d / "runs", run_id=f"{name}-cell", wall0=wall)
    (d / "suite.json").write_text(json.dumps({"path": "s.yaml", "name": name, "description": "", "cells": []}))
    recs = [{"wall": wall, "event": "suite_started", "suite": name, "cells": 1, "pid": pid or 999_999_999}]
    if finished:
        recs.append({"wall": wall + 100, "event": "suite_finished", "exit": 0})
    (d / "suite-log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (d / "index.html").write_text("<html></html>")
    return d


@pytest.fixture
def results(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("FAULTLINE_STATE_DIR", str(tmp_path / "state"))
    r = tmp_path / "results"
    r.mkdir()
    for i in range(5):   # run-0 oldest .. run-4 newest
        (make_loss_run if i % 2 else make_clean_run)(r, run_id=f"run-{i}", wall0=WALL0 + i * DAY)
    for i in range(3):
        make_suite(r, f"suite-{i}", WALL0 + i * DAY)
    (r / "notes").mkdir()            # not faultline's: never touched
    (r / "notes" / "todo.txt").write_text("keep me")
    for d in r.iterdir():
        age(d)
    return r


def names(entries) -> list[str]:  # noqa: ANN001
    return sorted(e.path.name for e in entries)


def test_keeps_the_newest_of_each_kind_and_reports_what_it_freed(results: Path):
    sizes = {d.name: du(d) for d in results.iterdir()}
    res = prune(results, 2)
    assert names(res.removed) == ["run-0", "run-1", "run-2", "suite-0"]
    assert names(res.kept) == ["run-3", "run-4", "suite-1", "suite-2"]
    assert res.freed == sum(sizes[n] for n in ["run-0", "run-1", "run-2", "suite-0"]) > 0
    assert sorted(d.name for d in results.iterdir()) == ["notes", "run-3", "run-4", "suite-1", "suite-2"]
    assert (results / "notes" / "todo.txt").read_text() == "keep me"


def test_dry_run_deletes_nothing(results: Path):
    before = sorted(d.name for d in results.iterdir())
    res = prune(results, 1, dry_run=True)
    assert names(res.removed) == ["run-0", "run-1", "run-2", "run-3", "suite-0", "suite-1"]
    assert sorted(d.name for d in results.iterdir()) == before


def test_never_deletes_what_is_in_use(results: Path, tmp_path: Path):
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        start = Path(f"/proc/{sleeper.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        # run-0: its run.json names a live owner (a run still going)
        rj = results / "run-0" / "run.json"
        rj.write_text(json.dumps({**json.loads(rj.read_text()), "owner": {"pid": sleeper.pid, "start": start}}))
        # run-1: a dead owner (pid alive but another start time: a recycled pid) -> not in use
        rj1 = results / "run-1" / "run.json"
        rj1.write_text(json.dumps({**json.loads(rj1.read_text()), "owner": {"pid": sleeper.pid, "start": "1"}}))
        # suite-0: still running (no suite_finished, its pid alive)
        make_suite(results, "suite-running", WALL0 - DAY, pid=sleeper.pid, finished=False)
        # run-2: a lab lock names it as the run of a live holder
        inv = tmp_path / "lab.yaml"
        inv.write_text("all:\n  vars: {faultline_transport: local}\n  children:\n    brokers:\n      hosts:\n"
                       "        b1: {kafka_node_id: 1, faultline_netns: fl-prune-none, kafka_listeners: 'PLAINTEXT://10.250.9.1:9092',"
                       " kafka_service: {command: sleep 1, pidfile: /tmp/fl-prune.pid}}\n")
        holder = subprocess.Popen(["python3", "-c", (
            "import sys, time\nfrom harness.inventory import load_inventory\nfrom harness.lock import LabLock\n"
            f"l = LabLock(load_inventory({str(inv)!r})); l.acquire('x'); l.set_run_dir({str(results / 'run-2')!r})\n"
            "print('held', flush=True); time.sleep(600)")], stdout=subprocess.PIPE, text=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            assert holder.stdout.readline().strip() == "held"
            for d in results.iterdir():
                age(d)
            # run-3 was written a moment ago (a `faultline check` of an old run, say)
            (results / "run-3" / "checker.log").write_text("checking\n")
            res = prune(results, 0)
        finally:
            holder.kill()
            holder.wait()
        why = {e.path.name: e.in_use for e in res.in_use}
        assert set(why) == {"run-0", "run-2", "run-3", "suite-running"}, why
        assert f"pid {sleeper.pid}" in why["run-0"] and "lab lock" in why["run-2"]
        assert "written" in why["run-3"] and "suite is running" in why["suite-running"]
        assert names(res.removed) == ["run-1", "run-4", "suite-0", "suite-1", "suite-2"]
        assert all((results / n).is_dir() for n in why)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert RECENT_S >= 60


def test_the_cli_prints_each_removal_and_the_space_freed(results: Path, tmp_path: Path):
    state = tmp_path / "state"
    size0 = du(results / "run-0")
    p = faultline(["prune", str(results), "--keep-last", "4", "--dry-run"], state)
    assert p.returncode == 0, p.stderr
    assert f"would remove run {results / 'run-0'} (" in p.stdout and (results / "run-0").is_dir()
    p = faultline(["prune", str(results), "--keep-last", "4"], state)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert lines[0].startswith(f"removed run {results / 'run-0'} (") and not (results / "run-0").exists()
    assert lines[-1].startswith("removed 1 directory, freed ") and "kept 7" in lines[-1]
    assert f"{size0 / 1024:.1f} KiB" in lines[-1] or f"{size0} B" in lines[-1]
    bad = faultline(["prune", str(results), "--keep-last", "-1"], state)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "faultline: error: --keep-last: want a number of directories >= 0, got -1"]
    missing = faultline(["prune", str(tmp_path / "nope"), "--keep-last", "1"], state)
    assert missing.returncode == 2 and "results directory not found" in missing.stderr


@pytest.mark.slow
def test_a_run_going_on_now_is_never_pruned(tmp_path: Path):
    """A real embedded run while `faultline prune --keep-last 0` runs: its directory stays."""
    state, results = tmp_path / "state", tmp_path / "results"
    results.mkdir()
    make_clean_run(results, run_id="old-run", wall0=WALL0)
    age(results / "old-run")
    run = spawn(["run", "campaigns/kill-restart.yaml", "--no-check", "--no-progress", "--set", "workload.duration=8",
                 "--results-dir", str(results)], state, tmp_path / "run.log")
    try:
        live = wait_for(lambda: next((d for d in results.glob("kill-restart-*") if (d / "run.json").exists()), None),
                        120, "the run's directory")
        # even dated back, a run whose process lives is in use
        age(live, 3 * DAY)
        p = faultline(["prune", str(results), "--keep-last", "0"], state)
        assert p.returncode == 0, p.stderr
        assert live.is_dir() and not (results / "old-run").exists()
        assert f"kept run {live}: in use (its run {live.name} is running (pid {run.pid}))" in p.stderr
        assert run.wait(timeout=300) == 0, (tmp_path / "run.log").read_text()[-2000:]
        assert [e.path for e in scan(results)] == [live]
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
            force_cleanup(results, state)
