"""Conformance of kraftsim's raft rules with Kafka's, without processes (fast).

Each test names the Kafka source it checks (raft/src/main/java/org/apache/kafka/raft/...) and,
where there is one, the case in QuorumStateTest / KafkaRaftClientTest / LeaderStateTest it
carries over. Against the code before kraftsim/raft/ existed every one of these fails (there was
no quorum state, no quorum-state file, no voter parsing: ImportError).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kraftsim.config import ConfigError
from kraftsim.raft.config import load_node_config, parse_voters
from kraftsim.raft.log import RaftLog
from kraftsim.raft.states import Candidate, Follower, Leader, QuorumState, Resigned, Unattached
from kraftsim.raft.store import ElectionState, FileQuorumStateStore, QuorumStateError
from tests.kraftsim.conftest import REPO

VOTERS = frozenset({1, 2, 3})


def qs(tmp_path: Path, local: int = 1, voters: frozenset[int] = VOTERS) -> QuorumState:
    return QuorumState(local, voters, FileQuorumStateStore(tmp_path / "quorum-state"),
                       election_timeout_ms=1000, fetch_timeout_ms=2000)


# ------------------------------------------------------------------ quorum-state file


def test_quorum_state_file_is_kafkas_version_0_format(tmp_path: Path):
    """FileQuorumStateStore.writeElectionStateToFile with kraft.version 0: one JSON line,
    QuorumStateData v0 field names plus data_version, written via quorum-state.tmp + rename."""
    store = FileQuorumStateStore(tmp_path / "quorum-state")
    store.write(ElectionState(7, leader_id=2, voted_id=-1, voters=VOTERS))
    text = (tmp_path / "quorum-state").read_text()
    assert "\n" not in text
    assert json.loads(text) == {"clusterId": "", "leaderId": 2, "leaderEpoch": 7, "votedId": -1, "appliedOffset": 0,
                                "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}], "data_version": 0}
    assert not (tmp_path / "quorum-state.tmp").exists()
    assert store.read() == ElectionState(7, 2, -1, VOTERS)


def test_quorum_state_file_reads_kafkas_version_1_example(tmp_path: Path):
    """FileQuorumStateStore's class comment, version 1 example (KIP-853 voted directory id)."""
    (tmp_path / "quorum-state").write_text('{"leaderId":-1,"leaderEpoch":2,"votedId":1,'
                                           '"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}')
    assert FileQuorumStateStore(tmp_path / "quorum-state").read() == ElectionState(2, -1, 1, frozenset())


@pytest.mark.parametrize("text,why", [('{"leaderEpoch":1}', "data_version"), ('{"data_version":5}', "within 0..1"),
                                      ("not json", "JSON")])
def test_quorum_state_file_errors_name_the_file(tmp_path: Path, text: str, why: str):
    """FileQuorumStateStore.readStateFromFile refuses a missing or unsupported data_version."""
    (tmp_path / "quorum-state").write_text(text)
    with pytest.raises(QuorumStateError, match=why) as e:
        FileQuorumStateStore(tmp_path / "quorum-state").read()
    assert str(tmp_path / "quorum-state") in str(e.value)


# ------------------------------------------------------------------ initialize after a restart


def test_former_leader_restarts_resigned_in_the_same_epoch(tmp_path: Path):
    """QuorumState.initialize: 'If we were previously a leader, then we will start out as
    resigned in the same epoch' (so it cannot vote in that epoch again) — QuorumStateTest
    testInitializeAsResignedLeader."""
    FileQuorumStateStore(tmp_path / "quorum-state").write(ElectionState(5, leader_id=1, voters=VOTERS))
    q = qs(tmp_path)
    q.initialize(log_end_epoch=5, now=0.0)
    assert isinstance(q.state, Resigned) and q.epoch == 5
    assert not q.can_grant_vote(2, True)


def test_voted_voter_restarts_bound_to_its_vote(tmp_path: Path):
    """QuorumState.initialize (hasVoted): the vote survives a restart; the voter grants the same
    candidate again and nobody else in that epoch (UnattachedState.canGrantVote) —
    QuorumStateTest testInitializeAsUnattachedWithVotedCandidate / testVotedCanGrantVote."""
    FileQuorumStateStore(tmp_path / "quorum-state").write(ElectionState(4, voted_id=2, voters=VOTERS))
    q = qs(tmp_path)
    q.initialize(log_end_epoch=3, now=0.0)
    assert isinstance(q.state, Unattached) and q.state.voted_id == 2
    assert q.can_grant_vote(2, True)
    assert not q.can_grant_vote(3, True)


def test_candidate_restarts_as_candidate(tmp_path: Path):
    """QuorumState.initialize: a node that voted for itself resumes as Candidate of that epoch."""
    FileQuorumStateStore(tmp_path / "quorum-state").write(ElectionState(4, voted_id=1, voters=VOTERS))
    q = qs(tmp_path)
    q.initialize(log_end_epoch=4, now=0.0)
    assert isinstance(q.state, Candidate) and q.epoch == 4


