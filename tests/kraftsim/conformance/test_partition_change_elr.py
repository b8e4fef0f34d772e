"""ELR bookkeeping of a partition change (KIP-966), ported from Kafka's PartitionChangeBuilderTest
and ReplicationControlManagerTest.

Kafka: ``PartitionChangeBuilder.maybePopulateTargetElr`` runs on EVERY partition change (an
AlterPartition from the leader, a fenced broker, a controlled shutdown, an unclean restart):
when the target ISR is below the (effective) min ISR, every member of the current ISR or ELR that
is not in the target ISR and did not shut down uncleanly goes into the ELR; when the target ISR is
at least min ISR, ELR and LastKnownELR are cleared. In the last-known-leader mode
ReplicationControlManager uses, the LastKnownELR holds only the last known leader
(``maybeUpdateLastKnownLeader``), set when the partition first becomes leaderless with an empty ISR. ELR lists are compared as sets: Kafka builds them from a HashSet.
"""
from __future__ import annotations

from kraftsim.metadata import NO_LEADER

from tests.kraftsim.conformance.controller_harness import (alter, brokers, controller, create,
                                                             heartbeat, part, register, set_partition)

ELR_ON = {"metadata.version": "4.1"}


def test_partition_change_elr_filled_by_leader_initiated_isr_shrink(tmp_path):
    """ReplicationControlManagerTest.testEligibleLeaderReplicas_ShrinkAndExpandIsr: RF 3, min ISR 2,
    the leader's AlterPartition shrinks the ISR to {0}: ELR = {1, 2}, LastKnownELR empty; the
    expansion back to {0, 1} (≥ min ISR) clears the ELR (PartitionChangeBuilder.maybePopulateTargetElr)."""
    c = controller(tmp_path, **ELR_ON)
    brokers(c, 1, 2, 3)
    create(c, [1, 2, 3], min_isr=2)
    top, err, _ = alter(c, 1, [1])
    assert (top.name, err.name) == ("none", "none")
    ps = part(c)
    assert ps.isr == [1] and sorted(ps.elr) == [2, 3] and ps.last_known_elr == []
    top, err, _ = alter(c, 1, [1, 2])
    assert err.name == "none"
    ps = part(c)
    assert ps.isr == [1, 2] and ps.elr == [] and ps.last_known_elr == []


def test_partition_change_elr_isr_shrink_below_min_isr(tmp_path):
    """PartitionChangeBuilderTest.testEligibleLeaderReplicas_IsrShrinkBelowMinISR: replicas and ISR
    {1,2,3,4}, min ISR 3, target ISR {1,2} → the record sets ISR {1,2} and ELR {3,4}."""
    c = controller(tmp_path, **ELR_ON)
    brokers(c, 1, 2, 3, 4)
    create(c, [1, 2, 3, 4], min_isr=3)
    _, err, _ = alter(c, 1, [1, 2])
    assert err.name == "none"
    ps = part(c)
    assert ps.isr == [1, 2] and sorted(ps.elr) == [3, 4] and ps.last_known_elr == []


def test_partition_change_elr_cleared_when_isr_reaches_min_isr(tmp_path):
    """PartitionChangeBuilderTest.testEligibleLeaderReplicas_IsrExpandAboveMinISR: ISR {1,2},
    ELR {3}, LastKnownELR {4}, min ISR 3; target ISR {1,2,3} → ELR and LastKnownELR both empty."""
    c = controller(tmp_path, **ELR_ON)
    brokers(c, 1, 2, 3, 4)
    create(c, [1, 2, 3, 4], min_isr=3)
    set_partition(c, isr=[1, 2], elr=[3], last_known_elr=[4])
    _, err, _ = alter(c, 1, [1, 2, 3])
    assert err.name == "none"
    ps = part(c)
    assert ps.isr == [1, 2, 3] and ps.elr == [] and ps.last_known_elr == []


def test_partition_change_elr_kept_when_new_isr_member_is_not_in_elr(tmp_path):
    """PartitionChangeBuilderTest.testEligibleLeaderReplicas_IsrAddNewMemberNotInELR: ISR {1}, ELR {3},
    min ISR 3; target ISR {1,4} (still below min ISR) → ELR stays {3}. With the last-known-leader mode
    Kafka's controller uses, LastKnownELR is cleared because the partition has a leader
    (PartitionChangeBuilder.maybeUpdateLastKnownLeader)."""
    c = controller(tmp_path, **ELR_ON)
    brokers(c, 1, 2, 3, 4)
    create(c, [1, 2, 3, 4], min_isr=3)
    set_partition(c, isr=[1], elr=[3], last_known_elr=[2])
    _, err, _ = alter(c, 1, [1, 4])
    assert err.name == "none"
    ps = part(c)
    assert ps.isr == [1, 4] and ps.elr == [3] and ps.last_known_elr == []


