"""The controller quorum over the run: which controller was active, in which epoch.

Why: a KRaft cluster's metadata decisions (elections, ISR changes, fencing) are made by one
active controller, the leader of the ``__cluster_metadata`` Raft quorum (KIP-595). When a
fault hits a controller, the partition samples alone cannot say whether the controller
moved; this sampler records it, on kraftsim and on real Kafka alike, by the same request
``kafka-metadata-quorum.sh describe --status`` sends: ``DescribeQuorum`` (api 55, KIP-595 /
KIP-836), sent to a *broker*, which forwards it to the controllers (KafkaApis:
``DESCRIBE_QUORUM => forwardToControllerOrFail``) where the raft leader answers
(KafkaRaftClient.handleDescribeQuorumRequest).

Why a thread of its own (and its own connections): a forwarded request can take seconds
while the quorum elects; the partition sampler (workloads/observer.py) must not wait for it.

Why a file of its own (``RUN/controller-quorum.jsonl``): ``observer.jsonl`` has one schema,
one line per partition per sample, read by the checker (checkers/load.py), the report and
shrink; quorum lines there would be partition rows with no partition. One line per change of
(leader, epoch, error), and at most every ``HEARTBEAT_S`` otherwise (so the high watermark
and the voters' lag stay visible)::

    {"t", "leader_id", "leader_epoch", "high_watermark", "voters": [{"id", "log_end_offset",
     "last_fetch_ms", "last_caught_up_ms"}], "observers": [...], "broker", "error"}

``t`` is when the answer arrived (a broker may hold a forwarded request while the quorum
elects, so a new leader is recorded when it first answered, not when it was elected — the
controllers' ``controller_elected`` events have that). ``leader_id``/``leader_epoch`` are
``null`` with ``error`` set (Kafka's error name, e.g. ``NOT_LEADER_OR_FOLLOWER`` while no
controller leads, or ``REQUEST_TIMED_OUT``) when the answer named no leader. A broker that does
not advertise DescribeQuorum is never asked again; if none does, nothing is written and no file
is created. A broker that refuses it for good (not authorised, version refused) gives one line
with that error and is not asked again either.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode

from workloads.history import JsonlWriter
from workloads.kafka_wire import KafkaConnection, WireError
from workloads.security import PLAINTEXT, ClientSecurity

DESCRIBE_QUORUM_API_KEY = 55
METADATA_TOPIC, METADATA_PARTITION = "__cluster_metadata", 0
#: versions this sampler reads: v1 adds the KIP-836 timestamps; v2 (KIP-853) only adds
#: directory ids and voter endpoints, so the answer's shape for us is the same
VERSIONS = (2, 1, 0)
HEARTBEAT_S = 5.0
BACKOFF_S = 2.0
#: a broker forwards to the controllers and may wait for an election: longer than a
#: partition request's timeout
REQUEST_TIMEOUT_S = 4.0
#: answers that will not change by asking again (DescribeQuorum needs DESCRIBE on the cluster,
#: ControllerApis.handleDescribeQuorum)
FINAL_ERRORS = {"CLUSTER_AUTHORIZATION_FAILED", "UNSUPPORTED_VERSION", "INVALID_REQUEST"}


def _schemas(version: int) -> tuple[Any, Any, Any, Any]:
    if version == 2:
        from kio.schema.describe_quorum.v2 import request as rq, response as rs
    elif version == 1:
        from kio.schema.describe_quorum.v1 import request as rq, response as rs
    else:
        from kio.schema.describe_quorum.v0 import request as rq, response as rs
    return rq.DescribeQuorumRequest, rq.TopicData, rq.PartitionData, rs.DescribeQuorumResponse


class _Target:
    """One broker address with its own connection and what it supports."""

    def __init__(self, host: str, port: int, timeout: float, security: ClientSecurity = PLAINTEXT):
        self.conn = KafkaConnection(host, port, timeout=timeout, client_id="faultline-quorum-observer",
                                    security=security)
        self.version: int | None = None   # DescribeQuorum version to send; None = not asked yet
        self.unsupported = False
        self.failed_at = -1e9

    def handshake(self) -> None:
        if self.version is not None or self.unsupported:
            return
        resp = self.conn.request(ApiVersionsRequest(client_software_name="faultline",
                                                    client_software_version="0.1"), ApiVersionsResponse)
        if resp.error_code != ErrorCode.none:
            raise WireError(f"ApiVersions: {resp.error_code.name.upper()}")
        for a in resp.api_keys:
            if int(a.api_key) == DESCRIBE_QUORUM_API_KEY:
                ok = [v for v in VERSIONS if int(a.min_version) <= v <= int(a.max_version)]
                if ok:
                    self.version = ok[0]
                    return
        self.unsupported = True


def _replicas(states: Any) -> list[dict[str, int]]:
    return [{"id": int(r.replica_id), "log_end_offset": int(r.log_end_offset),
             "last_fetch_ms": int(getattr(r, "last_fetch_timestamp", -1)),
             "last_caught_up_ms": int(getattr(r, "last_caught_up_timestamp", -1))} for r in states]


def describe_quorum(conn: KafkaConnection, version: int) -> dict[str, Any]:
    """One DescribeQuorum of ``__cluster_metadata``-0 on ``conn``, as a record without ``t``."""
    req_cls, topic_cls, part_cls, resp_cls = _schemas(version)
    req = req_cls(topics=(topic_cls(topic_name=METADATA_TOPIC,
                                    partitions=(part_cls(partition_index=METADATA_PARTITION),)),))
    resp = conn.request(req, resp_cls)
    out: dict[str, Any] = {"leader_id": None, "leader_epoch": None, "high_watermark": None,
                           "voters": None, "observers": None, "error": None}
    if resp.error_code != ErrorCode.none:
        out["error"] = resp.error_code.name.upper()
        return out
    parts = [p for t in resp.topics if t.topic_name == METADATA_TOPIC for p in t.partitions]
    if not parts:
        out["error"] = "NO_PARTITION_IN_ANSWER"
        return out
    p = parts[0]
    if p.error_code != ErrorCode.none:
        out["error"] = p.error_code.name.upper()
        return out
    out.update(leader_id=int(p.leader_id) if int(p.leader_id) >= 0 else None, leader_epoch=int(p.leader_epoch),
               high_watermark=int(p.high_watermark), voters=_replicas(p.current_voters),
               observers=_replicas(p.observers))
    return out


class QuorumSampler:
    """Asks one broker at a time for the quorum every ``interval`` s, in a thread.

    ``addresses`` gives the broker addresses known now (the partition observer learns more
    from Metadata answers); ``node_of`` maps an address to a node id when known."""

    def __init__(self, addresses: Callable[[], list[tuple[str, int]]], out_path: str | Path,
                 now: Callable[[], float], interval: float = 0.25,
                 node_of: Callable[[tuple[str, int]], int | None] | None = None,
                 request_timeout: float = REQUEST_TIMEOUT_S, security: ClientSecurity = PLAINTEXT):
        self.addresses, self.out_path, self.now, self.interval = addresses, Path(out_path), now, interval
        self.security = security
        self.node_of = node_of or (lambda _a: None)
        self._timeout = request_timeout
        self._targets: dict[tuple[str, int], _Target] = {}
        self._writer: JsonlWriter | None = None
        self._last: tuple[Any, ...] | None = None
        self._last_written = -1e9
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.latest: dict[str, Any] | None = None
        self.written = 0
        self.last_error: str | None = None

    def _target(self, addr: tuple[str, int]) -> _Target:
        t = self._targets.get(addr)
        if t is None:
            t = self._targets[addr] = _Target(*addr, self._timeout, self.security)
        return t

    def sample(self) -> dict[str, Any] | None:
        """Ask the first broker that answers; write the record if it is news. ``None`` when no
        broker supports DescribeQuorum (nothing is written) or none could be reached."""
        mono = time.monotonic()
        cands = [self._target(a) for a in list(self.addresses())]
        cands = [t for t in cands if not t.unsupported]
        ready = [t for t in cands if mono - t.failed_at >= BACKOFF_S] or cands
        rec: dict[str, Any] | None = None
        for t in ready:
            try:
                t.handshake()
                if t.unsupported or t.version is None:
                    continue
                rec = describe_quorum(t.conn, t.version)
                rec["broker"] = self.node_of((t.conn.host, t.conn.port))
                if rec["error"] in FINAL_ERRORS:
                    t.unsupported = True
                break
            except WireError as exc:
                t.failed_at = time.monotonic()
                t.version = None
                self.last_error = str(exc)
        if rec is None:
            return None
        rec = {"t": self.now(), **rec}
        key = (rec["leader_id"], rec["leader_epoch"], rec["error"])
        with self._lock:
            self.latest = rec
        if key != self._last or time.monotonic() - self._last_written >= HEARTBEAT_S:
            if self._writer is None:
                self._writer = JsonlWriter(self.out_path)
            self._writer.write(rec)
            self._last, self._last_written = key, time.monotonic()
            self.written += 1
        return rec

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="quorum-observer", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception as exc:  # noqa: BLE001 - keep observing; say why this sample failed
                self.last_error = f"{type(exc).__name__}: {exc}"
            next_at = max(next_at + self.interval, time.monotonic())
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._timeout + 5.0)
        for t in self._targets.values():
            t.conn.close()
        if self._writer is not None:
            self._writer.close()
