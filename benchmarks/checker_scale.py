"""Checker scale benchmark: 1M / 10M / 50M-record histories - the wait for the verdict after
the last record is written, beside a first check from scratch (and the old checker's).

Why: nightly runs record tens of millions of operations, and the user waits for the verdict
after the last fault heals. Goals on a 2-core machine: the wait after the last record >= 2M
history records/s at 10M, the whole first check from scratch >= 1M records/s at 10M, and a
flat driver memory from 10M to 50M (evidence and aggregates only reach the driver, never the
history). Figures are printed, never asserted (timing goals live here, not in unit tests).

An "op" here is one history record (a send invoke, a send completion, one message read by a
consumer or by the drain); every acknowledged message therefore costs four records. A few
lost writes are injected (removed from every read) so attribution runs too.

    python benchmarks/checker_scale.py --sizes 1M,10M,50M [--rate 250000] [--baseline REV]

Per size, one generated history, three checks, each in a process of its own (its own Spark
session and peak RSS: the Python driver's ru_maxrss, the driver JVM's VmHWM):

- ``followed``: what ``faultline run`` does now. A writer process (the workload) writes the
  producers' and the consumer's files side by side, flushed every 0.2 s like
  workloads/history.py, then the drain's file, at ``--rate`` records/s; meanwhile the harness
  process follows the history (checkers/follow.py) and starts Spark (checkers/session.py),
  exactly as harness/check.py CheckPrep does in a run. ``wait_s`` is from the writer's exit
  (the last record written) to the verdict: the last conversion round and the analysis.
  ``tail_mb``: what was left to convert then.
- ``scratch``: ``faultline check RUN`` on a run never followed (an old run): the whole first
  check, from the call (Spark not started yet: it starts while the driver converts) to the
  verdict. ``first_s``.
- ``old``: the same first check by the checker of ``--baseline REV`` (``git archive`` of its
  checkers/ and workloads/ into a temporary directory), when given.

The followed and the scratch verdicts must be identical (lost values included); the old
checker's counts must match. ``--spark-master spark://HOST:PORT`` runs all three on a cluster.

Why ``--rate``: the workload writes as it runs; a writer faster than the conversion on a
shared 2-core box (this generator alone writes about 0.7M records/s, far above any real
workload's rate) would leave a tail that says nothing about a run. 250k records/s is still a
10M-record run in 40 s.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from checkers import ingest  # noqa: E402

PARTITIONS = 8
PRODUCERS = 4
LOST_EVERY = 1_000_003     # inject one lost write roughly every million messages (at least one)
FLUSH_S = 0.2              # workloads/history.py FLUSH_INTERVAL_S
BUF = 1 << 16              # workloads/history.py JsonlWriter's buffer


def parse_size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1_000, "M": 1_000_000}.get(s[-1], 1)
    return int(float(s[:-1] if s[-1] in "KM" else s) * mult)


def _lost(m: int, messages: int) -> bool:
    return m % LOST_EVERY == LOST_EVERY // 2 or m == messages // 2


class _Pace:
    """Sleep to keep ``rate`` records/s (None: as fast as possible); flush every FLUSH_S."""

    def __init__(self, rate: float | None, files: list):
        self.rate, self.files, self.t0, self.flushed = rate, files, time.monotonic(), time.monotonic()

    def tick(self, m: int, written: int) -> None:
        if m % 4096:
            return
        now = time.monotonic()
        if now - self.flushed >= FLUSH_S:
            for fh in self.files:
                fh.flush()
            self.flushed = now
        if self.rate:
            ahead = written / self.rate - (now - self.t0)
            if ahead > 0:
                time.sleep(ahead)


def _messages(messages: int):
    """(index, producer, partition, offset, value) of every message, in send order."""
    offsets = [0] * PARTITIONS
    seq = [0] * PRODUCERS
    for m in range(messages):
        p = m % PRODUCERS
        part = (m // PRODUCERS) % PARTITIONS
        offsets[part] += 1
        seq[p] += 1
        yield m, p, part, offsets[part] - 1, f"producer-{p}-{seq[p] - 1}"


def generate(run_dir: Path, records: int, rate: float | None = None) -> tuple[int, float]:
    """Write a valid history of about ``records`` records, the drain's file after the others
    (as a run writes them); return (records written, seconds)."""
    t0 = time.time()
    messages = max(1, records // 4)
    hist = run_dir / "history"
    hist.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps({"run_id": run_dir.name, "expect": "loss", "wall_at_t0": 0.0,
                                                  "switches": {}}))
    prod = [open(hist / f"producer-{i}.jsonl", "w", buffering=BUF) for i in range(PRODUCERS)]
    cons = open(hist / "consumer-0.jsonl", "w", buffering=BUF)
    pace = _Pace(rate, [*prod, cons])
    ends = [0] * PARTITIONS
    cop = 0
    written = 0
    for m, p, part, off, val in _messages(messages):
        t = m * 0.0001
        proc, op = f"producer-{p}", m // PRODUCERS + 1
        ends[part] = off + 1
        prod[p].write(f'{{"v":1,"t":{t:.6f},"process":"{proc}","op":{op},"type":"invoke","f":"send","topic":"bench",'
                      f'"partition":{part},"offset":null,"value":"{val}","error":null,"error_code":null}}\n'
                      f'{{"v":1,"t":{t + 0.002:.6f},"process":"{proc}","op":{op},"type":"ok","f":"send","topic":"bench",'
                      f'"partition":{part},"offset":{off},"value":"{val}","error":null,"error_code":null}}\n')
        written += 2
        if not _lost(m, messages):
            if m % 16 == 0:
                cop += 1
            cons.write(f'{{"v":1,"t":{t + 0.01:.6f},"process":"consumer-0","op":{cop},"type":"ok","f":"poll",'
                       f'"topic":"bench","partition":{part},"offset":{off},"value":"{val}","error":null,'
                       f'"error_code":null}}\n')
            written += 1
        pace.tick(m, written)
    for fh in (*prod, cons):
        fh.close()
    drain = open(hist / "drain.jsonl", "w", buffering=BUF)
    pace.files = [drain]
    end = messages * 0.0001
    for m, p, part, off, val in _messages(messages):   # the drain reads every partition after the clients stopped
        if not _lost(m, messages):
            drain.write(f'{{"v":1,"t":{end + 5 + part:.6f},"process":"drain","op":{part + 1},"type":"ok",'
                        f'"f":"drain","topic":"bench","partition":{part},"offset":{off},"value":"{val}","error":null,'
                        f'"error_code":null}}\n')
            written += 1
        pace.tick(m, written)
    for part in range(PARTITIONS):
        drain.write(f'{{"v":1,"t":{end + 6 + part:.6f},"process":"drain","op":{PARTITIONS + part + 1},'
                    f'"type":"ok","f":"drain-end","topic":"bench","partition":{part},"offset":{ends[part]},'
                    f'"value":null,"error":null,"error_code":null}}\n')
        written += 1
    drain.close()
    return written, time.time() - t0


def jvm_hwm_mb() -> float:
    """Peak RSS of this process's driver JVM (pyspark's gateway outlives a stopped session)."""
    from pyspark import SparkContext
    if SparkContext._gateway is None:
        return -1
    pid = SparkContext._gateway.jvm.java.lang.ProcessHandle.current().pid()
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return -1


def _figures(v: dict, seconds: float) -> dict:
    ch = v.get("checker") or {}
    return {"seconds": seconds, "kernel_s": float((ch.get("kernel") or {}).get("seconds") or 0.0),
            "ingest": ch.get("ingest") or {}, "records": v["history_records"], "lost_write": v["counts"]["lost_write"],
            "acked": v["acked_writes"], "jvm_peak_rss_mb": jvm_hwm_mb(),
            "py_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "comparable": {k: val for k, val in v.items() if k != "checker"}}


def check_scratch(run_dir: Path, master: str | None) -> dict:
    """``faultline check RUN`` on a run never followed: from the call, Spark not yet started."""
    from checkers.job import check_run
    for d in (ingest.DATASET, ingest.OLD_DATASET):   # a baseline checker may write the old one
        shutil.rmtree(run_dir / d, ignore_errors=True)
    t0 = time.time()
    v = check_run(run_dir, spark_master=master)
    return _figures(v, time.time() - t0)


def check_followed(run_dir: Path, records: int, rate: float | None, master: str | None) -> dict:
    """The harness's way: follow the history and start Spark while a writer process writes it."""
    from harness.check import CheckPrep, check_and_report
    shutil.rmtree(run_dir, ignore_errors=True)
    (run_dir / "history").mkdir(parents=True)
    prep = CheckPrep(run_dir, spark=True, spark_master=master).start()
    try:
        cmd = [sys.executable, __file__, "--generate", str(run_dir), "--records", str(records)]
        if rate:
            cmd += ["--rate", str(rate)]
        gen = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        last_record = time.time()
        if gen.returncode != 0:
            raise RuntimeError(f"generator failed: {gen.stderr.strip().splitlines()[-1:]}")
        written, gen_s = json.loads(gen.stdout.strip().splitlines()[-1])
        prep.writers_done()
        checked = check_and_report(run_dir, prep=prep, report=False)
        wait = time.time() - last_record
        if checked.verdict is None:
            raise RuntimeError(checked.message)
        out = _figures(checked.verdict, wait)
        out.update({"gen_s": gen_s, "written": written, "notes": prep.take_notes(),
                    "tail_bytes": (prep.tail_bytes or 0) + int(out["ingest"].get("bytes") or 0),
                    "spark_ready_s": prep.warmup.ready_s if prep.warmup else None})
        return out
    finally:
        prep.close()


