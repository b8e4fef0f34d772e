"""The acks=all producer workload: every send is an ``invoke`` then ``ok``/``fail``/``info``.

Why it records what it records (docs/history-format.md; the checker's lost_write anomaly):
the checker decides loss from the history alone, so

* the ``invoke`` line is written *before* ``produce()``, so any value a reader sees has an
  invoke (a SIGKILL between the two leaves an invoke without completion: unknown outcome);
* the producer picks the partition itself (round-robin), so every invoke names its
  partition and an unacknowledged write can still be looked for in the right log;
* values are ``history.make_value(process, seq)``: unique and self-describing;
* the completion comes from the delivery report, classified by :mod:`workloads.outcomes`
  (``ok`` with the acknowledged offset, ``fail`` only when the records were certainly not
  appended, ``info`` otherwise — docs/seeds.md#seed-003-2-6/§2.7).

Defaults chosen for a fault harness, all overridable through ``extra_config``:
``acks=all`` (docs/seeds.md#seed-003-2-5); ``retries=0`` when idempotence is off, so a rejected send is a
definite failure (see the outcomes table); ``message.timeout.ms=30000`` and
``request.timeout.ms=10000`` so a partitioned leader turns into ``info`` outcomes within a
run rather than after librdkafka's five-minute default (a campaign's ``workload.message_timeout``,
120 s by default, replaces the 30 s: harness/campaign.py says why).

The client runs in its own spawned process (see :mod:`workloads._worker`); ``stats()`` reads
shared counters, so the harness's progress line costs nothing.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from confluent_kafka import KafkaError, KafkaException, Producer

from workloads import history as h
from workloads._worker import Control, Worker, WorkerBacked, client_logger
from workloads.outcomes import FAIL, INFO, OK, classify, classify_code

INVOKED, OKS, FAILS, INFOS = range(4)
#: the most sends that may be waiting for a delivery report before the loop waits
MAX_PENDING = 20_000


def partition_list(partitions: int | Sequence[int]) -> list[int]:
    """``3`` means partitions 0,1,2; a sequence is taken as given."""
    parts = list(range(partitions)) if isinstance(partitions, int) else [int(p) for p in partitions]
    if not parts:
        raise ValueError("partitions: need at least one partition")
    return parts


@dataclass
class ProducerSpec:
    process: str
    bootstrap: str
    topic: str
    partitions: list[int]
    history_path: str
    now: Callable[[], float]
    rate: float | None
    config: dict[str, Any]
    retries_possible: bool
    max_sends: int | None = None


def build_config(bootstrap: str, process: str, *, idempotence: bool, acks: str,
                 extra_config: dict[str, Any] | None, max_in_flight: int | None) -> dict[str, Any]:
    """The librdkafka configuration for one producer (see the module docstring)."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": process,
        "acks": acks,
        "enable.idempotence": idempotence,
        "message.timeout.ms": 30_000,
        "request.timeout.ms": 10_000,
        "linger.ms": 5,
        "socket.keepalive.enable": True,
    }
    if not idempotence:
        conf["retries"] = 0
    if max_in_flight is not None:
        conf["max.in.flight.requests.per.connection"] = max_in_flight
    conf.update(extra_config or {})
    return conf


def retries_possible(conf: dict[str, Any]) -> bool:
    """Could librdkafka have sent one message more than once? (Its default retries is huge.)"""
    if str(conf.get("enable.idempotence", False)).lower() in ("true", "1"):
        return True
    raw = conf.get("retries", conf.get("message.send.max.retries"))
    return raw is None or int(raw) > 0


