"""Loss stories: each mechanism from the events a run records, through the real checker.

Hand-built run directories (real file format: history, timeline, cluster event logs, run.json),
one topic per scenario, checked once per run with the session's Spark. Each scenario is the
event pattern its mechanism names (docs/anomalies.md §stories); the KIP-903 story of a real
kraftsim run is in test_kraftsim_runs.py.
"""
from __future__ import annotations

import json

import pytest

from checkers.job import check_run
from checkers.stories import MECHANISMS, MAX_SENTENCES
from tests.checkers.builder import HistoryBuilder


def _writes(b: HistoryBuilder, topic: str, n: int, t0: float, proc: str = "producer-0", first: int = 0) -> None:
    for i in range(n):
        b.send(proc, topic, 0, f"{proc}-{topic}-{first + i}", first + i, t0 + 0.1 * i)


def last_replica_standing(b: HistoryBuilder, t: str) -> None:
    """ISR shrinks to {1}; broker 1 loses its page cache in a reboot, recovers a shorter log,
    and - the last replica standing - is elected again (ELR off)."""
    b.event("controller", 1.0, "leader_elected", topic=t, partition=0, leader=1, leader_epoch=0, partition_epoch=0,
            isr=[1, 2], elr=[], reason="initial")
    b.event("controller", 2.0, "isr_changed", topic=t, partition=0, leader=1, leader_epoch=0, partition_epoch=1,
            isr=[1], elr=[], reason="alter_partition")
    _writes(b, t, 5, 3.0)                                            # offsets 0-4, acked by broker 1 alone
    b.fault("f-reboot", "reboot", ["broker-1"], 5.0, 6.5)
    b.event("controller", 5.5, "isr_changed", topic=t, partition=0, leader=-1, leader_epoch=0, partition_epoch=2,
            isr=[1], elr=[], reason="leader_fenced")
    b.event("broker-1", 6.8, "recovery", role="broker", node=1, topic=t, partition=0, recovery_point=2,
            log_end_offset=2, truncated_bytes=300, reason="unclean_shutdown")
    b.event("controller", 7.0, "broker_registered", broker=1, broker_epoch=40, previous_broker_epoch=-1,
            clean_shutdown=False)
    b.event("controller", 7.5, "leader_elected", topic=t, partition=0, leader=1, leader_epoch=1, partition_epoch=3,
            isr=[1], elr=[], reason="isr")
    _writes(b, t, 2, 9.0, proc="producer-1", first=2)                # offsets 2-3 again
    vals = [(0, f"producer-0-{t}-0"), (1, f"producer-0-{t}-1"), (2, f"producer-1-{t}-2"), (3, f"producer-1-{t}-3")]
    b.drain(t, 0, vals, 4, 20.0, process=f"{t}.drain")


def last_replica_standing_isr_unstated(b: HistoryBuilder, t: str) -> None:
    """The same story as Kafka 3.9's logs tell it (a real run of campaigns/last-replica-standing.yaml):
    the partition change that took the fenced leader away comes from a replica's state-change line,
    which states no ISR (checkers/kafkalog: ``isr`` null), so the ISR it was elected from is the
    last one stated, [1] - not an empty ISR and not an unclean election."""
    last_replica_standing(b, t)
    for e in b.events.get("controller", []):
        if e.get("topic") == t and e.get("partition_epoch") == 2:
            e["isr"] = None


def unclean(b: HistoryBuilder, t: str) -> None:
    b.event("controller", 1.0, "leader_elected", topic=t, partition=0, leader=1, leader_epoch=0, partition_epoch=0,
            isr=[1], elr=[], reason="initial")
    _writes(b, t, 3, 2.0)
    b.fault("f-kill", "kill", ["broker-1"], 3.0, None)
    b.event("controller", 3.5, "broker_fenced", broker=1, broker_epoch=3, reason="session_timeout")
    b.event("controller", 3.6, "leader_elected", topic=t, partition=0, leader=2, leader_epoch=1, partition_epoch=1,
            isr=[2], elr=[], reason="unclean", leader_recovery_state=1)
    b.event("broker-2", 3.7, "became_leader", role="broker", node=2, topic=t, partition=0, broker=2, leader_epoch=1,
            log_start_offset=0, log_end_offset=0, hwm=0)
    _writes(b, t, 1, 5.0, proc="producer-1", first=0)
    b.drain(t, 0, [(0, f"producer-1-{t}-0")], 1, 20.0, process=f"{t}.drain")


