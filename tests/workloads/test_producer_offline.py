"""Producer recording without a reachable broker: unknown outcomes, SIGKILL durability, bad config.

The "broker" is a closed loopback port, so librdkafka (real) can never deliver: every send
must end as ``info`` ``_MSG_TIMED_OUT`` (it may have been sent, as far as a client knows),
never ``fail``, never ``ok``.
"""
from __future__ import annotations

import os
import signal
import socket
import time
from collections import Counter

import pytest

from groundwork.clock import RunClock
from workloads.history import ReadStats, parse_value, read_jsonl
from workloads.producer import ProducerWorkload


def dead_bootstrap() -> str:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def workloads_to_stop():
    made: list[ProducerWorkload] = []
    yield made
    for w in made:
        if w.alive() and w.pid:
            os.kill(w.pid, signal.SIGKILL)


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_unreachable_broker_gives_info_for_every_send(tmp_path, workloads_to_stop, mode):
    clock = RunClock()
    w = ProducerWorkload("producer-0", dead_bootstrap(), "t", 3, tmp_path, clock.now, rate=400,
                         extra_config={"message.timeout.ms": 500}, mode=mode)
    workloads_to_stop.append(w)
    t0 = time.monotonic()
    w.start()
    time.sleep(0.6)
    live = w.stats()
    assert live["invoked"] > 0
    final = w.stop(timeout=5)
    # paced: never more than rate x elapsed (+ one scheduling slot), whatever the machine load
    assert final["invoked"] <= 400 * (time.monotonic() - t0) + 2
    recs = list(read_jsonl(tmp_path / "producer-0.jsonl"))
    kinds = Counter((r["type"], r["error"]) for r in recs)
    n = final["invoked"]
    assert kinds == {("invoke", None): n, ("info", "_MSG_TIMED_OUT"): n}
    assert final == {"invoked": n, "ok": 0, "fail": 0, "info": n}
    invokes = [r for r in recs if r["type"] == "invoke"]
    # round-robin partitions, unique self-describing values, op = seq
    assert [r["partition"] for r in invokes[:6]] == [0, 1, 2, 0, 1, 2]
    assert len({r["value"] for r in invokes}) == n
    assert all(parse_value(r["value"]) == ("producer-0", r["op"]) for r in invokes)
    assert all(r["error_code"] == -192 and r["offset"] is None for r in recs if r["type"] == "info")
    assert not w.alive()


def test_history_survives_sigkill_of_the_producer_process(tmp_path, workloads_to_stop):
    clock = RunClock()
    w = ProducerWorkload("producer-k", dead_bootstrap(), "t", 2, tmp_path, clock.now, rate=2000)
    workloads_to_stop.append(w)
    w.start()
    time.sleep(1.0)
    killed_at = clock.now()
    os.kill(w.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while w.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not w.alive()
    path = tmp_path / "producer-k.jsonl"
    # make the cut certain: the process may have died between lines, so also tear a line now
    with open(path, "ab") as fh:
        fh.write(b'{"v":1,"t":99.0,"process":"producer-k","op":')
    st = ReadStats()
    recs = list(read_jsonl(path, st))
    assert st.torn_tail and st.bad_lines == 0 and st.lines == len(recs) > 100
    # flushed at least every 200 ms: the history reaches close to the moment of the kill
    assert max(r["t"] for r in recs) > killed_at - 0.5
    ops = [r["op"] for r in recs if r["type"] == "invoke"]
    assert ops == list(range(len(ops)))


def test_bad_client_config_is_one_clear_error(tmp_path):
    w = ProducerWorkload("producer-bad", dead_bootstrap(), "t", 1, tmp_path, RunClock().now,
                         extra_config={"acks": "sometimes"})
    with pytest.raises(RuntimeError, match=r"producer:producer-bad: .*acks"):
        w.start()
    assert not w.alive()


def test_unpicklable_clock_is_refused_up_front(tmp_path):
    with pytest.raises(TypeError, match="cannot be sent to a child process"):
        ProducerWorkload("producer-x", "127.0.0.1:1", "t", 1, tmp_path, lambda: 0.0)
    # thread mode accepts any callable
    ProducerWorkload("producer-x", "127.0.0.1:1", "t", 1, tmp_path, lambda: 0.0, mode="thread")


#: a harness in miniature: starts one producer against a dead broker and prints its pid -
#: once it is ready (``ready``), or as soon as it is spawned, while the harness still waits
#: for it (``spawned``)
PARENT = """
import sys, time
from groundwork.clock import RunClock
from workloads.producer import ProducerWorkload
if __name__ == "__main__":
    w = ProducerWorkload("producer-o", sys.argv[1], "t", 1, sys.argv[2], RunClock().now, rate=200)
    if sys.argv[3] == "spawned":
        w.start(on_spawn=lambda pid: print(pid, flush=True))
    else:
        w.start()
        print(w.pid, flush=True)
    time.sleep(60)
"""


def orphaned_history(tmp_path, when: str, settle: float, grace: float) -> list[dict]:
    """Run PARENT, SIGKILL it ``settle`` s after it printed the producer's pid, and return the
    producer's history once the producer exited on its own (fail if it is still running
    ``grace`` s later). Both processes are killed whatever happens."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    repo = Path(__file__).resolve().parents[2]
    parent = subprocess.Popen([sys.executable, str(script), dead_bootstrap(), str(tmp_path), when],
                              stdout=subprocess.PIPE, text=True, cwd=repo,
                              env={**os.environ, "PYTHONPATH": str(repo)}, start_new_session=True)
    child = None
    try:
        child = int(parent.stdout.readline())
        time.sleep(settle)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(5)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"producer child {child} still running {grace:.0f} s after its parent was SIGKILLed")
        st = ReadStats()
        recs = list(read_jsonl(tmp_path / "producer-o.jsonl", st))
        assert not st.torn_tail, "an orphaned producer must close its history cleanly"
        return recs
    finally:
        for pid in (parent.pid, child):
            try:
                if pid:
                    os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_producer_exits_when_its_harness_is_sigkilled(tmp_path):
    """A harness killed with SIGKILL leaves no producer writing on as an orphan."""
    recs = orphaned_history(tmp_path, "ready", settle=0.5, grace=10)
    kinds = Counter(r["type"] for r in recs)
    # every send got an outcome: purged from the local queue, never sent (retries=0)
    assert kinds["invoke"] == kinds["fail"] > 0 and kinds["ok"] == kinds["info"] == 0
    assert {r["error"] for r in recs if r["type"] == "fail"} == {"_PURGE_QUEUE"}


def test_producer_exits_when_its_harness_is_sigkilled_while_it_starts(tmp_path):
    """The harness is SIGKILLed while it waits for its producer to be ready - the child is told
    its pid (where the harness writes the ledger entry) before that wait. The producer still
    exits on its own: with a multiprocessing Event for ``ready``, its ``set`` waited forever for
    the dead harness's wait to wake, and the producer lived on, never reaching its parent check."""
    orphaned_history(tmp_path, "spawned", settle=0.0, grace=30)   # the child is still importing its client
