"""The observer: leader, leader epoch, ISR and ELR of every partition, sampled over the run.

Why (attribution and the protocol invariants, docs/anomalies.md): a lost write is explained by what the
partition's metadata did between its ack and the read that missed it — which leader was
elected in which leader epoch (docs/seeds.md#seed-003-2-3-1, §2.8), how the ISR shrank and grew
(§2.9), whether ELR (KIP-966, docs/seeds.md#seed-003 "Last Replica Standing") held the candidates. The
cluster's own event logs say this on kraftsim; on real Kafka only the brokers' metadata
answers do, so the observer asks them directly, with raw kio requests (see
:mod:`workloads.kafka_wire` for why not librdkafka):

* ``DescribeTopicPartitions`` v0 (api 75, Kafka 3.7+) where the broker advertises it:
  leader, leader epoch, ISR and ``eligible_leader_replicas``;
* else ``Metadata`` v12: leader, leader epoch, ISR; ``elr`` is then ``null`` (unknown,
  not empty).

Every sample asks every known broker (bootstrap plus those learned from Metadata), because
one broker's metadata can be stale — a broker cut off from the controller keeps serving the
last partition state it saw (docs/seeds.md#seed-002, self-fencing). Per partition the answer with the
highest leader epoch wins; on a tie, the answer of the leader itself. A broker that fails
to answer is skipped for ``BACKOFF_S``, so a partitioned broker slows sampling only briefly.

Output, one JSON line per partition per sample (``RUN/observer.jsonl``)::

    {"t", "topic", "partition", "leader", "leader_epoch", "isr": [...], "elr": [...]|null,
     "error", "replicas": [...], "broker"}

``leader`` is ``null`` when there is none (Kafka's -1); ``error`` is the partition's Kafka
error name, or for a sample no broker answered, one line with ``partition: null`` and
``error: "NO_BROKER_ANSWERED: ..."``. ``broker`` is the node id that answered.

Beside it, in its own thread and file, the controller quorum: the active controller and its
epoch from ``DescribeQuorum`` (``RUN/controller-quorum.jsonl``, see
:mod:`workloads.controller_quorum`); on a cluster whose brokers do not offer it, no file.
"""
from __future__ import annotations

import copy
import threading
import time
from pathlib import Path
from typing import Any, Callable

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.describe_topic_partitions.v0.request import DescribeTopicPartitionsRequest, TopicRequest
from kio.schema.describe_topic_partitions.v0.response import DescribeTopicPartitionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import TopicName

from workloads.controller_quorum import QuorumSampler
from workloads.history import JsonlWriter
from workloads.kafka_wire import KafkaConnection, WireError, parse_bootstrap
from workloads.security import PLAINTEXT, ClientSecurity

BACKOFF_S = 2.0
BROKER_REFRESH_S = 5.0
DTP_API_KEY, METADATA_API_KEY = 75, 3


def _ids(nodes: Any) -> list[int] | None:
    return None if nodes is None else [int(n) for n in nodes]


class _Broker:
    """One broker the observer may ask, with what it supports and when it last failed."""

    def __init__(self, host: str, port: int, node_id: int | None, timeout: float,
                 security: ClientSecurity = PLAINTEXT):
        self.node_id = node_id
        self.conn = KafkaConnection(host, port, timeout=timeout, client_id="faultline-observer", security=security)
        self.apis: dict[int, tuple[int, int]] | None = None
        self.failed_at = -1e9

    @property
    def address(self) -> tuple[str, int]:
        return self.conn.host, self.conn.port

    def supports(self, api_key: int, version: int) -> bool:
        lo_hi = (self.apis or {}).get(api_key)
        return lo_hi is not None and lo_hi[0] <= version <= lo_hi[1]

    def handshake(self) -> None:
        if self.apis is None:
            resp = self.conn.request(ApiVersionsRequest(client_software_name="faultline",
                                                        client_software_version="0.1"),
                                     ApiVersionsResponse)
            if resp.error_code != ErrorCode.none:
                raise WireError(f"ApiVersions: {resp.error_code.name.upper()}")
            self.apis = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in resp.api_keys}


