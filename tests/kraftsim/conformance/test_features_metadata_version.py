"""Feature gates derived from metadata.version, ported from Kafka's MetadataVersion / MetadataVersionTest.

Kafka (server-common ``MetadataVersion.java``): KIP-903 replica epochs from IBP_3_5_IV1 (Fetch v15,
``fetchRequestVersion``); the ISR-shrink leader epoch bump while
``isLeaderEpochBumpRequiredOnIsrShrink`` (before IBP_3_6_IV0); ELR supported from IBP_4_0_IV1
(``isElrSupported``), its feature on by default for new clusters from 4.1; leader recovery
(KIP-704) from IBP_3_2_IV0 (``isLeaderRecoverySupported``). ``fromVersionString("3.5")`` is the
release's latest IV.
"""
from __future__ import annotations

import json

import pytest

from kraftsim import features

CASES = [  # (metadata.version, kip903, leader epoch bump on ISR shrink, ELR)
    ("3.4", False, True, False),
    ("3.5-IV0", False, True, False),
    ("3.5-IV1", True, True, False),
    ("3.5", True, True, False),        # 3.5-IV2
    ("3.6-IV0", True, False, False),
    ("3.9", True, False, False),
    ("4.0", True, False, False),       # ELR supported, but the feature is opt-in on 4.0
    ("4.1", True, False, True),
]


@pytest.mark.parametrize("mv,kip903,bump,elr", CASES)
def test_features_gates_follow_metadata_version(mv, kip903, bump, elr):
    f = features.derive({"metadata.version": features.parse_metadata_version(mv)})
    assert (f.kip903, f.leader_epoch_bump_on_isr_shrink, f.elr) == (kip903, bump, elr)
    assert f.describe()["kip903"] == {"enabled": kip903, "from": "metadata.version"}


def test_features_release_without_iv_is_its_latest_iv():
    assert features.parse_metadata_version("3.5") == (3, 5, 2)
    assert features.parse_metadata_version("4.0") == (4, 0, 3)
    assert features.parse_metadata_version("3.7") == (3, 7, 4)


@pytest.mark.slow
def test_features_recorded_by_the_cluster_launcher(kraftsim_cluster):
    """The run records what was in force: DIR/features.json and a ``features`` event from the
    controller, both saying metadata.version 3.4-IV0 and KIP-903 off."""
    cl = kraftsim_cluster(brokers=1, settings={"metadata.version": "3.4"})
    doc = json.loads((cl.dir / "features.json").read_text())
    assert doc["metadata.version"] == "3.4-IV0" and doc["kip903"]["enabled"] is False
    ev = cl.wait_event(lambda e: e["event"] == "features")
    assert ev["metadata.version"] == "3.4-IV0" and ev["elr"]["enabled"] is False
