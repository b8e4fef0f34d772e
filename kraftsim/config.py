"""kraftsim configuration: Java-properties files with Kafka's own key names.

Why a strict parser: a campaign that sets ``min.insync.replica`` (typo) against real Kafka
would silently run with the default and the run's conclusion would be wrong. kraftsim
refuses unknown keys and bad values with one line naming the file and the key, and exits 2
(the contract other faultline parts rely on).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable

from kraftsim import features
from kraftsim.properties import ConfigError, parse_properties
from kraftsim.raft.config import parse_voters


def _int(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    def parse(v: str) -> int:
        try:
            n = int(v.strip())
        except ValueError:
            raise ValueError("an integer is wanted") from None
        if lo is not None and n < lo:
            raise ValueError(f"an integer >= {lo} is wanted")
        if hi is not None and n > hi:
            raise ValueError(f"an integer <= {hi} is wanted")
        return n
    return parse


def _bool(v: str) -> bool:
    s = v.strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise ValueError("true or false is wanted")


def _roles(v: str) -> str:
    s = v.strip()
    if s not in ("broker", "controller"):
        raise ValueError("broker or controller is wanted (combined mode is not supported)")
    return s


_LISTENER = re.compile(r"^([A-Z_]+)://([^:/\s]*):(\d{1,5})$")


def _listener(v: str) -> tuple[str, str, int]:
    m = _LISTENER.match(v.strip())
    if not m or not (0 < int(m.group(3)) < 65536):
        raise ValueError("NAME://HOST:PORT is wanted, e.g. PLAINTEXT://127.0.0.2:9092")
    return m.group(1), m.group(2) or "0.0.0.0", int(m.group(3))


def _hostports(v: str) -> list[tuple[str, int]]:
    """``controller.quorum.bootstrap.servers``: a comma-separated HOST:PORT list (KIP-853,
    QuorumConfig.parseBootstrapServers); every entry is an address a broker may try."""
    out: list[tuple[str, int]] = []
    for item in v.split(","):
        item = item.strip()
        if not item:
            continue
        if "@" in item:  # controller.quorum.voters style id@host:port
            item = item.split("@", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not (0 < int(port) < 65536):
            raise ValueError(f"HOST:PORT[,HOST:PORT...] is wanted, e.g. 127.0.0.1:9093; got {item!r}")
        out.append((host, int(port)))
    if not out:
        raise ValueError("HOST:PORT[,HOST:PORT...] is wanted, e.g. 127.0.0.1:9093")
    return out


def _voters(v: str) -> dict[int, tuple[str, int]]:
    return parse_voters(v)  # QuorumConfig.parseVoterConnections


def _dirs(v: str) -> list[Path]:
    parts = [p.strip() for p in v.split(",") if p.strip()]
    if not parts:
        raise ValueError("one or more directory paths are wanted")
    return [Path(p) for p in parts]


def _path(v: str) -> Path:
    if not v.strip():
        raise ValueError("a path is wanted")
    return Path(v.strip())


def _metadata_version(v: str) -> tuple[int, int, int]:
    return features.parse_metadata_version(v)


def _kafka_version(v: str) -> tuple[int, int, int]:
    return features.parse_kafka_version(v)


def _timing(v: str) -> str:
    s = v.strip()
    if s not in TIMING_PROFILES:
        raise ValueError(f"one of {', '.join(TIMING_PROFILES)} is wanted")
    return s


def _static_quorum(v: str) -> int:
    """kraft.version: kraftsim's quorum is static (controller.quorum.voters, kraft.version 0)."""
    if v.strip() == "0":
        return 0
    if v.strip() == "1":
        raise ValueError("0 is wanted: kraftsim models the static quorum only; KIP-853's dynamic quorum "
                         "(kraft.version 1, voters named by directory id) runs on --target apache-kafka")
    raise ValueError("0 (a static quorum) is wanted")


def _nonempty(v: str) -> str:
    if not v.strip():
        raise ValueError("a non-empty string is wanted")
    return v.strip()


