"""The page-cache-loss cut on Apache Kafka's log layout keeps what Kafka had fsynced.

Kafka writes ``recovery-point-offset-checkpoint`` only every
``log.flush.offset.checkpoint.interval.ms`` (60 s), but fsyncs every segment as it rolls
(UnifiedLog.roll → ``flush-log`` → flushUptoOffsetExclusive(newSegment.baseOffset)) and every
``log.flush.interval.messages`` offsets (UnifiedLog.append), and a controller flushes the KRaft
metadata log after every append (KafkaRaftClient). The layouts here are what a Kafka broker
leaves between a roll and the next checkpoint write: several ``.log`` segments of real v2
record batches (kio's writer), ``.index``/``.timeindex`` files, producer snapshots at the roll
offsets, and a checkpoint older than the last roll.

No Apache Kafka runs on this machine: the "broker" is a process whose command line is Kafka's
(``... kafka.Kafka server.properties --override k=v``), so the nemesis finds the broker's config
the way it does on a lab host; the cut runs as the shipped stdlib script through the transport.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from harness.cluster import ClusterNode
from harness.inventory import load_inventory
from groundwork.transport.local import LocalTransport
from nemeses.disk_wipe import DiskWipe
from nemeses.reboot import Reboot
from tests.nemeses.nodes import TestNode, make_ctx
from tests.nemeses.segments import batch_bytes, complete_batches, log_end_offset, write_checkpoint, write_partition

SLEEPER = "import time; time.sleep(600)"


def kafka_like(tmp: Path, name: str, role: str, node_id: int, props: dict[str, str],
               overrides: dict[str, str] | None = None) -> TestNode:
    """A node whose process looks like Kafka's JVM to /proc/PID/cmdline readers."""
    cfg = tmp / f"{name}.properties"
    cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    cmd = [sys.executable, "-c", SLEEPER, "kafka.Kafka", str(cfg)]
    for k, v in (overrides or {}).items():
        cmd += ["--override", f"{k}={v}"]
    node = TestNode(name, role, node_id, "127.0.0.1", command=cmd, log_path=str(tmp / f"{name}.log"))
    node.start_service()
    # spawn returns with the child's pid before it has exec'd the command: on a loaded machine its
    # /proc/PID/cmdline was still the spawner's when the nemesis read it (no kafka.Kafka, no config)
    deadline = time.monotonic() + 20
    while "kafka.Kafka" not in Path(f"/proc/{node.pids[0]}/cmdline").read_bytes().decode(errors="replace").split("\0"):
        assert time.monotonic() < deadline, f"{name}: the sleeper never became kafka.Kafka"
        time.sleep(0.02)
    return node


def rolled_layout(log_dir: Path) -> Path:
    """orders-0: segments 0 and 15 rolled, 25 active; the checkpoint (10) predates both rolls."""
    pdir = write_partition(log_dir, "orders", 0, {0: [(0, 5), (5, 5), (10, 5)], 15: [(15, 5), (20, 5)],
                                                   25: [(25, 5), (30, 5)]})
    for snap in (15, 25):   # UnifiedLog.roll takes a producer snapshot at the new segment's base
        (pdir / f"{snap:020d}.snapshot").write_bytes(b"\0" * 16)
    write_checkpoint(log_dir, "recovery-point-offset-checkpoint", {("orders", 0): 10})
    (log_dir / ".kafka_cleanshutdown").write_text("")
    return pdir


def note_of(tmp: Path) -> dict:
    return next(r for r in map(json.loads, (tmp / "timeline.jsonl").read_text().splitlines())
                if r["kind"] == "note" and r.get("what") == "reboot applied")


