"""Quorum states and their transitions, as Kafka's QuorumState and *State classes define them.

Why a pure module: these rules decide who may vote for whom and who may lead; keeping them free
of I/O lets the conformance tests drive them the way QuorumStateTest does, and the network code
(client.py) only asks and obeys. Times are ``time.monotonic()`` seconds.

States (QuorumState.java class comment):
- Unattached(epoch, voted?, leader?): no leader known, maybe voted; times out into Candidate.
- Candidate(epoch): voted for itself; Leader on a majority of granted votes.
- Leader(epoch, epoch start offset): replicates; high watermark = majority's end offset.
- Follower(epoch, leader): fetches; times out into Candidate after ``fetch.timeout.ms``.
- Resigned(epoch): a former leader telling voters (EndQuorumEpoch) before someone else is elected.
- Prospective(epoch) (KIP-996 pre-vote, Kafka 4.0+): a voter that would stand for election asks
  first (Vote with PreVote=true) without bumping the epoch or persisting anything; Candidate only
  on a majority of pre-votes, else back to Follower (leader known) or Unattached.

Every transition is written to the quorum-state file before it takes effect
(QuorumState.durableTransitionTo).
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field

from kraftsim.raft.store import NO_LEADER, NOT_VOTED, ElectionState, FileQuorumStateStore

CHECK_QUORUM_TIMEOUT_FACTOR = 1.5  # LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR
OBSERVER_SESSION_TIMEOUT_MS = 300_000  # LeaderState.OBSERVER_SESSION_TIMEOUT_MS
RETRY_BACKOFF_BASE_MS = 50  # KafkaRaftClient.RETRY_BACKOFF_BASE_MS


@dataclass
class Unattached:
    epoch: int
    voted_id: int = NOT_VOTED
    leader_id: int = NO_LEADER
    election_deadline: float = 0.0
    #: carried over from the previous state (QuorumState passes ``state.highWatermark()`` on)
    high_watermark: int | None = None
    name: str = "Unattached"

    def election(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id, voters)

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool = False) -> bool:
        """UnattachedState.canGrantVote (QuorumState.unattachedOrProspectiveCanGrantVote): a pre-vote
        for an up-to-date log; a vote for the same candidate again, else only without a vote or a
        known leader, and only if the candidate's log is at least as up to date."""
        if pre_vote:
            return log_up_to_date
        if self.voted_id != NOT_VOTED:
            return self.voted_id == candidate
        if self.leader_id != NO_LEADER:
            return False
        return log_up_to_date


@dataclass
class Candidate:
    epoch: int
    local_id: int
    voters: frozenset[int]
    retries: int
    election_deadline: float
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backoff_until: float | None = None
    high_watermark: int | None = None
    name: str = "Candidate"

    def __post_init__(self) -> None:
        self.granted.add(self.local_id)  # CandidateState: the vote for itself

    def election(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, NO_LEADER, self.local_id, voters)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def is_vote_granted(self) -> bool:
        """CandidateState.isVoteGranted: a majority of the voters (itself included) granted."""
        return len(self.granted) >= self.majority

    def is_vote_rejected(self) -> bool:
        """CandidateState.isVoteRejected: a majority can no longer be reached."""
        return len(self.voters) - len(self.rejected) < self.majority

    def unrecorded_voters(self) -> set[int]:
        return set(self.voters) - self.granted - self.rejected

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool = False) -> bool:
        """CandidateState.canGrantVote: it voted for itself; a pre-vote for an up-to-date log is not
        a vote and is granted (Kafka 4.0)."""
        return pre_vote and log_up_to_date


@dataclass
class Prospective:
    """ProspectiveState (KIP-996, Kafka 4.0): sends Vote with PreVote=true at its current epoch,
    keeps the epoch, the leader it knew, the vote it gave and the high watermark; nothing is
    persisted (QuorumState.transitionToProspective is a memory transition)."""
    epoch: int
    local_id: int
    voters: frozenset[int]
    retries: int
    election_deadline: float
    leader_id: int = NO_LEADER
    voted_id: int = NOT_VOTED
    high_watermark: int | None = None
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    name: str = "Prospective"

    def __post_init__(self) -> None:
        self.granted.add(self.local_id)  # EpochElection: its own pre-vote

    def election(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id, voters)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def is_vote_granted(self) -> bool:
        return len(self.granted) >= self.majority

    def is_vote_rejected(self) -> bool:
        return len(self.voters) - len(self.rejected) < self.majority

    def unrecorded_voters(self) -> set[int]:
        return set(self.voters) - self.granted - self.rejected

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool = False) -> bool:
        """ProspectiveState.canGrantVote = unattachedOrProspectiveCanGrantVote."""
        if pre_vote:
            return log_up_to_date
        if self.voted_id != NOT_VOTED:
            return self.voted_id == candidate
        if self.leader_id != NO_LEADER:
            return False
        return log_up_to_date


