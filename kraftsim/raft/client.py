"""The raft client: KafkaRaftClient's event loop over kio, for the ``__cluster_metadata`` quorum.

Why asyncio and one loop: Kafka's KafkaRaftClient is a single poll thread — every request,
response and timer is handled on it, so no two rules ever race. Here every handler runs on the
one asyncio loop, and state changes happen only between awaits.

What it does (KafkaRaftClient.java, method by method):
- ``poll`` = pollCurrentState: Leader (check quorum, BeginQuorumEpoch), Candidate (Vote,
  election timeout, exponential backoff), Follower (Fetch, fetch timeout), Unattached (election
  timeout), Resigned (EndQuorumEpoch, election timeout);
- inbound Vote / BeginQuorumEpoch / EndQuorumEpoch / Fetch handlers with Kafka's validation and
  error codes; responses go through maybeHandleCommonResponse;
- the leader's high watermark moves when a majority of voters fetched past an offset of its own
  epoch (LeaderState.maybeUpdateHighWatermark); a follower's is min(leader's, own LEO)
  (updateFollowerHighWatermark); only records below it reach ``on_commit``;
- a follower told of a diverging epoch truncates (handleFetchResponse, truncateToEndOffset).

Events (shared contract): ``controller_elected`` {epoch, leader, granting_voters, voters,
epoch_start_offset}, ``controller_resigned`` {epoch, reason}, ``metadata_truncation``
{from_offset, to_offset, reason, epoch, leader}; the metadata log's recovery gives ``recovery``.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from kio.schema.errors import ErrorCode

from kraftsim.events import EventLog
from kraftsim.raft.config import QuorumConfig
from kraftsim.raft.log import PARTITION, TOPIC, RaftLog
from kraftsim.raft.states import (RETRY_BACKOFF_BASE_MS, Candidate, Follower, Leader, Prospective, QuorumState,
                                  Resigned, Unattached)
from kraftsim.raft.store import NO_LEADER, FileQuorumStateStore
from kraftsim.wire import Client, Peer, build, load_request_schema, load_response_schema

VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, FETCH, DESCRIBE_QUORUM = 52, 53, 54, 1, 55
#: what the raft listener advertises; Fetch 12 is also the brokers' metadata Fetch version.
#: DescribeQuorum stops at v1 (KIP-836 timestamps): v2 adds directory ids and voter listeners
#: (KIP-853), which a static ``controller.quorum.voters`` quorum does not have.
RAFT_APIS = {VOTE: (0, 0), BEGIN_QUORUM_EPOCH: (0, 0), END_QUORUM_EPOCH: (0, 0), FETCH: (12, 12),
             DESCRIBE_QUORUM: (0, 1)}
#: Vote v2 carries PreVote (KIP-996, Kafka 4.0); kraftsim's quorum is one software version, so a
#: voter with pre-vote talks v2 to every peer and one without stays at v0
VOTE_PRE_VOTE_VERSION = 2
FETCH_MAX_BYTES = 1 << 20

CommitCallback = Callable[[list[tuple[int, int, dict[str, Any]]]], None]


class RaftFatalError(Exception):
    """An error Kafka's raft IO thread does not survive (RaftIoThread.doWork → fatalFaultHandler):
    raised after the fault was handled, to abort whatever was running."""


def halt(status: int) -> None:
    """Exit.halt: end the process at once, no clean-up (ProcessTerminatingFaultHandler, halt mode)."""
    os._exit(status)


class NotLeader(Exception):
    """An append on a node that is not the leader, or whose leadership ended before commit."""

    def __init__(self, leader_id: int, epoch: int):
        super().__init__(f"not the leader (leader {leader_id}, epoch {epoch})")
        self.leader_id, self.epoch = leader_id, epoch


class RaftClient:
    def __init__(self, node_id: int, cluster_id: str, host: str, quorum: QuorumConfig, log: RaftLog,
                 events: EventLog, on_commit: CommitCallback | None = None, rng: random.Random | None = None,
                 on_fatal: Callable[[int], None] = halt):
        self.node_id = node_id
        self.on_fatal = on_fatal
        #: why the raft IO thread died (before Kafka 3.4.1 a fault stopped the thread, not the process)
        self.dead: str | None = None
        self._unflushed = 0  # records appended after the raft thread died (never written)
        self.cluster_id = cluster_id
        self.host = host
        self.config = quorum
        self.log = log
        self.ev = events
        self.on_commit = on_commit
        self.rng = rng or random.Random()
        self.voters = frozenset(quorum.voters)
        self.quorum = QuorumState(node_id, self.voters, FileQuorumStateStore(log.dir / "quorum-state"),
                                  election_timeout_ms=quorum.election_timeout_ms,
                                  fetch_timeout_ms=quorum.fetch_timeout_ms, rng=self.rng)
        self.clients: dict[int, Client] = {}
        self.inflight: dict[int, asyncio.Task] = {}
        self.backoff_until: dict[int, float] = {}
        self.unreachable: set[int] = set()
        self.generation = 0  # bumped on every transition: older responses are ignored (resetConnections)
        self.wake = asyncio.Event()
        self.progress = asyncio.Event()  # LEO/HWM/state changed: parked fetches re-check (fetchPurgatory)
        self.applied = 0  # next offset the state machine has not seen
        self.shutting_down = False
        self.initialized = False
        self.listeners: list[Callable[[], None]] = []  # told after every state change

    # ================================================================== plumbing

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """What the raft listener advertises: Vote up to v2 with pre-vote (Kafka 4.0), else v0."""
        return {**RAFT_APIS, VOTE: (0, VOTE_PRE_VOTE_VERSION if self.config.pre_vote else 0)}

    def handlers(self) -> dict[int, Callable[[Any, Any, Peer], Awaitable[Any]]]:
        hs = {VOTE: self.h_vote, BEGIN_QUORUM_EPOCH: self.h_begin_quorum_epoch,
              END_QUORUM_EPOCH: self.h_end_quorum_epoch, FETCH: self.h_fetch,
              DESCRIBE_QUORUM: self.h_describe_quorum}
        return {k: self.on_raft_thread(h) for k, h in hs.items()}

    def on_raft_thread(self, handler: Callable[[Any, Any, Peer], Awaitable[Any]]) -> Callable[[Any, Any, Peer], Awaitable[Any]]:
        """A request Kafka handles on the raft IO thread: a fault while handling it is the thread's
        (``_fault``), and once the thread died (before Kafka 3.4.1) nothing is answered - the request
        waits in a queue nobody reads until the peer gives up."""
        async def handle(header: Any, req: Any, peer: Peer) -> Any:
            if self.dead is None:
                try:
                    return await handler(header, req, peer)
                except RaftFatalError:
                    pass
            await asyncio.Event().wait()
        return handle

    def _kick(self) -> None:
        self.wake.set()
        self.progress.set()
        self.progress = asyncio.Event()

    def _client(self, dest: int) -> Client:
        c = self.clients.get(dest)
        if c is None:
            host, port = self.config.voters[dest]
            c = Client(host, port, f"raft-{self.node_id}", local_host=self.host)
            self.clients[dest] = c
        return c

    def _reset_connections(self) -> None:
        """KafkaRaftClient.resetConnections: forget in-flight requests; their responses are ignored."""
        self.generation += 1
        self.inflight.clear()
        self.backoff_until.clear()

    def _maybe_send(self, dest: int, now: float, build_req: Callable[[], Any],
                    on_response: Callable[[int, Any, float], bool]) -> None:
        """RequestManager: one request in flight per destination, retry backoff after a failure."""
        if dest in self.inflight or now < self.backoff_until.get(dest, 0.0):
            return
        gen = self.generation
        req = build_req()
        timeout = self.config.request_timeout_ms / 1000
        if type(req).__api_key__ == FETCH:
            timeout += self.config.fetch_max_wait_ms / 1000

        async def go() -> None:
            ok = False
            try:
                resp = await self._client(dest).request(req, timeout=timeout)
                if dest in self.unreachable:
                    self.unreachable.discard(dest)
                    self.ev.log(f"raft: voter {dest} answers again")
                if gen == self.generation:
                    ok = on_response(dest, resp, time.monotonic())
                else:
                    ok = True
            except (OSError, asyncio.TimeoutError, ConnectionError) as e:
                if dest not in self.unreachable:  # say it once per outage, not every retry
                    self.unreachable.add(dest)
                    self.ev.log(f"raft: request {type(req).__name__} to {dest} failed: {type(e).__name__}")
            except RaftFatalError:
                pass
            except Exception as e:  # noqa: BLE001 - handled on Kafka's raft IO thread: a fault
                try:
                    self._fault(f"handling {type(req).__name__} response from {dest}: {type(e).__name__}: {e}")
                except RaftFatalError:
                    pass
            finally:
                if gen == self.generation:
                    self.inflight.pop(dest, None)
                    if not ok:
                        self.backoff_until[dest] = time.monotonic() + self.config.retry_backoff_ms / 1000
                self.wake.set()

        self.inflight[dest] = asyncio.ensure_future(go())

    def _state_changed(self) -> None:
        self._reset_connections()
        for cb in list(self.listeners):
            cb()
        self._kick()

    # ================================================================== lifecycle

    def initialize(self) -> None:
        """KafkaRaftClient.initialize: resume the persisted state; a lone voter elects itself."""
        now = time.monotonic()
        self.initialized = True
        self.quorum.initialize(self.log.last_fetched_epoch, now)
        if len(self.voters) == 1 and self.node_id in self.voters and not isinstance(self.quorum.state, Candidate):
            self.quorum.transition_to_candidate(now)
        if isinstance(self.quorum.state, Candidate):
            self._on_become_candidate(now)
        self._state_changed()

    async def run(self, stop: asyncio.Event) -> None:
        """The poll loop (KafkaRaftClient.poll) until ``stop``; then a graceful shutdown."""
        if not self.initialized:
            self.initialize()
        stopper = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set() and self.dead is None:
                now = time.monotonic()
                try:
                    wait = self.poll(now)
                except RaftFatalError:
                    break
                except Exception as e:  # noqa: BLE001 - RaftIoThread.doWork: any error is a fault
                    try:
                        self._fault(f"{type(e).__name__}: {e}")
                    except RaftFatalError:
                        break
                self.wake.clear()
                waker = asyncio.ensure_future(self.wake.wait())
                await asyncio.wait([waker, stopper], timeout=max(0.0, min(wait, 0.1)),
                                   return_when=asyncio.FIRST_COMPLETED)
                waker.cancel()
        finally:
            stopper.cancel()
        if self.dead is not None:
            # the raft thread is gone, the process lives on (Kafka before 3.4.1): nothing polls,
            # nothing is answered, no graceful resignation at shutdown
            await stop.wait()
            return
        await self.shutdown()

    def _fault(self, error: str) -> None:
        """RaftIoThread.doWork: ``throw fatalFaultHandler.handleFault("Unexpected error in raft IO
        thread", t)`` (KAFKA-14644, Kafka 3.4.1+): the fault is logged and the process halts with
        status 1 (ProcessTerminatingFaultHandler). Before 3.4.1, ShutdownableThread logged "Error due
        to" and the thread stopped, with the process still up: kraftsim then stops polling and
        answering raft requests. Either way a ``fatal_fault`` event records it and RaftFatalError
        aborts the caller."""
        halts = self.config.fatal_fault
        self.ev.emit("fatal_fault", component="raft", fault="Unexpected error in raft IO thread", error=error,
                     halted=halts, epoch=self.quorum.epoch, state=self.quorum.state.name)
        if halts:
            self.ev.log(f"Encountered fatal fault: Unexpected error in raft IO thread: {error}")
            self.on_fatal(1)
        else:
            self.ev.log(f"raft IO thread: Error due to {error}; the raft thread stopped, the process lives on")
            self.dead = error
            self.wake.set()
        raise RaftFatalError(error)

    async def shutdown(self, timeout_s: float = 1.0) -> None:
        """KafkaRaftClient.shutdown: a leader resigns and tells the voters (EndQuorumEpoch), so
        a successor is elected at once instead of after a fetch timeout."""
        self.shutting_down = True
        now = time.monotonic()
        if isinstance(self.quorum.state, Leader):
            self._resign(now, "shutdown")
        if isinstance(self.quorum.state, Resigned):
            deadline = now + timeout_s
            while time.monotonic() < deadline and self.quorum.state.unacked:
                self._poll_resigned(time.monotonic())
                await asyncio.sleep(0.02)
        for c in self.clients.values():
            c.close()
        self._fail_appends()

    # ================================================================== poll

    def poll(self, now: float) -> float:
        """KafkaRaftClient.pollCurrentState: returns seconds until something is due."""
        s = self.quorum.state
        if isinstance(s, Leader):
            return self._poll_leader(s, now)
        if isinstance(s, Candidate):
            return self._poll_candidate(s, now)
        if isinstance(s, Prospective):
            return self._poll_prospective(s, now)
        if isinstance(s, Follower):
            if now >= s.fetch_deadline:  # pollFollowerAsVoter: fetch timeout -> prospective / candidate
                self.ev.log(f"raft: no Fetch answer from leader {s.leader_id} within the fetch timeout")
                self._start_election(now, "fetch_timeout")
                return 0.0
            self._maybe_send(s.leader_id, now, self._build_fetch, self._handle_fetch_response)
            return s.fetch_deadline - now
        if isinstance(s, Unattached):
            if self.shutting_down:
                return 0.1
            if now >= s.election_deadline:  # pollUnattachedAsVoter
                self._start_election(now, "election_timeout")
                return 0.0
            return s.election_deadline - now
        return self._poll_resigned(now)

    def _start_election(self, now: float, reason: str) -> None:
        """A voter whose leader went quiet or whose election timed out: Prospective first with
        pre-vote (Kafka 4.0 transitionToProspective), a Candidate at once without it."""
        if self.config.pre_vote:
            self._transition_to_prospective(now, reason)
        else:
            self._transition_to_candidate(now, reason)

    def _poll_leader(self, s: Leader, now: float) -> float:
        """KafkaRaftClient.pollLeader: resign when a majority stopped fetching (check quorum, gate
        ``check_quorum``: Kafka 3.7+, ``timeUntilCheckQuorumExpires == 0``; before 3.7 pollLeader
        resigns only on shutdown or a requested resignation - 3.6.2 KafkaRaftClient.pollLeader - so
        a leader cut from the other voters stays leader of its epoch); BeginQuorumEpoch to every
        other voter every fetch.timeout.ms / 2."""
        expired = self.config.check_quorum and s.check_quorum_expired(now)
        if self.shutting_down or expired:
            self._resign(now, "check_quorum" if not self.shutting_down else "shutdown")
            return 0.0
        if now >= s.begin_quorum_next:
            for v in self.voters - {self.node_id}:
                self._maybe_send(v, now, self._build_begin_quorum_epoch, self._handle_begin_quorum_epoch_response)
            s.begin_quorum_next = now + self.config.fetch_timeout_ms / 2000
        if not self.config.check_quorum:
            return s.begin_quorum_next - now
        # pollLeader: min(timeUntilCheckQuorumExpires, timeUntilBeginQuorumEpochTimerExpires);
        # a lone voter's check quorum never expires (a past deadline would make the loop spin)
        return min(s.begin_quorum_next - now, s.time_until_check_quorum_expires(now))

    def _poll_candidate(self, s: Candidate, now: float) -> float:
        """KafkaRaftClient.pollCandidate: after the backoff that follows a lost election, a new
        candidacy - with pre-vote (4.0) a Prospective first, which also follows an election timeout."""
        if s.backoff_until is not None:
            if now >= s.backoff_until:
                self._start_election(now, "election_backoff")
                return 0.0
            return s.backoff_until - now
        if now >= s.election_deadline:
            if self.config.pre_vote:
                self._transition_to_prospective(now, "election_timeout")
                return 0.0
            s.backoff_until = now + self._binary_exponential_backoff_ms(s.retries) / 1000
            self.ev.log(f"raft: election in epoch {s.epoch} timed out; backing off")
            return s.backoff_until - now
        if not s.is_vote_rejected():
            for v in s.unrecorded_voters():
                self._maybe_send(v, now, lambda v=v: self._build_vote(v), self._handle_vote_response)
        return s.election_deadline - now

    def _poll_prospective(self, s: Prospective, now: float) -> float:
        """KafkaRaftClient.pollProspective (4.0): pre-votes to the voters not heard from yet; the
        election timeout ends the attempt (a loss)."""
        if now >= s.election_deadline:
            self._prospective_lost(now, "election_timeout")
            return 0.0
        if not s.is_vote_rejected():
            for v in s.unrecorded_voters():
                self._maybe_send(v, now, lambda v=v: self._build_vote(v), self._handle_vote_response)
        return s.election_deadline - now

    def _poll_resigned(self, now: float) -> float:
        """KafkaRaftClient.pollResigned: EndQuorumEpoch to voters that have not answered; after
        the election timeout, a candidate."""
        s = self.quorum.state
        assert isinstance(s, Resigned)
        for v in list(s.unacked):
            self._maybe_send(v, now, self._build_end_quorum_epoch, self._handle_end_quorum_epoch_response)
        if self.shutting_down:
            return 0.05
        if now >= s.election_deadline:
            if self.config.pre_vote:  # 4.0: Resigned → Unattached(epoch + 1), then a pre-vote
                self._transition_to_unattached(s.epoch + 1, now)
            else:
                self._transition_to_candidate(now, "resigned")
            return 0.0
        return s.election_deadline - now

    def _binary_exponential_backoff_ms(self, retries: int) -> int:
        """KafkaRaftClient.binaryExponentialElectionBackoffMs."""
        return min(RETRY_BACKOFF_BASE_MS * self.rng.randrange(2 << min(20, retries - 1)),
                   self.config.election_backoff_max_ms)

    def _strict_exponential_backoff_ms(self, position: int, total: int) -> int:
        """KafkaRaftClient.strictExponentialElectionBackoffMs (EndQuorumEpoch successors)."""
        if position == 0:
            return 0
        if position < 0 or position >= total:
            return self.config.election_backoff_max_ms
        base = self.config.election_backoff_max_ms >> (total - 1)
        return min(self.config.election_backoff_max_ms, base << (position - 1))

    # ================================================================== transitions

    def _was_leader_ends(self, reason: str) -> None:
        s = self.quorum.state
        if isinstance(s, Leader):
            self.ev.emit("controller_resigned", epoch=s.epoch, leader=self.node_id, reason=reason,
                         high_watermark=s.high_watermark if s.high_watermark is not None else -1,
                         log_end_offset=self.log.end_offset)

    def _transition_to_candidate(self, now: float, reason: str) -> None:
        """KafkaRaftClient.transitionToCandidate. The ``controller_candidate`` event says when
        and why an election began (fetch_timeout: the leader went quiet; election_timeout /
        election_backoff: a previous election did not finish; resigned): failover time is
        noticing plus electing, and a split vote shows as two candidacies in a row."""
        self.quorum.transition_to_candidate(now)
        s = self.quorum.state
        self.ev.emit("controller_candidate", epoch=s.epoch, candidate=self.node_id, reason=reason,
                     log_end_offset=self.log.end_offset)
        self._on_become_candidate(now)
        self._state_changed()

    def _transition_to_prospective(self, now: float, reason: str) -> None:
        """QuorumState.transitionToProspective: same epoch, nothing persisted; the
        ``controller_prospective`` event says when and why a pre-vote began."""
        self.quorum.transition_to_prospective(now)
        s = self.quorum.state
        self.ev.emit("controller_prospective", epoch=s.epoch, prospective=self.node_id, reason=reason,
                     log_end_offset=self.log.end_offset)
        if isinstance(s, Prospective) and s.is_vote_granted():  # a lone voter
            self._transition_to_candidate(now, "pre_vote_granted")
            return
        self._state_changed()

    def _prospective_lost(self, now: float, reason: str) -> None:
        """A lost or timed-out pre-vote: back to Follower of the leader it knew (a fresh fetch
        timeout), else Unattached in the same epoch (QuorumState class comment, Kafka 4.0)."""
        s = self.quorum.state
        assert isinstance(s, Prospective)
        self.ev.log(f"raft: pre-vote in epoch {s.epoch} not granted ({reason})")
        if s.leader_id != NO_LEADER and s.leader_id != self.node_id:
            self.quorum.transition_to_follower(s.epoch, s.leader_id, now)
        else:
            self.quorum.transition_to_unattached(s.epoch, now)
        self._state_changed()

    def _on_become_candidate(self, now: float) -> None:
        """KafkaRaftClient.onBecomeCandidate: a lone voter is elected at once."""
        s = self.quorum.state
        if isinstance(s, Candidate) and s.is_vote_granted():
            self._on_become_leader(now)

    def _on_become_leader(self, now: float) -> None:
        """KafkaRaftClient.onBecomeLeader: the epoch starts at the LEO with a LeaderChange control
        batch, because the high watermark can only pass a record of the leader's own epoch."""
        start = self.log.end_offset
        s = self.quorum.transition_to_leader(start, now)
        self.log.append_leader_change(s.epoch, self.node_id, sorted(self.voters), sorted(s.granting))
        s.update_local_state(self.log.end_offset)
        s.begin_quorum_next = now
        self.ev.emit("controller_elected", epoch=s.epoch, leader=self.node_id,
                     granting_voters=sorted(s.granting), voters=sorted(self.voters), epoch_start_offset=start)
        self.ev.log(f"raft: elected leader of epoch {s.epoch} by {sorted(s.granting)}")
        self._after_high_watermark()

    def _transition_to_follower(self, epoch: int, leader: int, now: float) -> None:
        self._was_leader_ends("higher_epoch")
        self.quorum.transition_to_follower(epoch, leader, now)
        self._fail_appends()  # onBecomeFollower: the append purgatory fails
        self._state_changed()

    def _transition_to_unattached(self, epoch: int, now: float) -> None:
        self._was_leader_ends("higher_epoch")
        self.quorum.transition_to_unattached(epoch, now)
        self._fail_appends()
        self._state_changed()

    def _resign(self, now: float, reason: str) -> None:
        """KafkaRaftClient.transitionToResigned, preferred successors by descending fetch offset."""
        s = self.quorum.state
        assert isinstance(s, Leader)
        self._was_leader_ends(reason)
        self.quorum.transition_to_resigned(s.non_leader_voters_by_descending_fetch_offset(), now)
        self._fail_appends()
        self._state_changed()

    def _has_consistent_leader(self, epoch: int, leader: int) -> bool:
        """KafkaRaftClient.hasConsistentLeader."""
        if leader >= 0 and leader == self.node_id:
            return isinstance(self.quorum.state, Leader)
        return (epoch != self.quorum.epoch or leader < 0 or not self.quorum.has_leader()
                or leader == self.quorum.leader_id)

    def _maybe_transition(self, leader: int, epoch: int, now: float) -> None:
        """KafkaRaftClient.maybeTransition: a larger epoch -> Follower (leader known) or
        Unattached; the same epoch with a newly known leader -> Follower."""
        if not self._has_consistent_leader(epoch, leader):
            # KafkaRaftClient.maybeTransition: IllegalStateException, fatal on the raft IO thread
            self._fault(f"Received request or response with leader {leader} and epoch {epoch} which is "
                        f"inconsistent with current leader {self.quorum.leader_id} and epoch {self.quorum.epoch}")
        if epoch > self.quorum.epoch:
            if leader >= 0 and leader != self.node_id:
                self._transition_to_follower(epoch, leader, now)
            else:
                self._transition_to_unattached(epoch, now)
        elif leader >= 0 and leader != self.node_id and not self.quorum.has_leader():
            self._transition_to_follower(epoch, leader, now)

    def _maybe_handle_common_response(self, error: ErrorCode, leader: int, epoch: int, now: float) -> bool | None:
        """KafkaRaftClient.maybeHandleCommonResponse: None = let the API handler continue."""
        if epoch < self.quorum.epoch or error == ErrorCode.unknown_leader_epoch:
            return True
        if epoch > self.quorum.epoch or error in (ErrorCode.fenced_leader_epoch, ErrorCode.not_leader_or_follower):
            self._maybe_transition(leader, epoch, now)
            return True
        if epoch == self.quorum.epoch and leader >= 0 and not self.quorum.has_leader():
            self._maybe_transition(leader, epoch, now)
            return None if error == ErrorCode.none else True
        if error == ErrorCode.broker_not_available:
            return False
        if error == ErrorCode.invalid_request:
            self.ev.log("raft: a voter answered INVALID_REQUEST")
            return False
        return None

    # ================================================================== commit

    def _after_high_watermark(self) -> None:
        """Hand committed records to the state machine (KafkaRaftClient.updateListenersProgress)
        and complete appends that are now committed (onUpdateLeaderHighWatermark)."""
        hw = self.quorum.high_watermark
        if hw is None:
            return
        if hw > self.applied:
            batch = list(self.log.committed(self.applied, hw))
            self.applied = hw
            if batch and self.on_commit is not None:
                self.on_commit(batch)
            for cb in list(self.listeners):  # e.g. the controller's claim once past the epoch start
                cb()
        self._kick()

    def _fail_appends(self) -> None:
        """Waiting appends re-check and fail with NotLeader (see ``wait_committed``)."""
        self._kick()

    def is_leader(self) -> bool:
        return isinstance(self.quorum.state, Leader)

    def append(self, records: list[dict[str, Any]]) -> int:
        """Leader append (KafkaRaftClient.prepareAppend/append): written and flushed now, before
        the leader counts its own end offset (flushLeaderLog); returns the last offset. Works
        without a running event loop (a lone voter commits at once)."""
        s = self.quorum.state
        if not isinstance(s, Leader) or self.shutting_down:
            raise NotLeader(self.quorum.leader_id, self.quorum.epoch)
        if self.dead is not None:
            # scheduleAppend only fills the accumulator; with the raft thread dead nothing is
            # flushed or committed, and the writer waits for ever (as QuorumController's does)
            self._unflushed += len(records)
            return self.log.end_offset + self._unflushed - 1
        _, last = self.log.append_as_leader(records, s.epoch)
        if s.update_local_state(self.log.end_offset):
            self._after_high_watermark()
        self._kick()
        return last

    async def wait_committed(self, offset: int, epoch: int | None = None) -> None:
        """Until ``offset`` is committed; NotLeader if the leadership (of ``epoch``) ends first —
        KafkaRaftClient fails the append purgatory on a leader change (onBecomeFollower)."""
        epoch = self.quorum.epoch if epoch is None else epoch
        while True:
            waiter = self.progress
            if not (isinstance(self.quorum.state, Leader) and self.quorum.epoch == epoch) or self.shutting_down:
                raise NotLeader(self.quorum.leader_id, self.quorum.epoch)
            hw = self.quorum.high_watermark
            if hw is not None and hw > offset:
                return
            await waiter.wait()

    # ================================================================== requests we build

    def _topic(self, partition: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"topic_name": TOPIC, "partitions": [{"partition_index": PARTITION, **partition}]}]

    def _build_vote(self, dest: int) -> Any:
        """KafkaRaftClient.buildVoteRequest: the epoch (a candidate's new one, a prospective's
        current one) and the last (epoch, offset) of its log; v2 with PreVote when pre-vote is on."""
        end, last_epoch = self.log.end_offset_and_epoch()
        part = {"replica_epoch": self.quorum.epoch, "replica_id": self.node_id,
                "last_offset_epoch": last_epoch, "last_offset": end}
        if not self.config.pre_vote:
            return build(load_request_schema(VOTE, 0), {"cluster_id": self.cluster_id, "topics": self._topic(part)})
        return build(load_request_schema(VOTE, VOTE_PRE_VOTE_VERSION), {
            "cluster_id": self.cluster_id, "voter_id": dest,
            "topics": self._topic({**part, "replica_directory_id": None, "voter_directory_id": None,
                                   "pre_vote": isinstance(self.quorum.state, Prospective)})})

    def _build_begin_quorum_epoch(self) -> Any:
        return build(load_request_schema(BEGIN_QUORUM_EPOCH, 0), {
            "cluster_id": self.cluster_id,
            "topics": self._topic({"leader_id": self.node_id, "leader_epoch": self.quorum.epoch})})

    def _build_end_quorum_epoch(self) -> Any:
        s = self.quorum.state
        preferred = s.preferred_successors if isinstance(s, Resigned) else []
        return build(load_request_schema(END_QUORUM_EPOCH, 0), {
            "cluster_id": self.cluster_id,
            "topics": self._topic({"leader_id": self.node_id, "leader_epoch": self.quorum.epoch,
                                   "preferred_successors": list(preferred)})})

    def _build_fetch(self) -> Any:
        """KafkaRaftClient.buildFetchRequest: fetch offset = LEO, last fetched epoch, our epoch."""
        return build(load_request_schema(FETCH, 12), {
            "cluster_id": self.cluster_id, "replica_id": self.node_id,
            "max_wait": self.config.fetch_max_wait_ms, "min_bytes": 0, "max_bytes": FETCH_MAX_BYTES,
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": PARTITION, "current_leader_epoch": self.quorum.epoch,
                "fetch_offset": self.log.end_offset, "last_fetched_epoch": self.log.last_fetched_epoch,
                "log_start_offset": 0, "partition_max_bytes": FETCH_MAX_BYTES}]}]})

    # ================================================================== responses we get

    @staticmethod
    def _single(resp: Any) -> Any | None:
        if not resp.topics or resp.topics[0].topic_name != TOPIC or not resp.topics[0].partitions:
            return None
        return resp.topics[0].partitions[0]

    def _handle_vote_response(self, src: int, resp: Any, now: float) -> bool:
        """KafkaRaftClient.handleVoteResponse."""
        if resp.error_code != ErrorCode.none:
            return False
        p = self._single(resp)
        if p is None:
            return False
        handled = self._maybe_handle_common_response(p.error_code, int(p.leader_id), int(p.leader_epoch), now)
        if handled is not None:
            return handled
        if p.error_code != ErrorCode.none:
            return False
        s = self.quorum.state
        if isinstance(s, Prospective):  # handleVoteResponse for a PreVote (Kafka 4.0)
            if p.vote_granted:
                s.granted.add(src)
                s.rejected.discard(src)
                if s.is_vote_granted():
                    self._transition_to_candidate(now, "pre_vote_granted")
            else:
                s.rejected.add(src)
                if s.is_vote_rejected():
                    self._prospective_lost(now, "pre_vote_rejected")
            return True
        if isinstance(s, Candidate):
            if p.vote_granted:
                s.granted.add(src)
                s.rejected.discard(src)
                if s.is_vote_granted():
                    self._on_become_leader(now)
                    self._state_changed()
            else:
                s.rejected.add(src)
                # "If our vote is rejected, we go immediately to the random backoff."
                if s.is_vote_rejected() and s.backoff_until is None:
                    s.backoff_until = now + self._binary_exponential_backoff_ms(s.retries) / 1000
        return True

    def _handle_begin_quorum_epoch_response(self, src: int, resp: Any, now: float) -> bool:
        if resp.error_code != ErrorCode.none:
            return False
        p = self._single(resp)
        if p is None:
            return False
        handled = self._maybe_handle_common_response(p.error_code, int(p.leader_id), int(p.leader_epoch), now)
        if handled is not None:
            return handled
        s = self.quorum.state
        if p.error_code == ErrorCode.none and isinstance(s, Leader):
            s.begin_quorum_acked.add(src)
        return p.error_code == ErrorCode.none

    def _handle_end_quorum_epoch_response(self, src: int, resp: Any, now: float) -> bool:
        if resp.error_code != ErrorCode.none:
            return False
        p = self._single(resp)
        if p is None:
            return False
        handled = self._maybe_handle_common_response(p.error_code, int(p.leader_id), int(p.leader_epoch), now)
        s = self.quorum.state
        if isinstance(s, Resigned):
            s.unacked.discard(src)
        return True if handled is None else handled

    def _handle_fetch_response(self, src: int, resp: Any, now: float) -> bool:
        """KafkaRaftClient.handleFetchResponse: truncate on a diverging epoch (never below the
        high watermark), else append and take min(leader HWM, own LEO); reset the fetch timer."""
        if resp.error_code != ErrorCode.none:
            return False
        if not resp.responses or resp.responses[0].topic != TOPIC or not resp.responses[0].partitions:
            return False
        p = resp.responses[0].partitions[0]
        leader, epoch = int(p.current_leader.leader_id), int(p.current_leader.leader_epoch)
        handled = self._maybe_handle_common_response(p.error_code, leader, epoch, now)
        if handled is not None:
            return handled
        s = self.quorum.state
        if not isinstance(s, Follower):
            return True
        if p.error_code != ErrorCode.none:
            return False
        div = p.diverging_epoch
        if int(div.epoch) >= 0:
            end, dep = int(div.end_offset), int(div.epoch)
            if s.high_watermark is not None and end < s.high_watermark:
                # KafkaRaftClient.handleFetchResponse throws KafkaException: never truncate committed data
                self._fault(f"The leader requested truncation to offset {end}, which is below the current "
                            f"high watermark {s.high_watermark}")
            self._truncation_context = {"epoch": self.quorum.epoch, "leader": s.leader_id,
                                        "diverging_epoch": dep, "diverging_end_offset": end}
            try:
                at = self.log.truncate_to_end_offset(end, dep)
            finally:
                self._truncation_context = None
            if at < self.applied:
                self.ev.log(f"raft: truncated to {at} below applied offset {self.applied}")
                self.applied = at
        else:
            if p.records:
                self.log.append_as_follower(bytes(p.records))
            hw = int(p.high_watermark)
            if hw >= 0:
                # KafkaRaftClient.updateFollowerHighWatermark: min(leader's, own end offset), and
                # FollowerState.updateHighWatermark refuses a lower one (a fault)
                try:
                    moved = s.update_high_watermark(min(hw, self.log.end_offset))
                except ValueError as e:
                    self._fault(str(e))
                if moved:
                    self._after_high_watermark()
        s.fetch_deadline = now + self.config.fetch_timeout_ms / 1000  # resetFetchTimeoutForSuccessfulFetch
        s.has_fetched_from_leader = True
        self._kick()
        return True

    _truncation_context: dict[str, Any] | None = None

    def storage_event(self, name: str, fields: dict[str, Any]) -> None:
        """Events from the metadata log's storage: a truncation is ``metadata_truncation``."""
        if name == "truncation":
            self.ev.emit("metadata_truncation", **fields, **(self._truncation_context or {}))
        else:
            self.ev.emit(name, **fields)

    # ================================================================== requests we answer

    def _valid_cluster(self, cid: str | None) -> bool:
        """KafkaRaftClient.hasValidClusterId: absent is accepted (old clients), else must match."""
        return cid is None or cid == "" or cid == self.cluster_id

    def _valid_partition(self, topics: Any, name_attr: str = "topic_name") -> Any | None:
        if len(topics) != 1 or getattr(topics[0], name_attr) != TOPIC or len(topics[0].partitions) != 1:
            return None
        p = topics[0].partitions[0]
        idx = getattr(p, "partition_index", getattr(p, "partition", -1))
        return p if int(idx) == PARTITION else None

    def _reply(self, api: int, version: int, error: ErrorCode, **partition: Any) -> Any:
        """A singleton response with our epoch and leader (RaftUtil.singleton*Response)."""
        return build(load_response_schema(api, version), {
            "error_code": ErrorCode.none,
            "topics": self._topic({"error_code": error, "leader_id": self.quorum.leader_id,
                                   "leader_epoch": self.quorum.epoch, **partition})})

    def _validate_voter_only(self, remote: int, epoch: int) -> ErrorCode | None:
        """KafkaRaftClient.validateVoterOnlyRequest."""
        if epoch < self.quorum.epoch:
            return ErrorCode.fenced_leader_epoch
        if remote < 0:
            return ErrorCode.invalid_request
        return None

    async def h_vote(self, header: Any, req: Any, peer: Peer) -> Any:
        """KafkaRaftClient.handleVoteRequest."""
        v = req.__version__
        cls = load_response_schema(VOTE, v)
        if not self._valid_cluster(req.cluster_id):
            return build(cls, {"error_code": ErrorCode.inconsistent_cluster_id})
        p = self._valid_partition(req.topics)
        if p is None:
            return build(cls, {"error_code": ErrorCode.invalid_request})
        cand, cand_epoch = int(p.replica_id), int(p.replica_epoch)
        last_epoch, last_offset = int(p.last_offset_epoch), int(p.last_offset)
        pre_vote = bool(getattr(p, "pre_vote", False))
        # a candidate bumped its epoch past its log's; a prospective did not (it may hold records
        # of its current epoch)
        illegal_epoch = last_epoch > cand_epoch if pre_vote else last_epoch >= cand_epoch
        if last_offset < 0 or last_epoch < 0 or illegal_epoch:
            return self._reply(VOTE, v, ErrorCode.invalid_request, vote_granted=False)
        err = self._validate_voter_only(cand, cand_epoch)
        if err is not None:
            return self._reply(VOTE, v, err, vote_granted=False)
        now = time.monotonic()
        if cand_epoch > self.quorum.epoch:
            self._transition_to_unattached(cand_epoch, now)
        end, our_epoch = self.log.end_offset_and_epoch()
        # OffsetAndEpoch.compareTo: epoch first, then offset.
        up_to_date = (last_epoch, last_offset) >= (our_epoch, end)
        granted = cand != self.node_id and self.quorum.can_grant_vote(cand, up_to_date, pre_vote)
        if granted and not pre_vote and self.quorum.is_unattached_not_voted():
            self.quorum.transition_to_unattached_voted(cand_epoch, cand, now)
            self._state_changed()
        self.ev.log(f"raft: {'pre-vote' if pre_vote else 'vote'} for {cand} in epoch {cand_epoch} "
                    f"({last_epoch}:{last_offset} vs ours {our_epoch}:{end}): {'granted' if granted else 'rejected'}")
        return self._reply(VOTE, v, ErrorCode.none, vote_granted=granted)

    async def h_begin_quorum_epoch(self, header: Any, req: Any, peer: Peer) -> Any:
        """KafkaRaftClient.handleBeginQuorumEpochRequest."""
        v = req.__version__
        cls = load_response_schema(BEGIN_QUORUM_EPOCH, v)
        if not self._valid_cluster(req.cluster_id):
            return build(cls, {"error_code": ErrorCode.inconsistent_cluster_id})
        p = self._valid_partition(req.topics)
        if p is None:
            return build(cls, {"error_code": ErrorCode.invalid_request})
        leader, epoch = int(p.leader_id), int(p.leader_epoch)
        err = self._validate_voter_only(leader, epoch)
        if err is not None:
            return self._reply(BEGIN_QUORUM_EPOCH, v, err)
        self._maybe_transition(leader, epoch, time.monotonic())
        return self._reply(BEGIN_QUORUM_EPOCH, v, ErrorCode.none)

    async def h_end_quorum_epoch(self, header: Any, req: Any, peer: Peer) -> Any:
        """KafkaRaftClient.handleEndQuorumEpochRequest: a follower of the resigning leader cuts its
        fetch timeout to its position among the preferred successors (endEpochElectionBackoff)."""
        v = req.__version__
        cls = load_response_schema(END_QUORUM_EPOCH, v)
        if not self._valid_cluster(req.cluster_id):
            return build(cls, {"error_code": ErrorCode.inconsistent_cluster_id})
        p = self._valid_partition(req.topics)
        if p is None:
            return build(cls, {"error_code": ErrorCode.invalid_request})
        leader, epoch = int(p.leader_id), int(p.leader_epoch)
        err = self._validate_voter_only(leader, epoch)
        if err is not None:
            return self._reply(END_QUORUM_EPOCH, v, err)
        now = time.monotonic()
        self._maybe_transition(leader, epoch, now)
        s = self.quorum.state
        if isinstance(s, Follower) and s.leader_id == leader:
            succ = [int(x) for x in p.preferred_successors]
            pos = succ.index(self.node_id) if self.node_id in succ else len(succ)
            s.fetch_deadline = now + self._strict_exponential_backoff_ms(pos, len(succ)) / 1000
            self.wake.set()
        return self._reply(END_QUORUM_EPOCH, v, ErrorCode.none)

    def _fetch_reply(self, version: int, error: ErrorCode, records: bytes | None = None,
                     diverging: tuple[int, int] | None = None, top_error: ErrorCode = ErrorCode.none) -> Any:
        """KafkaRaftClient.buildFetchResponse: current leader and epoch always, the HWM if known."""
        hw = self.quorum.high_watermark if isinstance(self.quorum.state, Leader) else None
        part: dict[str, Any] = {
            "partition_index": PARTITION, "error_code": error, "high_watermark": hw if hw is not None else -1,
            "last_stable_offset": -1, "log_start_offset": 0, "records": records,
            "current_leader": {"leader_id": self.quorum.leader_id, "leader_epoch": self.quorum.epoch}}
        if diverging is not None:
            part["diverging_epoch"] = {"end_offset": diverging[0], "epoch": diverging[1]}
        return build(load_response_schema(FETCH, version), {
            "error_code": top_error, "responses": [{"topic": TOPIC, "partitions": [part]}]})

    async def h_fetch(self, header: Any, req: Any, peer: Peer) -> Any:
        """KafkaRaftClient.handleFetchRequest + tryCompleteFetchRequest: leader-only, with the
        fetch parked until new data, a new high watermark or a state change (fetchPurgatory)."""
        v = req.__version__
        if not self._valid_cluster(req.cluster_id):
            return self._fetch_reply(v, ErrorCode.none, top_error=ErrorCode.inconsistent_cluster_id)
        p = self._valid_partition(req.topics, "topic")
        if p is None:
            return self._fetch_reply(v, ErrorCode.none, top_error=ErrorCode.invalid_request)
        max_wait = req.max_wait.total_seconds()
        fetch_offset, last_epoch = int(p.fetch_offset), int(p.last_fetched_epoch)
        if max_wait < 0 or fetch_offset < 0 or last_epoch < 0 or last_epoch > int(p.current_leader_epoch):
            return self._fetch_reply(v, ErrorCode.invalid_request)
        replica = int(req.replica_id)
        deadline = time.monotonic() + min(max_wait, self.config.fetch_max_wait_ms / 1000)
        while True:
            waiter = self.progress
            resp, wait = self._try_complete_fetch(v, replica, p, fetch_offset, last_epoch)
            if not wait or time.monotonic() >= deadline:
                return resp
            try:
                await asyncio.wait_for(waiter.wait(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                pass

    def _try_complete_fetch(self, v: int, replica: int, p: Any, fetch_offset: int, last_epoch: int) -> tuple[Any, bool]:
        """(response, park it?) — KafkaRaftClient.tryCompleteFetchRequest."""
        epoch = int(p.current_leader_epoch)
        if epoch < self.quorum.epoch:  # validateLeaderOnlyRequest
            return self._fetch_reply(v, ErrorCode.fenced_leader_epoch), False
        if epoch > self.quorum.epoch:
            return self._fetch_reply(v, ErrorCode.unknown_leader_epoch), False
        s = self.quorum.state
        if not isinstance(s, Leader):
            return self._fetch_reply(v, ErrorCode.not_leader_or_follower), False
        if self.shutting_down:
            return self._fetch_reply(v, ErrorCode.broker_not_available), False
        valid, (off, ep) = self.log.validate_offset_and_epoch(fetch_offset, last_epoch)
        if not valid:
            return self._fetch_reply(v, ErrorCode.none, diverging=(off, ep)), False
        if fetch_offset > self.log.end_offset:
            return self._fetch_reply(v, ErrorCode.none, diverging=self.log.end_offset_for_epoch(last_epoch)), False
        records = self.log.read(fetch_offset, FETCH_MAX_BYTES) if fetch_offset < self.log.end_offset else b""
        if replica in self.voters and replica != self.node_id:
            if s.update_replica_state(replica, fetch_offset, time.monotonic(), int(time.time() * 1000)):
                self._after_high_watermark()
        resp = self._fetch_reply(v, ErrorCode.none, records=records or None)
        return resp, not records

    async def h_describe_quorum(self, header: Any, req: Any, peer: Peer) -> Any:
        """KafkaRaftClient.handleDescribeQuorumRequest: anything but exactly
        ``__cluster_metadata``-0 is UNKNOWN_TOPIC_OR_PARTITION per requested partition
        (DescribeQuorumRequest.getPartitionLevelErrorResponse); a node that is not the leader
        answers NOT_LEADER_OR_FOLLOWER (DescribeQuorumResponse.singletonErrorResponse, no
        leader named); the leader answers its id, epoch, high watermark (-1 before its first)
        and every voter's and observer's replica state (RaftUtil.singletonDescribeQuorumResponse,
        LeaderState.voterStates / observerStates)."""
        v = req.__version__
        cls = load_response_schema(DESCRIBE_QUORUM, v)
        # error answers leave leader, epoch and high watermark at the message defaults (0), as
        # Kafka's do (KafkaRaftClientTest.testDescribeQuorumWithFollowers: NOT_LEADER_OR_FOLLOWER, 0, 0, 0)
        if self._valid_partition(req.topics) is None:
            return build(cls, {"topics": [{"topic_name": t.topic_name, "partitions": [
                {"partition_index": int(p.partition_index), "error_code": ErrorCode.unknown_topic_or_partition}
                for p in t.partitions]} for t in req.topics]})
        s = self.quorum.state
        if not isinstance(s, Leader):
            return build(cls, {"topics": self._topic({"error_code": ErrorCode.not_leader_or_follower})})
        voters, observers = s.describe(int(time.time() * 1000))
        hw = s.high_watermark
        return build(cls, {"topics": self._topic({
            "error_code": ErrorCode.none, "leader_id": self.node_id, "leader_epoch": s.epoch,
            "high_watermark": -1 if hw is None else hw, "current_voters": voters, "observers": observers})})

    # ================================================================== status (tests, observer)

    def status(self) -> dict[str, Any]:
        s = self.quorum.state
        hw = self.quorum.high_watermark
        return {"node": self.node_id, "state": s.name, "epoch": s.epoch, "leader": self.quorum.leader_id,
                "log_end_offset": self.log.end_offset, "last_epoch": self.log.last_fetched_epoch,
                "high_watermark": hw if hw is not None else -1, "applied": self.applied, "wall": time.time(),
                "pid": os.getpid()}


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, separators=(",", ":")))
    os.replace(tmp, path)


__all__ = ["DESCRIBE_QUORUM", "NO_LEADER", "NotLeader", "RAFT_APIS", "RaftClient", "RaftFatalError", "halt",
           "write_json_atomic"]
