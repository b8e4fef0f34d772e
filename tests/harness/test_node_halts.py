"""A Kafka node that halts by itself during a run is noticed: the run is inconclusive, not green.

The halt is real: while ``faultline run`` drives a workload on the embedded cluster with three
KRaft controllers, the test sends a follower controller one BeginQuorumEpoch request for a new
epoch naming *that controller itself* as the leader. Kafka's KafkaRaftClient
(raft/src/main/java/org/apache/kafka/raft/KafkaRaftClient.java, 4.1.0) handles it in
handleBeginQuorumEpochRequest → maybeTransition, whose hasConsistentLeader says a leader id equal
to the local id is consistent only if this node is the leader: it is not, so maybeTransition throws
IllegalStateException ("... which is inconsistent with current leader ..."), fatal on the raft IO
thread since 3.4.1 (RaftIoThread.doWork → fatalFaultHandler, ProcessTerminatingFaultHandler →
Exit.halt(1)); kraftsim halts the same way (docs/kraftsim-raft.md), as
tests/kraftsim/conformance/test_raft_high_watermark_and_faults.py shows for one process. The
quorum keeps two voters, the workload goes on and nothing is lost - which is why the run used to
end green although it ran on a cluster it did not mean to test.

Why one request naming the receiver, not two naming two leaders: after a first request naming the
other follower as leader of epoch E+20, the victim *lives* as that follower until the second
request halts it, and Kafka's leader sends BeginQuorumEpoch to every voter each
fetch.timeout/2 (KafkaRaftClient.maybeSendBeginQuorumEpochRequests). One landing in that window is
answered FENCED_LEADER_EPOCH naming (other, E+20): the leader follows the other controller
(maybeHandleCommonResponse → maybeTransition → transitionToFollower), then fences the other
controller's next Fetch with the same (other, E+20), and hasConsistentLeader throws on the other
controller too - it is named leader but is not. Kafka halts both, and so did kraftsim, once in CI.
A request that halts the victim before its state changes leaks nothing: exactly one node halts.

Now both sources see it: the controller's ``fatal_fault`` event (checkers/halts.py) and the
harness's end-of-run check that every node still runs (``node_exit``, harness/runner.py); the
verdict names the node (``halts``) and is inconclusive, exit 4, and the report says so.
"""
from __future__ import annotations

import asyncio
import json
import textwrap
import time
from pathlib import Path

import pytest
from kio.index import load_request_schema

from kraftsim.raft.client import BEGIN_QUORUM_EPOCH
from kraftsim.raft.log import TOPIC
from kraftsim.wire import Client, build
from tests.harness.clirun import REPO, force_cleanup, read_jsonl, spawn, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CAMPAIGN = textwrap.dedent(f"""
    name: quiet-quorum
    target: {{inventory: {REPO / 'inventory' / 'local-controllers.yaml'}}}
    topic: {{name: qq, partitions: 2, replication_factor: 3, min_insync_replicas: 2}}
    workload: {{producers: 1, consumers: 1, rate: 50, duration: 14, drain_timeout: 20, recovery_timeout: 40}}
    expect: no-loss
""")


def _props(path: Path) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in path.read_text().splitlines() if "=" in ln and not ln.startswith("#"))


async def _begin_quorum_epoch(host: str, port: int, cluster_id: str, leader: int, epoch: int) -> None:
    cl = Client(host, port, "faultline-test")
    await cl.connect()
    req = build(load_request_schema(BEGIN_QUORUM_EPOCH, 0), {"cluster_id": cluster_id, "topics": [
        {"topic_name": TOPIC, "partitions": [{"partition_index": 0, "leader_id": leader, "leader_epoch": epoch}]}]})
    try:
        await asyncio.wait_for(cl.request(req, timeout=2), 3)
    except (OSError, asyncio.TimeoutError, ConnectionError):
        pass   # the process halts instead of answering
    cl.close()


def test_a_controller_that_halts_on_a_fatal_raft_fault_makes_the_run_inconclusive(tmp_path):
    state, results = tmp_path / "state", tmp_path / "results"
    camp = tmp_path / "quiet-quorum.yaml"
    camp.write_text(CAMPAIGN, encoding="utf-8")
    proc = spawn(["run", str(camp), "--seed", "1", "--results-dir", str(results), "--no-progress"], state,
                 tmp_path / "run.log")
    try:
        rd = wait_for(lambda: next(iter(results.glob("quiet-quorum-*")), None), 60, "the run directory")
        wait_for(lambda: any(r.get("phase") == "nemesis" for r in read_jsonl(rd / "timeline.jsonl")), 120,
                 "the workload running")
        time.sleep(3)
        cdir = rd / "cluster"
        ctl = {p.stem: _props(p) for p in sorted(cdir.glob("controller-*.properties"))}
        ids = {name: int(p["node.id"]) for name, p in ctl.items()}
        elected = [e for name in ctl for e in read_jsonl(cdir / name / "events.jsonl") if e.get("event") == "controller_elected"]
        assert elected, "no controller was elected"
        last = max(elected, key=lambda e: e["epoch"])
        active = next(n for n, i in ids.items() if i == last["leader"])
        victim = [n for n in sorted(ids) if n != active][0]
        host, port = ctl[victim]["listeners"].split("//")[1].rsplit(":", 1)
        cluster_id = ctl[victim].get("cluster.id", "kraftsim-cluster-0000000")
        # the victim named leader of a newer epoch: it halts on this request, before its state changes
        asyncio.run(_begin_quorum_epoch(host, int(port), cluster_id, ids[victim], int(last["epoch"]) + 20))
        wait_for(lambda: [e for e in read_jsonl(cdir / victim / "events.jsonl") if e.get("event") == "fatal_fault"],
                 20, f"{victim} logging its fatal fault")
        code = proc.wait(600)
    except BaseException:
        force_cleanup(results, state)
        raise
    finally:
        if proc.poll() is None:
            proc.kill()
    out = (tmp_path / "run.log").read_text(errors="replace")
    assert code == 4, f"exit {code}, want 4 (inconclusive):\n{out[-2500:]}"
    v = json.loads((rd / "verdict.json").read_text())
    assert v["counts"]["lost_write"] == 0 and v["acked_writes"] > 100 and v["valid"] is True
    assert v["outcome"] == "inconclusive"
    assert {(h["host"], h["how"]) for h in v["halts"]} == {(victim, "fatal_fault"), (victim, "node_exit")}
    fatal = next(h for h in v["halts"] if h["how"] == "fatal_fault")
    assert "halted: Unexpected error in raft IO thread" in fatal["text"] and "inconsistent" in fatal["text"]
    (why,) = v["inconclusive_because"]
    assert why.startswith("1 node stopped during the run without a fault stopping it") and victim in why
    tl = read_jsonl(rd / "timeline.jsonl")
    assert [r["host"] for r in tl if r.get("kind") == "node_exit"] == [victim]
    assert any(victim in n for n in json.loads((rd / "run.json").read_text())["notes"])
    html = (rd / "report.html").read_text()
    assert 'id="halts"' in html and "Unexpected error in raft IO thread" in html
