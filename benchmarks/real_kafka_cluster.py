"""Benchmark: a real Apache Kafka cluster of the embedded target - start, stop and memory - and a
KIP-903 pair's wall time on real Kafka beside kraftsim's, measured in one run.

What it answers: what a user pays for `--target apache-kafka` over kraftsim. A cluster's start is
timed from nothing to every broker registered and unfenced (targets/apache_kafka.py: network
namespaces, server.properties, `kafka-storage format` of every node, the JVMs, lossyfs disks when
``--lossyfs``), its stop from SIGKILL of the JVMs to the network and disks gone; memory is the
JVMs' resident set summed (/proc/PID/status VmRSS) once the cluster is ready. Layouts alternate
(1+3, 3+3, 1+3, ...) so drift in the machine's load hits both. The KIP-903 pair is
`faultline run campaigns/kip-903.yaml` (the vulnerable cell: metadata.version 3.4) and its fixed
cell on each target, run in turn. Prints every figure and the medians; asserts nothing.

    python benchmarks/real_kafka_cluster.py [--rounds 5] [--release 4.1.0] [--lossyfs] [--pair]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from groundwork.ledger import Ledger  # noqa: E402
from nemeses.lossyfs import RunDisks  # noqa: E402
from targets.apache_kafka import EmbeddedApacheKafka  # noqa: E402


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def one_cluster(release: str, controllers: int, brokers: int, lossyfs: bool) -> tuple[float, float, float]:
    """(start s, stop s, JVMs' RSS MiB) of one cluster."""
    with tempfile.TemporaryDirectory(prefix="real-kafka-bench-") as d:
        ledger = Ledger(Path(d) / "ledger.jsonl")
        k = EmbeddedApacheKafka(Path(d), version=release, brokers=brokers, controllers=controllers, settings={},
                                ledger=ledger, disks=RunDisks(ledger) if lossyfs else None)
        t0 = time.monotonic()
        try:
            k.start()
            started = time.monotonic() - t0
            pids = [int(p.read_text().split()[0]) for p in (Path(d) / "cluster").glob("*.pid")]
            mem = sum(rss_mib(p) for p in pids)
        finally:
            t1 = time.monotonic()
            k.stop()
            stopped = time.monotonic() - t1
        return started, stopped, mem


def pair(target: str, results: Path) -> tuple[float, float, str]:
    """Wall seconds of the KIP-903 pair's two cells on ``target`` and their outcomes."""
    times, outcomes = [], []
    for extra in ([], ["--set", "target.metadata.version=4.1", "--set", "expect=no-loss"]):
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(REPO / "campaigns/kip-903.yaml"),
                            "--target", target, "--seed", "7", "--results-dir", str(results), "--no-progress",
                            *extra], capture_output=True, text=True, cwd=REPO)
        times.append(time.monotonic() - t0)
        run_dir = Path(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else None
        v = json.loads((run_dir / "verdict.json").read_text()) if run_dir and (run_dir / "verdict.json").exists() else {}
        outcomes.append(f"{v.get('outcome', 'exit ' + str(p.returncode))} ({v.get('counts', {}).get('lost_write', '?')} lost)")
    return times[0], times[1], "; ".join(outcomes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--release", default="4.1.0")
    ap.add_argument("--lossyfs", action="store_true", help="every node's disk on lossyfs (the run's default)")
    ap.add_argument("--pair", action="store_true", help="also time the KIP-903 pair on real Kafka and on kraftsim")
    a = ap.parse_args()
    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}")
    figures: dict[str, list[tuple[float, float, float]]] = {"1+3": [], "3+3": []}
    for r in range(a.rounds):
        for layout, controllers in (("1+3", 1), ("3+3", 3)):
            s, t, m = one_cluster(a.release, controllers, 3, a.lossyfs)
            figures[layout].append((s, t, m))
            print(f"round {r + 1} {layout}: start {s:.1f}s stop {t:.1f}s JVMs {m:.0f} MiB", flush=True)
    for layout, rows in figures.items():
        if not rows:   # --rounds 0: the pair alone
            continue
        print(f"{layout} (Apache Kafka {a.release}{', lossyfs' if a.lossyfs else ''}): median start "
              f"{statistics.median(x[0] for x in rows):.1f}s, stop {statistics.median(x[1] for x in rows):.1f}s, "
              f"JVMs {statistics.median(x[2] for x in rows):.0f} MiB")
    if a.pair:
        with tempfile.TemporaryDirectory(prefix="kip903-pair-") as d:
            for target in ("apache-kafka (3.4.0 vulnerable, 4.1.0 fixed)", "kraftsim"):
                vuln, fixed, out = pair("kraftsim" if target == "kraftsim" else "apache-kafka", Path(d))
                print(f"KIP-903 pair on {target}: vulnerable {vuln:.0f}s, fixed {fixed:.0f}s, total "
                      f"{vuln + fixed:.0f}s ({out})", flush=True)
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
