#!/usr/bin/env python3
"""Shrinking a ~30-step random run: original steps -> minimal steps, candidates, wall time.

Why: `faultline shrink` pays for every candidate with real replays (a cluster run each), so
the number of candidates and their length decide whether a nightly run's loss becomes a
reproduction in minutes or in hours. Goal: a 30-step run shrunk to <= 5 steps in <= 20
minutes on this machine.

The run: the embedded cluster with ``unclean.leader.election.enable=true``, RF 2, min ISR 1,
broker session and replica lag timeouts of 1.5 s; a seeded random mix of kills and pauses
(3 s each, back to back) on the partition's replicas for 93 s - about 30 faults. (The same
target as tests/harness/test_shrink_e2e.py: a pair of faults on the two replicas, in either
order, is an unclean election that loses writes.) A
random run that lost nothing is replaced by the next seed (up to --tries). Then
``faultline shrink RUN --replays K`` (the real CLI) and the figures from its shrink.json.

    python benchmarks/shrink.py                       # K=3
    python benchmarks/shrink.py --replays 2 --json /work/notes/shrink-bench.json
    python benchmarks/shrink.py --run RUN             # shrink an existing run again (fresh log)

Figures, not assertions.

Measured 23 Nov (2 cores shared with other test runs, load 11-13), K=3: 30 steps -> 2, 7
candidates, 13 replays (6 judged by Spark), 509 s; the minimal schedule lost writes by
unclean_election in 2 of 3 replays. With 2 s faults 0.2-0.6 s apart over 75 s: 29 -> 2, 7
candidates, 16 replays, 631 s, 3 of 3. Table and reading in docs/shrink.md ("Figures").
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CAMPAIGN: dict[str, Any] = {
    "name": "shrink-bench",
    "target": {"inventory": str(ROOT / "inventory" / "local.yaml"),
               "settings": {"unclean.leader.election.enable": True, "broker.session.timeout.ms": 1500,
                            "replica.lag.time.max.ms": 1500}},
    "topic": {"name": "faultline", "partitions": 1, "replication_factor": 2, "min_insync_replicas": 1},
    "workload": {"producers": 1, "consumers": 0, "rate": 100, "duration": 93, "drain_timeout": 10,
                 "recovery_timeout": 15},
    "nemesis": {"schedule": "random",
                "random": {"faults": ["kill", "pause"], "interval": 0.05, "duration": 3,
                           "targets": "replica-of:0", "start-after": 2}},
    "expect": "loss",
}


def cli() -> list[str]:
    exe = shutil.which("faultline")
    return [exe] if exe else [sys.executable, "-m", "harness.cli"]


def make_run(results: Path, seed: int, duration: float) -> Path | None:
    from harness.shrink.judge import acked_missing

    camp = dict(CAMPAIGN, workload={**CAMPAIGN["workload"], "duration": duration})
    f = results / "shrink-bench.yaml"
    f.write_text(yaml.safe_dump(camp, sort_keys=False))
    t0 = time.monotonic()
    p = subprocess.run(cli() + ["run", str(f), "--seed", str(seed), "--results-dir", str(results),
                                "--no-progress", "--no-check"], capture_output=True, text=True, timeout=900)
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    rd = Path(lines[-1]) if lines else None
    missing = acked_missing(rd) if rd and rd.is_dir() else None
    print(f"random run seed {seed}: exit {p.returncode}, {time.monotonic() - t0:.0f} s, "
          f"acknowledged writes missing from the final drain: {missing}", flush=True)
    return rd if p.returncode == 0 and missing else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replays", type=int, default=3)
    ap.add_argument("--duration", type=float, default=93.0, help="random run's workload seconds (~30 faults at 93)")
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--tries", type=int, default=4, help="seeds to try for a lossy random run")
    ap.add_argument("--results-dir", type=Path, default=Path("/tmp/faultline-shrink-bench"))
    ap.add_argument("--run", type=Path, default=None, help="shrink this run instead of making one")
    ap.add_argument("--time-budget", type=float, default=None)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    a.results_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("FAULTLINE_STATE_DIR", str(a.results_dir / "state"))
    rd = a.run
    for seed in range(a.seed, a.seed + a.tries):
        if rd is not None:
            break
        rd = make_run(a.results_dir, seed, a.duration)
    if rd is None:
        print("no lossy random run", file=sys.stderr)
        return 1
    shutil.rmtree(rd / "shrink", ignore_errors=True)   # a fresh search, not a resumed one
    cmd = cli() + ["shrink", str(rd), "--replays", str(a.replays), "--no-progress"]
    if a.time_budget:
        cmd += ["--time-budget", str(a.time_budget)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    log = [json.loads(ln) for ln in (rd / "shrink" / "shrink.json").read_text().splitlines() if ln.strip()]
    start = next(x for x in log if x["type"] == "start")
    cands = [x for x in log if x["type"] == "candidate"]
    replays = [x for x in log if x["type"] == "replay"]
    result = next((x for x in reversed(log) if x["type"] == "result"), {})
    row = {"run": str(rd), "exit": p.returncode, "replays_per_candidate": a.replays,
           "original_steps": len(start["original"]), "minimal_steps": len(result.get("minimal") or []),
           "mechanism": start["mechanism"], "candidates": len({c["key"] for c in cands}), "replays": len(replays),
           "spark_judged": sum(1 for r in replays if r.get("acked_missing") != 0),
           "replay_wall_mean_s": round(sum(r.get("wall_s", 0) for r in replays) / max(1, len(replays)), 1),
           "wall_s": round(wall, 1), "minimal_k_of_K": f"{result.get('matches')}/{result.get('replays_done')}",
           "message": (p.stdout.strip().splitlines() or [""])[0] if p.returncode == 0 else p.stderr.strip()[-300:],
           "load1": round(os.getloadavg()[0], 1)}
    for k, v in row.items():
        print(f"{k:22s} {v}")
    for c in cands:
        print(f"  {c['phase']:9s} {c['size']:3d} steps  {c['outcome']:6s} {c['matches']}/{c['replays_done']}  {c['wall_s']:6.1f} s")
    if a.json:
        a.json.write_text(json.dumps(row, indent=1))
    return 0 if p.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
