"""Leader election, ported from Kafka's PartitionChangeBuilderTest.

Kafka (``PartitionChangeBuilder.electAnyLeader`` / ``tryElection`` / ``canElectLastKnownLeader``):
1. the current leader if it is still a valid leader; else the first replica in replica order that
   is in the target ISR, or, when the target ISR is empty, in the ELR, and is an acceptable
   leader (registered, unfenced, not in controlled shutdown); an ELR winner becomes the ISR alone
   and leaves the ELR — a clean election;
2. with ELR on and ISR and ELR both empty, the last known leader (LastKnownELR of exactly one
   member; it must be acceptable — KAFKA-19522, Kafka 4.1): an UNCLEAN election;
3. with ``unclean.leader.election.enable``, the first acceptable replica: unclean.
An unclean election sets ISR = [leader], LeaderRecoveryState RECOVERING (when the metadata
version supports it) and clears ELR and LastKnownELR (``maybeUpdateRecordElr``). A clean change
of leader never changes the recovery state (``testChangeInLeadershipDoesNotChangeRecoveryState``).
"""
from __future__ import annotations

import json

from kraftsim.metadata import NO_LEADER, RECOVERED, RECOVERING

from tests.kraftsim.conformance.controller_harness import (brokers, controller, create, fence_quietly, heartbeat,
                                                             part, set_partition)


def test_election_last_known_leader_is_an_unclean_election(tmp_path):
    """PartitionChangeBuilderTest.testEligibleLeaderReplicas_ElectLastKnownLeader: replicas
    {1,2,3,4}, ISR and ELR empty, LastKnownELR {1}, no leader, min ISR 3, 1 acceptable → leader 1,
    ISR {1}, RECOVERING, LastKnownELR cleared (the trigger here is 1 being unfenced:
    ReplicationControlManager.handleBrokerUnfenced elects leaderless partitions)."""
    c = controller(tmp_path, **{"metadata.version": "4.1"})
    brokers(c, 1, 2, 3, 4)
    create(c, [1, 2, 3, 4], min_isr=3)
    fence_quietly(c, 1)
    set_partition(c, isr=[], elr=[], last_known_elr=[1], leader=NO_LEADER)
    heartbeat(c, 1)
    ps = part(c)
    assert ps.leader == 1 and ps.isr == [1] and ps.leader_recovery_state == RECOVERING, ps
    assert ps.elr == [] and ps.last_known_elr == []
    ev = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    won = [e for e in ev if e["event"] == "leader_elected" and e["leader"] == 1 and e["leader_epoch"] == ps.leader_epoch]
    assert won and won[-1]["reason"] == "last_known_leader" and won[-1]["leader_recovery_state"] == RECOVERING


def test_election_last_known_leader_not_elected_while_elr_is_not_empty(tmp_path):
    """PartitionChangeBuilderTest.testEligibleLeaderReplicas_ElectLastKnownLeaderShouldFail: ISR
    empty, ELR {3} (3 fenced), LastKnownELR {1} → no change: the ELR member is waited for."""
    c = controller(tmp_path, **{"metadata.version": "4.1"})
    brokers(c, 1, 2, 3, 4)
    create(c, [1, 2, 3, 4], min_isr=3)
    fence_quietly(c, 3)
    fence_quietly(c, 1)
    set_partition(c, isr=[], elr=[3], last_known_elr=[1], leader=NO_LEADER)
    heartbeat(c, 1)
    ps = part(c)
    assert ps.leader == NO_LEADER and ps.isr == [] and ps.elr == [3] and ps.last_known_elr == [1], ps


def test_election_fenced_last_known_leader_is_not_elected(tmp_path):
    """KAFKA-19522 (Kafka 4.1, PartitionChangeBuilder.canElectLastKnownLeader): the last known
    leader is elected only if it is an acceptable leader; a fenced one leaves the partition offline."""
    c = controller(tmp_path, **{"metadata.version": "4.1"})
    brokers(c, 1, 2, 3, 4)
    create(c, [1, 2, 3, 4], min_isr=3)
    fence_quietly(c, 1)
    fence_quietly(c, 2)
    set_partition(c, isr=[], elr=[], last_known_elr=[1], leader=NO_LEADER)
    heartbeat(c, 2)   # an unfencing triggers the leaderless-partition election
    ps = part(c)
    assert ps.leader == NO_LEADER and ps.last_known_elr == [1], ps


def test_election_elr_member_is_a_clean_election(tmp_path):
    """PartitionChangeBuilderTest.testEligibleLeaderReplicas_ElrCanBeElected: ISR {1}, ELR {3},
    leader 1, min ISR 3; 1 goes offline → leader 3, ISR {3}, ELR {1}, recovery state unchanged."""
    c = controller(tmp_path, **{"metadata.version": "4.1"})
    brokers(c, 1, 2, 3, 4)
    create(c, [1, 2, 3, 4], min_isr=3)
    set_partition(c, isr=[1], elr=[3], last_known_elr=[])
    c.fence(1, "session_timeout")
    ps = part(c)
    assert ps.leader == 3 and ps.isr == [3] and ps.elr == [1] and ps.leader_recovery_state == RECOVERED, ps


