"""Page-cache loss end to end at the storage level: the reboot nemesis's own stdlib script
(``nemeses/scripts/truncate_unflushed.py``, run as a separate process exactly as it runs on a
Kafka host) cuts kraftsim's log dirs back to the recovery point, and the next start recovers
to the LEO the script predicts for real Kafka, with ``recovery``/``truncation`` events and an
unclean-shutdown verdict (previous broker epoch -1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kraftsim.storage import LogManager
from kraftsim.storage.checkpoints import read_offset_checkpoint
from kraftsim.storage.records import encode_batch

SCRIPT = Path(__file__).resolve().parents[2] / "nemeses" / "scripts" / "truncate_unflushed.py"
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"


def write_and_crash(dirs: list[Path]) -> dict[tuple[str, int], int]:
    m = LogManager(dirs, node_id=1, cluster_id=CLUSTER, flush_interval_messages=25, segment_bytes=2000)
    m.load()
    for p in range(3):
        log = m.get_or_create("orders", p)
        for i in range(30 + 7 * p):  # 3 records per batch; flushes every 25 messages
            log.append_as_leader(encode_batch([(None, b"%d-%d" % (p, i) * 5, [])] * 3, timestamp_ms=1), 1)
    leos = {k: log.log_end_offset for k, log in m.logs().items()}
    rps = {k: log.recovery_point for k, log in m.logs().items()}
    m.shutdown(broker_epoch=5)  # a clean stop first, so the marker exists and must be removed
    m = LogManager(dirs, node_id=1, cluster_id=CLUSTER, flush_interval_messages=25, segment_bytes=2000)
    m.load()
    for k, log in m.logs().items():
        for i in range(10):
            log.append_as_leader(encode_batch([(None, b"late-%d" % i, [])] * 3, timestamp_ms=2), 2)
    rps = {k: log.recovery_point for k, log in m.logs().items()}
    assert all(rps[k] > leos[k] for k in rps), "flushes happened after the restart"
    assert all(log.log_end_offset > rps[k] for k, log in m.logs().items()), "something is unflushed"
    m.close_unclean()  # SIGKILL: page cache intact, no marker
    return rps


@pytest.mark.parametrize("cut", ["recovery-point", "random"])
def test_nemesis_cut_then_kraftsim_recovers_to_the_predicted_leo(tmp_path, cut):
    assert SCRIPT.exists(), f"{SCRIPT} is the reboot nemesis's page-cache-loss tool"
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    rps = write_and_crash(dirs)
    for d in dirs:  # the checkpoint on disk is what the nemesis reads: it must equal the flushes
        for k, v in read_offset_checkpoint(d / "recovery-point-offset-checkpoint").items():
            assert rps[k] == v
    # kraftsim's checkpoint is current (written at every flush): the nemesis trusts it exactly
    argv = [sys.executable, str(SCRIPT), "--cut", cut, "--seed", "7", "--flush-model", "checkpoint"]
    for d in dirs:
        argv += ["--log-dir", str(d)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    predicted = {(p["topic"], p["partition"]): p["expected_log_end_offset"] for p in report["partitions"]}
    assert len(predicted) == 3

    events: list[tuple[str, dict]] = []
    m = LogManager(dirs, node_id=1, cluster_id=CLUSTER, on_event=lambda n, f: events.append((n, f)))
    m.load()
    assert m.had_clean_shutdown is False and m.previous_broker_epoch == -1
    got = {k: log.log_end_offset for k, log in m.logs().items()}
    assert got == predicted
    if cut == "recovery-point":
        assert got == rps
    else:  # seed 7 tears a batch: recovery must cut it and say so
        assert all(got[k] >= rps[k] for k in got)
        torn = [f for n, f in events if n == "truncation"]
        assert torn and all("truncated: " in f["reason"] and f["from_offset"] >= f["to_offset"] for f in torn), torn
    recs = {(f["topic"], f["partition"]): f for n, f in events if n == "recovery"}
    assert {k: f["log_end_offset"] for k, f in recs.items()} == got
    # The recovered logs are readable and writable from the new LEO.
    for k, log in m.logs().items():
        assert log.append_as_leader(encode_batch([(None, b"after", [])], timestamp_ms=3), 3)[0] == got[k]
    m.shutdown()
