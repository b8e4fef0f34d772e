"""Kafka wire protocol glue over kio: frames, headers, dispatch, and a small async client.

Why kio and not hand-written structs: the faultline proxy and real clients speak the same
schemas, so a field kraftsim gets wrong would be a bug in kio's generated code, not a
second, private reading of the protocol. This module only frames bytes and picks the
right kio class for (api_key, version); the request header version comes from the
request schema (flexible versions use header v2), the response header from the response
schema (ApiVersions always answers with header v0, as Kafka does).
"""
from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import io
import itertools
import struct
import typing
from typing import Any, Awaitable, Callable

from kio import index as _kio_index
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

MAX_FRAME = 100 * 1024 * 1024

#: kio's (api_key, version) -> schema class, remembered: kio resolves the class by its dotted
#: name (pkgutil.resolve_name, an import-machinery lookup) on every call, and kraftsim calls it
#: for every request and response it builds or decodes - a tenth of a busy broker's CPU.
load_request_schema = functools.cache(_kio_index.load_request_schema)
load_response_schema = functools.cache(_kio_index.load_response_schema)


class ProtocolError(Exception):
    pass


# --------------------------------------------------------------------------- building

_hints_cache: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    h = _hints_cache.get(cls)
    if h is None:
        h = typing.get_type_hints(cls)
        _hints_cache[cls] = h
    return h


def _entity_of(t: Any) -> type | None:
    if dataclasses.is_dataclass(t):
        return t  # type: ignore[return-value]
    for a in typing.get_args(t):
        if dataclasses.is_dataclass(a):
            return a  # type: ignore[return-value]
        for b in typing.get_args(a):
            if dataclasses.is_dataclass(b):
                return b  # type: ignore[return-value]
    return None


@functools.cache
def _fields(cls: type) -> tuple[tuple[dataclasses.Field, Any, Any, type | None], ...]:
    """Each field of a kio entity with its Kafka type, type hint and nested entity class, worked
    out once per class (``build`` runs for every message kraftsim sends)."""
    hints = _hints(cls)
    return tuple((f, f.metadata.get("kafka_type"), hints[f.name], _entity_of(hints[f.name]))
                 for f in dataclasses.fields(cls))


def build(cls: type, data: dict[str, Any] | None = None, fill_error: ErrorCode | None = None) -> Any:
    """Build a kio entity of any version from a plain dict.

    Keys the version does not have are ignored, missing required fields get zero values,
    so one handler serves every version it advertises. Nested entity lists are given as
    lists of dicts. ``fill_error`` sets every error_code that was not given (used to
    answer a request we cannot serve with the proper error instead of a dropped socket).
    """
    data = data or {}
    kwargs: dict[str, Any] = {}
    for f, ktype, t, inner in _fields(cls):
        if f.name in data:
            v = data[f.name]
            if inner is not None and v is not None:
                if isinstance(v, (list, tuple)):
                    v = tuple(x if dataclasses.is_dataclass(x) else build(inner, x, fill_error) for x in v)
                elif isinstance(v, dict):
                    v = build(inner, v, fill_error)
            elif ktype == "error_code":
                v = ErrorCode(int(v))
            elif ktype in ("timedelta_i32", "timedelta_i64") and isinstance(v, (int, float)):
                v = datetime.timedelta(milliseconds=v)
            elif isinstance(v, list):
                v = tuple(v)
            kwargs[f.name] = v
            continue
        if ktype == "error_code":
            kwargs[f.name] = fill_error if fill_error is not None else ErrorCode.none
            continue
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            continue
        origin = typing.get_origin(t)
        if inner is not None and (origin is tuple or tuple in [typing.get_origin(a) for a in typing.get_args(t)]):
            kwargs[f.name] = ()
        elif inner is not None:
            kwargs[f.name] = None if type(None) in typing.get_args(t) else build(inner, {}, fill_error)
        elif ktype in ("timedelta_i32", "timedelta_i64"):
            kwargs[f.name] = datetime.timedelta(0)
        elif ktype in ("string",):
            kwargs[f.name] = None if type(None) in typing.get_args(t) else ""
        elif ktype == "records":
            kwargs[f.name] = None
        elif ktype == "uuid":
            kwargs[f.name] = None
        elif ktype == "bool":
            kwargs[f.name] = False
        elif origin is tuple:
            kwargs[f.name] = ()
        else:
            kwargs[f.name] = 0
    return cls(**kwargs)