@dataclass
class ReplicaState:
    """LeaderState.ReplicaState: what the leader knows of one replica. ``last_fetch`` is
    monotonic (check quorum); the ``*_ms`` fields are wall-clock milliseconds because that is
    what DescribeQuorum reports (KIP-836: the leader's wall clock)."""
    end_offset: int | None = None
    last_fetch: float = 0.0
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    last_fetch_leader_leo: int = -1

    def update_follower_state(self, fetch_offset: int, leader_end_offset: int | None, now_ms: int) -> None:
        """LeaderState.ReplicaState.updateFollowerState: caught up now if the fetch reached the
        leader's end offset; else caught up as of the previous fetch if this one reached the
        leader's end offset of that previous fetch."""
        if leader_end_offset is not None:
            if fetch_offset >= leader_end_offset:
                self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
            elif self.last_fetch_leader_leo > 0 and fetch_offset >= self.last_fetch_leader_leo:
                self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
            self.last_fetch_leader_leo = leader_end_offset
        self.last_fetch_ms = max(self.last_fetch_ms, now_ms)
        self.end_offset = fetch_offset


@dataclass
class Leader:
    epoch: int
    local_id: int
    voters: frozenset[int]
    epoch_start_offset: int
    granting: frozenset[int]
    check_quorum_timeout_s: float
    now: float
    high_watermark: int | None = None
    replicas: dict[int, ReplicaState] = field(default_factory=dict)
    observers: dict[int, ReplicaState] = field(default_factory=dict)
    fetched_voters: set[int] = field(default_factory=set)
    begin_quorum_acked: set[int] = field(default_factory=set)
    check_quorum_deadline: float = 0.0
    begin_quorum_next: float = 0.0
    name: str = "Leader"

    def __post_init__(self) -> None:
        self.replicas = {v: ReplicaState() for v in self.voters}
        self.check_quorum_deadline = self.now + self.check_quorum_timeout_s

    def election(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, NOT_VOTED, voters)

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool = False) -> bool:
        return False  # LeaderState.canGrantVote (votes and pre-votes)

    def update_local_state(self, end_offset: int) -> bool:
        """LeaderState.updateLocalState: the leader's own flushed end offset counts."""
        self.replicas[self.local_id].end_offset = end_offset
        return self._maybe_update_high_watermark()

    def update_replica_state(self, replica: int, fetch_offset: int, now: float, now_ms: int | None = None) -> bool:
        """LeaderState.updateReplicaState: a voter's Fetch offset is its end offset; only voters
        move the high watermark. Also the check-quorum bookkeeping
        (LeaderState.updateCheckQuorumForFollowingVoter). ``now_ms`` is the wall clock the
        DescribeQuorum timestamps use (updateFollowerState)."""
        st = self.replicas.get(replica)
        if st is None:
            return False
        st.update_follower_state(fetch_offset, self.replicas[self.local_id].end_offset,
                                 int(time.time() * 1000) if now_ms is None else now_ms)
        st.last_fetch = now
        self.fetched_voters.add(replica)
        if len(self.fetched_voters) >= len(self.voters) // 2 + 1 - 1:  # the leader counts itself
            self.fetched_voters.clear()
            self.check_quorum_deadline = now + self.check_quorum_timeout_s
        return self._maybe_update_high_watermark()

    def _maybe_update_high_watermark(self) -> bool:
        """LeaderState.maybeUpdateHighWatermark: the end offset at index ``voters/2`` of the voters
        sorted by descending end offset is on a majority; it becomes the high watermark only if it
        lies past the epoch start offset (the leader must commit a record of its own epoch before
        exposing earlier ones) and never moves backwards."""
        offsets = sorted((s.end_offset for s in self.replicas.values() if s.end_offset is not None), reverse=True)
        idx = len(self.voters) // 2
        if len(offsets) <= idx:
            return False
        candidate = offsets[idx]
        if candidate <= self.epoch_start_offset:
            return False
        if self.high_watermark is None or candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def update_observer_state(self, replica: int, fetch_offset: int, now_ms: int) -> None:
        """LeaderState.updateReplicaState for a replica that is not a voter (a broker's metadata
        Fetch): it becomes an observer (getOrCreateReplicaState) and never moves the high watermark."""
        if replica < 0 or replica == self.local_id or replica in self.replicas:
            return
        st = self.observers.setdefault(replica, ReplicaState())
        st.update_follower_state(fetch_offset, self.replicas[self.local_id].end_offset, now_ms)

    def describe(self, now_ms: int) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
        """(voters, observers) as DescribeQuorum reports them (RaftUtil.toReplicaState): the
        leader's own timestamps are "now"; an unknown end offset is -1; observers silent for
        OBSERVER_SESSION_TIMEOUT_MS are dropped first (LeaderState.clearInactiveObservers)."""
        for rid in [r for r, st in self.observers.items() if now_ms - st.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS]:
            del self.observers[rid]

        def one(rid: int, st: ReplicaState) -> dict[str, int]:
            own = rid == self.local_id
            return {"replica_id": rid, "log_end_offset": -1 if st.end_offset is None else st.end_offset,
                    "last_fetch_timestamp": now_ms if own else st.last_fetch_ms,
                    "last_caught_up_timestamp": now_ms if own else st.last_caught_up_ms}
        return ([one(r, st) for r, st in sorted(self.replicas.items())],
                [one(r, st) for r, st in sorted(self.observers.items())])

    def time_until_check_quorum_expires(self, now: float) -> float:
        """LeaderState.timeUntilCheckQuorumExpires: seconds until no majority has fetched within
        1.5 x fetch timeout; a single voter never expires (``Long.MAX_VALUE``), so its poll loop
        has nothing of this to wake up for."""
        if len(self.voters) == 1:
            return math.inf
        return max(0.0, self.check_quorum_deadline - now)

    def check_quorum_expired(self, now: float) -> bool:
        """LeaderState.timeUntilCheckQuorumExpires == 0."""
        return self.time_until_check_quorum_expires(now) == 0.0

    def non_leader_voters_by_descending_fetch_offset(self) -> list[int]:
        others = [v for v in self.voters if v != self.local_id]
        return sorted(others, key=lambda v: -(self.replicas[v].end_offset or -1))


