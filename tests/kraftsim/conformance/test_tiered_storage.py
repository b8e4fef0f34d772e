"""Tiered storage (KIP-405) and KIP-1023 as kraftsim models them, on a real broker's objects.

Each case drives kraftsim's broker, replica, log and remote tier (real files) as Kafka's own
tests drive UnifiedLog / RemoteLogManager / ReplicaFetcherThread:
- the copy task copies only closed segments below the LSO (RemoteLogManager.candidateLogSegments);
- local retention never deletes a segment that is not tiered yet (UnifiedLog.deletableSegments);
- reads below the local log start are served from the tier for consumers and answered
  OFFSET_MOVED_TO_TIERED_STORAGE for followers (ReplicaManager.handleOffsetOutOfRangeError);
- ListOffsets EARLIEST / EARLIEST_LOCAL / LATEST_TIERED (UnifiedLog.fetchOffsetByTimestamp);
- KIP-1023: an empty follower starts at the last tiered offset + 1 with the leader's epochs.
"""
from __future__ import annotations

from pathlib import Path

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from kraftsim.storage import records as rec
from kraftsim.wire import build

from .broker_harness import TOPIC, BrokerSim, run

TIERED = {"remote.log.storage.system.enable": True, "log.segment.bytes": 1024}


def tiered_sim(tmp: Path, remote: Path, *, node: int = 1, leader: int = 1, isr: list[int] | None = None,
               topic: dict[str, str] | None = None, **settings: object) -> BrokerSim:
    sim = BrokerSim(tmp, node=node, leader=leader, replicas=[1, 2], isr=isr if isr is not None else [1],
                    settings={**TIERED, "remote.log.storage.dir": str(remote), **settings})
    sim.b.image.topics[TOPIC].configs.update({"remote.storage.enable": "true", **(topic or {})})
    return sim


def fill(sim: BrokerSim, batches: int = 40) -> None:
    for _ in range(batches):
        sim.append(5)


def fetch_pd(offset: int) -> object:
    req = build(load_request_schema(1, 15), {"topics": [{"topic_id": None, "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
         "log_start_offset": -1, "last_fetched_epoch": -1}]}]})
    return req.topics[0].partitions[0]


def test_copy_task_copies_closed_segments_below_the_hwm_only(tmp_path: Path) -> None:
    sim = tiered_sim(tmp_path / "b1", tmp_path / "remote", isr=[1, 2])
    fill(sim)
    r = sim.r
    closed = r.log.closed_segments()
    assert len(closed) >= 3
    # the follower has fetched up to the end of the second closed segment: HWM there
    hwm = closed[1][1]
    sim.fetch(2, hwm)
    assert r.hwm == hwm
    assert sim.b.rlm.copy(r) == 2
    assert sim.b.rlm.highest_offset(r) == hwm - 1
    # everything up to the LEO is replicated: every closed segment, never the active one
    sim.fetch(2, r.log.log_end_offset)
    sim.b.rlm.copy(r)
    assert sim.b.rlm.highest_offset(r) == closed[-1][1] - 1 < r.log.log_end_offset - 1
    assert sim.b.rlm.copy(r) == 0  # nothing new to copy


def test_local_retention_never_deletes_an_untiered_segment(tmp_path: Path) -> None:
    sim = tiered_sim(tmp_path / "b1", tmp_path / "remote", topic={"local.retention.bytes": "0"})
    fill(sim)
    r = sim.r
    before = r.log.segment_base_offsets()
    assert sim.b.rlm.retain(r) == 0  # every segment breaches local.retention.bytes, none is tiered
    assert r.log.segment_base_offsets() == before and r.log.log_start_offset == 0
    # tier the first two segments only (the HWM allows no more), then retention deletes those two
    closed = r.log.closed_segments()
    r.hwm = closed[1][1]
    sim.b.rlm.copy(r)
    assert sim.b.rlm.retain(r) == 2
    assert r.log.log_start_offset == closed[2][0]
    # local.retention.ms: a segment whose largest timestamp is old enough, and tiered
    r.hwm = r.log.log_end_offset
    sim.b.image.topics[TOPIC].configs.update({"local.retention.bytes": "-2", "local.retention.ms": "60000"})
    assert sim.b.rlm.retain(r) == 0  # untiered
    sim.b.rlm.copy(r)
    assert sim.b.rlm.retain(r, now_ms=0) == 0  # tiered but recent
    far = 10 ** 15
    assert sim.b.rlm.retain(r, now_ms=far) == len(closed) - 2
    assert r.log.log_start_offset == r.log.segment_base_offsets()[0] == closed[-1][1]


def test_local_retention_off_without_remote_storage_for_the_topic(tmp_path: Path) -> None:
    sim = tiered_sim(tmp_path / "b1", tmp_path / "remote", topic={"remote.storage.enable": "false",
                                                                "local.retention.bytes": "0"})
    fill(sim)
    sim.r.hwm = sim.r.log.log_end_offset
    assert sim.b.rlm.copy(sim.r) == 0 and sim.b.rlm.retain(sim.r) == 0


