"""A reader that sends no leader epoch: Fetch v11 with ``CurrentLeaderEpoch = -1``, as the clients
before KIP-320 fetch (librdkafka 1.4 to 2.0: ``rd_kafka_buf_write_i32(rkbuf, -1); /*
CurrentLeaderEpoch */`` with Fetch v11 and ``client.rack``; KIP-320 came with librdkafka 2.1).

Why it exists (campaigns/bugs/KAFKA-14704.yaml): from Fetch v11 every consumer request carries
ClientMetadata, so Kafka serves it from any replica holding the partition
(``FetchParams.fetchOnlyLeader = isFromFollower || (isFromConsumer && clientMetadata.isEmpty)``),
checking the leader epoch only when the client sends one (Partition.checkCurrentLeaderEpoch).
The workload's consumer (confluent-kafka 2.16, librdkafka 2.16) sends Fetch v15 with its known
leader epoch - checked on the wire against kraftsim - so a demoted leader answers it
FENCED_LEADER_EPOCH and it moves to the new leader; a leader points it at a follower only
through ``replica.selector.class``, and never at one whose fetch state it has not seen
(ReplicaManager.findPreferredReadReplica), which a demoted leader's first, diverging Fetch does
not update (Partition.fetchRecords: ``updateFetchState && divergingEpoch.isEmpty``). This reader
is the client that does reach a demoted leader: its metadata still names it, the demoted broker
serves it as a follower without an error, and it keeps reading there - up to that replica's
high watermark, which KAFKA-14704 raised over an uncommitted tail for a moment.

Like librdkafka it keeps one fetch outstanding per broker (one thread each, ``fetch.wait.max.ms``
long-polled), learns leaders from Metadata at start, after any partition or connection error
and every ``metadata_refresh_s`` (librdkafka's ``topic.metadata.refresh.interval.ms``, 5
minutes), and on OFFSET_OUT_OF_RANGE resets to the earliest offset (``auto.offset.reset =
earliest``, as the workload's consumer). Each record read is a ``poll`` ``ok`` history record;
partition errors are ``poll`` ``info`` records with the error name.

Its wire trace goes to ``<process>.client.log`` beside the history, as librdkafka's lines do for
the other clients: every change of the leaders it learned, every connection error (after which
it asks for metadata again), and every fetch answer that moved a partition - the broker, the
high watermark answered, the offsets read and the round trip. Why: whether a reader met a
replica's short-lived high watermark is decided by which answer it got from which broker, and
the history alone (records read, not answers) cannot say why a read did not happen.
"""
from __future__ import annotations

import datetime
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from kio.records.readers import read_batch
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v11.response import FetchResponse
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.list_offsets.v7.response import ListOffsetsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from workloads import history as h
from workloads._worker import ERRORS, READ, Control, ReaderBacked, Worker, client_logger
from workloads.kafka_wire import KafkaConnection, WireError, parse_bootstrap
from workloads.security import PLAINTEXT, ClientSecurity
from workloads.producer import partition_list

#: librdkafka's topic.metadata.refresh.interval.ms default
METADATA_REFRESH_S = 300.0
PARTITION_MAX_BYTES = 1 << 20
EARLIEST = -2


@dataclass
class EpochlessReaderSpec:
    process: str
    bootstrap: str
    topic: str
    partitions: list[int]
    history_path: str
    now: Callable[[], float]
    fetch_wait_ms: int = 100
    metadata_refresh_s: float = METADATA_REFRESH_S
    security: ClientSecurity = PLAINTEXT


class _State:
    """Shared between the broker threads: leaders, positions, the history writer."""

    def __init__(self, spec: EpochlessReaderSpec, control: Control) -> None:
        self.spec, self.control = spec, control
        self.lock = threading.Lock()
        self.writer = h.JsonlWriter(spec.history_path)
        self.log = client_logger(spec.process, str(Path(spec.history_path).with_suffix(".client.log")))
        #: (broker, partition) -> the high watermark last answered: the trace logs only changes
        self.answered: dict[tuple[int, int], int] = {}
        self.position = {p: 0 for p in spec.partitions}
        self.leader: dict[int, int] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.refresh_wanted = True
        self.refreshed_at = -1e9
        self.op = 0

    def record(self, **fields: Any) -> None:
        with self.lock:
            self.writer.write(h.record(t=self.spec.now(), process=self.spec.process, op=self.op, f=h.POLL,
                                       topic=self.spec.topic, **fields))
            self.op += 1