def test_cut_after_a_roll_and_before_the_checkpoint_keeps_the_rolled_segments(tmp_path):
    log_dir = tmp_path / "data"
    pdir = rolled_layout(log_dir)
    kept = {b: (pdir / f"{b:020d}.log").read_bytes() for b in (0, 15)}
    node = kafka_like(tmp_path, "broker-1", "broker", 1, {"log.dirs": str(log_dir), "node.id": "1"})
    node.log_dirs = [str(log_dir)]     # as the inventory's kafka_data_dirs gives them
    try:
        nem = Reboot()
        nem.setup(make_ctx(tmp_path, [node]))
        rec = nem.start(["broker-1"], mode="truncate-unflushed", restart=False)
        # every rolled segment is on disk byte for byte; only the active one is cut
        assert {b: (pdir / f"{b:020d}.log").read_bytes() for b in (0, 15)} == kept
        assert not (pdir / f"{25:020d}.log").exists()
        assert complete_batches(pdir)[-1] == (20, 24) and log_end_offset(pdir) == 25
        assert (pdir / f"{25:020d}.snapshot").exists() and (pdir / f"{15:020d}.snapshot").exists()
        assert not list(pdir.glob("*.index")) and not (log_dir / ".kafka_cleanshutdown").exists()
        d = rec.undo["detail"]["broker-1"]
        part = d["partitions"]["orders-0"]
        assert part["recovery_point"] == 10 and part["durable_offset"] == 25 and part["durable_by"] == "segment-roll"
        assert part["expected_log_end_offset"] == 25 and part["log_end_offset_before"] == 35
        assert d["flush_config_source"] == str(tmp_path / "broker-1.properties")
        # the roll's flush-log task is asynchronous: segment 15 is kept though it may not have been
        # flushed yet; nothing cut is uncertain (no log.flush.interval.* set)
        (u,) = d["page_cache_cut"]["uncertain"]
        assert u["kept"] == [15, 25] and "cut" not in u
        assert d["page_cache_cut"]["uncertain_cut_bytes"] == 0
        assert d["page_cache_cut"]["uncertain_kept_bytes"] == len(batch_bytes(15, 5)) + len(batch_bytes(20, 5))
        text = note_of(tmp_path)["text"]
        assert "broker-1: page-cache cut (kafka) removed" in text and "0 bytes cut that Kafka may have fsynced" in text
    finally:
        node.stop_service(9)


def cut_with_flush_messages(tmp: Path, segments: dict[int, list[tuple[int, int]]],
                            checkpoint: int | None = None) -> tuple[Path, dict]:
    """The cut of partition m-0 on a broker run with ``--override log.flush.interval.messages=7``:
    the partition dir after it and the reboot's detail for the broker."""
    log_dir = tmp / "data"
    pdir = write_partition(log_dir, "m", 0, segments)
    if checkpoint is not None:
        write_checkpoint(log_dir, "recovery-point-offset-checkpoint", {("m", 0): checkpoint})
    node = kafka_like(tmp, "broker-1", "broker", 1, {"log.dirs": str(log_dir)},
                      overrides={"log.flush.interval.messages": "7"})
    node.log_dirs = [str(log_dir)]
    try:
        nem = Reboot()
        nem.setup(make_ctx(tmp, [node]))
        rec = nem.start(["broker-1"], mode="truncate-unflushed", restart=False)
        return pdir, rec.undo["detail"]["broker-1"]
    finally:
        node.stop_service(9)


def test_flush_interval_messages_from_the_brokers_override_moves_the_cut(tmp_path):
    """log.flush.interval.messages=7 given as ``--override``; no checkpoint entry was written. A
    leader (one batch an append) flushed at 10 and 20; a follower appends a fetch's batches at
    once (UnifiedLog.appendAsFollower), so [10, 25) may have been one append, flushed at 25: the
    cut keeps all of it (never a byte Kafka may have fsynced), the kept side uncertain from one
    interval below the last batch."""
    pdir, d = cut_with_flush_messages(tmp_path, {0: [(0, 5), (5, 5), (10, 5), (15, 5), (20, 5)]})
    assert log_end_offset(pdir) == 25
    assert d["page_cache_cut"]["flush"]["messages"] == 7 and d["flush_config_source"].endswith("--override")
    part = d["partitions"]["m-0"]
    assert part["durable_by"] == "log.flush.interval.messages" and part["recovery_point"] == 0
    (u,) = d["page_cache_cut"]["uncertain"]
    assert "cut" not in u and u["kept"] == [15, 25]
    assert "leader (one batch an append) flushed last at 20" in u["why"][0]
    assert "follower (a fetch's batches an append) may have flushed up to 25" in u["why"][0]


