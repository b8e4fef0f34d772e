"""Every broker-side nemesis against a real Apache Kafka cluster (1 controller, 3 brokers), on a
3.x and a 4.x release, each shown by what Kafka then does - never by the fault's own record.

- kill / pause / restart: the JVM is gone / stopped (state T) / replaced; the controller fences
  the broker (it leaves the Metadata broker list) and, after the heal, the broker registers with
  a new broker epoch (its own log says so) and is listed again; a killed leader loses its
  partition to another replica in a higher leader epoch.
- disk wipe of a broker: empty log dirs, formatted again by the node's ``kafka_service.format``
  (same node id and cluster id, new directory id), a new broker epoch, the replica rebuilt.
- the page-cache-loss reboot (truncate-unflushed): the broker's segment files end where the cut
  says, the note names the uncertain ranges, and the broker comes back.
- a reboot whose cut fails after its kill is healed at once: the broker runs again, registered.
- every partition shape between the brokers and the controller: a TCP connect from inside each
  node's namespace to each other node's listener fails exactly for the shape's pairs while it is
  applied and works after the heal, which leaves no rule; Kafka's reaction where a shape has one
  (an isolated follower leaves the ISR and is fenced, one cut from its leader only leaves the ISR,
  one cut from the controller is fenced).
- the degraded link (tbf): a bulk transfer out of the broker takes as long as the rate says.
- and all along, the observer (as a run's) records the partitions; the last test compares what it
  saw with what checkers/kafkalog reads from Kafka's own logs.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import pytest

from nemeses.active import ActiveFaults, FaultFailed
from nemeses.catalog import load_nemeses
from tests.realkafka.conftest import real_cluster
from tests.realkafka.realcluster import RELEASES, SLOW, RealCluster, meta_properties, nemesis, proc_state, wait_for
from workloads.observer import Observer

TOPIC = "faults"
#: every broker leads one partition, so every broker fault is an election somewhere
PARTITIONS = 3
#: a leadership this long is sampled by the observer (every 0.25 s) even on a loaded machine
HELD_S = 3.0


@pytest.fixture(scope="module", params=RELEASES[-1:])
def kafka(request, tmp_path_factory):
    """The module's cluster, with the observer sampling TOPIC all along (RUN/observer.jsonl, as a
    run's): every fault of the module elects leaders and changes ISRs, and the last test compares
    what the observer saw with what Kafka's logs say.

    The newest release under test only: a broker's fault acts on its JVM, its namespace and its
    disk the same way on 3.x (the quorum module, whose behaviour does differ by release, runs on
    every release); a second cluster cost this module's time twice in a suite held to 25 minutes."""
    load_nemeses()
    with real_cluster(tmp_path_factory, request.param) as c:
        c.create_topic(TOPIC, partitions=PARTITIONS, rf=3, min_isr=2)
        c.observer = Observer(c.bootstrap, TOPIC, c.root / "observer.jsonl", time.time, quorum_path=None)
        c.observer.start()
        try:
            yield c
        finally:
            c.observer.stop()


def healthy(kafka: RealCluster, topic: str = TOPIC) -> dict:
    """Every broker listed and every partition led with its full ISR: the state each test starts
    from and leaves. Returns partition 0's state."""
    wait_for(lambda: kafka.alive_brokers() == {1, 2, 3}, 90, "all three brokers registered and unfenced")

    def full(s: dict) -> bool:
        return len(s) == PARTITIONS and all(p["leader"] is not None and sorted(p["isr"]) == [1, 2, 3] for p in s.values())
    st = wait_for(lambda: (s := kafka.state(topic)) and full(s) and s, 90,
                  f"every partition of {topic} led with the full ISR", poll=0.25)
    return st[0]


