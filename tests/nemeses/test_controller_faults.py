"""Controllers in a fault's reach: page-cache-loss reboots of the active and of a follower KRaft
controller, and a follower controller's disk wiped, on the embedded 3-controller cluster under an
acks=all load, through ``faultline run campaigns/controller-reboot.yaml`` (the real CLI, the real
checker).

What must hold (KIP-595's durability, as Kafka's raft client gives it): every acknowledged write
survives, and the quorum's own log loses only what Raft never committed: every offset below the
high watermark the quorum reported before a reboot is, after the run, in every controller's
metadata log with the same bytes, and no controller truncated its metadata log below it. The
wiped follower rejoins empty and catches up from the leader. Before controllers were in reach,
``reboot`` on a controller failed with "no log dirs known" (the run exited 3).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.clirun import REPO, faultline, force_cleanup, read_jsonl

pytestmark = pytest.mark.timeout(900)


def batches(pdir: Path) -> list[tuple[int, int, bytes]]:
    """(base offset, last offset, bytes) of every complete record batch of a metadata log."""
    out = []
    for seg in sorted(pdir.glob("*.log")):
        data, pos = seg.read_bytes(), 0
        while pos + 27 <= len(data):
            base = int.from_bytes(data[pos:pos + 8], "big", signed=True)
            end = pos + 12 + int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
            if end > len(data):
                break
            out.append((base, base + int.from_bytes(data[pos + 23:pos + 27], "big", signed=True), data[pos:end]))
            pos = end
    return out


def below(bs: list[tuple[int, int, bytes]], hw: int) -> list[tuple[int, int, bytes]]:
    return [b for b in bs if b[1] < hw]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("ctlfaults")
    state, results = tmp / "state", tmp / "results"
    try:
        p = faultline(["run", str(REPO / "campaigns" / "controller-reboot.yaml"), "--seed", "5",
                       "--results-dir", str(results), "--no-progress"], state, timeout=840)
    except BaseException:
        force_cleanup(results, state)
        raise
    tail = "\n".join(ln for ln in p.stderr.splitlines() if "WARN" not in ln)[-2000:]
    assert p.returncode == 0, f"faultline run exited {p.returncode}:\n{tail}"
    return Path(p.stdout.strip().splitlines()[-1])


def test_no_acknowledged_write_is_lost(run):
    v = json.loads((run / "verdict.json").read_text())
    assert v["valid"] is True and v["as_expected"] is True, v.get("counts")
    assert v["acked_writes"] > 1000 and v["counts"]["lost_write"] == 0 and v["counts"]["unseen_at_end"] == 0


def faults(run: Path) -> dict[str, dict]:
    tl = read_jsonl(run / "timeline.jsonl")
    starts = {r["id"]: r for r in tl if r.get("kind") == "nemesis" and r.get("phase") == "start"}
    notes = {r["fault_id"]: r for r in tl if r.get("kind") == "note" and r.get("fault_id")}
    return {fid: {**r, "applied": notes.get(fid)} for fid, r in starts.items()}


def active_at(run: Path, t: float) -> str | None:
    """The controller leading the quorum at run time t, from the controllers' controller_elected."""
    w0 = json.loads((run / "run.json").read_text())["wall_at_t0"]
    best = None
    for k in (1, 2, 3):
        for e in read_jsonl(run / "cluster-logs" / f"controller-{k}" / "events.jsonl"):
            if e.get("event") == "controller_elected" and e["wall"] - w0 <= t and (best is None or e["epoch"] > best[0]):
                best = (e["epoch"], f"controller-{k}")
    return best[1] if best else None


def test_reboots_hit_the_active_then_a_follower_controller_and_were_applied(run):
    fs = sorted(faults(run).values(), key=lambda r: r["t"])
    reboots = [f for f in fs if f["fault"] == "reboot"]
    wipes = [f for f in fs if f["fault"] == "disk-wipe"]
    assert len(reboots) == 2 and len(wipes) == 1
    assert all(f["applied"] is not None for f in reboots + wipes), "a fault was started but never applied"
    first, second = reboots
    assert first["targets"] == [active_at(run, first["t"])]
    assert second["targets"][0].startswith("controller-") and second["targets"] != [active_at(run, second["t"])]
    assert wipes[0]["targets"][0].startswith("controller-") and wipes[0]["targets"] != [active_at(run, wipes[0]["t"])]
    for f in reboots:
        (host, d), = f["applied"]["detail"].items()
        part = d["partitions"]["__cluster_metadata-0"]
        # kraftsim's checkpoint is written at every raft flush: the cut is exact, nothing uncertain
        assert d["page_cache_cut"]["flush_model"] == "checkpoint" and d["page_cache_cut"]["uncertain"] == []
        assert part["expected_log_end_offset"] == part["durable_offset"] == part["recovery_point"]
        assert "page-cache cut (checkpoint) removed" in f["applied"]["text"]
    (wd,) = wipes[0]["applied"]["detail"].values()
    assert wd["dirs"][0]["dir"].endswith("/metadata") and wd["dirs"][0]["removed_entries"] > 0