@dataclass
class Follower:
    epoch: int
    leader_id: int
    fetch_deadline: float
    high_watermark: int | None = None
    #: FollowerState.hasFetchedFromLeader: a successful Fetch since it became follower in this epoch
    has_fetched_from_leader: bool = False
    name: str = "Follower"

    def election(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, NOT_VOTED, voters)

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool = False) -> bool:
        """FollowerState.canGrantVote: never a vote (it has a leader in this epoch);
        FollowerState.canGrantPreVote (Kafka 4.0): a pre-vote only if it has not fetched from its
        leader yet in this epoch and the log is up to date - a voter the leader still reaches
        keeps a healed, lagging voter from starting an election."""
        return pre_vote and not self.has_fetched_from_leader and log_up_to_date

    def update_high_watermark(self, new: int | None) -> bool:
        """FollowerState.updateHighWatermark: never back to unknown, never negative, never lower
        (IllegalArgumentException "Non-monotonic update of high watermark"); True if it moved."""
        if new is None:
            if self.high_watermark is not None:
                raise ValueError(f"Attempt to overwrite current high watermark {self.high_watermark} with unknown value")
            return False
        if new < 0:
            raise ValueError(f"Illegal negative ({new}) high watermark update")
        if self.high_watermark is not None:
            if self.high_watermark > new:
                raise ValueError(f"Non-monotonic update of high watermark from {self.high_watermark} to {new}")
            if self.high_watermark == new:
                return False
        self.high_watermark = new
        return True


@dataclass
class Resigned:
    epoch: int
    local_id: int
    election_deadline: float
    unacked: set[int]
    preferred_successors: list[int]
    name: str = "Resigned"

    def election(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, NOT_VOTED, voters)

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool = False) -> bool:
        return False  # ResignedState.canGrantVote