def test_kill_pause_restart_act_on_the_broker_jvm(kafka, tmp_path, faults):
    ctx = kafka.ctx(tmp_path)
    faults.append(ctx)
    st = healthy(kafka)
    leader = kafka.name_of(st["leader"])
    lid = st["leader"]

    # kill: the leader's JVM is gone, another replica leads in a higher epoch, the controller fences it
    pid, epochs = kafka.pid(leader), kafka.broker_epochs(leader)
    kill = nemesis("kill", ctx)
    rec = kill.start([leader])
    assert proc_state(pid) in (None, "Z") and kafka.pid(leader) is None
    moved = kafka.wait_state(TOPIC, lambda p: p["leader"] not in (None, lid), SLOW, "a new leader after the kill")
    assert moved["leader_epoch"] > st["leader_epoch"] and lid not in moved["isr"]
    wait_for(lambda: lid not in kafka.alive_brokers(), SLOW, f"{leader} fenced")
    kill.stop(rec)
    new = kafka.pid(leader)
    assert new and new != pid
    wait_for(lambda: len(kafka.broker_epochs(leader)) > len(epochs), 60, f"{leader} registers again")
    assert kafka.broker_epochs(leader)[-1] > epochs[-1]
    healthy(kafka)

    # pause: SIGSTOP keeps the process (state T) and its sockets; the controller fences it; SIGCONT resumes
    victim = next(b for b in kafka.brokers() if b != leader)
    vid = kafka.nodes[victim].node_id
    pid = kafka.pid(victim)
    pause = nemesis("pause", ctx)
    rec = pause.start([victim])
    wait_for(lambda: proc_state(pid) == "T", 5, f"{victim}'s JVM stopped (SIGSTOP is delivered asynchronously)",
             poll=0.05)
    wait_for(lambda: vid not in kafka.alive_brokers(), SLOW, f"the paused {victim} fenced")
    kafka.wait_state(TOPIC, lambda p: vid not in p["isr"], SLOW, f"{victim} out of the ISR")
    pause.stop(rec)
    assert proc_state(pid) in ("R", "S", "D") and kafka.pid(victim) == pid
    healthy(kafka)

    # restart: SIGTERM (a controlled shutdown), a new JVM, a new registration
    pid, epochs = kafka.pid(victim), kafka.broker_epochs(victim)
    restart = nemesis("restart", ctx)
    rec = restart.start([victim])
    new = kafka.pid(victim)
    assert new and new != pid and proc_state(pid) in (None, "Z")
    restart.stop(rec)
    wait_for(lambda: len(kafka.broker_epochs(victim)) > len(epochs), 60, f"{victim} registers again")
    assert kafka.broker_epochs(victim)[-1] > epochs[-1]
    healthy(kafka)


def cut_pairs(*pairs: tuple[str, str]) -> set[frozenset[str]]:
    return {frozenset(p) for p in pairs}


def shape_plan(shape: str, leader: str, followers: list[str]) -> tuple[list[str], dict, set[frozenset[str]]]:
    """(targets, params, the node pairs that must not connect while the shape is applied), written
    out by hand per shape (Jepsen's partition vocabulary, docs/nemeses.md): a rule dropping one
    direction still fails TCP both ways (the handshake needs both)."""
    f1, f2 = followers
    if shape == "isolate":
        return [f1], {}, cut_pairs((f1, "controller"), (f1, leader), (f1, f2))
    if shape == "halves":
        return ["controller", leader], {}, cut_pairs(("controller", f1), ("controller", f2), (leader, f1), (leader, f2))
    if shape == "bridge":   # the middle node reaches both sides; the sides do not reach each other
        return [leader], {"nodes": ["controller", leader, f1, f2]}, cut_pairs(("controller", f1), ("controller", f2))
    if shape == "one-way":
        return [], {"from": f2, "to": leader}, cut_pairs((f2, leader))
    if shape == "between":
        return [f1, leader, f2], {}, cut_pairs((f1, leader), (f1, f2))
    if shape == "controller":
        return [f1], {}, cut_pairs((f1, "controller"))
    raise AssertionError(shape)


