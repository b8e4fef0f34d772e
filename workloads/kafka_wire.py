"""A minimal blocking Kafka protocol connection built on kio's request/response types.

Why not confluent-kafka here: librdkafka's metadata API exposes leader and ISR but not the
leader epoch nor the Eligible Leader Replicas (KIP-966), and it caches metadata; the
observer needs both, fresh, per request. kio provides the message structs and their
(de)serialisation; this module adds only what kio leaves out: framing (int32 size prefix),
request headers with correlation ids, and a socket with timeouts - TLS and SASL where the
listener wants them (workloads/security.py, the same settings librdkafka's clients get).
"""
from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from workloads.security import PLAINTEXT, AuthenticationFailed, ClientSecurity

_SIZE = struct.Struct(">i")
MAX_RESPONSE = 64 * 1024 * 1024


class WireError(Exception):
    """The broker could not be reached or answered something unreadable."""


class WireAuthError(WireError):
    """The broker refused the connection's TLS handshake or SASL credentials."""


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` → ``[("h1", 9092), ("h2", 9093)]`` (IPv6 as ``[::1]:9092``)."""
    out: list[tuple[str, int]] = []
    for item in bootstrap.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap.servers: {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("bootstrap.servers: no host:port given")
    return out


class KafkaConnection:
    """One TCP connection to one broker; ``request()`` sends and waits for the answer."""

    def __init__(self, host: str, port: int, timeout: float = 1.0, client_id: str = "faultline",
                 security: ClientSecurity = PLAINTEXT):
        self.host, self.port, self.timeout, self.client_id = host, port, timeout, client_id
        self.security = security
        self._sock: socket.socket | None = None
        self._correlation = 0

    def connect(self) -> None:
        if self._sock is None:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
                sock.settimeout(self.timeout)
                self._sock = self.security.wrap(sock, self.host)
            except AuthenticationFailed as exc:
                raise WireAuthError(str(exc)) from None
            except OSError as exc:
                raise WireError(f"{self.host}:{self.port}: {exc}") from None
            try:
                self.security.authenticate(self._exchange)
            except AuthenticationFailed as exc:
                self.close()
                raise WireAuthError(f"{self.host}:{self.port}: {exc}") from None

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def _recv_exact(self, n: int) -> bytes:
        assert self._sock is not None
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise WireError(f"{self.host}:{self.port}: connection closed by broker")
            buf += chunk
        return bytes(buf)

    def request(self, req: Any, response_type: type) -> Any:
        """Send one kio request entity; return the decoded kio response entity."""
        self.connect()
        return self._exchange(req, response_type)

    def _exchange(self, req: Any, response_type: type) -> Any:
        """One request and its response on the open connection (SASL's own exchange uses it too)."""
        self._correlation = (self._correlation + 1) % (1 << 31)
        header_type = type(req).__header_schema__
        header = header_type(request_api_key=i16(type(req).__api_key__),
                             request_api_version=i16(type(req).__version__),
                             correlation_id=i32(self._correlation), client_id=self.client_id)
        body = io.BytesIO()
        entity_writer(header_type)(body, header)
        entity_writer(type(req))(body, req)
        payload = body.getvalue()
        try:
            assert self._sock is not None
            self._sock.sendall(_SIZE.pack(len(payload)) + payload)
            (size,) = _SIZE.unpack(self._recv_exact(4))
            if not 0 < size <= MAX_RESPONSE:
                raise WireError(f"{self.host}:{self.port}: bad response size {size}")
            data = self._recv_exact(size)
        except (OSError, WireError) as exc:
            self.close()
            raise WireError(str(exc) if isinstance(exc, WireError) else f"{self.host}:{self.port}: {exc}") from None
        try:
            resp_header, used = entity_reader(response_type.__header_schema__)(data, 0)
            if resp_header.correlation_id != self._correlation:
                raise WireError(f"{self.host}:{self.port}: correlation id {resp_header.correlation_id}"
                                f" != {self._correlation}")
            resp, _ = entity_reader(response_type)(data, used)
        except WireError:
            self.close()
            raise
        except Exception as exc:  # undecodable answer: drop the connection, let caller fail over
            self.close()
            raise WireError(f"{self.host}:{self.port}: cannot decode {response_type.__name__}: {exc}") from None
        return resp


def probe(bootstrap: str, security: ClientSecurity = PLAINTEXT, timeout: float = 5.0) -> str | None:
    """Can a client of these settings talk to the cluster? Opens a connection to each bootstrap
    broker in turn (TLS and SASL as configured) and asks ApiVersions; None on the first that
    answers, else the one line why not - an authentication failure wins over an unreachable
    broker, since it is what the user must fix."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    from kio.schema.api_versions.v3.response import ApiVersionsResponse

    last = "no bootstrap broker"
    for host, port in parse_bootstrap(bootstrap):
        conn = KafkaConnection(host, port, timeout=timeout, client_id="faultline-probe", security=security)
        try:
            conn.request(ApiVersionsRequest(client_software_name="faultline", client_software_version="0.1"),
                         ApiVersionsResponse)
            return None
        except WireAuthError as e:
            return f"authentication failed: {e}"
        except WireError as e:
            last = str(e)
        finally:
            conn.close()
    return f"no bootstrap broker answered ({last})"
