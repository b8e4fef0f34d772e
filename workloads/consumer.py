"""The tailing consumer workload: one ``poll`` ``ok`` record per message read, during faults.

Why it reads this way (the checker's lost_write and poll anomalies, docs/anomalies.md):

* ``assign()`` every partition from the beginning, no consumer-group membership and no
  offset commits: a group rebalance or a committed offset would hide records from us, and
  the checker needs each consumer's *complete* sequence of reads per partition;
* ``auto.offset.reset=earliest``: when the fetch position falls off the log (the log was
  truncated below what we already read — the very data loss docs/seeds.md#seed-000 describes, or a
  wiped leader, docs/seeds.md#seed-003 "Last Replica Standing"), librdkafka restarts the partition from
  its beginning. The re-read shows up as a nonmonotonic poll instead of silently skipping;
* ``isolation.level=read_uncommitted``: without transactions the LSO equals the HWM (seed
  003 §2.7), and consumers can only ever read below the HWM, so this asks the broker for no
  more than the HWM semantics;
* partition-level errors that librdkafka hands to the application (``_LOG_TRUNCATION``,
  ``OFFSET_OUT_OF_RANGE``, ...) are kept as ``poll`` ``info`` records with the error name:
  evidence for attribution, ignored by the loss checks.

A ``group.id`` is set only because librdkafka refuses to create a consumer without one; it
is never joined (no ``subscribe``) and nothing is committed.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from workloads import history as h
from workloads._worker import ERRORS, READ, Control, ReaderBacked, Worker, client_logger
from workloads.outcomes import error_name
from workloads.producer import partition_list



def consumer_config(bootstrap: str, client_id: str, **extra: Any) -> dict[str, Any]:
    """librdkafka settings for a reader that never commits and never joins its group."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "group.id": f"faultline-{client_id}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_uncommitted",
        "fetch.wait.max.ms": 100,
        "socket.keepalive.enable": True,
    }
    conf.update(extra)
    return conf


def message_value(msg: Any) -> str | None:
    raw = msg.value()
    return None if raw is None else raw.decode("utf-8", "replace")


@dataclass
class ConsumerSpec:
    process: str
    bootstrap: str
    topic: str
    partitions: list[int]
    history_path: str
    now: Callable[[], float]
    config: dict[str, Any]


def _consumer_main(spec: ConsumerSpec, control: Control) -> None:
    writer = h.JsonlWriter(spec.history_path)
    consumer = Consumer(spec.config, logger=client_logger(
        spec.process, str(Path(spec.history_path).with_suffix(".client.log"))))
    c, op = control.counters, 0
    try:
        consumer.assign([TopicPartition(spec.topic, p, OFFSET_BEGINNING) for p in spec.partitions])
        control.ready.set()
        while not control.should_stop():
            for msg in consumer.consume(num_messages=500, timeout=0.1):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    part = msg.partition()
                    writer.write(h.record(t=spec.now(), process=spec.process, op=op, type=h.INFO,
                                          f=h.POLL, topic=spec.topic, partition=part,
                                          offset=msg.offset() if part is not None else None,
                                          error=error_name(err.code(), err.name()),
                                          error_code=err.code()))
                    c[ERRORS] += 1
                else:
                    writer.write(h.record(t=spec.now(), process=spec.process, op=op, type=h.OK,
                                          f=h.POLL, topic=msg.topic(), partition=msg.partition(),
                                          offset=msg.offset(), value=message_value(msg)))
                    c[READ] += 1
                op += 1
    finally:
        consumer.close()
        writer.close()


class ConsumerWorkload(ReaderBacked):
    """One recorded tailing consumer process over every given partition of one topic."""

    def __init__(self, process: str, bootstrap: str, topic: str, partitions: int | Sequence[int],
                 history_dir: str | Path, now: Callable[[], float], *,
                 extra_config: dict[str, Any] | None = None, mode: str = "process"):
        self.process = process
        self.history_path = Path(history_dir) / f"{process}.jsonl"
        self.spec = ConsumerSpec(process=process, bootstrap=bootstrap, topic=topic,
                                 partitions=partition_list(partitions),
                                 history_path=str(self.history_path), now=now,
                                 config=consumer_config(bootstrap, process, **(extra_config or {})))
        self._worker = Worker(f"consumer:{process}", _consumer_main, self.spec, 2, mode)