def test_epoch_older_than_the_log_is_replaced_by_the_logs(tmp_path: Path):
    """QuorumState.initialize: 'Epoch from quorum store file is smaller than last written epoch
    in the log' -> Unattached in the log's epoch (QuorumStateTest testInitializeWithEmptyVotersAndLog...)."""
    FileQuorumStateStore(tmp_path / "quorum-state").write(ElectionState(2, leader_id=3, voters=VOTERS))
    q = qs(tmp_path)
    q.initialize(log_end_epoch=6, now=0.0)
    assert isinstance(q.state, Unattached) and q.epoch == 6


def test_every_transition_is_durable_before_it_takes_effect(tmp_path: Path):
    """QuorumState.durableTransitionTo writes the election state on every transition."""
    q = qs(tmp_path)
    q.initialize(0, 0.0)
    q.transition_to_candidate(0.0)
    assert FileQuorumStateStore(tmp_path / "quorum-state").read() == ElectionState(1, -1, 1, VOTERS)
    q.transition_to_unattached(3, 0.0)
    q.transition_to_unattached_voted(3, 2, 0.0)
    assert FileQuorumStateStore(tmp_path / "quorum-state").read() == ElectionState(3, -1, 2, VOTERS)
    q.transition_to_follower(3, 2, 0.0)
    assert FileQuorumStateStore(tmp_path / "quorum-state").read() == ElectionState(3, 2, -1, VOTERS)


# ------------------------------------------------------------------ votes


def test_unattached_grants_only_an_up_to_date_candidate(tmp_path: Path):
    """UnattachedState.canGrantVote: without a vote or a leader, grant iff the candidate's log is
    at least as up to date (KafkaRaftClient.handleVoteRequest compares OffsetAndEpoch)."""
    q = qs(tmp_path)
    q.initialize(0, 0.0)
    assert q.can_grant_vote(2, True)
    assert not q.can_grant_vote(2, False)


@pytest.mark.parametrize("state", ["follower", "candidate", "leader", "resigned"])
def test_no_vote_from_a_node_with_a_leader_or_its_own_candidacy(tmp_path: Path, state: str):
    """FollowerState / CandidateState / LeaderState / ResignedState.canGrantVote: always false
    (QuorumStateTest testFollowerCannotGrantVote... / testCandidateCannotGrantVote...)."""
    q = qs(tmp_path)
    q.initialize(0, 0.0)
    if state == "follower":
        q.transition_to_follower(1, 2, 0.0)
    else:
        q.transition_to_candidate(0.0)
        if state in ("leader", "resigned"):
            q.state.granted.add(2)
            q.transition_to_leader(0, 0.0)
        if state == "resigned":
            q.transition_to_resigned([2, 3], 0.0)
    assert not q.can_grant_vote(3, True)


def test_one_vote_per_epoch(tmp_path: Path):
    """QuorumState.transitionToUnattachedVotedState: in the same epoch only from Unattached
    without a vote — a second vote in an epoch is impossible."""
    q = qs(tmp_path)
    q.initialize(0, 0.0)
    q.transition_to_unattached_voted(1, 2, 0.0)
    with pytest.raises(ValueError):
        q.transition_to_unattached_voted(1, 3, 0.0)


def test_candidate_needs_a_majority_and_gives_up_when_it_cannot_get_one(tmp_path: Path):
    """CandidateState.isVoteGranted / isVoteRejected (majority = voters/2 + 1, itself included)."""
    q = qs(tmp_path)
    q.initialize(0, 0.0)
    q.transition_to_candidate(0.0)
    c = q.state
    assert isinstance(c, Candidate) and c.epoch == 1 and not c.is_vote_granted()
    c.rejected.add(2)
    assert not c.is_vote_rejected()
    c.rejected.add(3)
    assert c.is_vote_rejected()
    with pytest.raises(ValueError):
        q.transition_to_leader(0, 0.0)
    q.transition_to_candidate(0.0)
    assert q.epoch == 2 and q.state.retries == 2  # retries count up for the exponential backoff
    q.state.granted.add(3)
    assert isinstance(q.transition_to_leader(0, 0.0), Leader)


def test_a_leader_never_follows_in_its_own_epoch(tmp_path: Path):
    """QuorumState.transitionToFollower: not from Leader in the same epoch (one leader per epoch)."""
    q = qs(tmp_path)
    q.initialize(0, 0.0)
    q.transition_to_candidate(0.0)
    q.state.granted.add(2)
    q.transition_to_leader(0, 0.0)
    with pytest.raises(ValueError):
        q.transition_to_follower(1, 2, 0.0)
    q.transition_to_follower(2, 2, 0.0)
    assert isinstance(q.state, Follower)


