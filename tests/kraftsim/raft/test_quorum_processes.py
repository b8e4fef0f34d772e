"""Three real raft nodes (``python -m kraftsim.raft``): failover, safety, partitions.

Every process is real and is SIGKILLed, SIGSTOPped or cut off with iptables; the checks read
only what the processes wrote (events.jsonl, the state machine's applied.jsonl, the segment
files). The rules checked are Kafka's (raft/src/main/java/org/apache/kafka/raft/):

- a dead leader is noticed by a follower after ``fetch.timeout.ms`` without a Fetch answer
  (KafkaRaftClient.pollFollowerAsVoter) and an election then takes less than 2 election timeouts
  (randomised timeout in [E, 2E), QuorumState.randomElectionTimeoutMs; a split vote costs one
  timeout and a backoff, KafkaRaftClient.pollCandidate);
- one leader per epoch (votes persisted in quorum-state before they are sent,
  QuorumState.durableTransitionTo; one vote per epoch, UnattachedState.canGrantVote);
- a record is committed once a majority has it (LeaderState.maybeUpdateHighWatermark) and a
  committed record is never lost or replaced;
- a leader cut off from the majority stops committing and resigns after 1.5 x fetch timeout
  (LeaderState.timeUntilCheckQuorumExpires); its uncommitted suffix is truncated when it comes
  back (KafkaRaftClient.handleFetchResponse, ReplicatedLog.truncateToEndOffset).

Before kraftsim/raft/ existed there was no quorum to run: every test here failed (no
``python -m kraftsim.raft``).
"""
from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from kraftsim.raft.log import RaftLog
from tests.kraftsim.raft.quorum import Quorum

ELECTION_MS, FETCH_MS = 500, 500
SETTINGS = {"controller.quorum.election.timeout.ms": str(ELECTION_MS),
            "controller.quorum.fetch.timeout.ms": str(FETCH_MS)}
#: scheduling slack on a shared 2-core machine (Python processes under load)
SLACK_S = 0.5
#: binaryExponentialElectionBackoffMs after one failed election: 50 ms x random [0, 2)
FIRST_BACKOFF_MAX_S = 0.1

pytestmark = pytest.mark.slow


@pytest.fixture
def quorum(tmp_path: Path):
    q = Quorum(tmp_path, 3, dict(SETTINGS))
    try:
        yield q
    finally:
        q.close()


def _converged(q: Quorum, timeout: float = 20.0) -> tuple[int, int]:
    """Wait until every node follows one leader in one epoch and has applied up to near its HWM."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = q.leader()
        if got:
            sts = [q.status(i) for i in q.hosts]
            if all(s and s["epoch"] == got[1] and s["leader"] == got[0] and s["applied"] > 0 for s in sts):
                hws = [s["applied"] for s in sts]
                if max(hws) - min(hws) <= 5:
                    return got
        time.sleep(0.1)
    raise AssertionError("no convergence: " + json.dumps({i: q.status(i) for i in q.hosts}))


def _stop_all(q: Quorum, leader: int) -> None:
    for i in q.hosts:
        if i != leader:
            q.stop(i)
    q.stop(leader)


def _final_records(q: Quorum, i: int) -> dict[int, str]:
    """offset -> record (canonical JSON) of every data record in node i's log after it stopped."""
    log = RaftLog(q.dir(i) / "metadata", i, "kraftsim-cluster-0000000", segment_bytes=64 << 20)
    try:
        return {o: json.dumps(r, sort_keys=True) for o, _, r in log.committed(0, log.end_offset)}
    finally:
        log.close(clean=True)


def _check_safety(q: Quorum) -> dict[str, int]:
    """One leader per epoch; no offset committed with two records; every committed record is in
    every node's final log at its offset; the final logs are one log (prefixes of the longest)."""
    by_epoch = q.leaders_by_epoch()
    assert by_epoch, "no controller_elected event at all"
    two = {e: sorted(n) for e, n in by_epoch.items() if len(n) > 1}
    assert not two, f"two leaders in one epoch: {two}"
    committed = q.committed_by_offset()
    conflicts = {o: s for o, s in committed.items() if len(s) > 1}
    assert not conflicts, (f"{len(conflicts)} offsets committed with different records, e.g. "
                           f"{dict(list(sorted(conflicts.items()))[:2])}")
    finals = {i: _final_records(q, i) for i in q.hosts}
    logs = {i: q.segment_batches(i) for i in q.hosts}
    longest = max(logs, key=lambda i: len(logs[i]))
    for i, b in logs.items():
        assert b == logs[longest][:len(b)], f"node {i}'s log diverges from node {longest}'s"
    # Leader completeness: the longest log (the last leader's) holds every committed record at
    # its offset; and each committed record is on a majority of the final logs. (A follower
    # stopped first may lack what was committed after it stopped.)
    top = max(committed) if committed else -1
    missing = [o for o, s in committed.items() if finals[longest].get(o) != next(iter(s))]
    assert not missing, f"node {longest} lost or replaced committed offsets {missing[:10]} (committed up to {top})"
    for o, s in committed.items():
        holders = sum(1 for f in finals.values() if f.get(o) == next(iter(s)))
        assert holders >= len(q.hosts) // 2 + 1, f"committed offset {o} is on only {holders} final logs"
    return {"epochs": len(by_epoch), "committed": len(committed)}


