"""``topic.configs`` in a campaign: further topic configs (Kafka's names) passed to CreateTopics.

Why: campaigns/leader-choice.yaml needs a tiered topic (``remote.storage.enable``,
``local.retention.ms``, KIP-405), which is a topic config, not a broker one.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from groundwork.config import ConfigError
from harness.campaign import load_campaign

ROOT = Path(__file__).resolve().parents[2]


def _camp(tmp: Path, topic: str) -> Path:
    p = tmp / "c.yaml"
    p.write_text(f"target: {{inventory: {ROOT / 'inventory' / 'local.yaml'}}}\ntopic: {topic}\n"
                 "nemesis: {schedule: none}\n")
    return p


def test_topic_configs_are_read_as_strings(tmp_path: Path) -> None:
    c = load_campaign(_camp(tmp_path, "{configs: {remote.storage.enable: true, local.retention.ms: 15000}}"))
    assert c.topic.configs == {"remote.storage.enable": "true", "local.retention.ms": "15000"}


def test_leader_choice_campaign_has_a_tiered_topic() -> None:
    c = load_campaign(ROOT / "campaigns" / "leader-choice.yaml")
    assert c.topic.configs["remote.storage.enable"] == "true"


@pytest.mark.parametrize("topic, want", [
    ("{configs: {a: {b: 1}}}", "topic.configs.a"),
    ("{configs: {min.insync.replicas: 2}}", "topic.min_insync_replicas"),
    ("{configs: [1]}", "topic.configs"),
])
def test_bad_topic_configs_name_the_field(tmp_path: Path, topic: str, want: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_campaign(_camp(tmp_path, topic))
    assert want in str(e.value) and "\n" not in str(e.value)
