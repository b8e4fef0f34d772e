"""The final drain: after healing, read every partition from its start up to its high watermark.

Why (the checker's lost_write anomaly, docs/anomalies.md): a write is only *lost* if some
read reached past its offset without seeing it, or the drain read the whole partition. The
drain gives the second kind of evidence, so its ``drain-end`` record must make a precise
claim: ``ok`` with ``offset = E`` means "every record of this partition below E was read and
recorded as a ``drain`` record". When it cannot make that claim (timeout, no leader) it records
``drain-end`` as ``info`` with the offset it did reach, and the checker must not count
unread writes below that offset as lost.

E is the high watermark queried (ListOffsets, via ``get_watermark_offsets``) *before*
reading: the HWM is the end of the committed, consumer-visible prefix (docs/seeds.md#seed-003-2-7), so
every acknowledged acks=all write that survived has an offset below it. Reading stops at
E even if producers still append; records after E are not claimed.

Runs in the caller's process (the harness, after the workloads stopped): it is one
bounded pass, not a long-lived client.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from workloads import history as h
from workloads._worker import client_logger
from workloads.consumer import consumer_config, message_value
from workloads.outcomes import error_name
from workloads.producer import partition_list


def _watermarks(consumer: Consumer, topic: str, part: int, deadline: float
                ) -> tuple[tuple[int, int] | None, KafkaError | None]:
    """(low, high) from the partition leader, retrying through elections until the deadline."""
    last_err: KafkaError | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None, last_err
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, part),
                                                       timeout=min(5.0, left), cached=False)
            if low >= 0 and high >= 0:
                return (low, high), None
        except KafkaException as exc:
            last_err = exc.args[0]
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def drain(bootstrap: str, topic: str, partitions: int | Sequence[int], history_dir: str | Path,
          now: Callable[[], float], timeout: float = 60.0, *, process: str = "drain",
          extra_config: dict[str, Any] | None = None) -> dict[int, int]:
    """Read each partition up to its HWM; return ``{partition: end offset reached}``.

    A partition whose HWM could not be queried is absent from the result (and has a
    ``drain-end`` ``info`` record with no offset).
    """
    parts = partition_list(partitions)
    deadline = time.monotonic() + timeout
    path = Path(history_dir) / f"{process}.jsonl"
    conf = consumer_config(bootstrap, process, **{"enable.partition.eof": True, **(extra_config or {})})
    consumer = Consumer(conf, logger=client_logger(process, str(path.with_suffix(".client.log"))))
    # a second drain of the same run appends to the same history: continue its op numbers
    op = 1 + max((r.get("op", -1) for r in h.read_jsonl(path)), default=-1) if path.exists() else 0
    writer = h.JsonlWriter(path)

    def end_record(part: int, type_: str, offset: int | None, err: KafkaError | None = None,
                   error: str | None = None) -> None:
        nonlocal op
        if err is not None:
            error = error_name(err.code(), err.name())
        writer.write(h.record(t=now(), process=process, op=op, type=type_, f=h.DRAIN_END,
                              topic=topic, partition=part, offset=offset, error=error,
                              error_code=err.code() if err is not None else None))
        op += 1

    reached: dict[int, int] = {}
    try:
        targets: dict[int, int] = {}       # partition -> HWM to read up to
        for part in parts:
            marks, err = _watermarks(consumer, topic, part, deadline)
            if marks is None:
                end_record(part, h.INFO, None, err, None if err else "_TIMED_OUT")
                continue
            low, high = marks
            reached[part] = low
            if high <= low:
                end_record(part, h.OK, high)
            else:
                targets[part] = high
        if targets:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in targets])
        while targets and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=min(0.2, max(0.0, deadline - time.monotonic()))):
                part, err = msg.partition(), msg.error()
                if part not in targets:
                    continue
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        reached[part] = max(reached[part], msg.offset())
                    else:
                        continue
                else:
                    off = msg.offset()
                    if off >= targets[part]:
                        reached[part] = max(reached[part], targets[part])
                    else:
                        writer.write(h.record(t=now(), process=process, op=op, type=h.OK, f=h.DRAIN,
                                              topic=topic, partition=part, offset=off,
                                              value=message_value(msg)))
                        op += 1
                        reached[part] = max(reached[part], off + 1)
                if reached[part] >= targets[part]:
                    end_record(part, h.OK, targets[part])
                    reached[part] = targets.pop(part)
                    consumer.pause([TopicPartition(topic, part)])
        for part in sorted(targets):
            end_record(part, h.INFO, reached[part], error="_TIMED_OUT")
    finally:
        writer.close()
        consumer.close()
    return reached
