"""A metadata-only Kafka broker stand-in, built from kio types, for the observer's tests.

FAKE, and why: real Apache Kafka cannot be fetched or run on this machine, and kraftsim
answers Metadata but is not required to implement DescribeTopicPartitions (api 75) or ELR.
This stand-in answers exactly ApiVersions v3, Metadata v12 and DescribeTopicPartitions v0
with partition state the test sets, so the observer's request encoding, response decoding,
ELR handling, broker failover and stale-broker merge are exercised over real sockets with
real Kafka wire bytes. Everything else the observer does is tested against kraftsim.
"""
from __future__ import annotations

import datetime
import io
import socket
import struct
import uuid
from dataclasses import dataclass, field

from kio.schema.api_versions.v3 import response as av
from kio.schema.describe_topic_partitions.v0 import response as dtp
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import response as md
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i32Timedelta

from tests.support.tcpserver import LoopbackServer

ZERO = i32Timedelta.parse(datetime.timedelta(0))


@dataclass
class PartitionState:
    leader: int
    leader_epoch: int
    isr: list[int]
    elr: list[int] | None = None
    replicas: list[int] = field(default_factory=lambda: [1, 2, 3])


class KioBroker(LoopbackServer):
    """Serves one topic's partition state on 127.0.0.1; ``supports_dtp`` toggles api 75."""

    def __init__(self, node_id: int, topic: str, partitions: dict[int, PartitionState],
                 supports_dtp: bool = True, peers: list["KioBroker"] | None = None):
        self.node_id, self.topic, self.partitions = node_id, topic, partitions
        self.supports_dtp = supports_dtp
        self.peers = peers if peers is not None else []
        self.requests: list[int] = []
        super().__init__()  # starts listening: attributes above must exist first

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _serve(self, conn: socket.socket) -> None:
        try:
            while not self._stop.is_set():
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                (size,) = struct.unpack(">i", head)
                data = conn.recv(size, socket.MSG_WAITALL)
                header, _ = entity_reader(RequestHeader)(data, 0)
                self.requests.append(int(header.request_api_key))
                resp = self._answer(int(header.request_api_key))
                out = io.BytesIO()
                htype = type(resp).__header_schema__
                entity_writer(htype)(out, htype(correlation_id=header.correlation_id))
                entity_writer(type(resp))(out, resp)
                body = out.getvalue()
                conn.sendall(struct.pack(">i", len(body)) + body)
        except OSError:
            return

    def _answer(self, api_key: int):  # noqa: ANN202 - one of three kio response types
        if api_key == 18:
            keys = [av.ApiVersion(api_key=i16(18), min_version=i16(0), max_version=i16(3)),
                    av.ApiVersion(api_key=i16(3), min_version=i16(0), max_version=i16(12))]
            if self.supports_dtp:
                keys.append(av.ApiVersion(api_key=i16(75), min_version=i16(0), max_version=i16(0)))
            return av.ApiVersionsResponse(error_code=ErrorCode.none, api_keys=tuple(keys), throttle_time=ZERO)
        ids = lambda xs: tuple(BrokerId(x) for x in xs)  # noqa: E731
        if api_key == 3:
            brokers = tuple(md.MetadataResponseBroker(node_id=BrokerId(b.node_id), host="127.0.0.1",
                                                      port=i32(b.port)) for b in [self, *self.peers])
            parts = tuple(md.MetadataResponsePartition(
                error_code=ErrorCode.none, partition_index=i32(p), leader_id=BrokerId(s.leader),
                leader_epoch=i32(s.leader_epoch), replica_nodes=ids(s.replicas), isr_nodes=ids(s.isr))
                for p, s in sorted(self.partitions.items()))
            topic = md.MetadataResponseTopic(error_code=ErrorCode.none, name=TopicName(self.topic),
                                             topic_id=uuid.uuid4(), partitions=parts)
            return md.MetadataResponse(throttle_time=ZERO, brokers=brokers, topics=(topic,))
        if api_key == 75:
            parts = tuple(dtp.DescribeTopicPartitionsResponsePartition(
                error_code=ErrorCode.none, partition_index=i32(p), leader_id=BrokerId(s.leader),
                leader_epoch=i32(s.leader_epoch), replica_nodes=ids(s.replicas), isr_nodes=ids(s.isr),
                eligible_leader_replicas=None if s.elr is None else ids(s.elr))
                for p, s in sorted(self.partitions.items()))
            topic = dtp.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.none, name=TopicName(self.topic), topic_id=uuid.uuid4(), partitions=parts)
            return dtp.DescribeTopicPartitionsResponse(throttle_time=ZERO, topics=(topic,))
        raise ValueError(f"stand-in broker does not serve api {api_key}")