def test_flush_interval_messages_cuts_only_what_no_flush_can_have_reached(tmp_path):
    """Checkpoint 10, segments rolled at 10 and 20, log.flush.interval.messages=7: from the
    recovery point 10 a flush can reach 20 at most within its segment (an append lies in one
    segment); the roll's flush reaches 20 too; past 20 lie 3 offsets, fewer than 7 above any
    possible recovery point: cut, exactly."""
    pdir, d = cut_with_flush_messages(tmp_path, {0: [(0, 5), (5, 5)], 10: [(10, 5), (15, 5)], 20: [(20, 3)]},
                                      checkpoint=10)
    assert log_end_offset(pdir) == 20
    part = d["partitions"]["m-0"]
    assert part["expected_log_end_offset"] == 20 and part["truncated_bytes"] == len(batch_bytes(20, 3))


def test_inventory_kafka_config_is_read_on_the_host(tmp_path):
    """The inventory's ``kafka_config`` names server.properties; its flush settings decide the cut
    (log.flush.interval.messages=1: every append was flushed, nothing is cut)."""
    log_dir = tmp_path / "data"
    pdir = write_partition(log_dir, "m", 0, {0: [(0, 5), (5, 5)]})
    cfg = tmp_path / "server.properties"
    cfg.write_text(f"log.dirs={log_dir}\nlog.flush.interval.messages=1\n")
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"""all:
  vars: {{faultline_transport: local, kafka_bootstrap: "127.0.0.1:1"}}
  children:
    brokers:
      hosts:
        broker-1:
          kafka_node_id: 1
          kafka_config: {cfg}
          kafka_service: {{command: "sleep 600", pidfile: {tmp_path}/b1.pid}}
""")
    spec = load_inventory(inv).hosts["broker-1"]
    assert spec.config == str(cfg) and spec.implementation == "apache-kafka"
    node = ClusterNode(spec, LocalTransport("broker-1"))
    node.start_service()
    try:
        nem = Reboot()
        nem.setup(make_ctx(tmp_path, [node]))
        rec = nem.start(["broker-1"], mode="truncate-unflushed", restart=False)
        assert log_end_offset(pdir) == 10
        d = rec.undo["detail"]["broker-1"]
        assert d["flush_config_source"] == str(cfg) and d["partitions"]["m-0"]["durable_offset"] == 10
    finally:
        node.stop_service(9)


def test_unknown_flush_settings_make_every_cut_byte_uncertain(tmp_path):
    log_dir = tmp_path / "data"
    rolled_layout(log_dir)
    node = TestNode("broker-1", "broker", 1, "127.0.0.1", command=["sleep", "600"])
    node.log_dirs = [str(log_dir)]
    node.start_service()
    try:
        nem = Reboot()
        nem.setup(make_ctx(tmp_path, [node]))
        rec = nem.start(["broker-1"], mode="truncate-unflushed", restart=False)
        d = rec.undo["detail"]["broker-1"]
        assert d["flush_config_source"] is None and d["page_cache_cut"]["config_known"] is False
        (u,) = d["page_cache_cut"]["uncertain"]
        assert u["cut"] == [25, 35] and any("not known" in w for w in u["why"])
    finally:
        node.stop_service(9)


def metadata_layout(md: Path) -> Path:
    """A KRaft metadata log as KafkaMetadataLog leaves it: two segments, no checkpoint entry
    (LogManager does not own it), quorum-state and a snapshot beside the segments."""
    pdir = write_partition(md, "__cluster_metadata", 0, {0: [(0, 4), (4, 4)], 8: [(8, 3), (11, 2)]})
    (pdir / "quorum-state").write_text('{"leaderId":3000,"leaderEpoch":4,"votedId":-1,"data_version":0}')
    (pdir / f"{8:020d}-{4:010d}.checkpoint").write_bytes(b"\0" * 32)
    (md / "meta.properties").write_text("node.id=3000\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAQ\nversion=1\n"
                                        "cluster.id=fl-test-cluster\n")
    return pdir