#: Timing profiles, the one place they are declared: named sets of timeouts (``timing=NAME``; a
#: campaign selects one with ``--set target.timing=kafka-defaults``). ``fast`` is kraftsim's default:
#: a cluster that notices a dead broker in seconds, 3-10x sooner than Kafka's production values,
#: so a campaign runs in a minute. ``kafka-defaults`` is Kafka's own defaults (KafkaConfig
#: ``Defaults`` up to 3.7; ReplicationConfigs, KRaftConfigs and QuorumConfig from 3.8; the same from
#: 3.4 to 3.9), so a verdict can be shown not to depend on the short ones. A profile only sets
#: defaults: a key given explicitly beside it wins. Values are parsed like the keys themselves.
TIMING_PROFILES: dict[str, dict[str, str]] = {
    "fast": {},  # the defaults in KEYS below
    "kafka-defaults": {
        "replica.lag.time.max.ms": "30000",                   # ReplicationConfigs REPLICA_LAG_TIME_MAX_MS_DEFAULT
        "isr.expiration.interval.ms": "-1",                   # ReplicaManager: isr-expiration every lag / 2
        "broker.session.timeout.ms": "9000",                  # KRaftConfigs BROKER_SESSION_TIMEOUT_MS_DEFAULT
        "broker.heartbeat.interval.ms": "2000",               # KRaftConfigs BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT
        "controller.quorum.election.timeout.ms": "1000",      # QuorumConfig DEFAULT_QUORUM_ELECTION_TIMEOUT_MS
        "controller.quorum.fetch.timeout.ms": "2000",         # QuorumConfig DEFAULT_QUORUM_FETCH_TIMEOUT_MS
        "replica.high.watermark.checkpoint.interval.ms": "5000",  # ReplicationConfigs
        "replica.fetch.backoff.ms": "1000",                   # ReplicationConfigs REPLICA_FETCH_BACKOFF_MS_DEFAULT
    },
}