def _metadata(state: _State) -> None:
    """Ask the bootstrap brokers (then any known one) for the topic's leaders."""
    spec = state.spec
    addrs = list(parse_bootstrap(spec.bootstrap)) + [a for a in state.brokers.values()]
    for host, port in addrs:
        conn = KafkaConnection(host, port, timeout=2.0, client_id=spec.process, security=spec.security)
        try:
            resp = conn.request(MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName(spec.topic)),),
                                                allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False), MetadataResponse)
        except WireError:
            continue
        finally:
            conn.close()
        with state.lock:
            state.brokers.update({int(b.node_id): (str(b.host), int(b.port)) for b in resp.brokers})
            before = dict(state.leader)
            for t in resp.topics:
                if str(t.name) != spec.topic:
                    continue
                for p in t.partitions:
                    if p.error_code is ErrorCode.none and int(p.leader_id) >= 0:
                        state.leader[int(p.partition_index)] = int(p.leader_id)
            moved = {p: b for p, b in sorted(state.leader.items()) if before.get(p) != b}
            if moved:
                state.log.info("t=%.3f metadata from %s:%d: leader now %s", spec.now(), host, port,
                               " ".join(f"{p}->{b}" for p, b in moved.items()))
            state.refresh_wanted = False
            state.refreshed_at = time.monotonic()
        return


def _earliest(conn: KafkaConnection, topic: str, part: int) -> int | None:
    """ListOffsets EARLIEST to the broker the partition is read from (auto.offset.reset)."""
    resp = conn.request(ListOffsetsRequest(replica_id=BrokerId(-1), isolation_level=i8(0), topics=(
        ListOffsetsTopic(name=TopicName(topic), partitions=(
            ListOffsetsPartition(partition_index=i32(part), current_leader_epoch=i32(-1),
                                 timestamp=i64(EARLIEST)),)),)), ListOffsetsResponse)
    p = resp.topics[0].partitions[0]
    return int(p.offset) if p.error_code is ErrorCode.none else None


