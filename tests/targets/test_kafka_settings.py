"""A campaign's settings as real Kafka takes them (targets/kafka_settings.py), and the release a
campaign runs (targets/apache_kafka.resolve_release): what is refused is refused in one line."""
from __future__ import annotations

import re

import pytest

from groundwork.config import ConfigError
from kraftsim.config import KEYS as KRAFTSIM_KEYS
from targets.apache_kafka import plan_nodes, resolve_release
from targets.kafka_settings import FAST, is_kafka_uuid, random_uuid, server_properties, sort


def test_the_fast_profile_is_kraftsims_defaults_under_kafkas_keys():
    """`timing: fast` must mean the same timeouts on both targets: each key's value is kraftsim's
    default (kraftsim/config.py KEYS), so a change to one side fails here."""
    for key, text in FAST.items():
        assert key in KRAFTSIM_KEYS, f"{key} is not a kraftsim key"
        assert int(text) == KRAFTSIM_KEYS[key][1], f"{key}: Kafka's fast profile {text}, kraftsim {KRAFTSIM_KEYS[key][1]}"


def test_settings_are_sorted_into_release_format_timing_and_properties():
    s = sort({"kafka.version": "3.6.2", "metadata.version": "3.4", "timing": "kafka-defaults",
              "unclean.leader.election.enable": True, "min.insync.replicas": 2,
              "eligible.leader.replicas.version": 1, "seed002.self.fence.enable": False})
    assert (s.release, s.metadata_version, s.timing) == ("3.6.2", "3.4", "kafka-defaults")
    assert s.features == {"eligible.leader.replicas.version": "1"}
    assert server_properties(s) == {"unclean.leader.election.enable": "true", "min.insync.replicas": "2"}
    assert server_properties(sort({}))["broker.session.timeout.ms"] == "3000"


@pytest.mark.parametrize("key,value,want", [
    ("kip903.enabled", "false", "kraftsim only"),
    ("isr.expiration.interval.ms", "100", "kraftsim only"),
    ("seed002.self.fence.enable", "true", "seed 002"),
    ("leader.election.eligible.local.log.ms", "1000", "seed 004"),
    ("faultline.control.ack_without_replication", "true", "checker control"),
    ("remote.log.storage.system.enable", "true", "RemoteStorageManager"),
    ("listeners", "PLAINTEXT://x:1", "set by the embedded Apache Kafka target"),
    ("metadata.version", "four", "metadata version like 3.4"),
    ("cluster.id", "kraftsim-cluster-0000000", "base64 Uuid"),
    ("timing", "slow", "fast, kafka-defaults"),
])
def test_what_real_kafka_cannot_take_is_one_line_naming_the_key(key, value, want):
    with pytest.raises(ConfigError) as e:
        sort({key: value})
    assert want in str(e.value) and f"target.settings.{key}" in str(e.value) and "\n" not in str(e.value)


def test_the_release_comes_from_the_target_else_kafka_version_else_metadata_version():
    assert resolve_release("3.9.1", sort({})) == "3.9.1"
    assert resolve_release(None, sort({"kafka.version": "3.6.2", "metadata.version": "3.4"})) == "3.6.2"
    assert resolve_release(None, sort({"metadata.version": "3.4"})) == "3.4.0"
    assert resolve_release(None, sort({"metadata.version": "3.9-IV0"})) == "3.9.0"
    assert resolve_release(None, sort({})) == "4.1.0"
    with pytest.raises(ConfigError, match="differs from the target's release 4.1.0"):
        resolve_release("4.1.0", sort({"kafka.version": "3.9.1"}))


def test_cluster_ids_are_kafka_uuids():
    ids = {random_uuid() for _ in range(200)}
    assert len(ids) == 200 and all(is_kafka_uuid(i) and not i.startswith("-") for i in ids)
    assert not is_kafka_uuid("kraftsim-cluster-0000000")