def test_election_timeout_is_randomised_between_one_and_two_timeouts(tmp_path: Path):
    """QuorumState.randomElectionTimeoutMs: electionTimeoutMs + random.nextInt(electionTimeoutMs)."""
    q = qs(tmp_path)
    draws = [q.random_election_timeout_s() for _ in range(500)]
    assert all(1.0 <= d < 2.0 for d in draws)
    assert max(draws) - min(draws) > 0.5


# ------------------------------------------------------------------ high watermark


def _leader(tmp_path: Path, voters: frozenset[int] = VOTERS, start: int = 10) -> Leader:
    q = qs(tmp_path, voters=voters)
    q.initialize(0, 0.0)
    q.transition_to_candidate(0.0)
    q.state.granted |= set(voters)
    return q.transition_to_leader(start, 0.0)


def test_high_watermark_is_the_majoritys_end_offset(tmp_path: Path):
    """LeaderState.maybeUpdateHighWatermark: the end offset at index voters/2 of the voters
    sorted by descending end offset (the leader counts) — LeaderStateTest
    testUpdateHighWatermarkQuorumSizeThree."""
    s = _leader(tmp_path)
    assert s.update_local_state(15) is False  # the leader alone is no majority
    assert s.high_watermark is None
    assert s.update_replica_state(2, 13, 0.0) is True
    assert s.high_watermark == 13
    s.update_replica_state(3, 14, 0.0)
    assert s.high_watermark == 14
    s.update_replica_state(3, 12, 0.0)  # a voter reporting less never lowers it
    assert s.high_watermark == 14


def test_no_commit_before_a_record_of_the_leaders_own_epoch(tmp_path: Path):
    """LeaderState.maybeUpdateHighWatermark: 'The leader must commit one record from its own
    epoch before it is allowed to expose records from any previous epoch' (offset > epoch start)."""
    s = _leader(tmp_path, start=10)
    s.update_local_state(11)
    s.update_replica_state(2, 10, 0.0)
    assert s.high_watermark is None
    s.update_replica_state(2, 11, 0.0)
    assert s.high_watermark == 11


def test_observers_do_not_move_the_high_watermark(tmp_path: Path):
    """LeaderState.updateReplicaState: only voters count toward the high watermark."""
    s = _leader(tmp_path)
    s.update_local_state(20)
    assert s.update_replica_state(7, 20, 0.0) is False
    assert s.high_watermark is None


def test_check_quorum_resigns_a_leader_without_a_fetching_majority(tmp_path: Path):
    """LeaderState.timeUntilCheckQuorumExpires: 1.5 x fetch timeout without Fetch from a majority
    (KafkaRaftClientTest testLeaderShouldResignLeadershipIfNotGetFetchRequestFromMajorityVoters)."""
    s = _leader(tmp_path)
    assert not s.check_quorum_expired(2.9)
    assert s.check_quorum_expired(3.0)
    s.update_replica_state(2, 11, 2.5)
    assert not s.check_quorum_expired(3.9)
    solo = _leader(tmp_path / "solo", voters=frozenset({1}))
    assert not solo.check_quorum_expired(1e9)


# ------------------------------------------------------------------ the log


def _log(tmp_path: Path, epochs: list[int]) -> RaftLog:
    log = RaftLog(tmp_path / "md", 1, "c", segment_bytes=1 << 20)
    for e in epochs:
        log.append_as_leader([{"e": e}], e)
    return log


def test_fetch_validation_finds_the_diverging_epoch(tmp_path: Path):
    """ReplicatedLog.validateOffsetAndEpoch: valid when the leader has the fetcher's last epoch
    up to the fetch offset; otherwise the diverging epoch and its end offset
    (KafkaRaftClientTest testFetchResponseIgnoredAfterBecomingCandidate... / testLeaderDivergingEpoch)."""
    log = _log(tmp_path, [1, 1, 3, 3])  # offsets 0,1 epoch 1; 2,3 epoch 3
    assert log.validate_offset_and_epoch(0, 0) == (True, (0, 0))
    assert log.validate_offset_and_epoch(2, 1) == (True, (2, 1))
    assert log.validate_offset_and_epoch(3, 1) == (False, (2, 1))  # follower has epoch-1 records past 2
    assert log.validate_offset_and_epoch(3, 2) == (False, (2, 1))  # epoch 2 is unknown here
    assert log.validate_offset_and_epoch(4, 3) == (True, (4, 3))
    assert log.validate_offset_and_epoch(5, 3) == (False, (4, 3))
    log.close()


