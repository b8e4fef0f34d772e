"""Real Apache Kafka on an inventory's hosts: each node's server.properties, its storage format,
and the wait until every broker is registered.

Why here: `faultline docker up` brings up a real Kafka cluster in containers from nothing but an
inventory (and the SSH lab tests one on sshd hosts the same way), so what each node needs is what
the embedded target writes for its JVMs (targets/apache_kafka.py ``node_properties``), with the
ids, addresses and dirs the inventory gives instead of a plan: one owner for a KRaft node's
server.properties, wherever the node runs. Everything goes through the hosts' transports.

What the inventory gives per host: ``kafka_node_id``, ``kafka_listeners`` (a broker's
``PLAINTEXT://IP:9092``, a controller's ``CONTROLLER://IP:9093``), ``kafka_data_dirs`` (a
broker's ``log.dirs``), ``kafka_metadata_log_dir`` (a controller's), ``kafka_config`` (where
server.properties goes) and ``kafka_service.format`` (the node's ``kafka-storage format -t ID -c
FILE --ignore-formatted``, run once here and again by a disk wipe). The cluster's settings are
Kafka's keys, sorted by targets/kafka_settings.py; what belongs to ``kafka-storage format``
(metadata.version, features, the cluster id) is that command's, so it is refused here.
"""
from __future__ import annotations

import posixpath
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from groundwork.config import ConfigError
from groundwork.transport.base import Transport
from harness.inventory import HostSpec, Inventory
from targets.apache_kafka import BROKER_PORT, CONTROLLER_PORT, node_properties, wait_registered
from targets.kafka_settings import KafkaSettings, sort

#: settings that are ``kafka-storage format``'s options or the software itself, not server.properties
FORMAT_KEYS = {"metadata.version": "-r", "eligible.leader.replicas.version": "--feature", "cluster.id": "-t"}
SOFTWARE_KEYS = ("kafka.version", "controller.kafka.version")


class KafkaHostError(RuntimeError):
    """A host could not be prepared or did not come up (one line; exit 3)."""


def sort_settings(raw: dict[str, Any], where: str, file: Path | None = None) -> KafkaSettings:
    """The cluster's settings (Kafka's keys, at ``where`` in ``file``) for server.properties;
    ConfigError (one line) for a key that is the format command's or the software's."""
    for key in raw:
        if key in FORMAT_KEYS:
            raise ConfigError(file, f"{where}.{key}", f"a kafka-storage format option: give it in each host's "
                              f"kafka_service.format ({FORMAT_KEYS[key]}), which formats the node here and after a "
                              "disk wipe")
        if key in SOFTWARE_KEYS:
            raise ConfigError(file, f"{where}.{key}", "the release is the image's or the install's "
                              "(kafka_version on the hosts); remove it")
    return sort(raw, where)


def _listener(inv: Inventory, spec: HostSpec, name: str, port: int) -> str:
    """The host's address in its first listener, which must be Kafka's ``NAME://IP:PORT``."""
    first = (spec.listeners or "").split(",")[0]
    scheme, _, hostport = first.partition("://")
    host, _, p = hostport.rpartition(":")
    if scheme != name or p != str(port) or not host:
        raise ConfigError(inv.path, f"{spec.name}.kafka_listeners", f"{name}://ADDRESS:{port} is wanted for a "
                          f"{spec.role} (the server.properties written here listen there), got {spec.listeners!r}")
    return host


def voters(inv: Inventory) -> str:
    """``controller.quorum.voters``: every controller host as ``ID@ADDRESS:9093``."""
    if not inv.controllers:
        raise ConfigError(inv.path, "all.children.controllers", "a KRaft cluster needs at least one controller host")
    return ",".join(f"{c.node_id}@{_listener(inv, c, 'CONTROLLER', CONTROLLER_PORT)}:{CONTROLLER_PORT}"
                    for c in inv.controllers)


