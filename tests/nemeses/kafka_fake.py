"""A tiny kio-speaking controller and broker-side client, for testing the proxy alone.

FAKE, and why: the proxy must be tested before kraftsim (the real target) is available and
without the timing noise of a whole cluster. This controller answers BrokerRegistration
(62), BrokerHeartbeat (63) and AlterPartition (56, v2/v3) over real TCP with real
kio-encoded frames; with ``kip903=True`` it rejects an AlterPartition whose new ISR carries
a stale broker epoch with INELIGIBLE_REPLICA, as docs/seeds.md#seed-000's controller does. Any other API
key is echoed back verbatim, so byte-for-byte passthrough can be checked.
"""
from __future__ import annotations

import io
import socket
import socketserver
import threading
import uuid
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_reader, entity_writer
import datetime

from kio.static.primitive import i8, i16, i32, i64, i32Timedelta

ZERO_MS = i32Timedelta.parse(datetime.timedelta(0))


def encode(header: Any, body: Any) -> bytes:
    b = io.BytesIO()
    entity_writer(type(header))(b, header)
    entity_writer(type(body))(b, body)
    data = b.getvalue()
    return len(data).to_bytes(4, "big") + data


def read_frame(sock: socket.socket) -> bytes | None:
    def exact(n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf
    size = exact(4)
    return None if size is None else exact(int.from_bytes(size, "big"))


class FakeController:
    def __init__(self, kip903: bool = False):
        self.kip903 = kip903
        self.epochs: dict[int, int] = {}
        self.next_epoch = 100
        self.isr: dict[tuple[str, int], list[int]] = {}
        self.partition_epoch: dict[tuple[str, int], int] = {}
        self.log: list[tuple[str, Any]] = []
        self.lock = threading.Lock()
        ctl = self

        self.conns: list[socket.socket] = []

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                ctl.conns.append(self.request)
                while (frame := read_frame(self.request)) is not None:
                    out = ctl.answer(frame)
                    self.request.sendall(out)

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def kill(self) -> None:
        """Die as a SIGKILLed controller does: stop listening and reset every connection."""
        self.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass

    def answer(self, frame: bytes) -> bytes:
        key, ver = int.from_bytes(frame[0:2], "big"), int.from_bytes(frame[2:4], "big")
        if key not in (56, 62, 63):
            return len(frame).to_bytes(4, "big") + frame      # echo: passthrough check
        req_t, resp_t = load_request_schema(key, ver), load_response_schema(key, ver)
        hdr, n = entity_reader(RequestHeader)(frame, 0)
        req, _ = entity_reader(req_t)(frame, n)
        rh = ResponseHeader(correlation_id=hdr.correlation_id)
        with self.lock:
            if key == 62:
                self.next_epoch += 1
                self.epochs[int(req.broker_id)] = self.next_epoch
                for isr in self.isr.values():            # fencing a re-registered broker
                    if int(req.broker_id) in isr:
                        isr.remove(int(req.broker_id))
                self.log.append(("registered", int(req.broker_id), self.next_epoch))
                return encode(rh, resp_t(throttle_time=ZERO_MS, error_code=ErrorCode.none,
                                         broker_epoch=i64(self.next_epoch)))
            if key == 63:
                self.log.append(("heartbeat", int(req.broker_id)))
                return encode(rh, resp_t(throttle_time=ZERO_MS, error_code=ErrorCode.none,
                                         is_caught_up=True, is_fenced=False, should_shut_down=False))
            mod = __import__(f"kio.schema.alter_partition.v{ver}.response", fromlist=["x"])
            topics = []
            for t in req.topics:
                parts = []
                for p in t.partitions:
                    k = (str(t.topic_id), int(p.partition_index))
                    if hasattr(p, "new_isr_with_epochs"):
                        new = [(int(b.broker_id), int(b.broker_epoch)) for b in p.new_isr_with_epochs]
                    else:
                        new = [(int(b), -1) for b in p.new_isr]
                    stale = self.kip903 and any(e != -1 and self.epochs.get(b) != e for b, e in new)
                    pe = self.partition_epoch.get(k, 0)
                    if stale:
                        code, isr = ErrorCode.ineligible_replica, self.isr.get(k, [])
                    else:
                        code, isr, pe = ErrorCode.none, [b for b, _ in new], pe + 1
                        self.isr[k], self.partition_epoch[k] = isr, pe
                    self.log.append(("alter_partition", k, [b for b, _ in new], int(code)))
                    parts.append(mod.PartitionData(partition_index=i32(k[1]), error_code=code,
                                                   leader_id=req.broker_id, leader_epoch=p.leader_epoch,
                                                   isr=tuple(isr), leader_recovery_state=i8(0),
                                                   partition_epoch=i32(pe)))
                topics.append(mod.TopicData(topic_id=t.topic_id, partitions=tuple(parts)))
            return encode(rh, resp_t(throttle_time=ZERO_MS, error_code=ErrorCode.none,
                                     topics=tuple(topics)))


class BrokerClient:
    """One broker-side connection (lifecycle or alter-partition channel) to ``addr``."""

    def __init__(self, addr: tuple[str, int], broker_id: int):
        self.sock = socket.create_connection(addr, timeout=10)
        self.broker_id = broker_id
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def _hdr(self, key: int, ver: int) -> RequestHeader:
        self.corr += 1
        return RequestHeader(request_api_key=i16(key), request_api_version=i16(ver),
                             correlation_id=i32(self.corr), client_id=f"broker-{self.broker_id}")

    def send(self, key: int, ver: int, body: Any) -> None:
        self.sock.sendall(encode(self._hdr(key, ver), body))

    def recv(self, key: int, ver: int, timeout: float = 10) -> Any:
        self.sock.settimeout(timeout)
        frame = read_frame(self.sock)
        assert frame is not None, "connection closed"
        _, n = entity_reader(ResponseHeader)(frame, 0)
        return entity_reader(load_response_schema(key, ver))(frame, n)[0]

    def register(self) -> int:
        R = load_request_schema(62, 4)
        self.send(62, 4, R(broker_id=i32(self.broker_id), cluster_id="fake", incarnation_id=uuid.uuid4(),
                           listeners=(), features=(), rack=None, previous_broker_epoch=i64(-1)))
        return int(self.recv(62, 4).broker_epoch)

    def heartbeat(self, epoch: int) -> Any:
        R = load_request_schema(63, 1)
        self.send(63, 1, R(broker_id=i32(self.broker_id), broker_epoch=i64(epoch),
                           current_metadata_offset=i64(0), want_fence=False, want_shut_down=False))
        return self.recv(63, 1)

    def send_alter_partition(self, topic_id: uuid.UUID, partition: int, isr: dict[int, int],
                             epoch: int, version: int = 3) -> None:
        m = __import__(f"kio.schema.alter_partition.v{version}.request", fromlist=["x"])
        if version == 3:
            members: Any = tuple(m.BrokerState(broker_id=i32(b), broker_epoch=i64(e)) for b, e in isr.items())
            pd = m.PartitionData(partition_index=i32(partition), leader_epoch=i32(1),
                                 new_isr_with_epochs=members, partition_epoch=i32(0))
        else:
            pd = m.PartitionData(partition_index=i32(partition), leader_epoch=i32(1),
                                 new_isr=tuple(i32(b) for b in isr), partition_epoch=i32(0))
        self.send(56, version, m.AlterPartitionRequest(
            broker_id=i32(self.broker_id), broker_epoch=i64(epoch),
            topics=(m.TopicData(topic_id=topic_id, partitions=(pd,)),)))