def test_controller_metadata_log_is_in_reach_and_keeps_what_raft_flushed(tmp_path):
    """A controller flushes its metadata log after every append (KafkaRaftClient.flushLeaderLog,
    appendAsFollower): a power loss keeps it all but, at most, the append in flight."""
    md = tmp_path / "metadata"
    pdir = metadata_layout(md)
    before = {p.name: p.read_bytes() for p in pdir.glob("*.log")}
    node = kafka_like(tmp_path, "controller-1", "controller", 3000,
                      {"process.roles": "controller", "metadata.log.dir": str(md)})
    try:
        nem = Reboot()
        nem.setup(make_ctx(tmp_path, [node]))
        rec = nem.start(["controller-1"], mode="truncate-unflushed", restart=False)
        assert {p.name: p.read_bytes() for p in pdir.glob("*.log")} == before
        assert (pdir / "quorum-state").exists() and (pdir / f"{8:020d}-{4:010d}.checkpoint").exists()
        d = rec.undo["detail"]["controller-1"]
        part = d["partitions"]["__cluster_metadata-0"]
        assert part["durable_by"] == "raft-flush" and part["expected_log_end_offset"] == 13
        (u,) = d["page_cache_cut"]["uncertain"]
        assert u["kept"] == [11, 13] and "cut" not in u
        nem.stop(rec)                                   # heal: the controller runs again
        assert node.service_pids()
        # the wipe finds the controller's config on its command line: wait until the restarted
        # process has exec'd it (spawn returns the pid before the exec; until then the shell's
        # `sh -c "exec ... kafka.Kafka ..."` holds the name inside one argument, which
        # hostinfo.running_config rightly does not take for the process)
        deadline = time.monotonic() + 10
        while "kafka.Kafka" not in Path(f"/proc/{node.service_pids()[0]}/cmdline").read_bytes().decode(
                errors="replace").split("\0"):
            assert time.monotonic() < deadline, "the restarted controller never showed its command line"
            time.sleep(0.02)
        # disk-wipe on a controller empties its metadata log dir and keeps who it is
        wipe = DiskWipe()
        wipe.setup(make_ctx(tmp_path / "w", [node]))
        wrec = wipe.start(["controller-1"], restart=False)
        assert sorted(p.name for p in md.iterdir()) == ["meta.properties"]
        meta = dict(l.split("=", 1) for l in (md / "meta.properties").read_text().splitlines() if "=" in l)
        assert meta["node.id"] == "3000" and meta["cluster.id"] == "fl-test-cluster"
        assert wrec.undo["detail"]["controller-1"]["dirs"][0]["dir"] == str(md)
    finally:
        node.stop_service(9)


@pytest.mark.parametrize("version, leo, cut_uncertain", [(None, 8, [8, 13]), ("3.9.1", 8, None), ("3.4.0", 13, None)])
def test_broker_metadata_log_in_its_log_dir_is_cut_at_its_newest_segment(tmp_path, version, leo, cut_uncertain):
    """On a broker (an observer) Kafka 3.5+ flushes the metadata log only at rolls
    (KafkaRaftClient.appendAsFollower: ``if (quorum.isVoter()) log.flush``), 3.4 after every fetch:
    with the release known the cut is exact, at the newest segment or keeping all; unknown, it is
    cut at the newest segment and the rest reported uncertain."""
    log_dir = tmp_path / "data"
    pdir = metadata_layout(log_dir)
    node = kafka_like(tmp_path, "broker-1", "broker", 1, {"log.dirs": str(log_dir)})
    try:
        nem = Reboot()
        nem.setup(make_ctx(tmp_path, [node]))
        rec = nem.start(["broker-1"], mode="truncate-unflushed", restart=False,
                        **({"kafka_version": version} if version else {}))
        assert log_end_offset(pdir) == leo
        unc = rec.undo["detail"]["broker-1"]["page_cache_cut"]["uncertain"]
        assert [u.get("cut") for u in unc if u.get("cut")] == ([cut_uncertain] if cut_uncertain else [])
        if cut_uncertain:
            assert any("KAFKA-13884" in w for w in unc[0]["why"])
    finally:
        node.stop_service(9)


def test_controller_without_any_dir_is_one_line(tmp_path):
    node = TestNode("controller-1", "controller", 3000, "127.0.0.1", command=["sleep", "600"])
    for nem in (Reboot(), DiskWipe()):
        nem.setup(make_ctx(tmp_path, [node]))
        try:
            nem.start(["controller-1"], mode="truncate-unflushed") if isinstance(nem, Reboot) else nem.start(["controller-1"])
        except ValueError as e:
            assert "no metadata log dir known" in str(e) and "kafka_metadata_log_dir" in str(e) and "\n" not in str(e)
        else:
            raise AssertionError("a controller with no metadata log dir must be refused")


