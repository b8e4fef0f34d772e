"""AlterPartition's version negotiation and the 3.5.0-3.5.1 builder that empties a re-sent ISR.

Kafka: a broker builds AlterPartition without knowing the controller's versions
(AlterPartitionManager.buildRequest fills NewIsrWithEpochs); NetworkClient picks the version from
the controller's ApiVersions on the connection and calls ``AlterPartitionRequest.Builder.build
(version)`` on every send. AlterPartitionRequest.json has v3 (NewIsrWithEpochs) from 3.5.0, 0-2 up
to 3.4.x, and a controller advertises every version of its software (ControllerServer's
SimpleApiVersionManager), so a 3.5 broker sends v2 to a 3.4 controller - a rolling upgrade in
progress; metadata.version plays no part. Below v3, ``build`` moves NewIsrWithEpochs into NewIsr.
In 3.5.0 and 3.5.1 it does so unconditionally, clearing NewIsrWithEpochs, so building the same
builder again - the channel re-sends it after a disconnect or NOT_CONTROLLER
(NodeToControllerRequestThread.handleResponse -> putFirst) - sends NewIsr = [], which the
controller rejects with INVALID_REQUEST (the ISR must hold the leader:
ReplicationControlManager.validateAlterPartitionData). KAFKA-15353 (6f55160175a, first 3.5.2;
bee6c41ff87 3.6.0; b41b2dfcf2f 3.7.0) converts only while NewIsrWithEpochs is not empty. Cases:
AlterPartitionRequestTest ``testBuildAlterPartitionRequest`` with the fix's "build the request
again" part, on both sides; the controllers' advertised versions; a 3.4 controller's answer to
the rebuilt request.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from kraftsim import features
from kraftsim.broker.alter_partition import AlterPartitionRequestBuilder
from kraftsim.wire import Client
from tests.kraftsim.conformance.controller_harness import PEER, brokers, controller, create, part, run
from tests.kraftsim.conftest import REPO
from tests.kraftsim.raft.quorum import _free_port

EPOCHS = [{"broker_id": 1, "broker_epoch": 1001}, {"broker_id": 2, "broker_epoch": 1002},
          {"broker_id": 3, "broker_epoch": 1003}]


def _builder(kafka_version: str, topic_id: uuid.UUID | None = None, epochs=EPOCHS) -> AlterPartitionRequestBuilder:
    kv = features.parse_kafka_version(kafka_version)
    f = features.derive({"metadata.version": features.parse_metadata_version("3.4"), "kafka.version": kv})
    data = {"broker_id": 1, "broker_epoch": 1, "topics": [{"topic_id": topic_id or uuid.uuid4(), "partitions": [
        {"partition_index": 0, "leader_epoch": 1, "partition_epoch": 10, "leader_recovery_state": 0,
         "new_isr_with_epochs": [dict(e) for e in epochs], "new_isr": []}]}]}
    return AlterPartitionRequestBuilder(data, 3 if f.alter_partition_v3 else 2,
                                        idempotent=not f.alter_partition_build_not_idempotent)


def _isr(req) -> tuple[list[int], list[tuple[int, int]]]:
    p = req.topics[0].partitions[0]
    return ([int(b) for b in getattr(p, "new_isr", ())],
            [(int(s.broker_id), int(s.broker_epoch)) for s in getattr(p, "new_isr_with_epochs", ())])


@pytest.mark.parametrize("kafka_version", ["3.5.2", "3.6.0", "3.7.0"])
@pytest.mark.parametrize("version", [2, 3])
def test_build_alter_partition_request_twice_fixed(kafka_version, version):
    """AlterPartitionRequestTest.testBuildAlterPartitionRequest (with "Build the request again to make
    sure build() is idempotent"): v2 carries NewIsr [1, 2, 3], v3 NewIsrWithEpochs - twice."""
    b = _builder(kafka_version)
    want = ([1, 2, 3], []) if version < 3 else ([], [(1, 1001), (2, 1002), (3, 1003)])
    assert _isr(b.build(version)) == want
    assert _isr(b.build(version)) == want


@pytest.mark.parametrize("kafka_version", ["3.5.0", "3.5.1"])
def test_build_alter_partition_request_twice_below_v3_empties_the_isr_on_3_5_1(kafka_version):
    """The same case on 3.5.0 / 3.5.1: the first v2 build is right, the second sends NewIsr = []
    (NewIsrWithEpochs was cleared in place by the first); v3 builds are unaffected."""
    b = _builder(kafka_version)
    assert _isr(b.build(2)) == ([1, 2, 3], [])
    assert _isr(b.build(2)) == ([], [])
    b3 = _builder(kafka_version)
    assert _isr(b3.build(3)) == _isr(b3.build(3)) == ([], [(1, 1001), (2, 1002), (3, 1003)])


def test_build_v3_after_a_v2_conversion_fails_as_kafkas_serialisation():
    """A builder converted for v2 and then built for v3 (a re-send reaching a controller with v3)
    has a non-default NewIsr: Kafka's serialisation throws, the request is built anew."""
    b = _builder("3.5.2")
    b.build(2)
    with pytest.raises(ValueError):
        b.build(3)


@pytest.mark.parametrize("controller_version,fixed", [("3.5.1", False), ("3.5.2", True)])
def test_a_3_4_controller_rejects_the_rebuilt_request_of_a_3_5_1_broker(tmp_path, controller_version, fixed):
    """A 3.4.1 controller (metadata.version 3.4); the leader's shrink request built for v2 once
    (sent to a controller that died before answering) and again for the re-send: from a 3.5.1
    broker the second has NewIsr = [] and is rejected INVALID_REQUEST, with an ``alter_partition``
    event naming the empty ISR; from 3.5.2 it carries [1, 2] and is accepted."""
    c = controller(tmp_path, **{"metadata.version": "3.4", "kafka.version": "3.4.1"})
    ep = brokers(c, 1, 2, 3)
    create(c, [1, 2, 3])
    ps = part(c)
    b = _builder(controller_version, uuid.UUID(c.image.topics["foo"].topic_id),
                 epochs=[{"broker_id": 1, "broker_epoch": ep[1]}, {"broker_id": 2, "broker_epoch": ep[2]}])
    b.data["broker_epoch"] = ep[1]
    b.data["topics"][0]["partitions"][0].update(leader_epoch=ps.leader_epoch, partition_epoch=ps.partition_epoch)
    b.build(2)                       # the first send: lost with the controller it went to
    resp = run(c.h_alter_partition(None, b.build(2), PEER))
    p = resp.topics[0].partitions[0]
    ev = [e for e in _events(tmp_path) if e["event"] == "alter_partition"][-1]
    if fixed:
        assert p.error_code is ErrorCode.none and list(p.isr) == [1, 2], p
        assert ev["accepted"] is True and ev["new_isr"] == [1, 2]
    else:
        assert p.error_code is ErrorCode.invalid_request, p
        assert ev["accepted"] is False and ev["error"] == "INVALID_REQUEST" and ev["new_isr"] == []
        assert part(c).isr == [1, 2, 3]


def _events(tmp_path) -> list[dict]:
    import json
    return [json.loads(ln) for ln in (tmp_path / "events.jsonl").read_text().splitlines() if ln.strip()]


@pytest.mark.parametrize("version,advertised", [("3.4.1", (2, 2)), ("3.5.0", (2, 3))])
def test_controller_advertises_alter_partition_by_its_software_version(tmp_path, version, advertised):
    """A real controller process: ApiVersions names AlterPartition up to v2 on 3.4.x software and up
    to v3 from 3.5.0 (``controller.kafka.version``, whatever the metadata.version)."""
    port = _free_port(["127.0.0.1"])
    props = {"node.id": "1000", "process.roles": "controller", "listeners": f"CONTROLLER://127.0.0.1:{port}",
             "metadata.log.dir": str(tmp_path / "md"), "metadata.version": "3.4", "kafka.version": "3.5.1",
             "controller.kafka.version": version}
    cfg = tmp_path / "c.properties"
    cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    p = subprocess.Popen([sys.executable, "-m", "kraftsim", "controller", "--config", str(cfg)],
                         stdout=open(tmp_path / "process.log", "wb"), stderr=subprocess.STDOUT,
                         env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO, start_new_session=True)
    try:
        async def ask() -> dict[int, tuple[int, int]]:
            deadline = time.monotonic() + 15
            while True:
                cl = Client("127.0.0.1", port, "test")
                try:
                    return await cl.api_versions(timeout=2)
                except (OSError, ConnectionError, asyncio.TimeoutError):
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.1)
                finally:
                    cl.close()
        assert asyncio.run(ask())[56] == advertised
    finally:
        p.kill()
        p.wait(10)
