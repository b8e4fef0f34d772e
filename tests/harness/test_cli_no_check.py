"""`faultline run --no-check`: the run ends after collecting, with no Spark and no verdict.

Why: loops of runs (benchmarks/kip903_targeted_vs_random.py) time the fault-injection run
alone and judge all runs later in one Spark session. A real, short run on the embedded
kraftsim cluster (about 10 s; the schedule is cut to one wait, so no nemesis and no Spark).
"""
from __future__ import annotations

import json
from pathlib import Path

from tests.harness.clirun import REPO, faultline, force_cleanup, pids_matching, read_jsonl


def test_no_check_collects_and_writes_no_verdict(tmp_path: Path) -> None:
    state, results = tmp_path / "state", tmp_path / "results"
    try:
        r = faultline(["run", str(REPO / "campaigns" / "kill-restart.yaml"), "--seed", "5",
                       "--set", "workload.duration=3", "--set", "workload.producers=1",
                       "--set", "nemesis.steps=[{wait: 1}]",
                       "--results-dir", str(results), "--no-progress", "--no-check"], state, timeout=240)
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-2000:]}"
        lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
        run_dir = Path(lines[-1])
        assert run_dir.parent == results and run_dir.is_dir(), f"last line is not the run dir: {lines[-1]!r}"
        assert "not checked" in r.stdout and f"faultline check {run_dir}" in r.stdout, r.stdout
        # collected: histories with the drain's end, cluster logs; not checked: no verdict, no Spark log
        drain = read_jsonl(run_dir / "history" / "drain.jsonl")
        assert any(x.get("f") == "drain-end" for x in drain), "the drain did not run to its end"
        assert (run_dir / "cluster-logs" / "controller" / "events.jsonl").exists()
        for absent in ("verdict.json", "checker.log", "report.html", "junit.xml"):
            assert not (run_dir / absent).exists(), f"{absent} written by a --no-check run"
        run = json.loads((run_dir / "run.json").read_text())
        assert run["command"].endswith("--no-check") and run["ended_wall"] > run["started_wall"]
        assert pids_matching(str(run_dir)) == []
    finally:
        force_cleanup(results, state)
