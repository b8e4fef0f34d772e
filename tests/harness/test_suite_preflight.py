"""``faultline suite`` runs preflight first, and keeps its results directory to a size.

A suite whose cells use a lab that cannot run stops before its first cell: exit 3, the
preflight table and the problem on stderr, no suite directory. A suite on the embedded target
(preflight checks this machine) runs, forwards ``--wait`` to its cells' runs, and with
``--keep-last N`` deletes the oldest run and suite directories beside it, never itself.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.harness.clirun import REPO, cli
from tests.harness.test_prune import DAY, age, make_suite
from tests.report.runs import WALL0, make_clean_run

CAMPAIGN = """
name: tiny
target: {inventory: %s}
topic: {name: faultline, partitions: 1, replication_factor: 3, min_insync_replicas: 2}
workload: {producers: 1, consumers: 0, rate: 50, duration: 5, drain_timeout: 10, recovery_timeout: 10}
nemesis:
  schedule: targeted
  steps:
    - wait: 1
    - {start: kill, target: random-broker, as: k, duration: 2}
expect: no-loss
"""


def suite(args: list[str], tmp: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(cli() + ["suite", *args, "--no-progress"], cwd=tmp, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "FAULTLINE_STATE_DIR": str(tmp / "state")})


def test_a_lab_that_fails_preflight_stops_the_suite_before_its_first_cell(tmp_path: Path):
    lab = tmp_path / "lab.yaml"
    lab.write_text(yaml.safe_dump({"all": {"vars": {"faultline_transport": "local"}, "children": {"brokers": {"hosts": {
        f"broker-{i}": {"kafka_node_id": i, "faultline_netns": f"fl-suite-none-{i}",
                        "kafka_listeners": f"PLAINTEXT://10.250.9.{i}:9092",
                        "kafka_service": {"command": "sleep 1", "pidfile": f"/tmp/fl-suite-none-{i}.pid"}}
        for i in (1, 2, 3)}}}}}))
    (tmp_path / "tiny.yaml").write_text(CAMPAIGN % lab)
    (tmp_path / "suite.yaml").write_text("name: on-a-lab\ncells:\n  - {name: one, campaign: tiny.yaml, expect: no-loss}\n")
    p = suite([str(tmp_path / "suite.yaml"), "--results-dir", str(tmp_path / "results")], tmp_path, timeout=300)
    assert p.returncode == 3, p.stderr
    fails = [ln for ln in p.stderr.splitlines() if ln.startswith("FAIL ")]
    assert fails == [f"FAIL broker-{i} reach: network namespace fl-suite-none-{i} does not exist; fix: check that the "
                     "host is up and answers over the inventory's transport (ansible_host/ansible_port/ansible_user, "
                     "the key, faultline_container)" for i in (1, 2, 3)], p.stderr
    assert "┃host" in p.stderr                                   # the table
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("faultline: error: preflight: 3 problem(s) stop a run on ") and \
        "broker-1 reach, broker-2 reach, broker-3 reach" in last and "before its first cell" in last, last
    assert not (tmp_path / "results").exists()


def test_keep_last_must_keep_the_suite_itself(tmp_path: Path):
    (tmp_path / "tiny.yaml").write_text(CAMPAIGN % (REPO / "inventory" / "local.yaml"))
    (tmp_path / "suite.yaml").write_text("cells:\n  - {name: one, campaign: tiny.yaml, expect: no-loss}\n")
    p = suite([str(tmp_path / "suite.yaml"), "--keep-last", "0"], tmp_path, timeout=120)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "faultline: error: --keep-last: want at least 1 (the suite itself is kept), got 0"]


@pytest.mark.slow
def test_embedded_suite_preflights_waits_and_keeps_its_results_dir_to_size(tmp_path: Path):
    results = tmp_path / "results"
    for i in range(3):
        make_suite(results, f"suite-old-{i}", WALL0 + i * DAY)
        make_clean_run(results, run_id=f"run-old-{i}", wall0=WALL0 + i * DAY)
    for d in results.iterdir():
        age(d)
    (tmp_path / "tiny.yaml").write_text(CAMPAIGN % (REPO / "inventory" / "local.yaml"))
    (tmp_path / "suite.yaml").write_text("name: tiny-keep\ncells:\n  - {name: one, campaign: tiny.yaml, seeds: 1, expect: no-loss}\n")
    p = suite([str(tmp_path / "suite.yaml"), "--results-dir", str(results), "--keep-last", "2", "--wait"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    suite_dir = Path(p.stdout.strip().splitlines()[-1])
    assert f"preflight: a run on {REPO / 'inventory' / 'local.yaml'} can work" in p.stderr
    started = [json.loads(ln) for ln in (suite_dir / "suite-log.jsonl").read_text().splitlines() if '"cell_started"' in ln]
    assert started and "--wait" in started[0]["command"]
    # this suite and the newest older one stay; the two oldest suites and one old run go
    kept = sorted(d.name for d in results.iterdir() if not d.is_symlink())
    assert kept == sorted([suite_dir.name, "suite-old-2", "run-old-1", "run-old-2"]), kept
    assert (results / "latest-suite").resolve() == suite_dir.resolve()  # the link follows the newest, never pruned
    assert "retention: removed suite suite-old-0 (" in p.stderr and "retention: removed run run-old-0 (" in p.stderr
    assert "retention: kept the newest 2 of each kind" in p.stderr
