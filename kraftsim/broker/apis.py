"""The broker's client request handlers, as Kafka's KafkaApis.scala.

Why its own module: KafkaApis decodes a request, asks the replica manager or the metadata cache,
and shapes the answer; it decides nothing about replication. Keeping it apart leaves the
replication rules in ``replica_manager.py`` and ``partition.py``, and puts the wire-level choices
(which versions are advertised, what a fenced or self-fenced broker tells clients, what is
forwarded to the controllers) in one place.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Awaitable, Callable

from kio.schema.errors import ErrorCode

from kraftsim.metadata import NO_LEADER
from kraftsim.wire import Peer, build, load_response_schema

BROKER_APIS = {
    0: (3, 9),    # Produce
    1: (4, 15),   # Fetch (v15: ReplicaState.ReplicaEpoch, KIP-903)
    2: (1, 9),    # ListOffsets (v8 EARLIEST_LOCAL -4, KIP-405; v9 LATEST_TIERED -5, KIP-1005)
    3: (4, 12),   # Metadata (v12 carries leader epochs and topic ids)
    18: (0, 3),   # ApiVersions
    19: (2, 7),   # CreateTopics (forwarded to the controller)
    22: (0, 4),   # InitProducerId
    23: (2, 4),   # OffsetForLeaderEpoch
    55: (0, 1),   # DescribeQuorum (forwarded to the controller; v2 needs KIP-853 voter endpoints)
    75: (0, 0),   # DescribeTopicPartitions (ISR, ELR, last known ELR)
}
#: how long a forwarded DescribeQuorum may look for the raft leader among the controllers
#: before the broker answers REQUEST_TIMED_OUT (ForwardingManager.scala, ForwardingManagerImpl
#: .forwardRequest: the handler's onTimeout)
DESCRIBE_QUORUM_FORWARD_TIMEOUT_S = 3.0

Handler = Callable[[Any, Any, Peer], Awaitable[Any]]


class KafkaApis:
    def __init__(self, broker: Any) -> None:
        self.b = broker
        self.pid_seq = 0

    def handlers(self) -> dict[int, Handler]:
        """KafkaApis.handle: api key → handler (ApiVersions is answered by the socket server)."""
        return {0: self.handle_produce, 1: self.handle_fetch, 2: self.handle_list_offsets,
                3: self.handle_metadata, 19: self.handle_create_topics, 22: self.handle_init_producer_id,
                23: self.handle_offset_for_leader_epoch, 55: self.handle_describe_quorum,
                75: self.handle_describe_topic_partitions}

    async def handle_produce(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(0, req.__version__)
        rm = self.b.replica_manager
        acks = int(req.acks)
        timeout = req.timeout.total_seconds()
        jobs = []
        for td in req.topic_data:
            for pd in td.partition_data:
                jobs.append((td.name, int(pd.index), rm.append_records(td.name, int(pd.index), pd.records, acks, timeout)))
        results = await asyncio.gather(*(j[2] for j in jobs))
        if acks == 0:
            return None
        out: dict[str, list] = {}
        for (t, p, _), (code, base) in zip(jobs, results):
            r = rm.partitions.get((t, p))
            out.setdefault(t, []).append({"index": p, "error_code": code, "base_offset": base,
                                          "log_start_offset": r.log.log_start_offset if r else -1})
        return build(cls, {"responses": [{"name": t, "partition_responses": ps} for t, ps in out.items()],
                           "throttle_time": 0})

    async def handle_fetch(self, header: Any, req: Any, peer: Peer) -> Any:
        """KafkaApis.handleFetchRequest: ReplicaManager.fetchMessages, long-polled (DelayedFetch)
        until ``min_bytes`` or ``max_wait`` (at most 5 s)."""
        b = self.b
        v = req.__version__
        cls = load_response_schema(1, v)
        if v >= 15:
            rid, repoch = int(req.replica_state.replica_id), int(req.replica_state.replica_epoch)
        else:
            rid, repoch = int(getattr(req, "replica_id", -1)), -1
        deadline = time.monotonic() + min(req.max_wait.total_seconds(), 5.0)
        first = True
        while True:
            # the follower's fetch state is updated by the first read only (DelayedFetch reads
            # from purgatory without updating it)
            responses, total = b.replica_manager.fetch_messages(req, rid, repoch, v, update_fetch_state=first)
            first = False
            remaining = deadline - time.monotonic()
            if total >= max(int(req.min_bytes), 1) or remaining <= 0 or b.stopping:
                break
            await b.wait_wake(remaining)
        body: dict[str, Any] = {"responses": responses, "throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0}
        return build(cls, body)

    async def handle_list_offsets(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(2, req.__version__)
        b = self.b
        rid = int(req.replica_id)
        topics = []
        for td in req.topics:
            parts = []
            for pd in td.partitions:
                p = int(pd.partition_index)
                r, err = b.replica_manager.leader_replica(td.name, p)
                if r is None:
                    parts.append({"partition_index": p, "error_code": err})
                    continue
                ts = int(pd.timestamp)
                special = b.rlm.list_offset(r, ts)  # -2 and the tiered-storage timestamps
                if special is not None:
                    off = special
                elif ts == -1:
                    off = r.log.log_end_offset if rid >= 0 else r.hwm
                else:
                    off = r.hwm
                parts.append({"partition_index": p, "error_code": ErrorCode.none, "timestamp": -1,
                              "offset": off, "old_style_offsets": [off], "leader_epoch": r.leader_epoch})
            topics.append({"name": td.name, "partitions": parts})
        return build(cls, {"topics": topics, "throttle_time": 0})

    def _live_brokers(self) -> list[dict]:
        # A self-fenced broker's image is stale: it leaves itself out, so clients go elsewhere.
        b = self.b
        self_fenced = b.lifecycle.self_fenced
        return [{"node_id": reg.broker, "host": reg.host, "port": reg.port, "rack": None}
                for reg in sorted(b.image.brokers.values(), key=lambda x: x.broker)
                if not reg.fenced and not (self_fenced and reg.broker == b.node_id)]

    def _partition_view(self, ps: Any) -> dict:
        b = self.b
        leader = ps.leader if ps.leader != NO_LEADER and b.image.unfenced(ps.leader) else NO_LEADER
        if b.lifecycle.self_fenced and leader == b.node_id:
            leader = NO_LEADER
        return {"error_code": ErrorCode.none if leader != NO_LEADER else ErrorCode.leader_not_available,
                "partition_index": ps.partition, "leader_id": leader, "leader_epoch": ps.leader_epoch,
                "replica_nodes": ps.replicas, "isr_nodes": ps.isr,
                "offline_replicas": [r for r in ps.replicas if not b.image.unfenced(r)],
                "eligible_leader_replicas": ps.elr, "last_known_elr": ps.last_known_elr}

    async def handle_metadata(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(3, req.__version__)
        b = self.b
        names: list[str | None]
        if req.topics is None:
            names = sorted(b.image.topics)
        else:
            names = []
            for t in req.topics:
                n = t.name
                if n is None and getattr(t, "topic_id", None) is not None:
                    n = b.image.topic_ids.get(str(t.topic_id))
                names.append(n)
        topics = []
        for n in names:
            ts = b.image.topics.get(n) if n else None
            if ts is None:
                topics.append({"error_code": ErrorCode.unknown_topic_or_partition, "name": n, "topic_id": None,
                               "partitions": []})
                continue
            topics.append({"error_code": ErrorCode.none, "name": n, "topic_id": uuid.UUID(ts.topic_id),
                           "partitions": [self._partition_view(ps) for _, ps in sorted(ts.partitions.items())]})
        return build(cls, {"throttle_time": 0, "brokers": self._live_brokers(), "cluster_id": b.cfg["cluster.id"],
                           "controller_id": b.node_id if b.metadata.metadata_ready else -1, "topics": topics})

    async def handle_describe_topic_partitions(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(75, req.__version__)
        image = self.b.image
        names = [t.name for t in req.topics] or sorted(image.topics)
        topics = []
        for n in names:
            ts = image.topics.get(n)
            if ts is None:
                topics.append({"error_code": ErrorCode.unknown_topic_or_partition, "name": n, "topic_id": None})
                continue
            topics.append({"error_code": ErrorCode.none, "name": n, "topic_id": uuid.UUID(ts.topic_id),
                           "partitions": [self._partition_view(ps) for _, ps in sorted(ts.partitions.items())]})
        return build(cls, {"throttle_time": 0, "topics": topics, "next_cursor": None})

    async def handle_init_producer_id(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(22, req.__version__)
        if getattr(req, "transactional_id", None):
            return build(cls, {"error_code": ErrorCode.transactional_id_authorization_failed, "producer_id": -1,
                               "producer_epoch": -1})
        old_pid = int(getattr(req, "producer_id", -1))
        old_epoch = int(getattr(req, "producer_epoch", -1))
        if old_pid >= 0 and 0 <= old_epoch < 32766:
            # KIP-360: an idempotent producer bumps its epoch after an unresolved sequence.
            return build(cls, {"producer_id": old_pid, "producer_epoch": old_epoch + 1, "throttle_time": 0})
        # Unique without a coordinator: node id in the high bits, wall-clock ms + a counter below.
        self.pid_seq += 1
        pid = (self.b.node_id << 44) | ((int(time.time() * 1000) << 4) + self.pid_seq) & ((1 << 44) - 1)
        return build(cls, {"producer_id": pid, "producer_epoch": 0, "throttle_time": 0})

    async def handle_offset_for_leader_epoch(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(23, req.__version__)
        topics = []
        for td in req.topics:
            parts = []
            for pd in td.partitions:
                p = int(pd.partition)
                r, err = self.b.replica_manager.leader_replica(td.topic, p)
                if r is None:
                    parts.append({"partition": p, "error_code": err})
                    continue
                e, end = r.log.end_offset_for_epoch(int(pd.leader_epoch))
                if int(getattr(req, "replica_id", -1)) < 0 and end > r.hwm:
                    end = r.hwm if e == r.leader_epoch else end
                parts.append({"partition": p, "error_code": ErrorCode.none, "leader_epoch": e, "end_offset": end})
            topics.append({"topic": td.topic, "partitions": parts})
        return build(cls, {"topics": topics, "throttle_time": 0})

    async def handle_create_topics(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(19, req.__version__)
        b = self.b
        fwd = b.controller_client("forwarding")
        try:
            resp = await fwd.request(req, timeout=10)
        except (OSError, asyncio.TimeoutError, ConnectionError):
            return build(cls, {"topics": [{"name": t.name, "error_code": ErrorCode.not_controller,
                                           "error_message": "controller unreachable"} for t in req.topics]},
                         fill_error=ErrorCode.not_controller)
        finally:
            fwd.close()
        # Answer once our own metadata shows the new topics, so the client's next Metadata sees them.
        end = time.monotonic() + 3
        want = [t.name for t in resp.topics if t.error_code is ErrorCode.none]
        while time.monotonic() < end and any(w not in b.image.topics for w in want):
            await b.wait_wake(0.05)
        return resp

    async def handle_describe_quorum(self, header: Any, req: Any, peer: Peer) -> Any:
        """KafkaApis.handle: ``DESCRIBE_QUORUM => forwardToControllerOrFail`` — the broker does
        not answer it itself; the forwarding channel carries it to the controllers, where the
        raft leader answers (ControllerApis.handleDescribeQuorum -> KafkaRaftClient
        .handleDescribeQuorumRequest). A non-leader's NOT_LEADER_OR_FOLLOWER makes the channel
        try the next controller (controller_channel.not_controller); if none answers in time
        the error is top-level REQUEST_TIMED_OUT (ForwardingManager.scala, ForwardingManagerImpl
        .forwardRequest onTimeout -> DescribeQuorumRequest.getErrorResponse ->
        getTopLevelErrorResponse); if only non-leaders answered, the last of their answers."""
        cls = load_response_schema(55, req.__version__)
        fwd = self.b.controller_client("forwarding")
        try:
            return await fwd.request(req, timeout=DESCRIBE_QUORUM_FORWARD_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError, ConnectionError):
            return build(cls, {"error_code": ErrorCode.request_timed_out})
        finally:
            fwd.close()
