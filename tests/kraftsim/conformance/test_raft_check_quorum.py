"""KRaft check quorum: from Kafka 3.7 a leader resigns without Fetch from a majority; before, never.

Kafka 3.7.0 (KAFKA-15489, 37416e1aeba): ``KafkaRaftClient.pollLeader`` resigns when
``LeaderState.timeUntilCheckQuorumExpires`` reaches 0 - no Fetch (or FetchSnapshot) from a
majority of the voters (the leader counting itself: ``voterStates.size() / 2`` others) within
``1.5 x controller.quorum.fetch.timeout.ms`` (``CHECK_QUORUM_TIMEOUT_FACTOR``); an observer's
Fetch does not count (``updateCheckQuorumForFollowingVoter``). Kafka 3.6.2 and every earlier
KRaft release: ``pollLeader`` resigns only on shutdown or a requested resignation, so a leader
cut from the other voters stays leader of its epoch while they elect another - two active
controllers (software gate ``check_quorum``). Cases: LeaderStateTest ``testCheckQuorum`` and
KafkaRaftClientTest ``testLeaderShouldResignLeadershipIfNotGetFetchRequestFromMajorityVoters``
from the fix, each on 3.7.0 and on 3.6.2; and three real raft processes with the leader cut off.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from kraftsim import features
from kraftsim.events import EventLog
from kraftsim.raft.client import RaftClient
from kraftsim.raft.config import QuorumConfig
from kraftsim.raft.log import RaftLog
from kraftsim.raft.states import Leader, Resigned
from tests.kraftsim.raft.quorum import Quorum

FETCH_TIMEOUT_MS = 2000
CHECK_QUORUM_S = FETCH_TIMEOUT_MS * 1.5 / 1000


def _leader_state(voters: set[int], local: int = 0) -> Leader:
    return Leader(epoch=1, local_id=local, voters=frozenset(voters), epoch_start_offset=0,
                  granting=frozenset(voters), check_quorum_timeout_s=CHECK_QUORUM_S, now=0.0)


def test_leader_state_check_quorum():
    """LeaderStateTest.testCheckQuorum: five voters; Fetch from two of the other four resets the
    timer, one voter plus an observer does not; half a timeout twice without a reset expires it."""
    s = _leader_state({0, 1, 2, 3, 4})
    half = CHECK_QUORUM_S / 2
    assert not s.check_quorum_expired(half)
    s.update_replica_state(1, 0, half)
    s.update_replica_state(2, 0, half)
    assert s.check_quorum_deadline == pytest.approx(half + CHECK_QUORUM_S)
    assert not s.check_quorum_expired(2 * half)
    deadline = s.check_quorum_deadline
    s.update_replica_state(3, 0, 2 * half)
    s.update_observer_state(5, 0, int(2 * half * 1000))
    assert s.check_quorum_deadline == deadline, "one voter and an observer reset the timer"
    assert s.check_quorum_expired(3 * half)


def _client(tmp_path: Path, kafka_version: str, voters: tuple[int, ...] = (0, 1, 2)) -> RaftClient:
    """Voter 0 as the leader of epoch 1 among ``voters``, with the gates of ``kafka_version``."""
    kv = features.parse_kafka_version(kafka_version)
    qc = QuorumConfig(voters={v: ("127.0.0.1", 1) for v in voters}, fetch_timeout_ms=FETCH_TIMEOUT_MS,
                      check_quorum=features.software_gate("check_quorum", kv))
    log = RaftLog(tmp_path / "md", 0, "c", segment_bytes=1 << 20)
    c = RaftClient(0, "c", "127.0.0.1", qc, log, EventLog(tmp_path / "events.jsonl", 0, "controller"))
    now = time.monotonic()
    c.quorum.initialize(log.last_fetched_epoch, now)
    c.quorum.transition_to_candidate(now)
    c.quorum.state.granted.update(voters[1:2])
    c._on_become_leader(now)
    assert isinstance(c.quorum.state, Leader)
    return c


@pytest.mark.parametrize("kafka_version,resigns", [("3.7.0", True), ("3.6.2", False)])
def test_leader_resigns_without_fetch_from_majority_voters(tmp_path, kafka_version, resigns):
    """KafkaRaftClientTest.testLeaderShouldResignLeadershipIfNotGetFetchRequestFromMajorityVoters:
    half a check-quorum timeout, a voter's Fetch (reset), half, the other voter's Fetch (reset),
    half, an observer's Fetch (no reset), half: the 3.7 leader has resigned in its epoch. The 3.6
    leader never does, however long nobody fetches (KafkaRaftClient 3.6.2 pollLeader)."""
    c = _client(tmp_path, kafka_version)
    c.quorum.state.begin_quorum_next = float("inf")   # no BeginQuorumEpoch sends: the voters are not there
    t0 = c.quorum.state.now
    half = CHECK_QUORUM_S / 2
    c.poll(t0 + half)
    assert isinstance(c.quorum.state, Leader)
    c.quorum.state.update_replica_state(1, 0, t0 + half)
    c.poll(t0 + 2 * half)
    assert isinstance(c.quorum.state, Leader)
    c.quorum.state.update_replica_state(2, 0, t0 + 2 * half)
    c.poll(t0 + 3 * half)
    assert isinstance(c.quorum.state, Leader)
    c.quorum.state.update_observer_state(3, 0, int((t0 + 3 * half) * 1000))
    c.poll(t0 + 4 * half + 0.001)
    if resigns:
        assert isinstance(c.quorum.state, Resigned) and c.quorum.epoch == 1
    else:
        c.poll(t0 + 1000.0)
        assert isinstance(c.quorum.state, Leader) and c.quorum.epoch == 1


def test_a_lone_voter_leader_never_expires_and_its_poll_waits(tmp_path):
    """LeaderState.timeUntilCheckQuorumExpires returns Long.MAX_VALUE for a single voter, and
    KafkaRaftClient.pollLeader returns the minimum of that and the other timers: long after 1.5 x
    fetch timeout without any Fetch, a lone controller is still leader and its poll asks to sleep
    until the next BeginQuorumEpoch round - never 0 or less, which would make the raft loop spin
    (the single-controller clusters of every default campaign: one CPU core burnt for nothing)."""
    c = _client(tmp_path, "4.1.0", voters=(0,))
    later = c.quorum.state.now + 10 * CHECK_QUORUM_S
    c.poll(later)                       # sends nothing (no other voter), schedules the next round
    wait = c.poll(later)
    assert isinstance(c.quorum.state, Leader) and c.quorum.epoch == 1
    assert wait == pytest.approx(FETCH_TIMEOUT_MS / 2000), wait
    assert c.quorum.state.time_until_check_quorum_expires(later) == float("inf")


ELECTION_MS, FETCH_MS = 500, 800


@pytest.mark.slow
@pytest.mark.parametrize("kafka_version,zombie", [("3.7.0", False), ("3.6.2", True)])
def test_leader_cut_from_the_voters(tmp_path, kafka_version, zombie):
    """Three real raft nodes; the leader is cut off (iptables DROP both ways) for eight check-quorum
    timeouts. Both versions: the other two elect a new leader in a higher epoch. 3.7.0: the old
    leader resigned by check quorum within about one timeout of the cut, so two leaders overlapped
    for less than a timeout. 3.6.2: it is still Leader of its old epoch at the end of the cut
    (two leaders for the whole cut), and resigns only on learning the higher epoch after the heal."""
    cq = 1.5 * FETCH_MS / 1000
    q = Quorum(tmp_path, 3, {"controller.quorum.election.timeout.ms": str(ELECTION_MS),
                             "controller.quorum.fetch.timeout.ms": str(FETCH_MS), "kafka.version": kafka_version})
    try:
        q.start_all()
        old, epoch = q.wait_leader()
        time.sleep(1.0)
        cut_at = time.time()
        q.isolate(old)
        new, new_epoch = q.wait_leader(exclude={old}, min_epoch=epoch + 1, timeout=15)
        time.sleep(max(0.0, cut_at + 8 * cq - time.time()))
        st = q.status(old) or {}
        resigned = [e for e in q.events(old) if e["event"] == "controller_resigned" and e["epoch"] == epoch]
        if zombie:
            assert st.get("state") == "Leader" and st.get("epoch") == epoch, st
            assert not resigned, resigned
            healed = time.time()
            q.heal()
            deadline = time.time() + 15
            while not [e for e in q.events(old) if e["event"] == "controller_resigned" and e["epoch"] == epoch]:
                assert time.time() < deadline, "the old leader never resigned after the heal"
                time.sleep(0.1)
            r = [e for e in q.events(old) if e["event"] == "controller_resigned" and e["epoch"] == epoch][0]
            assert r["reason"] == "higher_epoch" and r["wall"] >= healed
        else:
            assert resigned and resigned[0]["reason"] == "check_quorum", q.events(old)
            assert resigned[0]["wall"] - cut_at < 2 * cq, (resigned[0]["wall"] - cut_at, cq)
            assert st.get("state") != "Leader" or st.get("epoch") != epoch, st
    finally:
        q.close()
