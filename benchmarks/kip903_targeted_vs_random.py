#!/usr/bin/env python3
"""KIP-903: a targeted nemesis against a random one, on the same vulnerable target.

Why: the race of docs/seeds.md#seed-000 needs four things in order (AlterPartition
in flight, follower wiped, re-registration before the AlterPartition lands, leader death
before the empty follower is shrunk out). A targeted schedule makes them happen every time;
a Jepsen-style random mix of kills, partitions and page-cache-loss reboots rarely does. The
ratio of the two detection rates, per unit of wall time, is the case for targeted nemeses.

Phase 1 runs campaigns through the real CLI, ``faultline run --no-check`` (no Spark per run:
each run's wall time is the fault-injection run alone, the figure the <= 90 s budget is about):
  targeted-off  campaigns/kip-903.yaml, metadata.version 3.4     N runs  -> expect loss every run
  targeted-on   same, metadata.version 4.1 (KIP-903, ELR)       N runs  -> no loss, INELIGIBLE_REPLICA (107)
  random-off    campaigns/kip-903-random.yaml, metadata.version 3.4, looped until its total wall
                time reaches targeted-off's ("for the same total time")
  random-on     optional: the random mix at metadata.version 4.1 (what it finds that is not KIP-903)
  random-overlap-off / -on
                campaigns/kip-903-random-overlap.yaml at 3.4 / 4.1: the race's own faults (hold,
                wipe, page-cache-loss reboot, kills, by role) in a random mix with
                ``nemesis.random.concurrency`` = --concurrency (2): up to that many at once;
                timed like random-off
Phase 2 judges every run with the real checker in ONE SparkSession
(``checkers.job.check_run(run, spark=session)``): lost_write from verdict.json, cross-checked
by the acknowledged values the final drain did not read, and each lost write classified from
verdict.json's ``attribution`` (what removed it; which election preceded that).

    python benchmarks/kip903_targeted_vs_random.py --runs 10 --json /work/notes/kip903-bench.json
    python benchmarks/kip903_targeted_vs_random.py --runs 2 --modes targeted-off,random-off
    python benchmarks/kip903_targeted_vs_random.py --runs 4 --concurrency 2 \
        --modes targeted-off,targeted-on,random-overlap-off,random-overlap-on
    python benchmarks/kip903_targeted_vs_random.py --summarise /work/notes/kip903-bench.json

Figures, not assertions: run it, read it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from workloads.history import acked_missing_from_drain  # noqa: E402  (after the path is set)

BUDGET_S = 90.0  # goal: each fault-injection run at most 90 s
MODES = {
    # the vulnerable and the fixed cluster differ only by metadata.version, as in Kafka
    "targeted-off": ("campaigns/kip-903.yaml", ["--set", "target.metadata.version=3.4", "--set", "expect=loss"]),
    "targeted-on": ("campaigns/kip-903.yaml", ["--set", "target.metadata.version=4.1", "--set", "expect=no-loss"]),
    "random-off": ("campaigns/kip-903-random.yaml", ["--set", "target.metadata.version=3.4"]),
    # the random mix on the fixed cluster: losses it still finds are not KIP-903's
    "random-on": ("campaigns/kip-903-random.yaml", ["--set", "target.metadata.version=4.1"]),
    # the race's own faults, overlapping (nemesis.random.concurrency, set by --concurrency)
    "random-overlap-off": ("campaigns/kip-903-random-overlap.yaml", ["--set", "target.metadata.version=3.4"]),
    "random-overlap-on": ("campaigns/kip-903-random-overlap.yaml", ["--set", "target.metadata.version=4.1"]),
}
# random modes run for the wall time the targeted-off runs took, not for N runs
TIMED = {"random-off": "targeted-off", "random-on": "targeted-off",
         "random-overlap-off": "targeted-off", "random-overlap-on": "targeted-off"}


# --- reading a run directory ---------------------------------------------------------------

def proxy_figures(run_dir: Path) -> dict[str, Any]:
    """INELIGIBLE_REPLICA (107) answers the proxy saw, and whether it held an AlterPartition."""
    pe = run_dir / "proxy-events.jsonl"
    if not pe.exists():
        return {"ineligible_replica": 0, "held": False}
    ev = []
    for line in pe.read_text().splitlines():
        try:
            ev.append(json.loads(line))
        except ValueError:
            pass
    return {"ineligible_replica": sum(1 for e in ev if e.get("event") == "alter_partition" and e.get("error_code") == 107),
            "held": any(e.get("event") == "proxy_hold" for e in ev)}


# --- classifying a lost write from verdict.json's attribution -----------------------------

_EV = re.compile(r"^t=(?P<t>-?[\d.]+) (?P<event>\w+) @(?P<host>[^/ ]*)/(?P<node>\S+)\s*(?P<rest>.*)$")
_KV = re.compile(r"(\w+)=(\[[^\]]*\]|\{[^}]*\}|\S+)")
_FAULT = re.compile(r"^(?P<fault>[\w-]+)\[(?P<targets>[^\]]*)\] \S+ (?P<start>-?[\d.]+)-(?P<stop>\S+)")


def _event(s: str) -> dict[str, Any] | None:
    m = _EV.match(s)
    if not m:
        return None
    d: dict[str, Any] = {"t": float(m["t"]), "event": m["event"], "host": m["host"], "node": m["node"], "raw": s}
    d.update({k: v for k, v in _KV.findall(m["rest"])})
    return d


def _ids(v: str | None) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", v or "")]


def _broker_id(host: str) -> int | None:
    m = re.fullmatch(r"broker-(\d+)", host)
    return int(m.group(1)) if m else None


def _faults_on(a: dict[str, Any], broker: int, before: float) -> list[str]:
    """Fault names that hit ``broker`` and started before ``before``."""
    out = []
    for s in a.get("faults") or []:
        m = _FAULT.match(s)
        if m and float(m["start"]) <= before and broker in [_broker_id(t.strip()) for t in m["targets"].split(",")]:
            out.append(m["fault"])
    return out


def _crash_removal(e: dict[str, Any]) -> bool:
    """A broker's own restart recovery dropped the record (page cache lost in a crash)."""
    return e["event"] == "recovery" or (e["event"] == "truncation" and "reason=recovery" in e["raw"])