#: key -> (parser, default). Timeout defaults are the ``fast`` timing profile (above).
KEYS: dict[str, tuple[Callable[[str], object], object]] = {
    "node.id": (_int(0), None),
    "process.roles": (_roles, None),
    "listeners": (_listener, None),
    "advertised.listeners": (_listener, None),
    "controller.quorum.bootstrap.servers": (_hostports, None),
    "controller.quorum.voters": (_voters, None),
    # QuorumConfig (Kafka's names; kraftsim/raft/): election and fetch timeouts are half of
    # Kafka's 1000/2000 ms, short like the session timeout below; the fetch timeout must stay
    # above the raft Fetch long-poll (500 ms, KafkaRaftClient's MAX_FETCH_WAIT_MS)
    "controller.quorum.election.timeout.ms": (_int(1), 500),
    "controller.quorum.fetch.timeout.ms": (_int(600), 1000),
    "controller.quorum.election.backoff.max.ms": (_int(1), 1000),
    "controller.quorum.request.timeout.ms": (_int(1), 2000),
    "controller.quorum.retry.backoff.ms": (_int(0), 20),
    "controller.listener.names": (_nonempty, "CONTROLLER"),
    "log.dirs": (_dirs, None),
    "metadata.log.dir": (_path, None),
    "min.insync.replicas": (_int(1), 1),
    "default.replication.factor": (_int(1), 1),
    "num.partitions": (_int(1), 1),
    "unclean.leader.election.enable": (_bool, False),
    # feature gates: None = derived from metadata.version (kraftsim/features.py)
    "eligible.leader.replicas.version": (_int(0, 1), None),
    "kip903.enabled": (_bool, None),
    "isr.shrink.leader.epoch.bump": (_bool, None),
    "hwm.min.isr.enabled": (_bool, None),
    "metadata.version": (_metadata_version, features.parse_metadata_version("4.1")),
    # the software version (kraftsim/features.py): None = the release that introduced metadata.version
    "kafka.version": (_kafka_version, None),
    # the controllers' own software version during a rolling upgrade (None: kafka.version)
    "controller.kafka.version": (_kafka_version, None),
    "timing": (_timing, "fast"),
    "log.flush.interval.messages": (_int(1), None),
    "log.segment.bytes": (_int(1024), 64 * 1024 * 1024),
    "replica.lag.time.max.ms": (_int(100), 3000),
    # kraftsim's: the isr-expiration task runs every min(replica.lag.time.max.ms / 2, this);
    # -1 = exactly replica.lag.time.max.ms / 2, Kafka's (ReplicaManager.startup, not configurable)
    "isr.expiration.interval.ms": (_int(-1), 500),
    "replica.high.watermark.checkpoint.interval.ms": (_int(10), 1000),
    # the pause after a partition error; after a lost connection at least 200 ms (kraftsim's floor)
    "replica.fetch.backoff.ms": (_int(0), 100),
    # a follower's Fetch MaxWaitMs: how long the leader may park it with nothing new (Kafka's
    # default, both profiles); at most replica.lag.time.max.ms, as KafkaConfig requires
    "replica.fetch.wait.max.ms": (_int(0), 500),
    "broker.session.timeout.ms": (_int(100), 3000),
    # KRaftConfigs METADATA_MAX_IDLE_INTERVAL_MS (3.4 KafkaConfig MetadataMaxIdleIntervalMs): the
    # active controller appends a NoOpRecord this often (gate noop_records); 0 = never. Kafka's
    # default in both timing profiles
    "metadata.max.idle.interval.ms": (_int(0), 500),
    "broker.heartbeat.interval.ms": (_int(10), 500),
    # KRaftConfigs INITIAL_BROKER_REGISTRATION_TIMEOUT_MS (3.4 KafkaConfig
    # InitialBrokerRegistrationTimeoutMs), Kafka's 60000 in both timing profiles: a broker whose
    # first registration is not accepted in time fails its start-up (server.py startup_failed)
    "initial.broker.registration.timeout.ms": (_int(1), 60000),
    "broker.self.fence.timeout.ms": (_int(100), None),
    # docs/seeds.md#seed-002 (an unadopted draft): brokers fence themselves without controller contact. Kafka's
    # BrokerLifecycleManager never does, so this is off unless a campaign explores the draft.
    "seed002.self.fence.enable": (_bool, False),
    # KIP-405 tiered storage, the slice docs/seeds.md#seed-004 needs (kraftsim/storage/remote.py). The remote
    # tier is a directory standing in for object storage (Kafka's test LocalTieredStorage); the
    # embedded cluster defaults it to DIR/remote-storage, shared by every broker. Topic configs:
    # remote.storage.enable, local.retention.ms, local.retention.bytes (-2 = retention.ms/bytes,
    # which kraftsim does not model: nothing is deleted).
    "remote.log.storage.system.enable": (_bool, False),
    "remote.log.storage.dir": (_path, None),
    "remote.log.manager.task.interval.ms": (_int(50), 1000),  # Kafka 30000: copy cadence
    "log.retention.check.interval.ms": (_int(50), 1000),      # Kafka 300000: retention cadence
    "log.local.retention.ms": (_int(-2), -2),
    "log.local.retention.bytes": (_int(-2), -2),
    # KIP-1023: an empty follower of a tiered topic starts at the last tiered offset + 1
    "follower.fetch.last.tiered.offset.enable": (_bool, False),
    # docs/seeds.md#seed-004 (a KIP under discussion, NOT Kafka): prefer replicas whose local log covers this
    # long / this many bytes in leader elections; -1 = off. Topic-level overrides, same names.
    "leader.election.eligible.local.log.ms": (_int(-1), -1),
    "leader.election.eligible.local.log.bytes": (_int(-1), -1),
    # A deliberately broken mode for checker controls, NOT a Kafka behaviour (docs/kraftsim.md
    # "Checker controls"): the leader acknowledges acks=all writes once appended locally.
    "faultline.control.ack_without_replication": (_bool, False),
    "event.log": (_path, None),
    "pid.file": (_path, None),
    "cluster.id": (_nonempty, "kraftsim-cluster-0000000"),
    # the quorum's kind (Kafka's feature kraft.version, chosen at format): kraftsim's is 0, static
    "kraft.version": (_static_quorum, 0),
}

REQUIRED = {
    "broker": ("node.id", "listeners", "controller.quorum.bootstrap.servers", "log.dirs"),
    "controller": ("node.id", "listeners", "metadata.log.dir"),
}


