"""Topic administration for a run: create the test topic and wait until it is writable.

Why wait for leaders: a producer started against a partition with no leader yet sees
``LEADER_NOT_AVAILABLE``/``_UNKNOWN_PARTITION`` failures that have nothing to do with the
faults under test; the run should begin from a steady state where every partition has a
leader and a full ISR (docs/seeds.md#seed-003-2-3: the controller elects the initial leaders and the
brokers learn them from the metadata log, which takes a moment after CreateTopics returns).

``min.insync.replicas`` is a topic config (docs/seeds.md#seed-003-2-6) and is set at creation, with any
other topic config, as Kafka spells the keys.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


class AdminError(RuntimeError):
    """Topic creation or description failed; the message names the topic and the reason."""


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int | None
    replicas: list[int]
    isr: list[int]
    error: str | None


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "client.id": "faultline-admin"})


def describe(bootstrap: str, topic: str, timeout: float = 10.0) -> dict[int, PartitionInfo]:
    """Leader, replicas and ISR per partition, from a fresh Metadata request."""
    admin = _admin(bootstrap)
    try:
        md = admin.list_topics(topic=topic, timeout=timeout)
    except KafkaException as exc:
        raise AdminError(f"describe topic {topic!r} via {bootstrap}: {exc.args[0].str()}") from None
    tmd = md.topics.get(topic)
    if tmd is None:
        raise AdminError(f"describe topic {topic!r}: not in the metadata answer")
    if tmd.error is not None:
        raise AdminError(f"describe topic {topic!r}: {tmd.error.name()}")
    return {p: PartitionInfo(partition=p, leader=None if pm.leader < 0 else pm.leader,
                             replicas=list(pm.replicas), isr=list(pm.isrs),
                             error=pm.error.name() if pm.error is not None else None)
            for p, pm in sorted(tmd.partitions.items())}


def wait_for_leaders(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0,
                     full_isr: bool = True) -> dict[int, PartitionInfo]:
    """Poll the metadata until all ``partitions`` have a leader (and, by default, a full ISR)."""
    deadline = time.monotonic() + timeout
    last: str = "no answer yet"
    while time.monotonic() < deadline:
        try:
            info = describe(bootstrap, topic, timeout=min(5.0, max(0.5, deadline - time.monotonic())))
            missing = [p for p in range(partitions) if p not in info or info[p].leader is None
                       or (full_isr and len(info[p].isr) < len(info[p].replicas))]
            if not missing:
                return info
            last = f"partitions {missing} without a leader{' or full ISR' if full_isr else ''}"
        except AdminError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise AdminError(f"topic {topic!r} not ready within {timeout:.0f}s: {last}")


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int,
                 min_insync_replicas: int | None = None, config: dict[str, Any] | None = None, *,
                 timeout: float = 30.0, exist_ok: bool = False) -> dict[int, PartitionInfo]:
    """Create ``topic`` and return its partitions once each has a leader and full ISR."""
    if partitions < 1 or replication_factor < 1:
        raise AdminError(f"topic {topic!r}: partitions and replication factor must be >= 1")
    if min_insync_replicas is not None and not 1 <= min_insync_replicas <= replication_factor:
        raise AdminError(f"topic {topic!r}: min.insync.replicas={min_insync_replicas} must be "
                         f"between 1 and the replication factor {replication_factor}")
    conf = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (config or {}).items()}
    if min_insync_replicas is not None:
        conf["min.insync.replicas"] = str(min_insync_replicas)
    new = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor, config=conf)
    admin = _admin(bootstrap)  # keep the handle alive until the future resolves
    futures = admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)
    try:
        futures[topic].result(timeout)
    except KafkaException as exc:
        err: KafkaError = exc.args[0]
        if not (exist_ok and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise AdminError(f"create topic {topic!r} via {bootstrap}: {err.name()}: {err.str()}") from None
    except Exception as exc:  # e.g. concurrent.futures.TimeoutError
        raise AdminError(f"create topic {topic!r} via {bootstrap}: {type(exc).__name__}: {exc}") from None
    return wait_for_leaders(bootstrap, topic, partitions, timeout=timeout)