def _tiered_and_trimmed(tmp_path: Path) -> BrokerSim:
    sim = tiered_sim(tmp_path / "b1", tmp_path / "remote", topic={"local.retention.bytes": "0"})
    fill(sim)
    sim.b.rlm.copy(sim.r)
    sim.b.rlm.retain(sim.r)
    assert sim.r.log.log_start_offset > 0
    return sim


def test_consumer_reads_below_the_local_log_start_come_from_the_tier(tmp_path: Path) -> None:
    sim = _tiered_and_trimmed(tmp_path)
    r = sim.r
    out, n = sim.b.replica_manager.fetch_partition(TOPIC, fetch_pd(0), -1, -1, 15)
    assert out["error_code"] is ErrorCode.none and n > 0
    assert out["log_start_offset"] == 0  # UnifiedLog.logStartOffset covers the tier
    first = next(iter(rec.iter_batches(out["records"], 0, check_crc=True)))
    assert first.base_offset == 0 and first.crc_valid
    # reading on from each answer reaches the local log without a gap
    off, seen = 0, []
    while off < r.hwm:
        out, _ = sim.b.replica_manager.fetch_partition(TOPIC, fetch_pd(off), -1, -1, 15)
        assert out["error_code"] is ErrorCode.none
        batches = list(rec.iter_batches(out["records"], 0, check_crc=True))
        assert batches and batches[0].base_offset == off
        seen += [b.base_offset for b in batches]
        off = batches[-1].last_offset + 1
    assert off == r.hwm == r.log.log_end_offset


def test_follower_fetch_below_the_local_log_start_is_offset_moved_to_tiered_storage(tmp_path: Path) -> None:
    sim = _tiered_and_trimmed(tmp_path)
    out, _ = sim.b.replica_manager.fetch_partition(TOPIC, fetch_pd(0), 2, 102, 15)
    assert out["error_code"] is ErrorCode.offset_moved_to_tiered_storage


def test_list_offsets_tiered_timestamps(tmp_path: Path) -> None:
    sim = _tiered_and_trimmed(tmp_path)
    rlm, r = sim.b.rlm, sim.r
    assert rlm.list_offset(r, -2) == 0
    assert rlm.list_offset(r, -4) == r.log.log_start_offset
    assert rlm.list_offset(r, -5) == rlm.highest_offset(r) >= r.log.log_start_offset - 1
    assert rlm.list_offset(r, -6) == rlm.highest_offset(r) + 1


def test_kip1023_empty_follower_starts_at_last_tiered_offset_plus_one(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    leader = tiered_sim(tmp_path / "b1", remote)
    fill(leader)
    leader.b.rlm.copy(leader.r)
    lto = leader.b.rlm.highest_offset(leader.r)
    assert lto > 0
    run(_kip1023_follower(tmp_path, leader, lto))


async def _kip1023_follower(tmp_path: Path, leader: BrokerSim, lto: int) -> None:
    # a follower replica starts its fetcher task: it needs a running event loop
    f = tiered_sim(tmp_path / "b2", tmp_path / "remote", node=2, leader=1, isr=[1, 2],
                   **{"follower.fetch.last.tiered.offset.enable": True})
    fr = f.r
    assert fr.role == "follower" and fr.log.log_end_offset == 0
    leo = leader.r.log.log_end_offset
    assert f.b.rlm.should_fetch_from_last_tiered_offset(fr, leo)
    assert not f.b.rlm.should_fetch_from_last_tiered_offset(fr, 0)  # the leader has no data
    f.b.image.topics[TOPIC].configs["cleanup.policy"] = "compact"
    assert not f.b.rlm.should_fetch_from_last_tiered_offset(fr, leo)  # compacted
    del f.b.image.topics[TOPIC].configs["cleanup.policy"]
    assert f.b.rlm.bootstrap_at(fr, lto + 1, reason="kip1023_last_tiered_offset")
    assert fr.log.log_start_offset == fr.log.log_end_offset == lto + 1
    assert fr.log.epoch_entries() == leader.r.log.epoch_entries()
    # the follower's fetch from there is served and appends
    out, _ = leader.b.replica_manager.fetch_partition(TOPIC, fetch_pd(lto + 1), 2, 102, 15)
    assert out["error_code"] is ErrorCode.none
    fr.log.append_as_follower(bytes(out["records"]))
    assert fr.log.log_end_offset > lto + 1
    # no longer empty: the condition is false
    assert not f.b.rlm.should_fetch_from_last_tiered_offset(fr, leo)


def test_kip1023_off_by_default(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    leader = tiered_sim(tmp_path / "b1", remote)
    fill(leader)
    leader.b.rlm.copy(leader.r)
    run(_kip1023_off(tmp_path, leader))


async def _kip1023_off(tmp_path: Path, leader: BrokerSim) -> None:
    f = tiered_sim(tmp_path / "b2", tmp_path / "remote", node=2, leader=1, isr=[1, 2])
    assert not f.b.rlm.should_fetch_from_last_tiered_offset(f.r, leader.r.log.log_end_offset)