def check_old(run_dir: Path, tree: Path, master: str | None) -> dict:
    """The first check by the checker exported from ``--baseline`` (its check_run, cold)."""
    for d in (ingest.DATASET, ingest.OLD_DATASET):   # a baseline checker may write the old one
        shutil.rmtree(run_dir / d, ignore_errors=True)
    code = ("import json, resource, sys, time\n"
            "from checkers.job import check_run\n"
            "t0 = time.time(); v = check_run(sys.argv[1], spark_master=sys.argv[2] or None); dt = time.time() - t0\n"
            "print('RESULT ' + json.dumps({'seconds': dt, 'records': v['history_records'],"
            " 'lost_write': v['counts']['lost_write'], 'acked': v['acked_writes'],"
            " 'py_peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,"
            " 'ingest': v['checker']['ingest'], 'kernel_s': v['checker']['kernel']['seconds']}))\n")
    p = subprocess.run([sys.executable, "-c", code, str(run_dir), master or ""], capture_output=True, text=True,
                       cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)})
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"old check failed rc={p.returncode}: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(line[7:])


def in_process(args: list[str]) -> dict | None:
    """One mode in a fresh process; None on failure (printed)."""
    p = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, cwd=REPO)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        print(f"{' '.join(args[:2])}: failed rc={p.returncode}: {p.stderr.strip().splitlines()[-3:]}", file=sys.stderr)
        return None
    return json.loads(line[7:])


