"""The nemeses that act on a real KRaft controller quorum (3 controllers, 3 brokers), on a 3.x
and a 4.x release, each shown by what Kafka then does.

- The AlterPartition proxy, placed by DNAT in front of every controller, holds the request that
  adds a restarted follower X back to the ISR; the active controller is then killed: the leader
  sends the held request again to the controller the quorum elected, the proxy sees that copy
  (towards the new controller) and keeps it held - X stays out of the ISR - until the release,
  after which the *new* controller accepts it and X is in the ISR.
- A partition isolating the active controller: the other voters elect another leader in a higher
  epoch; after the heal the isolated voter follows it and its metadata log catches up.
- A disk wipe of a controller: its metadata log dir emptied and formatted again by its
  ``kafka_service.format`` (same node id and cluster id), and the voter fetches the whole
  metadata log back from the leader (DescribeQuorum: its log end offset reaches the leader's).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from nemeses.catalog import load_nemeses
from tests.realkafka.conftest import real_cluster
from tests.realkafka.realcluster import RELEASES, SLOW, RealCluster, meta_properties, nemesis, proc_state, wait_for

TOPIC = "quorum"
BROKER_HEARTBEAT = "63"   # api key, as the proxy counts requests


#: Kafka's own quorum timeouts instead of the fast profile's 500 ms / 1 s (kraftsim's): on a loaded
#: two-core machine a JVM's pauses made the fast quorum elect every few seconds, and a failover the
#: test makes must be the one that happens (the brokers' session timeouts stay fast)
QUORUM_TIMING = {"controller.quorum.election.timeout.ms": "1000", "controller.quorum.fetch.timeout.ms": "2000"}


@pytest.fixture(scope="module", params=RELEASES)
def kafka(request, tmp_path_factory):
    load_nemeses()
    with real_cluster(tmp_path_factory, request.param, controllers=3, settings=QUORUM_TIMING) as c:
        c.create_topic(TOPIC, partitions=1, rf=3, min_isr=2)
        yield c


def healthy(kafka: RealCluster) -> dict:
    """Three voters, one leader, every voter caught up; every broker listed; the ISR full."""
    wait_for(lambda: (q := kafka.quorum()) and q["leader_id"] is not None and len(q["voters"]) == 3
             and all(v["log_end_offset"] >= q["high_watermark"] for v in q["voters"]), 90,
             "a controller quorum with every voter caught up")
    wait_for(lambda: kafka.alive_brokers() == {1, 2, 3}, 90, "all three brokers registered and unfenced")
    return kafka.wait_state(TOPIC, lambda p: p["leader"] is not None and sorted(p["isr"]) == [1, 2, 3], 90,
                            f"{TOPIC}-0 led with the full ISR")


def events(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []


def test_held_alter_partition_follows_a_controller_failover_and_stays_held(kafka, tmp_path, faults):
    control, ev_path, release = tmp_path / "proxy", tmp_path / "proxy-events.jsonl", tmp_path / "release"
    ctx = kafka.ctx(tmp_path, topic=TOPIC, proxy={
        "control_dir": str(control), "events": str(ev_path), "upstream": "auto", "placement": "dnat",
        # this machine as the nodes reach it (the cluster's gateway), any free port: `listen: auto`
        "listen": f"{kafka.inventory.harness_address}:0"})
    faults.append(ctx)
    st = healthy(kafka)
    lid = st["leader"]
    x = next(b for b in kafka.brokers() if kafka.nodes[b].node_id != lid)
    xid = kafka.nodes[x].node_id
    ap = nemesis("alter-partition", ctx)
    try:
        # every broker now reaches the controllers through the proxy
        wait_for(lambda: int(ap.status().get("counts", {}).get(BROKER_HEARTBEAT, 0)) > 12, SLOW,
                 "heartbeats through the proxy")
        hold = ap.start([x], partition=0, until={"file": str(release)}, max_hold_s=120)
        kill = nemesis("kill", ctx)
        down = kill.start([x])
        kafka.wait_state(TOPIC, lambda p: xid not in p["isr"], SLOW, f"{x} out of the ISR")
        kill.stop(down)
        wait_for(lambda: ap.is_held(hold), 60, f"the AlterPartition adding {x} back held")
        # the controller the held request is bound for - the active one, as the leader sees it - dies
        bound = next(e for e in events(ev_path) if e["event"] == "proxy_hold" and e["hold_id"] == hold.id)["upstream"]
        cname = next(c for c in kafka.controllers() if f"{kafka.nodes[c].address}:9093" == bound)
        ckill = nemesis("kill", ctx)
        cdown = ckill.start([cname])
        # the proxy closes the dead controller's connections as the controller would; the leader sends
        # the request again to the controller it now believes active (or, at the latest, when its
        # request times out: controller.socket.timeout.ms, 30 s)
        followed = wait_for(lambda: [e for e in events(ev_path) if e["event"] == "proxy_hold_followed"
                                     and e["upstream"] != bound], SLOW,
                            "the leader's copy of the held request, sent to another controller")
        assert followed[0]["held"] is True and followed[0]["hold_id"] == hold.id and xid in followed[0]["new_isr"]
        wait_for(lambda: (q := kafka.quorum()) and q["leader_id"] not in (None, kafka.nodes[cname].node_id), SLOW,
                 "the quorum led by another controller")
        # it stays held: for a while X is kept out of the ISR by nothing but the proxy
        until = time.monotonic() + 3.0
        while time.monotonic() < until:
            assert ap.is_held(hold), "the copy bound for the new controller stays held"
            assert xid not in kafka.state(TOPIC)[0]["isr"], f"{x} joined the ISR while its AlterPartition was held"
        release.write_text("go")
        wait_for(lambda: ap.release_info(hold), SLOW, "the hold released by its file")
        kafka.wait_state(TOPIC, lambda p: xid in p["isr"], SLOW, f"{x} back in the ISR")
        accepted = [e for e in events(ev_path) if e["event"] == "alter_partition" and e.get("accepted")
                    and xid in (e.get("new_isr") or []) and e["wall"] >= followed[0]["wall"]]
        assert accepted and accepted[0]["upstream"] != bound, "a new controller accepted the released request"
        ap.stop(hold)
        ckill.stop(cdown)
        assert kafka.pid(cname) and proc_state(kafka.pid(cname)) != "Z"
    finally:
        ap.teardown()   # the DNAT rules go, the proxy stops (releasing whatever it still holds)
    assert kafka.faultline_rules() == {}
    healthy(kafka)


def test_isolating_the_active_controller_moves_the_quorum(kafka, tmp_path, faults):
    ctx = kafka.ctx(tmp_path)
    faults.append(ctx)
    healthy(kafka)
    q = kafka.quorum()
    active, epoch = q["leader_id"], q["leader_epoch"]
    cname = kafka.name_of(active)
    part = nemesis("partition", ctx)
    rec = part.start([cname], shape="isolate")
    try:
        reach = kafka.reach([cname])
        assert not any(reach.values()), f"the isolated {cname} reaches {[d for (_, d), ok in reach.items() if ok]}"
        moved = wait_for(lambda: (q := kafka.quorum()) and q["leader_id"] not in (None, active) and q, SLOW,
                         "the other voters elect a leader")
        assert moved["leader_epoch"] > epoch
        # every broker fetches the metadata log from the new leader (it lists them as its observers)
        wait_for(lambda: (q := kafka.quorum()) and q["leader_id"] == moved["leader_id"]
                 and {o["id"] for o in q["observers"]} >= {1, 2, 3}, SLOW, "the brokers follow the new controller")
    finally:
        part.stop(rec)
    assert kafka.faultline_rules() == {}
    healthy(kafka)   # the isolated voter follows the new leader and catches up


def test_disk_wipe_of_a_controller_formats_it_again_and_it_catches_up(kafka, tmp_path, faults):
    ctx = kafka.ctx(tmp_path)
    faults.append(ctx)
    healthy(kafka)
    q = kafka.quorum()
    voter = next(c for c in kafka.controllers() if kafka.nodes[c].node_id != q["leader_id"])
    vid = kafka.nodes[voter].node_id
    mdir = Path(kafka.nodes[voter].spec.metadata_log_dir)
    before = meta_properties(mdir)
    assert (mdir / "__cluster_metadata-0" / "quorum-state").exists()
    pid = kafka.pid(voter)
    wipe = nemesis("disk-wipe", ctx)
    rec = wipe.start([voter], restart=False)
    assert proc_state(pid) in (None, "Z") and kafka.pid(voter) is None
    # formatted again: who the node is, and no metadata log, no quorum state
    assert not (mdir / "__cluster_metadata-0").exists()
    after = meta_properties(mdir)
    assert (after["node.id"], after["cluster.id"]) == (before["node.id"], before["cluster.id"]) \
        == (str(vid), kafka.k.cluster_id)
    assert "Formatting" in rec.undo["detail"][voter]["formatted"]
    # the quorum goes on without it: a write still commits
    assert kafka.produce(TOPIC, 10, "wipe") == 10
    wipe.stop(rec)
    assert kafka.pid(voter) and kafka.pid(voter) != pid
    # the voter fetches the whole metadata log back from the leader (as the leader of the moment
    # reports it: under load the fast timeouts may move the leadership meanwhile)
    wait_for(lambda: (q := kafka.quorum()) and q["high_watermark"] > 0 and any(
        v["id"] == vid and v["log_end_offset"] >= q["high_watermark"] for v in q["voters"]), 90,
        f"the wiped {voter} caught up with the metadata log")
    assert (mdir / "__cluster_metadata-0" / "quorum-state").exists()
    healthy(kafka)
