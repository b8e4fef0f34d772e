"""LogManager.shutdown marks a log dir cleanly shut down only when it had the marker or all its
logs loaded (from Kafka 3.5.2); 3.0.0-3.5.1 mark every dir, also one a failed start-up never
loaded, so the next start skips recovery of a crashed log.

Kafka: core/src/main/scala/kafka/log/LogManager.scala ``shutdown`` (3.5.1: ``Files.createFile(
CleanShutdownFile)`` for every live dir; 3.5.2: only when ``hadCleanShutdownFlags`` or
``loadLogsCompletedFlags`` of the dir, both recorded in ``loadLogs``) - 703e1d9faaf (trunk, first
3.7.0), daea0fdff09 (first 3.6.0), c252e930fb7 (first 3.5.2). In KRaft mode LogManager.startup
runs from BrokerMetadataPublisher on the first metadata publish, after registration and
catch-up; a broker stopped before then (SIGTERM while starting, or BrokerLifecycleManager's
registration timeout) shuts down with its logs unloaded. LogManagerTest
``testCleanShutdownFileWhenShutdownCalledBeforeStartupComplete`` (703e1d9faaf) is ported below:
two logs written and the marker deleted (a crash), then a new LogManager shut down after the
first of them loaded but before the second - no marker. kraftsim loads dir by dir, so the
port has two dirs, one log each, and stops the load after the first dir.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from kraftsim.features import parse_kafka_version, software_gate
from kraftsim.storage.checkpoints import CLEAN_SHUTDOWN_FILE
from kraftsim.storage.manager import LogManager
from kraftsim.storage.records import encode_batch

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"


class _Stopped(Exception):
    """LogManager.shutdown called from another thread while loadLogs runs (the test's interrupt)."""


def _manager(dirs: list[Path], kafka_version: str, on_event=None) -> LogManager:
    gate = software_gate("clean_shutdown_marker_needs_load", parse_kafka_version(kafka_version))
    return LogManager(dirs, node_id=1, cluster_id=CLUSTER, on_event=on_event, clean_shutdown_marker_needs_load=gate)


def _crashed_logs(tmp_path: Path) -> list[Path]:
    """Two logs with one record each, shut down, then the markers deleted: an unclean shutdown."""
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    m = _manager(dirs, "3.9.0")
    m.load()
    for p in range(2):
        m.get_or_create("orders", p).append_as_leader(encode_batch([(None, b"test1", [])], timestamp_ms=1), 0)
    assert {m.get("orders", p).dir.parent for p in range(2)} == set(dirs)
    m.shutdown()
    for d in dirs:
        (d / CLEAN_SHUTDOWN_FILE).unlink()
    return dirs


@pytest.mark.parametrize("kafka_version,marked", [("3.5.1", {"d1": True, "d2": True}),
                                                  ("3.5.2", {"d1": True, "d2": False})])
def test_clean_shutdown_file_when_shutdown_called_before_startup_complete(tmp_path, kafka_version, marked):
    dirs = _crashed_logs(tmp_path)
    loaded: list[str] = []

    def on_event(name: str, fields: dict) -> None:
        if name == "log_dir_loaded":
            loaded.append(Path(fields["log_dir"]).name)
            assert fields["clean_shutdown"] is False
            raise _Stopped   # shutdown comes after the first dir loaded, before the second
    m = _manager(dirs, kafka_version, on_event)
    with pytest.raises(_Stopped):
        m.load()
    assert loaded == ["d1"] and not m.loaded
    m.shutdown()
    assert {d.name: (d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs} == marked


@pytest.mark.parametrize("kafka_version,clean_next", [("3.5.1", True), ("3.5.2", False)])
def test_a_start_stopped_before_log_manager_startup(tmp_path, kafka_version, clean_next):
    """The broker's path (kraftsim/broker/server.py): markers read before registering, the
    broker stopped before its first metadata publish - the logs never loaded. 3.5.1 leaves
    markers, so the next start loads the crashed logs as cleanly shut down, without recovery
    (no ``recovery`` event); 3.5.2 leaves none, so the next start recovers. A dir that had the
    marker keeps it either way (hadCleanShutdownFlags)."""
    dirs = _crashed_logs(tmp_path)
    m = _manager(dirs, kafka_version)
    m.read_clean_shutdown_markers()
    assert m.had_clean_shutdown is False
    m.shutdown(broker_epoch=7)
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() == clean_next for d in dirs)
    events: list = []
    m = _manager(dirs, kafka_version, lambda n, f: events.append((n, f)))
    m.load()
    assert [f["clean_shutdown"] for n, f in events if n == "log_dir_loaded"] == [clean_next, clean_next]
    assert sorted(f["partition"] for n, f in events if n == "recovery") == ([] if clean_next else [0, 1])
    m.shutdown(broker_epoch=8)
    m = _manager(dirs, kafka_version)
    m.read_clean_shutdown_markers()
    m.shutdown(broker_epoch=9)   # had the marker: kept on both versions
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
