"""The broker's lifecycle channel to the controller, as Kafka's BrokerLifecycleManager.scala.

Why its own module: registration (BrokerRegistration 62), heartbeats (BrokerHeartbeat 63) and
the states they drive (STARTING → RECOVERY → RUNNING, controlled shutdown) are one Kafka class
with one connection of its own, so a proxy can delay it without the others. It owns this
incarnation's broker epoch and whether the broker is unfenced (``serving``, the socket server's
gate); everything else reads them here.

Kafka brokers never fence themselves when the controller is unreachable. docs/seeds.md#seed-002's draft
self-fencing is modelled only behind ``seed002.self.fence.enable`` (default false): then, without
an answered heartbeat for ``broker.self.fence.timeout.ms`` (default 2x the controller's session
timeout), the broker stops leading and following.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kraftsim.storage.checkpoints import directory_uuid
from kraftsim.wire import Client, build, load_request_schema


class BrokerLifecycleManager:
    def __init__(self, broker: Any) -> None:
        self.b = broker
        cfg = broker.cfg
        self.hb_s = int(cfg["broker.heartbeat.interval.ms"]) / 1000
        self.self_fence_s = cfg.self_fence_ms / 1000
        # docs/seeds.md#seed-002 (a draft Kafka never adopted): off unless asked for; read defensively so a
        # config without the key (older kraftsim/config.py) means "off", as in Kafka.
        self.self_fence_enabled = bool(cfg.values.get("seed002.self.fence.enable") or False)
        self.incarnation = uuid.uuid4()
        self.broker_epoch = -1
        self.caught_up = False       # a heartbeat said is_caught_up for this incarnation
        self.serving = asyncio.Event()  # unfenced once: requests are processed
        self.kick = asyncio.Event()
        self.self_fenced = False
        self.last_hb_ok = time.monotonic()
        #: BrokerLifecycleManager.start schedules RegistrationTimeoutEvent this far ahead: the
        #: first registration of the process must be accepted by then, or start-up fails
        self.registration_deadline = time.monotonic() + int(cfg["initial.broker.registration.timeout.ms"]) / 1000

    def set_ready_to_unfence(self) -> None:
        """BrokerLifecycleManager.setReadyToUnfence: the next heartbeat goes at once."""
        self.kick.set()

    async def register(self, client: Client) -> None:
        b = self.b
        cls = load_request_schema(62, 4)
        while not b.stopping:
            if self.broker_epoch < 0 and time.monotonic() >= self.registration_deadline:
                # RegistrationTimeoutEvent: "if (!initialRegistrationSucceeded)" - the start-up fails
                b.startup_failed("Shutting down because we were unable to register with the controller quorum.")
                return
            req = build(cls, {"broker_id": b.node_id, "cluster_id": b.cfg["cluster.id"],
                              "incarnation_id": self.incarnation,
                              "listeners": [{"name": "PLAINTEXT", "host": b.adv_host, "port": b.adv_port,
                                             "security_protocol": 0}],
                              "features": [{"name": "metadata.version", "min_supported_version": 1,
                                            "max_supported_version": 27}],
                              "rack": None, "previous_broker_epoch": b.logs.previous_broker_epoch,
                              # KIP-858: the log dirs' directory.id (the controller keeps them from 3.7-IV2)
                              "log_dirs": tuple(directory_uuid(d) for d in b.logs.directory_ids.values())})
            try:
                resp = await client.request(req, timeout=3)
            except (OSError, asyncio.TimeoutError, ConnectionError):
                await asyncio.sleep(self.hb_s)
                continue
            if resp.error_code is ErrorCode.none:
                self.broker_epoch = int(resp.broker_epoch)
                self.last_hb_ok = time.monotonic()
                return
            if resp.error_code is ErrorCode.inconsistent_cluster_id:
                b.ev.log(f"controller rejects cluster.id {b.cfg['cluster.id']!r}; retrying")
            await asyncio.sleep(self.hb_s)

    async def run(self) -> None:
        """BrokerLifecycleManager: register, then heartbeat. While STARTING (not caught up) the
        next heartbeat follows after 10 ms; ready-to-unfence sends one at once; otherwise every
        ``broker.heartbeat.interval.ms``."""
        b = self.b
        client = b.controller_client("lifecycle")
        await self.register(client)
        if self.broker_epoch < 0:
            return                    # never registered: the start-up failed (or the broker stops)
        cls = load_request_schema(63, 1)
        while not b.stopping:
            req = build(cls, {"broker_id": b.node_id, "broker_epoch": self.broker_epoch,
                              "current_metadata_offset": b.image.next_offset - 1,
                              "want_fence": not b.metadata.published, "want_shut_down": False})
            delay = self.hb_s
            try:
                resp = await client.request(req, timeout=max(self.hb_s * 2, 1.0))
                if resp.error_code is ErrorCode.stale_broker_epoch:
                    b.ev.log("controller says our broker epoch is stale; registering again")
                    self.incarnation = uuid.uuid4()
                    await self.register(client)
                    continue
                if resp.error_code is ErrorCode.none:
                    self.last_hb_ok = time.monotonic()
                    if not self.caught_up:
                        if resp.is_caught_up:  # STARTING → RECOVERY: initialCatchUpFuture
                            self.caught_up = True
                            b.metadata.maybe_publish()
                        delay = 0.01
                    elif not resp.is_fenced and not self.serving.is_set():
                        self.serving.set()  # RECOVERY → RUNNING: initialUnfenceFuture
                        # BrokerServer.startup waits for "the broker to be unfenced", then
                        # maybeChangeStatus(STARTING, STARTED): from here a SIGTERM shuts down
                        b.started = True
                    if self.self_fenced and not resp.is_fenced:
                        self.self_fenced = False
                        b.ev.log("controller contact restored; resuming replicas")
                        b.metadata.publish(None)
            except (OSError, asyncio.TimeoutError, ConnectionError):
                pass
            if (self.self_fence_enabled and not self.self_fenced
                    and time.monotonic() - self.last_hb_ok > self.self_fence_s):
                self.fence_self()
            self.kick.clear()
            try:
                await asyncio.wait_for(self.kick.wait(), delay)
            except asyncio.TimeoutError:
                pass

    def fence_self(self) -> None:
        """docs/seeds.md#seed-002 (draft, not Kafka; only with ``seed002.self.fence.enable``): without controller
        contact a broker cannot know it still leads; stop."""
        self.self_fenced = True
        self.b.ev.emit("self_fenced", broker=self.b.node_id, broker_epoch=self.broker_epoch)
        self.b.replica_manager.stop_all("self-fenced")
        self.b.notify()

    async def controlled_shutdown(self, deadline_s: float = 5.0) -> None:
        """BrokerLifecycleManager.beginControlledShutdown: heartbeats with ``want_shut_down``
        until the controller says ``should_shut_down`` (or it cannot be reached)."""
        b = self.b
        if self.broker_epoch < 0:
            return
        client = b.controller_client("shutdown")
        cls = load_request_schema(63, 1)
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            req = build(cls, {"broker_id": b.node_id, "broker_epoch": self.broker_epoch,
                              "current_metadata_offset": b.image.next_offset - 1,
                              "want_fence": False, "want_shut_down": True})
            try:
                resp = await client.request(req, timeout=1.0)
                if resp.error_code is not ErrorCode.none or resp.should_shut_down:
                    break
            except (OSError, asyncio.TimeoutError, ConnectionError):
                break
            await asyncio.sleep(0.1)
        client.close()