def unclean_after_dead_isr_member(b: HistoryBuilder, t: str) -> None:
    """As seen in a seeds-suite run: the controller first elects ISR member 3 cleanly, but 3 is
    dead too (fenced 0.2 s later, it never takes over); then out-of-sync 2 is elected unclean and
    3 and 1, coming back, truncate to it. The loss is the unclean election, not 3's."""
    b.event("controller", 1.0, "leader_elected", topic=t, partition=0, leader=1, leader_epoch=0, partition_epoch=0,
            isr=[1, 3], elr=[], reason="initial")
    _writes(b, t, 3, 2.0)
    b.event("broker-2", 5.8, "recovery", role="broker", node=2, topic=t, partition=0, log_end_offset=0,
            reason="unclean_shutdown")
    b.event("controller", 6.1, "leader_elected", topic=t, partition=0, leader=3, leader_epoch=1, partition_epoch=1,
            isr=[3], elr=[], reason="leader_fenced")
    b.event("controller", 6.3, "leader_elected", topic=t, partition=0, leader=2, leader_epoch=2, partition_epoch=2,
            isr=[2], elr=[], reason="unclean", leader_recovery_state=1)
    b.event("broker-2", 6.31, "became_leader", role="broker", node=2, topic=t, partition=0, broker=2, leader_epoch=2,
            log_start_offset=0, log_end_offset=0, hwm=0)
    b.event("broker-1", 7.3, "truncation", role="broker", node=1, topic=t, partition=0, from_offset=3, to_offset=0,
            reason="diverging_epoch")
    b.event("broker-3", 7.35, "truncation", role="broker", node=3, topic=t, partition=0, from_offset=3, to_offset=0,
            reason="diverging_epoch")
    _writes(b, t, 1, 9.0, proc="producer-1", first=0)
    b.drain(t, 0, [(0, f"producer-1-{t}-0")], 1, 20.0, process=f"{t}.drain")


def double_page_cache_loss(b: HistoryBuilder, t: str) -> None:
    """RF 2, ISR [1] while the writes are acknowledged (2 fell out of sync); both replicas reboot
    at once and lose their page cache. Broker 2 comes back first and is elected unclean; broker 1,
    the ISR's only member, recovers its log without any of the unflushed writes. With unclean
    election off, 1 would have been elected (no ELR at metadata.version 3.9) with the same hole."""
    b.event("controller", 1.0, "leader_elected", topic=t, partition=0, leader=1, leader_epoch=0, partition_epoch=0,
            isr=[1, 2], elr=[], reason="initial")
    b.event("controller", 2.0, "isr_changed", topic=t, partition=0, leader=1, leader_epoch=0, partition_epoch=1,
            isr=[1], elr=[], reason="alter_partition")
    _writes(b, t, 5, 3.0)
    b.fault("f-pcl", "reboot-page-cache-loss", ["broker-1", "broker-2"], 5.0, 6.5)
    b.event("controller", 5.5, "isr_changed", topic=t, partition=0, leader=-1, leader_epoch=0, partition_epoch=2,
            isr=[1], elr=[], reason="leader_fenced")
    b.event("broker-2", 6.6, "recovery", role="broker", node=2, topic=t, partition=0, recovery_point=0,
            log_end_offset=0, truncated_bytes=0, reason="unclean_shutdown")
    b.event("controller", 6.7, "leader_elected", topic=t, partition=0, leader=2, leader_epoch=1, partition_epoch=3,
            isr=[2], elr=[], reason="unclean", leader_recovery_state=1)
    b.event("broker-2", 6.71, "became_leader", role="broker", node=2, topic=t, partition=0, broker=2, leader_epoch=1,
            log_start_offset=0, log_end_offset=0, hwm=0)
    b.event("broker-1", 6.9, "recovery", role="broker", node=1, topic=t, partition=0, recovery_point=0,
            log_end_offset=0, truncated_bytes=0, reason="unclean_shutdown")
    _writes(b, t, 1, 9.0, proc="producer-1", first=0)
    b.drain(t, 0, [(0, f"producer-1-{t}-0")], 1, 20.0, process=f"{t}.drain")


