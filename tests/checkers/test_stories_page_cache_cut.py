"""A loss lying only where the page-cache cut removed bytes Kafka may have fsynced is labelled
``page_cache_cut_uncertain`` ("uncertain (page-cache cut)"), not blamed on Kafka.

The reboot nemesis records, in its timeline note, per partition the offsets its cut removed
although Kafka may have fsynced them (docs/nemeses.md, ``page_cache_cut.uncertain``: with
``log.flush.interval.messages``/``.ms`` set, or unknown flush settings, the point Kafka's last
flush reached is not on disk). Hand-built run directory in the real file formats, checked by the
real checker: three partitions lose writes the same way (the last replica standing, re-elected
after its page-cache loss); only the one whose whole loss lies in a recorded ``cut`` range is
relabelled. The controls keep Kafka's mechanism: a range that covers only part of the loss, and
a ``kept`` range (bytes kept that may not have been flushed cannot explain a loss).
"""
from __future__ import annotations

import pytest

from checkers.job import check_run
from checkers.stories import MECHANISMS
from tests.checkers.builder import HistoryBuilder


def _writes(b: HistoryBuilder, topic: str, n: int, t0: float, proc: str = "producer-0", first: int = 0) -> None:
    for i in range(n):
        b.send(proc, topic, 0, f"{proc}-{topic}-{first + i}", first + i, t0 + 0.1 * i)


def lrs_with_cut(b: HistoryBuilder, t: str, uncertain: dict) -> None:
    """ISR {1}; offsets 0-4 acked by broker 1 alone; its page-cache-loss reboot leaves 0-1; it is
    re-elected (ELR off) and offsets 2-3 are written again: 2-4 of producer-0 are lost."""
    b.event("controller", 1.0, "leader_elected", topic=t, partition=0, leader=1, leader_epoch=0, partition_epoch=0,
            isr=[1, 2], elr=[], reason="initial")
    b.event("controller", 2.0, "isr_changed", topic=t, partition=0, leader=1, leader_epoch=0, partition_epoch=1,
            isr=[1], elr=[], reason="alter_partition")
    _writes(b, t, 5, 3.0)
    b.fault(f"f-{t}", "reboot", ["broker-1"], 5.0, 6.5)
    b.timeline.append({"v": 1, "t": 5.2, "kind": "note", "fault_id": f"f-{t}", "what": "reboot applied",
                       "text": "broker-1: page-cache cut (kafka) removed 300 bytes",
                       "detail": {"broker-1": {"mode": "truncate-unflushed", "page_cache_cut": {
                           "flush_model": "kafka", "config_known": True, "truncated_bytes": 300,
                           "uncertain": [{"topic": t, "partition": 0, **uncertain}]}}}})
    b.event("controller", 5.5, "isr_changed", topic=t, partition=0, leader=-1, leader_epoch=0, partition_epoch=2,
            isr=[1], elr=[], reason="leader_fenced")
    b.event("broker-1", 6.8, "recovery", role="broker", node=1, topic=t, partition=0, recovery_point=2,
            log_end_offset=2, truncated_bytes=300, reason="unclean_shutdown")
    b.event("controller", 7.0, "broker_registered", broker=1, broker_epoch=40, previous_broker_epoch=-1,
            clean_shutdown=False)
    b.event("controller", 7.5, "leader_elected", topic=t, partition=0, leader=1, leader_epoch=1, partition_epoch=3,
            isr=[1], elr=[], reason="isr")
    _writes(b, t, 2, 9.0, proc="producer-1", first=2)
    vals = [(0, f"producer-0-{t}-0"), (1, f"producer-0-{t}-1"), (2, f"producer-1-{t}-2"), (3, f"producer-1-{t}-3")]
    b.drain(t, 0, vals, 4, 20.0, process=f"{t}.drain")


WHY = ["log.flush.interval.messages=3: which offsets the last flush reached depends on how appends grouped the batches"]
CASES = {
    "unc": {"cut": [2, 5], "cut_bytes": 300, "why": WHY},            # the whole loss (2-4) lies in it
    "part": {"cut": [3, 5], "cut_bytes": 200, "why": WHY},           # offset 2 was certainly unflushed
    "kept": {"kept": [0, 2], "kept_bytes": 120, "why": WHY},         # kept bytes explain no loss
}


@pytest.fixture(scope="module")
def stories(spark, tmp_path_factory):
    b = HistoryBuilder()
    for t, unc in CASES.items():
        lrs_with_cut(b, t, unc)
    rd = b.write(tmp_path_factory.mktemp("pcc") / "run", expect="no-loss", topic={"name": "t", "min_insync_replicas": 1})
    v = check_run(rd, spark=spark)
    return {s["topic"]: s for s in v["stories"]}


def test_loss_only_in_the_uncertain_cut_is_labelled_uncertain(stories):
    s = stories["unc"]
    assert s["lost"]["count"] == 3 and (s["lost"]["first_offset"], s["lost"]["last_offset"]) == (2, 4)
    assert s["mechanism"] == "page_cache_cut_uncertain" and s["label"] == MECHANISMS["page_cache_cut_uncertain"]
    assert s["label"].startswith("uncertain (page-cache cut)")
    assert s["mechanisms"][1] == "last_replica_standing"      # what the events alone would say, kept second
    told = [x for x in s["sentences"] if "uncertain (page-cache cut)" in x]
    assert told and "broker-1" in told[0] and "offsets 2-4" in told[0] and "log.flush.interval.messages=3" in told[0]
    step = next(st for st in s["steps"] if "uncertain (page-cache cut)" in st["text"])
    assert step["event"]["source"] == "timeline.jsonl"


@pytest.mark.parametrize("topic", ["part", "kept"])
def test_a_loss_the_uncertain_range_does_not_cover_stays_kafkas(stories, topic):
    s = stories[topic]
    assert s["lost"]["count"] == 3
    assert s["mechanism"] == "last_replica_standing" and "page_cache_cut_uncertain" not in s["mechanisms"]
    assert not any("uncertain (page-cache cut)" in x for x in s["sentences"])
