"""Benchmark: the report for a 10 M-op run — goal < 60 s and < 10 MB.

What a 10 M-op run leaves for the report (the checker has already reduced the history):
per-second throughput for the run's length, an observer sample per partition per second,
the cluster's elections / ISR changes / AlterPartition answers for every fault, and the
evidence CSVs — here deliberately loss-heavy (tens of thousands of lost and unseen writes)
so the top-N tables and the per-partition markers are exercised. The history itself is not
generated: the report never reads it.

    python3 benchmarks/report_scale.py [--ops 10000000] [--partitions 64] [--rate 2800] [--lost 20000]

Prints input sizes, wall time and peak memory per step, and the report's size.
"""
from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.report import write_index, write_junit, write_report  # noqa: E402

WALL0 = 1_795_000_000.0
TOPIC = "faultline"


def _jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")


def build(root: Path, ops: int, partitions: int, rate: float, lost: int, seed: int = 1) -> Path:
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    d = root / "bench-10M"
    duration = int(ops / rate)
    (d / "aggregates").mkdir(parents=True)
    (d / "anomalies").mkdir()
    run = {"run_id": d.name, "campaign": "nightly-mixed", "campaign_path": "campaigns/nightly-mixed.yaml",
           "inventory": "inventory/local.yaml", "target": "kraftsim-local", "seed": seed, "wall_at_t0": WALL0,
           "started_wall": WALL0, "ended_wall": WALL0 + duration, "duration_s": float(duration),
           "expect": "no-loss", "switches": {"kip903.enabled": False}, "target_version": "kraftsim 0.1",
           "command": f"faultline run campaigns/nightly-mixed.yaml --seed {seed}"}
    (d / "run.json").write_text(json.dumps(run))

    # faults: one every ~60 s, 5-20 s long
    faults, t = [], 30.0
    kinds = ["kill", "wipe", "partition", "alter-partition-delay", "pagecache-loss-reboot"]
    while t < duration - 30:
        length = rng.uniform(5, 20)
        faults.append((f"f-{len(faults)}", rng.choice(kinds), t, t + length, f"broker-{rng.randrange(3)}"))
        t += rng.uniform(40, 80)
    tl = []
    for fid, kind, a, b, target in faults:
        tl.append({"v": 1, "t": a, "kind": "nemesis", "phase": "start", "id": fid, "fault": kind, "targets": [target], "detail": {}})
        tl.append({"v": 1, "t": b, "kind": "nemesis", "phase": "stop", "id": fid, "fault": kind, "targets": [target], "detail": {}})
    tl.sort(key=lambda r: r["t"])
    _jsonl(d / "timeline.jsonl", tl)

    secs = np.arange(duration)
    ok = npr.poisson(rate, duration).astype(int)
    fail = np.zeros(duration, dtype=int)
    for _, _, a, b, _ in faults:
        fail[int(a):int(b)] += npr.poisson(rate / 4, int(b) - int(a))
        ok[int(a):int(b)] //= 3
    pd.DataFrame({"second": secs, "ok": ok, "fail": fail, "info": fail // 10,
                  "latency_p50_ms": npr.gamma(2, 3, duration).round(2),
                  "latency_p99_ms": (npr.gamma(2, 30, duration) + fail).round(2)}
                 ).to_csv(d / "aggregates" / "throughput.csv", index=False)

    # observer: one sample per partition per second
    leaders = np.zeros(partitions, dtype=int)
    obs = []
    fi = 0
    for s in range(duration):
        while fi < len(faults) and faults[fi][2] <= s:
            leaders = npr.integers(0, 3, partitions)
            fi += 1
        for p in range(partitions):
            obs.append({"t": s + p / partitions, "topic": TOPIC, "partition": p, "leader": int(leaders[p]),
                        "leader_epoch": fi + 1, "isr": [0, 1, 2], "elr": [], "error": None})
    _jsonl(d / "observer.jsonl", obs)

    # cluster events: per fault, every partition re-elects and changes ISR twice; AlterPartitions
    ev = []
    for n, (_, kind, a, b, target) in enumerate(faults):
        for p in range(partitions):
            w = WALL0 + a + rng.uniform(0, 1)
            ev.append({"wall": w, "node": 100, "role": "controller", "event": "leader_elected", "topic": TOPIC,
                       "partition": p, "leader": rng.randrange(3), "leader_epoch": n + 2, "partition_epoch": 2 * n + 2,
                       "isr": [0, 1], "elr": [], "reason": "leader_fenced", "leader_recovery_state": 0,
                       "candidates": [{"broker": c, "log_start_offset": 0, "log_end_offset": rng.randrange(10**6),
                                       "local_log_size_bytes": rng.randrange(10**9)} for c in (0, 1)]})
            for k in range(2):
                ev.append({"wall": w + 1 + k, "node": 100, "role": "controller", "event": "isr_changed", "topic": TOPIC,
                           "partition": p, "leader": 0, "leader_epoch": n + 2, "partition_epoch": 2 * n + 3 + k,
                           "isr": [0, 1, 2][: 2 + k], "elr": [], "reason": "alter_partition"})
                ev.append({"wall": w + 1 + k, "node": 100, "role": "controller", "event": "alter_partition",
                           "topic": TOPIC, "partition": p, "leader": 0, "new_isr": [0, 1, 2],
                           "broker_epochs": {"0": 1, "1": 2, "2": 3}, "partition_epoch": 2 * n + 3, "version": 3,
                           "accepted": k == 1, "error": None if k else "INELIGIBLE_REPLICA",
                           "error_code": 0 if k else 107})
    ev.sort(key=lambda r: r["wall"])
    _jsonl(d / "cluster-logs" / "controller-100" / "events.jsonl", ev)

    # evidence: loss-heavy
    lp = npr.integers(0, partitions, lost)
    ack = np.sort(npr.uniform(0, duration, lost))
    pd.DataFrame({"topic": TOPIC, "partition": lp, "offset": npr.integers(0, ops // partitions, lost),
                  "value": [f"producer-{i % 8}-{i}" for i in range(lost)], "process": [f"producer-{i % 8}" for i in range(lost)],
                  "op": np.arange(lost), "invoke_t": ack - 0.01, "ack_t": ack, "miss_t": ack + 5,
                  "attribution": ["faults: wipe[broker-2] | elections: leader_elected leader=2"] * lost}
                 ).to_csv(d / "anomalies" / "lost_write.csv", index=False)
    unseen = lost * 3
    pd.DataFrame({"topic": TOPIC, "partition": npr.integers(0, partitions, unseen), "offset": np.arange(unseen),
                  "value": [f"producer-1-{i}" for i in range(unseen)], "ack_t": npr.uniform(0, duration, unseen)}
                 ).to_csv(d / "anomalies" / "unseen_at_end.csv", index=False)
    by_part = pd.Series(lp).value_counts()
    verdict = {"valid": False, "acked_writes": int(ok.sum()), "expected": "no-loss", "as_expected": False,
               "counts": {"lost_write": lost, "unseen_at_end": unseen, "inconsistent_offset": 0, "duplicate": 0,
                          "offset_mismatch": 0, "nonmonotonic_send": 0, "send_skip": 0,
                          "realtime_offset_regression": 0, "nonmonotonic_poll": 0, "poll_skip": 0,
                          "failed_write_visible": 0, "failed_write_visible_allowed": 0},
               "examples": {}, "lost_writes_by_partition": {f"{TOPIC}@{p}": int(n) for p, n in by_part.items()},
               "attribution": []}
    (d / "verdict.json").write_text(json.dumps(verdict))
    return d


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=10_000_000)
    ap.add_argument("--partitions", type=int, default=64)
    ap.add_argument("--rate", type=float, default=2800.0, help="acknowledged sends per second")
    ap.add_argument("--lost", type=int, default=20_000)
    ap.add_argument("--keep", action="store_true", help="keep the generated run directory")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="fl-report-bench-"))
    try:
        t0 = time.perf_counter()
        d = build(root, args.ops, args.partitions, args.rate, args.lost)
        print(f"generated {args.ops:,}-op run aggregates in {time.perf_counter() - t0:.1f}s: "
              f"{_size(d) / 1e6:.1f} MB inputs, {int(args.ops / args.rate):,} s of run, {args.partitions} partitions")
        for name in ("aggregates/throughput.csv", "observer.jsonl", "cluster-logs/controller-100/events.jsonl",
                     "anomalies/lost_write.csv", "anomalies/unseen_at_end.csv"):
            p = d / name
            print(f"  {name}: {sum(1 for _ in open(p)) - (1 if name.endswith('.csv') else 0):,} rows, {p.stat().st_size / 1e6:.1f} MB")
        timings = {}
        for step, fn, arg in (("report.html", write_report, d), ("junit.xml", write_junit, d), ("index.html", write_index, root)):
            t = time.perf_counter()
            out = fn(arg)
            timings[step] = (time.perf_counter() - t, out.stat().st_size)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        for step, (secs, size) in timings.items():
            print(f"{step:12s} {secs:6.2f} s  {size / 1e6:6.2f} MB")
        rt, rs = timings["report.html"]
        print(f"peak RSS {peak:.0f} MB")
        print(f"goal report < 60 s: {'MET' if rt < 60 else 'MISSED'} ({rt:.1f} s); "
              f"< 10 MB: {'MET' if rs < 10e6 else 'MISSED'} ({rs / 1e6:.2f} MB)")
        if args.keep:
            print(f"kept {d}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