def test_partition_change_elr_on_broker_fence(tmp_path):
    """ReplicationControlManagerTest.testEligibleLeaderReplicas_BrokerFence (broker ids +1): RF 4,
    min ISR 3. Fencing 3 then 4 → ELR {4} (3 left while the ISR was still at min ISR); fencing 2
    → ELR {2, 4}; unfencing everyone leaves the ELR alone (ReplicationControlManager
    .handleBrokerUnfenced only elects leaders of leaderless partitions)."""
    c = controller(tmp_path, **ELR_ON)
    brokers(c, 1, 2, 3, 4)
    create(c, [1, 2, 3, 4], min_isr=3)
    c.fence(3, "session_timeout")
    c.fence(4, "session_timeout")
    ps = part(c)
    assert ps.isr == [1, 2] and ps.elr == [4] and ps.last_known_elr == []
    c.fence(2, "session_timeout")
    ps = part(c)
    assert ps.isr == [1] and sorted(ps.elr) == [2, 4] and ps.last_known_elr == []
    for b in (2, 3, 4):
        heartbeat(c, b)
    ps = part(c)
    assert ps.isr == [1] and sorted(ps.elr) == [2, 4] and ps.last_known_elr == [] and ps.leader == 1


def test_partition_change_clean_election_from_elr(tmp_path):
    """ReplicationControlManagerTest.testEligibleLeaderReplicas_CleanElection: RF 4 ({1,2,3,4} here
    for Kafka's {0,1,2,3}), min ISR 3. Fence {2,3,4} → ISR {1}, ELR {3,4}. Unfence 3, then fence
    {1,2} → 3 is elected from the ELR (a clean election: RECOVERED), ISR {3}, ELR {1,4},
    LastKnownELR empty (PartitionChangeBuilder.tryElection moves the ELR winner into the ISR)."""
    c = controller(tmp_path, **ELR_ON)
    brokers(c, 1, 2, 3, 4)
    create(c, [1, 2, 3, 4], min_isr=3)
    for b in (2, 3, 4):
        c.fence(b, "session_timeout")
    ps = part(c)
    assert ps.isr == [1] and sorted(ps.elr) == [3, 4] and ps.last_known_elr == []
    heartbeat(c, 3)
    for b in (1, 2):
        c.fence(b, "session_timeout")
    ps = part(c)
    assert ps.leader == 3 and ps.isr == [3] and sorted(ps.elr) == [1, 4] and ps.last_known_elr == []
    assert ps.leader_recovery_state == 0


def test_partition_change_unclean_shutdown_leaves_elr_and_last_isr_member_is_last_known_leader(tmp_path):
    """ReplicationControlManagerTest.testEligibleLeaderReplicas_UncleanShutdown: RF 4, min ISR 3;
    fence {2,3,4} → ELR {3,4}. An unclean restart of 4 (an ELR member) removes it from the ELR;
    LastKnownELR stays empty. An unclean restart of 1 (the last ISR member and leader) leaves
    ELR {3} and LastKnownELR {1}: the last known leader (ReplicationControlManager
    .handleBrokerUncleanShutdown → PartitionChangeBuilder with uncleanShutdownReplicas)."""
    c = controller(tmp_path, **ELR_ON)
    brokers(c, 1, 2, 3, 4)
    create(c, [1, 2, 3, 4], min_isr=3)
    for b in (2, 3, 4):
        c.fence(b, "session_timeout")
    assert sorted(part(c).elr) == [3, 4]
    register(c, 4, prev=-1)                 # a new incarnation that cannot prove a clean shutdown
    ps = part(c)
    assert ps.elr == [3] and ps.last_known_elr == [], ps
    c.fence(1, "session_timeout")
    register(c, 1, prev=-1)
    ps = part(c)
    assert ps.elr == [3] and ps.last_known_elr == [1] and ps.leader == NO_LEADER, ps


def test_partition_change_last_known_elr_holds_the_last_leader_only(tmp_path):
    """PartitionChangeBuilderTest.testEligibleLeaderReplicas_IsrCanShrinkToZero: ISR {1,2,3,4},
    leader 1, min ISR 3, every replica goes offline → ISR empty, no leader, ELR = the replicas that
    left below min ISR, LastKnownELR = {1} (the last leader, set the first time the partition becomes
    leaderless). A later unclean restart of an ELR member (2) does not touch the LastKnownELR
    (PartitionChangeBuilder.maybeUpdateLastKnownLeader / maybeUpdateRecordElr)."""
    c = controller(tmp_path, **ELR_ON)
    brokers(c, 1, 2, 3, 4)
    create(c, [1, 2, 3, 4], min_isr=3)
    for b in (4, 3, 2, 1):
        c.fence(b, "session_timeout")
    ps = part(c)
    assert ps.isr == [] and ps.leader == NO_LEADER and sorted(ps.elr) == [1, 2, 3]
    assert ps.last_known_elr == [1], ps
    register(c, 2, prev=-1)
    ps = part(c)
    assert sorted(ps.elr) == [1, 3] and ps.last_known_elr == [1], ps