@dataclass
class Config:
    path: Path
    values: dict[str, object] = field(default_factory=dict)

    def __getitem__(self, key: str):  # noqa: ANN204 - value types differ per key
        return self.values[key]

    @cached_property
    def features(self) -> features.Features:
        """The Kafka behaviours in force, from kafka.version, metadata.version and any explicit
        override (derived once: a config does not change while a process runs)."""
        return features.derive(self.values, role=str(self.values.get("process.roles") or "broker"))

    @property
    def isr_expiration_s(self) -> float:
        """How often the leader looks for replicas to shrink out of the ISR (ReplicaManager's
        ``isr-expiration`` task: every replica.lag.time.max.ms / 2 in Kafka)."""
        half = int(self.values["replica.lag.time.max.ms"]) / 2000
        cap = int(self.values["isr.expiration.interval.ms"])
        return half if cap < 0 else min(half, cap / 1000)

    @property
    def self_fence_ms(self) -> int:
        """docs/seeds.md#seed-002: the broker-side timeout must be longer than the controller's; 2x by default."""
        v = self.values.get("broker.self.fence.timeout.ms")
        return int(v) if v else 2 * int(self.values["broker.session.timeout.ms"])


def defaults() -> dict[str, object]:
    return {k: d for k, (_, d) in KEYS.items()}


def apply_settings(values: dict[str, object], raw: dict[str, str]) -> None:
    """Parse ``raw`` (key -> text) into ``values``: the timing profile's keys first, then the
    explicit ones, then the versions against each other. ValueError(message, key) names the key
    at fault."""
    timing = raw.get("timing")
    if timing is not None:
        try:
            values["timing"] = _timing(timing)
        except ValueError as e:
            raise ValueError(str(e), "timing") from None
    for key, text in TIMING_PROFILES[str(values["timing"])].items():
        values[key] = KEYS[key][0](text)
    for key, text in raw.items():
        try:
            values[key] = KEYS[key][0](text)
        except ValueError as e:
            raise ValueError(str(e), key) from None
    try:
        features.derive(values)
    except ValueError as e:
        raise ValueError(str(e), "kafka.version") from None
    try:
        features.derive(values, role="controller")
    except ValueError as e:
        raise ValueError(str(e), features.CONTROLLER_KAFKA_VERSION) from None


def load(path: Path, role: str) -> Config:
    """Read and validate ``path`` for ``role``; raises ConfigError with the one line to print."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"kraftsim: {path}: cannot read config file ({e.strerror})") from None
    try:
        entries = parse_properties(text)
    except ConfigError as e:
        raise ConfigError(f"kraftsim: {path}: {e}") from None
    values = defaults()
    for _, key, raw in entries:
        if key not in KEYS:
            raise ConfigError(f"kraftsim: {path}: key '{key}': unknown key (known: see docs/kraftsim.md)")
    try:
        apply_settings(values, {key: raw for _, key, raw in entries})
    except ValueError as e:
        key = e.args[1] if len(e.args) > 1 else "kafka.version"
        raise ConfigError(f"kraftsim: {path}: key '{key}': {e.args[0]}") from None
    if values["process.roles"] is None:
        values["process.roles"] = role
    if values["process.roles"] != role:
        raise ConfigError(f"kraftsim: {path}: key 'process.roles': {role} is wanted for 'kraftsim {role}'")
    if role == "broker" and values["controller.quorum.bootstrap.servers"] is None:
        voters = values["controller.quorum.voters"]
        values["controller.quorum.bootstrap.servers"] = list(voters.values()) if voters else None
    for key in REQUIRED[role]:
        if values.get(key) is None:
            raise ConfigError(f"kraftsim: {path}: key '{key}': required for a {role}")
    if int(values["replica.fetch.wait.max.ms"]) > int(values["replica.lag.time.max.ms"]):
        # KafkaConfig.validateValues: "replica.fetch.wait.max.ms should always be less than or equal
        # to replica.lag.time.max.ms to prevent frequent changes in ISR"
        raise ConfigError(f"kraftsim: {path}: key 'replica.fetch.wait.max.ms': at most replica.lag.time.max.ms "
                          f"({values['replica.lag.time.max.ms']}) is wanted, got {values['replica.fetch.wait.max.ms']}")
    return Config(Path(path), values)
