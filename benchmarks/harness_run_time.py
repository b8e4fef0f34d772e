"""How long the default campaign takes, phase by phase (goal: a kill-restart run in <= 60 s).

Runs `faultline run campaigns/kill-restart.yaml` (or the campaign given) with its own
heal-ledger directory and prints the seconds spent in each timeline phase, the run loop's
total (setup to collect) and the checker's share, which dominates on a loaded machine.

    python benchmarks/harness_run_time.py [CAMPAIGN] [--runs N]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def phases(run_dir: Path) -> list[tuple[str, float]]:
    evs = [json.loads(x) for x in (run_dir / "timeline.jsonl").read_text().splitlines() if x.strip()]
    ph = [(e["phase"], e["t"]) for e in evs if e.get("kind") == "phase"]
    return ph


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("campaign", nargs="?", default=str(REPO / "campaigns" / "kill-restart.yaml"))
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    for i in range(a.runs):
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "FAULTLINE_STATE_DIR": str(Path(tmp) / "state")}
            t0 = time.monotonic()
            r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", a.campaign,
                                "--results-dir", str(Path(tmp) / "results"), "--no-progress"],
                               capture_output=True, text=True, env=env, cwd=REPO)
            total = time.monotonic() - t0
            lines = [x for x in r.stdout.splitlines() if x.strip()]
            if r.returncode not in (0, 1) or not lines:
                print(f"run {i}: exit {r.returncode}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
                continue
            run_dir = Path(lines[-1])
            ph = phases(run_dir)
            check_t = dict(ph).get("check")
            print(f"run {i}: exit {r.returncode}, wall {total:.1f}s, run loop (setup..collect) "
                  f"{check_t:.1f}s, checker+report {total - check_t:.1f}s, load {os.getloadavg()[0]:.1f}")
            for (name, t), nxt in zip(ph, ph[1:] + [("end", total)]):
                print(f"    {name:<13} {nxt[1] - t:6.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
