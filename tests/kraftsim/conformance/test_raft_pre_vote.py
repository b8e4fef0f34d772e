"""KIP-996 Pre-Vote, as Kafka 4.0's raft has it (software gate ``pre_vote``; no feature level).

Kafka 4.0 (raft/src/main/java/org/apache/kafka/raft/: KafkaRaftClient, QuorumState,
ProspectiveState, FollowerState; KAFKA-17641 Vote v2 PreVote, KAFKA-17642 ProspectiveState): a voter
whose fetch timeout or election timeout expires becomes *Prospective* - same epoch, nothing
persisted, its known leader, vote and high watermark kept - and sends Vote with PreVote=true. It
becomes a Candidate (epoch + 1) only on a majority of granted pre-votes; a lost or timed-out
pre-vote sends it back to Follower of the leader it knew, or Unattached. A Follower grants a pre-vote
only if it has not fetched from its leader in this epoch (``FollowerState.canGrantPreVote``); a
Leader never does; Unattached, Prospective and Candidate do for an up-to-date log
(``unattachedOrProspectiveCanGrantVote``, ``CandidateState.canGrantVote``). So a voter cut from the
quorum does not bump the epoch while cut off, and when it comes back it cannot depose a leader the
others still fetch from - before 4.0 it comes back as a candidate with a higher epoch and forces an
election. Cases: KafkaRaftClientPreVoteTest ``testHandlePreVoteRequestAsFollowerWithElectedLeader``,
QuorumState's Prospective transitions, and three real raft processes with one voter cut off.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from kraftsim.events import EventLog
from kraftsim.raft.client import VOTE, RaftClient
from kraftsim.raft.config import QuorumConfig
from kraftsim.raft.log import TOPIC, RaftLog
from kraftsim.raft.states import Candidate, Follower, Prospective, QuorumState, Unattached
from kraftsim.raft.store import FileQuorumStateStore
from kraftsim.wire import build
from tests.kraftsim.raft.quorum import Quorum

VOTERS = frozenset({1, 2, 3})


def _client(tmp_path: Path, pre_vote: bool = True) -> RaftClient:
    log = RaftLog(tmp_path / "md", 1, "c", segment_bytes=1 << 20)
    for i in range(5):
        log.append_as_leader([{"i": i}], 1)
    qc = QuorumConfig(voters={v: ("127.0.0.1", 1) for v in VOTERS}, pre_vote=pre_vote)
    c = RaftClient(1, "c", "127.0.0.1", qc, log, EventLog(tmp_path / "events.jsonl", 1, "controller"))
    c.quorum.initialize(log.last_fetched_epoch, time.monotonic())
    return c


def _pre_vote(candidate: int, epoch: int, last_epoch: int, last_offset: int):
    return build(load_request_schema(VOTE, 2), {"cluster_id": "c", "voter_id": 1, "topics": [{"topic_name": TOPIC, "partitions": [{
        "partition_index": 0, "replica_epoch": epoch, "replica_id": candidate, "replica_directory_id": None,
        "voter_directory_id": None, "last_offset_epoch": last_epoch, "last_offset": last_offset, "pre_vote": True}]}]})


@pytest.mark.parametrize("has_fetched", [True, False])
def test_handle_pre_vote_request_as_follower_with_elected_leader(tmp_path, has_fetched):
    """KafkaRaftClientPreVoteTest.testHandlePreVoteRequestAsFollowerWithElectedLeader: a follower
    of 3 in epoch 2 rejects a pre-vote from 2 once it has fetched from 3, grants it otherwise; it
    stays 3's follower either way (a pre-vote changes no state)."""
    c = _client(tmp_path)
    c.quorum.transition_to_follower(2, 3, time.monotonic())
    c.quorum.state.has_fetched_from_leader = has_fetched
    resp = asyncio.run(c.h_vote(None, _pre_vote(2, 2, 1, 5), None))
    p = resp.topics[0].partitions[0]
    assert p.error_code is ErrorCode.none and p.vote_granted is (not has_fetched)
    assert isinstance(c.quorum.state, Follower) and c.quorum.leader_id == 3 and c.quorum.epoch == 2


def test_pre_vote_is_not_a_vote_and_an_unattached_voter_grants_it_without_binding(tmp_path):
    """UnattachedState.canGrantVote with isPreVote: granted for an up-to-date log, refused for a
    stale one, and no vote is recorded (the voter can still vote for anyone in that epoch)."""
    c = _client(tmp_path)
    assert isinstance(c.quorum.state, Unattached)
    epoch = c.quorum.epoch
    ok = asyncio.run(c.h_vote(None, _pre_vote(2, epoch, 1, 5), None)).topics[0].partitions[0]
    stale = asyncio.run(c.h_vote(None, _pre_vote(3, epoch, 1, 4), None)).topics[0].partitions[0]
    assert ok.vote_granted is True and stale.vote_granted is False
    assert c.quorum.is_unattached_not_voted()


