"""Benchmark: how long an embedded kraftsim cluster takes to be ready and to stop, 1 controller vs a quorum.

Goal: a 3-controller, 3-broker cluster is ready (``bootstrap.servers=`` printed: every broker
registered and unfenced, so the Raft quorum has elected a leader and committed the brokers'
registrations) in <= 5 s, and a 1-controller cluster is no slower than before the quorum
existed. The two layouts start in turn (1, 3, 1, 3, ...) so drift in the machine's load hits
both alike; each start is stopped (SIGTERM, waited for) before the next, and that stop is timed
too: every faultline run on the embedded cluster pays it once in its teardown (goal: about the
Raft leader's resignation, KafkaRaftClient.shutdown, not seconds per controller). Prints every
start and stop and the medians; asserts nothing (timing goals live here, not in unit tests).

    python benchmarks/kraftsim_startup.py [--rounds 6] [--brokers 3] [--controllers 1,3]
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kraftsim_throughput import free_base  # noqa: E402  (same port-picking as the throughput bench)

REPO = Path(__file__).resolve().parents[1]


def ready_seconds(brokers: int, controllers: int) -> tuple[float, float]:
    """Start ``kraftsim cluster``, time until its ready line, stop it (SIGTERM, timed until it
    exits). Returns (ready, stop) seconds; raises on a failed start."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory(prefix="kraftsim-startup-") as d:
        t0 = time.monotonic()
        # one controller is the launcher's default: no flag, so the same script times a
        # checkout from before the quorum existed (an A/B of the 1-controller start)
        quorum = ["--controllers", str(controllers)] if controllers != 1 else []
        p = subprocess.Popen([sys.executable, "-m", "kraftsim", "cluster", "--brokers", str(brokers), *quorum,
                              "--dir", d, "--base-port", str(free_base(brokers))],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                             start_new_session=True)
        try:
            line = p.stdout.readline() if p.stdout else ""
            took = time.monotonic() - t0
            if not line.startswith("bootstrap.servers="):
                raise RuntimeError(f"{controllers}-controller cluster did not start: {line!r}")
            t1 = time.monotonic()
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(30)
            return took, time.monotonic() - t1
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--controllers", default="1,3", help="comma-separated layouts, started in turn")
    args = ap.parse_args()
    layouts = [int(x) for x in args.controllers.split(",") if x.strip()]
    got: dict[int, list[float]] = {n: [] for n in layouts}
    stops: dict[int, list[float]] = {n: [] for n in layouts}
    for r in range(args.rounds):
        for n in layouts:
            s, st = ready_seconds(args.brokers, n)
            got[n].append(s)
            stops[n].append(st)
            print(f"round {r + 1}/{args.rounds}: {n} controller(s), {args.brokers} brokers: ready in {s:.2f} s, "
                  f"stopped in {st:.2f} s", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    for n, xs in got.items():
        print(f"{n} controller(s), {args.brokers} brokers: median {statistics.median(xs):.2f} s "
              f"(min {min(xs):.2f}, max {max(xs):.2f}, {len(xs)} starts); "
              f"stop median {statistics.median(stops[n]):.2f} s (max {max(stops[n]):.2f})")
    if len(layouts) == 2:
        a, b = layouts
        ratios = [y / x for x, y in zip(got[a], got[b])]
        print(f"{b} vs {a} controller(s), pair by pair: median ratio {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
