"""What the controller asks of the raft layer — QuorumController's use of KafkaRaftClient.

Why a separate module: ``kraftsim/controller.py`` keeps deciding *which* records to write;
this module decides when they count. The rules are QuorumController's:

- only the active controller writes. It becomes active once it leads the raft epoch and has
  replayed the log up to its epoch start (KafkaRaftClient.maybeFireLeaderChange fires
  ``handleLeaderChange`` only when the listener reached the epoch start offset; then
  QuorumController.QuorumMetaLogListener.handleLeaderChange -> claim);
- a write applies its records to the in-memory state at once and answers the request only once
  the records are committed (QuorumController.ControllerWriteEvent: ``appendRecords`` then the
  response future waits in ``deferredEventQueue`` for ``completeUpTo(highWatermark)``);
- a controller that loses the leadership reverts its in-memory state to the last committed
  offset (QuorumController.renounce: ``snapshotRegistry.revertToSnapshot(lastCommittedOffset)``)
  and fails the pending writes with NOT_CONTROLLER;
- standby controllers replay committed records only (QuorumMetaLogListener.handleCommit).

Brokers read the committed log on the metadata channel (a Fetch of ``__cluster_metadata``
whose ``replica_id`` is not a voter): JSON record values, offsets as in the raft log; a
LeaderChange control record is shown to them as ``{"type": "leader_change", ...}`` so that
their offsets stay contiguous (kraftsim brokers apply records one offset after another).
"""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Callable, Protocol

from kio.schema.errors import ErrorCode

from kraftsim.events import EventLog
from kraftsim.raft.client import FETCH, NotLeader, RaftClient
from kraftsim.raft.config import QuorumConfig
from kraftsim.raft.log import CONTROL_FLAG, TOPIC, RaftLog
from kraftsim.raft.states import Leader
from kraftsim.storage import records as rec
from kraftsim.wire import Peer, build, load_response_schema

BROKER_FETCH_RECORDS = 2000


class QuorumListener(Protocol):
    def handle_commit(self, batch: list[tuple[int, dict[str, Any]]]) -> None: ...
    def become_active(self, epoch: int) -> None: ...
    def renounce(self, epoch: int) -> None: ...