def test_the_quorum_keeps_every_offset_it_had_committed(run):
    """Committed offsets before each fault (DescribeQuorum's high watermark, controller-quorum.jsonl)
    are in every controller's metadata log after the run, byte for byte, and no controller's
    metadata log was truncated below them."""
    quorum = read_jsonl(run / "controller-quorum.jsonl")
    logs = {k: batches(run / "cluster" / f"controller-{k}" / "metadata" / "__cluster_metadata-0") for k in (1, 2, 3)}
    final_hw = max(q["high_watermark"] for q in quorum if q.get("high_watermark") is not None)
    assert final_hw > 0
    # the wiped follower caught up: every controller holds the whole committed log, the same bytes
    ref = below(logs[1], final_hw)
    assert ref and ref[-1][1] == final_hw - 1 and all(below(logs[k], final_hw) == ref for k in (2, 3))
    w0 = json.loads((run / "run.json").read_text())["wall_at_t0"]
    for f in faults(run).values():
        before = [q["high_watermark"] for q in quorum if q["t"] < f["t"] and q.get("high_watermark") is not None]
        assert before, f"no committed offset was sampled before {f['fault']} at {f['t']}"
        hw = max(before)
        assert all(below(logs[k], hw) == below(ref, hw) for k in (1, 2, 3))
        for k in (1, 2, 3):
            cut = [e for e in read_jsonl(run / "cluster-logs" / f"controller-{k}" / "events.jsonl")
                   if e.get("event") == "metadata_truncation" and e["wall"] - w0 >= f["t"] and e["to_offset"] < hw]
            assert not cut, f"controller-{k} truncated committed metadata: {cut}"


@pytest.mark.slow
def test_chaos_controllers_loses_nothing_and_applies_every_fault(tmp_path):
    """campaigns/chaos-controllers.yaml, one seeded random mix of page-cache-loss reboots of the
    active and of a follower controller, kills, pauses and isolations of controllers and brokers,
    each fault with its own targets, on RF 3 / min ISR 2: no acknowledged write lost, every fault
    applied (none failed, at least the campaign's nemesis.min_applied) on a host its selector
    names, and healed; both reboots of an active and of a follower controller happen in the one
    run. (Its isolations are iptables rules: run under the netlab lock, as every test here.)"""
    state, results = tmp_path / "state", tmp_path / "results"
    try:
        p = faultline(["run", str(REPO / "campaigns" / "chaos-controllers.yaml"), "--seed", "22",
                       "--results-dir", str(results), "--no-progress"], state, timeout=840)
    except BaseException:
        force_cleanup(results, state)
        raise
    tail = "\n".join(ln for ln in p.stderr.splitlines() if "WARN" not in ln)[-2000:]
    assert p.returncode == 0, f"faultline run exited {p.returncode}:\n{tail}"
    rd = Path(p.stdout.strip().splitlines()[-1])
    v = json.loads((rd / "verdict.json").read_text())
    assert v["outcome"] == "as_expected" and v["valid"] is True
    assert v["counts"]["lost_write"] == 0 and v["acked_writes"] > 1000 and v["halts"] == []
    assert v["faults"]["failed"] == 0 and v["faults"]["min_applied"] == 6
    assert v["faults"]["applied"] >= v["faults"]["min_applied"]
    tl = read_jsonl(rd / "timeline.jsonl")
    assert not [r for r in tl if r.get("kind") == "nemesis" and r.get("phase") == "failed"]
    fs = faults(rd)
    stopped = {r["id"] for r in tl if r.get("kind") == "nemesis" and r.get("phase") == "stop"}
    assert len(fs) == v["faults"]["applied"] and set(fs) <= stopped
    roles = set()
    for f in fs.values():
        (target,) = f["targets"]
        if target.startswith("broker-"):
            assert f["fault"] in ("kill", "pause", "partition"), f
            roles.add((f["fault"], "broker"))
            continue
        role = "active" if target == active_at(rd, f["t"] - 0.01) else "follower"
        roles.add((f["fault"], role))
        if f["fault"] == "reboot":
            assert f["applied"] is not None and "page-cache cut" in f["applied"]["text"]
    assert {("reboot", "active"), ("reboot", "follower")} <= roles, roles
    assert len({r for _, r in roles}) == 3, roles      # the active controller, a follower and a broker were hit
