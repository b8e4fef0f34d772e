"""The proxy process: asyncio, one upstream connection per accepted broker connection.

Ordering is preserved per connection: frames from a broker go through one queue, and a
frame waits for the one before it, so holding an AlterPartition also holds whatever the
same broker sends after it *on that connection* (in Kafka and kraftsim AlterPartition has
its own channel, so heartbeats and metadata keep flowing - docs/seeds.md#seed-003-2-9-2).

With a controller quorum the proxy listens once per controller (``--upstream`` lists them, in
the order of the listeners), so each DNAT rule or broker config keeps its controller apart and
a broker's NOT_CONTROLLER retries (NodeToControllerChannelManager) still reach the controller
they name. A hold follows its request across connections: when the controller a held
AlterPartition was bound for dies, the proxy closes the broker's connection as the dead
controller would; Kafka's broker then sends the same request again, to the controller it
now believes active (NodeToControllerRequestThread.handleResponse, ``wasDisconnected``:
``putFirst(queueItem)``). That copy joins the same hold and leaves it on release - towards
the *new* controller, which is docs/seeds.md#seed-000's step 6 through a real controller failover.

Control is a directory the nemesis writes through the transport (works on any host):
``control.json`` (re-read when it changes) and ``status.json`` (written by the proxy).
Events go to a JSON Lines file in the cluster-event shape (``role: "proxy"``).
"""
from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemeses.proxy import codec


class EventLog:
    """Append-only JSON Lines, flushed per event (the checker joins it on wall time)."""

    def __init__(self, path: Path, node: int):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(path, "a", encoding="utf-8")
        self.node = node

    def emit(self, event: str, **fields: Any) -> None:
        rec = {"wall": time.time(), "node": self.node, "role": "proxy", "event": event, **fields}
        self.fh.write(json.dumps(rec, separators=(",", ":"), default=str) + "\n")
        self.fh.flush()


@dataclass
class Held:
    hold_id: str
    since: float
    until: dict[str, Any]
    max_hold_s: float
    changes: list[codec.PartitionChange]
    release: asyncio.Future
    then_delay_s: float = 0.0          # after release, delay further AlterPartitions this long
    registered_after: set[int] = field(default_factory=set)
    unfenced_after: set[int] = field(default_factory=set)   # registered again, then unfenced


def hostport(a: tuple[str, int]) -> str:
    return f"{a[0]}:{a[1]}"


