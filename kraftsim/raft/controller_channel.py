"""How a broker reaches the active controller — Kafka's NodeToControllerChannelManager.

Why it exists: with a controller quorum only the active controller serves BrokerRegistration,
BrokerHeartbeat, AlterPartition, CreateTopics and the metadata Fetch; the others answer
NOT_CONTROLLER (or NOT_LEADER_OR_FOLLOWER with the current leader, for Fetch). A Kafka broker
keeps one connection per channel (lifecycle, alter-partition, forwarding; the raft client for
metadata) and each channel's ControllerRequestThread, on NOT_CONTROLLER or a lost connection,
forgets the active controller and sends the same request again once it knows a new one
(NodeToControllerRequestThread.handleResponse / onControllerChange). The active controller is
learned from the metadata quorum: the leader id in a Fetch answer, mapped to an address by
``controller.quorum.voters``; only the metadata channel (the raft observer) tries the next voter
without a hint - every other channel sends nothing until the observer knows a leader.

``QuorumClient`` has ``wire.Client``'s interface (``request``, ``close``, ``connected``), so a
broker channel swaps one for the other; every channel keeps its own TCP connection bound to the
broker's address, so a relay or an iptables rule still sees each channel apart. With a single
controller address (one controller, or a relay in front of it) it is a plain Client.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kraftsim.raft.client import DESCRIBE_QUORUM
from kraftsim.wire import Client

RETRY_BACKOFF_S = 0.05
#: NodeToControllerRequestThread's pollOnce(100) while no controller is known
NO_CONTROLLER_BACKOFF_S = 0.1


class ControllerLocator:
    """The broker's idea of where the active controller is, shared by all its channels."""

    def __init__(self, voters: dict[int, tuple[str, int]] | None, bootstrap: list[tuple[str, int]]):
        self.voters = dict(voters or {})
        self.addresses: list[tuple[str, int]] = list(self.voters.values()) or list(bootstrap)
        if not self.addresses:
            raise ValueError("no controller address (controller.quorum.voters / bootstrap.servers)")
        self.current = 0
        self.leader_id = -1
        self.leader_epoch = -1

    @classmethod
    def from_config(cls, cfg: Any) -> "ControllerLocator":
        voters = cfg.values.get("controller.quorum.voters") if hasattr(cfg, "values") else None
        boot = cfg["controller.quorum.bootstrap.servers"]
        bootstrap = list(boot) if isinstance(boot, list) else [boot] if boot else []
        return cls(voters if isinstance(voters, dict) else None, bootstrap)

    @property
    def address(self) -> tuple[str, int]:
        return self.addresses[self.current]

    def leader_hint(self, leader_id: int, epoch: int) -> bool:
        """A Fetch answer named the leader of ``epoch``: use its address. True if it moved us."""
        if leader_id < 0 or leader_id not in self.voters or epoch < self.leader_epoch:
            return False
        self.leader_id, self.leader_epoch = leader_id, epoch
        idx = self.addresses.index(self.voters[leader_id])
        moved = idx != self.current
        self.current = idx
        return moved

    def failed(self, address: tuple[str, int]) -> None:
        """The controller at ``address`` is not (or no longer) reachable or active: try the next."""
        if len(self.addresses) > 1 and self.addresses[self.current] == address:
            self.current = (self.current + 1) % len(self.addresses)
            self.leader_id = -1


def not_controller(resp: Any) -> tuple[bool, int, int]:
    """(answered by a non-active controller?, leader hint, its epoch) for any controller API."""
    code = getattr(resp, "error_code", None)
    if code == ErrorCode.not_controller:
        return True, -1, -1
    for t in getattr(resp, "topics", ()) or ():  # CreateTopics: per-topic errors
        if getattr(t, "error_code", None) == ErrorCode.not_controller:
            return True, -1, -1
        if getattr(resp, "__api_key__", None) == DESCRIBE_QUORUM:
            # a controller that is not the raft leader (KafkaRaftClient.handleDescribeQuorumRequest)
            # names no leader; only here is NOT_LEADER_OR_FOLLOWER "ask another controller"
            for p in t.partitions:
                if p.error_code == ErrorCode.not_leader_or_follower:
                    return True, -1, -1
    for t in getattr(resp, "responses", ()) or ():  # Fetch of __cluster_metadata
        for p in t.partitions:
            cl = getattr(p, "current_leader", None)
            if p.error_code == ErrorCode.not_leader_or_follower:
                return True, int(cl.leader_id) if cl else -1, int(cl.leader_epoch) if cl else -1
            if cl is not None and int(cl.leader_id) >= 0:
                return False, int(cl.leader_id), int(cl.leader_epoch)
    return False, -1, -1