class _ProducerLoop:
    """The body that runs inside the child: send, pace, record, finish."""

    def __init__(self, spec: ProducerSpec, control: Control):
        self.spec, self.control = spec, control
        self.c = control.counters
        self.writer = h.JsonlWriter(spec.history_path)
        self.producer = Producer(spec.config, logger=client_logger(
            spec.process, str(Path(spec.history_path).with_suffix(".client.log"))))

    def on_delivery(self, err: Any, msg: Any) -> None:
        spec = self.spec
        value = msg.value().decode()
        seq = int(value.rpartition("-")[2])
        out = classify(err, retries_possible=spec.retries_possible)
        offset = msg.offset() if out.type == OK else None
        self.writer.write(h.record(t=spec.now(), process=spec.process, op=seq, type=out.type,
                                   f=h.SEND, topic=spec.topic, partition=msg.partition(),
                                   offset=offset, value=value, error=out.error,
                                   error_code=out.error_code))
        self.c[{OK: OKS, FAIL: FAILS, INFO: INFOS}[out.type]] += 1

    def send(self, seq: int) -> None:
        spec = self.spec
        part = spec.partitions[seq % len(spec.partitions)]
        value = h.make_value(spec.process, seq)
        self.writer.write(h.record(t=spec.now(), process=spec.process, op=seq, type=h.INVOKE,
                                   f=h.SEND, topic=spec.topic, partition=part, value=value))
        self.c[INVOKED] += 1
        try:
            self.producer.produce(spec.topic, value=value.encode(), partition=part,
                                  on_delivery=self.on_delivery)
        except BufferError:  # local queue full: the message never entered librdkafka
            self._local_fail(seq, part, value, KafkaError._QUEUE_FULL, "_QUEUE_FULL")
        except KafkaException as exc:  # refused synchronously (e.g. _UNKNOWN_PARTITION)
            err = exc.args[0]
            out = classify_code(err.code(), retries_possible=False, name=err.name())
            self._local_fail(seq, part, value, err.code(), out.error, out.type)

    def _local_fail(self, seq: int, part: int, value: str, code: int, name: str | None,
                    type_: str = FAIL) -> None:
        spec = self.spec
        self.writer.write(h.record(t=spec.now(), process=spec.process, op=seq, type=type_,
                                   f=h.SEND, topic=spec.topic, partition=part, value=value,
                                   error=name, error_code=code))
        self.c[{FAIL: FAILS, INFO: INFOS, OK: OKS}[type_]] += 1

    def pending(self) -> int:
        c = self.c
        return c[INVOKED] - c[OKS] - c[FAILS] - c[INFOS]

    def run(self) -> None:
        should_stop, poll = self.control.should_stop, self.producer.poll
        interval = 1.0 / self.spec.rate if self.spec.rate else 0.0
        next_at = time.monotonic()
        seq = 0
        self.control.ready.set()
        limit = self.spec.max_sends
        while not should_stop():
            if limit is not None and seq >= limit:
                poll(0.05)  # all sent: keep serving delivery reports until stop()
                continue
            if self.pending() >= MAX_PENDING:
                poll(0.01)
                continue
            if interval:
                now = time.monotonic()
                if now < next_at:
                    poll(min(next_at - now, 0.05))
                    continue
                # pace on a schedule, but never burst more than 1 s of backlog after a stall
                next_at = max(next_at + interval, now - 1.0)
            self.send(seq)
            seq += 1
            poll(0)
        self.finish()

    def finish(self) -> None:
        """Flush within the parent's deadline, purge what is left, record every outcome.

        An idempotent producer's fatal error (OUT_OF_ORDER_SEQUENCE_NUMBER: a broker that lost its
        un-fsynced producer state in a power loss no longer knows the sequence) comes out of
        ``flush`` as the KafkaError object itself, not an exception (confluent-kafka): it ends the
        flush, and what is left in flight is purged and recorded indeterminate like the rest - the
        worker never dies with its history unclosed."""
        deadline = time.monotonic() + self.control.finish_timeout.value
        self._flush(max(0.0, deadline - time.monotonic()))
        if len(self.producer):
            self.producer.purge(in_queue=True, in_flight=True, blocking=False)
            self._flush(2.0)
        self.writer.close()

    def _flush(self, timeout: float) -> None:
        try:
            self.producer.flush(timeout)
        except:  # noqa: E722 - the raised KafkaError is no BaseException, so only a bare except takes it
            err = sys.exc_info()[1]
            if isinstance(err, BaseException) and not isinstance(err, Exception):
                raise
            print(f"{self.spec.process}: producer flush ended by {err}", file=sys.stderr)


def _producer_main(spec: ProducerSpec, control: Control) -> None:
    _ProducerLoop(spec, control).run()


class ProducerWorkload(WorkerBacked):
    """One recorded producer process: ``start()``, ``stats()`` while running, ``stop()``."""

    def __init__(self, process: str, bootstrap: str, topic: str, partitions: int | Sequence[int],
                 history_dir: str | Path, now: Callable[[], float], *, rate: float | None = None,
                 idempotence: bool = False, acks: str = "all",
                 extra_config: dict[str, Any] | None = None, max_in_flight: int | None = None,
                 max_sends: int | None = None, mode: str = "process"):
        if rate is not None and rate <= 0:
            raise ValueError(f"producer {process}: rate must be a positive number of messages/s or None")
        conf = build_config(bootstrap, process, idempotence=idempotence, acks=acks,
                            extra_config=extra_config, max_in_flight=max_in_flight)
        self.process = process
        self.history_path = Path(history_dir) / f"{process}.jsonl"
        self.spec = ProducerSpec(process=process, bootstrap=bootstrap, topic=topic,
                                 partitions=partition_list(partitions),
                                 history_path=str(self.history_path), now=now, rate=rate,
                                 config=conf, retries_possible=retries_possible(conf),
                                 max_sends=max_sends)
        self._worker = Worker(f"producer:{process}", _producer_main, self.spec, 4, mode)

    def stats(self) -> dict[str, int]:
        c = self._worker.control.counters
        return {"invoked": c[INVOKED], "ok": c[OKS], "fail": c[FAILS], "info": c[INFOS]}

    def wait_completed(self, n: int, timeout: float) -> bool:
        """Wait until ``n`` sends have an outcome (ok, fail or info); for tests and benchmarks."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.stats()
            if s["ok"] + s["fail"] + s["info"] >= n:
                return True
            time.sleep(0.02)
        return False

    def error(self) -> str | None:
        return self._worker.error()

    def stop(self, timeout: float = 10.0) -> dict[str, int]:
        """Stop sending, wait up to ``timeout`` s for delivery reports, close the history."""
        self._worker.stop(timeout)
        return self.stats()