def unexplained(b: HistoryBuilder, t: str) -> None:
    _writes(b, t, 3, 2.0)
    b.poll(f"{t}.consumer-0", t, 0, [(0, f"producer-0-{t}-0"), (2, f"producer-0-{t}-2")], 5.0)
    b.drain(t, 0, [(0, f"producer-0-{t}-0"), (2, f"producer-0-{t}-2")], 3, 20.0, process=f"{t}.drain")


def lossy_leader(b: HistoryBuilder, t: str) -> None:
    """No election recorded: the leader lost its tail and the follower truncated to it."""
    b.event("controller", 1.0, "leader_elected", topic=t, partition=0, leader=1, leader_epoch=0, partition_epoch=0,
            isr=[1, 2], elr=[], reason="initial")
    _writes(b, t, 5, 2.0)
    b.event("broker-2", 4.0, "truncation", role="broker", node=2, topic=t, partition=0, from_offset=5, to_offset=2,
            reason="diverging_epoch")
    _writes(b, t, 1, 6.0, proc="producer-1", first=2)
    b.drain(t, 0, [(0, f"producer-0-{t}-0"), (1, f"producer-0-{t}-1"), (2, f"producer-1-{t}-2")], 3, 20.0,
            process=f"{t}.drain")


SCENARIOS = {"lrs": last_replica_standing, "lrs-isr-unstated": last_replica_standing_isr_unstated,
             "unclean-t": unclean, "mystery": unexplained, "lossy-leader": lossy_leader,
             "unclean-dead-isr": unclean_after_dead_isr_member, "double-pcl": double_page_cache_loss}


@pytest.fixture(scope="module")
def stories(spark, tmp_path_factory):
    b = HistoryBuilder()
    for name, build in SCENARIOS.items():
        build(b, name)
    rd = b.write(tmp_path_factory.mktemp("stories") / "run", expect="loss",
                 topic={"name": "t", "min_insync_replicas": 1, "config": {"unclean.leader.election.enable": "true"}})
    v = check_run(rd, spark=spark)
    return v, {s["topic"]: s for s in v["stories"]}


def _shape(s: dict) -> None:
    assert s["mechanism"] in MECHANISMS and s["mechanisms"][0] == s["mechanism"]
    assert 3 <= len(s["sentences"]) <= MAX_SENTENCES, s["sentences"]
    assert s["sentences"][-1].startswith(f"Lost: {s['lost']['count']} acknowledged write")
    assert all(st["event"].keys() == {"source", "line"} for st in s["steps"])


def test_last_replica_standing(stories):
    _, by = stories
    s = by["lrs"]
    _shape(s)
    assert s["mechanism"] == "last_replica_standing", s
    assert s["lost"] == {"count": 3, "first_offset": 2, "last_offset": 4, "first_ack_t": 3.21, "last_ack_t": 3.41}
    text = " ".join(s["sentences"])
    assert "broker 1 recovered lrs@0" in text and "ending at offset 2" in text and "KIP-966" in text
    rec = next(st for st in s["steps"] if st["kind"] == "recovery")
    assert rec["event"] == {"source": "cluster-logs/broker-1/events.jsonl", "line": 1}


def test_an_isr_no_line_stated_is_the_last_one_stated(stories):
    _, by = stories
    s = by["lrs-isr-unstated"]
    assert s["mechanism"] == "last_replica_standing", s
    assert "unclean election" not in " ".join(s["sentences"]) and "the last replica standing in the ISR [1]" in " ".join(s["sentences"])


def test_unclean_election_allowed_by_topic_config(stories):
    _, by = stories
    s = by["unclean-t"]
    _shape(s)
    assert s["mechanism"] == "unclean_election" and s["allowed_by"] == "unclean.leader.election.enable=true"
    assert any("elected broker 2" in x and "unclean" in x for x in s["sentences"]), s["sentences"]


def test_unclean_election_after_every_copy_was_lost_is_not_blamed_on_the_setting_alone(stories):
    """The counterfactual: with unclean election off the writes were lost too (the ISR's only
    member lost its unflushed copy in the same reboot), so ``allowed_by`` names that first and
    the setting second, and the story says so."""
    from checkers.stories import UNFLUSHED_LOSS
    _, by = stories
    s = by["double-pcl"]
    _shape(s)
    assert s["lost"]["count"] == 5 and s["mechanism"] == "unclean_election"
    assert s["allowed_by"] == f"{UNFLUSHED_LOSS}; unclean.leader.election.enable=true", s["allowed_by"]
    text = " ".join(s["sentences"])
    assert "broker 1, which held the lost writes in the ISR, recovered double-pcl@0" in text, s["sentences"]
    assert "not the loss's only cause" in text and "lost all the same" in text, s["sentences"]


