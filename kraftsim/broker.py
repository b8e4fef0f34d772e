"""The kraftsim broker process: client listener, replica manager and the three controller channels.

Channels to the controller, each its own TCP connection as in Kafka (so a proxy can delay
one without the others): lifecycle (BrokerRegistration 62 + BrokerHeartbeat 63), alter-partition
(AlterPartition 56, v3 with broker epochs when KIP-903 is on, v2 otherwise), metadata (Fetch of
``__cluster_metadata``, JSON records replayed into :class:`MetadataImage` and persisted in a local
copy), plus a forwarding connection for CreateTopics.

Start-up (Kafka's ``BrokerServer.startup`` with ``BrokerLifecycleManager``): a broker replays
its local metadata copy, but hands partitions to its replica manager (lead, follow, truncate)
only once the controller has accepted this incarnation's registration and a heartbeat said it
caught up with the metadata log to its registration record (``initialCatchUpFuture``); it then
asks to be unfenced, and processes client and replica requests only once unfenced
(``initialUnfenceFuture`` → ``SocketServer.enableRequestProcessing``).

Kafka brokers never fence themselves when the controller is unreachable. Seed 002's draft
self-fencing is modelled only behind ``seed002.self.fence.enable`` (default false): then, without
an answered heartbeat for ``broker.self.fence.timeout.ms`` (default 2x the controller's session
timeout), the broker stops leading and following.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from kraftsim.config import Config
from kraftsim.controller import METADATA_TOPIC
from kraftsim.events import EventLog
from kraftsim.metadata import NO_LEADER, MetadataImage, MetadataLogFile
from kraftsim.replica import PendingChange, Replica
from kraftsim.storage import records as rec
from kraftsim.storage.log import OffsetOutOfRange
from kraftsim.storage.manager import LogManager
from kraftsim.tiering import RemoteLogManager
from kraftsim.raft.controller_channel import ControllerLocator, QuorumClient
from kraftsim.wire import PRIVATE_LOCAL_LOG_REPORT, Client, Peer, Server, build

BROKER_APIS = {
    0: (3, 9),    # Produce
    1: (4, 15),   # Fetch (v15: ReplicaState.ReplicaEpoch, KIP-903)
    2: (1, 9),    # ListOffsets (v8 EARLIEST_LOCAL -4, KIP-405; v9 LATEST_TIERED -5, KIP-1005)
    3: (4, 12),   # Metadata (v12 carries leader epochs and topic ids)
    18: (0, 3),   # ApiVersions
    19: (2, 7),   # CreateTopics (forwarded to the controller)
    22: (0, 4),   # InitProducerId
    23: (2, 4),   # OffsetForLeaderEpoch
    55: (0, 1),   # DescribeQuorum (forwarded to the controller; v2 needs KIP-853 voter endpoints)
    75: (0, 0),   # DescribeTopicPartitions (ISR, ELR, last known ELR)
}
#: how long a forwarded DescribeQuorum may look for the raft leader among the controllers
#: before the broker answers REQUEST_TIMED_OUT (ForwardingManager.scala, ForwardingManagerImpl
#: .forwardRequest: the handler's onTimeout)
DESCRIBE_QUORUM_FORWARD_TIMEOUT_S = 3.0

FETCH_VERSION = 15
MAX_PARTITION_BYTES = 1024 * 1024


class Broker:
    def __init__(self, cfg: Config, events: EventLog):
        self.cfg = cfg
        self.ev = events
        self.node_id = int(cfg["node.id"])
        _, self.host, self.port = cfg["listeners"]
        adv = cfg["advertised.listeners"]
        self.adv_host, self.adv_port = (adv[1], adv[2]) if adv else (self.host, self.port)
        if self.adv_host in ("0.0.0.0", ""):
            self.adv_host = "127.0.0.1"
        self.ctl_locator = ControllerLocator.from_config(cfg)
        self.session_s = int(cfg["broker.session.timeout.ms"]) / 1000
        self.hb_s = int(cfg["broker.heartbeat.interval.ms"]) / 1000
        self.self_fence_s = cfg.self_fence_ms / 1000
        # seed 002 (a draft Kafka never adopted): off unless asked for; read defensively so a
        # config without the key (older kraftsim/config.py) means "off", as in Kafka.
        self.self_fence_enabled = bool(cfg.values.get("seed002.self.fence.enable") or False)
        self.lag_s = int(cfg["replica.lag.time.max.ms"]) / 1000
        self.features = cfg.features  # derived once: the replica's hot paths read it
        self.elr_enabled = self.features.elr
        self.logs = LogManager(cfg["log.dirs"], node_id=self.node_id, cluster_id=cfg["cluster.id"],
                               on_event=lambda name, f: self.ev.emit(name, **f),
                               flush_interval_messages=cfg["log.flush.interval.messages"],
                               segment_bytes=int(cfg["log.segment.bytes"]))
        mdir = Path(cfg["metadata.log.dir"]) if cfg["metadata.log.dir"] else Path(cfg["log.dirs"][0]) / "kraftsim-metadata"
        self.md_file_path = mdir / "metadata.jsonl"
        self.md_file: MetadataLogFile | None = None
        self.image = MetadataImage()
        self.metadata_ready = False  # our copy reached the controller's metadata HWM
        self.caught_up = False       # a heartbeat said is_caught_up for this incarnation
        self.published = False       # partitions are handed to the replica manager
        self.serving = asyncio.Event()  # unfenced once: requests are processed
        self.lifecycle_kick = asyncio.Event()
        self.replicas: dict[tuple[str, int], Replica] = {}
        self.incarnation = uuid.uuid4()
        self.broker_epoch = -1
        self.self_fenced = False
        self.last_hb_ok = time.monotonic()
        self.stopping = False
        self.wake = asyncio.Event()
        self.fetchers: dict[int, asyncio.Task] = {}
        self.fetch_sets: dict[int, set[tuple[str, int]]] = {}
        self.alter_queue: dict[tuple[str, int], PendingChange] = {}
        self.alter_kick = asyncio.Event()
        self.tasks: list[asyncio.Task] = []
        self.server: Server | None = None
        self.pid_seq = 0
        self.rlm = RemoteLogManager(self)  # KIP-405 remote tier, KIP-1023, seed 004 reports
        #: seed 004: (topic, partition) -> the local-log report last sent to the controller
        self.local_log_sent: dict[tuple[str, int], tuple] = {}

    # ------------------------------------------------------------------ small helpers

    def notify(self) -> None:
        self.wake.set()
        self.wake = asyncio.Event()

    async def wait_wake(self, timeout: float) -> None:
        w = self.wake
        try:
            await asyncio.wait_for(w.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    def topic_min_isr(self, topic: str) -> int:
        t = self.image.topics.get(topic)
        if t and "min.insync.replicas" in t.configs:
            return int(t.configs["min.insync.replicas"])
        return int(self.cfg["min.insync.replicas"])

    def controller_client(self, name: str) -> QuorumClient:
        """One channel to the active controller (NodeToControllerChannelManager): it follows
        NOT_CONTROLLER and leader hints among ``controller.quorum.voters`` (kraftsim/raft/)."""
        return QuorumClient(self.ctl_locator, f"kraftsim-broker-{self.node_id}-{name}", local_host=self.host)

    # ------------------------------------------------------------------ metadata

    def _replica(self, topic: str, p: int) -> Replica:
        r = self.replicas.get((topic, p))
        if r is None:
            r = Replica(self, topic, p, self.logs.get_or_create(topic, p))
            hw = self._hwm_checkpoint.get((topic, p))
            if hw is not None:
                r.hwm = min(hw, r.log.log_end_offset)
            self.replicas[(topic, p)] = r
        return r

    def apply_partitions(self, keys: set[tuple[str, int]] | None) -> None:
        """Publish metadata to the replica manager (BrokerMetadataPublisher → ReplicaManager.applyDelta).

        Nothing is published before ``maybe_publish`` ran: BrokerServer installs the publisher only
        after ``initialCatchUpFuture`` (registration accepted, caught up to its record).
        """
        if not self.published:
            return
        for ps in list(self.image.all_partitions()):
            key = (ps.topic, ps.partition)
            if keys is not None and key not in keys:
                continue
            if self.node_id in ps.replicas or key in self.replicas:
                r = self._replica(*key)
                if self.self_fenced:
                    r.replicas, r.isr = list(ps.replicas), list(ps.isr)
                    continue
                r.apply(ps)

    async def metadata_loop(self) -> None:
        client = self.controller_client("metadata")
        req_cls = load_request_schema(1, 12)
        while not self.stopping:
            try:
                req = build(req_cls, {"replica_id": self.node_id, "max_wait": 500, "min_bytes": 1,
                                      "max_bytes": 8 * 1024 * 1024, "isolation_level": 0,
                                      "topics": [{"topic": METADATA_TOPIC, "partitions": [
                                          {"partition": 0, "fetch_offset": self.image.next_offset,
                                           "partition_max_bytes": 8 * 1024 * 1024}]}]})
                resp = await client.request(req, timeout=5)
            except (OSError, asyncio.TimeoutError, ConnectionError, Exception) as e:
                if not isinstance(e, (OSError, asyncio.TimeoutError, ConnectionError)):
                    self.ev.log(f"metadata fetch failed: {e!r}")
                await asyncio.sleep(0.2)
                continue
            if self.stopping:  # Python 3.11's wait_for can swallow a cancellation
                return
            part = resp.responses[0].partitions[0]
            if part.error_code is ErrorCode.offset_out_of_range:
                # The controller's log is shorter than our copy: it was rebuilt. Start over.
                self.ev.log("controller metadata log is behind our copy; replaying from 0")
                self.image = MetadataImage()
                assert self.md_file is not None
                self.md_file.reset()
                continue
            touched: set[tuple[str, int]] = set()
            if part.records:
                items = []
                for r in rec.decode_records(part.records):
                    if r.offset != self.image.next_offset:
                        continue
                    d = json.loads(r.value)
                    self.image.apply(r.offset, d)
                    items.append((r.offset, d))
                    if d.get("type") == "partition":
                        touched.add((d["topic"], d["partition"]))
                assert self.md_file is not None
                self.md_file.append(items)
            if not self.metadata_ready and self.image.next_offset >= int(part.high_watermark):
                self.metadata_ready = True
            if self.published:
                self.apply_partitions(touched)
            else:
                self.maybe_publish()
            self.notify()

    def maybe_publish(self) -> None:
        """BrokerServer.startup: the BrokerMetadataPublisher starts publishing (first publish: every
        partition) once ``initialCatchUpFuture`` completed and our copy reached the metadata HWM;
        then the broker is ready to be unfenced (``setReadyToUnfence``: heartbeat at once)."""
        if self.published or not (self.caught_up and self.metadata_ready):
            return
        if self.image.next_offset <= self.broker_epoch:
            return  # our own registration record is not applied yet
        self.published = True
        self.apply_partitions(None)
        self.lifecycle_kick.set()

    # ------------------------------------------------------------------ lifecycle

    async def register(self, client: Client) -> None:
        cls = load_request_schema(62, 4)
        while not self.stopping:
            req = build(cls, {"broker_id": self.node_id, "cluster_id": self.cfg["cluster.id"],
                              "incarnation_id": self.incarnation,
                              "listeners": [{"name": "PLAINTEXT", "host": self.adv_host, "port": self.adv_port,
                                             "security_protocol": 0}],
                              "features": [{"name": "metadata.version", "min_supported_version": 1,
                                            "max_supported_version": 27}],
                              "rack": None, "previous_broker_epoch": self.logs.previous_broker_epoch})
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
                self.ev.log(f"controller rejects cluster.id {self.cfg['cluster.id']!r}; retrying")
            await asyncio.sleep(self.hb_s)

    async def lifecycle_loop(self) -> None:
        """BrokerLifecycleManager: register, then heartbeat. While STARTING (not caught up) the
        next heartbeat follows after 10 ms; ready-to-unfence sends one at once; otherwise every
        ``broker.heartbeat.interval.ms``."""
        client = self.controller_client("lifecycle")
        await self.register(client)
        cls = load_request_schema(63, 1)
        while not self.stopping:
            req = build(cls, {"broker_id": self.node_id, "broker_epoch": self.broker_epoch,
                              "current_metadata_offset": self.image.next_offset - 1,
                              "want_fence": not self.published, "want_shut_down": False})
            delay = self.hb_s
            try:
                resp = await client.request(req, timeout=max(self.hb_s * 2, 1.0))
                if resp.error_code is ErrorCode.stale_broker_epoch:
                    self.ev.log("controller says our broker epoch is stale; registering again")
                    self.incarnation = uuid.uuid4()
                    await self.register(client)
                    continue
                if resp.error_code is ErrorCode.none:
                    self.last_hb_ok = time.monotonic()
                    if not self.caught_up:
                        if resp.is_caught_up:  # STARTING → RECOVERY: initialCatchUpFuture
                            self.caught_up = True
                            self.maybe_publish()
                        delay = 0.01
                    elif not resp.is_fenced and not self.serving.is_set():
                        self.serving.set()  # RECOVERY → RUNNING: initialUnfenceFuture
                    if self.self_fenced and not resp.is_fenced:
                        self.self_fenced = False
                        self.ev.log("controller contact restored; resuming replicas")
                        self.apply_partitions(None)
            except (OSError, asyncio.TimeoutError, ConnectionError):
                pass
            if (self.self_fence_enabled and not self.self_fenced
                    and time.monotonic() - self.last_hb_ok > self.self_fence_s):
                self.fence_self()
            self.lifecycle_kick.clear()
            try:
                await asyncio.wait_for(self.lifecycle_kick.wait(), delay)
            except asyncio.TimeoutError:
                pass

    def fence_self(self) -> None:
        """Seed 002 (draft, not Kafka; only with ``seed002.self.fence.enable``): without controller
        contact a broker cannot know it still leads; stop."""
        self.self_fenced = True
        self.ev.emit("self_fenced", broker=self.node_id, broker_epoch=self.broker_epoch)
        for r in self.replicas.values():
            r._stop("self-fenced")
        self.notify()

    async def controlled_shutdown(self, deadline_s: float = 5.0) -> None:
        if self.broker_epoch < 0:
            return
        client = self.controller_client("shutdown")
        cls = load_request_schema(63, 1)
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            req = build(cls, {"broker_id": self.node_id, "broker_epoch": self.broker_epoch,
                              "current_metadata_offset": self.image.next_offset - 1,
                              "want_fence": False, "want_shut_down": True})
            try:
                resp = await client.request(req, timeout=1.0)
                if resp.error_code is not ErrorCode.none or resp.should_shut_down:
                    break
            except (OSError, asyncio.TimeoutError, ConnectionError):
                break
            await asyncio.sleep(0.1)
        client.close()

    # ------------------------------------------------------------------ alter partition channel

    def alter_partition(self, r: Replica, new_isr: list[int], recovered: bool = False) -> None:
        """Propose an ISR change (Partition.prepareIsrExpand / prepareIsrShrink → submitAlterPartition).

        The leader's maximal ISR is the union of the committed and the proposed ISR until the
        controller answers or newer metadata arrives (KIP-497, seed 003 §2.9.2). Broker epochs of
        the new ISR are taken now, as ``addBrokerEpochToIsr`` does.
        """
        epochs = [(b, self.broker_epoch if b == self.node_id
                   else r.followers[b].broker_epoch if b in r.followers else -1) for b in new_isr]
        item = PendingChange(list(new_isr), recovered, epochs, r.leader_epoch, r.partition_epoch)
        r.pending = item
        r.maximal_isr = sorted(set(r.isr) | set(new_isr), key=lambda x: (x not in r.isr, x))
        r.note_isr()
        self.alter_queue[(r.topic, r.partition)] = item
        self.alter_kick.set()

    def resubmit_alter_partition(self, r: Replica, item: PendingChange) -> None:
        """Partition.submitAlterPartition after a retriable error: the same change, sent again."""
        self.alter_queue[(r.topic, r.partition)] = item
        self.alter_kick.set()

    async def alter_loop(self) -> None:
        """Kafka's AlterPartitionManager: one request in flight; queued items are copied, not
        removed, and each is removed only when its partition's answer arrives. A lost connection,
        a timeout or a top-level error re-sends them ("we will not timeout AlterPartition
        request, instead letting it retry indefinitely until a response is received, or a new
        LeaderAndIsr overwrites the existing isrState"); an item whose partition moved on
        (newer metadata) is dropped instead of sent."""
        client = self.controller_client("alter-partition")
        version = 3 if self.features.kip903 else 2
        cls = load_request_schema(56, version)
        while not self.stopping:
            await self.alter_kick.wait()
            self.alter_kick.clear()
            by_topic: dict[str, list[dict]] = {}
            sent: dict[tuple[str, int], PendingChange] = {}
            for key, item in list(self.alter_queue.items()):
                r = self.replicas.get(key)
                t = self.image.topics.get(key[0])
                if r is None or t is None or r.pending is not item or r.role != "leader":
                    if self.alter_queue.get(key) is item:
                        del self.alter_queue[key]
                    continue
                pd: dict[str, Any] = {"partition_index": key[1], "leader_epoch": item.leader_epoch,
                                      "partition_epoch": item.partition_epoch,
                                      "leader_recovery_state": 0 if item.recovered else r.leader_recovery_state}
                if version >= 3:
                    pd["new_isr_with_epochs"] = [{"broker_id": b, "broker_epoch": e} for b, e in item.isr_with_epochs]
                else:
                    pd["new_isr"] = item.new_isr
                by_topic.setdefault(t.topic_id, []).append(pd)
                sent[key] = item
            if not sent:
                continue
            req = build(cls, {"broker_id": self.node_id, "broker_epoch": self.broker_epoch,
                              "topics": [{"topic_id": uuid.UUID(tid), "partitions": parts}
                                         for tid, parts in by_topic.items()]})
            try:
                resp = await client.request(req, timeout=30)
            except (OSError, asyncio.TimeoutError, ConnectionError):
                await asyncio.sleep(0.2)  # reconnect backoff; the items are still queued
                self.alter_kick.set()
                continue
            if resp.error_code is not ErrorCode.none:
                self.ev.log(f"AlterPartition top-level error {resp.error_code.name}; retrying")
                await asyncio.sleep(0.05)  # AlterPartitionManager: retry in 50 ms
                self.alter_kick.set()
                continue
            for td in resp.topics:
                tname = self.image.topic_ids.get(str(td.topic_id))
                for pd in td.partitions:
                    key = (tname, int(pd.partition_index))
                    item = sent.pop(key, None) if tname else None
                    if item is None:
                        continue
                    if self.alter_queue.get(key) is item:
                        del self.alter_queue[key]
                    if pd.error_code is not ErrorCode.none:
                        self.ev.log(f"AlterPartition {tname}-{pd.partition_index} rejected: {pd.error_code.name}")
                    r = self.replicas.get(key)
                    if r is not None:
                        r.on_alter_result(item, pd.error_code, pd)
            if self.alter_queue:
                # items not in the response stay queued and go again; so do retried ones
                # (Kafka re-sends at once; 50 ms keeps a persistent error from spinning)
                await asyncio.sleep(0.05)
                self.alter_kick.set()

    async def leader_loop(self) -> None:
        """Periodic ISR shrink (seed 003 §2.9) and HWM checkpoints."""
        last_ckpt = 0.0
        while not self.stopping:
            await asyncio.sleep(min(self.lag_s / 2, 0.5))
            for r in list(self.replicas.values()):
                r.maybe_shrink_isr()
            if time.monotonic() - last_ckpt > 1.0:
                last_ckpt = time.monotonic()
                self.logs.checkpoint_high_watermarks(self._hwm_snapshot())

    # ------------------------------------------------------------------ tiered storage and seed 004

    async def remote_loop(self) -> None:
        """RemoteLogManager's copy task (``remote.log.manager.task.interval.ms``), LogManager's
        retention task (``log.retention.check.interval.ms``) with local retention, and seed
        004's local-log reports (kraftsim/tiering.py)."""
        if self.rlm.storage is None and not self._seed004_configured():
            return
        last_copy = last_ret = 0.0
        client = self.controller_client("local-log-report")
        try:
            while not self.stopping:
                await asyncio.sleep(min(self.rlm.task_s, self.rlm.retention_s))
                if not self.published or self.self_fenced:
                    continue
                now = time.monotonic()
                copy, ret = now - last_copy >= self.rlm.task_s, now - last_ret >= self.rlm.retention_s
                for r in list(self.replicas.values()):
                    try:
                        if copy:
                            self.rlm.copy(r)
                        if ret:
                            self.rlm.retain(r)
                    except OSError as e:
                        self.ev.log(f"remote tier {r.topic}-{r.partition}: {e}")
                last_copy = now if copy else last_copy
                last_ret = now if ret else last_ret
                await self.send_local_log_reports(client)
        finally:
            client.close()

    def _seed004_configured(self, topic: str | None = None) -> bool:
        """Seed 004's preference is on when either threshold is > 0 (topic config over broker)."""
        for k in ("leader.election.eligible.local.log.ms", "leader.election.eligible.local.log.bytes"):
            t = self.image.topics.get(topic) if topic else None
            v = t.configs[k] if t is not None and k in t.configs else self.cfg.values.get(k)
            if v is not None and int(v) > 0:
                return True
        return False

    async def send_local_log_reports(self, client: Client) -> None:
        """Seed 004, "Leader aggregates and reports": for each partition it leads, the local log
        start timestamp and size of every ISR member, sent when they changed.

        The seed puts them in AlterPartition's NewIsrWithEpochs; kio's AlterPartition has no such
        fields (and kio, like the faultline proxy, refuses unknown tagged fields), so kraftsim
        sends them beside it as a private request (kraftsim/wire.py PRIVATE_LOCAL_LOG_REPORT,
        JSON) on its own connection, checked by the controller against the leader's broker
        epoch and leader epoch as AlterPartition is. Reports go at most once per
        ``remote.log.manager.task.interval.ms`` (the seed sends on every change).
        """
        parts = []
        sent: dict[tuple[str, int], tuple] = {}
        for key, r in list(self.replicas.items()):
            if r.role != "leader" or not self._seed004_configured(r.topic):
                continue
            members = []
            for b in r.isr:
                st = r.local_log_state(b)
                if st is not None:
                    members.append({"broker": b, "local_log_start_timestamp": st[0], "local_log_size_bytes": st[1]})
            snap = (r.leader_epoch, tuple((m["broker"], m["local_log_start_timestamp"], m["local_log_size_bytes"])
                                          for m in members))
            if not members or self.local_log_sent.get(key) == snap:
                continue
            parts.append({"topic": r.topic, "partition": r.partition, "leader_epoch": r.leader_epoch,
                          "replicas": members})
            sent[key] = snap
        if not parts:
            return
        body = json.dumps({"broker_id": self.node_id, "broker_epoch": self.broker_epoch, "partitions": parts}).encode()
        try:
            resp = json.loads(await client.request_private(PRIVATE_LOCAL_LOG_REPORT, body, timeout=5))
        except (OSError, asyncio.TimeoutError, ConnectionError, ValueError):
            return  # sent again next time: nothing is marked as reported
        if resp.get("error"):
            self.ev.log(f"local log report refused: {resp['error']}")
            return
        self.local_log_sent.update(sent)

    async def _list_offset(self, client: Client, r: Replica, ts: int) -> int | None:
        """ListOffsets v9 to the leader for one special timestamp (LeaderEndPoint.fetchEarliestLocalOffset,
        fetchLatestOffset, the KIP-1023 tiered offset); None when it fails."""
        cls = load_request_schema(2, 9)
        req = build(cls, {"replica_id": self.node_id, "isolation_level": 0, "topics": [
            {"name": r.topic, "partitions": [{"partition_index": r.partition, "current_leader_epoch": r.leader_epoch,
                                              "timestamp": ts}]}]})
        try:
            resp = await client.request(req, timeout=5)
        except (OSError, asyncio.TimeoutError, ConnectionError):
            return None
        p = resp.topics[0].partitions[0]
        return int(p.offset) if p.error_code is ErrorCode.none else None

    async def _maybe_start_from_tiered_offset(self, r: Replica, client: Client) -> None:
        """KIP-1023: an empty follower of a tiered topic starts at the leader's last tiered
        offset + 1 (ReplicaFetcherThread.shouldFetchFromLastTieredOffset)."""
        r.tier_start_checked = True
        if not (self.rlm.follower_from_tiered and self.rlm.enabled(r.topic) and r.log.log_end_offset == 0):
            return
        leader_leo = await self._list_offset(client, r, -1)
        if leader_leo is None or not self.rlm.should_fetch_from_last_tiered_offset(r, leader_leo):
            return
        tiered = await self._list_offset(client, r, -5)  # LATEST_TIERED_TIMESTAMP (KIP-1005)
        if tiered is None or tiered < 0:
            return  # nothing tiered yet: fetch from 0 as before
        if self.rlm.bootstrap_at(r, tiered + 1, reason="kip1023_last_tiered_offset"):
            self.ev.emit("follower_tiered_start", topic=r.topic, partition=r.partition, broker=self.node_id,
                         leader=r.leader, fetch_offset=r.log.log_end_offset, reason="last_tiered_offset")

    # ------------------------------------------------------------------ fetchers (follower side)

    def fetchers_add(self, r: Replica) -> None:
        self.fetchers_remove(r)
        s = self.fetch_sets.setdefault(r.leader, set())
        s.add((r.topic, r.partition))
        t = self.fetchers.get(r.leader)
        if t is None or t.done():
            leader = r.leader
            self.fetchers[leader] = asyncio.ensure_future(self._supervise(lambda: self.fetcher(leader)))

    def fetchers_remove(self, r: Replica) -> None:
        for s in self.fetch_sets.values():
            s.discard((r.topic, r.partition))

    async def fetcher(self, leader: int) -> None:
        """Pull-based replication from one leader broker (seed 003 §2.2)."""
        client: Client | None = None
        cls = load_request_schema(1, FETCH_VERSION)
        while not self.stopping:
            keys = [k for k in self.fetch_sets.get(leader, set())
                    if k in self.replicas and self.replicas[k].role == "follower" and self.replicas[k].leader == leader]
            if not keys:
                await asyncio.sleep(0.05)
                if not self.fetch_sets.get(leader):
                    break
                continue
            reg = self.image.brokers.get(leader)
            if reg is None:
                await asyncio.sleep(0.1)
                continue
            if client is None or (client.host, client.port) != (reg.host, reg.port):
                if client:
                    client.close()
                client = Client(reg.host, reg.port, f"kraftsim-replica-{self.node_id}", local_host=self.host)
            for k in keys:
                if not self.replicas[k].tier_start_checked:
                    await self._maybe_start_from_tiered_offset(self.replicas[k], client)
            by_topic: dict[str, list[dict]] = {}
            for k in keys:
                r = self.replicas[k]
                t = self.image.topics.get(k[0])
                if t is None:
                    continue
                by_topic.setdefault(t.topic_id, []).append({
                    "partition": k[1], "current_leader_epoch": r.leader_epoch, "fetch_offset": r.log.log_end_offset,
                    "last_fetched_epoch": r.log.latest_epoch, "log_start_offset": r.log.log_start_offset,
                    "partition_max_bytes": MAX_PARTITION_BYTES})
            req = build(cls, {"replica_state": {"replica_id": self.node_id, "replica_epoch": self.broker_epoch},
                              "max_wait": 500, "min_bytes": 1, "max_bytes": 16 * 1024 * 1024, "isolation_level": 0,
                              "session_id": 0, "session_epoch": -1,
                              "topics": [{"topic_id": uuid.UUID(tid), "partitions": ps} for tid, ps in by_topic.items()]})
            try:
                resp = await client.request(req, timeout=5)
            except (OSError, asyncio.TimeoutError, ConnectionError):
                await asyncio.sleep(0.2)
                continue
            backoff = False
            for td in resp.responses:
                tname = self.image.topic_ids.get(str(td.topic_id))
                for pd in td.partitions:
                    r = self.replicas.get((tname, int(pd.partition_index))) if tname else None
                    if r is None or r.role != "follower" or r.leader != leader:
                        continue
                    backoff |= await self._follower_response(r, pd, client)
            if backoff:
                await asyncio.sleep(0.1)
        if client:
            client.close()

    async def _follower_response(self, r: Replica, pd: Any, client: Client) -> bool:
        code = pd.error_code
        if code is ErrorCode.offset_out_of_range:
            await self._truncate_to_leader_end(r, client)
            return False
        if code is ErrorCode.offset_moved_to_tiered_storage:
            # TierStateMachine.start: the leader's local log start (EARLIEST_LOCAL_TIMESTAMP), then
            # buildRemoteLogAuxState: start just past the tiered segment below it
            off = await self._list_offset(client, r, -4)
            if off is None or self.rlm.storage is None:
                return True
            if not self.rlm.bootstrap_at(r, off, reason="offset_moved_to_tiered_storage"):
                return True
            self.ev.emit("follower_tiered_start", topic=r.topic, partition=r.partition, broker=self.node_id,
                         leader=r.leader, fetch_offset=r.log.log_end_offset, reason="offset_moved_to_tiered_storage")
            return False
        if code is not ErrorCode.none:
            return True
        div = pd.diverging_epoch
        if int(div.epoch) >= 0 and int(div.end_offset) >= 0:  # Kafka's FetchResponse.isDivergingEpoch
            fe, fo = r.log.end_offset_for_epoch(int(div.epoch))
            target = min(int(div.end_offset), fo if fe >= 0 and fo >= 0 else r.log.log_end_offset)
            if target < r.log.log_end_offset:
                r.log.truncate_to(max(target, r.log.log_start_offset), reason="diverging_epoch")
                r.hwm = min(r.hwm, r.log.log_end_offset)
            return False
        if pd.records:
            try:
                r.log.append_as_follower(bytes(pd.records))
            except Exception as e:
                self.ev.log(f"follower append {r.topic}-{r.partition} failed: {e}")
                return True
        # ReplicaFetcherThread.processPartitionData → UnifiedLog.maybeUpdateHighWatermark →
        # updateHighWatermark: the leader's HWM as sent, bounded by log start and end offsets (it
        # may go down; only the leader's maybeIncrementHighWatermark is monotonic).
        r.hwm = max(min(int(pd.high_watermark), r.log.log_end_offset), r.log.log_start_offset)
        return False

    async def _truncate_to_leader_end(self, r: Replica, client: Client) -> None:
        cls = load_request_schema(2, 7)
        req = build(cls, {"replica_id": self.node_id, "isolation_level": 0, "topics": [
            {"name": r.topic, "partitions": [{"partition_index": r.partition, "current_leader_epoch": r.leader_epoch,
                                              "timestamp": -1}]}]})
        try:
            resp = await client.request(req, timeout=5)
        except (OSError, asyncio.TimeoutError, ConnectionError):
            return
        p = resp.topics[0].partitions[0]
        if p.error_code is ErrorCode.none and int(p.offset) < r.log.log_end_offset:
            r.log.truncate_to(max(int(p.offset), r.log.log_start_offset), reason="offset_out_of_range")
            r.hwm = min(r.hwm, r.log.log_end_offset)

    # ------------------------------------------------------------------ client APIs

    def _leader_replica(self, topic: str, p: int) -> tuple[Replica | None, ErrorCode]:
        if topic not in self.image.topics or p not in self.image.topics[topic].partitions:
            return None, ErrorCode.unknown_topic_or_partition
        r = self.replicas.get((topic, p))
        if r is None or r.role != "leader" or self.self_fenced:
            return None, ErrorCode.not_leader_or_follower
        return r, ErrorCode.none

    async def h_produce(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(0, req.__version__)
        acks = int(req.acks)
        timeout = req.timeout.total_seconds()
        jobs = []
        for td in req.topic_data:
            for pd in td.partition_data:
                jobs.append((td.name, int(pd.index), self._produce_one(td.name, int(pd.index), pd.records, acks, timeout)))
        results = await asyncio.gather(*(j[2] for j in jobs))
        if acks == 0:
            return None
        out: dict[str, list] = {}
        for (t, p, _), (code, base) in zip(jobs, results):
            r = self.replicas.get((t, p))
            out.setdefault(t, []).append({"index": p, "error_code": code, "base_offset": base,
                                          "log_start_offset": r.log.log_start_offset if r else -1})
        return build(cls, {"responses": [{"name": t, "partition_responses": ps} for t, ps in out.items()],
                           "throttle_time": 0})

    async def _produce_one(self, topic: str, p: int, data: bytes | None, acks: int, timeout: float) -> tuple[ErrorCode, int]:
        r, err = self._leader_replica(topic, p)
        if r is None:
            return err, -1
        if not data:
            return ErrorCode.corrupt_message, -1
        if acks == -1 and len(r.isr) < r.effective_min_isr:
            # Partition.appendRecordsToLeader: ISR size < effectiveMinIsr → NotEnoughReplicas
            return ErrorCode.not_enough_replicas, -1
        headers = list(rec.iter_batches(data, 0))
        if not headers:
            return ErrorCode.corrupt_message, -1
        code, dup = r.check_sequence(headers[0])
        if code is not ErrorCode.none:
            return code, -1
        if dup is not None:
            base, last = dup
        else:
            try:
                base, last = r.append(bytes(data))
            except Exception as e:
                self.ev.log(f"produce to {topic}-{p} rejected: {e}")
                return ErrorCode.corrupt_message, -1
        if acks != -1:
            return ErrorCode.none, base
        fut = r.wait_for_hwm(last)
        try:
            code = await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            return ErrorCode.request_timed_out, -1
        return code, base if code is ErrorCode.none else -1

    async def h_fetch(self, header: Any, req: Any, peer: Peer) -> Any:
        v = req.__version__
        cls = load_response_schema(1, v)
        if v >= 15:
            rid, repoch = int(req.replica_state.replica_id), int(req.replica_state.replica_epoch)
        else:
            rid, repoch = int(getattr(req, "replica_id", -1)), -1
        deadline = time.monotonic() + min(req.max_wait.total_seconds(), 5.0)
        while True:
            responses, total = self._fetch_once(req, rid, repoch, v)
            remaining = deadline - time.monotonic()
            if total >= max(int(req.min_bytes), 1) or remaining <= 0 or self.stopping:
                break
            await self.wait_wake(remaining)
        body: dict[str, Any] = {"responses": responses, "throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0}
        return build(cls, body)

    def _fetch_once(self, req: Any, rid: int, repoch: int, v: int) -> tuple[list[dict], int]:
        total = 0
        responses = []
        for td in req.topics:
            if v >= 13:
                tname = self.image.topic_ids.get(str(td.topic_id))
                tkey: dict[str, Any] = {"topic_id": td.topic_id}
            else:
                tname = td.topic
                tkey = {"topic": td.topic}
            parts = []
            for pd in td.partitions:
                out, n = self._fetch_partition(tname, pd, rid, repoch, v)
                parts.append(out)
                total += n
            responses.append({**tkey, "partitions": parts})
        return responses, total

    def _fetch_partition(self, tname: str | None, pd: Any, rid: int, repoch: int, v: int) -> tuple[dict, int]:
        p = int(pd.partition)
        base = {"partition_index": p, "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                "aborted_transactions": None, "records": b""}
        if tname is None:
            return {**base, "error_code": ErrorCode.unknown_topic_id if v >= 13 else ErrorCode.unknown_topic_or_partition}, 0
        r, err = self._leader_replica(tname, p)
        if r is None:
            return {**base, "error_code": err}, 0
        cle = int(pd.current_leader_epoch)
        if cle >= 0 and cle != r.leader_epoch:
            return {**base, "error_code": ErrorCode.fenced_leader_epoch if cle < r.leader_epoch
                    else ErrorCode.unknown_leader_epoch}, 0
        off = int(pd.fetch_offset)
        log = r.log
        log_start = self.rlm.log_start_offset(r)  # UnifiedLog.logStartOffset: remote data included
        base.update(high_watermark=r.hwm, last_stable_offset=r.hwm, log_start_offset=log_start,
                    current_leader={"leader_id": self.node_id, "leader_epoch": r.leader_epoch})
        # ReplicaManager.handleOffsetOutOfRangeError: an offset in the remote tier only
        tiered = log_start <= off < log.log_start_offset
        if rid >= 0:  # follower fetch
            if rid not in r.replicas:
                return {**base, "error_code": ErrorCode.not_leader_or_follower}, 0
            if tiered:  # the follower builds its state from the tier (TierStateMachine.start)
                return {**base, "error_code": ErrorCode.offset_moved_to_tiered_storage}, 0
            lfe = int(getattr(pd, "last_fetched_epoch", -1))
            if lfe >= 0:
                e, end = log.end_offset_for_epoch(lfe)
                if e >= 0 and end >= 0 and (e < lfe or end < off):
                    return {**base, "error_code": ErrorCode.none,
                            "diverging_epoch": {"epoch": e, "end_offset": end}}, 1
            if off > log.log_end_offset or off < log.log_start_offset:
                return {**base, "error_code": ErrorCode.offset_out_of_range}, 0
            r.on_follower_fetch(rid, off, repoch)
            # seed 004: the follower's local log start, from which the leader derives the local
            # log state the seed's new Fetch fields would carry (see Replica.local_log_state)
            r.followers[rid].local_log_start_offset = int(getattr(pd, "log_start_offset", -1))
            base.update(high_watermark=r.hwm, last_stable_offset=r.hwm)
            data = log.read(off, min(int(pd.partition_max_bytes), MAX_PARTITION_BYTES))
        else:
            if tiered:  # consumers read the remote tier (RemoteLogManager.read via DelayedRemoteFetch)
                data = self.rlm.read_remote(r, off, int(pd.partition_max_bytes) or MAX_PARTITION_BYTES, r.hwm)
                if not data and off < r.hwm:
                    return {**base, "error_code": ErrorCode.offset_out_of_range}, 0
                return {**base, "error_code": ErrorCode.none, "records": data}, len(data)
            if off > log.log_end_offset or off < log.log_start_offset:
                return {**base, "error_code": ErrorCode.offset_out_of_range}, 0
            try:
                data = log.read(off, int(pd.partition_max_bytes) or MAX_PARTITION_BYTES, max_offset_exclusive=r.hwm) if off < r.hwm else b""
            except OffsetOutOfRange:
                return {**base, "error_code": ErrorCode.offset_out_of_range}, 0
        return {**base, "error_code": ErrorCode.none, "records": data}, len(data)

    async def h_list_offsets(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(2, req.__version__)
        rid = int(req.replica_id)
        topics = []
        for td in req.topics:
            parts = []
            for pd in td.partitions:
                p = int(pd.partition_index)
                r, err = self._leader_replica(td.name, p)
                if r is None:
                    parts.append({"partition_index": p, "error_code": err})
                    continue
                ts = int(pd.timestamp)
                special = self.rlm.list_offset(r, ts)  # -2 and the tiered-storage timestamps
                if special is not None:
                    off = special
                elif ts == -1:
                    off = r.log.log_end_offset if rid >= 0 else r.hwm
                else:
                    off = r.hwm
                parts.append({"partition_index": p, "error_code": ErrorCode.none, "timestamp": -1,
                              "offset": off, "old_style_offsets": [off], "leader_epoch": r.leader_epoch})
            topics.append({"name": td.name, "partitions": parts})
        return build(cls, {"topics": topics, "throttle_time": 0})

    def _live_brokers(self) -> list[dict]:
        # A self-fenced broker's image is stale: it leaves itself out, so clients go elsewhere.
        return [{"node_id": b.broker, "host": b.host, "port": b.port, "rack": None}
                for b in sorted(self.image.brokers.values(), key=lambda x: x.broker)
                if not b.fenced and not (self.self_fenced and b.broker == self.node_id)]

    def _partition_view(self, ps: Any) -> dict:
        leader = ps.leader if ps.leader != NO_LEADER and self.image.unfenced(ps.leader) else NO_LEADER
        if self.self_fenced and leader == self.node_id:
            leader = NO_LEADER
        return {"error_code": ErrorCode.none if leader != NO_LEADER else ErrorCode.leader_not_available,
                "partition_index": ps.partition, "leader_id": leader, "leader_epoch": ps.leader_epoch,
                "replica_nodes": ps.replicas, "isr_nodes": ps.isr,
                "offline_replicas": [r for r in ps.replicas if not self.image.unfenced(r)],
                "eligible_leader_replicas": ps.elr, "last_known_elr": ps.last_known_elr}

    async def h_metadata(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(3, req.__version__)
        names: list[str | None]
        if req.topics is None:
            names = sorted(self.image.topics)
        else:
            names = []
            for t in req.topics:
                n = t.name
                if n is None and getattr(t, "topic_id", None) is not None:
                    n = self.image.topic_ids.get(str(t.topic_id))
                names.append(n)
        topics = []
        for n in names:
            ts = self.image.topics.get(n) if n else None
            if ts is None:
                topics.append({"error_code": ErrorCode.unknown_topic_or_partition, "name": n, "topic_id": None,
                               "partitions": []})
                continue
            topics.append({"error_code": ErrorCode.none, "name": n, "topic_id": uuid.UUID(ts.topic_id),
                           "partitions": [self._partition_view(ps) for _, ps in sorted(ts.partitions.items())]})
        return build(cls, {"throttle_time": 0, "brokers": self._live_brokers(), "cluster_id": self.cfg["cluster.id"],
                           "controller_id": self.node_id if self.metadata_ready else -1, "topics": topics})

    async def h_describe_topic_partitions(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(75, req.__version__)
        names = [t.name for t in req.topics] or sorted(self.image.topics)
        topics = []
        for n in names:
            ts = self.image.topics.get(n)
            if ts is None:
                topics.append({"error_code": ErrorCode.unknown_topic_or_partition, "name": n, "topic_id": None})
                continue
            topics.append({"error_code": ErrorCode.none, "name": n, "topic_id": uuid.UUID(ts.topic_id),
                           "partitions": [self._partition_view(ps) for _, ps in sorted(ts.partitions.items())]})
        return build(cls, {"throttle_time": 0, "topics": topics, "next_cursor": None})

    async def h_init_producer_id(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(22, req.__version__)
        if getattr(req, "transactional_id", None):
            return build(cls, {"error_code": ErrorCode.transactional_id_authorization_failed, "producer_id": -1,
                               "producer_epoch": -1})
        old_pid = int(getattr(req, "producer_id", -1))
        old_epoch = int(getattr(req, "producer_epoch", -1))
        if old_pid >= 0 and 0 <= old_epoch < 32766:
            # KIP-360: an idempotent producer bumps its epoch after an unresolved sequence.
            return build(cls, {"producer_id": old_pid, "producer_epoch": old_epoch + 1, "throttle_time": 0})
        # Unique without a coordinator: node id in the high bits, wall-clock ms + a counter below.
        self.pid_seq += 1
        pid = (self.node_id << 44) | ((int(time.time() * 1000) << 4) + self.pid_seq) & ((1 << 44) - 1)
        return build(cls, {"producer_id": pid, "producer_epoch": 0, "throttle_time": 0})

    async def h_offset_for_leader_epoch(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(23, req.__version__)
        topics = []
        for td in req.topics:
            parts = []
            for pd in td.partitions:
                p = int(pd.partition)
                r, err = self._leader_replica(td.topic, p)
                if r is None:
                    parts.append({"partition": p, "error_code": err})
                    continue
                e, end = r.log.end_offset_for_epoch(int(pd.leader_epoch))
                if int(getattr(req, "replica_id", -1)) < 0 and end > r.hwm:
                    end = r.hwm if e == r.leader_epoch else end
                parts.append({"partition": p, "error_code": ErrorCode.none, "leader_epoch": e, "end_offset": end})
            topics.append({"topic": td.topic, "partitions": parts})
        return build(cls, {"topics": topics, "throttle_time": 0})

    async def h_create_topics(self, header: Any, req: Any, peer: Peer) -> Any:
        cls = load_response_schema(19, req.__version__)
        fwd = self.controller_client("forwarding")
        try:
            resp = await fwd.request(req, timeout=10)
        except (OSError, asyncio.TimeoutError, ConnectionError):
            return build(cls, {"topics": [{"name": t.name, "error_code": ErrorCode.not_controller,
                                           "error_message": "controller unreachable"} for t in req.topics]},
                         fill_error=ErrorCode.not_controller)
        finally:
            fwd.close()
        # Answer once our own metadata shows the new topics, so the client's next Metadata sees them.
        end = time.monotonic() + 3
        want = [t.name for t in resp.topics if t.error_code is ErrorCode.none]
        while time.monotonic() < end and any(w not in self.image.topics for w in want):
            await self.wait_wake(0.05)
        return resp

    async def h_describe_quorum(self, header: Any, req: Any, peer: Peer) -> Any:
        """KafkaApis.handle: ``DESCRIBE_QUORUM => forwardToControllerOrFail`` — the broker does
        not answer it itself; the forwarding channel carries it to the controllers, where the
        raft leader answers (ControllerApis.handleDescribeQuorum -> KafkaRaftClient
        .handleDescribeQuorumRequest). A non-leader's NOT_LEADER_OR_FOLLOWER makes the channel
        try the next controller (controller_channel.not_controller); if none answers in time
        the error is top-level REQUEST_TIMED_OUT (ForwardingManager.scala, ForwardingManagerImpl
        .forwardRequest onTimeout -> DescribeQuorumRequest.getErrorResponse ->
        getTopLevelErrorResponse); if only non-leaders answered, the last of their answers."""
        cls = load_response_schema(55, req.__version__)
        fwd = self.controller_client("forwarding")
        try:
            return await fwd.request(req, timeout=DESCRIBE_QUORUM_FORWARD_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError, ConnectionError):
            return build(cls, {"error_code": ErrorCode.request_timed_out})
        finally:
            fwd.close()

    # ------------------------------------------------------------------ run

    async def run(self, stop: asyncio.Event) -> None:
        self.logs.load()
        for log in self.logs.logs().values():
            # UnifiedLog.loadProducerState runs while the logs load, before the broker registers:
            # never later on the event loop, where a long log would stall every channel.
            log.producer_state()
        self._hwm_checkpoint = self.logs.read_high_watermarks()
        self.md_file = MetadataLogFile(self.md_file_path, fsync=False)
        for off, d in self.md_file.replay():
            self.image.apply(off, d)
        self.server = Server(BROKER_APIS, {
            0: self.h_produce, 1: self.h_fetch, 2: self.h_list_offsets, 3: self.h_metadata,
            19: self.h_create_topics, 22: self.h_init_producer_id, 23: self.h_offset_for_leader_epoch,
            55: self.h_describe_quorum, 75: self.h_describe_topic_partitions}, on_error=self.ev.log)
        self.server.gate = self.serving
        await self.server.start(self.host, self.port)
        self.tasks = [asyncio.ensure_future(self._supervise(f)) for f in
                      (self.lifecycle_loop, self.metadata_loop, self.alter_loop, self.leader_loop,
                       self.remote_loop)]
        await stop.wait()
        await self.shutdown()

    def _hwm_snapshot(self) -> dict[tuple[str, int], int]:
        """HWMs to checkpoint: the replicas' own, and the loaded checkpoint for logs not handed to
        the replica manager yet (before the first publish a checkpoint must not forget them)."""
        logs = self.logs.logs()
        out = {k: v for k, v in self._hwm_checkpoint.items() if k in logs}
        out.update({k: r.hwm for k, r in self.replicas.items()})
        return out

    async def _supervise(self, loop_fn) -> None:  # noqa: ANN001
        """Keep a channel loop alive: an unexpected error is logged once and the loop restarts
        (a broker whose heartbeat task died would be fenced forever without saying why)."""
        while not self.stopping:
            try:
                await loop_fn()
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001
                if self.stopping:
                    return
                self.ev.log(f"{getattr(loop_fn, '__name__', 'loop')} failed, restarting it: {type(e).__name__}: {e}")
                await asyncio.sleep(0.5)

    async def shutdown(self) -> None:
        """Clean shutdown: controlled shutdown, then flush, checkpoints and the clean marker."""
        await self.controlled_shutdown()
        self.stopping = True
        for t in self.tasks + list(self.fetchers.values()):
            t.cancel()
        if self.server:
            self.server.close()
        for r in self.replicas.values():
            r.fail_waiters(ErrorCode.not_leader_or_follower)
        self.logs.shutdown(self.broker_epoch, self._hwm_snapshot())
        if self.md_file:
            self.md_file.close()