@pytest.mark.parametrize("shape", ["isolate", "halves", "bridge", "one-way", "between", "controller"])
def test_partition_shape_cuts_exactly_its_pairs_and_heal_removes_every_rule(kafka, tmp_path, faults, shape):
    ctx = kafka.ctx(tmp_path)
    faults.append(ctx)
    st = healthy(kafka)
    leader = kafka.name_of(st["leader"])
    followers = [b for b in kafka.brokers() if b != leader]
    targets, params, cut = shape_plan(shape, leader, followers)
    assert all(kafka.reach().values()), "every node reaches every other before the fault"
    part = nemesis("partition", ctx)
    rec = part.start(targets, shape=shape, **params)
    try:
        got = kafka.reach()
        blocked = {frozenset(p) for p, ok in got.items() if not ok}
        assert blocked == cut, f"{shape}: cut {sorted(map(sorted, blocked))}, wanted {sorted(map(sorted, cut))}"
        # both directions of a cut pair fail; every other pair connects
        assert all(not got[(a, b)] and not got[(b, a)] for a, b in map(tuple, cut))
        if shape == "one-way":   # packets flow the other way: datagrams from the receiver side arrive
            assert kafka.udp_delivered(leader, followers[1]) and not kafka.udp_delivered(followers[1], leader)
        effect = EFFECTS.get(shape)
        if effect:
            effect(kafka, st, leader, targets)
    finally:
        part.stop(rec)
    assert kafka.faultline_rules() == {}, "heal left faultline rules in a node's namespace"
    assert all(kafka.reach().values()), "every node reaches every other after the heal"
    healthy(kafka)


def _isolated_follower_leaves_the_isr(kafka, st, leader, targets):
    fid = kafka.nodes[targets[0]].node_id
    kafka.wait_state(TOPIC, lambda p: fid not in p["isr"], SLOW, f"the isolated {targets[0]} out of the ISR")
    wait_for(lambda: fid not in kafka.alive_brokers(), SLOW, f"the isolated {targets[0]} fenced")


def _follower_cut_from_leader_leaves_the_isr_but_stays_registered(kafka, st, leader, targets):
    fid = kafka.nodes[targets[0]].node_id
    # a follower whose log ends where the leader's does counts as caught up however long it has
    # not fetched (Replica.isCaughtUp): writes make it fall behind
    assert kafka.produce(TOPIC, 20, "between") == 20
    kafka.wait_state(TOPIC, lambda p: fid not in p["isr"] and p["leader"] == st["leader"], SLOW,
                     f"the leader shrinks its ISR without {targets[0]}")
    assert fid in kafka.alive_brokers(), f"{targets[0]} still heartbeats to the controller"


def _broker_cut_from_the_controller_is_fenced(kafka, st, leader, targets):
    fid = kafka.nodes[targets[0]].node_id
    wait_for(lambda: fid not in kafka.alive_brokers(), SLOW, f"{targets[0]} fenced by the controller")
    kafka.wait_state(TOPIC, lambda p: fid not in p["isr"], SLOW, f"the fenced {targets[0]} out of the ISR")


#: what Kafka does under some shapes (the others are shown by the connections alone)
EFFECTS = {"isolate": _isolated_follower_leaves_the_isr,
           "between": _follower_cut_from_leader_leaves_the_isr_but_stays_registered,
           "controller": _broker_cut_from_the_controller_is_fenced}


def test_link_rate_limits_the_node_egress_and_heal_removes_the_qdisc(kafka, tmp_path, faults):
    """tc tbf on a real broker's interface (its namespace's eth0): a bulk transfer out of the
    broker takes as long as the rate says, the cluster keeps serving, and the heal restores the
    interface's own qdisc."""
    ctx = kafka.ctx(tmp_path)
    faults.append(ctx)
    victim, peer = "broker-2", "broker-3"
    t = kafka.nodes[victim].transport
    before = t.run(["tc", "qdisc", "show", "dev", "eth0"]).stdout
    nbytes, rate_bits = 250_000, 2_000_000
    fast = kafka.send_seconds(victim, peer, nbytes)
    link = nemesis("link", ctx)
    rec = link.start([victim], kind="rate", rate="2mbit", burst="16kbit", latency="400ms")
    try:
        assert "tbf" in t.run(["tc", "qdisc", "show", "dev", "eth0"]).stdout
        slow = kafka.send_seconds(victim, peer, nbytes)
        # the transfer takes (nearly) as long as 2 mbit/s needs; unlimited it took a fraction of that
        assert slow >= 0.8 * nbytes * 8 / rate_bits > 4 * fast, (slow, fast)
        assert kafka.produce(TOPIC, 20, "rate") == 20
    finally:
        link.stop(rec)
    assert t.run(["tc", "qdisc", "show", "dev", "eth0"]).stdout == before
    assert kafka.send_seconds(victim, peer, nbytes) < 0.5 * nbytes * 8 / rate_bits


