"""Leader-side ISR shrink and expansion rules (Kafka's ``Partition.scala``).

- shrink (``maybeShrinkIsr`` → ``getOutOfSyncReplicas``): an ISR member is out of sync only if
  it is not caught up (``Replica.isCaughtUp``: neither at the leader's LEO nor caught up within
  replica.lag.time.max.ms) — an idle partition never loses a follower that has everything;
- expansion (``maybeExpandIsr`` → ``canAddReplicaToIsr`` / ``isFollowerInSync`` /
  ``isReplicaIsrEligible``): the follower reached the HWM and the leader epoch start offset, is
  unfenced and not shutting down, and its Fetch broker epoch equals the metadata image's
  (``isBrokerEpochIsrEligible``: a Fetch without ReplicaEpoch, -1, is not checked).

Cases from ``PartitionTest.scala``: testShouldNotShrinkIsrIfFollowerCaughtUpToLogEnd,
testIsrNotShrunkIfUpdateFails (shrink proposed after the lag), testIsrNotExpandedIfReplicaIsFencedOrShutdown,
testIsrCanExpandedIfBrokerEpochsMatchWithKraftMetadataCache, testFenceFollowerFetchWithStaleBrokerEpoch.
"""
from __future__ import annotations

import pytest

from tests.kraftsim.conformance.broker_harness import BrokerSim, broker_epoch_of


def test_no_shrink_when_follower_caught_up_to_log_end(tmp_path):
    """testShouldNotShrinkIsrIfFollowerCaughtUpToLogEnd: replicas [1,2] in the ISR, 10 records,
    follower 2 fetches 10 (HWM 10); more than replica.lag.time.max.ms passes with no new write →
    no shrink proposed."""
    s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1, 2], min_isr=1)
    s.append(10)
    s.fetch(2, 10)
    assert s.r.hwm == 10
    s.r.followers[2].last_caught_up -= 31.0  # time.sleep(30001)
    s.r.maybe_shrink_isr()
    assert sorted(s.r.isr) == [1, 2] and s.pending_isr is None


def test_shrink_after_lag_when_follower_behind(tmp_path):
    """testIsrNotShrunkIfUpdateFails (first half): follower 2 never fetched; after the lag the
    leader proposes ISR [1] while the committed ISR stays [1,2] and the HWM 0."""
    s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1, 2], min_isr=1)
    s.append(10)
    s.r.followers[2].last_caught_up -= 31.0
    s.r.maybe_shrink_isr()
    assert s.pending_isr == [1] and sorted(s.r.isr) == [1, 2] and s.r.hwm == 0


@pytest.mark.parametrize("state", ["fenced", "shutdown"])
def test_no_expansion_for_fenced_or_shutting_down_replica(tmp_path, state):
    """testIsrNotExpandedIfReplicaIsFencedOrShutdown: replicas [1,2], ISR [1], 10 records;
    follower 2 is fenced / in controlled shutdown and fetches 10 → no expansion proposed."""
    s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1], min_isr=1)
    s.append(10)
    s.fence(2) if state == "fenced" else s.shutting_down(2)
    s.fetch(2, 10)
    assert s.r.isr == [1] and s.pending_isr is None


@pytest.mark.parametrize("fetch_epoch,expands", [(broker_epoch_of(2), True), (broker_epoch_of(2) - 1, False),
                                                 (-1, True)], ids=["epochs-match", "stale-epoch", "no-replica-epoch"])
def test_expansion_broker_epoch_rule(tmp_path, fetch_epoch, expands):
    """testIsrCanExpandedIfBrokerEpochsMatchWithKraftMetadataCache / testFenceFollowerFetchWithStaleBrokerEpoch
    (KIP-903, metadata.version 3.5+): replicas [1,2], ISR [1], follower 2 catches up; with the
    Fetch broker epoch equal to the image's → ISR [1,2] proposed; stale → not; a Fetch without
    ReplicaEpoch (-1) is not checked (``isBrokerEpochIsrEligible``) → proposed."""
    s = BrokerSim(tmp_path, replicas=[1, 2], isr=[1], min_isr=1)
    s.append(10)
    s.r.on_follower_fetch(2, 10, fetch_epoch)
    assert (s.pending_isr == [1, 2]) is expands
