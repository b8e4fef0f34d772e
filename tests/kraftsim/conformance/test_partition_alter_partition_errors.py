"""The leader's pending ISR change and AlterPartition failures (Kafka's ``Partition.scala``).

``Partition.handleAlterPartitionError``: only INELIGIBLE_REPLICA and OPERATION_NOT_ATTEMPTED
reset the partition to its last committed state (the controller says the change was not
applied); UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, FENCED_LEADER_EPOCH,
INVALID_UPDATE_VERSION, INVALID_REQUEST, NEW_LEADER_ELECTED leave the pending state (and its
maximal ISR) in place until new metadata arrives, without a retry; any other error (a network
failure included) is retried (``AlterPartitionManager`` also resends after a lost connection —
"we will not timeout AlterPartition request, instead letting it retry indefinitely").

Cases from ``PartitionTest.scala``: testRetryShrinkIsr, handleAlterIsrFailure with
testAlterIsrInvalidVersion / testAlterIsrUnknownTopic / testAlterIsrNewLeaderElected /
testAlterIsrUnexpectedError, testIsrNotExpandedIfUpdateFails (INELIGIBLE_REPLICA).
"""
from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tests.kraftsim.conformance.broker_harness import BrokerSim


def _expansion_pending(tmp_path) -> BrokerSim:
    """handleAlterIsrFailure: replicas [1,2], ISR [1], 10 records; follower 2 fetches 10 → the
    leader proposes ISR [1,2]; maximal ISR [1,2], committed ISR [1]."""
    s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1], min_isr=1)
    s.append(10)
    assert s.r.hwm == 10
    s.fetch(2, 10)
    assert s.r.isr == [1] and sorted(s.r.maximal_isr) == [1, 2]
    assert s.pending_isr == [1, 2]
    return s


def test_shrink_kept_pending_on_network_error_then_committed(tmp_path):
    """PartitionTest.testRetryShrinkIsr: replicas [1,2] both in the ISR, 10 records, follower 2
    never fetches; the leader proposes ISR [1]; the request fails with NETWORK_EXCEPTION → ISR
    and maximal ISR stay [1,2], the change is retried, HWM stays 0; the retried change is
    committed (partition epoch 2) → ISR [1], HWM = LEO."""
    s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1, 2], min_isr=1)
    s.append(10)
    s.r.followers[2].last_caught_up -= 31.0
    s.r.maybe_shrink_isr()
    assert s.pending_isr == [1]
    s.answer(ErrorCode.network_exception, None)
    assert sorted(s.r.isr) == [1, 2] and sorted(s.r.maximal_isr) == [1, 2]
    assert s.r.partition_epoch == 1 and s.r.hwm == 0
    assert s.pending_isr == [1], "the shrink must be retried"
    s.answer(ErrorCode.none, s.alter_response([1], 2))
    assert s.r.isr == [1] and s.r.maximal_isr == [1] and s.r.partition_epoch == 2
    assert s.r.hwm == 10


@pytest.mark.parametrize("code", [ErrorCode.invalid_update_version, ErrorCode.unknown_topic_or_partition,
                                  ErrorCode.new_leader_elected, ErrorCode.fenced_leader_epoch],
                         ids=lambda c: c.name)
def test_pending_kept_without_retry_on_non_retriable_error(tmp_path, code):
    """PartitionTest.testAlterIsrInvalidVersion / testAlterIsrUnknownTopic /
    testAlterIsrNewLeaderElected: the failure leaves ISR [1] with maximal ISR [1,2] (Kafka cannot
    know whether the change was applied) and nothing is re-sent."""
    s = _expansion_pending(tmp_path)
    s.answer(code, None)
    assert s.r.isr == [1] and sorted(s.r.maximal_isr) == [1, 2]
    assert s.pending_isr is None


def test_pending_kept_and_retried_on_unexpected_error(tmp_path):
    """PartitionTest.testAlterIsrUnexpectedError (UNKNOWN_SERVER_ERROR): ISR [1], maximal ISR
    [1,2], and the change is submitted again."""
    s = _expansion_pending(tmp_path)
    s.answer(ErrorCode.unknown_server_error, None)
    assert s.r.isr == [1] and sorted(s.r.maximal_isr) == [1, 2]
    assert s.pending_isr == [1, 2]


@pytest.mark.parametrize("code", [ErrorCode.ineligible_replica, ErrorCode.operation_not_attempted],
                         ids=lambda c: c.name)
def test_rollback_only_on_ineligible_or_not_attempted(tmp_path, code):
    """``handleAlterPartitionError``: INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED reset to the
    last committed state: ISR and maximal ISR [1], nothing re-sent (testIsrNotExpandedIfUpdateFails)."""
    s = _expansion_pending(tmp_path)
    s.answer(code, None)
    assert s.r.isr == [1] and s.r.maximal_isr == [1]
    assert not s.r.alter_inflight


def test_newer_partition_epoch_clears_pending(tmp_path):
    """``Partition.makeLeader`` → ``updateAssignmentAndIsr``: metadata with a newer partition epoch
    replaces a pending change with the committed state (ISR [1] at partition epoch 3 → maximal
    ISR [1]); the next follower fetch may propose again (``maybeExpandIsr``)."""
    s = _expansion_pending(tmp_path)
    s.answer(ErrorCode.invalid_update_version, None)
    assert sorted(s.r.maximal_isr) == [1, 2]
    s.partition(leader=1, isr=[1], leader_epoch=5, partition_epoch=3)
    assert s.r.maximal_isr == [1] and s.r.partition_epoch == 3
    s.fetch(2, 10)
    assert s.pending_isr == [1, 2] and sorted(s.r.maximal_isr) == [1, 2]
