"""Real Kafka's events while a run goes on: a campaign's ``until:`` steps (``restarted``, a new
active controller) wait on registrations and elections, which on real Kafka are only in its log4j
files. :meth:`harness.cluster.Cluster.events_since` reads the hosts' current files with the
checker's own reader (checkers/kafkalog), so a step sees an event as the checker will. Before it,
a real Kafka host gave no events at all and ``restarted`` meant only "the JVM runs". The lines
are a real 4.1.0 run's (the embedded Apache Kafka target), verbatim."""
from __future__ import annotations

from pathlib import Path

from harness.cluster import Cluster
from harness.inventory import load_inventory

CONTROLLER_LOG = """\
[2026-11-27 16:55:48,543] INFO [QuorumController id=1000] Becoming the active controller at epoch 1, next write offset 1. (org.apache.kafka.controller.QuorumController)
"""
BROKER_LOG = """\
[2026-11-27 16:56:53,731] INFO [BrokerLifecycleManager id=1] Incarnation WgDsTkFtShe85f403UIlJA of broker 1 in cluster Vf1W-xVmm8qEvGcTNL2mdA is now STARTING. (kafka.server.BrokerLifecycleManager)
[2026-11-27 16:56:53,963] INFO [BrokerLifecycleManager id=1] Successfully registered broker 1 with broker epoch 162 (kafka.server.BrokerLifecycleManager)
"""


def test_events_come_from_the_live_kafka_logs(tmp_path: Path) -> None:
    logs = {"controller": tmp_path / "c-logs", "broker-1": tmp_path / "b-logs"}
    for d in logs.values():
        d.mkdir()
    (logs["controller"] / "controller.log").write_text(CONTROLLER_LOG)
    (logs["broker-1"] / "server.log").write_text("")
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"""all:
  vars: {{faultline_transport: local, kafka_bootstrap: '127.0.0.1:1'}}
  children:
    brokers:
      hosts:
        broker-1: {{kafka_node_id: 1, kafka_log_dir: {logs['broker-1']}, kafka_log_timezone: UTC,
                    kafka_service: {{command: 'sleep 1', pidfile: {tmp_path}/b.pid}}}}
    controllers:
      hosts:
        controller: {{kafka_node_id: 1000, kafka_log_dir: {logs['controller']}, kafka_log_timezone: UTC,
                      kafka_service: {{command: 'sleep 1', pidfile: {tmp_path}/c.pid}}}}
""")
    cluster = Cluster.from_inventory(load_inventory(inv))
    try:
        assert all(cluster.has_events(n) for n in cluster.nodes.values())
        evs = cluster.events_since(0.0)
        assert [(e["event"], e["node"], e["controller_epoch"]) for e in evs] == [("controller_activated", 1000, 1)]
        (logs["broker-1"] / "server.log").write_text(BROKER_LOG)   # the broker registers
        cluster._events_cache = cluster._kafka_cache = (0.0, [])    # past the caches
        reg = [e for e in cluster.events_since(evs[0]["wall"] + 1) if e["event"] == "broker_registered"]
        assert [(e["broker"], e["broker_epoch"]) for e in reg] == [(1, 162)]
    finally:
        cluster.close_live()
    assert cluster._live_dir is None
