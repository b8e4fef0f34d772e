"""Test-side helpers: real confluent-kafka clients, a kio DescribeTopicPartitions call, and a
small TCP relay in front of the controller that can hold AlterPartition or cut one broker.

The relay is the test's own (the product's AlterPartition proxy lives in nemeses/ and is not
imported here): it forwards bytes both ways, parses only the 4-byte frame length and the api key
of broker->controller frames, and — when told — keeps AlterPartition (api 56) frames until
released, or blackholes every connection from one broker's source address (brokers bind their
outgoing sockets to their own listener IP, so the relay can tell them apart).
"""
from __future__ import annotations

import io
import os
import socket
import subprocess
import struct
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_response_schema
from kio.schema.describe_topic_partitions.v0.request import DescribeTopicPartitionsRequest, TopicRequest
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer


def create_topic(bootstrap: str, name: str, partitions: int = 3, rf: int = 3, min_isr: int = 2,
                 assignment: list[list[int]] | None = None, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cfg = {"min.insync.replicas": str(min_isr), **(config or {})}
    if assignment:
        nt = NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment, config=cfg)
    else:
        nt = NewTopic(name, partitions, rf, config=cfg)
    admin.create_topics([nt])[name].result(15)


class TrackingProducer:
    """acks=all producer recording every delivery report: value -> (partition, offset) or error."""

    def __init__(self, bootstrap: str, idempotent: bool = False, **conf: Any):
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": idempotent,
                           "linger.ms": 5, "message.timeout.ms": 30000, "retry.backoff.ms": 100,
                           "topic.metadata.refresh.interval.ms": 1000, **conf})
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: dict[bytes, str] = {}
        self.ack_time: dict[bytes, float] = {}

    def _cb(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed[msg.value()] = err.name()
        else:
            self.acked[msg.value()] = (msg.partition(), msg.offset())
            self.ack_time[msg.value()] = time.time()

    def send(self, topic: str, value: bytes, partition: int | None = None) -> None:
        kw: dict[str, Any] = {"partition": partition} if partition is not None else {"key": value}
        while True:
            try:
                self.p.produce(topic, value=value, on_delivery=self._cb, **kw)
                break
            except BufferError:
                self.p.poll(0.05)
        self.p.poll(0)

    def flush(self, timeout: float = 30.0) -> None:
        self.p.flush(timeout)


def read_all(bootstrap: str, topic: str, partitions: list[int], timeout: float = 20.0,
             expect: int | None = None) -> dict[bytes, tuple[int, int]]:
    """Read each partition from offset 0 up to its high watermark at call time."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kraftsim-test", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
    try:
        ends = {}
        deadline = time.time() + timeout
        for p in partitions:
            while True:  # leadership may still be settling after a fault: retry NOT_LEADER etc.
                try:
                    _, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
                    break
                except KafkaException:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.2)
            ends[p] = hi
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        seen: dict[bytes, tuple[int, int]] = {}
        pos = {p: 0 for p in partitions}
        end = time.time() + timeout
        while time.time() < end and any(pos[p] < ends[p] for p in partitions):
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                continue
            seen[m.value()] = (m.partition(), m.offset())
            pos[m.partition()] = m.offset() + 1
        return seen
    finally:
        c.close()


def describe_partitions(host: str, port: int, topic: str) -> list[Any]:
    """DescribeTopicPartitions (api 75) over a raw socket with kio: ISR, ELR, last known ELR."""
    req = DescribeTopicPartitionsRequest(topics=(TopicRequest(name=topic),), response_partition_limit=100, cursor=None)
    hdr = RequestHeader(request_api_key=75, request_api_version=0, correlation_id=7, client_id="test")
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, hdr)
    entity_writer(DescribeTopicPartitionsRequest)(buf, req)
    body = buf.getvalue()
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv(s, 4))[0]
        data = _recv(s, size)
    cls = load_response_schema(75, 0)
    _, n = entity_reader(cls.__header_schema__)(data, 0)
    resp, _ = entity_reader(cls)(data, n)
    return list(resp.topics[0].partitions)


def _recv(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


class ControllerRelay:
    """TCP relay in front of the controller; ``hold_alter_partition`` / ``release``; ``cut(ip)``."""

    def __init__(self, target: tuple[str, int], listen: tuple[str, int] = ("127.0.0.1", 0)):
        self.target = target
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(listen)
        self.sock.listen(64)
        self.listen = self.sock.getsockname()
        self.lock = threading.Lock()
        self.holding = False
        self.held: list[tuple[socket.socket, bytes]] = []
        self.held_count = 0
        self.cut_ips: set[str] = set()
        self.conns: list[tuple[str, socket.socket, socket.socket]] = []
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def hold_alter_partition(self) -> None:
        with self.lock:
            self.holding = True

    def release(self) -> None:
        with self.lock:
            self.holding = False
            held, self.held = self.held, []
        for up, frame in held:
            try:
                up.sendall(frame)
            except OSError:
                pass

    def cut(self, ip: str) -> None:
        with self.lock:
            self.cut_ips.add(ip)
            conns = [c for c in self.conns if c[0] == ip]
        for _, a, b in conns:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def heal(self, ip: str) -> None:
        with self.lock:
            self.cut_ips.discard(ip)

    def close(self) -> None:
        self.running = False
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            conns = list(self.conns)
        for _, a, b in conns:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def _accept(self) -> None:
        while self.running:
            try:
                down, addr = self.sock.accept()
            except OSError:
                return
            ip = addr[0]
            with self.lock:
                if ip in self.cut_ips:
                    down.close()  # the broker cannot reach the controller
                    continue
            try:
                up = socket.create_connection(self.target, timeout=5)
                up.settimeout(None)
            except OSError:
                down.close()
                continue
            with self.lock:
                self.conns.append((ip, down, up))
            threading.Thread(target=self._pump_requests, args=(down, up), daemon=True).start()
            threading.Thread(target=self._pump_raw, args=(up, down), daemon=True).start()

    def _pump_raw(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.close()
            except OSError:
                pass

    def _pump_requests(self, down: socket.socket, up: socket.socket) -> None:
        try:
            while True:
                head = _recv(down, 4)
                size = struct.unpack(">i", head)[0]
                body = _recv(down, size)
                api_key = struct.unpack(">h", body[:2])[0]
                with self.lock:
                    if api_key == 56 and self.holding:
                        self.held.append((up, head + body))
                        self.held_count += 1
                        continue
                up.sendall(head + body)
        except (OSError, ConnectionError, struct.error):
            pass
        for s in (down, up):
            try:
                s.close()
            except OSError:
                pass


# --------------------------------------------------------------------------- faults


def cut_to_recovery_point(data_dir: Path, topic: str, partition: int) -> int:
    """Page-cache loss on a stopped broker, the recipe of docs/kraftsim-storage.md: cut the
    partition's segments back to its recovery point. Returns the recovery point."""
    rp = 0
    ckpt = data_dir / "recovery-point-offset-checkpoint"
    if ckpt.exists():
        for line in ckpt.read_text().splitlines()[2:]:
            t, p, off = line.split()
            if t == topic and int(p) == partition:
                rp = int(off)
    pdir = data_dir / f"{topic}-{partition}"
    segs = sorted(pdir.glob("*.log"), key=lambda f: int(f.stem))
    keep = [s for s in segs if int(s.stem) <= rp] or segs[:1]
    head = keep[-1]
    data = head.read_bytes()
    pos = 0
    while pos + 12 <= len(data):
        base, length = struct.unpack(">qi", data[pos:pos + 12])
        if base >= rp:
            break
        pos += 12 + length
    with open(head, "r+b") as f:
        f.truncate(pos)
    for s in segs:
        if int(s.stem) > int(head.stem):
            s.unlink()
            for ext in (".index", ".timeindex"):
                s.with_suffix(ext).unlink(missing_ok=True)
    for ext in (".index", ".timeindex"):
        head.with_suffix(ext).unlink(missing_ok=True)
    (data_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)
    return rp


class IptablesDrop:
    """One tagged DROP rule on loopback (src ip -> dst ip:port), always removed by ``remove``."""

    def __init__(self, src: str, dst: str, dport: int):
        self.spec = ["INPUT", "-p", "tcp", "-s", src, "-d", dst, "--dport", str(dport), "-j", "DROP",
                     "-m", "comment", "--comment", f"faultline-test-kraftsim-{os.getpid()}"]
        subprocess.run(["iptables", "-I", *self.spec], check=True, capture_output=True)

    def remove(self) -> None:
        while subprocess.run(["iptables", "-D", *self.spec], capture_output=True).returncode == 0:
            pass
