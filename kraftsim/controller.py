"""The KRaft controller: the state machine over the replicated metadata log.

What it models (docs/seeds.md#seed-003-1-2, §2.8, §2.9; KIP-903 = docs/seeds.md#seed-000; KIP-704 = docs/seeds.md#seed-001; KIP-966),
each rule after Apache Kafka's ``metadata/.../controller`` package:
- every decision is a record written through the controllers' raft quorum (kraftsim/raft/,
  KIP-595) and applied to the in-memory image at once; the request is answered once the
  records are committed (QuorumController). Only the active controller (the raft leader, once it
  replayed the log) serves brokers; the others answer NOT_CONTROLLER and replay committed
  records. A new active controller — after a failover, or a lone controller's restart — is the
  "new controller" of docs/seeds.md#seed-000 step 5; it gives every broker a fresh session;
- broker epoch = offset of the broker's registration record (cluster-wide monotonic);
- registration (ClusterControlManager.registerBroker): DUPLICATE_BROKER_REGISTRATION only while
  the old incarnation's session is valid; a new incarnation is registered fenced, after its
  partitions are cleaned up as an unclean (ELR) or fenced-like shutdown from Kafka 4.0 (3.8-3.9:
  only with ELR; before: not at all);
- fencing on missed heartbeats (``broker.session.timeout.ms``), unfencing once the broker's
  metadata has caught up to its own registration (BrokerHeartbeatManager);
- every partition change (fence, controlled shutdown, unclean restart, unfence, AlterPartition)
  goes through :class:`kraftsim.partition_change.PartitionChangeBuilder`, a port of Kafka's
  PartitionChangeBuilder: ELR, election order, LastKnownELR, recovery state, epochs;
- AlterPartition validation (ReplicationControlManager.validateAlterPartitionData): epochs,
  leader, ISR shape, KIP-704 recovery rules, and every proposed ISR member registered, unfenced,
  not shutting down and, when the request carries broker epochs (v3, KIP-903), at that epoch.
"""
from __future__ import annotations

import asyncio
import functools
import json
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

from kio.schema.errors import ErrorCode

from kraftsim.config import Config
from kraftsim.raft.client import NotLeader
from kraftsim.raft.config import QuorumConfig
from kraftsim.raft.quorum_controller import MetadataQuorum
from kraftsim.events import EventLog
from kraftsim.metadata import (NO_LEADER, RECOVERED, RECOVERING, MetadataImage,
                               PartitionState)
from kraftsim.partition_change import UNASSIGNED_DIR, Election, PartitionChangeBuilder
from kraftsim.storage.checkpoints import kafka_uuid_text
from kraftsim.wire import PRIVATE_LOCAL_LOG_REPORT, Peer, Server, build, error_response, load_response_schema

METADATA_TOPIC = "__cluster_metadata"

CONTROLLER_APIS = {
    18: (0, 3),   # ApiVersions
    1: (12, 12),  # Fetch of __cluster_metadata (metadata channel)
    19: (2, 7),   # CreateTopics (forwarded by brokers)
    56: (2, 3),   # AlterPartition (v3 from Kafka 3.5 software: Controller.run)
    62: (0, 4),   # BrokerRegistration
    63: (0, 1),   # BrokerHeartbeat
    73: (0, 0),   # AssignReplicasToDirs (KIP-858; answered UNSUPPORTED_VERSION below 3.7-IV2)
}