def test_nodes_are_named_and_numbered_as_kraftsims():
    assert [(n.name, n.role, n.node_id) for n in plan_nodes(3, 1, False)] == [
        ("controller", "controller", 1000), ("broker-1", "broker", 1), ("broker-2", "broker", 2), ("broker-3", "broker", 3)]
    assert [n.name for n in plan_nodes(2, 3, False)][:3] == ["controller-1", "controller-2", "controller-3"]
    assert [(n.name, n.role) for n in plan_nodes(3, 1, True)] == [("broker-1", "combined"), ("broker-2", "broker"),
                                                                 ("broker-3", "broker")]
    with pytest.raises(ConfigError, match="combined mode"):
        plan_nodes(2, 3, True)


def test_the_log4j_configs_faultline_writes_keep_every_logger_the_reader_needs_at_info(tmp_path):
    """Kafka's own log4j.properties (3.x) and log4j2.yaml (4.x), as targets/kafka_log4j.py writes them,
    read by preflight's log4j reader: no logger the Kafka-log reader takes events from
    (checkers/kafkalog/loggers.py) is above INFO, and a quieter copy is caught (the control)."""
    from harness.preflight.log4j import levels, too_quiet
    from targets.kafka_log4j import write

    for kind in ("log4j1", "log4j2"):
        f, prop = write(tmp_path, kind)
        assert str(f) in prop
        text = f.read_text()
        assert too_quiet(levels(text, f.name)) == [], kind
        quiet = text.replace("log4j.logger.state.change.logger=INFO", "log4j.logger.state.change.logger=WARN") \
            if kind == "log4j1" else text.replace("      - name: state.change.logger\n        level: INFO",
                                                  "      - name: state.change.logger\n        level: WARN")
        assert quiet != text and too_quiet(levels(quiet, f.name)), kind


def test_kraft_version_chooses_the_quorum_kind_and_nothing_else_passes():
    """kraft.version is the format's choice of quorum (0 static, 1 KIP-853's dynamic one), never a
    server.properties key; anything else is one line naming the key."""
    assert sort({}).kraft_version == "0"
    s = sort({"kraft.version": 1, "kafka.version": "3.9.0"})
    assert s.kraft_version == "1" and "kraft.version" not in server_properties(s)
    with pytest.raises(ConfigError, match=r"target\.settings\.kraft\.version: 0 \(a static quorum\) or 1"):
        sort({"kraft.version": 2})


def test_a_dynamic_quorum_names_its_voters_at_the_first_format_only(tmp_path):
    """KIP-853: every voter once as id@host:port:directory-id (drawn once per cluster), the quorum
    in controller.quorum.bootstrap.servers; the format passes what it is given, after --feature."""
    from groundwork.ledger import Ledger
    from targets.apache_kafka import EmbeddedApacheKafka, format_command, node_properties
    ek = EmbeddedApacheKafka(tmp_path, version="3.9.0", brokers=1, controllers=3, settings={"kraft.version": 1},
                             ledger=Ledger(tmp_path / "ledger.jsonl"))
    voters = ek.initial_controllers().split(",")
    assert ek.initial_controllers().split(",") == voters and ek.dynamic_quorum
    assert len(voters) == 3 and all(re.fullmatch(r"100\d@[\w.]*:9093:[A-Za-z0-9_-]{22}", v) for v in voters), voters
    cmd = format_command("java", "cp", "ID", "c.properties", ek.kafka, (), ("--no-initial-controllers",))
    assert cmd.endswith("--ignore-formatted --no-initial-controllers"), cmd
    props = node_properties("controller", 1000, "10.0.0.1", voters="1000@10.0.0.1:9093", log_dirs=["/d"],
                            metadata_log_dir=None, brokers=1, settings=ek.kafka, bootstrap="10.0.0.1:9093")
    assert props["controller.quorum.bootstrap.servers"] == "10.0.0.1:9093" and "controller.quorum.voters" not in props