def classify(a: dict[str, Any]) -> str:
    """What made one acknowledged write vanish, from its attribution row (topic RF 2).

    The write is gone for good at the first follow-truncation: a broker H that held it cuts
    its log to follow a leader L that lacks it (with two replicas nobody else has it). Why did
    L lack it? L lost it in its own crash *while already leading* (a page-cache-loss reboot of
    the leader that came back fast enough to resume leading before the controller fenced it -
    no election), or L was *elected* after it came back empty (disk wipe) or truncated
    (page-cache-loss reboot). The latter is docs/seeds.md#seed-000's case, and the KIP-903 race proper when
    an AlterPartition accepted after L's re-registration put L back into the ISR (docs/seeds.md#seed-000
    steps 4-6) - what KIP-903's broker epochs reject. Without a follow-truncation, the write
    went in the crash recovery of the replica(s) holding it: with min ISR 1, a leader acking
    alone. (``removed_by`` also lists later recoveries that merely ended below the offset;
    they come after the decisive event and are ignored.)"""
    ack_t = float(a.get("ack_t") or 0.0)
    removals = sorted((e for e in map(_event, a.get("removed_by") or []) if e), key=lambda e: e["t"])
    # the controller's decisions (leader_elected); attribution also lists the winners' became_leader
    elections = sorted((e for e in map(_event, a.get("elections") or []) if e and e["event"] == "leader_elected"),
                       key=lambda e: e["t"])
    isr_events = sorted((e for e in map(_event, (a.get("elections") or []) + (a.get("isr_changes") or []))
                         if e and e["t"] <= ack_t), key=lambda e: e["t"])
    isr = _ids(isr_events[-1].get("isr")) if isr_events else []
    crashes = [e for e in removals if _crash_removal(e) and e["t"] >= ack_t - 2.0]
    follow = [e for e in removals if not _crash_removal(e)]
    if not follow:
        if not crashes:
            return "unattributed (no truncation or recovery removed it)"
        c = next((e for e in crashes if _broker_id(e["host"]) in isr), crashes[0])
        n = _broker_id(c["host"])
        return ("page-cache-loss reboot of the leader acking alone (ISR=[%s])" % n if isr == [n]
                else "page-cache-loss reboot of broker %s (ISR at ack %s)" % (n, isr or "?"))
    cut = follow[0]
    holder = _broker_id(cut["host"])
    before = [e for e in elections if e["t"] <= cut["t"]]
    if before and before[-1].get("reason") == "unclean":
        return "unclean election"
    if before:
        leader = int(before[-1].get("leader", -1))
        el_t = before[-1]["t"]
    else:  # no election since (about) the ack: the leader then is the leader now, and it lost it
        lc = [e for e in crashes if _broker_id(e["host"]) != holder and e["t"] <= cut["t"]]
        if not lc:
            return "unattributed (no election or leader crash before the truncation)"
        leader, el_t = _broker_id(lc[-1]["host"]) or -1, float("-inf")
    crashed = [e["t"] for e in crashes if _broker_id(e["host"]) == leader and e["t"] <= cut["t"]]
    if crashed and crashed[-1] > el_t:
        return (f"page-cache-loss reboot of leader {leader}: it resumed leading with a truncated log "
                f"(no election) and broker {holder} truncated to it")
    faults = _faults_on(a, leader, el_t)
    how = ("came back empty (disk wipe)" if "disk-wipe" in faults
           else "came back truncated (page-cache-loss reboot)" if crashed or "reboot" in faults else None)
    if how is None:
        return f"elected broker {leader} lacked it (lagging; no wipe or page-cache loss on it)"
    # did an accepted AlterPartition add L to the ISR after its latest re-registration?
    regs = [e["t"] for e in map(_event, a.get("broker_events") or [])
            if e and e["event"] == "broker_registered" and int(e.get("broker", -2)) == leader and e["t"] < el_t]
    readded = bool(regs) and any(
        e and regs[-1] < e["t"] < el_t and e.get("accepted") == "true" and leader in _ids(e.get("new_isr"))
        for e in map(_event, a.get("alter_partition") or []))
    if readded:
        return f"KIP-903 race: elected broker {leader} {how}, re-added to the ISR by an AlterPartition"
    return f"elected broker {leader} {how}, still in the ISR (no AlterPartition after its re-registration)"