class MetadataQuorum:
    def __init__(self, node_id: int, cluster_id: str, host: str, quorum: QuorumConfig, metadata_dir: Path,
                 events: EventLog, listener: QuorumListener, segment_bytes: int = 64 * 1024 * 1024):
        self.node_id = node_id
        self.ev = events
        self.listener = listener
        holder: dict[str, RaftClient] = {}
        self.log = RaftLog(metadata_dir, node_id, cluster_id, segment_bytes=segment_bytes,
                           on_event=lambda n, f: holder["c"].storage_event(n, f) if "c" in holder else events.emit(n, **f))
        self.raft = RaftClient(node_id, cluster_id, host, quorum, self.log, events, on_commit=self._on_commit)
        holder["c"] = self.raft
        self.raft.listeners.append(self._on_state_change)
        self.active_epoch: int | None = None

    # ---------------------------------------------------------------- leadership

    @property
    def voters(self) -> frozenset[int]:
        return self.raft.voters

    def is_active(self) -> bool:
        return self.active_epoch is not None and self.raft.is_leader() and self.raft.quorum.epoch == self.active_epoch

    @property
    def leader_id(self) -> int:
        return self.raft.quorum.leader_id

    @property
    def epoch(self) -> int:
        return self.raft.quorum.epoch

    def _maybe_claim(self) -> None:
        """KafkaRaftClient.maybeFireLeaderChange(LeaderState): the new leader is announced to the
        controller only once everything before its epoch start has been handed over."""
        s = self.raft.quorum.state
        if self.active_epoch is None and isinstance(s, Leader) and self.raft.applied > s.epoch_start_offset:
            self.active_epoch = s.epoch
            self.listener.become_active(s.epoch)

    def _on_state_change(self) -> None:
        if self.active_epoch is not None and not (self.raft.is_leader() and self.raft.quorum.epoch == self.active_epoch):
            epoch, self.active_epoch = self.active_epoch, None
            self.listener.renounce(epoch)
        self._maybe_claim()

    def _on_commit(self, batch: list[tuple[int, int, dict[str, Any]]]) -> None:
        self.listener.handle_commit([(o, r) for o, _, r in batch])
        self._maybe_claim()

    # ---------------------------------------------------------------- writes

    @property
    def next_offset(self) -> int:
        return self.log.end_offset

    def append(self, records: list[dict[str, Any]]) -> tuple[int, int]:
        """Append as the active controller: (offset of the first record, of the last)."""
        if not self.is_active():
            raise NotLeader(self.leader_id, self.epoch)
        first = self.log.end_offset
        return first, self.raft.append(records)

    async def wait_committed(self, offset: int) -> None:
        """Until ``offset`` is committed in the epoch this controller is active in; NotLeader
        otherwise (QuorumController fails such writes with NOT_CONTROLLER)."""
        if self.active_epoch is None:
            raise NotLeader(self.leader_id, self.epoch)
        await self.raft.wait_committed(offset, self.active_epoch)

    def written_records(self) -> list[tuple[int, dict[str, Any]]]:
        """Every data record in the log, committed or not (an active controller's own writes)."""
        return [(o, r) for o, _, r in self.log.committed(0, self.log.end_offset)]

    def committed_records(self) -> list[tuple[int, dict[str, Any]]]:
        """Every committed data record, in order (what a renouncing controller reverts to)."""
        hw = self.raft.applied
        return [(o, r) for o, _, r in self.log.committed(0, hw)]

    # ---------------------------------------------------------------- listener

    def api_versions(self) -> dict[int, tuple[int, int]]:
        return self.raft.api_versions()

    def handlers(self) -> dict[int, Callable[[Any, Any, Peer], Any]]:
        h = self.raft.handlers()
        h[FETCH] = self.raft.on_raft_thread(self.h_fetch)  # brokers' metadata Fetch too: KafkaRaftClient's
        return h

    async def h_fetch(self, header: Any, req: Any, peer: Peer) -> Any:
        """A voter's Fetch is raft replication; anything else is a broker's metadata channel."""
        if int(req.replica_id) in self.voters and int(req.replica_id) != self.node_id:
            return await self.raft.h_fetch(header, req, peer)
        return await self.h_broker_fetch(header, req, peer)

    async def h_broker_fetch(self, header: Any, req: Any, peer: Peer) -> Any:
        """Committed records from ``fetch_offset``, long-polled up to ``max_wait``; the answer's
        high watermark is the committed offset (an observer at or past it waits: the records it
        holds beyond are in this leader's log, validated above, just not committed yet). Only the leader answers with data (observers
        fetch from the leader, KafkaRaftClient.validateLeaderOnlyRequest is skipped for them:
        they carry no leader epoch); others say NOT_LEADER_OR_FOLLOWER with the leader."""
        cls = load_response_schema(FETCH, req.__version__)
        offset, last_epoch = 0, -1
        for t in req.topics:
            for p in t.partitions:
                offset, last_epoch = int(p.fetch_offset), int(p.last_fetched_epoch)
        s = self.raft.quorum.state
        if isinstance(s, Leader):
            # the broker is an observer of the quorum: DescribeQuorum lists it with its fetch
            # position (KafkaRaftClient.handleFetchRequest -> LeaderState.updateReplicaState)
            s.update_observer_state(int(req.replica_id), offset, int(time.time() * 1000))
            # KafkaRaftClient.tryCompleteFetchRequest -> ReplicatedLog.validateOffsetAndEpoch, for an
            # observer as for a voter: a copy that diverged from this leader's log is told where
            # (the observer truncates there, or halts if that is below its high watermark)
            valid, (div_off, div_epoch) = self.log.validate_offset_and_epoch(offset, max(last_epoch, 0))
            if not valid:
                part = {"partition_index": 0, "error_code": ErrorCode.none, "high_watermark": max(self.raft.applied, 0),
                        "last_stable_offset": max(self.raft.applied, 0), "log_start_offset": 0, "records": None,
                        "diverging_epoch": {"end_offset": div_off, "epoch": div_epoch},
                        "current_leader": {"leader_id": self.leader_id, "leader_epoch": self.epoch}}
                return build(cls, {"responses": [{"topic": TOPIC, "partitions": [part]}]})
        deadline = time.monotonic() + min(req.max_wait.total_seconds(), 5.0)
        while True:
            waiter = self.raft.progress
            active = self.is_active()
            hw = self.raft.applied if active else -1
            if not active or offset < hw or time.monotonic() >= deadline:
                break
            try:
                await asyncio.wait_for(waiter.wait(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                pass
        part: dict[str, Any] = {"partition_index": 0, "error_code": ErrorCode.none, "high_watermark": max(hw, 0),
                                "last_stable_offset": max(hw, 0), "log_start_offset": 0, "records": None,
                                "current_leader": {"leader_id": self.leader_id, "leader_epoch": self.epoch}}
        if not active:
            part["error_code"] = ErrorCode.not_leader_or_follower
        elif offset < hw:
            part["records"] = self._broker_batch(offset, hw)
        return build(cls, {"responses": [{"topic": TOPIC, "partitions": [part]}]})

    def _broker_batch(self, offset: int, hw: int) -> bytes | None:
        """One batch of JSON values with contiguous offsets from ``offset`` (below ``hw``)."""
        values: list[bytes] = []
        pos = offset
        while pos < hw and len(values) < BROKER_FETCH_RECORDS:
            data = self.log.read(pos, 1 << 20, hw)
            if not data:
                break
            for h in rec.iter_batches(data, 0, check_crc=False):
                for r in rec.decode_records(data[h.position:h.position + h.length]):
                    if r.offset < pos:
                        continue
                    if h.attributes & CONTROL_FLAG:
                        values.append(json.dumps({"type": "leader_change", "epoch": h.partition_leader_epoch},
                                                 separators=(",", ":")).encode())
                    else:
                        values.append(r.value or b"{}")
                pos = h.last_offset + 1
                if len(values) >= BROKER_FETCH_RECORDS:
                    break
        if not values:
            return None
        return rec.encode_batch([(None, v, []) for v in values], base_offset=offset)

    # ---------------------------------------------------------------- run

    async def run(self, stop: asyncio.Event) -> None:
        await self.raft.run(stop)

    def close(self) -> None:
        self.log.close(clean=True)