class Proxy:
    def __init__(self, listen: tuple[str, int], upstreams: list[tuple[str, int]], control_dir: Path,
                 events: Path, node: int = -1, source: str | None = None):
        if not upstreams:
            raise ValueError("the proxy needs at least one upstream")
        self.listen, self.upstreams, self.source = listen, list(upstreams), source
        self.control_dir = control_dir
        self.control_dir.mkdir(parents=True, exist_ok=True)
        self.log = EventLog(events, node)
        self.control: dict[str, Any] = {}
        self._control_mtime = 0.0
        self.held: list[Held] = []
        self.recently_released: list[Held] = []
        self.spent_holds: set[str] = set()
        self.released: list[dict[str, Any]] = []
        self.known_isr: dict[tuple[str | None, int], list[int]] = {}
        self.counts: dict[int, int] = {}
        self.bound: list[tuple[str, int]] = []   # one listener per upstream, same order
        self.delay_until = 0.0   # wall time before which AlterPartitions wait (then_delay_ms)

    # ---- control ------------------------------------------------------------------
    def _read_control(self) -> None:
        p = self.control_dir / "control.json"
        try:
            m = p.stat().st_mtime
        except FileNotFoundError:
            return
        if m == self._control_mtime:
            return
        try:
            self.control = json.loads(p.read_text())
            self._control_mtime = m
        except ValueError:
            return  # half-written: the writer renames atomically, so retry next tick
        if self.control.get("clear_delay"):
            self.delay_until = 0.0
        for hid in self.control.get("release", []) or []:
            for h in list(self.held):
                if h.hold_id == hid:
                    self._release(h, "released by control")
        self._write_status()

    def _write_status(self) -> None:
        st = {"pid": os.getpid(), "listen": list(self.bound[0]) if self.bound else None,
              "listens": [hostport(b) for b in self.bound],
              "upstreams": [hostport(u) for u in self.upstreams], "generation": self.control.get("generation"),
              "held": [{"hold_id": h.hold_id, "since": h.since,
                        "partitions": [c.__dict__ for c in h.changes]} for h in self.held],
              "released": self.released[-50:], "spent_holds": sorted(self.spent_holds),
              "counts": {str(k): v for k, v in sorted(self.counts.items())}}
        tmp = self.control_dir / "status.json.tmp"
        tmp.write_text(json.dumps(st, default=str))
        os.replace(tmp, self.control_dir / "status.json")

    def _topic(self, c: codec.PartitionChange) -> str | None:
        return c.topic_name or (self.control.get("topic_names") or {}).get(c.topic_id or "", c.topic_id)

    # ---- hold and delay decisions --------------------------------------------------
    def _matches_hold(self, spec: dict[str, Any], c: codec.PartitionChange) -> bool:
        x = spec.get("broker")
        if x is None or x not in c.new_isr:
            return False
        if spec.get("partition") is not None and int(spec["partition"]) != c.partition:
            return False
        if spec.get("topic_id") and spec["topic_id"] != c.topic_id:
            return False
        if spec.get("topic") and spec["topic"] != self._topic(c):
            return False
        known = self.known_isr.get((c.topic_id or c.topic_name, c.partition))
        return known is None or x not in known   # "adds X": X not in the ISR we last saw

    @staticmethod
    def _resend_of(holds: list[Held], changes: list[codec.PartitionChange]) -> Held | None:
        """The hold whose request this one re-sends: same partition, same proposed ISR, same
        leader and partition epochs (AlterPartitionManager re-sends the queued item as is)."""
        for h in holds:
            for c in changes:
                if any((c.topic_id or c.topic_name, c.partition, c.leader_epoch, c.partition_epoch, sorted(c.new_isr))
                       == (o.topic_id or o.topic_name, o.partition, o.leader_epoch, o.partition_epoch, sorted(o.new_isr))
                       for o in h.changes):
                    return h
        return None

    def _on_alter_partition(self, info: codec.RequestInfo, upstream: tuple[str, int]) -> asyncio.Future | float | None:
        """Return a future to wait for (hold), a delay in seconds, or None (pass)."""
        changes = codec.partition_changes(info.body)
        spec = self.control.get("hold")
        h = self._resend_of(self.held, changes)
        if h is None:
            # released, and the controller it went to was not (or no longer) active: the
            # broker's retry passes at once - then_delay_ms is for the *next* change
            h = self._resend_of(self.recently_released, changes)
        if h is not None:
            for c in changes:
                self.log.emit("proxy_hold_followed", hold_id=h.hold_id, topic=self._topic(c), partition=c.partition,
                              leader=c.leader, new_isr=c.new_isr, upstream=hostport(upstream),
                              held=h in self.held,
                              why="the broker sent the held request again on a new connection")
            return h.release if h in self.held else None
        if spec and spec.get("id") not in self.spent_holds and \
                any(self._matches_hold(spec, c) for c in changes):
            fut = asyncio.get_running_loop().create_future()
            h = Held(spec["id"], time.time(), spec.get("until") or {}, float(spec.get("max_hold_s", 120)),
                     changes, fut, then_delay_s=float(spec.get("then_delay_ms") or 0) / 1000.0)
            self.held.append(h)
            self.spent_holds.add(spec["id"])
            for c in changes:
                self.log.emit("proxy_hold", hold_id=h.hold_id, topic=self._topic(c), topic_id=c.topic_id,
                              partition=c.partition, leader=c.leader, leader_epoch=c.leader_epoch,
                              new_isr=c.new_isr, broker_epochs=c.broker_epochs,
                              partition_epoch=c.partition_epoch, version=info.api_version,
                              until=h.until, upstream=hostport(upstream))
            self._write_status()
            return fut
        delay = float(self.control.get("delay_ms") or 0) / 1000.0
        window = self.delay_until - time.time()
        if window > 0:
            for c in changes:
                self.log.emit("proxy_delay", topic=self._topic(c), partition=c.partition, leader=c.leader,
                              new_isr=c.new_isr, delay_ms=round(window * 1000, 1), why="then_delay_ms after a hold")
        return max(delay, window) or None

    def _release(self, h: Held, reason: str) -> None:
        if h in self.held:
            self.held.remove(h)
            self.recently_released = (self.recently_released + [h])[-8:]
        held_ms = round((time.time() - h.since) * 1000, 1)
        if h.then_delay_s and reason != "proxy stopping":
            self.delay_until = max(self.delay_until, time.time() + h.then_delay_s)
        for c in h.changes:
            self.log.emit("proxy_release", hold_id=h.hold_id, topic=self._topic(c), partition=c.partition,
                          leader=c.leader, new_isr=c.new_isr, reason=reason, held_ms=held_ms)
        self.released.append({"hold_id": h.hold_id, "reason": reason, "held_ms": held_ms, "wall": time.time()})
        if not h.release.done():
            h.release.set_result(reason)
        self._write_status()

    def _check_holds(self) -> None:
        now = time.time()
        for h in list(self.held):
            u = h.until
            if "registered" in u and int(u["registered"]) in h.registered_after:
                self._release(h, f"broker {u['registered']} registered again")
            elif "unfenced" in u and int(u["unfenced"]) in h.unfenced_after:
                self._release(h, f"broker {u['unfenced']} registered again and was unfenced")
            elif "file" in u and os.path.exists(u["file"]):
                self._release(h, f"file {u['file']} exists")
            elif "after_s" in u and now - h.since >= float(u["after_s"]):
                self._release(h, f"after {u['after_s']}s")
            elif now - h.since >= h.max_hold_s:
                self._release(h, f"max_hold_s {h.max_hold_s} reached")

    async def _ticker(self) -> None:
        n = 0
        while True:
            self._read_control()
            self._check_holds()
            n += 1
            if n % 10 == 0:   # counts for whoever watches (twice a second)
                self._write_status()
            await asyncio.sleep(0.05)

    # ---- responses -------------------------------------------------------------------
    def _on_response(self, req: codec.RequestInfo, frame: bytes, upstream: tuple[str, int]) -> None:
        try:
            resp = codec.decode_response(frame, req.api_key, req.api_version)
        except Exception as e:  # never break the stream for a decode problem
            self.log.emit("proxy_decode_error", api_key=req.api_key, api_version=req.api_version, error=str(e))
            return
        if req.api_key == codec.BROKER_HEARTBEAT:
            # docs/seeds.md#seed-002 / 003 §1.2.2: the controller unfences a registered broker via the
            # heartbeat response; a new incarnation becomes eligible for the ISR only then
            b = int(req.body.broker_id)
            if int(resp.error_code) == 0 and not bool(resp.is_fenced):
                for h in self.held:
                    if b in h.registered_after and b not in h.unfenced_after:
                        h.unfenced_after.add(b)
                        self.log.emit("broker_unfenced_seen", broker=b, broker_epoch=int(req.body.broker_epoch))
            return
        if req.api_key == codec.BROKER_REGISTRATION:
            b = int(req.body.broker_id)
            code = int(resp.error_code)
            self.log.emit("broker_registration_seen", broker=b, broker_epoch=int(resp.broker_epoch),
                          error_code=code, error=codec.error_name(code), upstream=hostport(upstream))
            if code == 0:
                for h in self.held:
                    h.registered_after.add(b)
                for isr in self.known_isr.values():   # the controller fences a re-registered broker
                    if b in isr:
                        isr.remove(b)
            return
        # AlterPartition: one event per partition, with the controller's answer
        sent = {(c.topic_id or c.topic_name, c.partition): c for c in codec.partition_changes(req.body)}
        top = int(resp.error_code)
        if top and not resp.topics:
            # e.g. NOT_CONTROLLER from a controller that is not (or no longer) active: the
            # broker sends the request again elsewhere; say where this copy ended
            for c in sent.values():
                self.log.emit("alter_partition", topic=self._topic(c), topic_id=c.topic_id, partition=c.partition,
                              leader=c.leader, new_isr=c.new_isr, broker_epochs=c.broker_epochs,
                              partition_epoch=c.partition_epoch, version=req.api_version, accepted=False,
                              error=codec.error_name(top), error_code=top, upstream=hostport(upstream))
            return
        for t in resp.topics:
            tkey = str(t.topic_id) if getattr(t, "topic_id", None) is not None else getattr(t, "topic_name", None)
            for p in t.partitions:
                c = sent.get((tkey, int(p.partition_index)))
                code = int(p.error_code) or top
                if code == 0:
                    self.known_isr[(tkey, int(p.partition_index))] = [int(b) for b in p.isr]
                self.log.emit(
                    "alter_partition", topic=self._topic(c) if c else tkey, topic_id=tkey,
                    partition=int(p.partition_index), leader=c.leader if c else int(p.leader_id),
                    new_isr=c.new_isr if c else None, broker_epochs=c.broker_epochs if c else {},
                    partition_epoch=int(p.partition_epoch), version=req.api_version,
                    accepted=code == 0, error=codec.error_name(code), error_code=code,
                    isr=[int(b) for b in p.isr], leader_epoch=int(p.leader_epoch), upstream=hostport(upstream))

    # ---- the pumps -------------------------------------------------------------------
    async def _read_frame(self, r: asyncio.StreamReader) -> bytes | None:
        try:
            size = await r.readexactly(4)
            body = await r.readexactly(int.from_bytes(size, "big", signed=True))
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        return size + body

    async def _handle(self, upstream: tuple[str, int], cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_connection(*upstream,
                                                   local_addr=(self.source, 0) if self.source else None)
        except OSError as e:
            self.log.emit("proxy_upstream_unreachable", upstream=hostport(upstream), error=str(e))
            cw.close()
            return
        pending: dict[int, codec.RequestInfo] = {}
        queue: asyncio.Queue = asyncio.Queue()

        async def client_to_upstream() -> None:
            while (frame := await self._read_frame(cr)) is not None:
                gate: Any = None
                try:
                    info = codec.peek_request(frame[4:])
                    self.counts[info.api_key] = self.counts.get(info.api_key, 0) + 1
                    if info.api_key in codec.DECODED and info.body is not None:
                        pending[info.correlation_id] = info
                        if info.api_key == codec.ALTER_PARTITION:
                            gate = self._on_alter_partition(info, upstream)
                except Exception as e:
                    self.log.emit("proxy_decode_error", error=str(e))
                await queue.put((frame, gate, time.monotonic()))
            await queue.put(None)

        async def writer() -> None:
            while (item := await queue.get()) is not None:
                frame, gate, arrived = item
                all_delay = float(self.control.get("delay_all_ms") or 0) / 1000.0
                if isinstance(gate, asyncio.Future):
                    # shielded: a hold is shared with re-sends of its request; this
                    # connection dying must not cancel it for them
                    await asyncio.shield(gate)
                elif isinstance(gate, float):
                    await asyncio.sleep(max(0.0, arrived + gate - time.monotonic()))
                if all_delay:
                    await asyncio.sleep(max(0.0, arrived + all_delay - time.monotonic()))
                uw.write(frame)
                await uw.drain()

        responses: asyncio.Queue = asyncio.Queue()

        async def upstream_to_client() -> None:
            while (frame := await self._read_frame(ur)) is not None:
                await responses.put((frame, time.monotonic()))
            await responses.put(None)

        async def response_writer() -> None:
            # each response waits delay_all_ms from its *arrival*: pipelined responses keep
            # their spacing (a link's latency), they are not serialized into n x delay
            while (item := await responses.get()) is not None:
                frame, arrived = item
                all_delay = float(self.control.get("delay_all_ms") or 0) / 1000.0
                if all_delay:
                    await asyncio.sleep(max(0.0, arrived + all_delay - time.monotonic()))
                req = pending.pop(codec.response_correlation_id(frame[4:]), None)
                if req is not None:
                    self._on_response(req, frame[4:], upstream)
                cw.write(frame)
                await cw.drain()

        tasks = [asyncio.create_task(x) for x in (client_to_upstream(), writer(), upstream_to_client(),
                                                  response_writer())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            # a broker that closed its side still gets the responses already in flight
            await asyncio.wait(tasks, timeout=0.5)
        except (Exception, asyncio.CancelledError):
            pass
        finally:
            for t in tasks:
                t.cancel()
            for w in (uw, cw):
                try:
                    w.close()
                except Exception:
                    pass

    async def serve(self) -> None:
        servers = []
        for k, upstream in enumerate(self.upstreams):
            port = self.listen[1] + k if self.listen[1] else 0
            server = await asyncio.start_server(functools.partial(self._handle, upstream), self.listen[0], port,
                                                reuse_address=True)
            servers.append(server)
            self.bound.append((self.listen[0], server.sockets[0].getsockname()[1]))
        self._read_control()
        self._write_status()
        self.log.emit("proxy_started", listens=[hostport(b) for b in self.bound],
                      upstreams=[hostport(u) for u in self.upstreams])
        # one line per upstream, in order: where to send what was bound for that controller
        (self.control_dir / "ready").write_text("".join(f"{hostport(b)}\n" for b in self.bound))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for s in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(s, stop.set)
        ticker = asyncio.create_task(self._ticker())
        try:
            await stop.wait()
        finally:
            for server in servers:
                server.close()
        ticker.cancel()
        for h in list(self.held):   # never leave a broker waiting forever on exit
            self._release(h, "proxy stopping")
        self.log.emit("proxy_stopped")
