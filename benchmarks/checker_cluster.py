"""The checker on a Spark standalone cluster beside local[2]: same verdict.json, and the times.

Why: the checker promises Spark so that histories can outgrow one machine. Here a master and
``--workers`` workers are started with Spark's own daemon script from the installed pyspark
(``sbin/spark-daemon.sh``; pip's pyspark ships it, but not the ``start-master.sh`` /
``start-worker.sh`` wrappers around it), a history of ``--records`` records is generated, and
it is checked from scratch twice, each in a fresh driver process: with ``local[2]`` and with
``--spark-master spark://127.0.0.1:PORT`` (the conversion's splits and the partition kernel
then run as tasks on the workers' executors, which get the checker's code as a zip shipped by
the driver - checkers/session.py ``ship_code`` - and nothing on their PYTHONPATH). Both
verdict.json files (less the checker's own section) and every evidence table must be
identical. The daemons are stopped with the same script at the end, whatever happened.

    python benchmarks/checker_cluster.py [--records 10M] [--workers 2] [--cores 1] [--memory 2g]

On this 2-core machine two workers share the cores the local run has to itself, so the
figure shows the job scaling out unchanged, not a speed-up; the cluster pays for its
executors' start and for task scheduling over the network stack.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyspark

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from checker_scale import generate, parse_size  # noqa: E402

from checkers import ingest  # noqa: E402

SPARK_HOME = Path(pyspark.__file__).parent
DAEMON = SPARK_HOME / "sbin" / "spark-daemon.sh"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def daemon(env: dict[str, str], *args: str) -> None:
    subprocess.run(["bash", str(DAEMON), *args], env=env, check=True, capture_output=True, cwd=env["SPARK_WORKER_DIR"])


def wait_log(logs: Path, pattern: str, text: str, count: int, timeout: float) -> None:
    end = time.time() + timeout
    while time.time() < end:
        n = sum(p.read_text(errors="replace").count(text) for p in logs.glob(pattern))
        if n >= count:
            return
        time.sleep(0.5)
    raise RuntimeError(f"'{text}' x{count} not in {logs}/{pattern} within {timeout:g}s")


def check(run_dir: Path, master: str) -> dict:
    """A first check from scratch in a fresh driver process (its own JVM)."""
    for d in (ingest.DATASET, ingest.OLD_DATASET):   # a baseline checker may write the old one
        shutil.rmtree(run_dir / d, ignore_errors=True)
    code = ("import json, sys, time\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "from checkers.job import check_run\n"
            "t0 = time.time(); v = check_run(sys.argv[1], spark_master=sys.argv[2]); dt = time.time() - t0\n"
            "from checkers.session import make_session\n"   # after the timing: where the executors' checkers came from
            "s = make_session(sys.argv[2])\n"
            "where = sorted(set(s.sparkContext.parallelize(range(4), 4).map(lambda _: __import__('checkers').__file__).collect()))\n"
            "s.stop()\n"
            "print('RESULT ' + json.dumps({'seconds': dt, 'checker': v['checker'], 'checkers_from': where}))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, "-c", code, str(run_dir), master], capture_output=True, text=True,
                       cwd=tempfile.gettempdir(), env={**env, "PYSPARK_PYTHON": sys.executable})
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        errs = [ln for ln in p.stderr.splitlines() if " WARN " not in ln and "log4j" not in ln and "setLogLevel" not in ln]
        raise RuntimeError(f"check with {master} failed rc={p.returncode}:\n" + "\n".join(errs[-15:]))
    out = json.loads(line[7:])
    out["verdict"] = json.loads((run_dir / "verdict.json").read_text())
    out["tables"] = {f"{d}/{f.name}": f.read_text() for d in ("anomalies", "aggregates")
                     for f in sorted((run_dir / d).glob("*.csv"))}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", default="10M")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cores", type=int, default=1, help="cores per worker")
    ap.add_argument("--memory", default="2g", help="memory per worker")
    ap.add_argument("--dir", default="/tmp/checker-cluster-bench")
    args = ap.parse_args()
    n = parse_size(args.records)
    tmp = Path(tempfile.mkdtemp(prefix="faultline-spark-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"SPARK_HOME": str(SPARK_HOME), "SPARK_LOG_DIR": str(tmp / "logs"), "SPARK_PID_DIR": str(tmp / "pids"),
                "SPARK_WORKER_DIR": str(tmp / "work"), "SPARK_IDENT_STRING": "faultline-bench",
                "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable})
    (tmp / "work").mkdir(parents=True)
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    started: list[tuple[str, int]] = []
    rd = Path(args.dir) / f"bench-{args.records}"
    try:
        t0 = time.time()
        daemon(env, "start", MASTER_CLASS, "1", "--host", "127.0.0.1", "--port", str(port),
               "--webui-port", str(free_port()))
        started.append((MASTER_CLASS, 1))
        for i in range(1, args.workers + 1):
            daemon(env, "start", WORKER_CLASS, str(i), url, "--host", "127.0.0.1", "--cores", str(args.cores),
                   "--memory", args.memory, "--port", str(free_port()), "--webui-port", str(free_port()),
                   "--work-dir", str(tmp / "work"))
            started.append((WORKER_CLASS, i))
        logs = tmp / "logs"
        wait_log(logs, f"*{MASTER_CLASS}*", "Registering worker", args.workers, 600)
        print(f"master {url} and {args.workers} workers ({args.cores} core(s), {args.memory} each) up in "
              f"{time.time() - t0:.1f}s (sbin/spark-daemon.sh from {SPARK_HOME})", flush=True)
        shutil.rmtree(rd, ignore_errors=True)
        written, gen_s = generate(rd, n)
        print(f"history: {written:,} records, {sum(p.stat().st_size for p in (rd / 'history').glob('*')) / 1e9:.2f} GB",
              flush=True)
        os.environ["FAULTLINE_CORES_MAX"] = str(args.workers * args.cores)
        load = [os.getloadavg()[:2]]
        local = check(rd, "local[2]")
        load.append(os.getloadavg()[:2])
        cluster = check(rd, url)
        load.append(os.getloadavg()[:2])
        master_log = "".join(p.read_text(errors="replace") for p in logs.glob(f"*{MASTER_CLASS}*"))
        executors = sum(p.read_text(errors="replace").count("Asked to launch executor")
                        for p in logs.glob(f"*{WORKER_CLASS}*"))
        same_verdict = ({k: v for k, v in local["verdict"].items() if k != "checker"}
                        == {k: v for k, v in cluster["verdict"].items() if k != "checker"})
        same_tables = local["tables"] == cluster["tables"]
        print(f"{'master':<28} {'check_s':>8} {'records/s':>10} {'ingest_s':>8} {'kernel_s':>8}")
        for name, r in (("local[2]", local), (url, cluster)):
            ch = r["checker"]
            print(f"{name:<28} {r['seconds']:>8.1f} {written / r['seconds']:>10,.0f} {ch['ingest']['seconds']:>8.1f} "
                  f"{ch['kernel']['seconds']:>8.1f}")
        print(f"verdict.json (less 'checker') identical: {'yes' if same_verdict else 'NO'}; evidence and aggregate "
              f"tables identical: {'yes' if same_tables else 'NO'}; lost_write {cluster['verdict']['counts']['lost_write']}; "
              f"the cluster's verdict names {cluster['checker']['spark_master']}; app registered with the master: "
              f"{'yes' if 'Registering app' in master_log else 'NO'}; executors launched by the workers: {executors}; "
              f"the executors imported checkers from {cluster['checkers_from']}")
        print("load (1, 5 min) before/between/after: " + "  ".join(f"{a:.1f},{b:.1f}" for a, b in load))
        return 0 if same_verdict and same_tables else 1
    finally:
        for cls, i in reversed(started):
            try:
                daemon(env, "stop", cls, str(i))
            except subprocess.CalledProcessError as e:
                print(f"stopping {cls} {i}: {e.stderr.decode(errors='replace').strip()}", file=sys.stderr)
        shutil.rmtree(rd, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
