"""How long the default campaign takes, phase by phase, and how long the verdict makes you wait.

Runs `faultline run campaigns/kill-restart.yaml` (or the campaign given) with its own
heal-ledger directory and prints the seconds spent in each timeline phase and, the figure a
user feels, the seconds from the end of the drain (the timeline's "drain done") to
verdict.json (its mtime on the run clock): the log collection, the cluster's stop and the
check. Goals: a kill-restart run in <= 60 s; the verdict <= 3 s after the drain.

``--baseline REV`` runs the same campaign with the harness and checker of a git revision
(``git archive`` into a temporary directory, run with this virtual environment), interleaved
with this tree's runs, so both are measured in one sitting on the same (shared) machine.

    python benchmarks/harness_run_time.py [CAMPAIGN] [--runs N] [--baseline REV] [--phases]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def phases(run_dir: Path) -> list[tuple[str, float]]:
    evs = [json.loads(x) for x in (run_dir / "timeline.jsonl").read_text().splitlines() if x.strip()]
    return [(e["phase"], e["t"]) for e in evs if e.get("kind") == "phase"]


def drain_to_verdict(run_dir: Path) -> float | None:
    """Seconds from the timeline's "drain done" note to verdict.json's mtime, on the run clock."""
    evs = [json.loads(x) for x in (run_dir / "timeline.jsonl").read_text().splitlines() if x.strip()]
    done = next((e["t"] for e in evs if e.get("kind") == "note" and e.get("text") == "drain done"), None)
    t0 = json.loads((run_dir / "run.json").read_text()).get("wall_at_t0")
    if done is None or t0 is None or not (run_dir / "verdict.json").exists():
        return None
    return (run_dir / "verdict.json").stat().st_mtime - t0 - done


def one_run(tree: Path, campaign: str) -> dict | None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "FAULTLINE_STATE_DIR": str(Path(tmp) / "state"), "PYTHONPATH": str(tree)}
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", campaign,
                            "--results-dir", str(Path(tmp) / "results"), "--no-progress"],
                           capture_output=True, text=True, env=env, cwd=tree)
        total = time.monotonic() - t0
        lines = [x for x in r.stdout.splitlines() if x.strip()]
        if r.returncode not in (0, 1) or not lines:
            print(f"  exit {r.returncode}: {(r.stderr.strip().splitlines() or ['?'])[-1]}", flush=True)
            return None
        run_dir = Path(lines[-1])
        notes = json.loads((run_dir / "run.json").read_text()).get("notes") or []
        return {"total": total, "wait": drain_to_verdict(run_dir), "phases": phases(run_dir),
                "load": os.getloadavg()[0], "exit": r.returncode, "notes": [n for n in notes if "Spark" in n or "conver" in n]}


def export_tree(rev: str) -> Path:
    dest = Path(tempfile.mkdtemp(prefix="faultline-old-"))
    arch = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=arch.stdout, check=True)
    return dest


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("campaign", nargs="?", default=str(REPO / "campaigns" / "kill-restart.yaml"))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--baseline", default=None, help="a git revision to time beside this tree (e.g. main)")
    ap.add_argument("--phases", action="store_true", help="print each run's phases")
    a = ap.parse_args()
    campaign = str(Path(a.campaign).resolve())
    trees = {"new": REPO}
    if a.baseline:
        trees = {"old": export_tree(a.baseline), "new": REPO}
    waits: dict[str, list[float]] = {k: [] for k in trees}
    try:
        for i in range(a.runs):
            for name, tree in trees.items():
                r = one_run(tree, campaign)
                if r is None:
                    continue
                ph = dict(r["phases"])
                if r["wait"] is not None:
                    waits[name].append(r["wait"])
                print(f"run {i} {name}: exit {r['exit']}, wall {r['total']:.1f}s, run loop (setup..collect) "
                      f"{ph.get('check', float('nan')):.1f}s, drain done -> verdict.json "
                      f"{r['wait'] if r['wait'] is not None else float('nan'):.1f}s, load {r['load']:.1f}"
                      + (f", notes {r['notes']}" if r["notes"] else ""), flush=True)
                if a.phases:
                    for (p, t), nxt in zip(r["phases"], r["phases"][1:] + [("end", r["total"])]):
                        print(f"    {p:<13} {nxt[1] - t:6.1f}s")
        for name, w in waits.items():
            if w:
                print(f"{name}: drain done -> verdict.json, median of {len(w)}: {statistics.median(w):.1f}s "
                      f"(min {min(w):.1f}, max {max(w):.1f})")
    finally:
        if "old" in trees:
            shutil.rmtree(trees["old"], ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
