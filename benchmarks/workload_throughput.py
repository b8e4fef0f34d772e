"""Throughput of the recorded acks=all producer: sends/s acknowledged and recorded.

Why a benchmark and not a test: the figure depends on the machine and on what else runs;
the goal is that a run sustain many thousands of recorded sends/s on 2 cores, and this
prints what it does, with ack latency percentiles from the history itself.

    python benchmarks/workload_throughput.py [--seconds 10] [--producers 1] [--partitions 3]
        [--rate N] [--bootstrap HOST:PORT | --mock]   # default: a 3-broker kraftsim cluster

Against kraftsim the cluster (Python brokers on the same 2 cores) is usually the
bottleneck; ``--bootstrap`` points it at any other Kafka-compatible cluster, and ``--mock``
at librdkafka's built-in mock cluster (``test.mock.num.brokers=3``, inside each producer
process), which measures the ceiling of the recording client itself.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groundwork.clock import RunClock  # noqa: E402
from workloads.admin import create_topic  # noqa: E402
from workloads.history import read_jsonl  # noqa: E402
from workloads.producer import ProducerWorkload  # noqa: E402


def start_kraftsim(workdir: Path, brokers: int, timeout: float = 90.0) -> tuple[subprocess.Popen, str]:
    """``python -m kraftsim cluster`` in its own process group; wait for its bootstrap line."""
    log = open(workdir / "kraftsim.out", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "kraftsim", "cluster", "--brokers", str(brokers),
                             "--dir", str(workdir / "cluster")], stdout=subprocess.PIPE, stderr=log,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                raise RuntimeError(f"kraftsim exited with {proc.returncode}; see {workdir / 'kraftsim.out'}")
            continue
        if line.startswith("bootstrap.servers="):
            return proc, line.strip().split("=", 1)[1]
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError(f"kraftsim printed no bootstrap.servers= line within {timeout:.0f}s")


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--producers", type=int, default=1)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rate", type=float, default=None, help="msgs/s per producer (default: max)")
    ap.add_argument("--idempotence", action="store_true")
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--mock", action="store_true", help="librdkafka's mock cluster per producer")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (histories, cluster)")
    ap.add_argument("--mode", choices=("process", "thread"), default="process",
                    help="each producer in a spawned process (default) or a thread of this one")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="faultline-bench-"))
    cluster = None
    try:
        extra: dict = {}
        topic = f"bench-{int(time.time())}"
        if args.mock:
            bootstrap, extra = "mock:9092", {"test.mock.num.brokers": 3}
        elif args.bootstrap:
            bootstrap = args.bootstrap
        else:
            cluster, bootstrap = start_kraftsim(work, 3)
        if not args.mock:
            create_topic(bootstrap, topic, args.partitions, 3, min_insync_replicas=2, timeout=60)
        clock = RunClock()
        hist = work / "history"
        producers = [ProducerWorkload(f"producer-{i}", bootstrap, topic, args.partitions, hist, clock.now,
                                      rate=args.rate, idempotence=args.idempotence, extra_config=extra, mode=args.mode)
                     for i in range(args.producers)]
        for p in producers:
            p.start()
        t0 = time.monotonic()
        time.sleep(args.seconds)
        mid = [p.stats() for p in producers]
        elapsed = time.monotonic() - t0
        finals = [p.stop(timeout=15) for p in producers]

        invoked = sum(s["invoked"] for s in mid)
        acked = sum(s["ok"] for s in mid)
        latencies: list[float] = []
        lines = 0
        for p in producers:
            invoke_t: dict[int, float] = {}
            for r in read_jsonl(p.history_path):
                lines += 1
                if r["type"] == "invoke":
                    invoke_t[r["op"]] = r["t"]
                elif r["type"] == "ok" and r["op"] in invoke_t:
                    latencies.append(r["t"] - invoke_t[r["op"]])
        latencies.sort()
        target = "librdkafka mock cluster" if args.mock else "kraftsim 3 brokers" if cluster else bootstrap
        print(f"target          {target}")
        print(f"producers       {args.producers} ({args.mode} each), partitions {args.partitions}, "
              f"acks=all, idempotence={args.idempotence}, rate={args.rate or 'max'}")
        print(f"window          {elapsed:.1f} s")
        print(f"invoked/s       {invoked / elapsed:,.0f}")
        print(f"acked/s         {acked / elapsed:,.0f}   (acks=all, recorded)")
        print(f"final totals    ok={sum(f['ok'] for f in finals)} fail={sum(f['fail'] for f in finals)} "
              f"info={sum(f['info'] for f in finals)} history lines={lines}")
        print(f"ack latency     p50 {percentile(latencies, 0.5) * 1000:.1f} ms, "
              f"p99 {percentile(latencies, 0.99) * 1000:.1f} ms")
        return 0
    finally:
        if cluster is not None:
            try:
                os.killpg(cluster.pid, signal.SIGTERM)
                cluster.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(cluster.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if args.keep:
            print(f"work dir        {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