def is_kip903(cls: str) -> bool:
    return cls.startswith("KIP-903 race")


# --- phase 1: fault-injection runs ----------------------------------------------------------

def one_run(mode: str, seed: int, results: Path, timeout: float, duration: float | None,
            concurrency: int | None = None) -> dict[str, Any]:
    campaign, extra = MODES[mode]
    cmd = ["faultline", "run", str(ROOT / campaign), "--seed", str(seed), "--results-dir", str(results),
           "--no-progress", "--no-check", *extra]
    if concurrency and mode.startswith("random-overlap"):
        cmd += ["--set", f"nemesis.random.concurrency={concurrency}"]
    if duration:
        cmd += ["--set", f"workload.duration={duration:g}"]
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"mode": mode, "seed": seed, "rc": "timeout", "wall_s": round(time.monotonic() - t0, 1),
                "load1": round(load, 1)}
    wall = round(time.monotonic() - t0, 1)
    out = [ln for ln in p.stdout.splitlines() if ln.strip()]
    run_dir = Path(out[-1]) if out and Path(out[-1]).is_dir() else None
    row: dict[str, Any] = {"mode": mode, "seed": seed, "rc": p.returncode, "wall_s": wall, "load1": round(load, 1),
                           "run_dir": str(run_dir) if run_dir else None}
    if p.returncode != 0 or run_dir is None:
        row["error"] = (p.stderr.strip().splitlines() or ["no output"])[-1][:200]
    if run_dir is not None:
        if (run_dir / "run.json").exists():
            row["duration_s"] = json.loads((run_dir / "run.json").read_text()).get("duration_s")
        if (run_dir / "history").is_dir():
            row["acked_missing"] = acked_missing_from_drain(run_dir)
        row.update(proxy_figures(run_dir))
    return row


def run_line(r: dict[str, Any]) -> str:
    s = (f"{r['mode']:12s} seed {r['seed']:<5d} rc {r['rc']!s:7s} wall {r['wall_s']:6.1f}s"
         f"{' (>90 s)' if r['wall_s'] > BUDGET_S else '':8s} load {r.get('load1', 0):4.1f}"
         f"  acked-missing {r.get('acked_missing')!s:5s} 107s {r.get('ineligible_replica', 0):<3d}")
    if "lost" in r:
        s += f" lost_write {r['lost']:<5d} acked {r.get('acked')!s:6s}"
        if r.get("mechanisms"):
            s += "  mechanisms " + ", ".join(f"{m}={n}" for m, n in r["mechanisms"].items())
        if r.get("classes"):
            s += "  " + "; ".join(f"{n}x {c}" for c, n in r["classes"].items())
    if r.get("error"):
        s += f"  error: {r['error']}"
    return s


# --- phase 2: one Spark session judges every run ---------------------------------------------