State = Unattached | Prospective | Candidate | Leader | Follower | Resigned


class QuorumState:
    """QuorumState.java: the current state, its legal transitions, and their persistence."""

    def __init__(self, local_id: int, voters: frozenset[int], store: FileQuorumStateStore, *,
                 election_timeout_ms: int, fetch_timeout_ms: int, rng: random.Random | None = None):
        self.local_id = local_id
        self.voters = frozenset(voters)
        self.store = store
        self.election_timeout_ms = election_timeout_ms
        self.fetch_timeout_ms = fetch_timeout_ms
        self.rng = rng or random.Random()
        self.state: State = Unattached(0)

    # ---------------------------------------------------------------- helpers

    def random_election_timeout_s(self) -> float:
        """QuorumState.randomElectionTimeoutMs: timeout + uniform [0, timeout)."""
        t = self.election_timeout_ms
        return 0.0 if t == 0 else (t + self.rng.randrange(t)) / 1000

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def is_voter(self) -> bool:
        return self.local_id in self.voters

    @property
    def leader_id(self) -> int:
        s = self.state
        if isinstance(s, (Leader, Resigned)):
            return self.local_id
        if isinstance(s, Follower):
            return s.leader_id
        if isinstance(s, (Unattached, Prospective)):
            return s.leader_id
        return NO_LEADER

    def has_leader(self) -> bool:
        return self.leader_id != NO_LEADER

    def _durable(self, new: State) -> None:
        self.store.write(new.election(self.voters))
        self.state = new

    # ---------------------------------------------------------------- initialize

    def initialize(self, log_end_epoch: int, now: float) -> None:
        """QuorumState.initialize: resume from the quorum-state file; a former leader comes back
        Resigned in the same epoch (it must not vote in it, and its unflushed records must not be
        re-used under the same epoch); a former candidate comes back Candidate; an epoch older
        than the log's last epoch is replaced by the log's."""
        el = self.store.read() or ElectionState(0, voters=self.voters)
        timeout = now + self.random_election_timeout_s()
        if el.epoch < log_end_epoch:
            new: State = Unattached(log_end_epoch, election_deadline=timeout)
        elif el.is_leader(self.local_id):
            new = Resigned(el.epoch, self.local_id, timeout, set(self.voters) - {self.local_id}, [])
        elif el.is_voted_candidate(self.local_id):
            new = Candidate(el.epoch, self.local_id, self.voters, 1, timeout)
        elif el.has_voted():
            new = Unattached(el.epoch, voted_id=el.voted_id, election_deadline=timeout)
        elif el.has_leader() and el.leader_id in self.voters:
            new = Follower(el.epoch, el.leader_id, now + self.fetch_timeout_ms / 1000)
        else:
            new = Unattached(el.epoch, leader_id=el.leader_id, election_deadline=timeout)
        self._durable(new)

    # ---------------------------------------------------------------- transitions

    def transition_to_unattached(self, epoch: int, now: float) -> None:
        """QuorumState.transitionToUnattached: to a larger epoch, or (pre-vote) in the same epoch
        from Prospective, keeping the vote it gave; a candidate, unattached node or prospective whose
        pre-vote was not rejected keeps its remaining election timeout."""
        s = self.state
        if epoch < self.epoch or (epoch == self.epoch and not isinstance(s, Prospective)):
            raise ValueError(f"cannot go Unattached at epoch {epoch} from {self.state}")
        keep = isinstance(s, (Candidate, Unattached)) or (isinstance(s, Prospective) and not s.is_vote_rejected())
        deadline = s.election_deadline if keep else now + self.random_election_timeout_s()
        voted = s.voted_id if isinstance(s, Prospective) and epoch == s.epoch else NOT_VOTED
        self._durable(Unattached(epoch, voted_id=voted, election_deadline=deadline, high_watermark=self.high_watermark))

    def transition_to_unattached_voted(self, epoch: int, candidate: int, now: float) -> None:
        """QuorumState.transitionToUnattachedVotedState: never for itself, never an older epoch,
        in the same epoch only from Unattached-not-voted."""
        if candidate == self.local_id:
            raise ValueError("cannot vote for itself through Unattached")
        if epoch < self.epoch or (epoch == self.epoch and not self.is_unattached_not_voted()):
            raise ValueError(f"cannot vote for {candidate} in epoch {epoch} from {self.state}")
        self._durable(Unattached(epoch, voted_id=candidate, election_deadline=now + self.random_election_timeout_s(),
                                 high_watermark=self.high_watermark))

    def transition_to_follower(self, epoch: int, leader: int, now: float) -> None:
        """QuorumState.transitionToFollower: never itself, never an older epoch, and in the same
        epoch never from Leader or from Follower (the leader of an epoch is unique)."""
        if leader == self.local_id:
            raise ValueError("cannot follow itself")
        if epoch < self.epoch:
            raise ValueError(f"cannot follow {leader} in epoch {epoch} < {self.epoch}")
        if epoch == self.epoch and isinstance(self.state, (Leader, Follower)):
            raise ValueError(f"cannot follow {leader} in epoch {epoch} from {self.state.name}")
        self._durable(Follower(epoch, leader, now + self.fetch_timeout_ms / 1000,
                               high_watermark=self.high_watermark))

    def transition_to_candidate(self, now: float) -> None:
        """QuorumState.transitionToCandidate: epoch + 1, a vote for itself; retries count up
        while it stays a candidate (for the exponential backoff)."""
        if not self.is_voter:
            raise ValueError("an observer cannot be a candidate")
        if isinstance(self.state, Leader):
            raise ValueError("a leader cannot become a candidate")
        s = self.state
        retries = s.retries + 1 if isinstance(s, Candidate) else s.retries if isinstance(s, Prospective) else 1
        self._durable(Candidate(self.epoch + 1, self.local_id, self.voters, retries,
                                now + self.random_election_timeout_s(), high_watermark=self.high_watermark))

    def transition_to_prospective(self, now: float) -> None:
        """QuorumState.transitionToProspective (Kafka 4.0): a voter, not Leader or Prospective,
        keeps epoch, known leader, given vote (a candidate's own) and high watermark; retries count
        on from a candidacy; a memory transition - nothing changes in the quorum-state file."""
        if not self.is_voter:
            raise ValueError("an observer cannot be prospective")
        s = self.state
        if isinstance(s, (Leader, Prospective)):
            raise ValueError(f"cannot become prospective from {s.name}")
        retries = s.retries + 1 if isinstance(s, Candidate) else 1
        voted = s.voted_id if isinstance(s, Unattached) else self.local_id if isinstance(s, Candidate) else NOT_VOTED
        self.state = Prospective(self.epoch, self.local_id, self.voters, retries, now + self.random_election_timeout_s(),
                                 leader_id=self.leader_id if not isinstance(s, Resigned) else NO_LEADER,
                                 voted_id=voted, high_watermark=self.high_watermark)

    def transition_to_leader(self, epoch_start_offset: int, now: float) -> Leader:
        """QuorumState.transitionToLeader: only from a Candidate holding a majority of votes."""
        s = self.state
        if not isinstance(s, Candidate) or not s.is_vote_granted():
            raise ValueError(f"cannot become leader from {s}")
        new = Leader(s.epoch, self.local_id, self.voters, epoch_start_offset, frozenset(s.granted),
                     self.fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR / 1000, now)
        self._durable(new)
        return new

    def transition_to_resigned(self, preferred: list[int], now: float) -> None:
        """QuorumState.transitionToResigned: only a leader resigns, in its own epoch."""
        if not isinstance(self.state, Leader):
            raise ValueError("only a leader can resign")
        self._durable(Resigned(self.epoch, self.local_id, now + self.random_election_timeout_s(),
                               set(self.voters) - {self.local_id}, preferred))

    # ---------------------------------------------------------------- questions

    def is_unattached_not_voted(self) -> bool:
        s = self.state
        return isinstance(s, Unattached) and s.voted_id == NOT_VOTED

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool = False) -> bool:
        return self.state.can_grant_vote(candidate, log_up_to_date, pre_vote)

    @property
    def high_watermark(self) -> int | None:
        """EpochState.highWatermark: the leader's own; Follower, Unattached and Candidate carry the
        one they came in with (QuorumState's transitions pass ``state.highWatermark()`` on, 3.3.0
        through 3.9); Resigned has none (the EpochState default); a new leader starts without one."""
        s = self.state
        return s.high_watermark if isinstance(s, (Leader, Follower, Unattached, Candidate, Prospective)) else None
