"""What a nemesis needs to know about a Kafka host beyond the Node protocol: its log dirs, its
metadata log dir, who wrote its logs, and the flush settings of its broker.

Why: the page-cache-loss cut and the disk wipe act on ``log.dirs`` (brokers) and on
``metadata.log.dir`` (controllers: the KRaft metadata log ``__cluster_metadata-0``). A node may
carry them (``node.log_dirs``, ``node.metadata_log_dir``, or the inventory's
``kafka_data_dirs`` / ``kafka_metadata_log_dir`` on ``node.spec``), or point at its
server.properties (``node.config_path`` / the inventory's ``kafka_config``), read through the
transport exactly as on a lab host; a campaign may also give them directly.

Who wrote the logs decides how much a power loss cuts (nemeses/scripts/truncate_unflushed.py):
kraftsim rewrites ``recovery-point-offset-checkpoint`` after every flush, Apache Kafka every
``log.flush.offset.checkpoint.interval.ms`` while fsyncing more often. The inventory says which
(``kafka_implementation``; the embedded cluster's generated inventory says ``kraftsim``); a
host that does not say is taken for Apache Kafka, whose cut is never larger than its fsyncs.
"""
from __future__ import annotations

import posixpath
from typing import Any

from nemeses.base import Node

KRAFTSIM = "kraftsim"
APACHE_KAFKA = "apache-kafka"
IMPLEMENTATIONS = (APACHE_KAFKA, KRAFTSIM)
#: the broker settings that decide what Kafka fsyncs (UnifiedLog.append, LogManager.flushDirtyLogs)
FLUSH_KEYS = ("log.flush.interval.messages", "log.flush.interval.ms", "log.flush.scheduler.interval.ms")
#: the topic-level names of the same settings (TopicConfig; ServerTopicConfigSynonyms maps them)
TOPIC_FLUSH_KEYS = {"flush.messages": "log.flush.interval.messages", "flush.ms": "log.flush.interval.ms"}


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties, the subset Kafka configs use (``key=value``, ``#`` comments)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                k, v = line.split(sep, 1)
                out[k.strip()] = v.strip()
                break
    return out


def _spec(node: Node, attr: str) -> Any:
    return getattr(getattr(node, "spec", None), attr, None)


def config_path(node: Node) -> str | None:
    """server.properties on the host: ``node.config_path`` or the inventory's ``kafka_config``."""
    return getattr(node, "config_path", None) or _spec(node, "config")


def node_config(node: Node) -> tuple[dict[str, str], list[str]]:
    """(the node's Kafka config, where it was read): the inventory's ``kafka_config`` file, else
    the running process's own server.properties and its ``--override`` arguments (running_config);
    ({}, []) when there is neither. An inventory file that cannot be read is an error."""
    path, overrides = config_path(node), {}
    named = path is not None
    if not named:
        path, overrides = running_config(node)
    props: dict[str, str] = {}
    sources: list[str] = []
    if path:
        text = node.transport.read_text(path)
        if text is None and named:
            raise ValueError(f"{node.name}: cannot read the node's config {path} (kafka_config)")
        if text is not None:
            props = parse_properties(text)
            sources.append(path)
    if overrides:
        props.update(overrides)
        sources.append("--override")
    return props, sources


def log_dirs(node: Node, params: dict[str, Any] | None = None) -> list[str]:
    """``log.dirs``: params, the node, the inventory's ``kafka_data_dirs``, else the config."""
    params = params or {}
    dirs = params.get("log_dirs") or getattr(node, "log_dirs", None) or _spec(node, "data_dirs")
    if dirs:
        return [dirs] if isinstance(dirs, str) else list(dirs)
    props, sources = node_config(node)
    if sources:
        val = props.get("log.dirs") or props.get("log.dir")
        if val:
            return [d.strip() for d in val.split(",") if d.strip()]
        raise ValueError(f"{node.name}: {' + '.join(sources)} has no log.dirs (or log.dir)")
    raise ValueError(f"{node.name}: no log dirs known: set kafka_data_dirs or kafka_config in the inventory, "
                     "or give params.log_dirs")


def metadata_log_dir(node: Node, params: dict[str, Any] | None = None) -> str | None:
    """``metadata.log.dir``, where the KRaft metadata log lives; None when nothing names it."""
    params = params or {}
    d = params.get("metadata_log_dir") or getattr(node, "metadata_log_dir", None) or _spec(node, "metadata_log_dir")
    if d:
        return str(d)
    return node_config(node)[0].get("metadata.log.dir") or None


def fault_dirs(node: Node, params: dict[str, Any] | None = None) -> list[str]:
    """The directories a power loss hits on this host.

    A controller's data is its metadata log (``metadata.log.dir``; Kafka defaults it to the
    first ``log.dirs`` entry, KafkaConfig.metadataLogDir, so a controller's ``log.dirs`` hold it
    too). A broker's are its ``log.dirs`` plus ``metadata.log.dir`` when that is elsewhere."""
    md = metadata_log_dir(node, params)
    if node.role == "controller":
        if md:
            return [md]
        try:
            return log_dirs(node, params)
        except ValueError:
            raise ValueError(f"{node.name}: no metadata log dir known: set kafka_metadata_log_dir (or "
                             "kafka_data_dirs) for the controller in the inventory, or params.metadata_log_dir") from None
    dirs = log_dirs(node, params)
    if md and posixpath.normpath(md) not in {posixpath.normpath(d) for d in dirs}:
        dirs.append(md)
    return dirs


def wipe_dirs(node: Node, params: dict[str, Any] | None = None) -> list[str]:
    """The directories a disk replacement empties: a broker's ``log.dirs``, a controller's
    metadata log dir (its only disk faultline knows)."""
    return fault_dirs(node, params) if node.role == "controller" else log_dirs(node, params)


def implementation(node: Node) -> str:
    """Who wrote this host's logs: ``kraftsim`` when the node or its inventory says so, else
    ``apache-kafka`` (never a guess from the files: a wrong guess would make the cut larger
    than Kafka's fsyncs)."""
    v = getattr(node, "implementation", None) or _spec(node, "implementation")
    return str(v) if v in IMPLEMENTATIONS else APACHE_KAFKA


def running_config(node: Node) -> tuple[str | None, dict[str, str]]:
    """(server.properties path, ``--override`` settings) of the running Kafka process, from its
    command line: ``kafka.Kafka <server.properties> [--override k=v ...]`` (kafka-server-start.sh;
    Kafka.getPropsFromArgs). Read it before the process is killed."""
    for pid in node.service_pids():
        text = node.transport.read_text(f"/proc/{pid}/cmdline")
        args = (text or "").split("\0")
        if "kafka.Kafka" not in args:
            continue
        rest = args[args.index("kafka.Kafka") + 1:]
        if not rest or not rest[0]:
            return None, {}
        path, overrides = rest[0], {}
        for i, a in enumerate(rest[1:]):
            if a == "--override" and i + 2 < len(rest):
                k, sep, v = rest[i + 2].partition("=")
                if sep:
                    overrides[k.strip()] = v.strip()
        if not path.startswith("/"):
            cwd = node.transport.run(["readlink", f"/proc/{pid}/cwd"])
            if cwd.ok and cwd.stdout.strip():
                path = posixpath.join(cwd.stdout.strip(), path)
        return path, overrides
    return None, {}


def flush_config(node: Node, params: dict[str, Any] | None = None) -> tuple[dict[str, str], str | None]:
    """(the broker's flush settings, where they were read) — source None when nothing could be
    read, which the cut then reports as uncertain. Sources, later ones winning: the config file
    (inventory ``kafka_config``, else the running process's own), its ``--override`` arguments,
    then ``params.kafka_config`` (a mapping of Kafka keys, broker or topic names: per-topic
    ``flush.messages`` / ``flush.ms`` and dynamic broker configs live in the metadata, not on
    the host)."""
    params = params or {}
    props, sources = node_config(node)
    extra = params.get("kafka_config")
    if isinstance(extra, dict) and extra:
        props = {**props, **{TOPIC_FLUSH_KEYS.get(str(k), str(k)): str(v) for k, v in extra.items()}}
        sources.append("params.kafka_config")
    return {k: props[k] for k in FLUSH_KEYS if k in props}, (" + ".join(sources) or None)


def kafka_version(node: Node, params: dict[str, Any] | None = None) -> str | None:
    """The Kafka release the host runs, where something says it: ``params.kafka_version``, else
    the node's ``kafka_version`` (the node or its inventory spec); None when nothing does - never
    guessed from the files. The page-cache cut needs it on Apache Kafka for the checkpoints
    Kafka 3.7.x wrote without fsync (nemeses/scripts/truncate_unflushed.py): unknown, such a
    file is kept and reported uncertain."""
    v = (params or {}).get("kafka_version") or getattr(node, "kafka_version", None) or _spec(node, "kafka_version")
    return str(v) if v else None
