"""Scale-out is real - a Spark standalone master and worker, same verdict.

Starts ``spark-class org.apache.spark.deploy.master.Master`` and ``...worker.Worker`` from the
pyspark installation on 127.0.0.1 (each in its own process group), runs the checker CLI with
``--spark-master spark://127.0.0.1:PORT`` in a separate driver process, compares its verdict
with the local one, and stops both daemons in a finally.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest

from checkers.job import check_run
from tests.checkers import cases
from tests.checkers.builder import HistoryBuilder

REPO = Path(__file__).resolve().parents[2]
SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
SUBSET = ("lost-read-past", "duplicate-two-offsets", "poll-skip", "clean")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    fh = open(log, "wb")
    return subprocess.Popen([str(SPARK_CLASS), *args], stdout=fh, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


def _stop(p: subprocess.Popen | None) -> None:
    if p is None or p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=10)


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout: float) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        assert proc.poll() is None, f"spark daemon exited early; log:\n{log.read_text(errors='replace')[-3000:]}"
        time.sleep(0.5)
    raise AssertionError(f"'{text}' not in {log} after {timeout}s:\n{log.read_text(errors='replace')[-3000:]}")


def _small_run(root: Path) -> Path:
    b = HistoryBuilder()
    for c in cases.CASES:
        if c.name in SUBSET:
            c.build(b, c.name)
    b.fault("f-kill", "kill", ["broker-1"], 2.5, 3.5)
    b.event("controller", 3.0, "leader_elected", topic="lost-read-past", partition=0, leader=2, leader_epoch=3,
            partition_epoch=5, isr=[2], elr=[], reason="leader_fenced")
    return b.write(root, expect="no-loss")


def _comparable(v: dict) -> dict:
    return {k: val for k, val in v.items() if k != "checker"}


@pytest.mark.timeout(1500)   # three JVMs on a shared 2-core box; normally ~1 min
def test_standalone_cluster_gives_identical_verdict(spark, tmp_path):
    local_dir = _small_run(tmp_path / "local")
    cluster_dir = tmp_path / "cluster"
    shutil.copytree(local_dir, cluster_dir)
    t0 = time.time()

    env = {**os.environ, "SPARK_HOME": str(SPARK_CLASS.parent.parent), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_NO_DAEMONIZE": "1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_WORKER_DIR": str(tmp_path / "work"), "SPARK_LOG_DIR": str(tmp_path / "logs")}
    port, ui, wport, wui = _free_port(), _free_port(), _free_port(), _free_port()
    master = worker = None
    try:
        master = _start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                         "--webui-port", str(ui)], tmp_path / "master.log", env)
        worker = _start(["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
                         "--port", str(wport), "--webui-port", str(wui), "--cores", "2", "--memory", "1536m",
                         "--work-dir", str(tmp_path / "work")], tmp_path / "worker.log", env)
        # the local verdict while the daemons boot (the worker retries until the master is up)
        local = check_run(local_dir, spark=spark)
        print(f"local check done at {time.time() - t0:.1f}s", flush=True)
        _wait_for(tmp_path / "master.log", "I have been elected leader", master, 300)
        _wait_for(tmp_path / "master.log", "Registering worker", master, 300)
        print(f"cluster up at {time.time() - t0:.1f}s", flush=True)
        cli = subprocess.run(
            [sys.executable, "-m", "checkers", str(cluster_dir), "--spark-master", f"spark://127.0.0.1:{port}"],
            cwd=REPO, env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=1200)
        print(f"cluster check done at {time.time() - t0:.1f}s", flush=True)
        assert cli.returncode == 1, f"expected 'not as expected' (a lost write); rc={cli.returncode}\n{cli.stderr[-3000:]}"
        assert (cluster_dir / "verdict.json").exists(), f"no verdict from the cluster check:\n{cli.stderr[-3000:]}"
        remote = json.loads((cluster_dir / "verdict.json").read_text())
        assert remote["checker"]["spark_master"] == f"spark://127.0.0.1:{port}"
        # the cluster really ran the job: the master saw an application from our driver
        assert "Registering app faultline-checker" in (tmp_path / "master.log").read_text(errors="replace")
        assert remote["counts"]["lost_write"] == 1
        assert _comparable(remote) == _comparable(local)
    finally:
        _stop(worker)
        _stop(master)
    assert master.poll() is not None and worker.poll() is not None
