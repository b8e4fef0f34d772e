"""Leader epoch bumps of a partition change, ported from Kafka's PartitionChangeBuilderTest.

Kafka: ``PartitionChangeBuilder.triggerLeaderEpochBumpForIsrShrinkIfNeeded`` bumps the leader
epoch when the ISR shrinks, but only while ``MetadataVersion.isLeaderEpochBumpRequiredOnIsrShrink``
(before IBP_3_6_IV0, KAFKA-15021); an expansion never bumps it. ``PartitionRegistration.merge``
adds one to the partition epoch on every change and one to the leader epoch whenever the record
sets a leader.
"""
from __future__ import annotations

import pytest

from tests.kraftsim.conformance.controller_harness import alter, brokers, controller, create, part


@pytest.mark.parametrize("mv", ["3.4-IV0", "3.5-IV2"])
def test_partition_change_isr_shrink_bumps_leader_epoch_before_3_6(tmp_path, mv):
    """PartitionChangeBuilderTest.testLeaderEpochBumpOnIsrShrink (3.4-IV0, 3.5-IV2): an ISR shrink
    from the leader's AlterPartition bumps the leader epoch (leader unchanged) and the response
    carries the new leader epoch."""
    c = controller(tmp_path, **{"metadata.version": mv})
    brokers(c, 1, 2, 3)
    create(c, [1, 2, 3])
    before = part(c)
    _, err, resp = alter(c, 1, [1, 2], version=2)
    assert err.name == "none"
    ps = part(c)
    assert ps.leader == 1 and ps.isr == [1, 2]
    assert ps.leader_epoch == before.leader_epoch + 1 and ps.partition_epoch == before.partition_epoch + 1
    assert int(resp.leader_epoch) == ps.leader_epoch


@pytest.mark.parametrize("mv", ["3.6-IV0", "3.7-IV2", "4.0-IV0"])
def test_partition_change_isr_shrink_keeps_leader_epoch_from_3_6(tmp_path, mv):
    """PartitionChangeBuilderTest.testNoLeaderEpochBumpOnIsrShrink (3.6-IV0, 3.7-IV2, 4.0-IV0): no bump."""
    c = controller(tmp_path, **{"metadata.version": mv})
    brokers(c, 1, 2, 3)
    create(c, [1, 2, 3])
    before = part(c)
    _, err, _ = alter(c, 1, [1, 2])
    assert err.name == "none"
    ps = part(c)
    assert ps.leader_epoch == before.leader_epoch and ps.partition_epoch == before.partition_epoch + 1


@pytest.mark.parametrize("mv", ["3.4-IV0", "3.5-IV2", "3.6-IV0", "4.0-IV0"])
def test_partition_change_isr_expansion_never_bumps_leader_epoch(tmp_path, mv):
    """PartitionChangeBuilderTest.testNoLeaderEpochBumpOnIsrExpansion: expansions never bump."""
    c = controller(tmp_path, **{"metadata.version": mv})
    brokers(c, 1, 2, 3)
    create(c, [1, 2, 3])
    version = 3 if mv >= "3.5-IV1" else 2
    _, err, _ = alter(c, 1, [1, 2], version=version)
    assert err.name == "none"
    before = part(c)
    _, err, _ = alter(c, 1, [1, 2, 3], version=version)
    assert err.name == "none"
    ps = part(c)
    assert ps.isr == [1, 2, 3] and ps.leader_epoch == before.leader_epoch
