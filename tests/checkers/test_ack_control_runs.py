"""Known-bad control for ``ack_below_min_isr``: a leader that acknowledges acks=all with one copy.

Two real runs on the embedded kraftsim cluster (RF 3, min ISR 2, ``replica.lag.time.max.ms`` 30 s
so the ISR does not shrink during the fault): one producer writes while the partition leader is
cut from both followers for 8 s (``partition`` shape ``between``; every broker still reaches the
controller, so nobody is fenced and the leader's ISR stays [all three]). Real confluent-kafka
clients, the real ``faultline run``, the real Spark checker.

* With ``faultline.control.ack_without_replication=true`` (kraftsim's deliberately broken checker
  control, docs/kraftsim.md) the leader acknowledges during the cut what only it holds. The new
  ``ack_below_min_isr`` flags those acks from the followers' own ``follower_append`` events
  (their logs ended below the offsets), while the leader's ISR view - what the old judgement
  read, and what the leader's ack decision reads - still says 3: judged that way, nothing is
  flagged. Both are asserted, so the test shows the judgement does not lean on the leader.
* Without the control the same run acknowledges the writes of the cut only after it healed and
  the followers fetched them: zero flags.

Needs root and iptables (the ``partition`` nemesis on the loopback addresses): run under the
shared lock, ``flock /tmp/faultline-netlab.lock python3 -m pytest ... tests/checkers/test_ack_control_runs.py``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from checkers import invariants
from checkers.ingest import partition_files
from checkers.job import check_run
from checkers.load import load_run
from checkers.partition import load
from tests.harness.clirun import LOCAL_INV, faultline, force_cleanup, pids_matching, read_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

CAMPAIGN = """\
name: ack-control-{tag}
target:
  inventory: {inventory}
  settings:
    replica.lag.time.max.ms: 30000
    faultline.control.ack_without_replication: {control}
topic: {{name: faultline, partitions: 1, replication_factor: 3, min_insync_replicas: 2}}
workload:
  producers: 1
  consumers: 1
  rate: 50
  duration: 16
  idempotence: true
  drain_timeout: 15
  recovery_timeout: 20
  request_timeout: 25
nemesis:
  schedule: targeted
  steps:
    - wait: 3
    - {{select: "leader-of:0", as: A}}
    - {{start: partition, target: ["@A", all-brokers], as: cut, params: {{shape: between}}}}
    - wait: 8
    - {{stop: cut}}
    - wait: 3
expect: no-loss
"""


def _run(tmp: Path, control: bool) -> Path:
    tag = "on" if control else "off"
    camp = tmp / f"ack-control-{tag}.yaml"
    camp.write_text(CAMPAIGN.format(tag=tag, inventory=LOCAL_INV, control=str(control).lower()))
    state, results = tmp / f"state-{tag}", tmp / f"results-{tag}"
    try:
        r = faultline(["run", str(camp), "--seed", "5", "--results-dir", str(results), "--no-progress",
                       "--no-check"], state, timeout=900)
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
        run_dir = Path([ln for ln in r.stdout.splitlines() if ln.strip()][-1])
        assert pids_matching(str(run_dir)) == []
        return run_dir
    finally:
        force_cleanup(results, state)


def _cut(run_dir: Path) -> tuple[float, float, str]:
    """(start, stop, leader host) of the cut, from the timeline."""
    tl = [e for e in read_jsonl(run_dir / "timeline.jsonl") if e.get("fault") == "partition"]
    start = next(e for e in tl if e["phase"] == "start")
    stop = next(e for e in tl if e["phase"] == "stop")
    return float(start["t"]), float(stop["t"]), start["targets"][0]


def _leader_view(spark, run_dir: Path) -> tuple[int, set[int]]:
    """The old judgement (the leader's own ISR view, as before the replicas' logs were read) of the
    run's partition, and every maximal-ISR size the leader reported."""
    inputs = load_run(spark, run_dir)
    isr, source = invariants.isr_evidence(inputs.events, inputs.observer, inputs.has_cluster_events)
    assert source[("faultline", 0)] == invariants.BY_LEADER_ISR
    (pf,) = [pf for pf in partition_files(inputs.ingest.dataset) if pf.partition == 0]
    p = load(pf.files, pf.topic, pf.partition)
    _, n = invariants.ack_below_min_isr(p, isr[("faultline", 0)], 2)
    sizes = {len(e["maximal_isr"]) for e in inputs.events if e["event"] == "leader_isr"}
    return n, sizes


@pytest.fixture(scope="module")
def control_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ack-control")
    return _run(tmp, True), _run(tmp, False)


def test_one_copy_acks_are_flagged_from_the_followers_logs_not_the_leaders_isr(spark, control_runs):
    run_dir, _ = control_runs
    t0, t1, leader = _cut(run_dir)
    v = check_run(run_dir, spark=spark)
    info = v["checker"]["ack_below_min_isr"]
    assert info["effective_min_isr"] == 2 and info["judged_by"] == {"replica_logs": ["faultline@0"]}
    n = v["counts"]["ack_below_min_isr"]
    assert n > 20, f"the control acknowledged during an 8 s cut, but only {n} acks were flagged"
    rows = json.loads((run_dir / "verdict.json").read_text())["examples"]["ack_below_min_isr"]
    followers = sorted(b for b in (1, 2, 3) if f"broker-{b}" != leader)
    for r in rows:
        assert t0 <= r["ack_t"] <= t1, r                       # acknowledged during the cut
        assert r["judged_by"] == "replica_logs" and r["copies_at_most"] == 1, r
        assert r["replicas_lacking"] == ",".join(map(str, followers)), r
        assert r["isr_at_ack"] == 3, r                         # what the leader said meanwhile
    # the leader's own view never left 3: judged by it, as the family did before, nothing is flagged
    old, sizes = _leader_view(spark, run_dir)
    assert sizes == {3} and old == 0


def test_the_same_run_without_the_control_flags_nothing(spark, control_runs):
    _, run_dir = control_runs
    t0, t1, _ = _cut(run_dir)
    v = check_run(run_dir, spark=spark)
    assert v["checker"]["ack_below_min_isr"]["judged_by"] == {"replica_logs": ["faultline@0"]}
    assert v["counts"]["ack_below_min_isr"] == 0 and v["counts"]["lost_write"] == 0
    # writes were sent during the cut and acknowledged only as it healed: the ones the control
    # acknowledged at once waited here for the followers (the heal removes the rules, then writes
    # its timeline line: 0.5 s covers the iptables calls between)
    sends = [x for x in read_jsonl(run_dir / "history" / "producer-0.jsonl") if x.get("f") == "send"]
    invoked = {x["op"]: x["t"] for x in sends if x["type"] == "invoke"}
    acked = np.array([x["t"] for x in sends if x["type"] == "ok" and t0 + 1 <= invoked[x["op"]] <= t1 - 1])
    assert len(acked) > 20 and (acked > t1 - 0.5).all(), acked
