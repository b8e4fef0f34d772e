"""The KRaft controller: one process owning the persisted metadata log.

What it models (seed 003 §1.2, §2.8, §2.9; seed 002; KIP-903 = seed 000; KIP-704 = seed 001;
KIP-966 notes in seed 003):
- every decision is a record appended (fsync'ed) to the metadata log, then applied to the
  in-memory image; a restarted controller replays the log and is the "new controller" of
  seed 000 step 5;
- broker epoch = offset of the broker's registration record (cluster-wide monotonic);
- fencing on missed heartbeats (``broker.session.timeout.ms``), unfencing once the broker's
  metadata has caught up to its own registration;
- leader election from the ISR; with ``eligible.leader.replicas.version=1`` from the ELR next,
  then the last known leader; with ``unclean.leader.election.enable`` any live replica,
  marked RECOVERING (KIP-704);
- AlterPartition validation (seed 003 §2.9.2): leader broker epoch, leader epoch, partition
  epoch, new members unfenced (KIP-841) and, with KIP-903, new members' broker epochs.
"""
from __future__ import annotations

import asyncio
import copy
import json
import time
import uuid
from pathlib import Path
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from kraftsim.config import Config
from kraftsim.events import EventLog
from kraftsim.metadata import (NO_LEADER, RECOVERED, RECOVERING, MetadataImage, MetadataLogFile,
                               PartitionState)
from kraftsim.storage.records import encode_batch
from kraftsim.wire import Peer, Server, build

METADATA_TOPIC = "__cluster_metadata"

CONTROLLER_APIS = {
    18: (0, 3),   # ApiVersions
    1: (12, 12),  # Fetch of __cluster_metadata (metadata channel)
    19: (2, 7),   # CreateTopics (forwarded by brokers)
    56: (2, 3),   # AlterPartition
    62: (0, 4),   # BrokerRegistration
    63: (0, 1),   # BrokerHeartbeat
}


