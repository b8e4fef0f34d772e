"""One partition on a broker, as Kafka's Partition.scala: leader/follower state, HWM, ISR proposals,
acks=all completion, producer-state checks.

Why its own module: Partition.scala is where Kafka decides when a write is acknowledged and
when the ISR may change, so every such rule is found here under the Kafka method it mirrors; the
map of partitions and the requests that reach them are the replica manager's
(``replica_manager.py``), the AlterPartition channel the AlterPartitionManager's
(``alter_partition.py``), the follower's fetching the fetcher's (``fetcher.py``).

What it models (seed 003):
- §2.2.2 the leader keeps per-follower state (fetch offset = follower LEO, broker epoch from
  Fetch ``ReplicaState.ReplicaEpoch``, last caught-up time);
- §2.7 the HWM advances from the Maximal ISR and caught-up ISR-eligible replicas, and (Kafka
  3.7+, KAFKA-15583) never while the committed ISR is below the effective min ISR
  (``Partition.maybeIncrementLeaderHW``);
- §2.6 acks=all: NOT_ENOUGH_REPLICAS before append; a waiting write is answered once the HWM
  passed it: success only if effective min ISR <= |maximal ISR|, else
  NOT_ENOUGH_REPLICAS_AFTER_APPEND (``Partition.checkEnoughReplicasReachOffset``);
- the pending AlterPartition (``Partition.PendingPartitionChange``): rolled back only on
  INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED (``Partition.handleAlterPartitionError``), kept
  until a response or newer metadata otherwise;
- §2.9 ISR shrink on lag, expansion only under the consistency rules (fetch offset >= HWM and
  >= LESO, fetched in the current leader epoch, broker unfenced and — KIP-903 — the broker
  epoch seen in Fetch equals the one in the metadata image);
- §2.10 transitions: LESO set at every new leader epoch; follower state cleared when becoming
  leader, kept (fetch offset, broker epoch) when the leader only gets a new epoch.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Any

from kio.schema.errors import ErrorCode

from kraftsim.metadata import NO_LEADER, RECOVERED, PartitionState
from kraftsim.storage import records as rec
from kraftsim.storage.log import PartitionLog


@dataclass
class FollowerState:
    leo: int = -1
    broker_epoch: int = -1
    last_fetch: float = 0.0
    last_caught_up: float = 0.0
    leader_leo_at_last_fetch: int = -1
    #: the follower's local log start offset, as its Fetch says (``FetchPartition.LogStartOffset``)
    local_log_start_offset: int = -1


@dataclass(eq=False)
class PendingChange:
    """A proposed ISR change the controller has not answered yet (Kafka's ``PendingPartitionChange``
    with its ``AlterPartitionItem``): what is sent, and sent again after a lost connection."""
    new_isr: list[int]
    recovered: bool
    #: (broker id, broker epoch) as known when the change was proposed (``addBrokerEpochToIsr``)
    isr_with_epochs: list[tuple[int, int]]
    leader_epoch: int
    partition_epoch: int


#: ``Partition.handleAlterPartitionError``: errors after which the pending state is kept (the
#: controller may or may not have applied it) and nothing is re-sent until new metadata arrives.
KEEP_PENDING_NO_RETRY = frozenset({
    ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id, ErrorCode.fenced_leader_epoch,
    ErrorCode.invalid_update_version, ErrorCode.invalid_request, ErrorCode.new_leader_elected})
#: ... and the two after which Kafka knows the change was not applied and resets to the committed state
ROLL_BACK = frozenset({ErrorCode.ineligible_replica, ErrorCode.operation_not_attempted})

#: Kafka 3.5-3.6 (gate ``isr_expansion_unsynchronised``): how long the rest of an ISR expansion
#: waits after its first check, so that requests the broker already holds are handled in between.
#: Kafka's request handler threads serve them concurrently with the expansion (a follower's Fetch
#: updates Replica state without the partition lock there); kraftsim's one event loop would
#: otherwise finish the expansion before touching them. It matters only when another Fetch of the
#: same replica lands in the window with another broker epoch - a restarted replica's.
UNSYNCHRONISED_WINDOW_S = 0.05


class Partition:
    def __init__(self, broker: Any, topic: str, partition: int, log: PartitionLog):
        self.b = broker
        self.topic, self.partition, self.log = topic, partition, log
        self.role = "none"
        self.leader = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.elr: list[int] = []
        self.maximal_isr: list[int] = []
        self._noted: tuple | None = None   # the last leader_isr emitted (note_isr)
        self.leader_recovery_state = RECOVERED
        self.hwm = 0
        self.leso = 0
        self.followers: dict[int, FollowerState] = {}
        self.pending: PendingChange | None = None
        self.waiters: list[tuple[int, asyncio.Future]] = []
        #: KIP-1023: whether this follower incarnation already decided where to start fetching
        self.tier_start_checked = False
        #: Kafka 3.5-3.6: replicas whose ISR expansion passed its first check and is not finished
        self.expanding: set[int] = set()

    # ------------------------------------------------------------------ metadata

    @property
    def min_isr(self) -> int:
        return self.b.topic_min_isr(self.topic)

    @property
    def effective_min_isr(self) -> int:
        """Partition.scala, effectiveMinIsr: min(min.insync.replicas, replication factor) from
        Kafka 3.7 (gate ``effective_min_isr``); before it the raw config, so a min ISR above the
        replication factor refuses every acks=all write (3.6 ``checkEnoughReplicasReachOffset`` /
        ``appendRecordsToLeader``: ``val minIsr = leaderLog.config.minInSyncReplicas``)."""
        if not self.b.features.effective_min_isr:
            return self.min_isr
        return min(self.min_isr, max(len(self.replicas), 1))

    @property
    def alter_inflight(self) -> bool:
        """Kafka's ``partitionState.isInflight``: an ISR change awaits the controller's answer."""
        return self.pending is not None

    def is_under_min_isr(self) -> bool:
        """Partition.scala, isUnderMinIsr: the committed ISR is smaller than the effective min ISR."""
        return self.role == "leader" and len(self.isr) < self.effective_min_isr

    def note_isr(self) -> None:
        """Emit ``leader_isr`` when the ISR this leader acts on changes (committed or maximal).

        Kafka's leader answers acks=all by its own view (Partition.checkEnoughReplicasReachOffset
        reads ``partitionState.maximalIsr``), which can differ from the controller's: a leader
        cut from the controller never learns of a shrink. The checker's ``ack_below_min_isr``
        falls back to this view where no follower recorded its log end (``follower_append``;
        Kafka logs this view as Partition's "ISR updated to"). ``proposed_isr`` is the ISR of the
        AlterPartition still awaiting an answer or newer metadata (Kafka's PendingPartitionChange;
        null when committed): a shrink leaves the maximal ISR as it was, so only this field shows
        that an ISR change is under way - and, when it stays, that it is stuck (the checker's
        ``isr_change_stuck``).
        """
        if self.role != "leader":
            self._noted = None
            return
        proposed = tuple(self.pending.new_isr) if self.pending is not None else None
        now = (self.leader_epoch, self.partition_epoch, tuple(self.isr), tuple(self.maximal_isr), proposed)
        if self._noted == now:
            return
        self._noted = now
        self.b.ev.emit("leader_isr", topic=self.topic, partition=self.partition, broker=self.b.node_id,
                       leader_epoch=self.leader_epoch, partition_epoch=self.partition_epoch,
                       isr=list(self.isr), maximal_isr=list(self.maximal_isr),
                       proposed_isr=list(proposed) if proposed is not None else None)

    def _clear_pending(self) -> None:
        """Back to a committed state; an unsent request for the old proposal is dropped."""
        if self.pending is not None:
            self.b.alter_partition_manager.withdraw(self, self.pending)
        self.pending = None
        self.maximal_isr = list(self.isr)

    def apply(self, ps: PartitionState) -> None:
        me = self.b.node_id
        new_epoch = ps.leader_epoch != self.leader_epoch
        if ps.partition_epoch < self.partition_epoch and not new_epoch:
            return  # an AlterPartition response already gave us a newer state (seed 003 §2.9.2)
        newer = new_epoch or ps.partition_epoch > self.partition_epoch
        self.replicas = list(ps.replicas)
        self.isr, self.elr = list(ps.isr), list(ps.elr)
        self.partition_epoch = ps.partition_epoch
        self.leader_recovery_state = ps.leader_recovery_state
        if newer or self.pending is None:
            # Partition.makeLeader → updateAssignmentAndIsr: newer metadata is the committed state
            # and replaces a pending change (whose answer, if any, is then ignored).
            self._clear_pending()
        if ps.leader == me and me in ps.replicas:
            if self.role != "leader":
                self._become_leader(ps)
            elif new_epoch:
                self._new_leader_epoch(ps)
        elif ps.leader != NO_LEADER and me in ps.replicas:
            if self.role != "follower" or new_epoch or self.leader != ps.leader:
                self._become_follower(ps)
        else:
            if self.role != "none":
                self.stop("no leader" if ps.leader == NO_LEADER else "not a replica")
            self.leader, self.leader_epoch = ps.leader, ps.leader_epoch
        self.note_isr()
        self.maybe_advance_hwm()
        self.check_waiters()

    def _become_leader(self, ps: PartitionState) -> None:
        """Partition.makeLeader for a broker that was not the leader (seed 003 §2.10.1/§2.10.3):
        stop fetching, fresh follower state (``Replica.resetReplicaState(isNewLeader = true)``),
        the LESO, maybe advance the HWM. It has no waiting produce requests: becoming follower
        or stopping completed them (ReplicaManager.completeDelayedFetchOrProduceRequests)."""
        self.b.fetcher_manager.remove(self)
        self.role, self.leader = "leader", ps.leader
        self._clear_pending()
        now = time.monotonic()
        self.followers = {r: FollowerState(last_caught_up=now if r in self.isr else 0.0)
                          for r in self.replicas if r != self.b.node_id}
        self.hwm = min(self.hwm, self.log.log_end_offset)
        self.log.producer_state()  # built once per log; maintained by every append since
        self._start_leader_epoch(ps)

    def _new_leader_epoch(self, ps: PartitionState) -> None:
        """Partition.makeLeader for the leader it already is, at a new leader epoch (an ISR shrink
        before metadata.version 3.6, a reassignment): the epoch and its start offset change, each
        follower keeps its fetch offset and broker epoch (``Replica.resetReplicaState(isNewLeader =
        false)``: lastFetchLeaderLogEndOffset = LESO; last fetch and caught-up time = now if in the
        ISR, else 0), and waiting acks=all requests stay waiting: ReplicaManager.applyLocalLeadersDelta
        only calls makeLeader, which completes delayed requests only if the HWM moved
        (``tryCompleteDelayedRequests``); only a leader that becomes follower fails them
        (ReplicaManagerTest testDeltaToFollowerCompletesProduce)."""
        now = time.monotonic()
        leso = self.log.log_end_offset
        for rid, fs in self.followers.items():
            in_sync = rid in self.isr
            fs.leader_leo_at_last_fetch = leso
            fs.last_fetch = now if in_sync else 0.0
            fs.last_caught_up = now if in_sync else 0.0
        self._start_leader_epoch(ps)

    def _start_leader_epoch(self, ps: PartitionState) -> None:
        """Partition.makeLeader under ``isNewLeaderEpoch``: ``maybeAssignEpochStartOffset(epoch,
        LEO)``, the leader epoch start offset; the ``became_leader`` event (Kafka's "Leader ... starts
        at leader epoch E from offset O" line); KIP-704's RECOVERED proposal."""
        self.leader_epoch = ps.leader_epoch
        leo = self.log.log_end_offset
        self.log.epoch_cache.assign(self.leader_epoch, leo)
        self.leso = leo
        self._emit_became_leader()
        if self.leader_recovery_state != RECOVERED:
            # KIP-704: nothing to abort (no transactions); recovery done, tell the controller.
            self.b.alter_partition_manager.submit(self, [self.b.node_id], recovered=True)

    def _emit_became_leader(self) -> None:
        """What the new leader holds, as it takes over (seed 004, "Tracking Local Log State").

        The controller's ``leader_elected`` says who won; only the winner's own log says what it
        had: its log end offset (the LESO - every acknowledged offset at or past it is gone once
        the followers truncate to it), the local log's size and start timestamp (seed 004's
        LocalLogSizeBytes / LocalLogStartTimestamp; the start timestamp is the first batch's max
        timestamp, the time index's first entry, -1 for an empty log). A wiped broker elected by
        the KIP-903 race shows log_end_offset 0 here.
        """
        start = self.log.log_start_offset
        first_ts = -1
        if self.log.log_end_offset > start:
            head = next(iter(rec.iter_batches(self.log.read(start, 64 * 1024), 0, check_crc=False)), None)
            first_ts = head.max_timestamp if head is not None else -1
        self.b.ev.emit("became_leader", topic=self.topic, partition=self.partition, broker=self.b.node_id,
                       leader_epoch=self.leader_epoch, log_start_offset=start, log_end_offset=self.log.log_end_offset,
                       hwm=self.hwm, local_log_size_bytes=self.log.size_bytes,
                       local_log_start_timestamp=first_ts, leader_recovery_state=self.leader_recovery_state)

    def local_log_state(self, rid: int) -> tuple[int, int] | None:
        """Seed 004's (LocalLogStartTimestamp, LocalLogSizeBytes) of replica ``rid`` as this leader
        knows it; None when unknown (the controller then counts the replica as eligible).

        The seed adds both values to the follower's Fetch; kio's Fetch schema has no such fields,
        so the leader derives them from what Fetch already carries — the follower's log start
        offset and its fetch offset (= its LEO) — by reading those offsets in its own log or the
        remote tier: replicas hold the leader's batches byte for byte, so the batch at the
        follower's start has the timestamp the follower's time index would give, and the bytes
        between start and LEO are the follower's local log size.
        """
        if rid == self.b.node_id:
            return self.log.local_log_start_timestamp(), self.log.size_bytes
        fs = self.followers.get(rid)
        if fs is None or fs.local_log_start_offset < 0 or fs.leo < 0:
            return None
        return self.b.rlm.batch_timestamp(self, fs.local_log_start_offset, fs.leo), \
            self.b.rlm.bytes_between(self, fs.local_log_start_offset, fs.leo)

    def _become_follower(self, ps: PartitionState) -> None:
        self.fail_waiters(ErrorCode.not_leader_or_follower)
        self.role, self.leader, self.leader_epoch = "follower", ps.leader, ps.leader_epoch
        self.followers = {}
        self.tier_start_checked = False
        self._clear_pending()
        self.b.fetcher_manager.add(self)

    def stop(self, why: str) -> None:
        """Neither leader nor follower any more (ReplicaManager.stopPartitions for this partition,
        the log kept): no fetcher, waiting writes failed, no pending ISR change."""
        self.fail_waiters(ErrorCode.not_leader_or_follower)
        self.b.fetcher_manager.remove(self)
        self.role = "none"
        self.followers = {}
        self._clear_pending()

    # ------------------------------------------------------------------ leader: produce

    def check_sequence(self, h: Any) -> tuple[ErrorCode, tuple[int, int] | None]:
        """Idempotent producer checks: (error, (base, last) of an already-written duplicate).

        Mirrors ``UnifiedLog.analyzeAndValidateProducerState``: a duplicate among the last
        ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN`` (5) batches of the same epoch
        (``ProducerStateEntry.findDuplicateBatch``) is answered as appended with the original
        offsets; then ``ProducerAppendInfo.checkProducerEpoch`` (older epoch →
        INVALID_PRODUCER_EPOCH) and ``checkSequence`` (new epoch must start at 0, same epoch must
        continue at last sequence + 1, else OUT_OF_ORDER_SEQUENCE_NUMBER). Kafka brokers never
        answer DUPLICATE_SEQUENCE_NUMBER: an older sequence outside the window is out of order.
        """
        if h.producer_id < 0 or h.base_sequence < 0:
            return ErrorCode.none, None
        e = self.log.producer_state().producers.get(h.producer_id)
        count = h.last_offset - h.base_offset
        if e is None or h.producer_epoch > e.epoch:
            if h.base_sequence != 0 and e is not None:
                return ErrorCode.out_of_order_sequence_number, None
            return ErrorCode.none, None
        if h.producer_epoch < e.epoch:
            return ErrorCode.invalid_producer_epoch, None
        for first, lastseq, base, last in e.batches:
            if first == h.base_sequence and lastseq == h.base_sequence + count:
                return ErrorCode.none, (base, last)
        if e.batches and h.base_sequence != (e.batches[-1][1] + 1) % (2 ** 31):
            return ErrorCode.out_of_order_sequence_number, None
        return ErrorCode.none, None

    def append(self, data: bytes) -> tuple[int, int]:
        base, last = self.log.append_as_leader(data, self.leader_epoch)  # updates the producer state
        self.b.notify()
        self.maybe_advance_hwm()
        return base, last

    def wait_for_hwm(self, last_offset: int) -> asyncio.Future:
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self.waiters.append((last_offset, fut))
        self.check_waiters()
        return fut

    def check_waiters(self) -> None:
        """Complete waiting acks=all writes (Kafka's DelayedProduce.tryComplete).

        Partition.scala, checkEnoughReplicasReachOffset: once the HWM reached the batch, success
        only if effective min ISR <= |maximal ISR|, else NOT_ENOUGH_REPLICAS_AFTER_APPEND; below
        the HWM the write keeps waiting (it times out, or completes when the HWM moves) — an ISR
        that shrinks below min ISR does not answer it early.
        """
        if not self.waiters:
            return
        keep = []
        leader = self.role == "leader" and not self.b.lifecycle.self_fenced
        enough = len(self.maximal_isr) >= self.effective_min_isr
        hwm = self.hwm
        for last, fut in self.waiters:
            if fut.done():
                continue
            if not leader:
                fut.set_result(ErrorCode.not_leader_or_follower)
            elif hwm > last:
                fut.set_result(ErrorCode.none if enough else ErrorCode.not_enough_replicas_after_append)
            else:
                keep.append((last, fut))
        self.waiters = keep

    def fail_waiters(self, code: ErrorCode) -> None:
        for _, fut in self.waiters:
            if not fut.done():
                fut.set_result(code)
        self.waiters = []

    # ------------------------------------------------------------------ leader: HWM and ISR

    def maybe_advance_hwm(self) -> None:
        """Partition.scala, maybeIncrementLeaderHW.

        The HWM is the smallest LEO among the maximal ISR and every replica that is caught up
        and ISR-eligible (``shouldWaitForReplicaToJoinIsr``: otherwise a follower catching up
        behind a leader-only ISR would never reach the HWM and join). Since Kafka 3.7
        (KAFKA-15583, gate ``hwm_requires_min_isr``) it does not move at all while
        ``isUnderMinIsr`` — with or without ELR. A replica whose LEO is unknown holds it.
        """
        if self.role != "leader" or self.b.lifecycle.self_fenced:
            return
        if self.b.features.hwm_requires_min_isr and len(self.isr) < self.effective_min_isr:
            return
        leo = self.log.log_end_offset
        cand = leo
        maximal = self.maximal_isr
        now = -1.0
        for rid, fs in self.followers.items():
            if fs.leo >= cand:
                continue
            if rid in maximal:
                cand = fs.leo
                continue
            if now < 0:
                now = time.monotonic()
            if self._is_caught_up(fs, leo, now) and self._isr_eligible(rid, fs):
                cand = fs.leo
        if cand > self.hwm:
            self.hwm = cand
            self.b.notify()
            self.check_waiters()

    def on_follower_fetch(self, rid: int, fetch_offset: int, broker_epoch: int) -> ErrorCode:
        """Partition.updateFollowerFetchState → Replica.updateFetchStateOrThrow: from Kafka 3.7 (gate
        ``fetch_fences_stale_replica_epoch``) a Fetch whose ReplicaEpoch is older than the broker's
        live registration (KRaftMetadataCache.getAliveBrokerEpoch: registered and unfenced) is
        fenced - NOT_LEADER_OR_FOLLOWER, nothing updated - so a dead incarnation's late Fetch cannot
        rewrite the new one's state. -1 (no epoch: Fetch below v15) is never fenced. Then the
        caught-up time, ISR expansion and the HWM."""
        if broker_epoch != -1 and self.b.features.fetch_fences_stale_replica_epoch:
            reg = self.b.image.brokers.get(rid)
            if reg is not None and not reg.fenced and reg.broker_epoch > broker_epoch:
                return ErrorCode.not_leader_or_follower
        now = time.monotonic()
        fs = self.followers.get(rid)
        if fs is None:
            fs = self.followers[rid] = FollowerState()
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            fs.last_caught_up = now
        elif fs.leader_leo_at_last_fetch >= 0 and fetch_offset >= fs.leader_leo_at_last_fetch:
            fs.last_caught_up = max(fs.last_caught_up, fs.last_fetch)
        fs.leo, fs.broker_epoch, fs.last_fetch, fs.leader_leo_at_last_fetch = fetch_offset, broker_epoch, now, leo
        self.maybe_expand_isr(rid)
        self.maybe_advance_hwm()
        return ErrorCode.none

    def _is_caught_up(self, fs: FollowerState, leader_leo: int, now: float) -> bool:
        """Replica.scala, isCaughtUp: at the leader's LEO, or caught up within replica.lag.time.max.ms."""
        return fs.leo == leader_leo or now - fs.last_caught_up <= self.b.lag_s

    def _isr_eligible(self, rid: int, fs: FollowerState) -> bool:
        """Partition.scala, isReplicaIsrEligible (KRaft): unfenced, not in controlled shutdown
        (KIP-841), and the broker epoch from its Fetch equals the metadata image's
        (``isBrokerEpochIsrEligible``: a Fetch without ReplicaEpoch (-1), i.e. before KIP-903's
        Fetch v15, passes); a replica that never fetched is not eligible."""
        reg = self.b.image.brokers.get(rid)
        if reg is None or reg.fenced or reg.shutting_down or fs.last_fetch <= 0:
            return False
        return fs.broker_epoch == -1 or fs.broker_epoch == reg.broker_epoch

    def _in_sync(self, fs: FollowerState) -> bool:
        """Partition.scala, isFollowerInSync: at or past the HWM and the leader epoch start offset."""
        return fs.leo >= self.hwm and fs.leo >= self.leso

    def maybe_expand_isr(self, rid: int) -> None:
        """Partition.scala, maybeExpandIsr / canAddReplicaToIsr / isFollowerInSync, then
        prepareIsrExpand → addBrokerEpochToIsr (the broker epochs the request carries: ``submit``).

        From Kafka 3.7 the follower's fetch state changes only under ``leaderIsrUpdateLock``
        (Partition.updateFollowerFetchState, KAFKA-15221 d46781d4db3), so the checks and the epochs
        sent read one state - here, all at once. Kafka 3.5.0-3.6.2 (gate
        ``isr_expansion_unsynchronised``) took no lock there: another request handler thread can
        replace the replica's state while an expansion is under way. kraftsim runs the
        interleaving the fix's commit message describes: (2) a first check on the state this
        Fetch left - caught up and eligible (broker epoch as the leader's metadata image has it);
        then, :data:`UNSYNCHRONISED_WINDOW_S` later, the second check under the write lock: (4a)
        caught up? - the state the first check saw; (4b) a Fetch handled meanwhile may have
        replaced the state - a restarted replica's new incarnation, at offset 0 with its new
        broker epoch; (4c) eligible? - broker epoch against the image now, on the state now;
        (5) ``addBrokerEpochToIsr`` - the epochs now. A stale Fetch of the old incarnation can so
        put the new, empty incarnation into the ISR with its own (valid) epoch, which the
        controller's KIP-903 check accepts. (In Partition.scala ``needsExpandIsr`` evaluates
        ``canAddReplicaToIsr`` before ``isFollowerInSync``; the commit's account orders 4a before
        4c, and kraftsim follows the account - either way the epoch sent is read after the
        catch-up decision, which is what the fix's lock closes.)"""
        if self.alter_inflight or rid in self.isr or self.leader_recovery_state != RECOVERED:
            return
        fs = self.followers.get(rid)
        if fs is None or not self._in_sync(fs):
            return
        if not self._isr_eligible(rid, fs):
            return  # KIP-841 / KIP-903
        if self.b.features.isr_expansion_unsynchronised:
            self._expand_unsynchronised(rid, replace(fs))
            return
        self.b.alter_partition_manager.submit(self, self.isr + [rid])

    def _expand_unsynchronised(self, rid: int, seen: FollowerState) -> None:
        """Kafka 3.5-3.6: the write-locked part of maybeExpandIsr and prepareIsrExpand, after the
        requests handled meanwhile (see :meth:`maybe_expand_isr`)."""
        if rid in self.expanding:
            return
        self.expanding.add(rid)
        epoch = self.leader_epoch

        def second_check() -> None:
            self.expanding.discard(rid)
            if self.role != "leader" or self.leader_epoch != epoch or self.b.lifecycle.self_fenced:
                return
            if self.alter_inflight or rid in self.isr or self.leader_recovery_state != RECOVERED:
                return
            if not self._in_sync(seen):                      # 4a: the state the first check saw
                return
            now = self.followers.get(rid)
            if now is None or not self._isr_eligible(rid, now):   # 4c: the state and image now
                return
            if now.broker_epoch != seen.broker_epoch:
                self.b.ev.log(f"{self.topic}-{self.partition}: ISR expansion of {rid} checked caught up at "
                              f"offset {seen.leo} (broker epoch {seen.broker_epoch}) sends broker epoch "
                              f"{now.broker_epoch} (its state now: offset {now.leo})")
            self.b.alter_partition_manager.submit(self, self.isr + [rid])   # 5: addBrokerEpochToIsr, now
        asyncio.get_running_loop().call_later(UNSYNCHRONISED_WINDOW_S, second_check)

    def maybe_shrink_isr(self) -> None:
        """Partition.scala, maybeShrinkIsr / getOutOfSyncReplicas: ISR members that are not
        caught up (``Replica.isCaughtUp``: neither at the leader's LEO nor caught up within
        replica.lag.time.max.ms)."""
        if self.role != "leader" or self.alter_inflight or self.b.lifecycle.self_fenced:
            return
        now = time.monotonic()
        leo = self.log.log_end_offset
        out = [r for r in self.isr if r != self.b.node_id
               and not self._is_caught_up(self.followers.get(r) or FollowerState(), leo, now)]
        if out:
            self.b.alter_partition_manager.submit(self, [r for r in self.isr if r not in out])

    def on_alter_result(self, item: PendingChange, code: ErrorCode, resp: Any | None) -> None:
        """The controller's answer to ``item``; ignored when the partition moved on meanwhile
        (Partition.submitAlterPartition: ``partitionState != proposedIsrState``)."""
        if self.pending is item:
            self.on_alter_response(code, resp)

    def on_alter_response(self, code: ErrorCode, resp: Any | None) -> None:
        """The answer to the pending change (Partition.scala, handleAlterPartitionUpdate /
        handleAlterPartitionError)."""
        item = self.pending
        if item is None:
            return
        if code is ErrorCode.none and resp is not None:
            if int(resp.leader_epoch) != self.leader_epoch or int(resp.partition_epoch) < self.partition_epoch:
                return  # stale answer: stay pending until metadata overrides it
            self.isr = [int(x) for x in resp.isr]
            self.partition_epoch = int(resp.partition_epoch)
            self.leader_recovery_state = int(resp.leader_recovery_state)
            self._clear_pending()
            self.note_isr()
        elif code in ROLL_BACK:
            # The controller says the change was not applied: back to the last committed state.
            self._clear_pending()
            self.note_isr()
        elif code in KEEP_PENDING_NO_RETRY:
            return  # maximal ISR kept: Kafka cannot know whether the change was applied
        else:
            self.b.alter_partition_manager.resubmit(self, item)  # "unexpected error, retrying"
            return
        self.maybe_advance_hwm()
        self.check_waiters()
