"""A campaign's target settings as a real Kafka cluster takes them.

Why one module: a campaign must mean the same on kraftsim and on Apache Kafka. Its settings are
Kafka's names (``metadata.version``, ``unclean.leader.election.enable``, ``min.insync.replicas``,
``replica.lag.time.max.ms``, ...), and here each one is sorted into where real Kafka takes it:

- the **software**: ``kafka.version`` (the release the brokers run), ``controller.kafka.version``
  (the controllers', a rolling upgrade in progress);
- the **format**: ``metadata.version`` is the release version ``kafka-storage format -r`` records
  in the bootstrap metadata, ``eligible.leader.replicas.version`` a ``--feature`` (4.0+), and
  ``cluster.id`` the ``-t`` (a Kafka Uuid); ``kraft.version`` the quorum's kind: 0 a static quorum
  (``controller.quorum.voters``), 1 KIP-853's dynamic quorum (3.9+: ``controller.quorum.bootstrap.
  servers``, the controllers formatted with ``--initial-controllers`` naming each voter's directory
  id, a replaced disk re-formatted with ``--no-initial-controllers``);
- the **timing profile** (``timing``): ``fast`` is kraftsim's short timeouts (kraftsim/config.py
  KEYS) under Kafka's own keys, ``kafka-defaults`` leaves Kafka's defaults;
- **server.properties**: every other key, given to every node (KafkaConfig is one class for both
  roles; the controllers decide unclean elections and the effective min ISR from these too).

What is kraftsim's alone is refused in one line, naming why: its gate overrides (Kafka decides a
gate by its versions), its own cadences and files, the drafts (docs/seeds.md seed 002 and seed 004
were never Kafka; a draft switch left off is accepted) and the checker controls.
"""
from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field
from typing import Any

from groundwork.config import ConfigError

#: kraftsim's ``fast`` timing profile (kraftsim/config.py KEYS: its defaults) under Kafka's keys;
#: tests/targets compare the two, so they cannot drift apart
FAST: dict[str, str] = {
    "replica.lag.time.max.ms": "3000",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "1000",
    "controller.quorum.request.timeout.ms": "2000",
    "controller.quorum.retry.backoff.ms": "20",
    "replica.high.watermark.checkpoint.interval.ms": "1000",
    "replica.fetch.backoff.ms": "100",
    "metadata.max.idle.interval.ms": "500",
}
TIMING = {"fast": FAST, "kafka-defaults": {}}

#: key -> why real Kafka cannot take it (exact names; a draft switch at its off value passes)
KRAFTSIM_ONLY: dict[str, str] = {
    "kip903.enabled": "a kraftsim gate override: Kafka decides KIP-903 by kafka.version and metadata.version",
    "isr.shrink.leader.epoch.bump": "a kraftsim gate override: Kafka decides it by kafka.version and metadata.version",
    "hwm.min.isr.enabled": "a kraftsim gate override: Kafka decides it by kafka.version",
    "isr.expiration.interval.ms": "kraftsim's cadence of the isr-expiration task (Kafka's is replica.lag.time.max.ms / 2)",
    "remote.log.storage.dir": "kraftsim's stand-in for object storage",
    "event.log": "kraftsim's event log", "pid.file": "kraftsim's pid file",
}
#: draft or control switches: allowed only at the value that means "Kafka's behaviour"
OFF_ONLY: dict[str, tuple[str, str]] = {
    "seed002.self.fence.enable": ("false", "docs/seeds.md seed 002 is a draft Kafka never adopted (brokers do not self-fence)"),
    "leader.election.eligible.local.log.ms": ("-1", "docs/seeds.md seed 004 is a KIP under discussion, not Kafka"),
    "leader.election.eligible.local.log.bytes": ("-1", "docs/seeds.md seed 004 is a KIP under discussion, not Kafka"),
    "faultline.control.ack_without_replication": ("false", "a checker control that breaks kraftsim on purpose"),
    "remote.log.storage.system.enable": ("false", "tiered storage needs a RemoteStorageManager plugin, which the "
                                                  "embedded Apache Kafka target does not install"),
    "follower.fetch.last.tiered.offset.enable": ("false", "it reads the remote tier, which the embedded Apache Kafka "
                                                          "target does not install"),
}
#: keys that are not server.properties on real Kafka (taken above, or by the launcher)
NOT_PROPERTIES = {"kafka.version", "controller.kafka.version", "metadata.version", "eligible.leader.replicas.version",
                  "timing", "cluster.id", "kraft.version"}