class Controller:
    def __init__(self, cfg: Config, events: EventLog):
        self.cfg = cfg
        self.ev = events
        self.node_id = int(cfg["node.id"])
        self.session_s = int(cfg["broker.session.timeout.ms"]) / 1000
        mdir = Path(cfg["metadata.log.dir"]) / f"{METADATA_TOPIC}-0"
        self.log_file = MetadataLogFile(mdir / "metadata.jsonl", fsync=True)
        self.records: list[dict[str, Any]] = []
        self.image = MetadataImage()
        self.last_hb: dict[int, float] = {}
        self.changed = asyncio.Event()
        self.server: Server | None = None
        self.stopping = False

    # ------------------------------------------------------------------ log

    def load(self) -> None:
        for off, rec in self.log_file.replay():
            self.records.append(rec)
            self.image.apply(off, rec)
        now = time.monotonic()
        for b in self.image.brokers:
            self.last_hb[b] = now  # grace period after a controller restart

    def append(self, recs: list[dict[str, Any]]) -> int:
        """Commit records (fsync) and apply them; returns the offset of the first."""
        first = len(self.records)
        items = [(first + i, r) for i, r in enumerate(recs)]
        self.log_file.append(items)
        for off, r in items:
            self.records.append(r)
            self.image.apply(off, r)
        self.changed.set()
        self.changed = asyncio.Event()
        return first

    # ------------------------------------------------------------------ helpers

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

    @property
    def elr_enabled(self) -> bool:
        return self.cfg.features.elr

    def _eligible(self, b: int) -> bool:
        reg = self.image.brokers.get(b)
        return reg is not None and not reg.fenced and not reg.shutting_down

    def _normalize_elr(self, ps: PartitionState) -> None:
        """KIP-966: ELR members are not in the ISR, and the ELR is empty while ISR >= min ISR."""
        if not self.elr_enabled:
            ps.elr, ps.last_known_elr = [], []
            return
        ps.elr = [r for r in ps.elr if r not in ps.isr]
        if len(ps.isr) >= self._topic_cfg(ps.topic, "min.insync.replicas"):
            ps.elr = []
        if ps.isr or ps.leader != NO_LEADER:
            ps.last_known_elr = []

    def _elect(self, ps: PartitionState, exclude: set[int] = frozenset()) -> tuple[int, str, int]:
        """(leader, reason, leader_recovery_state) for a partition that needs a leader."""
        for r in ps.replicas:
            if r in ps.isr and r not in exclude and self._eligible(r):
                return r, "isr", RECOVERED
        if self.elr_enabled:
            for r in ps.replicas:
                if r in ps.elr and r not in exclude and self._eligible(r):
                    return r, "elr", RECOVERED
            if not ps.isr and not ps.elr:
                for r in ps.last_known_elr:
                    if r not in exclude and self._eligible(r):
                        return r, "last_known_leader", RECOVERED
        if self._topic_cfg(ps.topic, "unclean.leader.election.enable"):
            for r in ps.replicas:
                if r not in exclude and self._eligible(r):
                    return r, "unclean", RECOVERING
        return NO_LEADER, "no_candidate", ps.leader_recovery_state

    def _commit_partition(self, old: PartitionState | None, new: PartitionState, reason: str,
                          extra: dict | None = None) -> dict[str, Any]:
        """Bump epochs as Kafka does and return the record; emits the matching event."""
        leader_changed = old is None or old.leader != new.leader
        if old is not None:
            new.partition_epoch = old.partition_epoch + 1
            if leader_changed:
                new.leader_epoch = old.leader_epoch + 1
        if old is not None and old.leader != NO_LEADER and old.leader != new.leader:
            new.last_leader = old.leader
        if new.leader != NO_LEADER:
            new.last_leader = new.leader
        self._normalize_elr(new)
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

    def _remove_broker_records(self, broker: int, reason: str, keep_leadership_if_alone: bool = False) -> list[dict]:
        """Partition changes when ``broker`` is fenced or shuts down (seed 003 §2.8, §2.9.1)."""
        recs = []
        for ps in list(self.image.all_partitions()):
            if broker not in ps.isr and ps.leader != broker and broker not in ps.elr:
                continue
            new = copy.deepcopy(ps)
            if broker in ps.isr:
                new.isr = [r for r in ps.isr if r != broker]
                min_isr = self._topic_cfg(ps.topic, "min.insync.replicas")
                if self.elr_enabled:
                    if len(new.isr) < min_isr and broker not in new.elr:
                        new.elr = new.elr + [broker]
                elif not new.isr:
                    new.isr = [broker]  # the last replica standing stays in the ISR
            if ps.leader == broker:
                if keep_leadership_if_alone and new.isr == [broker]:
                    continue
                leader, why, lrs = self._elect(new, exclude={broker})
                new.leader = leader
                if leader != NO_LEADER:
                    new.leader_recovery_state = lrs
                    if why in ("elr", "last_known_leader", "unclean"):
                        new.isr = [leader]
                    reason_ev = why if why != "isr" else reason
                else:
                    reason_ev = reason
                recs.append(self._commit_partition(ps, new, reason_ev))
            elif new.isr != ps.isr or new.elr != ps.elr:
                recs.append(self._commit_partition(ps, new, reason))
        return recs

    def _offline_election_records(self) -> list[dict]:
        recs = []
        for ps in list(self.image.all_partitions()):
            if ps.leader != NO_LEADER:
                continue
            leader, why, lrs = self._elect(ps)
            if leader == NO_LEADER:
                continue
            new = copy.deepcopy(ps)
            new.leader = leader
            new.leader_recovery_state = lrs
            if why in ("elr", "last_known_leader", "unclean"):
                new.isr = [leader]
            recs.append(self._commit_partition(ps, new, why))
        return recs

    def fence(self, broker: int, reason: str) -> None:
        reg = self.image.brokers.get(broker)
        if reg is None or reg.fenced:
            return
        self.ev.emit("broker_fenced", broker=broker, broker_epoch=reg.broker_epoch, reason=reason)
        recs = [{"type": "fence_broker", "broker": broker, "broker_epoch": reg.broker_epoch, "reason": reason}]
        self.append(recs)
        # partition changes are computed against the image where the broker is already fenced
        prs = self._remove_broker_records(broker, reason="leader_fenced" if reason != "controlled_shutdown" else reason)
        if prs:
            self.append(prs)

    # ------------------------------------------------------------------ handlers

    async def h_registration(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(62, req.__version__)
        if req.cluster_id != self.cfg["cluster.id"]:
            return build(cls, {"error_code": ErrorCode.inconsistent_cluster_id})
        bid = int(req.broker_id)
        inc = str(req.incarnation_id)
        existing = self.image.brokers.get(bid)
        now = time.monotonic()
        if existing is not None and existing.incarnation_id == inc:
            return build(cls, {"broker_epoch": existing.broker_epoch})
        if existing is not None and not existing.fenced and now - self.last_hb.get(bid, 0) < self.session_s:
            # Kafka: a live registration with another incarnation is still in its session.
            return build(cls, {"error_code": ErrorCode.duplicate_broker_registration})
        prev = int(getattr(req, "previous_broker_epoch", -1))
        clean = existing is not None and prev != -1 and prev == existing.broker_epoch
        listener = req.listeners[0] if req.listeners else None
        host = listener.host if listener else peer.host
        port = int(listener.port) if listener else 0
        if existing is not None and not existing.fenced:
            self.fence(bid, "reregistration")
        epoch = len(self.records)
        self.append([{"type": "register_broker", "broker": bid, "broker_epoch": epoch, "incarnation_id": inc,
                      "host": host, "port": port}])
        self.last_hb[bid] = now
        self.ev.emit("broker_registered", broker=bid, broker_epoch=epoch,
                     previous_broker_epoch=prev, clean_shutdown=clean)
        if self.elr_enabled and not clean:
            # KIP-966: an unclean shutdown may have lost data below the HWM: leave the ELR.
            recs = []
            for ps in list(self.image.all_partitions()):
                if bid in ps.elr:
                    new = copy.deepcopy(ps)
                    new.elr = [r for r in ps.elr if r != bid]
                    if not new.isr and bid not in new.last_known_elr:
                        # KIP-966 LastKnownELR: remembered as the last resort when ISR and ELR
                        # are both empty ("last known leader" election), never preferred to the ELR.
                        new.last_known_elr = new.last_known_elr + [bid]
                    recs.append(self._commit_partition(ps, new, "unclean_shutdown"))
            if recs:
                self.append(recs)
        return build(cls, {"broker_epoch": epoch})

    async def h_heartbeat(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(63, req.__version__)
        bid = int(req.broker_id)
        reg = self.image.brokers.get(bid)
        if reg is None or reg.broker_epoch != int(req.broker_epoch):
            return build(cls, {"error_code": ErrorCode.stale_broker_epoch, "is_fenced": True,
                               "should_shut_down": False})
        self.last_hb[bid] = time.monotonic()
        caught_up = int(req.current_metadata_offset) >= reg.broker_epoch
        should_shut_down = False
        if req.want_shut_down:
            if reg.fenced:
                should_shut_down = True
            else:
                if not reg.shutting_down:
                    self.append([{"type": "shutdown_broker", "broker": bid, "broker_epoch": reg.broker_epoch}])
                    prs = self._remove_broker_records(bid, "controlled_shutdown")
                    if prs:
                        self.append(prs)
                leads = [ps for ps in self.image.all_partitions() if ps.leader == bid]
                if not leads:
                    self.fence(bid, "controlled_shutdown")
                    should_shut_down = True
        elif reg.fenced and not req.want_fence and caught_up:
            self.append([{"type": "unfence_broker", "broker": bid, "broker_epoch": reg.broker_epoch}])
            self.ev.emit("broker_unfenced", broker=bid, broker_epoch=reg.broker_epoch)
            recs = self._offline_election_records()
            if recs:
                self.append(recs)
        reg = self.image.brokers[bid]
        return build(cls, {"is_caught_up": caught_up, "is_fenced": reg.fenced, "should_shut_down": should_shut_down})

    async def h_alter_partition(self, header: Any, req: Any, peer: Peer) -> Any:
        version = req.__version__
        cls = load_response_schema(56, version)
        bid = int(req.broker_id)
        reg = self.image.brokers.get(bid)
        top_error = ErrorCode.none
        if reg is None or reg.broker_epoch != int(req.broker_epoch):
            top_error = ErrorCode.stale_broker_epoch
        topics_out = []
        recs = []
        for td in req.topics:
            tid = str(td.topic_id)
            tname = self.image.topic_ids.get(tid)
            parts_out = []
            for pd in td.partitions:
                if version >= 3:
                    new_isr = [int(s.broker_id) for s in pd.new_isr_with_epochs]
                    epochs = {int(s.broker_id): int(s.broker_epoch) for s in pd.new_isr_with_epochs}
                else:
                    new_isr = [int(b) for b in pd.new_isr]
                    epochs = {}
                ps = self.image.partition(tname, int(pd.partition_index)) if tname else None
                err = self._validate_alter(bid, top_error, tname, ps, pd, new_isr, epochs, version)
                ev = {"topic": tname, "partition": int(pd.partition_index), "leader": bid, "new_isr": new_isr,
                      "broker_epochs": {str(k): v for k, v in epochs.items()},
                      "partition_epoch": int(pd.partition_epoch), "version": version,
                      "leader_recovery_state": int(pd.leader_recovery_state)}
                if err is not ErrorCode.none:
                    self.ev.emit("alter_partition", **ev, accepted=False, error=err.name.upper(), error_code=int(err.value))
                    out = {"partition_index": pd.partition_index, "error_code": err}
                    if ps is not None:
                        out.update(leader_id=ps.leader, leader_epoch=ps.leader_epoch, isr=ps.isr,
                                   partition_epoch=ps.partition_epoch, leader_recovery_state=ps.leader_recovery_state)
                    parts_out.append(out)
                    continue
                assert ps is not None
                new = copy.deepcopy(ps)
                new.isr = new_isr
                new.leader_recovery_state = int(pd.leader_recovery_state)
                rec = self._commit_partition(ps, new, "alter_partition")
                self.append([rec])
                ps2 = self.image.partition(tname, int(pd.partition_index))
                self.ev.emit("alter_partition", **ev, accepted=True, error=None, error_code=0)
                parts_out.append({"partition_index": pd.partition_index, "leader_id": ps2.leader,
                                  "leader_epoch": ps2.leader_epoch, "isr": ps2.isr,
                                  "leader_recovery_state": ps2.leader_recovery_state,
                                  "partition_epoch": ps2.partition_epoch})
            topics_out.append({"topic_id": td.topic_id, "partitions": parts_out})
        return build(cls, {"error_code": ErrorCode.none, "topics": topics_out})

    def _validate_alter(self, bid: int, top_error: ErrorCode, tname: str | None, ps: PartitionState | None,
                        pd: Any, new_isr: list[int], epochs: dict[int, int], version: int) -> ErrorCode:
        if top_error is not ErrorCode.none:
            return top_error
        if tname is None:
            return ErrorCode.unknown_topic_id
        if ps is None:
            return ErrorCode.unknown_topic_or_partition
        if ps.leader != bid:
            return ErrorCode.not_leader_or_follower
        if int(pd.leader_epoch) != ps.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if int(pd.partition_epoch) != ps.partition_epoch:
            return ErrorCode.invalid_update_version
        if bid not in new_isr or any(r not in ps.replicas for r in new_isr) or len(set(new_isr)) != len(new_isr):
            return ErrorCode.invalid_request
        lrs = int(pd.leader_recovery_state)
        if lrs == RECOVERING and (len(new_isr) > 1 or ps.leader_recovery_state == RECOVERED):
            return ErrorCode.invalid_request  # KIP-704 (seed 001)
        for r in new_isr:
            if r == bid or r in ps.isr:
                continue
            if not self._eligible(r):
                return ErrorCode.ineligible_replica  # KIP-841: fenced/shutting-down replicas
            if self.cfg.kip903 and version >= 3:
                e = epochs.get(r, -1)
                if e != -1 and e != self.image.brokers[r].broker_epoch:
                    return ErrorCode.ineligible_replica  # KIP-903 (seed 000)
        return ErrorCode.none

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
            for reps in assignment.values():
                if any(b not in self.image.brokers for b in reps):
                    return ErrorCode.invalid_replica_assignment, "unknown broker in assignment"
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
            isr = [r for r in reps if self._eligible(r)]
            leader = isr[0] if isr else NO_LEADER
            ps = PartitionState(topic=name, partition=p, replicas=reps, isr=isr or list(reps), leader=leader,
                                leader_epoch=0, partition_epoch=0)
            precs.append(self._commit_partition(None, ps, "initial"))
        self.append(precs)
        return ErrorCode.none, None

    async def h_fetch(self, header: Any, req: Any, peer: Peer) -> Any:
        """Metadata channel: records of ``__cluster_metadata`` from fetch_offset, long-polled."""
        cls = load_response_schema(1, req.__version__)
        offset = 0
        for t in req.topics:
            for p in t.partitions:
                offset = int(p.fetch_offset)
        if offset >= len(self.records):
            waiter = self.changed
            try:
                await asyncio.wait_for(waiter.wait(), min(req.max_wait.total_seconds(), 5.0))
            except asyncio.TimeoutError:
                pass
        end = len(self.records)
        err = ErrorCode.none
        records = None
        if offset > end:
            err = ErrorCode.offset_out_of_range
        elif offset < end:
            chunk = self.records[offset:offset + 2000]
            records = encode_batch([(None, json.dumps(r, separators=(",", ":")).encode(), []) for r in chunk],
                                   base_offset=offset)
        part = {"partition_index": 0, "error_code": err, "high_watermark": end, "last_stable_offset": end,
                "log_start_offset": 0, "records": records}
        return build(cls, {"responses": [{"topic": METADATA_TOPIC, "partitions": [part]}]})

    # ------------------------------------------------------------------ run

    async def session_loop(self) -> None:
        while not self.stopping:
            await asyncio.sleep(0.1)
            try:
                now = time.monotonic()
                for bid, reg in list(self.image.brokers.items()):
                    if not reg.fenced and now - self.last_hb.get(bid, now) > self.session_s:
                        self.fence(bid, "session_timeout")
                recs = self._offline_election_records()
                if recs:
                    self.append(recs)
            except Exception as e:  # noqa: BLE001 - fencing must keep running; say why it hiccuped
                self.ev.log(f"session check failed: {type(e).__name__}: {e}")

    async def run(self, stop: asyncio.Event) -> None:
        self.load()
        _, host, port = self.cfg["listeners"]
        self.server = Server(CONTROLLER_APIS, {1: self.h_fetch, 19: self.h_create_topics, 56: self.h_alter_partition,
                                               62: self.h_registration, 63: self.h_heartbeat},
                             on_error=self.ev.log)
        await self.server.start(host, port)
        task = asyncio.ensure_future(self.session_loop())
        await stop.wait()
        self.stopping = True
        task.cancel()
        self.server.close()
        self.log_file.close()