class QuorumClient:
    """One broker channel to whichever controller is active (see module docstring).

    ``observer``: this channel is the broker's raft client (the metadata Fetch). Only it goes
    looking at another voter when its controller stops answering (KafkaRaftClient
    ``pollFollowerAsObserver`` -> ``maybeSendAnyVoterFetch`` after the fetch timeout); every other
    channel, after a lost connection or a timeout, asks the metadata quorum again where the active
    controller is (NodeToControllerRequestThread.handleResponse: ``updateControllerAddress(null)``,
    then ``RaftControllerNodeProvider.getControllerInfo`` = the raft leader this broker knows). So
    a controller that still answers the metadata Fetch as leader - one cut from the other voters
    that never resigns (before Kafka 3.7) - keeps every channel, even while it answers nothing else.
    """

    def __init__(self, locator: ControllerLocator, client_id: str, local_host: str | None = None,
                 observer: bool = False):
        self.locator = locator
        self.client_id = client_id
        self.local_host = local_host
        self.observer = observer
        self.client: Client | None = None

    @property
    def connected(self) -> bool:
        return self.client is not None and self.client.connected

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.client = None

    def _client(self) -> Client:
        host, port = self.locator.address
        if self.client is not None and (self.client.host, self.client.port) != (host, port):
            self.close()
        if self.client is None:
            self.client = Client(host, port, self.client_id, local_host=self.local_host)
        return self.client

    async def request(self, req: Any, timeout: float = 10.0) -> Any:
        """Send ``req`` to the active controller, following NOT_CONTROLLER and lost connections
        to another controller until ``timeout``; a timeout or the last error is raised as
        ``wire.Client.request`` raises it, and the last NOT_CONTROLLER answer is returned."""
        async def send(c: Client, deadline: float) -> Any:
            return await c.request(req, timeout=max(0.05, deadline - time.monotonic()))
        return await self._follow_controller(send, timeout)

    async def request_built(self, builder: Any, timeout: float = 10.0) -> Any:
        """Like :meth:`request`, for a request that is built per send: ``builder.build(version)``
        at the highest version both sides know (``builder.latest_version`` and the controller's
        ApiVersions on this connection), again for every re-send after NOT_CONTROLLER or a lost
        connection - Kafka's channel keeps the request *builder* in its queue
        (NodeToControllerQueueItem; ``requestQueue.putFirst`` on a disconnect or NOT_CONTROLLER) and
        NetworkClient.doSend calls ``builder.build(version)`` on each send. A build that fails is
        raised as ValueError (the caller's callback gets the error, as Kafka's does)."""
        async def send(c: Client, deadline: float) -> Any:
            versions = await c.api_versions(timeout=max(0.05, deadline - time.monotonic()))
            lo_hi = versions.get(builder.api_key)
            version = min(builder.latest_version, lo_hi[1]) if lo_hi else -1
            if lo_hi is None or version < max(lo_hi[0], builder.oldest_version):
                raise ValueError(f"api {builder.api_key}: no version both sides support "
                                 f"(ours up to {builder.latest_version}, the controller's {lo_hi})")
            req = builder.build(version)
            return await c.request(req, timeout=max(0.05, deadline - time.monotonic()))
        return await self._follow_controller(send, timeout)

    async def _follow_controller(self, send: Callable[[Client, float], Awaitable[Any]], timeout: float) -> Any:
        """The channel's one retry loop (Kafka's NodeToControllerRequestThread): ``send`` on the
        connection to the controller the locator names; a lost connection or a NOT_CONTROLLER
        answer moves to the hinted leader (or the next controller) until the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.observer and self.locator.voters and len(self.locator.addresses) > 1 and self.locator.leader_id < 0:
                # NodeToControllerRequestThread.doWork: with no active controller known from the
                # raft client (RaftControllerNodeProvider), nothing is sent - "No controller
                # provided, retrying after backoff" (pollOnce(100)); only the metadata channel,
                # the raft observer, goes looking for the leader
                if time.monotonic() >= deadline:
                    raise asyncio.TimeoutError("no active controller known")
                await asyncio.sleep(NO_CONTROLLER_BACKOFF_S)
                continue
            c = self._client()
            address = (c.host, c.port)
            try:
                resp = await send(c, deadline)
            except (OSError, ConnectionError, asyncio.TimeoutError):
                self.close()
                if self.observer:
                    self.locator.failed(address)
                if time.monotonic() >= deadline or len(self.locator.addresses) == 1:
                    raise
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            refused, leader, epoch = not_controller(resp)
            hinted = leader >= 0 and leader in self.locator.voters
            moved = self.locator.leader_hint(leader, epoch) if hinted else False
            if not refused:
                return resp
            if not hinted:
                self.locator.failed(address)  # no hint: ask the next controller
            if time.monotonic() + RETRY_BACKOFF_S >= deadline or len(self.locator.addresses) == 1:
                return resp
            if not moved:
                # a hint that names a new leader is followed at once, as KafkaRaftClient's
                # transition to FollowerState sends its Fetch in the same poll: the raft leader
                # answers an observer before its controller is active for anything else
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def request_private(self, api_key: int, body: bytes, timeout: float = 10.0) -> bytes:
        """A kraftsim-private request (wire.PRIVATE_*), JSON answered; a non-active controller
        answers ``{"error": "NOT_CONTROLLER"}`` and the next controller is tried."""
        deadline = time.monotonic() + timeout
        while True:
            c = self._client()
            address = (c.host, c.port)
            try:
                out = await c.request_private(api_key, body, timeout=max(0.05, deadline - time.monotonic()))
            except (OSError, ConnectionError, asyncio.TimeoutError):
                self.close()
                if self.observer:
                    self.locator.failed(address)
                if time.monotonic() >= deadline or len(self.locator.addresses) == 1:
                    raise
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            if b'"NOT_CONTROLLER"' not in out or len(self.locator.addresses) == 1 \
                    or time.monotonic() + RETRY_BACKOFF_S >= deadline:
                return out
            self.locator.failed(address)
            await asyncio.sleep(RETRY_BACKOFF_S)