def test_sigkill_leader_elects_a_new_one_and_loses_no_committed_record(quorum: Quorum):
    """SIGKILL the leader: a follower notices within fetch.timeout and stands (a pre-vote first,
    Kafka 4.0); the election, from that first pre-vote or candidacy to the new leader, takes at most 2 election timeouts plus the
    first backoff (one split vote, then the randomised timeout in [E, 2E) - the two survivors
    usually notice together and split); so from the kill at most fetch.timeout + 2 election
    timeouts + backoff. The new leader has a majority of votes in a larger epoch; the killed
    node restarts as a follower and every committed record is still there, once."""
    q = quorum
    q.start_all()
    leader, epoch = q.wait_leader()
    time.sleep(1.0)  # some committed records
    killed_at = q.kill(leader)
    new, new_epoch = q.wait_leader(exclude={leader}, min_epoch=epoch + 1, timeout=15)
    elected = [e for e in q.all_events("controller_elected") if e["epoch"] == new_epoch]
    assert [e["node"] for e in elected] == [new]
    took = elected[0]["wall"] - killed_at
    # an election begins with a pre-vote (Prospective, Kafka 4.0+) or, before 4.0, a candidacy
    stood = [e for e in q.all_events() if e["event"] in ("controller_prospective", "controller_candidate")
             and e["wall"] >= killed_at]
    assert stood and stood[0]["reason"] == "fetch_timeout", stood
    noticed = stood[0]["wall"] - killed_at
    electing = elected[0]["wall"] - stood[0]["wall"]
    assert noticed <= FETCH_MS / 1000 + SLACK_S, f"the dead leader was noticed after {noticed:.2f} s"
    bound = 2 * ELECTION_MS / 1000 + FIRST_BACKOFF_MAX_S + SLACK_S
    assert electing <= bound, f"the election took {electing:.2f} s (> {bound:.2f} s)"
    assert took <= FETCH_MS / 1000 + bound, f"new leader after {took:.2f} s"
    assert len(elected[0]["granting_voters"]) >= 2 and new in elected[0]["granting_voters"]
    assert leader not in elected[0]["granting_voters"]
    q.start(leader)
    got = _converged(q)
    time.sleep(0.5)
    _stop_all(q, got[0])
    figures = _check_safety(q)
    assert figures["committed"] > 10
    print(f"failover took {took:.3f} s (noticed {noticed:.3f} s, elected {electing:.3f} s later, "
          f"{len(stood)} candidacies); {figures}")


def test_twenty_failovers_with_random_kills_and_pauses_keep_one_leader_per_epoch(quorum: Quorum):
    """20 leader changes forced by SIGKILL or SIGSTOP of the leader (sometimes of a follower
    too); afterwards: at most one leader per epoch (from the event logs), no committed record
    lost or replaced, one log on every node."""
    q = quorum
    rng = random.Random(int(time.time()))
    q.start_all()
    leader, epoch = q.wait_leader()
    first_epoch_events = len(q.leaders_by_epoch())
    took: list[float] = []
    deadline = time.time() + 240
    while len(q.leaders_by_epoch()) - first_epoch_events < 20:
        assert time.time() < deadline, f"only {len(q.leaders_by_epoch())} elections in time"
        leader, epoch = q.wait_leader(timeout=30)
        time.sleep(rng.uniform(0.2, 0.8))
        other = rng.choice([i for i in q.hosts if i != leader])
        action = rng.choice(["kill", "kill", "pause", "pause", "kill+follower", "pause+follower"])
        t0 = time.time()
        if action.startswith("kill"):
            q.kill(leader)
        else:
            q.pause(leader)
        if action.endswith("+follower"):
            if rng.random() < 0.5:
                q.kill(other)
                time.sleep(rng.uniform(0.1, 0.6))
                q.start(other)
            else:
                q.pause(other)
                time.sleep(rng.uniform(0.1, 0.6))
                q.resume(other)
        new, new_epoch = q.wait_leader(exclude={leader}, min_epoch=epoch + 1, timeout=30)
        el = [e for e in q.all_events("controller_elected") if e["epoch"] == new_epoch and e["node"] == new]
        took.append(el[0]["wall"] - t0)
        if action.startswith("kill"):
            q.start(leader)
        else:
            time.sleep(rng.uniform(0.0, 1.0))  # a paused leader wakes up later, still believing it leads
            q.resume(leader)
    got = _converged(q, timeout=30)
    _stop_all(q, got[0])
    figures = _check_safety(q)
    resigned = q.all_events("controller_resigned")
    took.sort()
    print(f"{len(took)} forced failovers: median {took[len(took) // 2]:.2f} s, max {took[-1]:.2f} s; "
          f"{figures}; {len(resigned)} controller_resigned")
    assert figures["committed"] > 50