def test_election_unclean_clears_elr_and_sets_recovering(tmp_path):
    """PartitionChangeBuilderTest.testUncleanLeaderElection (OFFLINE_WITH_ELR): replicas {2,1,3},
    ISR empty, ELR {3}, LastKnownELR {2}, no leader, only 1 acceptable, unclean election on →
    leader 1, ISR {1}, RECOVERING, ELR and LastKnownELR cleared."""
    c = controller(tmp_path, **{"metadata.version": "4.1"})
    brokers(c, 1, 2, 3)
    create(c, [2, 1, 3], min_isr=2, unclean=True)
    for b in (1, 2, 3):
        fence_quietly(c, b)
    set_partition(c, isr=[], elr=[3], last_known_elr=[2], leader=NO_LEADER)
    heartbeat(c, 1)
    ps = part(c)
    assert ps.leader == 1 and ps.isr == [1] and ps.leader_recovery_state == RECOVERING, ps
    assert ps.elr == [] and ps.last_known_elr == []


def test_election_unclean_picks_first_acceptable_replica_in_replica_order(tmp_path):
    """PartitionChangeBuilderTest.testElectLeader / testUncleanLeaderElection (FOO): replicas
    {2,1,3}, ISR {3} with 3 not acceptable → no clean leader; with unclean election 2 (the first
    acceptable replica in replica order, although 1 is the broker being unfenced), ISR {2},
    RECOVERING. ELR off (metadata.version 3.9)."""
    c = controller(tmp_path, **{"metadata.version": "3.9"})
    brokers(c, 1, 2, 3)
    create(c, [2, 1, 3], unclean=True)
    fence_quietly(c, 1)
    fence_quietly(c, 3)
    set_partition(c, isr=[3], leader=NO_LEADER)
    heartbeat(c, 1)
    ps = part(c)
    assert ps.leader == 2 and ps.isr == [2] and ps.leader_recovery_state == RECOVERING, ps


def test_election_clean_leader_change_keeps_recovering_state(tmp_path):
    """PartitionChangeBuilderTest.testChangeInLeadershipDoesNotChangeRecoveryState: leader 1
    RECOVERING, ISR {1}; 1 goes offline → no leader, ISR {1}, still RECOVERING; 1 is back → leader 1
    (clean, from the ISR), still RECOVERING (only the leader's AlterPartition marks it RECOVERED)."""
    c = controller(tmp_path, **{"metadata.version": "3.9"})
    brokers(c, 1, 2, 3)
    create(c, [1, 2, 3], min_isr=2)
    set_partition(c, isr=[1], leader_recovery_state=RECOVERING)
    c.fence(1, "session_timeout")
    ps = part(c)
    assert ps.leader == NO_LEADER and ps.isr == [1] and ps.leader_recovery_state == RECOVERING, ps
    heartbeat(c, 1)
    ps = part(c)
    assert ps.leader == 1 and ps.isr == [1] and ps.leader_recovery_state == RECOVERING, ps


def test_election_isr_before_elr_in_replica_order(tmp_path):
    """PartitionChangeBuilderTest.testElectLeader: a valid current leader is kept; otherwise the
    first ISR member in replica order wins (replicas {2,1,3}, ISR {1,3}, leader 1 fenced → 3 — the
    only acceptable ISR member — not the ELR or an out-of-sync replica)."""
    c = controller(tmp_path, **{"metadata.version": "4.1"})
    brokers(c, 1, 2, 3)
    create(c, [2, 1, 3], min_isr=1)
    set_partition(c, isr=[1, 3], leader=1)
    c.fence(1, "session_timeout")
    ps = part(c)
    assert ps.leader == 3 and ps.isr == [3] and ps.leader_recovery_state == RECOVERED


def test_election_unclean_before_3_2_does_not_mark_recovering(tmp_path):
    """PartitionChangeBuilderTest.testUncleanSetsLeaderRecoveringState(isLeaderRecoverySupported=false):
    before IBP_3_2_IV0 (MetadataVersion.isLeaderRecoverySupported) an unclean election sets
    ISR = [leader] but leaves the recovery state RECOVERED (KIP-704 arrived with 3.2)."""
    c = controller(tmp_path, **{"metadata.version": "3.1"})
    brokers(c, 1, 2, 3)
    create(c, [1, 2, 3], unclean=True)
    for b in (1, 2, 3):
        fence_quietly(c, b)
    set_partition(c, isr=[2, 3], leader=NO_LEADER)
    heartbeat(c, 1)
    ps = part(c)
    assert ps.leader == 1 and ps.isr == [1] and ps.leader_recovery_state == RECOVERED, ps
