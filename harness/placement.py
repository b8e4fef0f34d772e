"""The topic's replica assignment from the run's seed: the same placement on every target.

Why: Kafka's controller places a new topic's replicas with StripedReplicaPlacer, whose start
position is random (``new Random()`` in the QuorumController, not seedable from outside), so
real Kafka puts partition 0 on different brokers run to run, and kraftsim's placer differs again.
A random fault mix replays the same faults on the same hosts for a seed (nemeses/random_plan.py),
but what a fault does depends on which replicas those hosts hold: the same seed lost 2,801 writes
on real Kafka 4.1.0 and none on kraftsim (campaigns/chaos-vulnerable.yaml, seed 3, 29 Nov 2026:
the rebooted broker was partition 0's last ISR member on one, held no replica of it on the
other). ``topic.placement: seeded`` makes the harness choose the assignment - striped as
Kafka's placer stripes it without racks (partition p's replicas are consecutive brokers from a
start that moves by one per partition, so leaders spread evenly), the order of brokers drawn
from the seed - and create the topic with it (CreateTopics with a manual assignment), so both
targets hold the same replicas where the faults land.
"""
from __future__ import annotations

import random


def seeded_assignment(broker_ids: list[int], partitions: int, replication_factor: int, seed: int) -> list[list[int]]:
    """Each partition's replicas, its preferred leader first."""
    if replication_factor > len(broker_ids):
        raise ValueError(f"replication factor {replication_factor} is more than the {len(broker_ids)} brokers")
    order = sorted(broker_ids)
    random.Random(seed).shuffle(order)
    n = len(order)
    return [[order[(p + k) % n] for k in range(replication_factor)] for p in range(partitions)]