def test_unclean_election_after_a_dead_isr_member_was_elected(stories):
    _, by = stories
    s = by["unclean-dead-isr"]
    _shape(s)
    assert s["mechanism"] == "unclean_election" and s["allowed_by"] == "unclean.leader.election.enable=true", s
    assert any("elected broker 2" in x and "unclean" in x for x in s["sentences"]), s["sentences"]


def test_truncated_to_lossy_leader(stories):
    _, by = stories
    s = by["lossy-leader"]
    _shape(s)
    assert s["mechanism"] == "truncated_to_lossy_leader", s
    assert any("broker 2 truncated lossy-leader@0 from offset 5 to 2" in x for x in s["sentences"]), s["sentences"]


def test_unexplained_says_so(stories):
    v, by = stories
    s = by["mystery"]
    _shape(s)
    assert s["mechanism"] == "unexplained" and s["label"] == MECHANISMS["unexplained"]
    assert any(x.startswith("Unexplained:") for x in s["sentences"])
    # the run's mechanisms count lost writes by primary mechanism
    assert v["mechanisms"] == {m: sum(x["lost"]["count"] for x in v["stories"] if x["mechanism"] == m)
                               for m in {x["mechanism"] for x in v["stories"]}}
    assert sum(v["mechanisms"].values()) == v["counts"]["lost_write"]


def test_ack_below_min_isr(spark, tmp_path):
    t = "thin"
    b = HistoryBuilder()
    b.event("controller", 0.5, "isr_changed", topic=t, partition=0, leader=1, leader_epoch=0, partition_epoch=1,
            isr=[1], elr=[], reason="leader_fenced")
    _writes(b, t, 3, 1.0)
    b.drain(t, 0, [(0, f"producer-0-{t}-0")], 1, 20.0, process=f"{t}.drain")
    v = check_run(b.write(tmp_path / "run", expect="loss", topic={"name": t, "min_insync_replicas": 2}), spark=spark)
    assert v["counts"]["lost_write"] == 2 and v["counts"]["ack_below_min_isr"] == 3
    s = v["stories"][0]
    _shape(s)
    assert s["mechanism"] == "ack_below_min_isr" and v["mechanisms"] == {"ack_below_min_isr": 2}
    assert any("min.insync.replicas=2" in x for x in s["sentences"]), s["sentences"]


# ------------------------------------------------------------------ which KIP-903 gate was in force

def stale_alter_partition(b: HistoryBuilder, t: str) -> None:
    """docs/seeds.md#seed-000's pattern: broker 2's disk is wiped, a delayed AlterPartition from leader 1 puts it
    back into the ISR, leader 1 is killed and the empty broker 2 is elected."""
    b.event("controller", 1.0, "leader_elected", topic=t, partition=0, leader=1, leader_epoch=0, partition_epoch=0,
            isr=[1, 2], elr=[], reason="initial")
    _writes(b, t, 5, 2.0)                                            # offsets 0-4
    b.fault("f-wipe", "disk-wipe", ["broker-2"], 3.0, 3.5)
    b.event("controller", 4.0, "broker_registered", broker=2, broker_epoch=50, previous_broker_epoch=-1,
            clean_shutdown=False)
    b.event("controller", 5.0, "alter_partition", topic=t, partition=0, leader=1, new_isr=[1, 2], partition_epoch=2,
            version=2, accepted=True)
    b.event("controller", 5.0, "isr_changed", topic=t, partition=0, leader=1, leader_epoch=0, partition_epoch=2,
            isr=[1, 2], elr=[], reason="alter_partition")
    b.fault("f-kill", "kill", ["broker-1"], 6.0, None)
    b.event("controller", 6.5, "leader_elected", topic=t, partition=0, leader=2, leader_epoch=1, partition_epoch=3,
            isr=[2], elr=[], reason="leader_fenced")
    b.event("broker-2", 6.6, "became_leader", role="broker", node=2, topic=t, partition=0, broker=2, leader_epoch=1,
            log_start_offset=0, log_end_offset=0, hwm=0)
    _writes(b, t, 2, 8.0, proc="producer-1", first=0)               # offsets 0-1 again
    b.drain(t, 0, [(0, f"producer-1-{t}-0"), (1, f"producer-1-{t}-1")], 2, 20.0, process=f"{t}.drain")


