"""Proof on a real cluster: a kraftsim broker whose data dir is on lossyfs, rebooted with
``reboot mode: lossyfs``, loses exactly the acknowledged writes past its last fsync.

kraftsim writes real Kafka-format segment files and fsyncs them as Kafka does
(``log.flush.interval.messages``: UnifiedLog.append -> flush, LocalLog.flush; checkpoints via
tmp + fsync + rename + directory fsync, CheckpointFile.write), so nothing is modelled here: what
the broker fsynced is what lossyfs keeps. The mount is made through the launchers' API
(``nemeses.lossyfs.mount``: ledger first, then the mount), so the same test shows the ledger
entry closing on unmount.

The evidence is tied three ways: the segment's durable size that lossyfs reported is the file's
size after the crash; the records in that durable prefix (read with kio) are the acknowledged
writes the restarted broker serves (drained with a consumer); every acknowledged write past it
is lost, and some are (the known-bad control: 230 writes, fsync every 40 messages, the last 30
one by one).
"""
from __future__ import annotations

import sys
from pathlib import Path

from groundwork.ledger import Ledger
from groundwork.transport.local import LocalTransport
from nemeses import lossyfs
from nemeses.reboot import Reboot, run_notes
from tests.kraftsim.clients import TrackingProducer, create_topic, read_all
from tests.kraftsim.conftest import free_base_port
from tests.lossyfs.conftest import ROOT, mounted, unmount_hard
from tests.nemeses.kraftsim_cluster import KraftsimCluster, wait_for
from tests.nemeses.nodes import make_ctx
from tests.nemeses.segments import log_end_offset

TOPIC = "lossy"


def batch_bytes_end(segment: Path) -> int:
    """Where the last whole record batch of a segment ends (batch header: baseOffset int64,
    batchLength int32 - DefaultRecordBatch)."""
    data, pos = segment.read_bytes(), 0
    while pos + 12 <= len(data) and pos + 12 + int.from_bytes(data[pos + 8:pos + 12], "big") <= len(data):
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
    return pos


def test_an_rf1_kraftsim_broker_on_lossyfs_loses_exactly_what_it_had_not_fsynced(tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    data, backing = root / "broker-1" / "data", tmp_path / "broker-1-backing"
    data.mkdir(parents=True)
    backing.mkdir()
    ledger = Ledger(tmp_path / "ledger.jsonl")
    local = LocalTransport("broker-1")
    m = lossyfs.mount(local, str(backing), str(data), ledger=ledger, python=sys.executable, cwd=str(ROOT),
                      control=str(tmp_path / "ctl.sock"), inventory=str(tmp_path / "inventory.yaml"))
    assert [e["kind"] for e in ledger.open_entries()] == ["mount"] and mounted(data)
    cluster = KraftsimCluster(root, brokers=1, base_port=free_base_port(1),
                              settings={"log.flush.interval.messages": 40})
    try:
        cluster.start()
        assert lossyfs.covering(lossyfs.mounts(local), str(data)) == lossyfs.LossyMount(str(data), m.control)
        create_topic(cluster.bootstrap, TOPIC, partitions=1, rf=1, min_isr=1)
        prod = TrackingProducer(cluster.bootstrap)
        values = [f"v{i:04d}".encode() for i in range(230)]
        for v in values[:200]:                            # large batches: each append flushes
            prod.send(TOPIC, v, partition=0)
        prod.flush(30)
        for v in values[200:]:                            # one record a batch: 30 < 40, never flushed
            prod.send(TOPIC, v, partition=0)
            prod.flush(30)
        assert len(prod.acked) == 230, prod.failed
        acked = sorted(values, key=lambda v: prod.acked[v][1])
        seg_path = data / f"{TOPIC}-0" / "00000000000000000000.log"
        size_before = (backing / f"{TOPIC}-0" / seg_path.name).stat().st_size

        ctx = make_ctx(tmp_path, list(cluster.nodes.values()))
        nem = Reboot()
        nem.setup(ctx)
        rec = nem.start(["broker-1"], mode="lossyfs", restart=False)
        detail = rec.undo["detail"]["broker-1"]
        crash = detail["lossyfs"][str(data)]
        by_path = {f["path"]: f for f in crash["files"]}
        assert f"{TOPIC}-0/{seg_path.name}" in by_path, crash
        seg = by_path[f"{TOPIC}-0/{seg_path.name}"]
        assert seg["size_before"] == size_before
        # the file now is exactly its durable prefix, which ends at a batch boundary
        assert (backing / f"{TOPIC}-0" / seg_path.name).stat().st_size == seg["durable_size"]
        durable_leo = log_end_offset(backing / f"{TOPIC}-0")
        assert batch_bytes_end(backing / f"{TOPIC}-0" / seg_path.name) == seg["durable_size"]
        assert 0 < durable_leo < 230 and seg["dropped_bytes"] == size_before - seg["durable_size"] > 0

        nem.stop(rec)                                    # heal: the broker starts on the remounted dir
        seen = wait_for(lambda: read_all(cluster.bootstrap, TOPIC, [0], timeout=10) or None, 60,
                        "the restarted broker serves the topic")
        lost = [v for v in acked if v not in seen]
        assert sorted(seen, key=lambda v: seen[v][1]) == acked[:durable_leo]
        assert lost == acked[durable_leo:] and len(lost) == 230 - durable_leo
        # the run's notes say what the crash dropped, file by file
        notes = run_notes([{"kind": "note", "what": "reboot applied", "t": 1.0, "fault_id": rec.id,
                            "text": f"broker-1: lossyfs crash dropped {detail['dropped_bytes']} bytes",
                            "detail": rec.undo["detail"]}])
        assert notes and f"dropped {detail['dropped_bytes']} bytes" in notes[0]
    finally:
        cluster.stop()
        try:
            lossyfs.unmount(local, m, ledger=ledger)
        finally:
            unmount_hard(data, None)
    assert not mounted(data) and ledger.open_entries() == []
