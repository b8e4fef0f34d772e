"""Page-cache-loss reboot and disk wipe against Kafka-format log dirs built here.

The segment files are written with kio's record-batch writer (Kafka's magic v2 format),
the broker "service" is a plain ``sleep`` process (the kraftsim broker is exercised in
test_kraftsim_nemeses.py); the cut itself runs as the shipped stdlib script through
``transport.run(input=...)``, exactly as on a remote Kafka host. The nodes here declare
``implementation: kraftsim``: the checkpoint is then the exact durable point, and these tests
are about the cut's mechanics (Apache Kafka's flush paths: test_page_cache_cut.py).
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from nemeses.disk_wipe import DiskWipe
from nemeses.reboot import Reboot
from tests.nemeses.nodes import TestNode, make_ctx
from tests.nemeses.segments import batch_bytes, complete_batches, log_end_offset, write_checkpoint, write_partition
from tests.support.netlab import NetLab, cleanup_stale


def build(log_dir: Path) -> None:
    write_partition(log_dir, "orders", 0, {0: [(0, 5), (5, 5), (10, 5)], 15: [(15, 5), (20, 5)]})
    write_partition(log_dir, "orders", 1, {0: [(0, 3), (3, 3)]})
    write_partition(log_dir, "audit", 0, {0: [(0, 4)]})          # never flushed: no checkpoint entry
    write_checkpoint(log_dir, "recovery-point-offset-checkpoint", {("orders", 0): 10, ("orders", 1): 6})
    write_checkpoint(log_dir, "replication-offset-checkpoint", {("orders", 0): 25, ("orders", 1): 6})
    (log_dir / ".kafka_cleanshutdown").write_text("")
    (log_dir / "meta.properties").write_text("#\nnode.id=2\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAQ\n"
                                             "version=1\ncluster.id=fl-test-cluster\n")


@pytest.fixture
def broker(tmp_path):
    log_dir = tmp_path / "data"
    build(log_dir)
    node = TestNode("broker-2", "broker", 2, "127.0.0.1", command=["sleep", "600"],
                    log_path=str(tmp_path / "svc.log"))
    node.log_dirs = [str(log_dir)]
    node.implementation = "kraftsim"
    node.start_service()
    yield node, log_dir, make_ctx(tmp_path, [node])
    node.stop_service(9)


def test_truncate_unflushed_cuts_exactly_the_unflushed_suffix(broker, tmp_path):
    node, log_dir, ctx = broker
    old = node.service_pids()
    nem = Reboot()
    nem.setup(ctx)
    rec = nem.start(["broker-2"], mode="truncate-unflushed")
    assert not any(node.transport.pid_alive(p) for p in old), "the broker was not SIGKILLed"
    assert node.service_pids() and node.service_pids() != old, "the broker was not restarted"
    p0 = log_dir / "orders-0"
    assert complete_batches(p0) == [(0, 4), (5, 9)]               # offsets >= recovery point 10 gone
    assert (p0 / f"{0:020d}.log").stat().st_size == len(batch_bytes(0, 5)) + len(batch_bytes(5, 5))
    assert not (p0 / f"{15:020d}.log").exists(), "segment wholly past the cut must be deleted"
    assert not list(p0.glob("*.index")) and not list(p0.glob("*.timeindex"))
    assert log_end_offset(log_dir / "orders-1") == 6              # fully flushed: untouched
    assert log_end_offset(log_dir / "audit-0") == 0               # never flushed: all lost
    assert not (log_dir / ".kafka_cleanshutdown").exists()
    assert (log_dir / "replication-offset-checkpoint").exists() and (log_dir / "meta.properties").exists()
    note = [json.loads(l) for l in (tmp_path / "timeline.jsonl").read_text().splitlines()][1]
    parts = note["detail"]["broker-2"]["partitions"]
    assert parts["orders-0"] == {"recovery_point": 10, "durable_offset": 10, "durable_by": "checkpoint",
                                 "log_end_offset_before": 25, "expected_log_end_offset": 10,
                                 "truncated_bytes": parts["orders-0"]["truncated_bytes"]}
    assert note["detail"]["broker-2"]["page_cache_cut"]["uncertain"] == []   # exact: nothing uncertain
    assert parts["orders-0"]["truncated_bytes"] > 0 and parts["orders-1"]["truncated_bytes"] == 0
    nem.stop(rec)
    assert [e["op"] for e in map(json.loads, (tmp_path / "ledger.jsonl").read_text().splitlines())][-1] == "healed"


@pytest.mark.parametrize("seed", [1, 2])
def test_random_cut_is_seeded_and_torn_tail_is_reported(tmp_path, seed):
    """A random cut lands between the recovery point and the end; the same seed cuts the same."""
    leos = []
    for run in ("a", "b"):
        log_dir = tmp_path / run / "data"
        build(log_dir)
        node = TestNode("broker-2", "broker", 2, "127.0.0.1", command=["sleep", "600"])
        node.log_dirs = [str(log_dir)]
        node.implementation = "kraftsim"
        nem = Reboot()
        nem.setup(make_ctx(tmp_path / run, [node]))
        rec = nem.start(["broker-2"], mode="truncate-unflushed", cut="random", seed=seed, restart=False)
        leo = log_end_offset(log_dir / "orders-0")
        assert 10 <= leo <= 25
        expected = rec.undo["detail"]["broker-2"]["partitions"]["orders-0"]["expected_log_end_offset"]
        assert leo == expected
        leos.append(leo)
        size = sum(p.stat().st_size for p in (log_dir / "orders-0").glob("*.log"))
        leos.append(size)
    assert leos[0:2] == leos[2:4], "same seed must give the same cut"


def test_disk_wipe_keeps_identity_and_empties_the_log(broker, tmp_path):
    node, log_dir, ctx = broker
    old = node.service_pids()
    nem = DiskWipe()
    nem.setup(ctx)
    rec = nem.start(["broker-2"])
    assert sorted(os.listdir(log_dir)) == ["meta.properties"]
    meta = dict(l.split("=", 1) for l in (log_dir / "meta.properties").read_text().splitlines() if "=" in l)
    assert meta["node.id"] == "2" and meta["cluster.id"] == "fl-test-cluster" and meta["version"] == "1"
    assert meta["directory.id"] != "AAAAAAAAAAAAAAAAAAAAAQ" and len(meta["directory.id"]) == 22
    assert node.service_pids() and node.service_pids() != old
    nem.stop(rec)


def test_missing_log_dir_is_one_line(tmp_path):
    node = TestNode("broker-2", "broker", 2, "127.0.0.1", command=["sleep", "600"])
    node.log_dirs = [str(tmp_path / "nope")]
    for nem, params in ((Reboot(), {}), (DiskWipe(), {})):
        nem.setup(make_ctx(tmp_path, [node]))
        with pytest.raises(ValueError) as e:
            nem.start(["broker-2"], **params)
        assert "does not exist" in str(e.value) and "\n" not in str(e.value)


def test_lazyfs_mode_kills_then_clears_cache_through_the_fifo(broker, tmp_path):
    """LazyFS is not packaged here: the FIFO reader is this test (as LazyFS reads fifo_path)."""
    node, log_dir, ctx = broker
    fifo = tmp_path / "lazyfs.fifo"
    os.mkfifo(fifo)
    old = node.service_pids()
    got: list[tuple[str, bool]] = []

    def reader() -> None:
        with open(fifo) as fh:
            line = fh.readline().strip()
            got.append((line, any(node.transport.pid_alive(p) for p in old)))

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    nem = Reboot()
    nem.setup(ctx)
    rec = nem.start(["broker-2"], mode="lazyfs", fifo=str(fifo))
    t.join(5)
    assert got == [("lazyfs::clear-cache", False)], "want the command after the broker died"
    assert node.service_pids() and node.service_pids() != old
    nem.stop(rec)


def test_sysrq_is_emulated_here_killing_the_whole_namespace(tmp_path):
    """No magic SysRq on these kernels: every process of the host's namespace dies, the
    unflushed suffix is cut, the broker restarts; the timeline says it was emulated."""
    cleanup_stale("nem")
    with NetLab("nem", ["h1"]) as lab:
        log_dir = tmp_path / "data"
        build(log_dir)
        node = TestNode("broker-2", "broker", 2, lab.ips["h1"], netns=lab.ns("h1"), command=["sleep", "600"])
        node.log_dirs = [str(log_dir)]
        node.implementation = "kraftsim"
        node.start_service()
        bystander = node.transport.spawn(["sleep", "600"], log_path="/dev/null")
        try:
            nem = Reboot()
            nem.setup(make_ctx(tmp_path, [node]))
            rec = nem.start(["broker-2"], mode="sysrq")
            time.sleep(0.1)
            assert not node.transport.pid_alive(bystander), "a host crash kills everything on the host"
            assert node.service_pids()
            d = rec.undo["detail"]["broker-2"]
            assert d["emulated"] is True and d["partitions"]["orders-0"]["expected_log_end_offset"] == 10
            # the guard that keeps a real SysRq off any host sharing the harness's kernel
            assert "boot id" in d["why"]
            assert log_end_offset(log_dir / "orders-0") == 10
            nem.stop(rec)
        finally:
            node.stop_service(9)