#: what the launcher writes itself; a campaign setting them would break the cluster's layout
LAUNCHER_KEYS = {"node.id", "process.roles", "listeners", "advertised.listeners", "controller.quorum.voters",
                 "controller.quorum.bootstrap.servers", "controller.listener.names", "log.dirs", "log.dir",
                 "metadata.log.dir", "listener.security.protocol.map", "inter.broker.listener.name"}

_MV = re.compile(r"^\d+\.\d+(-IV\d+)?$")


@dataclass
class KafkaSettings:
    """The sorted settings; ``properties`` go into every node's server.properties."""
    release: str | None = None              # kafka.version (None: the caller picks one)
    controller_release: str | None = None   # controller.kafka.version
    metadata_version: str | None = None     # format -r
    features: dict[str, str] = field(default_factory=dict)  # format --feature k=v
    cluster_id: str | None = None
    kraft_version: str = "0"                # 0: static quorum; 1: KIP-853 dynamic quorum
    timing: str = "fast"
    properties: dict[str, str] = field(default_factory=dict)
    #: the keys the campaign gave, so a key Kafka says it does not know can be named (exit 2)
    given: set[str] = field(default_factory=set)


def _text(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def sort(settings: dict[str, Any], where: str = "target.settings") -> KafkaSettings:
    """Sort a campaign's settings; ConfigError (one line) for what real Kafka cannot take."""
    out = KafkaSettings()
    for key, raw in settings.items():
        v = _text(raw).strip()
        path = f"{where}.{key}"
        if key in KRAFTSIM_ONLY:
            raise ConfigError(None, path, f"kraftsim only ({KRAFTSIM_ONLY[key]}); remove it to run on Apache Kafka")
        if key in OFF_ONLY:
            off, why = OFF_ONLY[key]
            if v != off:
                raise ConfigError(None, path, f"{why}: only {off} runs on Apache Kafka")
            continue
        if key in LAUNCHER_KEYS:
            raise ConfigError(None, path, "set by the embedded Apache Kafka target for each node; remove it")
        out.given.add(key)
        if key == "kafka.version":
            out.release = v
        elif key == "controller.kafka.version":
            out.controller_release = v
        elif key == "metadata.version":
            if not _MV.match(v):
                raise ConfigError(None, path, f"a Kafka metadata version like 3.4 or 3.9-IV0 is wanted, got {v!r}")
            out.metadata_version = v
        elif key == "eligible.leader.replicas.version":
            if v not in ("0", "1"):
                raise ConfigError(None, path, f"0 or 1 is wanted, got {v!r}")
            out.features["eligible.leader.replicas.version"] = v
        elif key == "kraft.version":
            if v not in ("0", "1"):
                raise ConfigError(None, path, f"0 (a static quorum) or 1 (KIP-853's dynamic quorum, 3.9+) is wanted, got {v!r}")
            out.kraft_version = v
        elif key == "timing":
            if v not in TIMING:
                raise ConfigError(None, path, f"one of {', '.join(TIMING)} is wanted, got {v!r}")
            out.timing = v
        elif key == "cluster.id":
            if not is_kafka_uuid(v):
                raise ConfigError(None, path, "a Kafka cluster id (a base64 Uuid of 22 characters, as "
                                  f"`kafka-storage random-uuid` prints) is wanted, got {v!r}")
            out.cluster_id = v
        else:
            out.properties[key] = v
    return out


def server_properties(s: KafkaSettings) -> dict[str, str]:
    """The properties every node gets from the campaign: the timing profile, then the keys given."""
    return {**TIMING[s.timing], **s.properties}


def random_uuid() -> str:
    """A Kafka ``Uuid`` as base64url without padding (Uuid.randomUuid: never one that starts
    with '-', which a command line would take for an option, nor the reserved all-zero ones)."""
    while True:
        raw = os.urandom(16)
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not text.startswith("-") and raw[:15] != bytes(15):
            return text


def is_kafka_uuid(text: str) -> bool:
    if not re.fullmatch(r"[A-Za-z0-9_-]{22}", text):
        return False
    try:
        return len(base64.urlsafe_b64decode(text + "==")) == 16
    except ValueError:
        return False