def test_prospective_keeps_epoch_leader_and_high_watermark_and_persists_nothing(tmp_path):
    """QuorumState.transitionToProspective (memory transition): from Follower(epoch 4, leader 2, HWM
    7) - same epoch, leader and HWM, quorum-state unchanged; a lost pre-vote goes back to
    Follower of 2 in epoch 4; a granted one makes a Candidate of epoch 5."""
    store = FileQuorumStateStore(tmp_path / "quorum-state")
    q = QuorumState(1, VOTERS, store, election_timeout_ms=1000, fetch_timeout_ms=2000)
    q.initialize(0, 0.0)
    q.transition_to_follower(4, 2, 0.0)
    q.state.update_high_watermark(7)
    before = (tmp_path / "quorum-state").read_bytes()
    q.transition_to_prospective(1.0)
    s = q.state
    assert isinstance(s, Prospective) and (s.epoch, q.leader_id, q.high_watermark) == (4, 2, 7)
    assert (tmp_path / "quorum-state").read_bytes() == before
    q.transition_to_follower(4, 2, 1.0)
    assert isinstance(q.state, Follower) and q.epoch == 4 and q.high_watermark == 7
    q.transition_to_prospective(2.0)
    q.state.granted.add(3)
    assert q.state.is_vote_granted()
    q.transition_to_candidate(2.0)
    assert isinstance(q.state, Candidate) and q.epoch == 5 and q.high_watermark == 7


def test_follower_fetch_timeout_makes_a_prospective_with_pre_vote_and_a_candidate_without(tmp_path):
    """KafkaRaftClient.pollFollowerAsVoter: fetch timeout → Prospective on 4.0+ (no epoch bump,
    a ``controller_prospective`` event), → Candidate of epoch + 1 before."""
    for pre_vote, want in ((True, Prospective), (False, Candidate)):
        c = _client(tmp_path / str(pre_vote), pre_vote=pre_vote)
        now = time.monotonic()
        c.quorum.transition_to_follower(2, 3, now)
        c.poll(now + 10)
        assert isinstance(c.quorum.state, want)
        assert c.quorum.epoch == (2 if pre_vote else 3)


ELECTION_MS, FETCH_MS = 500, 500


@pytest.mark.slow
@pytest.mark.parametrize("kafka_version,disrupts", [("4.1.0", False), ("3.9.0", True)])
def test_a_healed_voter_does_not_depose_the_leader_with_pre_vote(tmp_path, kafka_version, disrupts):
    """Three real raft nodes; a follower voter is cut off (iptables DROP both ways) for ten fetch
    timeouts, then healed. 4.1 (pre-vote): its epoch never moves while cut off, and after healing the
    leader and epoch are the same - no election. 3.9 (no pre-vote): it stood for election over and
    over with ever higher epochs, and on healing its higher epoch deposes the leader (a new epoch)."""
    q = Quorum(tmp_path, 3, {"controller.quorum.election.timeout.ms": str(ELECTION_MS),
                             "controller.quorum.fetch.timeout.ms": str(FETCH_MS), "kafka.version": kafka_version})
    try:
        q.start_all()
        leader, epoch = q.wait_leader()
        time.sleep(1.0)
        cut = next(i for i in q.hosts if i != leader)
        q.isolate(cut)
        time.sleep(10 * FETCH_MS / 1000)
        cut_epoch = (q.status(cut) or {}).get("epoch")
        healed_at = time.time()
        q.heal()
        time.sleep(6 * FETCH_MS / 1000)
        now_leader = q.wait_leader(timeout=20)
        elected_after = [e for e in q.all_events("controller_elected") if e["wall"] >= healed_at]
        if disrupts:
            assert cut_epoch is not None and cut_epoch > epoch, (cut_epoch, epoch)
            assert now_leader[1] > epoch and elected_after, (now_leader, epoch)
        else:
            assert cut_epoch == epoch, (cut_epoch, epoch)
            assert now_leader == (leader, epoch) and not elected_after, (now_leader, leader, epoch, elected_after)
            assert [e for e in q.events(cut) if e["event"] == "controller_prospective"], "never asked for pre-votes"
    finally:
        q.close()
