"""docs/seeds.md#seed-004 (a KIP under discussion, NOT Kafka): prefer replicas with enough local log.

The cases are the seed's own ("Eligibility Criteria" example, "either condition", "unknown
counts as eligible", "no hard block", "off by default"), driven through kraftsim's controller:
the partition's leader reports its ISR members' LocalLogStartTimestamp / LocalLogSizeBytes
(kraftsim's stand-in for the seed's new AlterPartition fields), then the leader is fenced and
the controller elects (PartitionChangeBuilder.electLeader with the seed's stable sort).

Assignment [1, 3, 2], leader 1: without the preference Kafka's order elects 3 (first in the
assignment after the fenced leader); 3 is the replica with the short local log.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from .controller_harness import brokers, create, fence_quietly, part, run

HOUR, MIN = 3600_000, 60_000


def _cluster(tmp: Path, **settings: str):  # noqa: ANN202
    from .controller_harness import controller
    c = controller(tmp, **settings)
    epochs = brokers(c, 1, 2, 3)
    create(c, [1, 3, 2], min_isr=1)
    assert part(c).leader == 1 and part(c).isr == [1, 3, 2]
    return c, epochs


def _report(c, epochs: dict[int, int], states: dict[int, tuple[int, int]], sender: int = 1) -> dict:  # noqa: ANN001
    now = int(time.time() * 1000)
    ps = part(c)
    body = {"broker_id": sender, "broker_epoch": epochs[sender], "partitions": [{
        "topic": ps.topic, "partition": 0, "leader_epoch": ps.leader_epoch,
        "replicas": [{"broker": b, "local_log_start_timestamp": now - age, "local_log_size_bytes": size}
                     for b, (age, size) in states.items()]}]}
    return json.loads(run(c.h_local_log_report(json.dumps(body).encode(), None)))


def _elect_after_leader_fenced(c) -> int:  # noqa: ANN001
    fence_quietly(c, 1)
    recs = c.generate_leader_and_isr_updates("leader_fenced", [part(c)], remove=1)
    c.append(recs)
    return part(c).leader


def test_seed_example_time_threshold_prefers_eligible_replica(tmp_path: Path) -> None:
    # leader.election.eligible.local.log.ms = 10 min: broker 1 1 h, broker 2 30 min, broker 3 3 min
    c, e = _cluster(tmp_path, **{"leader.election.eligible.local.log.ms": str(10 * MIN)})
    assert _report(c, e, {1: (HOUR, 10), 2: (30 * MIN, 10), 3: (3 * MIN, 10)}) == {"error": None}
    assert _elect_after_leader_fenced(c) == 2
    # the controller's leader_elected says what it knew: each replica's local log and eligibility
    evs = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    ev = [x for x in evs if x.get("event") == "leader_elected"][-1]
    assert ev["leader"] == 2
    assert {k: v["eligible"] for k, v in ev["local_log_preference"].items()} == {"1": True, "2": True, "3": False}


def test_bytes_threshold(tmp_path: Path) -> None:
    c, e = _cluster(tmp_path, **{"leader.election.eligible.local.log.bytes": "1000"})
    _report(c, e, {1: (HOUR, 5000), 2: (MIN, 5000), 3: (HOUR, 10)})
    assert _elect_after_leader_fenced(c) == 2


def test_either_condition_makes_a_replica_eligible(tmp_path: Path) -> None:
    # 3 spans only 3 minutes but holds enough bytes: eligible, and first in the assignment
    c, e = _cluster(tmp_path, **{"leader.election.eligible.local.log.ms": str(10 * MIN),
                                 "leader.election.eligible.local.log.bytes": "1000"})
    _report(c, e, {1: (HOUR, 5000), 2: (HOUR, 5000), 3: (3 * MIN, 2000)})
    assert _elect_after_leader_fenced(c) == 3


def test_unknown_local_log_state_counts_as_eligible(tmp_path: Path) -> None:
    c, e = _cluster(tmp_path, **{"leader.election.eligible.local.log.bytes": "1000"})
    _report(c, e, {1: (HOUR, 5000), 2: (HOUR, 5000)})  # 3 never reported
    assert _elect_after_leader_fenced(c) == 3


def test_no_eligible_replica_still_elects_in_assignment_order(tmp_path: Path) -> None:
    # "Strict exclusion" is a rejected alternative: a preference, never a block
    c, e = _cluster(tmp_path, **{"leader.election.eligible.local.log.bytes": "1000000"})
    _report(c, e, {1: (HOUR, 10), 2: (HOUR, 20), 3: (HOUR, 30)})
    assert _elect_after_leader_fenced(c) == 3


def test_topic_level_override(tmp_path: Path) -> None:
    c, e = _cluster(tmp_path)  # broker-level: off
    c.image.topics[part(c).topic].configs["leader.election.eligible.local.log.bytes"] = "1000"
    _report(c, e, {1: (HOUR, 5000), 2: (HOUR, 5000), 3: (HOUR, 10)})
    assert _elect_after_leader_fenced(c) == 2


def test_report_from_a_non_leader_is_ignored(tmp_path: Path) -> None:
    c, e = _cluster(tmp_path, **{"leader.election.eligible.local.log.bytes": "1000"})
    _report(c, e, {2: (HOUR, 5000), 3: (HOUR, 10)}, sender=2)
    assert _elect_after_leader_fenced(c) == 3  # 3 still unknown = eligible


def test_stale_broker_epoch_is_refused(tmp_path: Path) -> None:
    c, e = _cluster(tmp_path, **{"leader.election.eligible.local.log.bytes": "1000"})
    assert _report(c, {**e, 1: e[1] - 1}, {3: (HOUR, 10)}) == {"error": "STALE_BROKER_EPOCH"}
    assert _elect_after_leader_fenced(c) == 3


def test_off_by_default_keeps_kafkas_order(tmp_path: Path) -> None:
    # control case (Kafka's behaviour): with both thresholds at -1 the reports change nothing
    c, e = _cluster(tmp_path)
    _report(c, e, {1: (HOUR, 5000), 2: (HOUR, 5000), 3: (1, 10)})
    assert _elect_after_leader_fenced(c) == 3
