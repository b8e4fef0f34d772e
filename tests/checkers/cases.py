"""The table of hand-built histories: per anomaly a bad case and a good case.

Every case writes into its own topic with its own process names, so the whole table is one
run directory and one Spark check (Spark's per-job cost dominates tiny histories); a case's
verdict is the evidence rows carrying its topic.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tests.checkers.builder import HistoryBuilder

#: anomalies that make a run invalid (everything but the informational two)
INVALIDATING = ("lost_write", "inconsistent_offset", "duplicate", "offset_mismatch", "nonmonotonic_send",
                "send_skip", "realtime_offset_regression", "nonmonotonic_poll", "poll_skip",
                "failed_write_visible", "ack_below_min_isr", "visible_end_regression")


@dataclass
class Case:
    name: str                     # also the topic
    anomaly: str                  # the anomaly the case is about
    expected: int                 # evidence rows of `anomaly` with this topic (0 = good case)
    build: Callable[[HistoryBuilder, str], None]
    clean: bool = False           # good case: no invalidating anomaly at all in this topic
    absent: tuple[str, ...] = ()  # anomalies that must NOT be reported for this topic


def _p(t: str, n: int = 0) -> str:
    return f"{t}.producer-{n}"


def _v(t: str, seq: int, n: int = 0) -> str:
    return f"{_p(t, n)}-{seq}"


def lost_read_past(b: HistoryBuilder, t: str) -> None:
    for i in range(3):
        b.send(_p(t), t, 0, _v(t, i), i, 1.0 + i)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0)), (2, _v(t, 2))], 5.0)


def lost_drain_only_read(b: HistoryBuilder, t: str) -> None:
    # consumer lags; only the final drain reads offset 1: not lost
    for i in range(2):
        b.send(_p(t), t, 0, _v(t, i), i, 1.0 + i)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0))], 5.0)
    b.drain(t, 0, [(0, _v(t, 0)), (1, _v(t, 1))], 2, 20.0, process=f"{t}.drain")


def lost_truncated_drain(b: HistoryBuilder, t: str) -> None:
    # the drain read the whole partition, which ends below the acknowledged offset 1
    for i in range(2):
        b.send(_p(t), t, 0, _v(t, i), i, 1.0 + i)
    b.drain(t, 0, [(0, _v(t, 0))], 1, 20.0, process=f"{t}.drain")


def lost_read_then_replaced(b: HistoryBuilder, t: str) -> None:
    # read by a consumer, then the log was replaced (empty replica elected): the drain lacks it
    for i in range(2):
        b.send(_p(t, 0), t, 0, _v(t, i, 0), i, 1.0 + i)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0, 0)), (1, _v(t, 1, 0))], 3.5)
    b.send(_p(t, 1), t, 0, _v(t, 0, 1), 0, 5.0)
    b.drain(t, 0, [(0, _v(t, 0, 1))], 1, 20.0, process=f"{t}.drain")


def unseen_not_lost(b: HistoryBuilder, t: str) -> None:
    # nobody read past offset 1 and there was no drain: unseen at end, not lost
    for i in range(2):
        b.send(_p(t), t, 0, _v(t, i), i, 1.0 + i)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0))], 5.0)


def info_never_read(b: HistoryBuilder, t: str) -> None:
    b.send(_p(t), t, 0, _v(t, 0), 0, 1.0)
    b.send(_p(t), t, 0, _v(t, 1), None, 2.0, type="info", error="_MSG_TIMED_OUT")
    b.send(_p(t), t, 0, _v(t, 2), None, 2.5, type="none")   # writer died before completion
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0))], 5.0)
    b.drain(t, 0, [(0, _v(t, 0))], 1, 20.0, process=f"{t}.drain")


def clean_history(b: HistoryBuilder, t: str) -> None:
    for n in range(2):
        for i in range(3):
            b.send(_p(t, n), t, 0, _v(t, i, n), 2 * i + n, 1.0 + i + 0.3 * n)
    msgs = [(2 * i + n, _v(t, i, n)) for i in range(3) for n in range(2)]
    msgs.sort()
    b.poll(f"{t}.consumer-0", t, 0, msgs[:3], 5.0)
    b.poll(f"{t}.consumer-0", t, 0, msgs[3:], 6.0)
    b.drain(t, 0, msgs, 6, 20.0, process=f"{t}.drain")


def duplicate_two_offsets(b: HistoryBuilder, t: str) -> None:
    b.send(_p(t), t, 0, _v(t, 0), 0, 1.0)
    b.drain(t, 0, [(0, _v(t, 0)), (1, _v(t, 0))], 2, 20.0, process=f"{t}.drain")


def inconsistent(b: HistoryBuilder, t: str) -> None:
    b.send(_p(t, 0), t, 0, _v(t, 0, 0), 0, 1.0)
    b.send(_p(t, 1), t, 0, _v(t, 0, 1), 0, 1.0)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0, 0))], 5.0)
    b.poll(f"{t}.consumer-1", t, 0, [(0, _v(t, 0, 1))], 5.0)


def mismatch(b: HistoryBuilder, t: str) -> None:
    b.send(_p(t, 0), t, 0, _v(t, 0, 0), 0, 1.0)
    b.send(_p(t, 1), t, 0, _v(t, 0, 1), None, 1.0, type="info", error="REQUEST_TIMED_OUT")
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0, 1)), (1, _v(t, 0, 0))], 5.0)


def nonmono_send(b: HistoryBuilder, t: str) -> None:
    b.send(_p(t), t, 0, _v(t, 0), 1, 1.0)
    b.send(_p(t), t, 0, _v(t, 1), 0, 2.0)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 1)), (1, _v(t, 0))], 5.0)


def send_skip_bad(b: HistoryBuilder, t: str) -> None:
    # op1 a@0 ok, op2 b@2 ok, op3 c info - but c sits at offset 1, between a and b
    b.send(_p(t), t, 0, _v(t, 1), 0, 1.0)
    b.send(_p(t), t, 0, _v(t, 2), 2, 2.0)
    b.send(_p(t), t, 0, _v(t, 3), None, 3.0, type="info", error="_MSG_TIMED_OUT")
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 1)), (1, _v(t, 3)), (2, _v(t, 2))], 5.0)


def send_skip_acked(b: HistoryBuilder, t: str) -> None:
    # op1 a@0 ok, op2 b@2 ok, op3 c@1 ok: an acknowledged write sits out of order between a and b
    b.send(_p(t), t, 0, _v(t, 1), 0, 1.0)
    b.send(_p(t), t, 0, _v(t, 2), 2, 2.0)
    b.send(_p(t), t, 0, _v(t, 3), 1, 3.0)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 1)), (1, _v(t, 3)), (2, _v(t, 2))], 5.0)


def send_skip_good(b: HistoryBuilder, t: str) -> None:
    # op2 c (info) sent between a and b lands between them: fine
    b.send(_p(t), t, 0, _v(t, 1), 0, 1.0)
    b.send(_p(t), t, 0, _v(t, 2), None, 2.0, type="info", error="_MSG_TIMED_OUT")
    b.send(_p(t), t, 0, _v(t, 3), 2, 3.0)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 1)), (1, _v(t, 2)), (2, _v(t, 3))], 5.0)


def realtime_bad(b: HistoryBuilder, t: str) -> None:
    b.send(_p(t, 0), t, 0, _v(t, 0, 0), 5, 1.0, 1.1)
    b.send(_p(t, 1), t, 0, _v(t, 0, 1), 3, 2.0, 2.1)       # invoked after offset 5 was acked
    b.poll(f"{t}.consumer-0", t, 0, [(3, _v(t, 0, 1)), (5, _v(t, 0, 0))], 5.0)


def realtime_concurrent_ok(b: HistoryBuilder, t: str) -> None:
    b.send(_p(t, 0), t, 0, _v(t, 0, 0), 5, 1.0, 1.1)
    b.send(_p(t, 1), t, 0, _v(t, 0, 1), 3, 1.05, 1.2)     # invoked before the ack of 5: concurrent
    b.poll(f"{t}.consumer-0", t, 0, [(3, _v(t, 0, 1)), (5, _v(t, 0, 0))], 5.0)


def poll_nonmono(b: HistoryBuilder, t: str) -> None:
    for i in range(2):
        b.send(_p(t), t, 0, _v(t, i), i, 1.0 + i)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0)), (1, _v(t, 1))], 5.0)
    b.poll(f"{t}.consumer-0", t, 0, [(1, _v(t, 1))], 6.0)


def poll_skip_bad(b: HistoryBuilder, t: str) -> None:
    for i in range(3):
        b.send(_p(t), t, 0, _v(t, i), i, 1.0 + i)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0))], 5.0)
    b.poll(f"{t}.consumer-0", t, 0, [(2, _v(t, 2))], 6.0)
    b.poll(f"{t}.consumer-1", t, 0, [(0, _v(t, 0)), (1, _v(t, 1)), (2, _v(t, 2))], 5.0)


def poll_gap_ok(b: HistoryBuilder, t: str) -> None:
    # offset 1 was never observed by anyone (e.g. a control record): jumping it is not a skip
    b.send(_p(t), t, 0, _v(t, 0), 0, 1.0)
    b.send(_p(t), t, 0, _v(t, 2), 2, 2.0)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0))], 5.0)
    b.poll(f"{t}.consumer-0", t, 0, [(2, _v(t, 2))], 6.0)


def failed_visible_bad(b: HistoryBuilder, t: str) -> None:
    b.send(_p(t), t, 0, _v(t, 0), None, 1.0, type="fail", error="NOT_ENOUGH_REPLICAS", error_code=19)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0))], 5.0)


def failed_visible_allowed(b: HistoryBuilder, t: str) -> None:
    b.send(_p(t), t, 0, _v(t, 0), None, 1.0, type="fail", error="NOT_ENOUGH_REPLICAS_AFTER_APPEND", error_code=20)
    b.send(_p(t), t, 0, _v(t, 1), None, 2.0, type="info", error="REQUEST_TIMED_OUT", error_code=7)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0)), (1, _v(t, 1))], 5.0)


def min_isr_bad(b: HistoryBuilder, t: str) -> None:
    b.event("controller", 0.5, "isr_changed", topic=t, partition=0, leader=1, leader_epoch=0,
            partition_epoch=1, isr=[1], elr=[], reason="leader_fenced")
    b.send(_p(t), t, 0, _v(t, 0), 0, 1.0, 1.01)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0))], 5.0)


def min_isr_ok(b: HistoryBuilder, t: str) -> None:
    b.event("controller", 0.5, "isr_changed", topic=t, partition=0, leader=1, leader_epoch=0,
            partition_epoch=1, isr=[1], elr=[], reason="leader_fenced")
    b.event("controller", 1.005, "isr_changed", topic=t, partition=0, leader=1, leader_epoch=0,
            partition_epoch=2, isr=[1, 2], elr=[], reason="alter_partition")
    b.send(_p(t), t, 0, _v(t, 0), 0, 1.0, 1.01)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0))], 5.0)


def min_isr_leader_view_full(b: HistoryBuilder, t: str) -> None:
    # a leader cut from the controller: the controller shrank the ISR to [1], the leader never
    # learned it and acked with its own ISR [1, 2] (both replicas fetching) - Kafka's rule holds
    b.event("controller", 0.5, "isr_changed", topic=t, partition=0, leader=1, leader_epoch=0,
            partition_epoch=1, isr=[1], elr=[], reason="leader_fenced")
    b.event("broker-1", 0.1, "leader_isr", role="broker", node=1, topic=t, partition=0, broker=1,
            leader_epoch=0, partition_epoch=0, isr=[1, 2], maximal_isr=[1, 2])
    b.send(_p(t), t, 0, _v(t, 0), 0, 1.0, 1.01)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0))], 5.0)


def min_isr_leader_view_short(b: HistoryBuilder, t: str) -> None:
    # the acting leader's own maximal ISR was [1] when it acked, though the controller's said [1, 2]
    b.event("controller", 0.1, "isr_changed", topic=t, partition=0, leader=1, leader_epoch=0,
            partition_epoch=1, isr=[1, 2], elr=[], reason="alter_partition")
    b.event("broker-1", 0.5, "leader_isr", role="broker", node=1, topic=t, partition=0, broker=1,
            leader_epoch=0, partition_epoch=2, isr=[1], maximal_isr=[1])
    b.send(_p(t), t, 0, _v(t, 0), 0, 1.0, 1.01)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0))], 5.0)


# ---------------------------------------------------------------- the min ISR rule in force
# RF 2 and min.insync.replicas 3 (the runner refuses that, Kafka does not): from Kafka 3.7 the
# broker caps min ISR at the replication factor (Partition.effectiveMinIsr, KAFKA-15583
# edc7e10a745), so an ack held by both replicas is legal; before 3.7 the raw 3 applies and no
# acks=all write may succeed at all. One send per case, offset 1, invoked at 5.0, acked at 5.01.

def _follower_append(b: HistoryBuilder, t: str, at: float, frm: int, leo: int, broker: int = 2, epoch: int = 7) -> None:
    b.event(f"broker-{broker}", at, "follower_append", role="broker", node=broker, topic=t, partition=0,
            broker=broker, broker_epoch=epoch, leader=1, leader_epoch=0, from_offset=frm, log_end_offset=leo)


def _one_ack(b: HistoryBuilder, t: str) -> None:
    b.send(_p(t), t, 0, _v(t, 1), 1, 5.0, 5.01)
    b.poll(f"{t}.consumer-0", t, 0, [(1, _v(t, 1))], 12.0)


def rf2_replicas_two_copies(b: HistoryBuilder, t: str) -> None:
    # follower 2 fetched offset 1 at once: both replicas held it when it was acknowledged
    _follower_append(b, t, 0.5, 0, 1)
    _follower_append(b, t, 5.005, 1, 2)
    _follower_append(b, t, 9.0, 2, 3)
    _one_ack(b, t)


def rf2_replicas_one_copy(b: HistoryBuilder, t: str) -> None:
    # follower 2 appended nothing from 0.5 to 9.0 and then started from offset 1: when offset 1
    # was acknowledged only the leader had it - whatever the leader's ISR said (it said [1, 2])
    _follower_append(b, t, 0.5, 0, 1)
    _follower_append(b, t, 9.0, 1, 3)
    b.event("broker-1", 0.1, "leader_isr", role="broker", node=1, topic=t, partition=0, broker=1,
            leader_epoch=0, partition_epoch=0, isr=[1, 2], maximal_isr=[1, 2])
    _one_ack(b, t)


def rf2_leader_isr_two(b: HistoryBuilder, t: str) -> None:
    # no replica evidence (as on real Kafka): the leader's ISR view, [1, 2]
    b.event("broker-1", 0.1, "leader_isr", role="broker", node=1, topic=t, partition=0, broker=1,
            leader_epoch=0, partition_epoch=0, isr=[1, 2], maximal_isr=[1, 2])
    _one_ack(b, t)


def rf2_leader_isr_one(b: HistoryBuilder, t: str) -> None:
    b.event("broker-1", 0.1, "leader_isr", role="broker", node=1, topic=t, partition=0, broker=1,
            leader_epoch=0, partition_epoch=0, isr=[1], maximal_isr=[1])
    _one_ack(b, t)


@dataclass
class RuleCase:
    """A case judged under each min ISR rule: ``ack_below_min_isr`` rows with the cap in force
    (Kafka 3.7+), with the raw setting (before 3.7), and with the rule not recorded (assumed capped)."""
    name: str
    build: Callable[[HistoryBuilder, str], None]
    capped: int
    raw: int
    unrecorded: int
    judged_by: str


#: RF 2, min.insync.replicas 3
MIN_ISR_RULE_CASES: list[RuleCase] = [
    RuleCase("rf2-replicas-two-copies", rf2_replicas_two_copies, 0, 1, 0, "replica_logs"),
    RuleCase("rf2-replicas-one-copy", rf2_replicas_one_copy, 1, 1, 1, "replica_logs"),
    RuleCase("rf2-leader-isr-two", rf2_leader_isr_two, 0, 1, 0, "leader_isr"),
    RuleCase("rf2-leader-isr-one", rf2_leader_isr_one, 1, 1, 1, "leader_isr"),
]


def read_in_other_partition(b: HistoryBuilder, t: str) -> None:
    # value 1, acked at partition 0 offset 1, is read past in partition 0 but read in partition
    # 1: not lost (it was read), but it sits at two (partition, offset) places - a duplicate
    for i in range(3):
        b.send(_p(t), t, 0, _v(t, i), i, 1.0 + i)
    b.poll(f"{t}.consumer-0", t, 0, [(0, _v(t, 0)), (2, _v(t, 2))], 5.0)
    b.poll(f"{t}.consumer-1", t, 1, [(5, _v(t, 1))], 5.0)


def failed_visible_elsewhere(b: HistoryBuilder, t: str) -> None:
    # "never appended", yet read - in another partition than it was sent to
    b.send(_p(t), t, 0, _v(t, 0), None, 1.0, type="fail", error="NOT_LEADER_OR_FOLLOWER", error_code=6)
    b.poll(f"{t}.consumer-0", t, 1, [(0, _v(t, 0))], 5.0)


def duplicate_never_sent(b: HistoryBuilder, t: str) -> None:
    # a value no producer sent, read in two partitions: a duplicate judged from the reads alone
    b.poll(f"{t}.consumer-0", t, 0, [(0, f"{t}.ghost")], 5.0)
    b.poll(f"{t}.consumer-0", t, 1, [(0, f"{t}.ghost")], 6.0)


def end_regression(b: HistoryBuilder, t: str) -> None:
    for i in range(3):
        b.send(_p(t), t, 0, _v(t, i), i, 1.0 + i)
    b.drain(t, 0, [(0, _v(t, 0)), (1, _v(t, 1))], 2, 20.0, process=f"{t}.drain")


CASES: list[Case] = [
    Case("lost-read-past", "lost_write", 1, lost_read_past),
    Case("lost-truncated-drain", "lost_write", 1, lost_truncated_drain),
    Case("lost-read-then-replaced", "lost_write", 2, lost_read_then_replaced),
    Case("lost-drain-only-read", "lost_write", 0, lost_drain_only_read, clean=True),
    Case("unseen-not-lost", "unseen_at_end", 1, unseen_not_lost, absent=("lost_write",)),
    Case("info-never-read", "lost_write", 0, info_never_read, clean=True, absent=("unseen_at_end",)),
    Case("clean", "lost_write", 0, clean_history, clean=True, absent=("unseen_at_end",)),
    Case("duplicate-two-offsets", "duplicate", 1, duplicate_two_offsets, absent=("lost_write",)),
    Case("inconsistent-offset", "inconsistent_offset", 1, inconsistent),
    Case("offset-mismatch", "offset_mismatch", 1, mismatch, absent=("lost_write",)),
    Case("nonmonotonic-send", "nonmonotonic_send", 1, nonmono_send),
    Case("send-skip", "send_skip", 1, send_skip_bad),
    Case("send-skip-acked", "send_skip", 1, send_skip_acked),
    Case("send-between-ok", "send_skip", 0, send_skip_good, clean=True),
    Case("realtime-regression", "realtime_offset_regression", 1, realtime_bad),
    Case("realtime-concurrent-ok", "realtime_offset_regression", 0, realtime_concurrent_ok, clean=True),
    Case("nonmonotonic-poll", "nonmonotonic_poll", 1, poll_nonmono),
    Case("poll-skip", "poll_skip", 1, poll_skip_bad),
    Case("poll-gap-ok", "poll_skip", 0, poll_gap_ok, clean=True),
    Case("failed-visible", "failed_write_visible", 1, failed_visible_bad),
    Case("failed-visible-allowed", "failed_write_visible_allowed", 2, failed_visible_allowed,
         clean=True),
    Case("ack-below-min-isr", "ack_below_min_isr", 1, min_isr_bad),
    Case("ack-min-isr-restored", "ack_below_min_isr", 0, min_isr_ok, clean=True),
    Case("ack-min-isr-leader-view-full", "ack_below_min_isr", 0, min_isr_leader_view_full, clean=True),
    Case("ack-min-isr-leader-view-short", "ack_below_min_isr", 1, min_isr_leader_view_short),
    Case("visible-end-regression", "visible_end_regression", 1, end_regression),
    Case("read-in-other-partition", "duplicate", 1, read_in_other_partition, absent=("lost_write", "unseen_at_end")),
    Case("failed-visible-elsewhere", "failed_write_visible", 1, failed_visible_elsewhere),
    Case("duplicate-never-sent", "duplicate", 1, duplicate_never_sent),
]


def build_table() -> HistoryBuilder:
    b = HistoryBuilder()
    for c in CASES:
        c.build(b, c.name)
    # attribution for lost-read-past: a fault, an election and an AlterPartition in its window
    b.fault("f-kill", "kill", ["broker-1"], 2.5, 3.5)
    b.fault("f-late", "partition", ["broker-3"], 100.0, 110.0)   # long after: must not be attributed
    b.event("controller", 3.0, "leader_elected", topic="lost-read-past", partition=0, leader=2, leader_epoch=3,
            partition_epoch=5, isr=[2], elr=[], reason="leader_fenced", leader_recovery_state=0, candidates=[2])
    b.event("controller", 2.9, "alter_partition", topic="lost-read-past", partition=0, leader=1, new_isr=[1, 2],
            broker_epochs={"2": 7}, partition_epoch=4, version=2, accepted=True, error=None, error_code=0)
    b.event("controller", 2.95, "broker_registered", broker=2, broker_epoch=7, previous_broker_epoch=-1,
            clean_shutdown=False)
    b.event("broker-1", 3.2, "truncation", role="broker", node=2, topic="lost-read-past", partition=0,
            from_offset=3, to_offset=1, reason="leader_epoch_change")
    # the winner's side (docs/seeds.md#seed-004): its log ends at 1, below the lost offset 1's end - it never had it;
    # a takeover 0.5 s before the ack (inside the clock slack) lacked the write too, but removed nothing
    b.event("broker-2", 3.05, "became_leader", role="broker", node=2, topic="lost-read-past", partition=0,
            broker=2, leader_epoch=3, log_start_offset=0, log_end_offset=1, hwm=1, local_log_size_bytes=70,
            local_log_start_timestamp=1_700_000_000_000, leader_recovery_state=0)
    b.event("broker-1", 1.5, "became_leader", role="broker", node=1, topic="lost-read-past", partition=0,
            broker=1, leader_epoch=2, log_start_offset=0, log_end_offset=0, hwm=0, local_log_size_bytes=0,
            local_log_start_timestamp=-1, leader_recovery_state=0)
    return b