# --------------------------------------------------------------------------- framing


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readexactly(4)
    (size,) = struct.unpack(">i", head)
    if size < 0 or size > MAX_FRAME:
        raise ProtocolError(f"bad frame size {size}")
    return await reader.readexactly(size)


def encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def frame(*parts: bytes) -> bytes:
    body = b"".join(parts)
    return struct.pack(">i", len(body)) + body


def peek_header(data: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) — readable for every header version."""
    if len(data) < 8:
        raise ProtocolError("request shorter than a header")
    return struct.unpack(">hhi", data[:8])


def decode_request(data: bytes) -> tuple[Any, Any]:
    api_key, version, _ = peek_header(data)
    cls = load_request_schema(api_key, version)
    header, n = entity_reader(cls.__header_schema__)(data, 0)
    req, _ = entity_reader(cls)(data, n)
    return header, req


def encode_response(api_key: int, version: int, correlation_id: int, resp: Any) -> bytes:
    cls = load_response_schema(api_key, version)
    hcls = cls.__header_schema__
    header = hcls(correlation_id=correlation_id)
    return frame(encode(header), encode(resp))


def error_response(api_key: int, version: int, code: ErrorCode, extra: dict | None = None) -> Any:
    """A response of that exact version carrying ``code`` everywhere an error code fits."""
    return build(load_response_schema(api_key, version), extra or {}, fill_error=code)


# --------------------------------------------------------------------------- private requests

#: kraftsim-only request keys, outside Kafka's range (Kafka's api keys are < 100). A request is
#: Kafka's header v1 (api key, version, correlation id, client id) and a JSON body; the response
#: is the correlation id and a JSON body. They carry what a proposal adds to Kafka's protocol
#: while kio's schemas lack it: 10004 = docs/seeds.md#seed-004's local-log report (LocalLogStartTimestamp /
#: LocalLogSizeBytes per ISR member, which the seed adds to AlterPartition). A proxy that does
#: not know the key passes it on untouched; a Kafka broker would answer UNSUPPORTED_VERSION.
PRIVATE_LOCAL_LOG_REPORT = 10004


def private_body(data: bytes) -> bytes:
    """The body of a private request (after header v1's nullable client id)."""
    (n,) = struct.unpack(">h", data[8:10])
    return data[10 + max(n, 0):]


# --------------------------------------------------------------------------- server

Handler = Callable[[Any, Any, "Peer"], Awaitable[Any]]


@dataclasses.dataclass
class Peer:
    host: str
    port: int


class Server:
    """Serves one listener. ``handlers`` maps api_key -> async handler(header, request, peer).

    ``versions`` maps api_key -> (min, max): exactly what ApiVersions advertises. Requests for
    other keys/versions get UNSUPPORTED_VERSION in a response of the requested version
    (Kafka's behaviour for ApiVersions; for other APIs it keeps the connection usable).
    Responses on one connection go out in request order, as Kafka guarantees, while the
    handlers of pipelined requests run concurrently (a held acks=all produce must not block
    the next request's parsing).
    """

    def __init__(self, versions: dict[int, tuple[int, int]], handlers: dict[int, Handler],
                 on_error: Callable[[str], None] | None = None):
        self.versions = versions
        self.handlers = handlers
        self.on_error = on_error or (lambda m: None)
        self.server: asyncio.AbstractServer | None = None
        self.writers: set[asyncio.StreamWriter] = set()
        #: api_key -> async handler(body bytes, peer) -> body bytes, for kraftsim's private
        #: requests that have no Kafka schema (never advertised in ApiVersions; see PRIVATE_APIS)
        self.raw_handlers: dict[int, Callable[[bytes, "Peer"], Awaitable[bytes]]] = {}
        #: when set, requests wait for it before they are processed: Kafka binds its listeners
        #: early but enables request processing only at the end of start-up
        #: (BrokerServer.startup → SocketServer.enableRequestProcessing)
        self.gate: asyncio.Event | None = None

    async def start(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self._conn, host, port, reuse_address=True, limit=MAX_FRAME)

    def close(self) -> None:
        if self.server:
            self.server.close()
        for w in list(self.writers):
            w.close()

    def api_versions_body(self, version: int, code: ErrorCode = ErrorCode.none) -> Any:
        cls = load_response_schema(18, version)
        keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(self.versions.items())]
        return build(cls, {"error_code": code, "api_keys": keys, "throttle_time": 0})

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        pn = writer.get_extra_info("peername") or ("?", 0)
        peer = Peer(pn[0], pn[1])
        queue: asyncio.Queue[asyncio.Future | None] = asyncio.Queue()
        sender = asyncio.ensure_future(self._send_loop(queue, writer))
        try:
            try:
                while True:
                    data = await read_frame(reader)
                    queue.put_nowait(asyncio.ensure_future(self._handle(data, peer)))
            except (asyncio.IncompleteReadError, ConnectionError, ProtocolError, OSError):
                pass
            queue.put_nowait(None)  # answer what was asked before the client hung up
            try:
                await asyncio.wait_for(sender, 30)
            except Exception:  # noqa: BLE001
                sender.cancel()
        except asyncio.CancelledError:
            # process shutdown: end quietly (a cancelled connection task makes asyncio print a
            # traceback for every open connection)
            sender.cancel()
        finally:
            self.writers.discard(writer)
            writer.close()

    async def _send_loop(self, queue: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
        while True:
            fut = await queue.get()
            if fut is None:
                return
            try:
                out = await fut
            except Exception as e:  # a handler bug must not kill the listener
                self.on_error(f"handler failed: {type(e).__name__}: {e}")
                out = None
            if out is None:
                continue
            try:
                writer.write(out)
                await writer.drain()
            except (ConnectionError, RuntimeError):
                return

    async def _handle(self, data: bytes, peer: Peer) -> bytes | None:
        if self.gate is not None and not self.gate.is_set():
            await self.gate.wait()
        api_key, version, corr = peek_header(data)
        raw = self.raw_handlers.get(api_key)
        if raw is not None:
            return frame(struct.pack(">i", corr), await raw(private_body(data), peer))
        lo_hi = self.versions.get(api_key)
        if api_key == 18 and (lo_hi is None or not lo_hi[0] <= version <= lo_hi[1]):
            # KIP-511: answer with a v0 response listing what we support.
            return encode_response(18, 0, corr, self.api_versions_body(0, ErrorCode.unsupported_version))
        if lo_hi is None or not lo_hi[0] <= version <= lo_hi[1]:
            try:
                return encode_response(api_key, version, corr, error_response(api_key, version, ErrorCode.unsupported_version))
            except Exception:
                self.on_error(f"unsupported api {api_key} v{version}: no schema to answer with; closing")
                raise ProtocolError("unsupported") from None
        try:
            header, req = decode_request(data)
        except Exception as e:
            self.on_error(f"cannot decode api {api_key} v{version}: {e}")
            return encode_response(api_key, version, corr, error_response(api_key, version, ErrorCode.corrupt_message))
        if api_key == 18:
            return encode_response(18, version, corr, self.api_versions_body(version))
        resp = await self.handlers[api_key](header, req, peer)
        if resp is None:  # acks=0 produce
            return None
        return encode_response(api_key, version, corr, resp)


# --------------------------------------------------------------------------- client


class Client:
    """One TCP connection to a Kafka-protocol server with pipelined requests.

    kraftsim keeps one per channel (lifecycle, alter-partition, metadata, forwarding, and one
    per fetcher), as Kafka does, so a proxy can hold one channel without stalling the others.
    ``local_host`` binds the source address, so a broker on 127.0.0.3 is seen as 127.0.0.3
    by the controller (and by any relay or iptables rule in between).
    """

    def __init__(self, host: str, port: int, client_id: str, local_host: str | None = None):
        self.host, self.port, self.client_id, self.local_host = host, port, client_id, local_host
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.pending: dict[int, tuple[asyncio.Future, type]] = {}
        self.corr = itertools.count(1)
        self.read_task: asyncio.Task | None = None
        #: the peer's ApiVersions answer on this connection (api key -> (min, max)); None until asked
        self.peer_versions: dict[int, tuple[int, int]] | None = None

    @property
    def connected(self) -> bool:
        return self.writer is not None and not self.writer.is_closing()

    async def connect(self, timeout: float = 2.0) -> None:
        local = (self.local_host, 0) if self.local_host and self.local_host not in ("0.0.0.0", "") else None
        self.reader, self.writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, local_addr=local, limit=MAX_FRAME), timeout)
        self.read_task = asyncio.ensure_future(self._read_loop())

    def close(self) -> None:
        if self.writer:
            self.writer.close()
        self.writer = None
        self.peer_versions = None
        if self.read_task:
            self.read_task.cancel()
        for fut, _ in self.pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("connection closed"))
        self.pending.clear()

    async def _read_loop(self) -> None:
        try:
            while True:
                assert self.reader is not None
                data = await read_frame(self.reader)
                (corr,) = struct.unpack(">i", data[:4])
                item = self.pending.pop(corr, None)
                if item is None:
                    continue
                fut, cls = item
                if cls is None:  # a private request: the body as bytes
                    if not fut.done():
                        fut.set_result(bytes(data[4:]))
                    continue
                try:
                    _, n = entity_reader(cls.__header_schema__)(data, 0)
                    resp, _ = entity_reader(cls)(data, n)
                except Exception as e:
                    if not fut.done():
                        fut.set_exception(ProtocolError(f"bad response: {e}"))
                    continue
                if not fut.done():
                    fut.set_result(resp)
        except (asyncio.IncompleteReadError, ConnectionError, ProtocolError, OSError):
            pass
        except asyncio.CancelledError:
            return
        self.close()

    async def request(self, req: Any, timeout: float = 10.0) -> Any:
        if not self.connected:
            await self.connect()
        cls = type(req)
        corr = next(self.corr)
        hcls = cls.__header_schema__
        header = build(hcls, {"request_api_key": cls.__api_key__, "request_api_version": cls.__version__,
                              "correlation_id": corr, "client_id": self.client_id})
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self.pending[corr] = (fut, load_response_schema(cls.__api_key__, cls.__version__))
        assert self.writer is not None
        self.writer.write(frame(encode(header), encode(req)))
        try:
            await self.writer.drain()
            return await asyncio.wait_for(fut, timeout)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            self.pending.pop(corr, None)
            self.close()
            raise

    async def api_versions(self, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
        """The peer's supported versions, asked once per connection as Kafka's NetworkClient does on
        every new connection (``discoverBrokerVersions``: ApiVersionsRequest before the first
        request; ``NodeApiVersions.latestUsableVersion`` then picks each request's version)."""
        if self.peer_versions is None or not self.connected:
            resp = await self.request(build(load_request_schema(18, 3), {
                "client_software_name": "kraftsim", "client_software_version": "1"}), timeout=timeout)
            if resp.error_code is not ErrorCode.none:
                raise ProtocolError(f"ApiVersions: {resp.error_code.name}")
            self.peer_versions = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in resp.api_keys}
        return self.peer_versions

    async def request_private(self, api_key: int, body: bytes, timeout: float = 10.0) -> bytes:
        """A kraftsim-private request (see PRIVATE_LOCAL_LOG_REPORT); returns the response body."""
        if not self.connected:
            await self.connect()
        corr = next(self.corr)
        cid = self.client_id.encode()
        header = struct.pack(">hhih", api_key, 0, corr, len(cid)) + cid
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self.pending[corr] = (fut, None)  # type: ignore[assignment]
        assert self.writer is not None
        self.writer.write(frame(header, body))
        try:
            await self.writer.drain()
            return await asyncio.wait_for(fut, timeout)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            self.pending.pop(corr, None)
            self.close()
            raise
