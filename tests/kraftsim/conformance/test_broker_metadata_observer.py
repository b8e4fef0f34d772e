"""The broker's metadata channel is a raft observer: a diverging epoch below its high watermark halts it.

Kafka (3.4.1 through 4.x): a broker fetches ``__cluster_metadata`` as an observer
(KafkaRaftClient in a FollowerState); each Fetch carries the epoch of its last record, the leader
answers a log that diverged from its own with a diverging epoch
(ReplicatedLog.validateOffsetAndEpoch), and KafkaRaftClient.handleFetchResponse throws
``KafkaException("The leader requested truncation to offset X, which is below the current high
watermark Y")`` when that is below the observer's high watermark - on the raft IO thread a fatal
fault: ``Encountered fatal fault: Unexpected error in raft IO thread``, Exit.halt(1). A broker
started again has no high watermark until its first answer and truncates freely.

What real Kafka 3.8.0 did under campaigns/controller-disk-wipe.yaml is the fixture
(tests/checkers/kafka_logs_real/faultline-3.8.0-controller-disk-wipe-metadata-lost: the two
brokers that had seen the lost records committed halted with that message; the restarted ones
followed the rolled-back partition state and lost acknowledged writes). The kraftsim of before
this case replayed its copy from offset 0 on the new leader's OFFSET_OUT_OF_RANGE: no broker
halted and nothing was lost - this test failed there.

Two more rules decide what follows, both as real 3.8.0 logged them (S's controller.log: "Replayed
RegisterBrokerRecord establishing a new incarnation of broker 1" at 29.681, then "Fencing broker 2
because its session has timed out" at 29.682 - 4.2 s after "Becoming the active controller",
with a 3 s session): a new active controller checks no session until a heartbeat or a
registration schedules its fence timer (QuorumController.rescheduleMaybeFenceStaleBrokers, called
by registerBroker and processBrokerHeartbeat only), and a broker's channels send nothing while
their raft observer knows no leader (NodeToControllerRequestThread.doWork). So L's new
incarnation, accepted once its old session ran out, is S's first contact: S then fences the
halted brokers at once, partition 0 keeps L alone, and the restarted brokers truncate to it.
kraftsim before: it fenced every silent broker at the session timeout, L included, and a halted
broker's heartbeat channel reached S before its metadata channel halted - the leader moved off
L and nothing was lost.

The case runs the campaign's vulnerable side (3.8.0, a static quorum) on real kraftsim processes
and checks it with the real Spark checker.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.job import check_run
from tests.harness.clirun import REPO, faultline, read_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def test_a_static_quorum_that_lost_committed_metadata_halts_its_brokers_and_loses_writes(spark, tmp_path: Path) -> None:
    state, results = tmp_path / "state", tmp_path / "results"
    r = faultline(["run", str(REPO / "campaigns" / "controller-disk-wipe.yaml"), "--seed", "7",   # 3.8.0, static
                   "--no-check", "--results-dir", str(results), "--no-progress"], state, timeout=900)
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    rd = Path(lines[-1])

    events = {h.name: read_jsonl(h / "events.jsonl") for h in (rd / "cluster-logs").iterdir()
              if (h / "events.jsonl").exists()}
    # the lagging voter S was elected with the empty voter's vote, its log short of the committed end
    elected = [e for h, evs in events.items() if h.startswith("controller") for e in evs
               if e["event"] == "controller_elected" and e["epoch"] > 1]
    assert elected, "no controller was elected after the wipe"
    # the brokers that had seen the lost records committed halted, naming the truncation
    halted = sorted(h for h, evs in events.items() if h.startswith("broker")
                    for e in evs if e["event"] == "fatal_fault" and e.get("halted")
                    and "below the current high watermark" in e.get("error", ""))
    assert len(halted) == 2, {h: [e for e in evs if e["event"] == "fatal_fault"] for h, evs in events.items()}
    # the broker that was down (L) truncated its copy when it came back: no high watermark yet
    survivors = [h for h in events if h.startswith("broker") and h not in halted]
    assert any(e["event"] == "metadata_truncation" and e["from_offset"] > e["to_offset"]
               for h in survivors for e in events[h]), survivors

    # the voter that had led truncated committed records when it came back (its high watermark
    # unknown after the restart): the quorum's own copy of them is gone
    assert any(e["event"] == "metadata_truncation" and e["from_offset"] > e["to_offset"]
               for h, evs in events.items() if h.startswith("controller") for e in evs), "no voter truncated"
    # S fenced no broker before L's new incarnation registered (its first contact)
    ctl = [e for h, evs in events.items() if h.startswith("controller") for e in evs]
    s_won = min(e["wall"] for e in elected)
    reg = min(e["wall"] for e in ctl if e["event"] == "broker_registered" and e["wall"] > s_won)
    assert not [e for e in ctl if e["event"] == "broker_fenced" and s_won < e["wall"] < reg], "S fenced a broker it never heard from"

    v = check_run(rd, spark=spark)
    assert v["counts"]["lost_write"] > 0 and v["as_expected"] is True, v["counts"]
    assert {s["mechanism"] for s in v["stories"]} == {"metadata_log_lost"}, [s["mechanisms"] for s in v["stories"]]
    assert json.loads((rd / "run.json").read_text())["expect"] == "loss"