def test_disk_wipe_of_a_broker_formats_it_again_and_it_rejoins(kafka, tmp_path, faults):
    ctx = kafka.ctx(tmp_path)
    faults.append(ctx)
    st = healthy(kafka)
    assert kafka.produce(TOPIC, 50, "wipe") == 50
    x = next(b for b in kafka.brokers() if kafka.nodes[b].node_id != st["leader"])
    xid = kafka.nodes[x].node_id
    data = Path(kafka.nodes[x].spec.data_dirs[0])
    before = meta_properties(data)
    assert (data / f"{TOPIC}-0").is_dir()
    pid, epochs = kafka.pid(x), kafka.broker_epochs(x)
    wipe = nemesis("disk-wipe", ctx)
    rec = wipe.start([x], restart=False)
    assert proc_state(pid) in (None, "Z") and kafka.pid(x) is None
    # the disk is empty but for what kafka-storage format wrote: who the node is, not what it held
    assert not (data / f"{TOPIC}-0").exists()
    after = meta_properties(data)
    assert (after["node.id"], after["cluster.id"]) == (before["node.id"], before["cluster.id"]) \
        == (str(xid), kafka.k.cluster_id)
    if "directory.id" in before:   # KIP-858 (3.7+): a new disk is a new log directory
        assert after["directory.id"] != before["directory.id"]
    assert "Formatting" in rec.undo["detail"][x]["formatted"]
    wipe.stop(rec)
    assert kafka.pid(x) and kafka.pid(x) != pid
    wait_for(lambda: len(kafka.broker_epochs(x)) > len(epochs), 60, f"the wiped {x} registers again")
    assert kafka.broker_epochs(x)[-1] > epochs[-1]
    # it fetches the partition from the leader again, from nothing, and rejoins the ISR
    healthy(kafka)
    assert (data / f"{TOPIC}-0").is_dir()


LOADED_RE = r"Completed load of Log\(dir=[^,]*/{topic}-0, .*?logEndOffset=(\d+)\)"


def test_page_cache_loss_reboot_cuts_the_unflushed_tail_and_names_the_uncertain_ranges(kafka, tmp_path, faults):
    """truncate-unflushed on a real broker with Kafka's default flush settings: Kafka fsyncs a
    partition only at segment rolls and its recovery point (the checkpoint) is the floor, so the
    records appended since are cut; a broker's copy of the metadata log is flushed only at its
    segment rolls from 3.5 (KAFKA-13884), and with the broker's release known the cut takes it to
    its newest segment exactly; the run's notes give the cut. Kafka's own log recovery then loads the partition with exactly
    the log end the cut left, and the replica fetches the rest back."""
    import re

    from nemeses.reboot import run_notes
    from tests.harness.clirun import read_jsonl
    from tests.nemeses.segments import log_end_offset

    ctx = kafka.ctx(tmp_path)
    faults.append(ctx)
    st = healthy(kafka)
    x = next(b for b in kafka.brokers() if kafka.nodes[b].node_id != st["leader"])
    pdir = Path(kafka.nodes[x].spec.data_dirs[0]) / f"{TOPIC}-0"
    end = log_end_offset(pdir) + 230
    assert kafka.produce(TOPIC, 230, "pc") == 230
    wait_for(lambda: log_end_offset(pdir) == end, SLOW, f"{x} has fetched all 230 records")
    loaded_re = re.compile(LOADED_RE.format(topic=TOPIC))
    loaded_before = len(loaded_re.findall(kafka.server_log(x)))
    reboot = nemesis("reboot", ctx)
    rec = reboot.start([x], mode="truncate-unflushed", restart=False)
    part = rec.undo["detail"][x]["partitions"][f"{TOPIC}-0"]
    assert part["log_end_offset_before"] == end and part["truncated_bytes"] > 0
    assert log_end_offset(pdir) == part["expected_log_end_offset"] == part["recovery_point"] < end
    pc = rec.undo["detail"][x]["page_cache_cut"]
    # the broker's release is known (the inventory's kafka_version), and a broker (an observer)
    # flushes its metadata log only at segment rolls from 3.5 (KafkaRaftClient.appendAsFollower,
    # KAFKA-13884): the cut takes it back to its newest segment exactly, nothing cut uncertain
    md = rec.undo["detail"][x]["partitions"].get("__cluster_metadata-0")
    assert md is not None and md["durable_by"] in ("segment-roll", "checkpoint"), md
    assert not [u for u in pc["uncertain"] if u["topic"] == "__cluster_metadata" and u.get("cut_bytes")], pc["uncertain"]
    notes = run_notes(read_jsonl(tmp_path / "timeline.jsonl"))
    said = (f"{x}: page-cache cut (kafka) removed {pc['truncated_bytes']} bytes; uncertain: "
            f"{pc['uncertain_cut_bytes']} bytes cut that Kafka may have fsynced" if pc["uncertain_cut_bytes"]
            else f"1 page-cache cut removed {pc['truncated_bytes']} bytes, none of them uncertain")
    assert any(said in n for n in notes), notes
    reboot.stop(rec)
    # Kafka's recovery (no clean-shutdown marker) loads exactly what the cut left, then the
    # replica fetches the rest from the leader and rejoins the ISR
    loaded = wait_for(lambda: len(m := loaded_re.findall(kafka.server_log(x))) > loaded_before and m,
                      60, f"{x} loads {TOPIC}-0 again")
    assert int(loaded[-1]) == part["expected_log_end_offset"]
    healthy(kafka)
    wait_for(lambda: log_end_offset(pdir) == end, SLOW, f"{x} fetched the cut records back")


