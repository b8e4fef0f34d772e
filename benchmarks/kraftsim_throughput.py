"""Benchmark: kraftsim cluster-ready time and acks=all throughput with confluent-kafka.

Goals: a 3-broker cluster ready (``bootstrap.servers=`` printed) in <= 5 s, and
>= 20,000 acknowledged writes/s with acks=all, RF 3, min ISR 2, batching on, 100-byte values.
Prints the figures; asserts nothing (timing goals live here, not in unit tests).

    python benchmarks/kraftsim_throughput.py [--messages 200000] [--partitions 3] [--brokers 3]
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]


def free_base(n: int) -> int:
    for _ in range(100):
        base = random.randrange(30000, 60000 - n)
        try:
            for i in range(n + 1):
                with socket.socket() as s:
                    s.bind((f"127.0.0.{1 + i}", base + i))
            return base
        except OSError:
            continue
    raise SystemExit("no free ports")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--brokers", type=int, default=3)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory(prefix="kraftsim-bench-") as d:
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "kraftsim", "cluster", "--brokers", str(args.brokers),
                              "--dir", d, "--base-port", str(free_base(args.brokers))],
                             stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
        try:
            line = p.stdout.readline() if p.stdout else ""
            ready_s = time.monotonic() - t0
            if not line.startswith("bootstrap.servers="):
                print(f"cluster failed to start: {line!r}")
                return 1
            bs = line.strip().split("=", 1)[1]
            print(f"cluster ready: {ready_s:.2f} s ({args.brokers} brokers)")
            admin = AdminClient({"bootstrap.servers": bs})
            admin.create_topics([NewTopic("bench", args.partitions, 3, config={"min.insync.replicas": "2"})])["bench"].result(15)
            prod = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                             "queue.buffering.max.messages": 1_000_000, "compression.type": "none"})
            acked = [0]
            failed = [0]

            def cb(err, msg):  # noqa: ANN001
                if err is None:
                    acked[0] += 1
                else:
                    failed[0] += 1

            value = b"x" * 100
            t1 = time.monotonic()
            for i in range(args.messages):
                while True:
                    try:
                        prod.produce("bench", value=value, key=str(i % 1000).encode(), on_delivery=cb)
                        break
                    except BufferError:
                        prod.poll(0.01)
                if i % 10_000 == 0:
                    prod.poll(0)
            prod.flush(120)
            el = time.monotonic() - t1
            print(f"acked writes: {acked[0]} (failed {failed[0]}) in {el:.2f} s = {acked[0] / el:,.0f} acked writes/s "
                  f"(acks=all, RF 3, min ISR 2, {args.partitions} partitions, 100-byte values)")
            print(f"machine load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        finally:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
