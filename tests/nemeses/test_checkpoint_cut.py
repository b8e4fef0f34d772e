"""The page-cache-loss cut reverts checkpoint files written without fsync.

Kafka 3.7.0-3.7.x writes a partition's ``leader-epoch-checkpoint`` on a truncation
(LeaderEpochFileCache.truncateFromEnd / truncateFromStart) with ``CheckpointFile.write(entries,
false)``: no fsync of the file, none of the directory after the rename. After a power loss the
file may be the old one, empty, its new size in zeros, or the new one
(nemeses/scripts/truncate_unflushed.py). On kraftsim the log dirs are written by kraftsim's own
storage (the 3.7 gate off or on), which records what it left un-fsynced; on Apache Kafka the cut
goes by the writeback window and the broker's version and says what is uncertain.

The "broker" process is a sleeper: the nemesis only needs a process to kill; the cut runs as the
shipped stdlib script through the local transport, on real kraftsim log dirs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftsim.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, UNSYNCED_SUFFIX, CheckpointError
from kraftsim.storage.checkpoints import read_leader_epoch_checkpoint
from kraftsim.storage.manager import LogManager
from kraftsim.storage.records import encode_batch
from nemeses.reboot import Reboot, run_notes
from nemeses.scripts import script_text
from tests.nemeses.nodes import TestNode, make_ctx
from tests.nemeses.segments import write_partition

DURABLE = "0\n2\n0 0\n1 2\n"


def kraftsim_dir(tmp: Path, *, unsynced: bool) -> Path:
    """A kraftsim log dir whose t-0 had epochs 0 and 1, then a truncation to offset 2 (the
    follower's divergence: LeaderEpochFileCache.truncateFromEnd(2)), written without fsync when
    ``unsynced`` (Kafka 3.7.x) and with fsync otherwise (3.8.0)."""
    m = LogManager([tmp / "data"], node_id=1, cluster_id="c", epoch_checkpoint_sync_on_truncation=not unsynced)
    m.load()
    log = m.get_or_create("t", 0)
    for epoch in (0, 0, 1, 1):
        log.append_as_leader(encode_batch([(None, b"v", [])], timestamp_ms=1), epoch)
    log.truncate_to(2)
    m.close_unclean()
    return log.dir


def reboot(tmp: Path, node: TestNode, **params) -> dict:
    node.log_dirs = [str(tmp / "data")]
    node.start_service()
    try:
        nem = Reboot()
        nem.setup(make_ctx(tmp, [node]))
        rec = nem.start([node.name], mode="truncate-unflushed", restart=False, **params)
        return rec.undo["detail"][node.name]
    finally:
        node.stop_service(9)


def sleeper(name: str = "broker-1") -> TestNode:
    return TestNode(name, "broker", 1, "127.0.0.1", command=["sleep", "600"])


def note(tmp: Path) -> dict:
    return next(r for r in map(json.loads, (tmp / "timeline.jsonl").read_text().splitlines())
                if r["kind"] == "note" and r.get("what") == "reboot applied")


def test_durable_cut_leaves_kraftsims_unsynced_epoch_checkpoint_torn(tmp_path):
    pdir = kraftsim_dir(tmp_path, unsynced=True)
    ckpt = pdir / LEADER_EPOCH_CHECKPOINT
    assert ckpt.read_text() == "0\n1\n0 0\n" and (pdir / (LEADER_EPOCH_CHECKPOINT + UNSYNCED_SUFFIX)).exists()
    node = sleeper()
    node.implementation = "kraftsim"
    d = reboot(tmp_path, node)
    assert ckpt.read_bytes() == b"\0" * len("0\n1\n0 0\n")          # the new size, no data
    assert not (pdir / (LEADER_EPOCH_CHECKPOINT + UNSYNCED_SUFFIX)).exists()
    (c,) = d["page_cache_cut"]["checkpoints"]
    assert (c["file"], c["state"], c["exact"], c["topic"], c["partition"]) == (str(ckpt), "torn", True, "t", 0)
    assert "1 checkpoint file written without fsync: 1 torn" in note(tmp_path)["text"]
    assert any("1 torn" in n for n in run_notes([{**note(tmp_path), "t": 1.0}]))
    with pytest.raises(CheckpointError, match="malformed line"):   # what kraftsim's load will find
        read_leader_epoch_checkpoint(ckpt)


def test_fsynced_epoch_checkpoint_is_left_alone(tmp_path):
    pdir = kraftsim_dir(tmp_path, unsynced=False)
    node = sleeper()
    node.implementation = "kraftsim"
    d = reboot(tmp_path, node)
    assert (pdir / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n1\n0 0\n"
    assert d["page_cache_cut"]["checkpoints"] == [] and "checkpoint file" not in note(tmp_path)["text"]


def run_script(tmp: Path, *args: str) -> dict:
    res = subprocess.run([sys.executable, "-", "--log-dir", str(tmp / "data"), *args],
                         input=script_text("truncate_unflushed.py"), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_random_cut_picks_each_crash_state_by_seed(tmp_path):
    """Every state a crash may leave, each seeded (same seed, same state), ``old`` being the
    durable content byte for byte (kraftsim's record of it)."""
    seen = {}
    for seed in range(12):
        case = tmp_path / str(seed)
        pdir = kraftsim_dir(case, unsynced=True)
        (c,) = run_script(case, "--flush-model", "checkpoint", "--cut", "random", "--seed", str(seed))["checkpoints"]
        got = (pdir / LEADER_EPOCH_CHECKPOINT).read_bytes()
        want = {"old": DURABLE.encode(), "empty": b"", "torn": b"\0" * 8, "new": b"0\n1\n0 0\n"}[c["state"]]
        assert got == want and c["bytes_after"] == len(want)
        seen.setdefault(c["state"], seed)
    assert set(seen) == {"old", "empty", "torn", "new"}
    again = tmp_path / "again"
    kraftsim_dir(again, unsynced=True)
    state = run_script(again, "--flush-model", "checkpoint", "--cut", "random", "--seed", str(seen["old"]))
    assert state["checkpoints"][0]["state"] == "old"


def kafka_partition(tmp: Path, age_s: float) -> Path:
    """A Kafka partition whose leader-epoch-checkpoint was written ``age_s`` seconds ago."""
    pdir = write_partition(tmp / "data", "orders", 0, {0: [(0, 5)]})
    ckpt = pdir / LEADER_EPOCH_CHECKPOINT
    ckpt.write_text("0\n1\n0 0\n")
    t = time.time() - age_s
    os.utime(ckpt, (t, t))
    return ckpt


@pytest.mark.parametrize("version,age,state", [
    ("3.7.1", 1.0, "torn"),    # within the writeback window on a 3.7.x broker: reverted, uncertain
    (None, 1.0, "kept"),       # version unknown: kept, uncertain
    ("3.7.2", 1.0, "kept"),    # a 3.7 release not in the Kafka source checked: kept, uncertain
    ("3.8.0", 1.0, None),      # fsynced on every write
    ("3.7.1", 3600.0, None),   # written back long ago
])
def test_kafka_epoch_checkpoint_by_version_and_writeback_window(tmp_path, version, age, state):
    ckpt = kafka_partition(tmp_path, age)
    d = reboot(tmp_path, sleeper(), **({"kafka_version": version} if version else {}))
    cks = d["page_cache_cut"]["checkpoints"]
    if state is None:
        assert cks == [] and ckpt.read_text() == "0\n1\n0 0\n"
        return
    (c,) = cks
    assert c["state"] == state and c["exact"] is False and c["uncertain"]
    assert ckpt.read_bytes() == (b"\0" * 8 if state == "torn" else b"0\n1\n0 0\n")
    assert ("not known" in c["uncertain"]) == (state == "kept")