def test_a_reboot_that_fails_after_its_kill_runs_the_broker_again(kafka, tmp_path, faults):
    """A fault that fails part-way is healed at once through the schedule's one door
    (ActiveFaults): the reboot SIGKILLs the broker's JVM, then its cut refuses (no such log
    dir); the heal starts the broker again from its inventory command, and it registers anew."""
    ctx = kafka.ctx(tmp_path)
    faults.append(ctx)
    healthy(kafka)
    x = "broker-3"
    pid, epochs = kafka.pid(x), kafka.broker_epochs(x)
    active = ActiveFaults(ctx)
    with pytest.raises(FaultFailed) as e:
        active.start("reboot", [x], {"log_dirs": ["/nonexistent"]})
    assert "log dir /nonexistent does not exist" in e.value.reason and e.value.undone == {"started": [x]}, e.value
    assert proc_state(pid) in (None, "Z")
    new = kafka.pid(x)
    assert new and new != pid, "the broker the reboot killed runs again, as a new JVM"
    assert ctx.ledger.open_entries() == [] and active.summary()["failed"] == 1
    wait_for(lambda: len(kafka.broker_epochs(x)) > len(epochs), 60, f"{x} registers again")
    healthy(kafka)


def log_states(events: list[dict], p: int) -> tuple[set, set, Callable[[float], dict], list]:
    """From the events Kafka's logs gave for TOPIC-p: the (leader, leader epoch) pairs, the
    (leader epoch, ISR) states, the state as of a wall time (the newest by partition epoch of
    those logged by then), and the elections in time order as (wall, leader, leader epoch)."""
    mine = [e for e in events if e.get("topic") == TOPIC and e.get("partition") == p]
    elections = sorted((e["wall"], e["leader"], e["leader_epoch"]) for e in mine if e["event"] == "leader_elected")
    leaders = {(e["leader"], e["leader_epoch"]) for e in mine if e["event"] == "leader_elected"}
    leaders |= {(e["broker"], e["leader_epoch"]) for e in mine if e["event"] == "became_leader"}
    states = [e for e in mine if e["event"] in ("leader_elected", "isr_changed", "leader_isr") and e.get("isr")]
    isrs = {(e["leader_epoch"], tuple(sorted(e["isr"]))) for e in states}

    def at(wall: float) -> dict:
        last = max((e for e in states if e["wall"] <= wall), key=lambda e: (e["partition_epoch"], e["wall"]),
                   default=None)
        if last is None:
            return {}
        return {"leader": last.get("leader", last.get("broker")), "leader_epoch": last["leader_epoch"],
                "isr": sorted(last["isr"])}
    return leaders, isrs, at, elections


