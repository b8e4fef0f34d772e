"""Feature gates from kafka.version (software) and metadata.version (protocol), as Kafka has them.

Kafka (server-common ``MetadataVersion.java``) gates protocol formats by metadata.version: KIP-903
replica epochs from IBP_3_5_IV1 (Fetch v15, ``fetchRequestVersion``), the ISR-shrink leader epoch
bump while ``isLeaderEpochBumpRequiredOnIsrShrink`` (before IBP_3_6_IV0), ELR supported from
IBP_4_0_IV1 (``isElrSupported``) and on by default for new clusters from 4.1, leader recovery
(KIP-704) from IBP_3_2_IV0. ``fromVersionString("3.5")`` is the release's latest IV. Most fixes are
software changes instead, in force whatever the metadata.version: KAFKA-15583's high-watermark
rule and effectiveMinIsr (edc7e10a745, first 3.7.0), KAFKA-15221's stale-epoch fencing
(d46781d4db3, 3.7.0), KAFKA-15021's skip of the bump (8ad0ed3e618, 3.6.0: software before 3.6
always bumps). A cluster of 3.9 software at metadata.version 3.4 has the software fixes and not
the protocol ones (MetadataVersionTest and the commits' own tests pin each threshold).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kraftsim import features
from kraftsim.config import ConfigError, load
from tests.kraftsim.conftest import REPO

CASES = [  # (metadata.version, kip903, leader epoch bump on ISR shrink, ELR) with the default kafka.version
    ("3.4", False, True, False),
    ("3.5-IV0", False, True, False),
    ("3.5-IV1", True, True, False),
    ("3.5", True, True, False),        # 3.5-IV2
    ("3.6-IV0", True, False, False),
    ("3.9", True, False, False),
    ("4.0", True, False, False),       # ELR supported, but the feature is opt-in on 4.0
    ("4.1", True, False, True),
]


def _derive(mv: str, kv: str | None = None, **extra) -> features.Features:
    return features.derive({"metadata.version": features.parse_metadata_version(mv),
                            "kafka.version": features.parse_kafka_version(kv) if kv else None, **extra})


@pytest.mark.parametrize("mv,kip903,bump,elr", CASES)
def test_features_gates_follow_metadata_version(mv, kip903, bump, elr):
    f = _derive(mv)
    assert (f.kip903, f.leader_epoch_bump_on_isr_shrink, f.elr) == (kip903, bump, elr)
    assert f.describe()["gates"]["kip903"]["on"] is kip903


def test_features_release_without_iv_is_its_latest_iv():
    assert features.parse_metadata_version("3.5") == (3, 5, 2)
    assert features.parse_metadata_version("4.0") == (4, 0, 3)
    assert features.parse_metadata_version("3.7") == (3, 7, 4)


@pytest.mark.parametrize("mv,kv", [("3.4", "3.4.0"), ("3.5-IV0", "3.5.0"), ("3.7", "3.7.0"), ("4.1-IV0", "4.1.0")])
def test_features_default_kafka_version_is_the_release_that_introduced_the_metadata_version(mv, kv):
    """MetadataVersion.release(): every IV of x.y first ships in x.y.0."""
    f = _derive(mv)
    assert features.format_kafka_version(f.kafka_version) == kv and f.kafka_version_default
    assert f.describe()["kafka.version"] == kv and f.describe()["kafka.version.default"] is True


def test_features_software_gates_follow_kafka_version_at_one_metadata_version():
    """The same metadata.version 3.6-IV2 on 3.6.2 and 3.7.0 software: KAFKA-15583 (HWM under min
    ISR, effectiveMinIsr) and KAFKA-15221 (stale replica epoch fenced) are on only on 3.7.0; the
    protocol gates do not move."""
    old, new = _derive("3.6", "3.6.2"), _derive("3.6", "3.7.0")
    for g in ("hwm_requires_min_isr", "effective_min_isr", "fetch_fences_stale_replica_epoch"):
        assert (getattr(old, g), getattr(new, g)) == (False, True), g
        assert new.decided_by[g] == "kafka.version"
    assert old.kip903 and new.kip903 and not old.leader_epoch_bump_on_isr_shrink


def test_features_upgraded_software_at_an_old_metadata_version():
    """3.9 software at metadata.version 3.4 (the state after a rolling upgrade before the feature
    upgrade): KIP-903 off (protocol: no Fetch v15 epochs) - decided by metadata.version; the HWM
    rule on (software) - decided by kafka.version; the ISR-shrink bump on, by metadata.version
    (3.9's PartitionChangeBuilder bumps only below IBP_3_6_IV0); AlterPartition v3 (software)."""
    f = _derive("3.4", "3.9.0")
    d = f.describe()
    assert d["kafka.version"] == "3.9.0" and d["kafka.version.default"] is False and d["metadata.version"] == "3.4-IV0"
    g = d["gates"]
    assert (g["kip903"]["on"], g["kip903"]["decided_by"], g["kip903"]["kind"]) == (False, "metadata.version", "both")
    assert (g["hwm_requires_min_isr"]["on"], g["hwm_requires_min_isr"]["decided_by"]) == (True, "kafka.version")
    assert (g["leader_epoch_bump_on_isr_shrink"]["on"],
            g["leader_epoch_bump_on_isr_shrink"]["decided_by"]) == (True, "metadata.version")
    assert g["alter_partition_v3"]["on"] is True and g["elr"]["on"] is False
    # 3.4.0 software at the same level: the bump is the software's own rule too (both versions)
    assert _derive("3.4", "3.4.0").decided_by["leader_epoch_bump_on_isr_shrink"] == "both"


def test_features_every_gate_is_declared_with_kind_citation_and_thresholds():
    for g in features.GATES:
        d = g.describe()
        assert d["kind"] in ("software", "protocol", "both") and d["cite"] and d["kafka_name"]
        assert ("kafka.version" in d) == (g.kind in ("software", "both"))
        assert ("metadata.version" in d) == (g.kind in ("protocol", "both"))


def test_docs_gate_table_lists_every_gate():
    """docs/kraftsim.md "Versions and gates" names every declared gate, its kind and thresholds."""
    text = (REPO / "docs" / "kraftsim.md").read_text()
    table = text[text.index("## Versions and gates"):text.index("## Fidelity")]
    for g in features.GATES:
        row = next((ln for ln in table.splitlines() if ln.startswith(f"| `{g.name}` |")), None)
        assert row is not None, g.name
        assert f"| {g.kind}" in row, row
        d = g.describe()
        for key in ("kafka.version", "metadata.version"):
            if key in d:
                assert f"{key} {d[key]}" in row, row


def test_features_override_is_recorded_as_what_decided():
    f = _derive("3.4", **{"kip903.enabled": True})
    assert f.kip903 and f.decided_by["kip903"] == "kip903.enabled"


def _props(tmp_path, **kv) -> object:
    p = tmp_path / "b.properties"
    base = {"node.id": "1", "listeners": "PLAINTEXT://127.0.0.2:9092", "log.dirs": str(tmp_path / "d"),
            "controller.quorum.bootstrap.servers": "127.0.0.1:9093", **kv}
    p.write_text("".join(f"{k}={v}\n" for k, v in base.items()))
    return p


def test_kafka_version_older_than_the_metadata_version_is_one_line(tmp_path):
    """A broker cannot run a finalized metadata.version its software does not support (Kafka's
    BrokerFeatures / QuorumFeatures.reasonNotSupported): one line naming the file and the key."""
    p = _props(tmp_path, **{"metadata.version": "3.5", "kafka.version": "3.4.1"})
    with pytest.raises(ConfigError) as e:
        load(p, "broker")
    msg = str(e.value)
    assert msg.startswith(f"kraftsim: {p}: key 'kafka.version': 3.4.1 is older than metadata.version 3.5-IV2")
    assert "\n" not in msg
    with pytest.raises(ConfigError, match="key 'kafka.version': 'three' is not a Kafka release: one like"):
        load(_props(tmp_path, **{"kafka.version": "three"}), "broker")


@pytest.mark.parametrize("key,value,want", [
    ("metadata.version", "9.9", "9.9 is not a Kafka metadata version (no Kafka release line 9.9); nearest: 4.4"),
    ("metadata.version", "3.10", "3.10 is not a Kafka metadata version (no Kafka release line 3.10); "
                                 "nearest: 3.9 or 4.0"),
    ("metadata.version", "3.7-IV5", "3.7-IV5 is not a Kafka metadata version; nearest: 3.7-IV4 or 3.8-IV0"),
    ("metadata.version", "3.0-IV0", "3.0-IV0 is not a Kafka metadata version; nearest: 3.0-IV1"),
    ("kafka.version", "3.4.9", "3.4.9 is not a Kafka release; nearest: 3.4.1 or 3.5.0"),
    ("kafka.version", "3.10.0", "3.10.0 is not a Kafka release; nearest: 3.9.2 or 4.0.0"),
])
def test_a_version_kafka_never_had_is_refused_naming_the_nearest(tmp_path, key, value, want):
    """Only releases and feature levels Kafka shipped (kraftsim/versions.py): "9.9" once ran with
    every gate on, recorded as Kafka 9.9.0."""
    with pytest.raises(ConfigError) as e:
        load(_props(tmp_path, **{key: value}), "broker")
    assert str(e.value).startswith(f"kraftsim: {tmp_path / 'b.properties'}: key '{key}': {want}"), str(e.value)
    assert "\n" not in str(e.value)


def test_kafka_4_runs_no_metadata_version_below_3_3_iv3(tmp_path):
    """MetadataVersion.MINIMUM_VERSION (4.0.0): IBP_3_3_IV3; 3.9 software still runs 3.0-IV1."""
    with pytest.raises(ConfigError, match=r"key 'kafka.version': Kafka 4.0.0 runs no metadata.version older than "
                                          r"3.3-IV3 \(MetadataVersion.MINIMUM_VERSION\), got 3.3-IV2"):
        load(_props(tmp_path, **{"metadata.version": "3.3-IV2", "kafka.version": "4.0.0"}), "broker")
    assert load(_props(tmp_path, **{"metadata.version": "3.3-IV3", "kafka.version": "4.0.0"}), "broker")
    assert load(_props(tmp_path, **{"metadata.version": "3.0", "kafka.version": "3.9.2"}), "broker")


def test_versions_table_through_the_program():
    """What the harness reads (it never imports kraftsim): every line with its releases and IVs."""
    import json
    out = subprocess.run([sys.executable, "-m", "kraftsim", "versions", "--json"], cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    lines = {x["line"]: x for x in json.loads(out)["lines"]}
    assert lines["3.4"]["releases"] == ["3.4.0", "3.4.1"] and lines["3.4"]["metadata_versions"] == ["3.4-IV0"]
    assert lines["3.7"]["metadata_version"] == "3.7-IV4" and lines["4.1"]["introduced_by"] == "4.1.0"
    assert lines["4.0"]["min_metadata_version"] == "3.3-IV3" and lines["3.9"]["min_metadata_version"] == "3.0-IV1"
    assert lines["3.0"]["metadata_versions"] == ["3.0-IV1"]


def test_kafka_version_refused_by_the_cluster_launcher(tmp_path):
    p = subprocess.run([sys.executable, "-m", "kraftsim", "cluster", "--brokers", "1", "--dir", str(tmp_path / "c"),
                        "--set", "metadata.version=4.1", "--set", "kafka.version=3.9.0"],
                       cwd=REPO, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == ("kraftsim: cluster: --set: key 'kafka.version': 3.9.0 is older than metadata.version "
                                "4.1-IV1, which Kafka 4.1.0 introduced: a kafka.version of at least 4.1.0 is wanted")
    assert not (tmp_path / "c" / "features.json").exists()


def test_timing_profile_kafka_defaults_sets_kafkas_timeouts_and_explicit_keys_win(tmp_path):
    """``timing=kafka-defaults``: Kafka's defaults (ReplicationConfigs, KRaftConfigs, QuorumConfig:
    30 s / 9 s / 2 s / 1 s / 2 s, isr-expiration every lag / 2, HWM checkpoint 5 s, fetch backoff
    1 s); a key given beside the profile wins; ``fast`` keeps kraftsim's short defaults."""
    cfg = load(_props(tmp_path, timing="kafka-defaults", **{"broker.session.timeout.ms": "4000"}), "broker")
    assert cfg["replica.lag.time.max.ms"] == 30000 and cfg["broker.heartbeat.interval.ms"] == 2000
    assert cfg["controller.quorum.election.timeout.ms"] == 1000 and cfg["controller.quorum.fetch.timeout.ms"] == 2000
    assert cfg["replica.high.watermark.checkpoint.interval.ms"] == 5000 and cfg["replica.fetch.backoff.ms"] == 1000
    assert cfg["broker.session.timeout.ms"] == 4000
    assert cfg.isr_expiration_s == 15.0  # ReplicaManager: isr-expiration every replicaLagTimeMaxMs / 2
    assert cfg.features.describe()["timing"] == "kafka-defaults"
    fast = load(_props(tmp_path), "broker")
    assert fast["replica.lag.time.max.ms"] == 3000 and fast["broker.session.timeout.ms"] == 3000
    assert fast.isr_expiration_s == 0.5 and fast.features.describe()["timing"] == "fast"
    with pytest.raises(ConfigError, match="key 'timing': one of fast, kafka-defaults is wanted"):
        load(_props(tmp_path, timing="slow"), "broker")


@pytest.mark.slow
def test_features_recorded_by_the_cluster_launcher(kraftsim_cluster):
    """The run records what was in force: DIR/features.json and a ``features`` event from the
    controller, both saying kafka.version 3.9.0, metadata.version 3.4-IV0, KIP-903 off by the
    metadata.version and the HWM rule on by the kafka.version."""
    cl = kraftsim_cluster(brokers=1, settings={"metadata.version": "3.4", "kafka.version": "3.9.0"})
    doc = json.loads((cl.dir / "features.json").read_text())
    assert doc["metadata.version"] == "3.4-IV0" and doc["kafka.version"] == "3.9.0"
    assert doc["gates"]["kip903"]["on"] is False and doc["gates"]["kip903"]["decided_by"] == "metadata.version"
    assert doc["gates"]["hwm_requires_min_isr"] == {**doc["gates"]["hwm_requires_min_isr"], "on": True,
                                                     "decided_by": "kafka.version"}
    ev = cl.wait_event(lambda e: e["event"] == "features")
    assert ev["metadata.version"] == "3.4-IV0" and ev["kafka.version"] == "3.9.0"
    assert ev["gates"] == doc["gates"]
