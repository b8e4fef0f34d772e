"""Consumer and drain when no broker answers: they must not claim to have read anything.

Known-bad control for the drain's claim: with no high watermark known, a ``drain-end``
``ok`` would tell the checker "the whole partition was read" and turn every unread write
into a false lost write. It must be ``info`` instead.
"""
from __future__ import annotations

import socket
import time

from groundwork.clock import RunClock
from workloads.consumer import ConsumerWorkload
from workloads.drain import drain
from workloads.history import read_jsonl


def dead_bootstrap() -> str:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_drain_without_a_broker_records_info_per_partition(tmp_path):
    clock = RunClock()
    t0 = time.monotonic()
    reached = drain(dead_bootstrap(), "t", 2, tmp_path, clock.now, timeout=1.5)
    assert time.monotonic() - t0 < 10
    assert reached == {}
    recs = list(read_jsonl(tmp_path / "drain.jsonl"))
    assert [(r["f"], r["type"], r["partition"], r["offset"]) for r in recs] == [
        ("drain-end", "info", 0, None), ("drain-end", "info", 1, None)]
    assert all(r["error"] for r in recs)


def test_consumer_without_a_broker_starts_stops_and_records_nothing(tmp_path):
    w = ConsumerWorkload("consumer-0", dead_bootstrap(), "t", 3, tmp_path, RunClock().now)
    w.start()
    time.sleep(0.5)
    assert w.alive()
    assert w.stop(timeout=5) == {"ok": 0, "info": 0}
    assert not w.alive() and w.error() is None
    assert list(read_jsonl(tmp_path / "consumer-0.jsonl")) == []


def test_a_second_drain_continues_op_numbers(tmp_path):
    clock = RunClock()
    bootstrap = dead_bootstrap()
    drain(bootstrap, "t", 1, tmp_path, clock.now, timeout=0.3)
    drain(bootstrap, "t", 1, tmp_path, clock.now, timeout=0.3)
    assert [r["op"] for r in read_jsonl(tmp_path / "drain.jsonl")] == [0, 1]
