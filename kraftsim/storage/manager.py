"""``LogManager``: a broker's log dirs — identity, clean-shutdown detection, checkpoints, logs.

Why it exists: whether a restart was clean decides everything in docs/seeds.md#seed-003's Last Replica
Standing issue (§2.4.1 note). Like Kafka's LogManager, a log dir whose ``.kafka_cleanshutdown``
marker is present is trusted as-is; otherwise every partition in it is recovered from its
recovery point. The marker is removed once the logs are loaded, so a crash from then on is
detected on the next start. The marker's broker epoch is offered as ``previous_broker_epoch``
for BrokerRegistration (KIP-966: a mismatch tells the controller the restart was unclean).

Recovery points: Kafka checkpoints them every 60 s and right after a truncation
(``LogManager.truncateTo`` / ``truncateFullyAndStartAt`` → ``checkpointRecoveryOffsetsInDir``);
kraftsim writes ``recovery-point-offset-checkpoint`` right after every flush and every
truncation, so the file always equals what is durable, which is what a page-cache-loss nemesis
reads to decide what to cut.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Iterable

from .checkpoints import (
    LOG_START_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    CheckpointError,
    read_clean_shutdown,
    read_meta_properties,
    read_offset_checkpoint,
    remove_clean_shutdown,
    write_clean_shutdown,
    write_meta_properties,
    write_offset_checkpoint,
)
from .log import DEFAULT_SEGMENT_BYTES, EventSink, PartitionLog

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


class StorageConfigError(RuntimeError):
    """The log dirs cannot be used (wrong node/cluster id, unreadable checkpoint). One line."""


class LogManager:
    def __init__(
        self,
        log_dirs: Iterable[Path | str],
        *,
        node_id: int,
        cluster_id: str,
        on_event: EventSink | None = None,
        flush_interval_messages: int | None = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        clean_shutdown_marker_needs_load: bool = True,
        epoch_checkpoint_sync_on_truncation: bool = True,
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        if not self.log_dirs:
            raise StorageConfigError("log.dirs: at least one log directory is required")
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.on_event = on_event
        self.flush_interval_messages = flush_interval_messages
        self.segment_bytes = segment_bytes
        self.had_clean_shutdown = False
        self.previous_broker_epoch = -1
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._dir_of: dict[tuple[str, int], Path] = {}
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        self._loaded = False
        self._markers_read = False
        #: features gate clean_shutdown_marker_needs_load (kafka.version >= 3.5.2): shutdown marks
        #: only a dir that had the marker or whose logs all loaded (LogManager.shutdown)
        self.clean_shutdown_marker_needs_load = clean_shutdown_marker_needs_load
        #: features gate epoch_checkpoint_truncation_unsynced (on: False), for every log's epoch cache
        self.epoch_checkpoint_sync_on_truncation = epoch_checkpoint_sync_on_truncation
        #: LogManager.hadCleanShutdownFlags / loadLogsCompletedFlags, per dir, set by :meth:`load`
        self._had_clean: dict[Path, bool] = {}
        self._load_completed: set[Path] = set()
        #: dirs taken offline while loading (LogDirFailureChannel), with the first error
        self.offline_dirs: dict[Path, str] = {}
        #: each log dir's meta.properties directory.id (KIP-858), read as the dirs are checked
        self.directory_ids: dict[Path, str] = {}

    # ------------------------------------------------------------------ startup

    def _check_meta(self, d: Path) -> None:
        try:
            props = read_meta_properties(d)
        except CheckpointError as e:
            raise StorageConfigError(str(e)) from None
        if props is None:
            props = write_meta_properties(d, node_id=self.node_id, cluster_id=self.cluster_id)
            self.directory_ids[d] = props["directory.id"]
            return
        if props.get("directory.id"):
            self.directory_ids[d] = props["directory.id"]
        path = d / "meta.properties"
        if props.get("version") != "1":
            raise StorageConfigError(
                f"{path}: version is {props.get('version')!r}, want 1 (a KRaft log dir)")
        if props.get("node.id") != str(self.node_id):
            raise StorageConfigError(
                f"{path}: node.id is {props.get('node.id')!r} but this broker is node.id {self.node_id}; "
                "wrong log.dirs or node.id")
        if props.get("cluster.id") != self.cluster_id:
            raise StorageConfigError(
                f"{path}: cluster.id is {props.get('cluster.id')!r} but this cluster is {self.cluster_id!r}; "
                "wrong log.dirs or a different cluster")

    def read_clean_shutdown_markers(self) -> None:
        """Validate identities and read every dir's clean-shutdown marker, before the broker
        registers (its broker epoch is BrokerRegistration's ``previous_broker_epoch``; Kafka:
        LogManager.readBrokerEpochFromCleanShutdownFiles). The logs load later (:meth:`load`)."""
        with self._lock:
            if self._markers_read:
                return
            self._clean_dirs: list[bool] = []
            epochs = []
            for d in self.log_dirs:
                try:
                    d.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise StorageConfigError(f"log.dirs: cannot create {d}: {e.strerror}") from None
                self._check_meta(d)
                marker = read_clean_shutdown(d)
                self._clean_dirs.append(marker is not None)
                epochs.append(marker if marker is not None else -1)
            self.had_clean_shutdown = all(self._clean_dirs)
            self.previous_broker_epoch = max(epochs) if self.had_clean_shutdown else -1
            self._markers_read = True

    @property
    def loaded(self) -> bool:
        """Whether :meth:`load` completed (LogManager.startup ran)."""
        return self._loaded

    def load(self) -> None:
        """LogManager.startup → loadLogs: open (and if needed recover) every log, dir by dir. The
        broker calls it on its first metadata publish (BrokerMetadataPublisher), after it registered
        and caught up, as Kafka in KRaft mode does; a shutdown before then finds dirs not loaded.
        Each dir's load is one ``log_dir_loaded`` event (Kafka: "Skipping recovery of N logs from
        DIR since clean shutdown file was found" / "Recovering N logs from DIR since no clean
        shutdown file was found")."""
        self.read_clean_shutdown_markers()
        with self._lock:
            for d, clean in zip(self.log_dirs, self._clean_dirs):
                self._had_clean[d] = clean   # loadLogs: hadCleanShutdownFlags.put(dir, hadCleanShutdown)
                n = 0
                try:
                    rps = read_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
                    starts = read_offset_checkpoint(d / LOG_START_CHECKPOINT)
                except CheckpointError as e:
                    raise StorageConfigError(str(e)) from None
                for child in sorted(d.iterdir()):
                    m = _PARTITION_DIR.match(child.name)
                    if not child.is_dir() or not m or "." in child.name.rsplit("-", 1)[1]:
                        continue
                    key = (m.group("topic"), int(m.group("partition")))
                    try:
                        log = PartitionLog.open(
                            child, key[0], key[1], recovery_point=rps.get(key, 0), clean=clean,
                            segment_bytes=self.segment_bytes, flush_interval_messages=self.flush_interval_messages,
                            on_event=self.on_event, log_start_offset=starts.get(key),
                            epoch_checkpoint_sync_on_truncation=self.epoch_checkpoint_sync_on_truncation,
                        )
                    except CheckpointError as e:
                        # LogManager.loadLogs (3.7.0 core/src/main/scala/kafka/log/LogManager.scala):
                        # a checkpoint that cannot be read raised KafkaStorageException from
                        # CheckpointFileWithFailureHandler.read, which already called
                        # LogDirFailureChannel.maybeAddOfflineLogDir ("Error while reading checkpoint
                        # file ..."); the log is not loaded, the dir's other logs are
                        self._offline(d, str(e), key)
                        continue
                    except OSError as e:
                        raise StorageConfigError(f"{e.filename or child}: cannot open partition log: {e.strerror}") from None
                    self._register(key, d, log)
                    n += 1
                if d in self.offline_dirs:
                    continue   # handleLogDirFailure drops the dir's logs and never marks it loaded
                self._load_completed.add(d)   # loadLogs: loadLogsCompletedFlags.put(dir, true)
                if self.on_event is not None:
                    self.on_event("log_dir_loaded", {"log_dir": str(d), "clean_shutdown": clean, "logs": n})
            for d in self.offline_dirs:   # ReplicaManager/LogManager.handleLogDirFailure
                for key in [k for k, kd in self._dir_of.items() if kd == d]:
                    self._logs.pop(key).close(clean=False)
                    del self._dir_of[key]
            self._loaded = True
            # Kafka checkpoints right after loading, then deletes the marker: from here on a
            # crash must be detected as unclean.
            self.checkpoint_recovery_points()
            self.checkpoint_log_start_offsets()
            for d in self.live_dirs:
                remove_clean_shutdown(d)

    def _offline(self, d: Path, error: str, key: tuple[str, int]) -> None:
        """LogDirFailureChannel.maybeAddOfflineLogDir: the first error of a dir takes it offline
        (one ``log_dir_offline`` event, Kafka's ERROR "Error while reading checkpoint file ...")."""
        if d in self.offline_dirs:
            return
        self.offline_dirs[d] = error
        if self.on_event is not None:
            self.on_event("log_dir_offline", {"log_dir": str(d), "error": error, "topic": key[0],
                                              "partition": key[1]})

    @property
    def live_dirs(self) -> list[Path]:
        """LogManager.liveLogDirs: the dirs not taken offline."""
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def _register(self, key: tuple[str, int], d: Path, log: PartitionLog) -> None:
        log.on_flush = self._on_flush
        log.on_truncate = self._on_flush  # LogManager.truncateTo: checkpointRecoveryOffsetsInDir
        self._logs[key] = log
        self._dir_of[key] = d

    def _on_flush(self, log: PartitionLog) -> None:
        self.checkpoint_recovery_points([self._dir_of[(log.topic, log.partition)]])

    # ------------------------------------------------------------------ partitions

    def directory_id_of(self, topic: str, partition: int) -> str | None:
        """LogManager.directoryId(log.dir.getParent): the directory.id of the dir holding the
        partition's log, None when there is no such log."""
        with self._lock:
            d = self._dir_of.get((topic, partition))
        return self.directory_ids.get(d) if d is not None else None

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int) -> PartitionLog:
        key = (topic, partition)
        with self._lock:
            log = self._logs.get(key)
            if log is not None:
                return log
            counts = {d: 0 for d in self.live_dirs}
            for k, d in self._dir_of.items():
                counts[d] += 1
            d = min(self.live_dirs, key=lambda x: counts[x])  # Kafka: dir with fewest partitions
            log = PartitionLog.open(
                d / f"{topic}-{partition}", topic, partition, recovery_point=0, clean=True,
                segment_bytes=self.segment_bytes, flush_interval_messages=self.flush_interval_messages,
                on_event=self.on_event, epoch_checkpoint_sync_on_truncation=self.epoch_checkpoint_sync_on_truncation,
            )
            log.producer_state()  # empty: built at once, then kept up to date by every append
            self._register(key, d, log)
            return log

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        return dict(self._logs)

    # ------------------------------------------------------------------ checkpoints

    def _by_dir(self, values: dict[tuple[str, int], int], dirs: list[Path] | None = None) -> dict[Path, dict]:
        out: dict[Path, dict] = {d: {} for d in (dirs or self.live_dirs)}
        for key, v in values.items():
            d = self._dir_of.get(key)
            if d in out:
                out[d][key] = v
        return out

    def checkpoint_recovery_points(self, dirs: list[Path] | None = None) -> None:
        with self._checkpoint_lock:
            rps = {k: log.recovery_point for k, log in list(self._logs.items())}
            for d, vals in self._by_dir(rps, dirs).items():
                write_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT, vals)

    def checkpoint_log_start_offsets(self) -> None:
        with self._checkpoint_lock:
            starts = {k: log.log_start_offset for k, log in list(self._logs.items())}
            for d, vals in self._by_dir(starts).items():
                write_offset_checkpoint(d / LOG_START_CHECKPOINT, vals)

    def checkpoint_high_watermarks(self, hwms: dict[tuple[str, int], int]) -> None:
        """Write ``replication-offset-checkpoint`` (the HWM of each partition) in every log dir -
        once the logs loaded: before, ReplicaManager.checkpointHighWatermarks has no log to write."""
        if not self._loaded:
            return
        with self._checkpoint_lock:
            for d, vals in self._by_dir(hwms).items():
                write_offset_checkpoint(d / REPLICATION_CHECKPOINT, vals)

    def read_high_watermarks(self) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for d in self.log_dirs:
            try:
                out.update(read_offset_checkpoint(d / REPLICATION_CHECKPOINT))
            except CheckpointError as e:
                raise StorageConfigError(str(e)) from None
        return out

    # ------------------------------------------------------------------ shutdown

    def shutdown(self, broker_epoch: int = -1, hwms: dict[tuple[str, int], int] | None = None) -> None:
        """LogManager.shutdown: flush and close every loaded log, write the recovery-point and
        log-start checkpoints of every dir (empty for a dir whose logs never loaded, as Kafka's
        checkpointRecoveryOffsetsInDir does), then the clean-shutdown marker.

        Which dirs get the marker is the ``clean_shutdown_marker_needs_load`` gate: from 3.5.2
        only a dir that had the marker or whose logs all loaded (hadCleanShutdownFlags ||
        loadLogsCompletedFlags); 3.0.0-3.5.1 mark every dir, also when a start-up that failed
        before LogManager.startup shuts down - the next start then trusts a crashed log without
        recovery (core/src/main/scala/kafka/log/LogManager.scala shutdown, 3.5.1 vs 3.5.2,
        703e1d9faaf / c252e930fb7)."""
        with self._lock:
            for log in self._logs.values():
                log.on_flush = log.on_truncate = None
                log.close(clean=True)
            if self._markers_read:   # a dir whose identity was never checked is not written to
                self.checkpoint_recovery_points()
                self.checkpoint_log_start_offsets()
            if hwms is not None and self._loaded:
                self.checkpoint_high_watermarks(hwms)
            for d in self.live_dirs:   # LogManager.shutdown: liveLogDirs only
                if not self._markers_read:
                    continue
                if self.clean_shutdown_marker_needs_load and not (self._had_clean.get(d) or d in self._load_completed):
                    continue
                write_clean_shutdown(d, broker_epoch)

    def close_unclean(self) -> None:
        """Drop descriptors without flushing or marking (tests use it to model a crash)."""
        with self._lock:
            for log in self._logs.values():
                log.on_flush = log.on_truncate = None
                log.close(clean=False)
