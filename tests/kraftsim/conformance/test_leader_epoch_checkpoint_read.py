"""A broker that finds its leader-epoch checkpoint torn or empty at start does what Kafka 3.7 does.

Kafka (3.7.0): server-common/src/main/java/org/apache/kafka/server/common/CheckpointFile.java
``CheckpointReadBuffer.read`` returns an empty list when the first line is missing (a
zero-length file) - silently - and throws IOException ("Malformed line in checkpoint file",
"Expected [n] entries") for anything else it cannot parse: a file of the new size that reads as
zeros (a rename that reached the disk before the data) is one malformed line.
CheckpointFileWithFailureHandler.read turns it into KafkaStorageException after
LogDirFailureChannel.maybeAddOfflineLogDir; LogManager.loadLogs skips the log, and once
ReplicaManager.startup's LogDirFailureHandler handles the dir, LogManager.handleLogDirFailure
halts the broker when no live log dir is left ("Shutdown broker because all log dirs in ... have
failed", Exit.halt(1)). The broker is a real kraftsim BrokerServer with a real config and log
dir; only Exit.halt is replaced by a recorder (it would end the test process).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraftsim import config as kconfig
from kraftsim.broker.server import BrokerServer
from kraftsim.events import EventLog
from kraftsim.storage.checkpoints import LEADER_EPOCH_CHECKPOINT
from kraftsim.storage.manager import LogManager
from kraftsim.storage.records import encode_batch


class Halted(Exception):
    pass


def _crashed_log_dir(tmp: Path) -> Path:
    """Log dir ``data`` with partitions t-0 (epochs 0 and 1) and t-1, crashed (no clean marker)."""
    m = LogManager([tmp / "data"], node_id=1, cluster_id="c")
    m.load()
    log = m.get_or_create("t", 0)
    for epoch in (0, 0, 1, 1):
        log.append_as_leader(encode_batch([(None, b"v", [])], timestamp_ms=1), epoch)
    m.get_or_create("t", 1).append_as_leader(encode_batch([(None, b"w", [])], timestamp_ms=1), 0)
    m.close_unclean()
    return log.dir


def _broker(tmp: Path) -> tuple[BrokerServer, list[int]]:
    props = {"node.id": 1, "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.2:1",
             "controller.quorum.bootstrap.servers": "127.0.0.1:1", "log.dirs": str(tmp / "data"),
             "cluster.id": "c"}
    path = tmp / "broker.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    b = BrokerServer(kconfig.load(path, "broker"), EventLog(tmp / "events.jsonl", 1, "broker"))
    halts: list[int] = []

    def halt(status: int) -> None:
        halts.append(status)
        raise Halted(status)
    b.on_fatal = halt
    b.logs.read_clean_shutdown_markers()
    return b, halts


def _events(tmp: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp / "events.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("torn", [
    pytest.param(lambda size: b"\0" * size, id="zero-filled"),     # the new size, no data (XFS)
    pytest.param(lambda size: b"0\n2\n0 0\n", id="short"),           # "Expected [2] entries"
])
def test_torn_epoch_checkpoint_takes_the_dir_offline_and_halts(tmp_path, torn):
    pdir = _crashed_log_dir(tmp_path)
    ckpt = pdir / LEADER_EPOCH_CHECKPOINT
    ckpt.write_bytes(torn(ckpt.stat().st_size))
    b, halts = _broker(tmp_path)
    with pytest.raises(Halted):
        b.start_logs()
    assert halts == [1]
    offline = [e for e in _events(tmp_path) if e["event"] == "log_dir_offline"]
    assert len(offline) == 1 and offline[0]["log_dir"] == str(tmp_path / "data")
    assert str(ckpt) in offline[0]["error"] and (offline[0]["topic"], offline[0]["partition"]) == ("t", 0)
    # the dir was not loaded: no log_dir_loaded, and a clean shutdown would not mark it
    assert not [e for e in _events(tmp_path) if e["event"] == "log_dir_loaded"]
    assert not b.logs.live_dirs and b.logs.get("t", 1) is None


def test_empty_epoch_checkpoint_reads_as_empty(tmp_path):
    """A zero-length file: no error, no offline dir; the unclean start's recovery (from the
    recovery point, 0 here) rebuilds the entries from the batches it scans."""
    pdir = _crashed_log_dir(tmp_path)
    (pdir / LEADER_EPOCH_CHECKPOINT).write_bytes(b"")
    b, halts = _broker(tmp_path)
    b.start_logs()
    assert halts == []
    assert not [e for e in _events(tmp_path) if e["event"] == "log_dir_offline"]
    assert b.logs.get("t", 0).epoch_cache.entries() == [(0, 0), (1, 2)]
    assert b.logs.get("t", 1) is not None
