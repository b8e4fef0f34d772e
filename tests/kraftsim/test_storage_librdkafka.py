"""Real librdkafka record batches through kraftsim storage.

FAKE broker, and why: the batches must come from the real client (confluent-kafka/librdkafka),
but this storage test cannot wait for, or depend on, the full kraftsim broker. So a minimal
broker stand-in built from kio types answers ApiVersions v3, Metadata v12, InitProducerId v4 and
Produce v9 on 127.0.0.1, and hands every produced record set, byte for byte as librdkafka sent
it, to a real ``PartitionLog``. The storage side is entirely real: CRC32C validation of the
client's batches, offset assignment, on-disk segments, reads, decoding.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import uuid
from pathlib import Path

from confluent_kafka import Producer
from kio.schema.api_versions.v3 import response as av
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4 import response as ipr
from kio.schema.metadata.v12 import response as md
from kio.schema.produce.v9 import request as preq
from kio.schema.produce.v9 import response as presp
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i32Timedelta, i64

from kraftsim.storage.log import PartitionLog
from tests.support.tcpserver import LoopbackServer
from kraftsim.storage.records import decode_records, iter_batches, validate_batch

ZERO = i32Timedelta.parse(datetime.timedelta(0))
TOPIC = "orders"
PARTITIONS = 2


class CaptureBroker(LoopbackServer):
    def __init__(self, logs: dict[int, PartitionLog]) -> None:
        self.logs = logs
        self.raw: list[tuple[int, bytes]] = []
        self.errors: list[str] = []
        super().__init__()  # starts listening: attributes above must exist first

    def _serve(self, conn: socket.socket) -> None:
        try:
            while True:
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                data = conn.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
                header, pos = entity_reader(RequestHeader)(data, 0)
                try:
                    resp = self._answer(int(header.request_api_key), data, pos)
                except Exception as e:  # recorded and asserted on by the test
                    self.errors.append(f"api {int(header.request_api_key)}: {e!r}")
                    return
                out = io.BytesIO()
                htype = type(resp).__header_schema__
                entity_writer(htype)(out, htype(correlation_id=header.correlation_id))
                entity_writer(type(resp))(out, resp)
                body = out.getvalue()
                conn.sendall(struct.pack(">i", len(body)) + body)
        except OSError:
            return

    def _answer(self, api: int, data: bytes, pos: int):  # noqa: ANN202 - a kio response
        if api == 18:
            # Fetch (1) is advertised, never served: librdkafka only writes v2 batches (its
            # MsgVer2 feature) when the broker offers Produce >= 3 AND Fetch >= 4.
            keys = [(18, 0, 3), (3, 12, 12), (0, 9, 9), (1, 4, 12), (22, 4, 4)]
            return av.ApiVersionsResponse(error_code=ErrorCode.none, throttle_time=ZERO, api_keys=tuple(
                av.ApiVersion(api_key=i16(k), min_version=i16(lo), max_version=i16(hi)) for k, lo, hi in keys))
        if api == 3:
            me = (BrokerId(1),)
            parts = tuple(md.MetadataResponsePartition(
                error_code=ErrorCode.none, partition_index=i32(p), leader_id=BrokerId(1), leader_epoch=i32(4),
                replica_nodes=me, isr_nodes=me) for p in range(PARTITIONS))
            return md.MetadataResponse(
                throttle_time=ZERO, cluster_id="c", controller_id=BrokerId(1),
                brokers=(md.MetadataResponseBroker(node_id=BrokerId(1), host="127.0.0.1", port=i32(self.port)),),
                topics=(md.MetadataResponseTopic(error_code=ErrorCode.none, name=TopicName(TOPIC),
                                                 topic_id=uuid.uuid4(), partitions=parts),))
        if api == 22:
            return ipr.InitProducerIdResponse(throttle_time=ZERO, error_code=ErrorCode.none,
                                              producer_id=ProducerId(4242), producer_epoch=i16(0))
        if api == 0:
            req, _ = entity_reader(preq.ProduceRequest)(data, pos)
            topics = []
            for t in req.topic_data:
                answers = []
                for p in t.partition_data:
                    raw = bytes(p.records or b"")
                    self.raw.append((int(p.index), raw))
                    base, _last = self.logs[int(p.index)].append_as_leader(raw, 4)
                    answers.append(presp.PartitionProduceResponse(
                        index=p.index, error_code=ErrorCode.none, base_offset=i64(base), record_errors=()))
                topics.append(presp.TopicProduceResponse(name=t.name, partition_responses=tuple(answers)))
            return presp.ProduceResponse(responses=tuple(topics), throttle_time=ZERO)
        raise ValueError(f"stand-in broker does not serve api {api}")


def produce(port: int, n: int, idempotent: bool) -> list[tuple[int, int, bytes, bytes | None]]:
    reports: list = []
    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all", "enable.idempotence": idempotent,
                  "linger.ms": 20, "broker.address.family": "v4", "message.timeout.ms": 20000,
                  "compression.type": "none"})
    for i in range(n):
        p.produce(TOPIC, value=b"value-%d" % i, key=b"k%d" % (i % 7), partition=i % PARTITIONS,
                  headers=[("h", b"%d" % i)],
                  on_delivery=lambda err, m: reports.append((err, m.partition(), m.offset(), m.value(), m.key())))
    assert p.flush(30) == 0, "librdkafka did not deliver everything to the stand-in broker"
    assert all(err is None for err, *_ in reports), [r for r in reports if r[0] is not None][:3]
    return [(part, off, val, key) for _e, part, off, val, key in reports]


def run(tmp_path: Path, idempotent: bool) -> None:
    logs = {p: PartitionLog.open(tmp_path / f"{TOPIC}-{p}", TOPIC, p, recovery_point=0, clean=True)
            for p in range(PARTITIONS)}
    broker = CaptureBroker(logs)
    try:
        delivered = produce(broker.port, 300, idempotent)
    finally:
        broker.close()
    assert broker.errors == []
    assert broker.raw, "no Produce request reached the stand-in"
    for _part, raw in broker.raw:  # librdkafka's own bytes: valid v2 batches with good CRC32C
        hs = list(iter_batches(raw))
        assert hs and all(h.crc_valid for h in hs) and sum(h.length for h in hs) == len(raw)
        assert validate_batch(raw) is None
        if idempotent:
            assert all(h.producer_id == 4242 and h.producer_epoch == 0 and h.base_sequence >= 0 for h in hs)
        else:
            assert all(h.producer_id == -1 for h in hs)
    # Every delivery report's offset points at that exact record in the stored log.
    for p, log in logs.items():
        stored = {r.offset: r for r in decode_records_all(log)}
        mine = [d for d in delivered if d[0] == p]
        assert len(stored) == len(mine) == 150
        for _p, off, val, key in mine:
            assert stored[off].value == val and stored[off].key == key
            assert stored[off].headers == [("h", val.split(b"-")[1])]
        assert all(h.partition_leader_epoch == 4 and h.crc_valid for h in iter_batches(log.read(0, 10**7)))
        log.close(clean=True)


def decode_records_all(log: PartitionLog):
    data = log.read(0, 10**7)
    out = []
    for h in iter_batches(data):
        out += decode_records(data[h.position:h.position + h.length])
    return out


def test_librdkafka_batches_validate_and_store(tmp_path):
    run(tmp_path, idempotent=False)


def test_librdkafka_idempotent_batches_validate_and_store(tmp_path):
    run(tmp_path, idempotent=True)