def _kip903_run(spark, tmp_path, metadata_version: str | None, record: str) -> dict:
    """The stale-AlterPartition run at ``metadata_version`` as the harness records it (run.json
    switches), with the features kraftsim's own launcher derives for it written where the run
    carries them: ``cluster/features.json`` ("file"), the controller's first event ("event"),
    or nowhere ("none": real Kafka records no features)."""
    from kraftsim.cluster import features_in_force   # the record exactly as the launcher writes it
    b = HistoryBuilder()
    switches = {"metadata.version": metadata_version} if metadata_version else {}
    rec = features_in_force(switches) if metadata_version else None
    if record == "event":
        b.event("controller", 0.1, "features", node=1000, **rec)
    stale_alter_partition(b, "faultline")
    rd = b.write(tmp_path / "run", expect="loss", switches=switches,
                 topic={"name": "faultline", "min_insync_replicas": 1})
    if record == "file":
        (rd / "cluster").mkdir()
        (rd / "cluster" / "features.json").write_text(json.dumps(rec, indent=2) + "\n")
    return check_run(rd, spark=spark)


def _kip903_sentence(v: dict) -> str:
    (s,) = v["stories"]
    _shape(s)
    assert s["mechanism"] == "stale_alter_partition_readmit", s
    (text,) = [x for x in s["sentences"] if "KIP-903's check" in x]
    return text


@pytest.mark.parametrize("record", ["file", "event"])
def test_kip903_check_was_off_at_3_5_iv0(spark, tmp_path, record):
    """KIP-903 arrives with IBP_3_5_IV1: a cluster at 3.5-IV0 ran without it, and the story says
    so from the cluster's own record, not from a release-level reading of the version."""
    v = _kip903_run(spark, tmp_path, "3.5-IV0", record)
    assert "was off (metadata.version=3.5-IV0)" in _kip903_sentence(v)
    got = v["checker"]["features"]
    assert got["versions"] == {"kafka.version": "3.5.0", "metadata.version": "3.5-IV0"}
    assert got["gates"]["kip903"] == {"enabled": False, "decided_by": "metadata.version", "kind": "protocol",
                                      "version": "3.5-IV0"}
    assert got["source"] == ("cluster/features.json" if record == "file"
                             else "cluster-logs/controller/events.jsonl line 1")


def test_kip903_check_was_on_at_3_5_iv1(spark, tmp_path):
    v = _kip903_run(spark, tmp_path, "3.5-IV1", "file")
    assert "was on (metadata.version=3.5-IV1, kafka.version=3.5.0), yet did not stop it" in _kip903_sentence(v)


def test_no_features_record_says_the_gate_is_unknown(spark, tmp_path):
    """Real Kafka writes no features record: the story claims neither on nor off."""
    v = _kip903_run(spark, tmp_path, None, "none")
    text = _kip903_sentence(v)
    assert "was not recorded as on or off (the run has no features.json or controller 'features' event)" in text
    assert "was off" not in text and "was on" not in text
    assert v["checker"]["features"]["source"] is None


# ------------------------------------------------------------------ the events kind (no histories)