def properties(inv: Inventory, spec: HostSpec, settings: KafkaSettings) -> dict[str, str]:
    """server.properties of one host (targets/apache_kafka.py ``node_properties``)."""
    if spec.role == "broker":
        address = _listener(inv, spec, "PLAINTEXT", BROKER_PORT)
        if not spec.data_dirs:
            raise ConfigError(inv.path, f"{spec.name}.kafka_data_dirs", "a broker's log.dirs are wanted")
        log_dirs, meta = list(spec.data_dirs), None
    else:
        address = _listener(inv, spec, "CONTROLLER", CONTROLLER_PORT)
        meta = spec.metadata_log_dir or (spec.data_dirs[0] if spec.data_dirs else None)
        if meta is None:
            raise ConfigError(inv.path, f"{spec.name}.kafka_metadata_log_dir", "a controller's metadata.log.dir is wanted")
        log_dirs = [meta]
    assert spec.node_id is not None
    return node_properties(spec.role, spec.node_id, address, voters=voters(inv), log_dirs=log_dirs,
                           metadata_log_dir=meta, brokers=len(inv.brokers), settings=settings)


def format_argv(inv: Inventory, spec: HostSpec) -> list[str]:
    """The host's ``kafka_service.format``, checked: it names the cluster id the inventory does."""
    fmt = spec.service.format if spec.service else None
    if not fmt:
        raise ConfigError(inv.path, f"{spec.name}.kafka_service.format", "the node's `kafka-storage format -t ID -c "
                          "FILE --ignore-formatted` is wanted (it formats the node here and after a disk wipe)")
    argv = shlex.split(fmt)
    ids = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-t", "--cluster-id")]
    if not ids:
        raise ConfigError(inv.path, f"{spec.name}.kafka_service.format", "give the cluster id (-t ID)")
    if inv.cluster_id and ids[0] != inv.cluster_id:
        raise ConfigError(inv.path, f"{spec.name}.kafka_service.format", f"-t {ids[0]} differs from "
                          f"kafka_cluster_id {inv.cluster_id}; one cluster, one id")
    return argv


def write_configs(inv: Inventory, transports: dict[str, Transport], settings: KafkaSettings) -> None:
    """Write every host's server.properties to its ``kafka_config``."""
    for spec in inv.hosts.values():
        if not spec.config:
            raise ConfigError(inv.path, f"{spec.name}.kafka_config", "where the host's server.properties goes is wanted")
        props = properties(inv, spec, settings)
        t = transports[spec.name]
        t.run(["mkdir", "-p", posixpath.dirname(spec.config)], sudo=spec.sudo, check=True)
        t.write_text(spec.config, "# generated by faultline (harness/kafka_hosts.py)\n"
                     + "".join(f"{k}={v}\n" for k, v in props.items()), sudo=spec.sudo)


def format_storage(inv: Inventory, transports: dict[str, Transport]) -> dict[str, str]:
    """Run every host's ``kafka_service.format`` at once (a JVM start each); returns host -> what
    it said (``Formatting ... with metadata.version X``)."""
    argvs = {s.name: format_argv(inv, s) for s in inv.hosts.values()}

    def one(name: str) -> str:
        r = transports[name].run(argvs[name], sudo=inv.hosts[name].sudo, timeout=180)
        lines = [ln.strip() for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
        if not r.ok:
            why = next((ln for ln in lines if "Exception" in ln or "rror" in ln), lines[-1] if lines else f"exit {r.exit_code}")
            raise KafkaHostError(f"{name}: kafka-storage format failed: {why[:300]}")
        return "; ".join(ln for ln in lines if ln.startswith("Formatting")) or "already formatted"

    with ThreadPoolExecutor(max_workers=len(argvs) or 1) as pool:
        futures = {name: pool.submit(one, name) for name in argvs}
        return {name: f.result() for name, f in futures.items()}


def wait_ready(inv: Inventory, timeout: float, check: Callable[[], None] = lambda: None) -> None:
    """Until every broker host is registered and unfenced (KafkaHostError after ``timeout``)."""
    want = len(inv.brokers)
    seen = wait_registered(inv.bootstrap or "", want, timeout, check)
    if seen < want:
        raise KafkaHostError(f"{seen} of {want} brokers registered within {timeout:g}s (their server.log is in "
                             "kafka_log_dir on each host)")