def _records(data: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every complete batch; a partial batch at the end (the broker's max
    bytes) is skipped, as every client does."""
    out: list[tuple[int, bytes | None]] = []
    pos = 0
    while pos + 12 <= len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        if length <= 0 or pos + 12 + length > len(data):
            break
        batch, _ = read_batch(data, pos)
        out += [(int(r.offset), r.value) for r in batch.records]
        pos += 12 + length
    return out


def _trace_answer(state: _State, broker: int, part: int, offset: int, hwm: int,
                  got: list[tuple[int, bytes | None]], sent: float) -> None:
    """One line for an answer that read records or moved the partition's high watermark on that broker."""
    if not got and state.answered.get((broker, part)) == hwm:
        return
    state.answered[(broker, part)] = hwm
    read = f"read {got[0][0]}..{got[-1][0]}" if got else "read nothing"
    state.log.info("t=%.3f fetch broker=%d partition=%d offset=%d high_watermark=%d %s (%.0f ms)",
                   state.spec.now(), broker, part, offset, hwm, read, (time.monotonic() - sent) * 1000)


def _broker_loop(state: _State, broker: int) -> None:
    """librdkafka's broker thread: one Fetch at a time for the partitions led by ``broker``."""
    spec, control = state.spec, state.control
    conn: KafkaConnection | None = None
    while not control.should_stop():
        with state.lock:
            parts = sorted(p for p, b in state.leader.items() if b == broker)
            addr = state.brokers.get(broker)
            positions = {p: state.position[p] for p in parts}
        if not parts or addr is None:
            time.sleep(0.05)
            continue
        if conn is None or (conn.host, conn.port) != addr:
            if conn is not None:
                conn.close()
            conn = KafkaConnection(*addr, timeout=2.0 + spec.fetch_wait_ms / 1000, client_id=spec.process,
                                   security=spec.security)
        req = FetchRequest(replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=spec.fetch_wait_ms)),
                           min_bytes=i32(1), max_bytes=i32(16 << 20), isolation_level=i8(0),
                           session_id=i32(0), session_epoch=i32(-1), forgotten_topics_data=(), rack_id="",
                           topics=(FetchTopic(topic=TopicName(spec.topic), partitions=tuple(
                               FetchPartition(partition=i32(p), current_leader_epoch=i32(-1),
                                              fetch_offset=i64(positions[p]), log_start_offset=i64(-1),
                                              partition_max_bytes=i32(PARTITION_MAX_BYTES)) for p in parts)),))
        sent = time.monotonic()
        try:
            resp = conn.request(req, FetchResponse)
        except WireError as e:
            state.log.info("t=%.3f fetch to broker %d (%s:%d) failed: %s; asking for metadata again",
                           spec.now(), broker, conn.host, conn.port, e)
            with state.lock:
                state.refresh_wanted = True
            time.sleep(0.1)
            continue
        for td in resp.responses:
            for pd in td.partitions:
                part = int(pd.partition_index)
                if part not in positions:
                    continue
                code = pd.error_code
                if code is ErrorCode.offset_out_of_range:
                    state.record(type=h.INFO, partition=part, offset=positions[part],
                                 error="OFFSET_OUT_OF_RANGE", error_code=int(code.value))
                    control.counters[ERRORS] += 1
                    try:
                        reset = _earliest(conn, spec.topic, part)
                    except WireError:
                        reset = None
                    with state.lock:
                        state.position[part] = reset if reset is not None else 0
                    continue
                if code is not ErrorCode.none:
                    state.record(type=h.INFO, partition=part, offset=positions[part],
                                 error=code.name.upper(), error_code=int(code.value))
                    control.counters[ERRORS] += 1
                    with state.lock:
                        state.refresh_wanted = True
                    continue
                got = [(o, v) for o, v in _records(bytes(pd.records or b"")) if o >= positions[part]]
                _trace_answer(state, broker, part, positions[part], int(pd.high_watermark), got, sent)
                for off, value in got:
                    state.record(type=h.OK, partition=part, offset=off,
                                 value=None if value is None else value.decode("utf-8", "replace"))
                    control.counters[READ] += 1
                if got:
                    with state.lock:
                        state.position[part] = got[-1][0] + 1
    if conn is not None:
        conn.close()


def _reader_main(spec: EpochlessReaderSpec, control: Control) -> None:
    state = _State(spec, control)
    threads: dict[int, threading.Thread] = {}
    try:
        _metadata(state)
        control.ready.set()
        while not control.should_stop():
            with state.lock:
                due = state.refresh_wanted or time.monotonic() - state.refreshed_at >= spec.metadata_refresh_s
            if due:
                _metadata(state)
            with state.lock:
                leaders = set(state.leader.values())
            for b in leaders - set(threads):
                threads[b] = threading.Thread(target=_broker_loop, args=(state, b), name=f"{spec.process}-{b}",
                                              daemon=True)
                threads[b].start()
            time.sleep(0.1)
    finally:
        control.stop.set()
        for t in threads.values():
            t.join(5.0)
        state.writer.close()


class EpochlessReaderWorkload(ReaderBacked):
    """One recorded reader process over every given partition of one topic (docstring above)."""

    def __init__(self, process: str, bootstrap: str, topic: str, partitions: int | Sequence[int],
                 history_dir: str | Path, now: Callable[[], float], *, fetch_wait_ms: int = 100,
                 metadata_refresh_s: float = METADATA_REFRESH_S, mode: str = "process",
                 security: ClientSecurity = PLAINTEXT):
        self.process = process
        self.history_path = Path(history_dir) / f"{process}.jsonl"
        self.spec = EpochlessReaderSpec(process=process, bootstrap=bootstrap, topic=topic,
                                        partitions=partition_list(partitions), history_path=str(self.history_path),
                                        now=now, fetch_wait_ms=fetch_wait_ms, metadata_refresh_s=metadata_refresh_s,
                                        security=security)
        self._worker = Worker(f"epochless-reader:{process}", _reader_main, self.spec, 2, mode)