def check_all(rows: list[dict[str, Any]], log: Path) -> None:
    from checkers.job import check_run
    from checkers.session import make_session
    from harness.check import stderr_to

    todo = [r for r in rows if r.get("run_dir") and Path(r["run_dir"], "history").is_dir()]
    if not todo:
        return
    t0 = time.monotonic()
    # One session judges ~30 runs. Measured (22 Nov): with the defaults the 1 GB driver heap
    # filled with the plans and SQL metrics the status store keeps for 1000 executions, and
    # the 29th check spent its time in full GCs. Keep few executions, drop cached frames
    # between runs, give the driver 2 GB (the machine has 23 GB).
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", " ".join(
        f"--conf {k}={v}" for k, v in (("spark.sql.ui.retainedExecutions", 20), ("spark.ui.retainedJobs", 50),
                                       ("spark.ui.retainedStages", 50), ("spark.ui.retainedTasks", 1000)))
        + " pyspark-shell")
    with stderr_to(log):  # the JVM inherits fd 2: its chatter goes to the log, not the table
        spark = make_session(app_name="kip903-bench", driver_memory="2g")
        try:
            for r in todo:
                c0 = time.monotonic()
                try:
                    v = check_run(r["run_dir"], spark=spark)
                except Exception as e:  # noqa: BLE001 - one bad run must not stop the others
                    # seen once while checkers/ was being rewritten: an AnalysisException
                    # ("ambiguous columns") on the third run of a shared session that a fresh
                    # session did not give; retry once with the session's cache cleared, say so
                    first = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
                    try:
                        spark.catalog.clearCache()
                        v = check_run(r["run_dir"], spark=spark)
                        r["check_retried"] = first
                    except Exception as e2:  # noqa: BLE001
                        r["check_error"] = f"{type(e2).__name__}: {str(e2).splitlines()[0] if str(e2) else ''}"[:200]
                        continue
                c = v.get("counts") or {}
                r.update(lost=int(c.get("lost_write", 0)), inconsistent=int(c.get("inconsistent_offset", 0)),
                         acked=v.get("acked_writes"), valid=v.get("valid"), as_expected=v.get("as_expected"),
                         check_s=round(time.monotonic() - c0, 1))
                r["mechanisms"] = v.get("mechanisms") or {}   # the checker's own loss stories
                classes = Counter(classify(a) for a in v.get("attribution") or [])
                r["classes"] = dict(classes.most_common())
                r["classified"] = sum(classes.values())
                spark.catalog.clearCache()
                print(f"  checked {Path(r['run_dir']).name}: lost_write {r['lost']} in {r['check_s']} s", flush=True)
        finally:
            spark.stop()
    print(f"\nchecked {len(todo)} runs in one SparkSession in {time.monotonic() - t0:.0f} s "
          f"(Spark log: {log})", flush=True)


# --- summary ---------------------------------------------------------------------------------

def lossy(r: dict[str, Any]) -> bool:
    return bool(r.get("lost") or r.get("acked_missing"))


def kip903_lossy(r: dict[str, Any]) -> bool:
    return any(is_kip903(c) for c in r.get("classes") or {})


def summarise(rows: list[dict[str, Any]], modes: list[str]) -> None:
    print(f"\n{'mode':12s} {'runs':>4s} {'loss-runs':>9s} {'KIP-903-runs':>12s} {'lost_write':>10s} "
          f"{'acked-missing':>13s} {'107-runs':>8s} {'wall-max':>8s} {'wall-mean':>9s} {'wall-total':>10s} {'>90s':>4s}")
    per: dict[str, dict[str, Any]] = {}
    for mode in modes:
        rs = [r for r in rows if r["mode"] == mode]
        if not rs:
            continue
        walls = [r["wall_s"] for r in rs]
        judged = [r for r in rs if "lost" in r]
        per[mode] = {"runs": len(rs), "loss": sum(1 for r in rs if lossy(r)),
                     "kip903": sum(1 for r in rs if kip903_lossy(r)), "wall": sum(walls)}
        print(f"{mode:12s} {len(rs):4d} {per[mode]['loss']:5d}/{len(rs):<3d} {per[mode]['kip903']:8d}/{len(rs):<3d} "
              f"{sum(r.get('lost', 0) for r in judged):10d} {sum(r.get('acked_missing') or 0 for r in rs):13d} "
              f"{sum(1 for r in rs if r.get('ineligible_replica')):8d} {max(walls):8.1f} {sum(walls) / len(walls):9.1f} "
              f"{sum(walls):10.0f} {sum(1 for w in walls if w > BUDGET_S):4d}")
        retried = [r for r in rs if r.get("check_retried")]
        if retried:
            print(f"{'':12s} ({len(retried)} check(s) passed on a retry after: {retried[0]['check_retried']})")
        unjudged = [r for r in rs if "lost" not in r]
        if unjudged:
            print(f"{'':12s} ({len(unjudged)} run(s) without a verdict: "
                  + "; ".join(r.get("check_error") or r.get("error") or "?" for r in unjudged)[:300] + ")")
    for mode in modes:
        cls = Counter()
        for r in rows:
            if r["mode"] == mode and r.get("classes"):
                cls.update(r["classes"])
        if cls and mode.startswith("random"):
            runs = Counter(c for r in rows if r["mode"] == mode for c in (r.get("classes") or {}))
            print(f"\n{mode}: lost writes by attribution (runs with it; writes; verdict.json lists <= 100 per run)")
            for c, n in cls.most_common():
                print(f"  {runs[c]:3d} run(s) {n:6d} write(s)  {c}")
    t = per.get("targeted-off")
    for rmode in ("random-off", "random-overlap-off"):
        rnd = per.get(rmode)
        if not (t and rnd):
            continue
        print(f"\ndetection in the same total time ({t['wall']:.0f} s targeted-off, {rnd['wall']:.0f} s {rmode}):")
        for what, key in (("any lost write", "loss"), ("the KIP-903 race", "kip903")):
            rt, rr = t[key] / t["wall"] * 3600, rnd[key] / rnd["wall"] * 3600
            ratio = f"{rt / rr:.1f}x" if rr else f"random found none (ratio > {t[key]}:0)"
            print(f"  {what:16s}: targeted {t[key]}/{t['runs']} runs = {rt:.0f}/h, "
                  f"{rmode} {rnd[key]}/{rnd['runs']} runs = {rr:.0f}/h  -> targeted/random {ratio}")


