"""DescribeQuorum's replica states, driven the way KafkaRaftClientTest.testDescribeQuorumWithFollowers
and testDescribeQuorumWithObserver drive them (no processes: kraftsim/raft/states.py is pure).

Rules (LeaderState.ReplicaState.updateFollowerState, RaftUtil.toReplicaState,
LeaderState.clearInactiveObservers):
- the leader reports itself with its end offset and "now" for both timestamps;
- a voter that never fetched has end offset and timestamps -1;
- a fetch at the leader's end offset is caught up at that fetch's time; a fetch below it but
  at or past the leader's end offset of the previous fetch is caught up as of the previous fetch;
- a non-voter's fetch makes it an observer; one silent for 300 s is dropped.

Before DescribeQuorum existed Leader had no ``describe``: every test here failed.
"""
from __future__ import annotations

from kraftsim.raft.states import OBSERVER_SESSION_TIMEOUT_MS, Leader


def _leader() -> Leader:
    s = Leader(epoch=2, local_id=1, voters=frozenset({1, 2, 3}), epoch_start_offset=0,
               granting=frozenset({1, 2}), check_quorum_timeout_s=1.5, now=0.0)
    s.update_local_state(1)
    return s


def _by_id(rows: list[dict[str, int]]) -> dict[int, dict[str, int]]:
    return {r["replica_id"]: r for r in rows}


def test_before_any_fetch_only_the_leader_is_known() -> None:
    voters, observers = _leader().describe(1000)
    v = _by_id(voters)
    assert v[1] == {"replica_id": 1, "log_end_offset": 1, "last_fetch_timestamp": 1000, "last_caught_up_timestamp": 1000}
    assert v[2] == v[3] | {"replica_id": 2} and v[3]["log_end_offset"] == -1
    assert v[3]["last_fetch_timestamp"] == -1 and v[3]["last_caught_up_timestamp"] == -1
    assert observers == []


def test_follower_timestamps_follow_update_follower_state() -> None:
    s = _leader()
    s.update_replica_state(2, 1, 0.1, now_ms=1100)      # at the leader's end offset: caught up now
    s.update_local_state(3)                              # the leader appends two records
    v = _by_id(s.describe(1200)[0])
    assert v[2] == {"replica_id": 2, "log_end_offset": 1, "last_fetch_timestamp": 1100,
                    "last_caught_up_timestamp": 1100}
    assert v[1]["log_end_offset"] == 3 and v[1]["last_caught_up_timestamp"] == 1200
    s.update_replica_state(3, 3, 0.3, now_ms=1300)
    assert _by_id(s.describe(1400)[0])[3]["last_caught_up_timestamp"] == 1300
    s.update_local_state(5)
    s.update_replica_state(2, 3, 0.5, now_ms=1500)      # below LEO 5, past the LEO 1 of its last fetch
    v2 = _by_id(s.describe(1600)[0])[2]
    assert v2["log_end_offset"] == 3 and v2["last_fetch_timestamp"] == 1500
    assert v2["last_caught_up_timestamp"] == 1100       # caught up as of its previous fetch


def test_non_voter_fetches_make_observers_and_silent_ones_are_dropped() -> None:
    s = _leader()
    s.update_observer_state(7, 1, 2000)
    s.update_observer_state(1, 1, 2000)   # the leader itself is never an observer
    s.update_observer_state(2, 1, 2000)   # nor is a voter
    voters, observers = s.describe(2100)
    assert observers == [{"replica_id": 7, "log_end_offset": 1, "last_fetch_timestamp": 2000,
                          "last_caught_up_timestamp": 2000}]
    assert _by_id(voters)[2]["log_end_offset"] == -1  # an observer-path fetch never counts for a voter
    assert s.describe(2000 + OBSERVER_SESSION_TIMEOUT_MS)[1] == []