def test_kafka_logs_agree_with_the_observer(kafka, tmp_path, faults):
    """What the observer saw of every partition all along the module (every fault above elected
    leaders and changed ISRs; this test adds one election per partition: its leader paused until
    the controller fences it) is what checkers/kafkalog reads from Kafka's own logs, collected as
    a run collects them: every leader and leader epoch, every ISR in its leader epoch, the same
    final state - and no line of the logs that looked like a state change went not understood."""
    from checkers import kafkalog
    from tests.harness.clirun import read_jsonl

    ctx = kafka.ctx(tmp_path / "faults")
    faults.append(ctx)
    pause = nemesis("pause", ctx)
    healthy(kafka)
    for p in range(PARTITIONS):
        old = kafka.state(TOPIC)[p]
        leader = kafka.name_of(old["leader"])
        rec = pause.start([leader])
        kafka.wait_state(TOPIC, lambda s: s["leader"] not in (None, old["leader"]), SLOW,
                         f"{TOPIC}-{p} elects another leader", partition=p)
        pause.stop(rec)
        healthy(kafka)
    time.sleep(1.0)   # the observer's last samples of the final state
    kafka.observer.stop()
    problems = kafka.cluster.collect_logs(tmp_path)
    st = kafkalog.Stats()
    events = kafkalog.read_cluster_logs(tmp_path / "cluster-logs", stats=st)
    assert st.not_understood == 0 and st.problems == [] and problems == [], (st, problems)
    observed = [r for r in read_jsonl(kafka.root / "observer.jsonl") if r.get("error") is None
                and r.get("partition") is not None and r.get("leader") is not None]
    for p in range(PARTITIONS):
        obs = [r for r in observed if r["partition"] == p]
        leaders, isrs, state_at, elections = log_states(events, p)
        seen_leaders = {(r["leader"], r["leader_epoch"]) for r in obs}
        seen_isrs = {(r["leader_epoch"], tuple(sorted(r["isr"]))) for r in obs}
        assert len({e for _, e in seen_leaders}) >= 2, f"{TOPIC}-{p}: no election observed"
        assert seen_leaders <= leaders, f"{TOPIC}-{p}: leaders the logs lack: {sorted(seen_leaders - leaders)}"
        # an ISR is stated by the leader of its epoch (Partition's "ISR updated to", the "starts at
        # leader epoch" line; the 3.9/4.1 controller logs no PartitionChangeRecord): an epoch whose
        # leader never applied it - paused or killed while the metadata passed it by - has no line
        # of its own (seen on 3.9.1: epoch 2's leader was the paused broker), so only the epochs
        # their leader logged are held to it
        applied = {e["leader_epoch"] for e in events if e.get("topic") == TOPIC and e.get("partition") == p
                   and e["event"] == "became_leader"}
        missing = {s for s in seen_isrs - isrs if s[0] in applied}
        assert not missing, f"{TOPIC}-{p}: ISRs the logs lack: {sorted(missing)}"
        assert len(seen_isrs & isrs) >= 2, f"{TOPIC}-{p}: the logs state almost none of the ISRs seen"
        # the last state the observer saw is the logs' state at that time (or a moment before: a
        # change reaches the brokers' metadata after the controller logs it); the controller may
        # still change it later (its preferred-leader election runs every 300 s)
        t0, t1 = obs[0]["t"], obs[-1]["t"]
        final = {"leader": obs[-1]["leader"], "leader_epoch": obs[-1]["leader_epoch"], "isr": sorted(obs[-1]["isr"])}
        assert final in (state_at(t1), state_at(t1 - 2.0)), (p, final, state_at(t1), state_at(t1 - 2.0))
        # and the other way, on the logs' own clock: every leader the logs say held the partition
        # for a few seconds while the observer sampled (every 0.25 s) was seen by it - the reader
        # invents no election and dates each right (the log4j zone, the order across files)
        for i, (wall, leader, epoch) in enumerate(elections):
            until = elections[i + 1][0] if i + 1 < len(elections) else t1
            if t0 <= wall and until - wall >= HELD_S and wall + HELD_S <= t1:
                assert (leader, epoch) in seen_leaders, (p, wall, leader, epoch, sorted(seen_leaders))