def test_follower_truncates_to_the_diverging_epochs_end(tmp_path: Path):
    """ReplicatedLog.truncateToEndOffset: min(local end of that epoch, leader's end offset); the
    cut is a metadata_truncation in the events (reason diverging_epoch)."""
    events: list[tuple[str, dict]] = []
    log = RaftLog(tmp_path / "md", 2, "c", segment_bytes=1 << 20, on_event=lambda n, f: events.append((n, f)))
    for e in (1, 1, 2, 2, 2):  # offsets 0,1 epoch 1; 2,3,4 epoch 2 (never committed)
        log.append_as_leader([{"e": e}], e)
    assert log.truncate_to_end_offset(2, 1) == 2
    assert log.end_offset == 2 and log.last_fetched_epoch == 1
    assert ("truncation", {"topic": "__cluster_metadata", "partition": 0, "from_offset": 5, "to_offset": 2,
                           "reason": "diverging_epoch"}) in events
    log.close()


def test_only_committed_data_records_reach_the_state_machine(tmp_path: Path):
    """KafkaRaftClient.updateListenersProgress hands batches below the high watermark; control
    records (LeaderChange, LeaderState.appendStartOfEpochControlRecords) are not data."""
    log = RaftLog(tmp_path / "md", 1, "c", segment_bytes=1 << 20)
    log.append_leader_change(1, 1, [1, 2, 3], [1, 2])
    log.append_as_leader([{"a": 1}, {"b": 2}], 1)
    log.append_as_leader([{"c": 3}], 1)
    assert [o for o, _, _ in log.committed(0, 3)] == [1, 2]
    assert [r for _, _, r in log.committed(0, 4)] == [{"a": 1}, {"b": 2}, {"c": 3}]
    assert list(log.committed(2, 3)) == [(2, 1, {"b": 2})]
    log.close()


def test_metadata_log_survives_a_clean_restart_and_keeps_its_epochs(tmp_path: Path):
    """KafkaMetadataLog is a UnifiedLog: segments, leader-epoch checkpoint and clean-shutdown
    marker, so the restarted voter reports the same (end offset, last epoch) in its Vote."""
    log = _log(tmp_path, [1, 2, 2])
    log.close(clean=True)
    again = RaftLog(tmp_path / "md", 1, "c", segment_bytes=1 << 20)
    assert again.end_offset_and_epoch() == (3, 2)
    again.close()


# ------------------------------------------------------------------ configuration


def test_voters_are_kafkas_id_at_host_port_list():
    """QuorumConfig.parseVoterConnections: id@host:port, comma separated, ids unique."""
    assert parse_voters("1@127.0.0.1:9093, 2@ctl-2:9094,3@[::1]:9095") == {
        1: ("127.0.0.1", 9093), 2: ("ctl-2", 9094), 3: ("::1", 9095)}
    for bad in ("1@h", "x@h:1", "1@h:1,1@h:2", ""):
        with pytest.raises(ValueError):
            parse_voters(bad)


def test_bad_node_config_is_one_line_naming_file_and_key(tmp_path: Path):
    cfg = tmp_path / "n.properties"
    cfg.write_text("node.id=1\nlisteners=CONTROLLER://127.0.0.1:9\ncontroller.quorum.voters=1@127.0.0.1\n"
                   f"metadata.log.dir={tmp_path}/md\n")
    with pytest.raises(ConfigError, match=r"n.properties: key 'controller.quorum.voters': id@host:port"):
        load_node_config(cfg)
    cfg.write_text("node.id=4\nlisteners=CONTROLLER://127.0.0.1:9\ncontroller.quorum.voters=1@127.0.0.1:9\n"
                   f"metadata.log.dir={tmp_path}/md\n")
    with pytest.raises(ConfigError, match="node.id 4 is not among the voters"):
        load_node_config(cfg)
    r = subprocess.run([sys.executable, "-m", "kraftsim.raft", "--config", str(cfg)], capture_output=True,
                       text=True, cwd=REPO, timeout=30)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    assert "key 'controller.quorum.voters'" in r.stderr


def test_corrupt_quorum_state_stops_a_controller_with_one_line(tmp_path: Path):
    """A controller whose quorum-state cannot be read refuses to start (Kafka's
    FileQuorumStateStore throws), with one line naming the file — never a traceback."""
    md = tmp_path / "md"
    (md / "__cluster_metadata-0").mkdir(parents=True)
    (md / "__cluster_metadata-0" / "quorum-state").write_text('{"leaderEpoch": 3}')
    cfg = tmp_path / "c.properties"
    cfg.write_text(f"node.id=1000\nlisteners=CONTROLLER://127.0.0.1:1\nmetadata.log.dir={md}\n")
    r = subprocess.run([sys.executable, "-m", "kraftsim", "controller", "--config", str(cfg)], capture_output=True,
                       text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.strip().count("\n") == 0
    assert "key 'metadata.log.dir'" in r.stderr and "quorum-state" in r.stderr and "data_version" in r.stderr