class Observer:
    """Samples the partition metadata of one topic every ``interval`` s in a thread."""

    def __init__(self, bootstrap: str, topic: str, out_path: str | Path, now: Callable[[], float],
                 interval: float = 0.25, request_timeout: float = 1.0,
                 quorum_path: str | Path | None = "controller-quorum.jsonl", security: ClientSecurity = PLAINTEXT):
        """``quorum_path``: where the controller quorum goes (relative: beside ``out_path``);
        ``None``: do not sample it."""
        self.topic, self.now, self.interval = topic, now, interval
        self.out_path = Path(out_path)
        self.quorum: QuorumSampler | None = None
        if quorum_path is not None:
            qp = Path(quorum_path)
            self.quorum = QuorumSampler(lambda: list(self._brokers), qp if qp.is_absolute() else self.out_path.parent / qp,
                                        now, interval=interval, node_of=self._node_of, security=security)
        self._timeout = request_timeout
        self.security = security
        self._brokers: dict[tuple[str, int], _Broker] = {
            addr: _Broker(*addr, None, request_timeout, security) for addr in parse_bootstrap(bootstrap)}
        self._latest: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._writer: JsonlWriter | None = None
        self._last_refresh = -1e9
        self.samples = 0
        self.last_error: str | None = None

    # -- asking brokers -------------------------------------------------------------------
    def _node_of(self, addr: tuple[str, int]) -> int | None:
        b = self._brokers.get(addr)
        return b.node_id if b is not None else None

    def _learn_brokers(self, resp: MetadataResponse) -> None:
        for b in resp.brokers:
            addr = (str(b.host), int(b.port))
            known = self._brokers.get(addr)
            if known is None:
                self._brokers[addr] = _Broker(*addr, int(b.node_id), self._timeout, self.security)
            else:
                known.node_id = int(b.node_id)

    def _metadata(self, broker: _Broker, topics: tuple[MetadataRequestTopic, ...]) -> MetadataResponse:
        resp = broker.conn.request(MetadataRequest(topics=topics, allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False),
                                   MetadataResponse)
        self._learn_brokers(resp)
        return resp

    def _ask(self, broker: _Broker) -> list[dict[str, Any]]:
        """One broker's view of the topic's partitions, as observer records (no ``t``)."""
        broker.handshake()
        name = TopicName(self.topic)
        if broker.supports(DTP_API_KEY, 0):
            if time.monotonic() - self._last_refresh >= BROKER_REFRESH_S:
                self._metadata(broker, ())
                self._last_refresh = time.monotonic()
            dtp = broker.conn.request(DescribeTopicPartitionsRequest(topics=(TopicRequest(name=name),)),
                                      DescribeTopicPartitionsResponse)
            topics = [(t.error_code, t.name, [(p.error_code, int(p.partition_index), int(p.leader_id),
                                                int(p.leader_epoch), _ids(p.isr_nodes),
                                                _ids(p.eligible_leader_replicas), _ids(p.replica_nodes))
                                               for p in t.partitions]) for t in dtp.topics]
        elif broker.supports(METADATA_API_KEY, 12):
            md = self._metadata(broker, (MetadataRequestTopic(topic_id=None, name=name),))
            self._last_refresh = time.monotonic()
            topics = [(t.error_code, t.name, [(p.error_code, int(p.partition_index), int(p.leader_id),
                                               int(p.leader_epoch), _ids(p.isr_nodes), None,
                                               _ids(p.replica_nodes))
                                              for p in t.partitions]) for t in md.topics]
        else:
            raise WireError(f"{broker.address[0]}:{broker.address[1]}: supports neither "
                            f"DescribeTopicPartitions v0 nor Metadata v12")
        answered_by = broker.node_id  # known once a Metadata answer listed this address
        out: list[dict[str, Any]] = []
        for t_err, t_name, parts in topics:
            if t_name != self.topic:
                continue
            if t_err != ErrorCode.none:
                out.append(self._rec(None, None, None, None, None, t_err.name.upper(), None, answered_by))
                continue
            for p_err, idx, leader, epoch, isr, elr, replicas in parts:
                err = None if p_err == ErrorCode.none else p_err.name.upper()
                out.append(self._rec(idx, None if leader < 0 else leader, epoch, isr, elr, err,
                                     replicas, answered_by))
        return out

    def _rec(self, partition: int | None, leader: int | None, epoch: int | None, isr: Any, elr: Any,
             error: str | None, replicas: Any, broker: int | None) -> dict[str, Any]:
        return {"t": None, "topic": self.topic, "partition": partition, "leader": leader,
                "leader_epoch": epoch, "isr": isr, "elr": elr, "error": error,
                "replicas": replicas, "broker": broker}

    @staticmethod
    def _better(new: dict[str, Any], old: dict[str, Any] | None) -> bool:
        if old is None:
            return True
        if old["error"] is not None and new["error"] is None:
            return True
        if new["error"] is not None and old["error"] is None:
            return False
        ne = -1 if new["leader_epoch"] is None else new["leader_epoch"]
        oe = -1 if old["leader_epoch"] is None else old["leader_epoch"]
        if ne != oe:
            return ne > oe
        return new["broker"] is not None and new["broker"] == new["leader"] != old["broker"]

    def sample(self) -> list[dict[str, Any]]:
        """Ask every broker not in backoff once; merge; write and return the records."""
        merged: dict[int | None, dict[str, Any]] = {}
        errors: list[str] = []
        mono = time.monotonic()
        brokers = list(self._brokers.values())
        ready = [b for b in brokers if mono - b.failed_at >= BACKOFF_S] or brokers
        for broker in ready:
            try:
                for rec in self._ask(broker):
                    if self._better(rec, merged.get(rec["partition"])):
                        merged[rec["partition"]] = rec
            except WireError as exc:
                broker.failed_at = time.monotonic()
                broker.apis = None
                errors.append(str(exc))
        t = self.now()
        if not merged:
            detail = "; ".join(errors) or "no broker known"
            self.last_error = detail
            merged[None] = self._rec(None, None, None, None, None, f"NO_BROKER_ANSWERED: {detail}",
                                     None, None)
        if len(merged) > 1:
            merged.pop(None, None)  # a topic-level error from one broker, partitions from another
        records = [dict(rec, t=t) for _, rec in sorted(merged.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))]
        if self._writer is not None:
            for rec in records:
                self._writer.write(rec)
        with self._cond:
            for rec in records:
                if rec["partition"] is not None:
                    self._latest[rec["partition"]] = rec
            self.samples += 1
            self._cond.notify_all()
        return records

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self._writer = JsonlWriter(self.out_path)
        self._thread = threading.Thread(target=self._loop, name="observer", daemon=True)
        self._thread.start()
        if self.quorum is not None:
            self.quorum.start()

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception as exc:  # keep observing; the record says why this sample failed
                self.last_error = f"{type(exc).__name__}: {exc}"
            next_at = max(next_at + self.interval, time.monotonic())
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        if self.quorum is not None:
            self.quorum.stop()
        if self._thread is not None:
            self._thread.join(10.0)
        for b in self._brokers.values():
            b.conn.close()
        if self._writer is not None:
            self._writer.close()

    def __enter__(self) -> "Observer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- for the harness's wait conditions -------------------------------------------------
    def latest(self) -> dict[int, dict[str, Any]]:
        """The newest record per partition: ``{partition: {leader, leader_epoch, isr, ...}}``."""
        with self._cond:
            return copy.deepcopy(self._latest)

    def wait_until(self, predicate: Callable[[dict[int, dict[str, Any]]], bool], timeout: float) -> bool:
        """Block until ``predicate(latest())`` holds (checked after each sample) or timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if predicate(copy.deepcopy(self._latest)):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, max(self.interval, 0.05) * 2))
