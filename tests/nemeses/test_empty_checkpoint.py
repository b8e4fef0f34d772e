"""The page-cache-loss cut takes an empty offset checkpoint as Kafka does: no entries.

Kafka creates every checkpoint file empty when it opens it (CheckpointFile's constructor:
Files.createFile) and reads an empty one as no entries (CheckpointReadBuffer.read: a null first
line is an empty list). A freshly formatted broker - a new cluster, or one a disk wipe brought
back - keeps an empty ``recovery-point-offset-checkpoint`` until its first checkpoint
(``log.flush.offset.checkpoint.interval.ms``, 60 s), so a reboot in that minute found the file
"not a Kafka offset checkpoint" and failed (seen on real Kafka in Docker: a disk wipe, then a
reboot of the same broker). The control: a file that is not empty and not a checkpoint still
fails, naming it. The cut runs as the shipped stdlib script, as on a host.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nemeses.scripts import script_text
from tests.nemeses.segments import write_partition


def cut(log_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-", "--log-dir", str(log_dir), "--dry-run"],
                          input=script_text("truncate_unflushed.py"), capture_output=True, text=True, timeout=60)


def test_an_empty_recovery_point_checkpoint_is_no_entries(tmp_path: Path):
    write_partition(tmp_path, "faultline", 0, {0: [(0, 3), (3, 2)]})
    (tmp_path / "recovery-point-offset-checkpoint").write_bytes(b"")
    p = cut(tmp_path)
    assert p.returncode == 0, p.stderr
    parts = json.loads(p.stdout)["partitions"]
    assert [(x["topic"], x["partition"]) for x in parts] == [("faultline", 0)], parts


def test_a_file_that_is_no_checkpoint_still_fails_naming_it(tmp_path: Path):
    write_partition(tmp_path, "faultline", 0, {0: [(0, 3)]})
    (tmp_path / "recovery-point-offset-checkpoint").write_text("garbage\n")
    p = cut(tmp_path)
    assert p.returncode == 2 and "recovery-point-offset-checkpoint: not a Kafka offset checkpoint" in p.stderr