@pytest.fixture
def quorum_3_9(tmp_path: Path):
    """Kafka 3.9 software: no pre-vote (KIP-996 arrives in 4.0)."""
    q = Quorum(tmp_path, 3, {**SETTINGS, "kafka.version": "3.9.0"})
    try:
        yield q
    finally:
        q.close()


def test_partitioned_leader_stops_committing_majority_elects_and_heal_truncates_its_suffix(quorum_3_9: Quorum):
    """iptables DROP between the leader and the other two: the leader can no longer commit (no
    record it appends after the cut is committed anywhere) and resigns on check quorum; the
    majority elects a new leader; after healing, the old leader's uncommitted suffix is
    truncated (a metadata_truncation event, reason diverging_epoch) and all logs are one.
    On 3.9 software (no pre-vote), so the cut-off node's epoch runs ahead (with pre-vote it does
    not: tests/kraftsim/conformance/test_raft_pre_vote.py)."""
    q = quorum_3_9
    q.start_all()
    old, epoch = q.wait_leader()
    time.sleep(1.0)
    q.isolate(old)
    # taken once every rule is in: the four iptables calls take their time on a loaded machine,
    # and until the last one the leader still reaches a follower and commits
    cut_at = time.time()
    new, new_epoch = q.wait_leader(exclude={old}, min_epoch=epoch + 1, timeout=15)
    time.sleep(1.5 * FETCH_MS / 1000 + 0.5)  # past the old leader's check-quorum timeout
    resigned = [e for e in q.events(old) if e["event"] == "controller_resigned" and e["epoch"] == epoch]
    assert resigned and resigned[0]["reason"] == "check_quorum", q.events(old)
    assert resigned[0]["log_end_offset"] > resigned[0]["high_watermark"], "no uncommitted suffix to truncate"
    before_heal = {i: q.applied(i) for i in q.hosts}
    late = [a for i in q.hosts for a in before_heal[i]
            if a["record"]["writer"] == old and a["record"]["epoch"] == epoch and a["record"]["wall"] > cut_at + 0.05]
    assert not late, f"records the cut-off leader appended after the cut were committed: {late[:3]}"
    assert max((a["offset"] for a in before_heal[old]), default=-1) < resigned[0]["high_watermark"]
    # Without pre-vote (KIP-996, Kafka 4.0) the cut-off node
    # keeps standing for election and its epoch overtakes the majority's: heal only then, so the
    # rejoining node with a longer but stale log forces a new election it must lose
    # (KafkaRaftClient.handleVoteRequest: the candidate's log must be at least as up to date).
    deadline = time.time() + 20
    while (q.status(old) or {}).get("epoch", 0) <= (q.status(new) or {}).get("epoch", 0):
        assert time.time() < deadline, "the cut-off node never overtook the majority's epoch"
        time.sleep(0.1)
    heal_at = time.time()
    q.heal()
    got = _converged(q, timeout=30)
    truncs = [e for e in q.events(old) if e["event"] == "metadata_truncation" and e["wall"] >= heal_at]
    assert truncs, "the old leader never truncated its divergent suffix"
    t = truncs[0]
    assert t["reason"] == "diverging_epoch" and t["diverging_epoch"] == epoch
    assert t["from_offset"] > t["to_offset"] >= resigned[0]["high_watermark"]
    time.sleep(0.5)
    _stop_all(q, got[0])
    figures = _check_safety(q)
    final_old = _final_records(q, old)
    late_kept = [r for r in final_old.values() if json.loads(r).get("writer") == old
                 and json.loads(r).get("epoch") == epoch and json.loads(r)["wall"] > cut_at + 0.05]
    assert not late_kept, "the old leader kept records from its cut-off epoch"
    print(f"partition: old leader {old} epoch {epoch}, new leader {new} epoch {new_epoch}, "
          f"truncated {t['from_offset']}->{t['to_offset']}; {figures}")


def test_page_cache_loss_on_every_voter_loses_no_committed_record(quorum: Quorum):
    """Power loss of the whole quorum: SIGKILL all three, cut each metadata log back to its
    recovery point (the page-cache-loss recipe of docs/kraftsim-storage.md), restart. Kafka's
    raft client flushes the leader's log before counting its own end offset
    (KafkaRaftClient.flushLeaderLog) and a voter's before its next Fetch
    (KafkaRaftClient.appendAsFollower), so a committed record is durable on a majority and
    survives; only uncommitted appends may go."""
    from tests.kraftsim.clients import cut_to_recovery_point

    q = quorum
    q.start_all()
    q.wait_leader()
    time.sleep(1.5)
    for i in q.hosts:
        q.kill(i)
    before = q.committed_by_offset()
    assert len(before) > 10
    cut = {i: cut_to_recovery_point(q.dir(i) / "metadata", "__cluster_metadata", 0) for i in q.hosts}
    q.start_all()
    got = _converged(q, timeout=30)
    time.sleep(0.5)
    _stop_all(q, got[0])
    figures = _check_safety(q)
    assert max(q.committed_by_offset()) > max(before)
    print(f"page-cache loss: recovery points {cut}, committed before {max(before) + 1}; {figures}")
