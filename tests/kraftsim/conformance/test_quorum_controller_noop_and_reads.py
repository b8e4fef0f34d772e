"""The active controller's NoOpRecords, and requests that write nothing waiting for pending writes.

Kafka (metadata/src/main/java/org/apache/kafka/controller/QuorumController.java):

- ``maybeScheduleNextWriteNoOpRecord``: the active controller appends a NoOpRecord every
  ``metadata.max.idle.interval.ms`` (default 500), when the metadata.version supports it
  (``MetadataVersion.isNoOpRecordSupported``, IBP_3_3_IV1; KAFKA-13883 7d1b0926fab, first 3.3.0;
  gate ``noop_records``). QuorumControllerTest ``testNoOpRecordWriteAfterTimeout``: with no
  request at all, the high watermark moves, twice.
- ``ControllerWriteEvent.run``: an operation whose result has no records (a heartbeat of an
  unfenced broker) completes at once only when the deferred event queue is empty; otherwise
  "we want to wait for the latest one to complete before returning our result to the user" (it
  read uncommitted state). So a leader that cannot commit - cut from the other voters, before
  Kafka 3.7 never resigning (gate ``check_quorum``) - answers no heartbeat: its NoOpRecords stay
  pending. Without NoOpRecords and with nothing else pending it answers at once.
"""
from __future__ import annotations

import asyncio
import os
import time
import uuid
import subprocess
from pathlib import Path

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from kraftsim.wire import build
from tests.kraftsim.conformance.controller_harness import brokers, controller
from tests.kraftsim.raft.test_controller_quorum import IDS, Controllers, call, register_req


def _run_for(c, seconds: float) -> None:
    """The controller's NoOp task alone, for ``seconds``, on one event loop."""
    async def go() -> None:
        task = asyncio.ensure_future(c.noop_loop())
        await asyncio.sleep(seconds)
        task.cancel()
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(go())
    finally:
        loop.close()


@pytest.mark.parametrize("mv,kv,writes", [("3.6", "3.6.2", True), ("3.3-IV1", "3.3.0", True),
                                         ("3.3-IV0", "3.3.0", False)])
def test_noop_record_write_after_timeout(tmp_path, mv, kv, writes):
    """QuorumControllerTest.testNoOpRecordWriteAfterTimeout: an idle active controller's committed
    log grows by NoOpRecords, again and again; not below IBP_3_3_IV1 (isNoOpRecordSupported)."""
    c = controller(tmp_path, **{"metadata.version": mv, "kafka.version": kv,
                                "metadata.max.idle.interval.ms": "100"})
    brokers(c, 1)
    first = len(c.quorum.committed_records())
    _run_for(c, 0.55)
    noops = [r for _, r in c.quorum.committed_records()[first:] if r.get("type") == "noop"]
    assert (len(noops) >= 2) is writes, noops
    assert writes or not noops


def _drop(src: str, dst: str, tag: str) -> list[str]:
    spec = ["INPUT", "-p", "tcp", "-s", src, "-d", dst, "-j", "DROP", "-m", "comment", "--comment", tag]
    subprocess.run(["iptables", "-I", *spec], check=True, capture_output=True)
    return spec


def _heartbeat_req(broker: int, epoch: int, offset: int):
    return build(load_request_schema(63, 1), {"broker_id": broker, "broker_epoch": epoch,
                                             "current_metadata_offset": offset, "want_fence": False,
                                             "want_shut_down": False})


def _active(ctls: Controllers) -> int:
    deadline = time.time() + 20
    while time.time() < deadline:
        for i in IDS:
            el = ctls.events(i, "controller_elected")
            rs = ctls.events(i, "controller_resigned")
            if el and (not rs or rs[-1]["epoch"] < el[-1]["epoch"]):
                return i
        time.sleep(0.1)
    raise AssertionError("no active controller")


@pytest.mark.slow
@pytest.mark.parametrize("idle_ms,answered", [("500", False), ("0", True)])
def test_leader_cut_from_its_voters_answers_no_heartbeat_while_writes_are_pending(tmp_path, idle_ms, answered):
    """Three real controllers on Kafka 3.6.2 (no check quorum); a broker (the test, over kio)
    registers and is unfenced; the active controller is then cut from the other two voters (not
    from the broker). With NoOpRecords every 500 ms (Kafka's default) its next heartbeat gets no
    answer at all - the leader keeps appending NoOps it can never commit, and the heartbeat waits
    for the latest. With ``metadata.max.idle.interval.ms=0`` nothing is pending and the heartbeat
    is answered at once by the leader that still thinks it leads."""
    ctls = Controllers(tmp_path)
    for i in IDS:
        p = tmp_path / f"c{i}" / "c.properties"
        p.write_text(p.read_text() + f"kafka.version=3.6.2\nmetadata.version=3.6\n"
                                     f"metadata.max.idle.interval.ms={idle_ms}\nbroker.session.timeout.ms=60000\n")
    rules: list[list[str]] = []
    try:
        for i in IDS:
            ctls.start(i)
        leader = _active(ctls)
        host = ctls.hosts[leader]
        inc = uuid.uuid4()
        deadline = time.time() + 10
        while True:   # an elected leader serves brokers once it has replayed the log (claim)
            resp = asyncio.run(call(host, ctls.port, register_req(1, inc), timeout=10))
            if resp.error_code is not ErrorCode.not_controller or time.time() > deadline:
                break
            time.sleep(0.1)
        assert resp.error_code is ErrorCode.none, resp
        epoch = int(resp.broker_epoch)
        resp = asyncio.run(call(host, ctls.port, _heartbeat_req(1, epoch, 10_000), timeout=10))
        assert resp.error_code is ErrorCode.none and not resp.is_fenced, resp
        tag = f"faultline-test-noop-{os.getpid()}"
        for j in IDS:
            if j != leader:
                rules.append(_drop(ctls.hosts[leader], ctls.hosts[j], tag))
                rules.append(_drop(ctls.hosts[j], ctls.hosts[leader], tag))
        time.sleep(3.0)   # the other two elect a leader of their own meanwhile; this one never resigns
        assert not [e for e in ctls.events(leader, "controller_resigned")]
        try:
            resp = asyncio.run(call(host, ctls.port, _heartbeat_req(1, epoch, 10_000), timeout=3))
            got = resp
        except asyncio.TimeoutError:
            got = None
        if answered:
            assert got is not None and got.error_code is ErrorCode.none, got
        else:
            assert got is None, f"the cut-off leader answered a heartbeat: {got}"
    finally:
        for spec in rules:
            while subprocess.run(["iptables", "-D", *spec], capture_output=True).returncode == 0:
                pass
        ctls.close()
