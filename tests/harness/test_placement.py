"""topic.placement: seeded - the assignment the harness gives a topic from the run's seed.

The property that matters is that it is a function of the seed and the brokers alone (the same
on kraftsim and real Kafka, run after run) and a placement Kafka's own placer could have made:
every partition on distinct brokers, leaders spread evenly. Bad values are refused at load.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from groundwork.config import ConfigError
from harness.campaign import load_campaign
from harness.placement import seeded_assignment

REPO = Path(__file__).resolve().parents[2]


def test_the_same_seed_and_brokers_give_the_same_assignment_and_seeds_differ():
    a = seeded_assignment([3, 1, 2], 6, 2, seed=7)
    assert a == seeded_assignment([1, 2, 3], 6, 2, seed=7)           # broker order given does not matter
    assert len({str(seeded_assignment([1, 2, 3, 4, 5], 4, 3, s)) for s in range(20)}) > 5


@pytest.mark.parametrize("brokers,partitions,rf", [([1, 2, 3], 3, 2), ([1, 2, 3], 12, 3), ([10, 20, 30, 40, 50], 7, 3)])
def test_each_partition_on_distinct_brokers_and_leaders_spread(brokers, partitions, rf):
    a = seeded_assignment(brokers, partitions, rf, seed=11)
    assert len(a) == partitions
    assert all(len(r) == rf and len(set(r)) == rf and set(r) <= set(brokers) for r in a)
    leaders = Counter(r[0] for r in a)
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1


def test_more_replicas_than_brokers_is_refused():
    with pytest.raises(ValueError):
        seeded_assignment([1, 2], 3, 3, seed=1)


def test_a_campaign_names_the_placement_or_is_refused(tmp_path):
    camp = load_campaign(REPO / "campaigns" / "chaos-vulnerable.yaml")
    assert camp.topic.placement == "seeded"
    assert load_campaign(REPO / "campaigns" / "kill-restart.yaml").topic.placement == "controller"
    with pytest.raises(ConfigError) as e:
        load_campaign(REPO / "campaigns" / "kill-restart.yaml", overrides=["topic.placement=random"])
    assert "topic.placement" in str(e.value) and "controller, seeded" in str(e.value)