def one_write_event(handler: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """A request handler whose records are one ControllerResult: one raft batch (``write_event``)."""
    @functools.wraps(handler)
    async def wrapper(self: "Controller", *args: Any) -> Any:
        with self.write_event():
            return await handler(self, *args)
    return wrapper


class Controller:
    def __init__(self, cfg: Config, events: EventLog):
        self.cfg = cfg
        self.ev = events
        self.node_id = int(cfg["node.id"])
        self.session_s = int(cfg["broker.session.timeout.ms"]) / 1000
        _, host, port = cfg["listeners"]
        # the metadata log is replicated by the controllers' raft quorum (kraftsim/raft/); one
        # controller without ``controller.quorum.voters`` is a quorum of itself, as in Kafka
        voters = cfg["controller.quorum.voters"] or {self.node_id: (host, port)}
        qc = QuorumConfig(voters=dict(voters), election_timeout_ms=int(cfg["controller.quorum.election.timeout.ms"]),
                          fetch_timeout_ms=int(cfg["controller.quorum.fetch.timeout.ms"]),
                          election_backoff_max_ms=int(cfg["controller.quorum.election.backoff.max.ms"]),
                          request_timeout_ms=int(cfg["controller.quorum.request.timeout.ms"]),
                          retry_backoff_ms=int(cfg["controller.quorum.retry.backoff.ms"]),
                          fatal_fault=cfg.features.raft_fatal_fault, pre_vote=cfg.features.pre_vote,
                          check_quorum=cfg.features.check_quorum)
        self.quorum = MetadataQuorum(self.node_id, str(cfg["cluster.id"]), host, qc, Path(cfg["metadata.log.dir"]),
                                     events, self, segment_bytes=int(cfg["log.segment.bytes"]))
        self.records: list[dict[str, Any]] = []  # by offset; a LeaderChange control record shows as leader_change
        self.image = MetadataImage()
        self.last_hb: dict[int, float] = {}
        #: QuorumController's MAYBE_FENCE_REPLICAS deferred event is scheduled: only a processed
        #: heartbeat or registration schedules it (rescheduleMaybeFenceStaleBrokers)
        self.fence_timer = False
        self.last_write = -1
        #: the records of the open write event (one raft batch), None outside one
        self._batch: list[dict[str, Any]] | None = None
        self._batch_first = 0
        self.server: Server | None = None
        self.stopping = False
        #: docs/seeds.md#seed-004: (topic, partition) -> broker -> (LocalLogStartTimestamp, LocalLogSizeBytes)
        #: as the partition's leader last reported them. Kept in memory (the seed stores them in
        #: partition metadata): after a controller restart every replica is "unknown" = eligible.
        self.local_log: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}

    # ------------------------------------------------------------------ log

    def load(self) -> None:
        """Resume the raft state; committed records come back through ``handle_commit`` (a lone
        voter is elected, replays and becomes active right here)."""
        self.quorum.raft.initialize()

    def _apply(self, offset: int, rec: dict[str, Any]) -> None:
        while len(self.records) < offset:
            self.records.append({"type": "leader_change"})
        self.records.append(rec)
        self.image.apply(offset, rec)

    def handle_commit(self, batch: list[tuple[int, dict[str, Any]]]) -> None:
        """QuorumMetaLogListener.handleCommit: a standby replays committed records; the active
        controller already applied its own when it wrote them."""
        for off, rec in batch:
            if off >= self.image.next_offset:
                self._apply(off, rec)

    def become_active(self, epoch: int) -> None:
        """QuorumController.claim: every registered broker gets a fresh session
        (ClusterControlManager.activate recreates the BrokerHeartbeatManager)."""
        now = time.monotonic()
        self.last_hb = {b: now for b in self.image.brokers}
        # the new heartbeat manager's sessions run from now, but nothing checks them until a broker
        # is heard from: QuorumController schedules its fence timer (rescheduleMaybeFenceStaleBrokers)
        # only after processing a heartbeat or a registration (3.4.0 through 4.x), so the brokers
        # a new controller never hears from stay unfenced until one of them contacts it
        self.fence_timer = False
        self.ev.log(f"active controller in epoch {epoch} at offset {self.quorum.next_offset}")

    def renounce(self, epoch: int) -> None:
        """QuorumController.renounce: back to the last committed state; pending writes fail."""
        self.last_write = -1   # the deferred event queue is failed with it (failAll)
        self.image = MetadataImage()
        self.records = []
        for off, rec in self.quorum.committed_records():
            self._apply(off, rec)
        self.last_hb.clear()
        self.local_log.clear()
        self.ev.log(f"no longer the active controller (epoch {epoch})")

    @contextmanager
    def write_event(self) -> Iterator[None]:
        """One ControllerWriteEvent: every record its decision produces goes to the raft log as
        ONE batch (QuorumController's ``appendRecords`` → ``raftClient.scheduleAtomicAppend`` /
        ``scheduleAppend`` with the whole ``ControllerResult``; ``atomicOf`` for registration and
        topic creation). Several batches for one decision could commit in part across a
        failover - a TopicRecord without its PartitionRecords, a clean-up without the
        registration it belongs to. Records are applied to the image as they are produced (a later
        record of the same decision sees the earlier ones, as Kafka's replay does); the batch is
        written when the event ends. Nested events join the outer one."""
        if self._batch is not None:
            yield
            return
        self._batch, self._batch_first = [], self.quorum.next_offset
        try:
            try:
                yield
            except BaseException:
                if self._batch:  # applied but never written: back to what the log says
                    self._reload_image()
                raise
            recs, self._batch = self._batch, None
            if recs:
                first, last = self.quorum.append(recs)
                if first != self._batch_first:  # nothing else may write during an event
                    raise RuntimeError(f"metadata batch written at {first}, expected {self._batch_first}")
                self.last_write = last
        finally:
            self._batch = None

    def _reload_image(self) -> None:
        """Rebuild the image from every record in the metadata log (a write event that failed had
        applied records it never wrote)."""
        self.image = MetadataImage()
        self.records = []
        for off, rec in self.quorum.written_records():
            self._apply(off, rec)

    @property
    def next_offset(self) -> int:
        """The offset the next record of the current write event will get."""
        if self._batch is not None:
            return self._batch_first + len(self._batch)
        return self.quorum.next_offset

    def append(self, recs: list[dict[str, Any]]) -> int:
        """Add records to the current write event's batch (one event of its own when none is open)
        and apply them at once; the request is answered after they commit (see ``_active_only``).
        Returns the offset of the first. NotLeader when this controller is not the active one."""
        if not self.quorum.is_active():
            raise NotLeader(self.quorum.leader_id, self.quorum.epoch)
        with self.write_event():
            assert self._batch is not None
            first = self.next_offset
            self._batch.extend(recs)
            for i, r in enumerate(recs):
                self._apply(first + i, r)
            return first

    def _active_only(self, api: int, handler: Any) -> Any:
        """Only the active controller serves the controller APIs (NOT_CONTROLLER otherwise), and
        a write is answered once committed (QuorumController's deferred event queue). A request
        that wrote nothing (a heartbeat of an unfenced broker) is answered once the highest write
        still pending is committed, as QuorumController.ControllerWriteEvent.run does with an
        empty result ("If there are operations in the purgatory, we want to wait for the latest
        one to complete before returning our result to the user": it read uncommitted state) -
        so a leader that can commit nothing (cut from the other voters, its NoOpRecords pending)
        answers no broker at all."""
        def refuse(req: Any) -> Any:
            if api == 19:  # CreateTopics has no top-level error: NOT_CONTROLLER for each topic
                return error_response(api, req.__version__, ErrorCode.not_controller,
                                      {"topics": [{"name": t.name} for t in req.topics]})
            return error_response(api, req.__version__, ErrorCode.not_controller)

        async def serve(header: Any, req: Any, peer: Peer) -> Any:
            if not self.quorum.is_active():
                return refuse(req)
            try:
                resp = await handler(header, req, peer)
                if self.last_write >= 0:   # its own records, or the highest pending (already committed: no wait)
                    await self.quorum.wait_committed(self.last_write)
            except NotLeader:
                return refuse(req)
            return resp
        return serve

    async def _raw_active_only(self, body: bytes, peer: Peer) -> bytes:
        """The private local-log report (docs/seeds.md#seed-004) goes to the active controller only."""
        if not self.quorum.is_active():
            return b'{"error":"NOT_CONTROLLER"}'
        return await self.h_local_log_report(body, peer)

    def _topic_cfg(self, topic: str, key: str) -> Any:
        t = self.image.topics.get(topic)
        if t and key in t.configs:
            v = t.configs[key]
            if key == "min.insync.replicas":
                return int(v)
            if key == "unclean.leader.election.enable":
                return str(v).lower() == "true"
            return v
        return self.cfg[key]

    def effective_min_isr(self, topic: str) -> int:
        """ReplicationControlManager.getTopicEffectiveMinIsr: min.insync.replicas capped at the
        replication factor (of partition 0), the min ISR every partition change is built with
        (Kafka 3.7+, gate ``effective_min_isr``; before 3.7 no partition change reads a min ISR -
        there is no ELR - so the raw value is kept)."""
        min_isr = int(self._topic_cfg(topic, "min.insync.replicas"))
        if not self.cfg.features.effective_min_isr:
            return min_isr
        t = self.image.topics.get(topic)
        if t and t.partitions:
            p0 = t.partitions.get(0) or next(iter(t.partitions.values()))
            return min(min_isr, len(p0.replicas))
        return min_isr

    @property
    def elr_enabled(self) -> bool:
        """ReplicationControlManager.isElrEnabled (metadata.version and the ELR feature)."""
        return self.cfg.features.elr

    def _eligible(self, b: int) -> bool:
        """ClusterControlManager.isActive: registered, not fenced, not in controlled shutdown."""
        reg = self.image.brokers.get(b)
        return reg is not None and not reg.fenced and not reg.shutting_down

    def default_dir(self, broker: int) -> str:
        """ClusterControlManager.defaultDir (KIP-858): the broker's only log directory, else
        UNASSIGNED (not registered, or several dirs). Below 3.7-IV2 no replica has a directory."""
        reg = self.image.brokers.get(broker)
        if reg is None or len(reg.log_dirs) != 1:
            return UNASSIGNED_DIR
        return reg.log_dirs[0]

    def _builder(self, ps: PartitionState, remove: int = NO_LEADER, add: int = NO_LEADER,
                 unclean_shutdown: int = NO_LEADER) -> PartitionChangeBuilder:
        """The builder as ReplicationControlManager.generateLeaderAndIsrUpdates sets it up: the
        LeaderAcceptor (``r != brokerToRemove && r != brokerWithUncleanShutdown && (r == brokerToAdd
        || isActive(r))``), the effective min ISR, ELR, and the topic's unclean election config."""
        def acceptable(r: int) -> bool:
            return r != remove and r != unclean_shutdown and (r == add or self._eligible(r))
        b = PartitionChangeBuilder(ps, acceptable, self.cfg.features, self.effective_min_isr(ps.topic))
        b.set_default_dir_provider(self.default_dir)
        if self._topic_cfg(ps.topic, "unclean.leader.election.enable"):
            b.set_election(Election.UNCLEAN)
        ms, by = self._seed004_thresholds(ps.topic)
        if ms > 0 or by > 0:
            b.set_local_log_eligibility(lambda r: self._local_log_eligible(ps.topic, ps.partition, r))
        return b

    # ------------------------------------------------------------------ docs/seeds.md#seed-004 (a proposal)

    def _seed004_thresholds(self, topic: str) -> tuple[int, int]:
        """leader.election.eligible.local.log.ms / .bytes: topic config over the controller's;
        -1 (the default) = off, Kafka's behaviour."""
        return (int(self._topic_cfg(topic, "leader.election.eligible.local.log.ms")),
                int(self._topic_cfg(topic, "leader.election.eligible.local.log.bytes")))

    def _local_log_eligible(self, topic: str, partition: int, broker: int, now_ms: int | None = None) -> bool:
        """docs/seeds.md#seed-004, "Eligibility Criteria": eligible when the local log spans at least the ms
        threshold (now - LocalLogStartTimestamp) OR holds at least the bytes threshold; a replica
        whose state is unknown counts as eligible. An empty local log (timestamp -1) spans nothing."""
        st = self.local_log.get((topic, partition), {}).get(broker)
        if st is None:
            return True
        ts, size = st
        ms, by = self._seed004_thresholds(topic)
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return (ms > 0 and ts >= 0 and now_ms - ts >= ms) or (by > 0 and size >= by)

    async def h_local_log_report(self, body: bytes, peer: Peer) -> bytes:
        """docs/seeds.md#seed-004's local-log state of the ISR members, from the partition's leader (kraftsim's
        stand-in for the seed's new AlterPartition fields, kraftsim/wire.py PRIVATE_LOCAL_LOG_REPORT).
        Accepted like AlterPartition: the sender's broker epoch current, and per partition the
        sender the leader at that leader epoch; a reported broker must be in the ISR."""
        try:
            d = json.loads(body)
            bid, epoch = int(d["broker_id"]), int(d["broker_epoch"])
        except (ValueError, KeyError, TypeError):
            return b'{"error":"INVALID_REQUEST"}'
        reg = self.image.brokers.get(bid)
        if reg is None or reg.broker_epoch != epoch:
            return b'{"error":"STALE_BROKER_EPOCH"}'
        for p in d.get("partitions", []):
            ps = self.image.partition(p.get("topic"), int(p.get("partition", -1)))
            if ps is None or ps.leader != bid or ps.leader_epoch != int(p.get("leader_epoch", -1)):
                continue
            known = self.local_log.setdefault((ps.topic, ps.partition), {})
            for m in p.get("replicas", []):
                if int(m["broker"]) in ps.isr:
                    known[int(m["broker"])] = (int(m["local_log_start_timestamp"]), int(m["local_log_size_bytes"]))
        return b'{"error":null}'

    def _local_log_view(self, ps: PartitionState) -> dict[str, Any]:
        """For ``leader_elected``: each replica's reported local log and eligibility (docs/seeds.md#seed-004)."""
        now = int(time.time() * 1000)
        known = self.local_log.get((ps.topic, ps.partition), {})
        return {str(r): {"local_log_start_timestamp": known[r][0] if r in known else None,
                         "local_log_size_bytes": known[r][1] if r in known else None,
                         "eligible": self._local_log_eligible(ps.topic, ps.partition, r, now)}
                for r in ps.replicas}

    def _change_record(self, old: PartitionState, b: PartitionChangeBuilder, reason: str,
                       extra: dict | None = None) -> dict[str, Any] | None:
        """Build the change; None for a no-op. Emits ``leader_elected`` (reason: how the winner was
        chosen — ``elr``, ``last_known_leader``, ``unclean`` — or ``reason``) or ``isr_changed``."""
        new = b.build()
        if new is None:
            return None
        why = reason
        if new.leader != old.leader and new.leader != NO_LEADER and b.elected_by not in (None, "isr"):
            why = b.elected_by
        if new.leader != old.leader and new.leader != NO_LEADER and b.local_log_eligible is not None:
            extra = {**(extra or {}), "local_log_preference": self._local_log_view(old)}
        return self._commit_partition(old, new, why, extra)

    def _commit_partition(self, old: PartitionState | None, new: PartitionState, reason: str,
                          extra: dict | None = None) -> dict[str, Any]:
        """The record of a partition whose epochs are already set; emits the matching event."""
        leader_changed = old is None or old.leader != new.leader
        rec = new.to_record()
        common = {"topic": new.topic, "partition": new.partition, "leader": new.leader,
                  "leader_epoch": new.leader_epoch, "partition_epoch": new.partition_epoch,
                  "isr": list(new.isr), "elr": list(new.elr)}
        if leader_changed and new.leader != NO_LEADER:
            self.ev.emit("leader_elected", **common, reason=reason,
                         leader_recovery_state=new.leader_recovery_state,
                         candidates=[r for r in new.replicas if self._eligible(r)], **(extra or {}))
        else:
            self.ev.emit("isr_changed", **common, reason=reason,
                         leader_recovery_state=new.leader_recovery_state, **(extra or {}))
        return rec

    def generate_leader_and_isr_updates(self, reason: str, partitions: list[PartitionState],
                                        remove: int = NO_LEADER, add: int = NO_LEADER,
                                        unclean_shutdown: int = NO_LEADER) -> list[dict]:
        """ReplicationControlManager.generateLeaderAndIsrUpdates: for each partition, a change whose
        target ISR is the ISR without ``remove`` and ``unclean_shutdown``, with that acceptor."""
        recs = []
        for ps in partitions:
            b = self._builder(ps, remove=remove, add=add, unclean_shutdown=unclean_shutdown)
            if unclean_shutdown != NO_LEADER:
                b.set_unclean_shutdown_replicas([unclean_shutdown])
            b.set_target_isr([r for r in ps.isr if r != remove and r != unclean_shutdown])
            rec = self._change_record(ps, b, reason)
            if rec is not None:
                recs.append(rec)
        return recs

    def _partitions_with_broker_in_isr(self, broker: int) -> list[PartitionState]:
        return [ps for ps in self.image.all_partitions() if broker in ps.isr]

    def _partitions_with_broker_in_elr(self, broker: int) -> list[PartitionState]:
        return [ps for ps in self.image.all_partitions() if broker in ps.elr]

    def _partitions_with_no_leader(self) -> list[PartitionState]:
        return [ps for ps in self.image.all_partitions() if ps.leader == NO_LEADER]

    def _offline_election_records(self, add: int = NO_LEADER, reason: str = "isr") -> list[dict]:
        """Elections for leaderless partitions: ReplicationControlManager.handleBrokerUnfenced
        (``add`` = the broker being unfenced) and, from the periodic sweep, the unclean elections
        of QuorumController's maybeTriggerUncleanLeaderElectionForLeaderlessPartitions."""
        return self.generate_leader_and_isr_updates(reason, self._partitions_with_no_leader(), add=add)

    def fence(self, broker: int, reason: str) -> None:
        """ReplicationControlManager.handleBrokerFenced: the broker leaves every ISR (not the ELR)
        and is not an acceptable leader; its leaderships move."""
        reg = self.image.brokers.get(broker)
        if reg is None or reg.fenced:
            return
        self.ev.emit("broker_fenced", broker=broker, broker_epoch=reg.broker_epoch, reason=reason)
        recs = [{"type": "fence_broker", "broker": broker, "broker_epoch": reg.broker_epoch, "reason": reason}]
        self.append(recs)
        why = "leader_fenced" if reason != "controlled_shutdown" else reason
        prs = self.generate_leader_and_isr_updates(why, self._partitions_with_broker_in_isr(broker), remove=broker)
        if prs:
            self.append(prs)

    # ------------------------------------------------------------------ handlers

    @one_write_event
    async def h_registration(self, header: Any, req: Any, peer: Peer) -> Any:
        """ClusterControlManager.registerBroker (with the clean-shutdown detection of KAFKA-15586 and
        the partition clean-up of KAFKA-18106, ReplicationControlManager.handleBrokerShutdown)."""
        cls = load_response_schema(62, req.__version__)
        if req.cluster_id != self.cfg["cluster.id"]:
            return build(cls, {"error_code": ErrorCode.inconsistent_cluster_id})
        bid = int(req.broker_id)
        inc = str(req.incarnation_id)
        existing = self.image.brokers.get(bid)
        now = time.monotonic()
        if existing is not None and existing.incarnation_id == inc:
            # "Amending registration": same epoch, same fencing state
            return build(cls, {"broker_epoch": existing.broker_epoch})
        if existing is not None and self._has_valid_session(bid):
            return build(cls, {"error_code": ErrorCode.duplicate_broker_registration})
        prev = int(getattr(req, "previous_broker_epoch", -1))
        clean = existing is not None and prev != -1 and prev == existing.broker_epoch
        listener = req.listeners[0] if req.listeners else None
        host = listener.host if listener else peer.host
        port = int(listener.port) if listener else 0
        if existing is not None:
            # a new incarnation: addRecordsForShutdown, before the new RegisterBrokerRecord
            for prs in self._records_for_shutdown(bid, clean):
                if prs:
                    self.append(prs)
        epoch = self.next_offset  # the RegisterBrokerRecord's offset (the last of the event's batch)
        # a RegisterBrokerRecord is fenced until the broker's heartbeat shows it caught up
        # RegisterBrokerRecord v3 carries the log dirs' ids from metadata.version 3.7-IV2 (KIP-858)
        log_dirs = ([kafka_uuid_text(u) for u in (getattr(req, "log_dirs", None) or ())]
                    if self.cfg.features.directory_assignment else [])
        self.append([{"type": "register_broker", "broker": bid, "broker_epoch": epoch, "incarnation_id": inc,
                      "host": host, "port": port, **({"log_dirs": log_dirs} if log_dirs else {})}])
        self.last_hb[bid] = now
        self.fence_timer = True    # registerBroker -> rescheduleMaybeFenceStaleBrokers
        self.ev.emit("broker_registered", broker=bid, broker_epoch=epoch,
                     previous_broker_epoch=prev, clean_shutdown=clean)
        return build(cls, {"broker_epoch": epoch})

    def _records_for_shutdown(self, bid: int, clean: bool) -> list[list[dict]]:
        """The partition changes a new incarnation of ``bid`` brings, by Kafka's software version:

        - 4.0+ (KAFKA-18106, ``ReplicationControlManager.handleBrokerShutdown(brokerId,
          isCleanShutdown, records)``): with ELR on and no proof of a clean shutdown, the broker
          leaves every ISR and ELR and cannot be elected (``unclean_shutdown``); otherwise it is
          handled as if fenced (``reregistration``);
        - 3.8-3.9 (KAFKA-15586, ``handleBrokerUncleanShutdown``): only with ELR supported, and then
          for every new incarnation, clean or not (3.8/3.9 ignore PreviousBrokerEpoch there);
        - before: none - a broker whose old session expired before the controller fenced it keeps
          its ISR memberships and leaderships (``registerBroker`` writes only the fenced
          RegisterBrokerRecord) and is electable again once unfenced.
        """
        f = self.cfg.features
        unclean = [("unclean_shutdown", self._partitions_with_broker_in_isr),
                   ("unclean_shutdown", self._partitions_with_broker_in_elr)]
        if f.broker_shutdown_on_reregistration:
            if self.elr_enabled and not clean:
                return [self.generate_leader_and_isr_updates(why, which(bid), unclean_shutdown=bid)
                        for why, which in unclean]
            return [self.generate_leader_and_isr_updates(
                "reregistration", self._partitions_with_broker_in_isr(bid), remove=bid)]
        if f.unclean_shutdown_handler and self.elr_enabled:
            return [self.generate_leader_and_isr_updates(why, which(bid), unclean_shutdown=bid)
                    for why, which in unclean]
        return []

    def _has_valid_session(self, bid: int) -> bool:
        """BrokerHeartbeatManager.hasValidSession: not fenced and heard from within the session."""
        reg = self.image.brokers.get(bid)
        if reg is None or reg.fenced:
            return False
        return time.monotonic() - self.last_hb.get(bid, 0) <= self.session_s

    @one_write_event
    async def h_heartbeat(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(63, req.__version__)
        bid = int(req.broker_id)
        reg = self.image.brokers.get(bid)
        if reg is None or reg.broker_epoch != int(req.broker_epoch):
            return build(cls, {"error_code": ErrorCode.stale_broker_epoch, "is_fenced": True,
                               "should_shut_down": False})
        self.last_hb[bid] = time.monotonic()
        self.fence_timer = True    # processBrokerHeartbeat -> rescheduleMaybeFenceStaleBrokers
        caught_up = int(req.current_metadata_offset) >= reg.broker_epoch
        should_shut_down = False
        if req.want_shut_down:
            if reg.fenced:
                should_shut_down = True
            else:
                if not reg.shutting_down:
                    # ReplicationControlManager.handleBrokerInControlledShutdown
                    self.append([{"type": "shutdown_broker", "broker": bid, "broker_epoch": reg.broker_epoch}])
                    prs = self.generate_leader_and_isr_updates(
                        "controlled_shutdown", self._partitions_with_broker_in_isr(bid), remove=bid)
                    if prs:
                        self.append(prs)
                leads = [ps for ps in self.image.all_partitions() if ps.leader == bid]
                if not leads:
                    self.fence(bid, "controlled_shutdown")
                    should_shut_down = True
        elif reg.fenced and not req.want_fence and caught_up:
            # ReplicationControlManager.handleBrokerUnfenced
            self.append([{"type": "unfence_broker", "broker": bid, "broker_epoch": reg.broker_epoch}])
            self.ev.emit("broker_unfenced", broker=bid, broker_epoch=reg.broker_epoch)
            recs = self._offline_election_records(add=bid)
            if recs:
                self.append(recs)
        reg = self.image.brokers[bid]
        return build(cls, {"is_caught_up": caught_up, "is_fenced": reg.fenced, "should_shut_down": should_shut_down})

    @one_write_event
    async def h_alter_partition(self, header: Any, req: Any, peer: Peer) -> Any:
        """ReplicationControlManager.alterPartition."""
        version = req.__version__
        cls = load_response_schema(56, version)
        bid = int(req.broker_id)
        reg = self.image.brokers.get(bid)
        if reg is None or reg.broker_epoch != int(req.broker_epoch):
            # ClusterControlManager.checkBrokerEpoch throws: the whole request fails
            self.ev.emit("alter_partition", topic=None, partition=None, leader=bid, new_isr=[],
                         broker_epochs={}, partition_epoch=None, version=version, leader_recovery_state=None,
                         accepted=False, error="STALE_BROKER_EPOCH",
                         error_code=int(ErrorCode.stale_broker_epoch.value))
            return build(cls, {"error_code": ErrorCode.stale_broker_epoch, "topics": []})
        topics_out = []
        for td in req.topics:
            tid = str(td.topic_id)
            tname = self.image.topic_ids.get(tid)
            parts_out = []
            for pd in td.partitions:
                if version >= 3:
                    new_isr = [int(s.broker_id) for s in pd.new_isr_with_epochs]
                    epochs = {int(s.broker_id): int(s.broker_epoch) for s in pd.new_isr_with_epochs}
                else:  # AlterPartitionRequest.newIsrToSimpleNewIsrWithBrokerEpochs: epoch -1
                    new_isr = [int(b) for b in pd.new_isr]
                    epochs = {b: -1 for b in new_isr}
                ps = self.image.partition(tname, int(pd.partition_index)) if tname else None
                err = self._validate_alter(bid, tname, ps, pd, new_isr, epochs, version)
                ev = {"topic": tname, "partition": int(pd.partition_index), "leader": bid, "new_isr": new_isr,
                      "broker_epochs": {str(k): v for k, v in epochs.items() if v != -1},
                      "partition_epoch": int(pd.partition_epoch), "version": version,
                      "leader_recovery_state": int(pd.leader_recovery_state)}
                if err is not ErrorCode.none:
                    self.ev.emit("alter_partition", **ev, accepted=False, error=err.name.upper(), error_code=int(err.value))
                    parts_out.append({"partition_index": pd.partition_index, "error_code": err})
                    continue
                assert ps is not None and tname is not None
                b = self._builder(ps)
                b.set_target_isr(new_isr).set_target_leader_recovery_state(int(pd.leader_recovery_state))
                rec = self._change_record(ps, b, "alter_partition")
                if rec is not None:
                    self.append([rec])
                ps2 = self.image.partition(tname, int(pd.partition_index))
                if ps2.leader != bid and ps2.leader != ps.leader:
                    # a leader change from the leader's own request (Kafka: only when it completes a
                    # reassignment): NEW_LEADER_ELECTED, the leader must fetch metadata
                    err = ErrorCode.new_leader_elected
                    self.ev.emit("alter_partition", **ev, accepted=True, error=err.name.upper(),
                                 error_code=int(err.value))
                    parts_out.append({"partition_index": pd.partition_index, "error_code": err})
                    continue
                self.ev.emit("alter_partition", **ev, accepted=True, error=None, error_code=0)
                parts_out.append({"partition_index": pd.partition_index, "leader_id": ps2.leader,
                                  "leader_epoch": ps2.leader_epoch, "isr": ps2.isr,
                                  "leader_recovery_state": ps2.leader_recovery_state,
                                  "partition_epoch": ps2.partition_epoch})
            topics_out.append({"topic_id": td.topic_id, "partitions": parts_out})
        return build(cls, {"error_code": ErrorCode.none, "topics": topics_out})

    def _validate_alter(self, bid: int, tname: str | None, ps: PartitionState | None, pd: Any,
                        new_isr: list[int], epochs: dict[int, int], version: int) -> ErrorCode:
        """ReplicationControlManager.validateAlterPartitionData, in Kafka's order."""
        if tname is None:
            return ErrorCode.unknown_topic_id
        if ps is None:
            return ErrorCode.unknown_topic_or_partition
        # newer epochs than ours: this controller is probably not the active one any more
        if int(pd.leader_epoch) > ps.leader_epoch or int(pd.partition_epoch) > ps.partition_epoch:
            return ErrorCode.not_controller
        if int(pd.leader_epoch) < ps.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if bid != ps.leader:
            return ErrorCode.invalid_request
        if int(pd.partition_epoch) < ps.partition_epoch:
            return ErrorCode.invalid_update_version
        # Replicas.validateIsr: members are replicas, no duplicates; the ISR includes the leader
        if any(r not in ps.replicas for r in new_isr) or len(set(new_isr)) != len(new_isr):
            return ErrorCode.invalid_request
        if ps.leader not in new_isr:
            return ErrorCode.invalid_request
        lrs = int(pd.leader_recovery_state)
        if lrs == RECOVERING and len(new_isr) > 1:
            return ErrorCode.invalid_request  # KIP-704 (docs/seeds.md#seed-001)
        if ps.leader_recovery_state == RECOVERED and lrs == RECOVERING:
            return ErrorCode.invalid_request
        # ineligibleReplicasForIsr: EVERY member of the proposed ISR, not only the added ones
        for r in new_isr:
            reg = self.image.brokers.get(r)
            e = epochs.get(r, -1)
            if (reg is None or reg.shutting_down or reg.fenced
                    or (e != -1 and e != reg.broker_epoch)):  # KIP-903 (docs/seeds.md#seed-000): -1 skips the check
                return ErrorCode.ineligible_replica if version > 1 else ErrorCode.operation_not_attempted
        return ErrorCode.none

    @one_write_event
    async def h_create_topics(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(19, req.__version__)
        out = []
        for t in req.topics:
            res = {"name": t.name, "num_partitions": -1, "replication_factor": -1}
            err, msg = self._create_topic(t, bool(getattr(req, "validate_only", False)))
            res["error_code"], res["error_message"] = err, msg
            if err is ErrorCode.none and t.name in self.image.topics:
                ts = self.image.topics[t.name]
                res.update(topic_id=uuid.UUID(ts.topic_id), num_partitions=len(ts.partitions),
                           replication_factor=len(next(iter(ts.partitions.values())).replicas))
            out.append(res)
        return build(cls, {"topics": out})

    def _create_topic(self, t: Any, validate_only: bool) -> tuple[ErrorCode, str | None]:
        name = t.name
        if name in self.image.topics:
            return ErrorCode.topic_already_exists, f"Topic '{name}' already exists."
        if not name or len(name) > 249 or any(c not in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-" for c in name):
            return ErrorCode.invalid_topic_exception, f"Topic name {name!r} is illegal"
        live = sorted(b for b, r in self.image.brokers.items() if not r.fenced)
        configs = {c.name: c.value for c in t.configs}
        for k, v in configs.items():
            if k == "min.insync.replicas" and not (v or "").isdigit():
                return ErrorCode.invalid_config, "min.insync.replicas must be an integer"
        if t.assignments:
            assignment = {int(a.partition_index): [int(b) for b in a.broker_ids] for a in t.assignments}
            for p, reps in sorted(assignment.items()):
                if any(b not in self.image.brokers for b in reps):
                    return ErrorCode.invalid_replica_assignment, "unknown broker in assignment"
                # ReplicationControlManager.createTopic: the ISR is the active replicas, never empty
                if not any(self._eligible(b) for b in reps):
                    return ErrorCode.invalid_replica_assignment, (
                        f"All brokers specified in the manual partition assignment for partition {p} "
                        "are fenced or in controlled shutdown.")
        else:
            n = int(t.num_partitions) if int(t.num_partitions) > 0 else int(self.cfg["num.partitions"])
            rf = int(t.replication_factor) if int(t.replication_factor) > 0 else int(self.cfg["default.replication.factor"])
            if rf > len(live):
                return ErrorCode.invalid_replication_factor, f"Replication factor: {rf} larger than available brokers: {len(live)}."
            assignment = {p: [live[(p + i) % len(live)] for i in range(rf)] for p in range(n)}
        if validate_only:
            return ErrorCode.none, None
        tid = str(uuid.uuid4())
        recs: list[dict] = [{"type": "topic", "name": name, "topic_id": tid, "configs": configs}]
        self.append(recs)
        precs = []
        for p, reps in sorted(assignment.items()):
            # buildPartitionRegistration: ISR = the active replicas, leader = the first of them
            isr = [r for r in reps if self._eligible(r)]
            ps = PartitionState(topic=name, partition=p, replicas=reps, isr=isr, leader=isr[0],
                                leader_epoch=0, partition_epoch=0,
                                directories=([self.default_dir(r) for r in reps]
                                             if self.cfg.features.directory_assignment else None))
            precs.append(self._commit_partition(None, ps, "initial"))
        self.append(precs)
        return ErrorCode.none, None

    @one_write_event
    async def h_assign_replicas_to_dirs(self, header: Any, req: Any, peer: Peer) -> Any:
        """ReplicationControlManager.handleAssignReplicasToDirs (KIP-858): a broker says which log
        directory holds each of its replicas; each replica whose directory differs from the
        partition's is a PartitionChangeRecord with the new Directories (PartitionChangeBuilder
        .setDirectory): the partition epoch goes up by one, nothing else changes. A broker whose
        disk was replaced (newly formatted: a new directory.id) sends one for every partition it
        hosts as soon as it has created their logs."""
        cls = load_response_schema(73, req.__version__)
        if not self.cfg.features.directory_assignment:
            return build(cls, {"error_code": ErrorCode.unsupported_version, "directories": []})
        bid = int(req.broker_id)
        reg = self.image.brokers.get(bid)
        if reg is None or reg.broker_epoch != int(req.broker_epoch):
            return build(cls, {"error_code": ErrorCode.stale_broker_epoch, "directories": []})
        recs: list[dict] = []
        dirs_out = []
        for dd in req.directories:
            dir_id = kafka_uuid_text(dd.id_)
            topics_out = []
            for td in dd.topics:
                tname = self.image.topic_ids.get(str(td.topic_id))
                parts_out = []
                for pd in td.partitions:
                    ps = self.image.partition(tname, int(pd.partition_index)) if tname else None
                    if tname is None:
                        err = ErrorCode.unknown_topic_id
                    elif ps is None:
                        err = ErrorCode.unknown_topic_or_partition
                    elif bid not in ps.replicas:
                        err = ErrorCode.not_leader_or_follower
                    else:
                        err = ErrorCode.none
                        rec = self._change_record(ps, self._builder(ps).set_directory(bid, dir_id),
                                                  "directory_assignment")
                        if rec is not None:
                            recs.append(rec)
                    parts_out.append({"partition_index": pd.partition_index, "error_code": err})
                topics_out.append({"topic_id": td.topic_id, "partitions": parts_out})
            dirs_out.append({"id_": dd.id_, "topics": topics_out})
        if recs:
            self.append(recs)
        return build(cls, {"error_code": ErrorCode.none, "directories": dirs_out})

    # ------------------------------------------------------------------ run

    def maybe_fence_stale_brokers(self) -> None:
        """QuorumController's maybeFenceStaleBroker events (ReplicationControlManager
        .maybeFenceOneStaleBroker): each broker without a heartbeat for the session timeout is fenced
        in a write event of its own - its fence and the partition changes it causes, one batch; the
        events run only once a heartbeat or registration scheduled them (``fence_timer``)."""
        if not self.fence_timer:
            return
        now = time.monotonic()
        for bid, reg in list(self.image.brokers.items()):
            if not reg.fenced and now - self.last_hb.get(bid, now) > self.session_s:
                with self.write_event():
                    self.fence(bid, "session_timeout")

    async def session_loop(self) -> None:
        while not self.stopping:
            await asyncio.sleep(0.1)
            if not self.quorum.is_active():
                continue
            try:
                self.maybe_fence_stale_brokers()
                recs = self._offline_election_records()
                if recs:
                    self.append(recs)
            except NotLeader:
                continue
            except Exception as e:  # noqa: BLE001 - fencing must keep running; say why it hiccuped
                self.ev.log(f"session check failed: {type(e).__name__}: {e}")

    async def noop_loop(self) -> None:
        """QuorumController.maybeScheduleNextWriteNoOpRecord: the active controller appends a
        NoOpRecord every ``metadata.max.idle.interval.ms`` (its own write event, rescheduled by
        itself), from Kafka 3.3 at metadata.version 3.3-IV1+ (gate ``noop_records``). It keeps the
        metadata log moving; on a leader that cannot commit, it keeps writes pending forever."""
        interval = int(self.cfg["metadata.max.idle.interval.ms"]) / 1000
        if interval <= 0 or not self.cfg.features.noop_records:
            return
        while not self.stopping:
            await asyncio.sleep(interval)
            if not self.quorum.is_active():
                continue
            try:
                self.append([{"type": "noop"}])
            except NotLeader:
                continue

    async def run(self, stop: asyncio.Event) -> None:
        self.load()
        # the run records what was in force (MetadataVersion gates and any explicit override)
        self.ev.emit("features", **self.cfg.features.describe())
        _, host, port = self.cfg["listeners"]
        handlers = {19: self.h_create_topics, 56: self.h_alter_partition, 62: self.h_registration,
                    63: self.h_heartbeat, 73: self.h_assign_replicas_to_dirs}
        # AlterPartition v3 (NewIsrWithEpochs) exists from Kafka 3.5 (AlterPartitionRequest.json); a
        # controller advertises every version its software has (SimpleApiVersionManager)
        apis = {**CONTROLLER_APIS, 56: (2, 3 if self.cfg.features.alter_partition_v3 else 2)}
        self.server = Server({**apis, **self.quorum.api_versions()},
                             {**{k: self._active_only(k, h) for k, h in handlers.items()}, **self.quorum.handlers()},
                             on_error=self.ev.log)
        self.server.raw_handlers[PRIVATE_LOCAL_LOG_REPORT] = self._raw_active_only
        await self.server.start(host, port)
        task = asyncio.ensure_future(self.session_loop())
        noop = asyncio.ensure_future(self.noop_loop())
        try:
            await self.quorum.run(stop)  # until stop; a leader then resigns (EndQuorumEpoch)
        finally:
            self.stopping = True
            task.cancel()
            noop.cancel()
            self.server.close()
            self.quorum.close()
