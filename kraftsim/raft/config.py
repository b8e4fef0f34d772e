"""Quorum configuration with Kafka's key names (QuorumConfig.java).

``controller.quorum.voters`` is ``id@host:port,...`` (QuorumConfig.parseVoterConnections);
``controller.quorum.bootstrap.servers`` is ``host:port,...`` and is what a node that is not a
static voter (a broker) uses to find the quorum. Defaults are Kafka's (election 1000 ms, fetch
2000 ms, election backoff max 1000 ms, request timeout 2000 ms, retry backoff 20 ms).
Errors are one line: ``kraftsim: FILE: key 'x': <what is wanted>``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kraftsim import features
from kraftsim.properties import ConfigError, parse_properties

_VOTER = re.compile(r"^(\d+)@([^:@\s]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$")
_HOSTPORT = re.compile(r"^([^:@\s]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$")


def parse_voters(value: str) -> dict[int, tuple[str, int]]:
    """``1@h1:9093,2@h2:9093`` -> {1: ("h1", 9093), ...} (QuorumConfig.parseVoterConnections)."""
    out: dict[int, tuple[str, int]] = {}
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        m = _VOTER.match(part)
        if not m or not 0 < int(m.group(3)) < 65536:
            raise ValueError(f"id@host:port[,id@host:port...] is wanted, got {part!r}")
        vid = int(m.group(1))
        if vid in out:
            raise ValueError(f"voter id {vid} is listed twice")
        out[vid] = (m.group(2).strip("[]"), int(m.group(3)))
    if not out:
        raise ValueError("at least one id@host:port is wanted")
    return out


def parse_bootstrap(value: str) -> list[tuple[str, int]]:
    """``h1:9093,h2:9093`` (QuorumConfig.parseBootstrapServers)."""
    out = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        m = _HOSTPORT.match(part)
        if not m or not 0 < int(m.group(2)) < 65536:
            raise ValueError(f"host:port[,host:port...] is wanted, got {part!r}")
        out.append((m.group(1).strip("[]"), int(m.group(2))))
    if not out:
        raise ValueError("at least one host:port is wanted")
    return out


@dataclass
class QuorumConfig:
    """The ``controller.quorum.*`` knobs (QuorumConfig.java names and defaults)."""

    voters: dict[int, tuple[str, int]] = field(default_factory=dict)
    bootstrap: list[tuple[str, int]] = field(default_factory=list)
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 500  # KafkaRaftClient's fetchMaxWaitMs
    #: software behaviour (kraftsim/features.py gate ``raft_fatal_fault``, Kafka 3.4.1+): an error
    #: in the raft IO thread halts the process; before, the thread died and the process lived on
    fatal_fault: bool = True
    #: gate ``pre_vote`` (KIP-996, Kafka 4.0+): Prospective before Candidate, Vote v2 PreVote
    pre_vote: bool = False
    #: gate ``check_quorum`` (KAFKA-15489, Kafka 3.7+): a leader without Fetch from a majority for
    #: 1.5 x fetch timeout resigns; before 3.7 it stays leader (LeaderState had no such timer)
    check_quorum: bool = True

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1


def _pos_int(v: str, lo: int = 0) -> int:
    try:
        n = int(v.strip())
    except ValueError:
        raise ValueError("an integer is wanted") from None
    if n < lo:
        raise ValueError(f"an integer >= {lo} is wanted")
    return n


QUORUM_KEYS = {
    "controller.quorum.election.timeout.ms": "election_timeout_ms",
    "controller.quorum.fetch.timeout.ms": "fetch_timeout_ms",
    "controller.quorum.election.backoff.max.ms": "election_backoff_max_ms",
    "controller.quorum.request.timeout.ms": "request_timeout_ms",
    "controller.quorum.retry.backoff.ms": "retry_backoff_ms",
}


def quorum_config(values: dict[str, str], where: str) -> QuorumConfig:
    """Build a QuorumConfig from raw property strings; ``where`` names the file in errors."""
    qc = QuorumConfig()
    for key, raw in values.items():
        try:
            if key == "controller.quorum.voters":
                qc.voters = parse_voters(raw)
            elif key == "controller.quorum.bootstrap.servers":
                qc.bootstrap = parse_bootstrap(raw)
            elif key in QUORUM_KEYS:
                setattr(qc, QUORUM_KEYS[key], _pos_int(raw, 1 if key != "controller.quorum.retry.backoff.ms" else 0))
        except ValueError as e:
            raise ConfigError(f"kraftsim: {where}: key '{key}': {e}") from None
    if not qc.bootstrap and qc.voters:
        qc.bootstrap = list(qc.voters.values())
    return qc


#: the standalone raft node's keys; ``raftnode.*`` are test-only (a built-in append workload).
NODE_KEYS = {
    "node.id", "process.roles", "listeners", "metadata.log.dir", "cluster.id", "event.log", "pid.file",
    "controller.quorum.voters", "controller.quorum.bootstrap.servers", "log.segment.bytes",
    *QUORUM_KEYS, "raftnode.append.interval.ms", "raftnode.applied.file", "raftnode.status.file",
    "kafka.version",
}

#: the standalone node's software version when none is given: the cluster's default
#: (kraftsim/config.py metadata.version 4.1 → its release)
DEFAULT_KAFKA_VERSION = "4.1.0"

_LISTENER = re.compile(r"^([A-Z_]+)://([^:/\s]*):(\d{1,5})$")


@dataclass
class NodeConfig:
    path: Path
    node_id: int
    host: str
    port: int
    metadata_dir: Path
    cluster_id: str
    quorum: QuorumConfig
    event_log: Path | None = None
    pid_file: Path | None = None
    segment_bytes: int = 64 * 1024 * 1024
    append_interval_ms: int = 0
    applied_file: Path | None = None
    status_file: Path | None = None


def load_node_config(path: Path) -> NodeConfig:
    """Read a raft node's properties; ConfigError carries the one line to print."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"kraftsim: {path}: cannot read config file ({e.strerror})") from None
    try:
        entries = parse_properties(text)
    except ConfigError as e:
        raise ConfigError(f"kraftsim: {path}: {e}") from None
    raw: dict[str, str] = {}
    for _, key, value in entries:
        if key not in NODE_KEYS:
            raise ConfigError(f"kraftsim: {path}: key '{key}': unknown key for a raft node")
        raw[key] = value.strip()

    def need(key: str) -> str:
        if not raw.get(key):
            raise ConfigError(f"kraftsim: {path}: key '{key}': required for a raft node")
        return raw[key]

    def num(key: str, default: int, lo: int = 0) -> int:
        if key not in raw:
            return default
        try:
            return _pos_int(raw[key], lo)
        except ValueError as e:
            raise ConfigError(f"kraftsim: {path}: key '{key}': {e}") from None

    node_id = num("node.id", -1)
    if node_id < 0:
        need("node.id")
    m = _LISTENER.match(need("listeners"))
    if not m or not 0 < int(m.group(3)) < 65536:
        raise ConfigError(f"kraftsim: {path}: key 'listeners': NAME://HOST:PORT is wanted, e.g. CONTROLLER://127.0.0.1:9093")
    need("controller.quorum.voters")
    qc = quorum_config({k: v for k, v in raw.items() if k.startswith("controller.quorum.")}, str(path))
    try:  # the software gates the raft layer reads (kraftsim/features.py)
        kv = features.parse_kafka_version(raw.get("kafka.version") or DEFAULT_KAFKA_VERSION)
    except ValueError as e:
        raise ConfigError(f"kraftsim: {path}: key 'kafka.version': {e}") from None
    qc.fatal_fault = features.software_gate("raft_fatal_fault", kv)
    qc.pre_vote = features.software_gate("pre_vote", kv)
    qc.check_quorum = features.software_gate("check_quorum", kv)
    if node_id not in qc.voters:
        raise ConfigError(f"kraftsim: {path}: key 'controller.quorum.voters': node.id {node_id} is not among the voters")
    opt = lambda k: Path(raw[k]) if raw.get(k) else None  # noqa: E731
    return NodeConfig(
        path=Path(path), node_id=node_id, host=m.group(2) or "0.0.0.0", port=int(m.group(3)),
        metadata_dir=Path(need("metadata.log.dir")), cluster_id=raw.get("cluster.id") or "kraftsim-cluster-0000000",
        quorum=qc, event_log=opt("event.log"), pid_file=opt("pid.file"),
        segment_bytes=num("log.segment.bytes", 64 * 1024 * 1024, 1024),
        append_interval_ms=num("raftnode.append.interval.ms", 0), applied_file=opt("raftnode.applied.file"),
        status_file=opt("raftnode.status.file"),
    )