def test_topic_flush_messages_given_in_params_is_used(tmp_path):
    """A topic's ``flush.messages`` lives in the metadata, not on the host: a campaign gives it in
    ``params.kafka_config`` under Kafka's topic name."""
    log_dir = tmp_path / "data"
    pdir = write_partition(log_dir, "m", 0, {0: [(0, 5), (5, 5), (10, 5), (15, 5), (20, 5)]})
    node = TestNode("broker-1", "broker", 1, "127.0.0.1", command=["sleep", "600"])
    node.log_dirs = [str(log_dir)]
    node.start_service()
    try:
        nem = Reboot()
        nem.setup(make_ctx(tmp_path, [node]))
        rec = nem.start(["broker-1"], mode="truncate-unflushed", restart=False, kafka_config={"flush.messages": 7})
        assert log_end_offset(pdir) == 25          # without it: no flush known, everything cut
        d = rec.undo["detail"]["broker-1"]
        assert d["flush_config_source"] == "params.kafka_config" and d["page_cache_cut"]["flush"]["messages"] == 7
    finally:
        node.stop_service(9)


def test_segments_wholly_below_the_checkpoint_are_kept_without_being_read(tmp_path):
    """Checkpoint 15 over segments 0, 5, 10, 15: 0 and 5 lie wholly below the segment that ends at
    the floor and are kept unread (a log of many segments is read in its last few); 10 is read,
    and says the kept log ends at 15; the unflushed 15 is cut."""
    log_dir = tmp_path / "data"
    pdir = write_partition(log_dir, "m", 0, {0: [(0, 5)], 5: [(5, 5)], 10: [(10, 5)], 15: [(15, 5)]})
    write_checkpoint(log_dir, "recovery-point-offset-checkpoint", {("m", 0): 15})
    node = TestNode("broker-1", "broker", 1, "127.0.0.1", command=["sleep", "600"])
    node.log_dirs = [str(log_dir)]
    node.start_service()
    try:
        nem = Reboot()
        nem.setup(make_ctx(tmp_path, [node]))
        rec = nem.start(["broker-1"], mode="truncate-unflushed", restart=False,
                        kafka_config={"log.flush.interval.messages": 2 ** 63 - 1})
        part = rec.undo["detail"]["broker-1"]["partitions"]["m-0"]
        assert part["expected_log_end_offset"] == 15 and part["log_end_offset_before"] == 20
        assert part["truncated_bytes"] == len(batch_bytes(15, 5))
        assert (pdir / f"{10:020d}.log").exists() and not (pdir / f"{15:020d}.log").exists()
    finally:
        node.stop_service(9)


def test_an_empty_checkpoint_as_kafka_creates_it_reads_as_no_entries(tmp_path):
    """Kafka creates every checkpoint file empty when it opens it (CheckpointFile's constructor,
    Files.createFile) and writes it at the next checkpoint, 60 s on; until then the file is empty,
    and Kafka reads it as no entries (CheckpointFile.CheckpointReadBuffer.read), as the cut must:
    every batch since offset 0 is cut (nothing rolled, nothing flushed). A file that is not a
    checkpoint at all is still refused in one line."""
    log_dir = tmp_path / "data"
    pdir = write_partition(log_dir, "fresh", 0, {0: [(0, 5), (5, 5)]})
    (log_dir / "recovery-point-offset-checkpoint").write_text("")
    node = kafka_like(tmp_path, "broker-1", "broker", 1, {"log.dirs": str(log_dir)})
    node.log_dirs = [str(log_dir)]
    try:
        nem = Reboot()
        nem.setup(make_ctx(tmp_path, [node]))
        rec = nem.start(["broker-1"], mode="truncate-unflushed", restart=False)
        part = rec.undo["detail"]["broker-1"]["partitions"]["fresh-0"]
        assert part["recovery_point"] == 0 and part["expected_log_end_offset"] == 0 and log_end_offset(pdir) == 0
        nem.stop(rec)
        (log_dir / "recovery-point-offset-checkpoint").write_text("garbage\n")
        try:
            nem.start(["broker-1"], mode="truncate-unflushed", restart=False)
            raise AssertionError("a checkpoint file that is not one was taken")
        except ValueError as e:
            assert "not a Kafka offset checkpoint" in str(e) and "\n" not in str(e)
    finally:
        node.stop_service(9)
