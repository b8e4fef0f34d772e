"""The kraftsim broker process: its parts, built and started as Kafka's BrokerServer does.

Channels to the controller, each its own TCP connection as in Kafka (so a proxy can delay
one without the others): lifecycle (BrokerRegistration 62 + BrokerHeartbeat 63,
``lifecycle.py``), alter-partition (AlterPartition 56, ``alter_partition.py``), metadata (Fetch of
``__cluster_metadata``, ``metadata_publisher.py``), plus a forwarding connection for CreateTopics
and DescribeQuorum (``apis.py``).

Start-up (Kafka's ``BrokerServer.startup`` with ``BrokerLifecycleManager``): a broker replays
its local metadata copy, but hands partitions to its replica manager (lead, follow, truncate)
only once the controller has accepted this incarnation's registration and a heartbeat said it
caught up with the metadata log to its registration record (``initialCatchUpFuture``); it then
asks to be unfenced, and processes client and replica requests only once unfenced
(``initialUnfenceFuture`` → ``SocketServer.enableRequestProcessing``).

Why this object is small: it owns what every part reads (config, event log, log manager, the
wake-up of long-polling fetches, channels to the controller) and the order of startup and
shutdown; each rule lives in the part named after the Kafka class that holds it.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Awaitable, Callable

from kio.schema.errors import ErrorCode

from kraftsim.broker.alter_partition import AlterPartitionManager
from kraftsim.broker.assignments import AssignmentsManager
from kraftsim.broker.apis import BROKER_APIS, KafkaApis
from kraftsim.broker.fetcher import ReplicaFetcherManager
from kraftsim.broker.lifecycle import BrokerLifecycleManager
from kraftsim.broker.metadata_publisher import BrokerMetadataPublisher
from kraftsim.broker.remote_log_manager import RemoteLogManager
from kraftsim.broker.replica_manager import ReplicaManager
from kraftsim.config import Config
from kraftsim.events import EventLog
from kraftsim.metadata import MetadataImage
from kraftsim.raft.client import halt
from kraftsim.raft.controller_channel import ControllerLocator, QuorumClient
from kraftsim.storage.manager import LogManager
from kraftsim.wire import Server


class BrokerServer:
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
        self.lag_s = int(cfg["replica.lag.time.max.ms"]) / 1000
        self.features = cfg.features  # derived once: the partitions' hot paths read it
        self.logs = LogManager(cfg["log.dirs"], node_id=self.node_id, cluster_id=cfg["cluster.id"],
                               on_event=lambda name, f: self.ev.emit(name, **f),
                               flush_interval_messages=cfg["log.flush.interval.messages"],
                               segment_bytes=int(cfg["log.segment.bytes"]),
                               clean_shutdown_marker_needs_load=cfg.features.clean_shutdown_marker_needs_load,
                               epoch_checkpoint_sync_on_truncation=not cfg.features.epoch_checkpoint_truncation_unsynced)
        mdir = Path(cfg["metadata.log.dir"]) if cfg["metadata.log.dir"] else Path(cfg["log.dirs"][0]) / "kraftsim-metadata"
        self.stopping = False
        #: BrokerServer's status STARTED: set once the broker was unfenced at start-up (or its
        #: start-up failed); before it a SIGTERM shuts nothing down (see :meth:`run`)
        self.started = False
        #: the process's exit status: 1 after a failed start-up (Kafka.main exits 1)
        self.exit_code = 0
        self._stop: asyncio.Event | None = None
        #: Exit.halt (a test of the load may pass a recorder instead)
        self.on_fatal: Callable[[int], None] = halt
        self.wake = asyncio.Event()
        self.tasks: list[asyncio.Task] = []
        self.server: Server | None = None
        self.metadata = BrokerMetadataPublisher(self, mdir / "metadata.jsonl")
        self.lifecycle = BrokerLifecycleManager(self)
        self.replica_manager = ReplicaManager(self)
        self.alter_partition_manager = AlterPartitionManager(self)
        self.assignments = AssignmentsManager(self)
        self.fetcher_manager = ReplicaFetcherManager(self)
        self.rlm = RemoteLogManager(self)  # KIP-405 remote tier, KIP-1023, docs/seeds.md#seed-004 reports
        self.apis = KafkaApis(self)

    # ------------------------------------------------------------------ shared by the parts

    @property
    def image(self) -> MetadataImage:
        """The metadata image as this broker has replayed it (owned by the metadata publisher,
        which replaces it when the controller's log was rebuilt)."""
        return self.metadata.image

    def notify(self) -> None:
        """Something a long-polling fetch or a waiting request may be waiting for happened."""
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
        NOT_CONTROLLER and leader hints among ``controller.quorum.voters`` (kraftsim/raft/); the
        ``metadata`` channel is the broker's raft client (an observer), the only one that looks for
        another voter when its controller goes quiet."""
        return QuorumClient(self.ctl_locator, f"kraftsim-broker-{self.node_id}-{name}", local_host=self.host,
                            observer=name == "metadata")

    async def supervise(self, loop_fn: Callable[[], Awaitable[None]], name: str) -> None:
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
                self.ev.log(f"{name} failed, restarting it: {type(e).__name__}: {e}")
                await asyncio.sleep(0.5)

    # ------------------------------------------------------------------ run

    async def run(self, stop: asyncio.Event) -> None:
        """BrokerServer.startup: the log dirs' identities and clean-shutdown markers, then the local
        metadata copy, then the socket server (gated until unfenced), then the channels and
        periodic tasks. The logs themselves load on the first metadata publish
        (:meth:`start_logs`), as Kafka's KRaft broker loads them in BrokerMetadataPublisher."""
        self._stop = stop
        self.logs.read_clean_shutdown_markers()
        self.metadata.load()
        self.server = Server(BROKER_APIS, self.apis.handlers(), on_error=self.ev.log)
        self.server.gate = self.lifecycle.serving
        await self.server.start(self.host, self.port)
        self.tasks = [asyncio.ensure_future(self.supervise(f, name)) for f, name in (
            (self.lifecycle.run, "lifecycle_loop"), (self.metadata.run, "metadata_loop"),
            (self.alter_partition_manager.run, "alter_loop"), (self.replica_manager.run, "leader_loop"),
            (self.assignments.run, "assignments_loop"),
            (self.rlm.run, "remote_loop"))]
        await stop.wait()
        if self.started:
            await self.shutdown()
        else:
            self.abandon()

    def startup_failed(self, why: str) -> None:
        """BrokerServer.startup's catch (3.3-4.x): a start-up that fails - here the initial
        registration not accepted within ``initial.broker.registration.timeout.ms``
        (BrokerLifecycleManager.RegistrationTimeoutEvent shuts its event queue down, which
        cancels initialCatchUpFuture, the future startup waits on) - sets the status STARTED,
        logs "Fatal error during broker startup. Prepare to shutdown" and runs the whole
        shutdown(), LogManager.shutdown and its clean-shutdown markers included (which dirs:
        gate clean_shutdown_marker_needs_load, KAFKA-15375); Kafka.main then exits 1
        (3.5.1 core/src/main/scala/kafka/server/BrokerServer.scala startup, BrokerLifecycleManager.scala)."""
        if self.started or self.stopping:
            return
        self.ev.log(f"ERROR {why}")
        self.ev.log("FATAL Fatal error during broker startup. Prepare to shutdown")
        self.started = True
        self.exit_code = 1
        if self._stop is not None:
            self._stop.set()

    def abandon(self) -> None:
        """A SIGTERM before the broker STARTED: BrokerServer.shutdown begins with
        ``if (!maybeChangeStatus(STARTED, SHUTTING_DOWN)) return`` (3.3-4.x), so nothing is shut
        down - no controlled shutdown, no flush, no checkpoint, no clean-shutdown marker - and
        the JVM exits (KafkaRaftServer.shutdown only unregisters its app info). Kafka's real
        3.5.1 broker, SIGTERMed while it could not register: "Terminating process due to signal
        SIGTERM", "App info kafka.server for 1 unregistered", then its next start "Recovering 9
        logs ... since no clean shutdown file was found" (docs/kraftsim.md, KAFKA-15375)."""
        self.ev.log("SIGTERM before the broker started: BrokerServer.shutdown does nothing; exiting")
        self._stop_serving()
        self.logs.close_unclean()
        self.metadata.close()

    def _stop_serving(self) -> None:
        """Stop every task, the fetchers and the socket server (both ways of stopping)."""
        self.stopping = True
        for t in self.tasks:
            t.cancel()
        self.fetcher_manager.shutdown()
        if self.server:
            self.server.close()

    def start_logs(self) -> None:
        """LogManager.startup from BrokerMetadataPublisher's first publish (initializeManagers):
        registration accepted and caught up, before any partition is handed to the replica
        manager. A broker stopped before this point never loaded its logs (LogManager.shutdown
        then decides whether to mark them clean: features gate clean_shutdown_marker_needs_load)."""
        if self.logs.loaded:
            return
        self.logs.load()
        if self.logs.offline_dirs:
            self.handle_log_dir_failure()
        for log in self.logs.logs().values():
            # UnifiedLog.loadProducerState runs while the logs load: never later on the event loop
            log.producer_state()
        self.replica_manager.load_high_watermarks()   # ReplicaManager reads it once the logs loaded

    def handle_log_dir_failure(self) -> None:
        """What Kafka 3.7 does once a log dir went offline while its logs loaded: ReplicaManager's
        LogDirFailureHandler thread (started by replicaManager.startup, right after
        LogManager.startup in BrokerMetadataPublisher.initializeManagers) takes the dir from the
        LogDirFailureChannel → ReplicaManager.handleLogDirFailure ("Stopping serving replicas in
        dir") → LogManager.handleLogDirFailure, which halts when no live dir is left ("Shutdown
        broker because all log dirs in ... have failed", Exit.halt(1)); else ReplicaManager halts
        when the failed dir holds the metadata log ("Shutdown broker because the metadata log dir
        ... has failed"; 3.7.0 core/src/main/scala/kafka/server/ReplicaManager.scala and
        core/src/main/scala/kafka/log/LogManager.scala). A restart finds the same file and halts
        again. A broker serving on with some dirs offline (JBOD: the directory's failure sent to
        the controller, BrokerLifecycleManager.propagateDirectoryFailure) is not modelled: kraftsim
        says so and exits 2."""
        for d, error in self.logs.offline_dirs.items():
            self.ev.log(f"ERROR Error while loading log dir {d}: {error}")
            self.ev.log(f"WARN Stopping serving replicas in dir {d}")
            self.ev.log(f"WARN Stopping serving logs in dir {d}")
        if not self.logs.live_dirs:
            self.ev.log("FATAL Shutdown broker because all log dirs in "
                        f"{', '.join(str(d) for d in self.logs.log_dirs)} have failed")
            self.on_fatal(1)
        mdir = Path(self.cfg["metadata.log.dir"]) if self.cfg["metadata.log.dir"] else Path(self.cfg["log.dirs"][0])
        if any(mdir == d or d in mdir.parents for d in self.logs.offline_dirs):
            self.ev.log(f"FATAL Shutdown broker because the metadata log dir {mdir} has failed")
            self.on_fatal(1)
        self.ev.log("kraftsim does not model a broker serving with some of its log dirs offline "
                    f"({', '.join(str(d) for d in self.logs.offline_dirs)}); exiting")
        self.on_fatal(2)

    async def shutdown(self) -> None:
        """Clean shutdown: controlled shutdown, then flush, checkpoints and the clean marker."""
        await self.lifecycle.controlled_shutdown()
        self._stop_serving()
        self.replica_manager.fail_all_waiters(ErrorCode.not_leader_or_follower)
        self.logs.shutdown(self.lifecycle.broker_epoch, self.replica_manager.hwm_snapshot())
        self.metadata.close()
