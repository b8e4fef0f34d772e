"""campaigns/suites/seeds.yaml on the embedded cluster: every cell meets its expectation, and
the known-bad controls really lose acknowledged writes.

Why this is the test that matters: the fixed cells' "no loss" means something only while the
vulnerable cells of the same scenarios lose data - here KIP-903 at metadata.version 3.4
(docs/seeds.md#seed-000); the nightly run of the whole file adds Last Replica Standing before ELR
(docs/seeds.md#seed-003-2-4) and unclean election enabled (docs/seeds.md#seed-001, KIP-704, a loss
the configuration allows), whose CI coverage is named at ``CELLS``. It runs the real suite
command: real kraftsim clusters, iptables partitions, librdkafka producers, one Spark session
judging every run.

docs/seeds.md#seed-000 runs through a real controller failover (``controller-failover``): the held
AlterPartition is answered by a *new* active controller, elected by the Raft quorum after the
one it was sent to was killed. For that pair the test reads the proxy's and the controllers'
own events: the answer came from another controller than the one the request was held for,
that controller was elected between hold and release, and it accepted the stale request at
3.4 but rejected it at 4.1: INVALID_UPDATE_VERSION (95) when the wiped replica's directory
assignment (KIP-858) moved the partition epoch first, as on real Kafka 4.1.0, else
INELIGIBLE_REPLICA (107, KIP-903). Every cell runs three controllers.

"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VULNERABLE = ("controller-failover/vulnerable-3.4",)
#: the pair CI runs (``--cell``): the held AlterPartition answered by a newly elected controller
#: (docs/seeds.md#seed-000), whose assertions read the runs' own events. The other pairs are each
#: the subject of faster tests of their own: the draft leader choice (docs/seeds.md#seed-004) in
#: tests/kraftsim/conformance/test_election_local_log_preference.py and KIP-1023's re-bootstrap
#: from the last tiered offset in tests/kraftsim/conformance/test_tiered_storage.py; Last Replica Standing lost at ELR 0 and kept at ELR 1 on
#: a real kraftsim cluster (tests/kraftsim/test_last_replica_standing.py) and its story
#: (tests/checkers/test_stories.py); unclean election losing writes through ``faultline run`` and
#: the same schedule losing none with it disabled (tests/harness/test_shrink_e2e.py,
#: tests/kraftsim/test_fencing_unclean.py). The single cells: controller isolation
#: (tests/kraftsim/conformance/test_broker_no_self_fencing.py), min ISR under load
#: (tests/kraftsim/conformance/test_partition_acks_below_min_isr_cluster.py) and a seeded random
#: mix of every nemesis judged no-loss (tests/nemeses/test_controller_faults.py, chaos-controllers).
#: The whole file runs nightly (README).
CELLS = ["--cell", "controller-failover/*"]


def _cluster_events(run_dir: Path) -> list[dict]:
    return sorted((e for f in (run_dir / "cluster").glob("*/events.jsonl") for e in _jsonl(f)),
                  key=lambda e: e["wall"])


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def _controller_addresses(run_dir: Path) -> dict[int, str]:
    """node id -> HOST:PORT of each controller, from the run's own inventory."""
    import yaml
    inv = yaml.safe_load((run_dir / "inventory.yaml").read_text())
    hosts = inv["all"]["children"]["controllers"]["hosts"]
    return {h["kafka_node_id"]: h["kafka_listeners"].split("://", 1)[1] for h in hosts.values()}


def _failover_answer(run_dir: Path) -> tuple[dict, dict, dict]:
    """(the hold, the controller_elected between hold and release, the answer to the released
    request from the controller that was active then)."""
    proxy = _jsonl(run_dir / "proxy-events.jsonl")
    hold = next(e for e in proxy if e["event"] == "proxy_hold")
    release = next(e for e in proxy if e["event"] == "proxy_release" and e["hold_id"] == hold["hold_id"])
    answer = next(e for e in proxy if e["event"] == "alter_partition" and e["wall"] > release["wall"]
                  and e["new_isr"] == hold["new_isr"] and e["error"] != "NOT_CONTROLLER")
    elected = [e for e in _cluster_events(run_dir)
               if e["event"] == "controller_elected" and hold["wall"] < e["wall"] < release["wall"]]
    assert elected, "no controller was elected while the AlterPartition was held"
    return hold, elected[-1], answer


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_seeds_suite(tmp_path: Path) -> None:
    env = {**os.environ, "FAULTLINE_STATE_DIR": str(tmp_path / "state"), "PYTHONUNBUFFERED": "1"}
    p = subprocess.run([sys.executable, "-m", "harness.cli", "suite", str(ROOT / "campaigns" / "suites" / "seeds.yaml"),
                        "--results-dir", str(tmp_path / "results"), "--no-progress", "--target", "kraftsim", *CELLS],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=1700)
    suite_dir = Path(p.stdout.strip().splitlines()[-1])
    log = [json.loads(ln) for ln in (suite_dir / "suite-log.jsonl").read_text().splitlines()]
    cells = {r["cell"]: r for r in log if r.get("event") == "cell_finished"}
    summary = "\n".join(f"{c}: {r['outcome']}: {r['reason']}" for c, r in cells.items())
    assert p.returncode == 0, f"{p.stderr[-3000:]}\n{summary}"
    spec = json.loads((suite_dir / "suite.json").read_text())
    assert set(cells) == {c["id"] for c in spec["cells"]}, summary
    assert all(r["outcome"] == "as-expected" for r in cells.values()), summary
    for name in VULNERABLE:
        assert cells[name]["lost"] and cells[name]["lost"] > 0, f"{name} lost nothing:\n{summary}"
    # the fixed cells lost nothing
    for name, r in cells.items():
        if name not in VULNERABLE:
            assert r["lost"] == 0, f"{name}:\n{summary}"
    # every cell ran against a KRaft quorum of three controllers (target.controllers)
    for name, r in cells.items():
        ctl = sorted(p.name for p in (Path(r["run_dir"]) / "cluster").glob("controller*.properties"))
        assert ctl == ["controller-1.properties", "controller-2.properties", "controller-3.properties"], (name, ctl)
    # docs/seeds.md#seed-000 through a real controller failover: the answer came from the new controller
    for name, accepted in (("controller-failover/vulnerable-3.4", True), ("controller-failover/fixed-4.1", False)):
        run_dir = Path(cells[name]["run_dir"])
        hold, elected, answer = _failover_answer(run_dir)
        addresses = _controller_addresses(run_dir)
        assert answer["upstream"] == addresses[elected["leader"]] != hold["upstream"], (hold, elected, answer)
        assert answer["accepted"] is accepted, answer
        if not accepted:
            # at 4.1 the wiped X registers a new log directory and its directory assignment moves
            # the partition epoch (KIP-858): when that came first, the held request is stale
            # (INVALID_UPDATE_VERSION, as real Kafka 4.1.0 answered it); else KIP-903's check
            moved = [e for e in _cluster_events(run_dir) if e["event"] == "isr_changed"
                     and e.get("reason") == "directory_assignment" and hold["wall"] < e["wall"] < answer["wall"]]
            want = (95, "INVALID_UPDATE_VERSION") if moved else (107, "INELIGIBLE_REPLICA")
            assert (answer["error_code"], answer["error"]) == want, (answer, moved)
    assert cells["controller-failover/vulnerable-3.4"]["mechanisms"] == {"stale_alter_partition_readmit":
                                                                        cells["controller-failover/vulnerable-3.4"]["lost"]}, summary
    html = (suite_dir / "index.html").read_text()
    assert html.count('data-cell="') == len(cells)
