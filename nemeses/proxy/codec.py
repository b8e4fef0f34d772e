"""Decoding just enough of the Kafka protocol, with kio, to see AlterPartition.

A request frame is ``int32 size`` + header + body; the header's version follows the
request schema's flexibility (v2 for flexible APIs, v1 otherwise), which kio knows per
(api key, version). Only AlterPartition (56), BrokerRegistration (62) and BrokerHeartbeat
(63) bodies are decoded; anything kio does not know is passed on untouched and merely counted.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader
from kio.serial.readers import read_int16, read_int32

ALTER_PARTITION = 56
BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
#: the APIs whose bodies the proxy reads; everything else is only framed and forwarded
DECODED = (ALTER_PARTITION, BROKER_REGISTRATION, BROKER_HEARTBEAT)


@dataclass
class RequestInfo:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    body: Any = None               # decoded body for the APIs we look into


def peek_request(frame: bytes) -> RequestInfo:
    """Header of a request frame (without the 4-byte size); the body for APIs we decode."""
    api_key = read_int16(frame, 0)[0]
    api_version = read_int16(frame, 2)[0]
    corr = read_int32(frame, 4)[0]
    info = RequestInfo(api_key, api_version, corr)
    if api_key not in DECODED:
        return info
    try:
        schema = load_request_schema(api_key, api_version)
    except Exception:
        return info
    hdr_type = RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1
    hdr, n = entity_reader(hdr_type)(frame, 0)
    info.client_id = hdr.client_id
    info.body, _ = entity_reader(schema)(frame, n)
    return info


def response_correlation_id(frame: bytes) -> int:
    return read_int32(frame, 0)[0]


def decode_response(frame: bytes, api_key: int, api_version: int) -> Any:
    schema = load_response_schema(api_key, api_version)
    hdr_type = ResponseHeaderV1 if schema.__flexible__ else ResponseHeaderV0
    _, n = entity_reader(hdr_type)(frame, 0)
    return entity_reader(schema)(frame, n)[0]


def error_name(code: int) -> str | None:
    if code == 0:
        return None
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_{code}"


@dataclass
class PartitionChange:
    """One partition of an AlterPartition request, in Kafka's words."""
    topic_id: str | None
    topic_name: str | None
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    new_isr: list[int]
    broker_epochs: dict[int, int] = field(default_factory=dict)   # v3: NewIsrWithEpochs


def partition_changes(req: Any) -> list[PartitionChange]:
    out = []
    for t in req.topics:
        tid = getattr(t, "topic_id", None)
        tname = getattr(t, "topic_name", None)
        for p in t.partitions:
            if hasattr(p, "new_isr_with_epochs"):
                isr = [int(b.broker_id) for b in p.new_isr_with_epochs]
                epochs = {int(b.broker_id): int(b.broker_epoch) for b in p.new_isr_with_epochs}
            else:
                isr, epochs = [int(b) for b in p.new_isr], {}
            out.append(PartitionChange(str(tid) if isinstance(tid, uuid.UUID) else tid, tname,
                                       int(p.partition_index), int(req.broker_id), int(p.leader_epoch),
                                       int(p.partition_epoch), isr, epochs))
    return out