def export_tree(rev: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    arch = subprocess.run(["git", "archive", rev, "checkers", "workloads"], cwd=REPO, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=arch.stdout, check=True)
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1M,10M,50M", help="comma-separated record counts, e.g. 1M,10M,50M")
    ap.add_argument("--dir", default="/tmp/checker-bench")
    ap.add_argument("--rate", type=float, default=250_000, help="records/s the writer keeps (0: as fast as it can)")
    ap.add_argument("--spark-master", default=None)
    ap.add_argument("--baseline", default=None, help="a git revision whose checker to time beside (e.g. main)")
    ap.add_argument("--keep", action="store_true", help="keep the generated histories")
    # internal modes, each run in a process of its own
    ap.add_argument("--generate", help=argparse.SUPPRESS)
    ap.add_argument("--records", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--follow", help=argparse.SUPPRESS)
    ap.add_argument("--scratch", help=argparse.SUPPRESS)
    args = ap.parse_args()
    master = args.spark_master
    if args.generate:
        print(json.dumps(generate(Path(args.generate), args.records, args.rate or None)), flush=True)
        return 0
    if args.follow:
        print("RESULT " + json.dumps(check_followed(Path(args.follow), args.records, args.rate or None, master)), flush=True)
        return 0
    if args.scratch:
        print("RESULT " + json.dumps(check_scratch(Path(args.scratch), master)), flush=True)
        return 0
    old_tree = export_tree(args.baseline, Path(tempfile.mkdtemp(prefix="checker-old-"))) if args.baseline else None
    m_opt = ["--spark-master", master] if master else []
    print(f"master {master or 'local[2]'}, writer rate {args.rate or 'unpaced'} records/s, cores {os.cpu_count()}"
          + (f", old checker: {args.baseline}" if args.baseline else ""), flush=True)
    print(f"{'size':>5} {'records':>10} {'gen_s':>6} {'wait_s':>6} {'wait/s':>10} {'tail_mb':>7} {'first_s':>7} "
          f"{'first/s':>10} {'old_s':>6} {'old/s':>10} {'kernel_s':>8} {'jvm_mb':>11} {'py_mb':>11} {'lost':>4} "
          f"{'same':>4}  load(1,5 min)", flush=True)
    try:
        for size in args.sizes.split(","):
            n = parse_size(size)
            rd = Path(args.dir) / f"bench-{size.strip()}"
            fol = in_process(["--follow", str(rd), "--records", str(n), "--rate", str(args.rate), *m_opt])
            if fol is None:
                continue
            scr = in_process(["--scratch", str(rd), *m_opt])
            old = check_old(rd, old_tree, master) if old_tree else None
            same = scr is not None and scr["comparable"] == fol["comparable"] and (
                old is None or (old["lost_write"], old["acked"], old["records"]) == (fol["lost_write"], fol["acked"], fol["records"]))
            recs = fol["records"]
            tail = fol["tail_bytes"] / 1e6
            first = scr["seconds"] if scr else float("nan")
            olds = old["seconds"] if old else float("nan")
            la = os.getloadavg()
            print(f"{size:>5} {recs:>10} {fol['gen_s']:>6.1f} {fol['seconds']:>6.1f} {recs / fol['seconds']:>10,.0f} "
                  f"{tail:>7.1f} {first:>7.1f} {recs / first:>10,.0f} {olds:>6.1f} {recs / olds:>10,.0f} "
                  f"{fol['kernel_s']:>4.1f}/{(scr or {}).get('kernel_s', 0):>3.1f} "
                  f"{fol['jvm_peak_rss_mb']:>5.0f}/{(scr or {}).get('jvm_peak_rss_mb', -1):>5.0f} "
                  f"{fol['py_peak_rss_mb']:>5.0f}/{(scr or {}).get('py_peak_rss_mb', -1):>5.0f} "
                  f"{fol['lost_write']:>4} {'yes' if same else 'NO':>4}  {la[0]:.1f},{la[1]:.1f}"
                  + (f"  notes: {fol['notes']}" if fol.get("notes") else ""), flush=True)
            if not args.keep:
                shutil.rmtree(rd, ignore_errors=True)
    finally:
        if old_tree:
            shutil.rmtree(old_tree, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