# --- main ------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10, help="runs of each targeted mode")
    ap.add_argument("--modes", default="targeted-off,targeted-on,random-off")
    ap.add_argument("--results-dir", type=Path, default=Path("/tmp/faultline-kip903-bench"))
    ap.add_argument("--timeout", type=float, default=600, help="per fault-injection run (s)")
    ap.add_argument("--duration", type=float, default=None, help="workload.duration override (s)")
    ap.add_argument("--concurrency", type=int, default=None,
                    help="nemesis.random.concurrency of the random-overlap modes (default: the campaign's, 2)")
    ap.add_argument("--random-budget", type=float, default=None,
                    help="total wall seconds for random modes (default: what targeted-off took)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    ap.add_argument("--check-only", type=Path, default=None,
                    help="skip the runs: judge the rows saved with --json (phase 2 only) and summarise")
    ap.add_argument("--summarise", type=Path, nargs="*", default=None,
                    help="only print the summary of rows saved with --json (several files merge)")
    a = ap.parse_args()
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    if a.summarise:
        rows = [r for f in a.summarise for r in json.loads(f.read_text())]
        for r in rows:  # classify again from verdict.json (the classifier may have changed since)
            v = Path(r.get("run_dir") or "/nonexistent", "verdict.json")
            if "lost" in r and v.exists():
                classes = Counter(classify(x) for x in json.loads(v.read_text()).get("attribution") or [])
                r["classes"], r["classified"] = dict(classes.most_common()), sum(classes.values())
            print(run_line(r))
        if a.json:
            a.json.write_text(json.dumps(rows, indent=1))
        summarise(rows, [m for m in MODES if any(r["mode"] == m for r in rows)])
        return 0
    bad = [m for m in modes if m not in MODES]
    if bad:
        print(f"--modes: unknown {', '.join(bad)}; want some of {', '.join(MODES)}", file=sys.stderr)
        return 2
    # a private heal ledger: the benchmark never heals (or is healed by) anyone else's faults
    os.environ.setdefault("FAULTLINE_STATE_DIR", str(a.results_dir / "state"))
    a.results_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []

    def save() -> None:
        if a.json:
            a.json.write_text(json.dumps(rows, indent=1))

    if a.check_only:
        rows = json.loads(a.check_only.read_text())
        modes = [m for m in MODES if any(r["mode"] == m for r in rows)]
        for r in rows:
            print(run_line(r), flush=True)
    for mode in ([] if a.check_only else modes):
        budget = None
        if mode in TIMED:
            budget = a.random_budget or sum(r["wall_s"] for r in rows if r["mode"] == TIMED[mode]) or None
        spent, i = 0.0, 0
        while (i < a.runs) if budget is None else (spent < budget or i == 0):
            row = one_run(mode, 1000 + i, a.results_dir / mode, a.timeout, a.duration, a.concurrency)
            rows.append(row)
            spent += row["wall_s"]
            i += 1
            print(run_line(row), flush=True)
            save()
        if budget is not None:
            print(f"{mode}: {i} runs in {spent:.0f} s (budget {budget:.0f} s)", flush=True)
    check_all(rows, a.results_dir / "checker.log")
    print()
    for r in rows:
        print(run_line(r))
    save()
    summarise(rows, modes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