def test_events_stories_count_every_rejection_and_each_controller_failover(tmp_path):
    """A directory with only kraftsim-shaped event logs (no run.json, no history): checked without
    Spark (checkers/events_only.py). Rejections of one leader and error are one counted step; an
    ISR change between two runs of them splits them; a second active controller of a higher epoch
    is a failover; a partition with more events than a story tells says how many it left out."""
    from checkers.stories import EVENT_STORY, MAX_EVENT_STEPS
    b = HistoryBuilder()
    b.event("controller-0", 0.5, "controller_elected", node=0, epoch=3, leader=0, voters=[0, 1, 2])
    b.event("controller-0", 1.0, "leader_elected", topic="t", partition=0, leader=1, leader_epoch=0,
            partition_epoch=0, isr=[1, 2, 3], reason="initial")
    for i in range(4):
        b.event("controller-0", 2.0 + 0.5 * i, "alter_partition", topic="t", partition=0, leader=1, new_isr=[1, 2, 3],
                partition_epoch=0, accepted=False, error="INELIGIBLE_REPLICA")
    b.event("controller-0", 4.1, "controller_resigned", node=0, epoch=3, leader=0, reason="shutdown")
    b.event("controller-1", 4.3, "controller_elected", node=1, epoch=4, leader=1, voters=[0, 1, 2])
    b.event("controller-0", 4.5, "isr_changed", topic="t", partition=0, leader=1, leader_epoch=0, partition_epoch=1,
            isr=[1, 2], reason="alter_partition")
    for i in range(3):
        b.event("controller-0", 5.0 + 0.5 * i, "alter_partition", topic="t", partition=0, leader=1, new_isr=[1, 2, 3],
                partition_epoch=1, accepted=False, error="INELIGIBLE_REPLICA")
    for i in range(MAX_EVENT_STEPS + 3):     # u@0: more ISR changes than a story tells
        b.event("controller-1", 10.0 + i, "isr_changed", topic="u", partition=0, leader=2, leader_epoch=0,
                partition_epoch=i + 1, isr=[2] if i % 2 else [2, 3], reason="alter_partition")
    d = tmp_path / "logs"
    for host, evs in b.events.items():
        (d / "cluster-logs" / host).mkdir(parents=True)
        (d / "cluster-logs" / host / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evs))
    v = check_run(d)
    assert v["mode"] == "events-only" and v["outcome"] == "inconclusive" and v["stories"] == []
    by = {(s["topic"], s["partition"]): s for s in v["event_stories"]}
    assert all(s["kind"] == EVENT_STORY for s in by.values())
    t0 = by[("t", 0)]
    assert t0["counts"]["alter_partition_rejected"] == 7 and t0["counts"]["rejected_by_error"] == {"INELIGIBLE_REPLICA": 7}
    rej = [x for x in t0["steps"] if x["kind"] == "alter_partition"]
    assert [x["count"] for x in rej] == [4, 3], rej
    assert rej[0]["event"] == {"source": "cluster-logs/controller-0/events.jsonl", "line": 3}
    assert t0["counts"]["controller_failovers"] == 1 and "t@0: 7 AlterPartition rejections" in t0["label"]
    u0 = by[("u", 0)]
    assert u0["counts"]["isr_changes"] == MAX_EVENT_STEPS + 3 and len(u0["steps"]) == MAX_EVENT_STEPS
    # its 15 ISR changes and the controller's resign and failover 30 s before them: 17 steps, 12 told
    assert u0["sentences"][-1] == "5 more events of u@0 are in the tables below."
    assert sum(x["kind"] == "controller" for x in u0["steps"]) == 2    # the gravest kept: a failover outranks an ISR change
    cluster = by[(None, None)]
    assert cluster["counts"]["controller_failovers"] == 1 and cluster["counts"]["controller_renounces"] == 1
    assert any("controller 1 became the active controller (epoch 4): a controller failover" in x
               for x in cluster["sentences"]), cluster["sentences"]


def test_metadata_quorum_loss_is_named_before_the_election_it_rolled_back(spark, tmp_path):
    """A broker told to truncate __cluster_metadata below its high watermark (the fatal fault real
    Kafka 3.8.0 logged, tests/checkers/kafka_logs_real/faultline-3.8.0-controller-disk-wipe-
    metadata-lost) before the loss: the story's mechanism is metadata_log_lost, the truncation
    the partition's own events show follows it. Without that event the same history is
    truncated_to_lossy_leader (test_truncated_to_lossy_leader)."""
    b = HistoryBuilder()
    lossy_leader(b, "md")
    b.event("broker-3", 3.5, "fatal_fault", role="broker", node=3, component="raft",
            fault="Unexpected error in raft IO thread", halted=True,
            error="The leader requested truncation to offset 58, which is below the current high watermark "
                  "LogOffsetMetadata(offset=83, metadata=Optional.empty)")
    v = check_run(b.write(tmp_path / "run", expect="loss", topic={"name": "md", "min_insync_replicas": 1}), spark=spark)
    (s,) = v["stories"]
    _shape(s)
    assert s["mechanisms"][:2] == ["metadata_log_lost", "truncated_to_lossy_leader"], s["mechanisms"]
    assert any("truncate __cluster_metadata to offset 58, below its high watermark 83" in x for x in s["sentences"])
