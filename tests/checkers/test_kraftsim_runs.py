"""Histories from real kraftsim runs of campaigns/kip-903.yaml.

The fixtures are the checker inputs of two real ``faultline run campaigns/kip-903.yaml`` runs
(run.json, history, timeline, observer, cluster and proxy event logs; cluster data dirs left
out), taken at 06:40 UTC on 2026-11-22:
* ``kip903-off``: kip903.enabled=false, expect loss - the wiped broker 2 was admitted to the ISR
  by the delayed AlterPartition and elected after broker 1 was killed (docs/seeds.md#seed-000);
* ``kip903-on``: kip903.enabled=true, expect no-loss - the controller answered INELIGIBLE_REPLICA.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from checkers.job import check_run
from tests.support.tarballs import unpack

FIXTURES = Path(__file__).parent / "fixtures"


def _unpack(name: str, dest: Path) -> Path:
    rd = dest / name
    rd.mkdir(parents=True)
    return unpack(FIXTURES / f"{name}.tar.gz", rd)


@pytest.mark.timeout(1500)
def test_kip903_off_loses_writes_attributed_to_wipe_and_election(spark, tmp_path):
    v = check_run(_unpack("kip903-off", tmp_path), spark=spark)
    assert v["expected"] == "loss" and v["as_expected"] is True and v["valid"] is False
    assert v["counts"]["lost_write"] > 0
    assert v["counts"]["inconsistent_offset"] > 0        # the new leader reused the lost offsets
    for a in v["attribution"]:
        assert any(f.startswith("disk-wipe[broker-2]") for f in a["faults"]), a["faults"]
        assert any("leader_elected" in e and "leader=2" in e for e in a["elections"]), a["elections"]
    # the loss story: the stale AlterPartition readmitted the wiped broker 2, which was elected
    assert v["mechanisms"] == {"stale_alter_partition_readmit": v["counts"]["lost_write"]}
    (s,) = v["stories"]
    assert s["mechanism"] == "stale_alter_partition_readmit" and s["allowed_by"] is None
    assert set(s["mechanisms"]) >= {"empty_replica_elected", "truncated_to_lossy_leader"}
    assert 3 <= len(s["sentences"]) <= 8
    kinds = [st["kind"] for st in s["steps"]]
    assert kinds.index("fault") < kinds.index("alter_partition") < kinds.index("election"), kinds
    ap = s["steps"][kinds.index("alter_partition")]
    assert ap["event"] == {"source": "cluster-logs/controller/events.jsonl", "line": ap["event"]["line"]}
    assert ap["event"]["line"] > 0
    # one incident per lost write: its inconsistent offset, offset mismatches, regressions and skips are its own
    assert v["incidents_by_anomaly"]["lost_write"] == v["counts"]["lost_write"]
    assert v["incidents"] < v["counts"]["lost_write"] + v["counts"]["inconsistent_offset"]


@pytest.mark.timeout(1500)
def test_kip903_on_loses_nothing(spark, tmp_path):
    v = check_run(_unpack("kip903-on", tmp_path), spark=spark)
    assert v["expected"] == "no-loss" and v["as_expected"] is True and v["valid"] is True
    assert v["counts"]["lost_write"] == 0 and v["acked_writes"] > 1000


def test_a_clean_election_before_the_lost_acks_is_not_the_loss(spark, tmp_path):
    """A real random mix on RF 2 with unclean election allowed (the shrink test's campaign, seed 9,
    run on a loaded machine): leader 1 killed, 2 elected cleanly with its log ending at 507 - then
    2 itself acknowledged offsets 507-1119; 2 killed, 1 (restarted, out of the ISR) elected
    uncleanly, 2 truncated back to 507. The story once took the clean election, 1.6 s before the
    first lost ack and within the clock-skew slack, for the loss (``empty_replica_elected``)."""
    v = check_run(_unpack("unclean-after-clean-election", tmp_path), spark=spark)
    (s,) = [s for s in v["stories"] if s.get("kind") == "loss"]
    assert s["lost"]["count"] == 613 and s["lost"]["first_offset"] == 507
    assert s["mechanism"] == "unclean_election", s["sentences"]
    assert s["allowed_by"] == "unclean.leader.election.enable=true", s
