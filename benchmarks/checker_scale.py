"""Checker scale benchmark: generate 1M / 10M / 50M-record histories, check them, print figures.

Why: nightly runs record tens of millions of operations; the goal on a 2-core machine is
>= 1M history records/s at 10M, near-linear time from 1M to 50M, and a flat driver memory
(evidence and aggregates only reach the driver, never the history). Figures are printed,
never asserted (timing goals live here, not in unit tests).

An "op" here is one history record (a send invoke, a send completion, one message read by a
consumer or by the drain); every acknowledged message therefore costs four records. A few
lost writes are injected (removed from every read) so attribution runs too.

    python benchmarks/checker_scale.py --sizes 1M,10M [--dir /tmp/checker-bench] [--keep]

check_s is the whole first check of the run: ingest (JSON Lines -> history.parquet, once per
run) plus the analysis; kernel_s is the partition kernel's share (Spark tasks running every
anomaly family, checkers/kernel.py); recheck_s is a second `check` of the same run in a new
process, the Parquet already there (what `faultline check` costs again, and the checker job's
own speed over a converted history).

Each check runs in a fresh process so its driver peak RSS is its own: the Python driver
(ru_maxrss) and the Spark driver JVM (VmHWM from /proc); the larger of the two checks is shown.

Measured at this commit on the 2-core box, idle (load 1.3-2.1), local[*]:

      size  check_s  records/s  ingest_s  kernel_s  recheck_s  recheck/s  jvm_mb  py_mb
        1M      3.6    280,000       2.0       0.9        2.7    365,000     358    317
       10M     15.9    627,000      11.3       4.5        5.9  1,707,000     361    403
       50M     74.4    672,000      50.6      23.5       25.2  1,983,000     355    359

So: 10M -> 50M takes 4.7x the time for 5x the records (near-linear; 1M is mostly fixed cost);
the driver JVM stays at ~360 MB and the Python driver at ~0.4 GB, bounded by two 32 MB splits
being converted at once, not by the history. The checker over a converted history runs at
1.7-2.0M records/s from 10M up; the first check, which converts JSON Lines, at 0.63M/s at 10M:
pyarrow's JSON parse alone is about 6.7 s of the 10M ingest's 11.3 s on two cores (why not a
faster reader: checkers/ingest.py). Before this commit (1f24ecd): 10M check 19.1 s, re-check
6.9 s; the difference is warm Spark Python workers (checkers.kernel.warm_workers) and no
split-sized copies in the ingest.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PARTITIONS = 8
PRODUCERS = 4
LOST_EVERY = 1_000_003     # inject one lost write roughly every million messages (at least one)


def parse_size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1_000, "M": 1_000_000}.get(s[-1], 1)
    return int(float(s[:-1] if s[-1] in "KM" else s) * mult)


def generate(run_dir: Path, records: int) -> tuple[int, float]:
    """Write a valid history of about ``records`` records; return (records written, seconds)."""
    t0 = time.time()
    messages = max(1, records // 4)
    hist = run_dir / "history"
    shutil.rmtree(run_dir, ignore_errors=True)
    hist.mkdir(parents=True)
    prod = [open(hist / f"producer-{i}.jsonl", "w", buffering=1 << 22) for i in range(PRODUCERS)]
    cons = open(hist / "consumer-0.jsonl", "w", buffering=1 << 22)
    drain = open(hist / "drain.jsonl", "w", buffering=1 << 22)
    offsets = [0] * PARTITIONS
    seq = [0] * PRODUCERS
    pops = [0] * PRODUCERS
    cop = 0
    written = 0
    batch_c: list[str] = []
    lost = 0
    for m in range(messages):
        p = m % PRODUCERS
        part = (m // PRODUCERS) % PARTITIONS
        off = offsets[part]
        offsets[part] += 1
        t = m * 0.0001
        proc = f"producer-{p}"
        val = f"{proc}-{seq[p]}"
        seq[p] += 1
        pops[p] += 1
        op = pops[p]
        prod[p].write(f'{{"v":1,"t":{t:.6f},"process":"{proc}","op":{op},"type":"invoke","f":"send","topic":"bench",'
                      f'"partition":{part},"offset":null,"value":"{val}","error":null,"error_code":null}}\n'
                      f'{{"v":1,"t":{t + 0.002:.6f},"process":"{proc}","op":{op},"type":"ok","f":"send","topic":"bench",'
                      f'"partition":{part},"offset":{off},"value":"{val}","error":null,"error_code":null}}\n')
        written += 2
        if m % LOST_EVERY == LOST_EVERY // 2 or (m == messages // 2 and lost == 0):
            lost += 1
            continue   # a lost write: nobody reads it
        if m % 16 == 0:
            cop += 1
        cons.write(f'{{"v":1,"t":{t + 0.01:.6f},"process":"consumer-0","op":{cop},"type":"ok","f":"poll","topic":"bench",'
                   f'"partition":{part},"offset":{off},"value":"{val}","error":null,"error_code":null}}\n')
        drain.write(f'{{"v":1,"t":{messages * 0.0001 + 5 + part:.6f},"process":"drain","op":{part + 1},"type":"ok",'
                    f'"f":"drain","topic":"bench","partition":{part},"offset":{off},"value":"{val}","error":null,"error_code":null}}\n')
        written += 2
    for part in range(PARTITIONS):
        drain.write(f'{{"v":1,"t":{messages * 0.0001 + 6 + part:.6f},"process":"drain","op":{PARTITIONS + part + 1},'
                    f'"type":"ok","f":"drain-end","topic":"bench","partition":{part},"offset":{offsets[part]},'
                    f'"value":null,"error":null,"error_code":null}}\n')
        written += 1
    for fh in (*prod, cons, drain):
        fh.close()
    (run_dir / "run.json").write_text(json.dumps({"run_id": run_dir.name, "expect": "loss", "wall_at_t0": 0.0,
                                                  "switches": {}}))
    return written, time.time() - t0


def jvm_hwm_kb(spark) -> int:
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


def check_one(run_dir: Path, master: str | None) -> dict:
    from checkers.job import check_run
    from checkers.session import make_session
    spark = make_session(master)
    try:
        t0 = time.time()
        v = check_run(run_dir, spark=spark)
        dt = time.time() - t0
        ing = (v.get("checker") or {}).get("ingest") or {}
        ker = (v.get("checker") or {}).get("kernel") or {}
        return {"seconds": dt, "ingest_s": float(ing.get("seconds") or 0.0), "kernel_s": float(ker.get("seconds") or 0.0),
                "records": v["history_records"], "lost_write": v["counts"]["lost_write"],
                "acked": v["acked_writes"], "jvm_peak_rss_mb": jvm_hwm_kb(spark) / 1024,
                "py_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    finally:
        spark.stop()


def run_check(rd: Path, master: str | None) -> dict | None:
    """One check of ``rd`` in a fresh process (its own Spark session and peak RSS); None on failure."""
    cmd = [sys.executable, __file__, "--check", str(rd)]
    if master:
        cmd += ["--spark-master", master]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
    if line is None:
        print(f"check of {rd} failed rc={p.returncode}: {p.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return json.loads(line[7:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1M,10M,50M", help="comma-separated record counts, e.g. 1M,10M,50M")
    ap.add_argument("--dir", default="/tmp/checker-bench")
    ap.add_argument("--spark-master", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the generated histories")
    ap.add_argument("--check", help=argparse.SUPPRESS)   # internal: check one run dir, print JSON
    args = ap.parse_args()
    if args.check:
        print("RESULT " + json.dumps(check_one(Path(args.check), args.spark_master)), flush=True)
        return 0
    print(f"{'size':>6} {'records':>11} {'gen_s':>7} {'check_s':>8} {'records/s':>10} {'ingest_s':>8} "
          f"{'kernel_s':>8} {'recheck_s':>10} {'recheck/s':>10} {'jvm_rss_mb':>10} {'py_rss_mb':>9} {'lost':>5}  load",
          flush=True)
    for size in args.sizes.split(","):
        n = parse_size(size)
        rd = Path(args.dir) / f"bench-{size.strip()}"
        written, gen_s = generate(rd, n)
        first = run_check(rd, args.spark_master)
        again = run_check(rd, args.spark_master) if first else None   # the Parquet is there now
        if first is None or again is None:
            print(f"{size:>6} check failed", flush=True)
            continue
        r = first
        if (again["lost_write"], again["acked"]) != (r["lost_write"], r["acked"]):
            print(f"{size:>6} the re-check disagrees with the first check: {again} vs {r}", flush=True)
        print(f"{size:>6} {r['records']:>11} {gen_s:>7.1f} {r['seconds']:>8.1f} {r['records'] / r['seconds']:>10.0f} "
              f"{r['ingest_s']:>8.1f} {r['kernel_s']:>8.1f} {again['seconds']:>10.1f} "
              f"{r['records'] / again['seconds']:>10.0f} {max(r['jvm_peak_rss_mb'], again['jvm_peak_rss_mb']):>10.0f} "
              f"{max(r['py_peak_rss_mb'], again['py_peak_rss_mb']):>9.0f} {r['lost_write']:>5}  "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        if not args.keep:
            shutil.rmtree(rd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
