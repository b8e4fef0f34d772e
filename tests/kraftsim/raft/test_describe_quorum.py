"""DescribeQuorum (api 55) on a three-controller kraftsim cluster, over real sockets.

Checked (Kafka: KafkaApis ``DESCRIBE_QUORUM => forwardToControllerOrFail``,
KafkaRaftClient.handleDescribeQuorumRequest, RaftUtil.singletonDescribeQuorumResponse):
- a broker advertises it and forwards it; the answer names the raft leader, the epoch of its
  latest ``controller_elected``, a high watermark, all three voters (the leader's own
  timestamps set) and the brokers as observers;
- a controller that is not the leader answers NOT_LEADER_OR_FOLLOWER for the partition;
- anything but ``__cluster_metadata``-0 is UNKNOWN_TOPIC_OR_PARTITION;
- after SIGKILL of the leader, a later answer through the same broker names another
  controller in a higher epoch.

Before DescribeQuorum existed a broker did not advertise api 55 and closed the connection on
it: every assertion here failed.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.describe_quorum.v1.request import DescribeQuorumRequest, PartitionData, TopicData
from kio.schema.describe_quorum.v1.response import DescribeQuorumResponse
from kio.schema.errors import ErrorCode

from tests.kraftsim.raft.test_controller_failover_cluster import NAMES, _active, _pid, cluster  # noqa: F401
from workloads.controller_quorum import describe_quorum
from workloads.kafka_wire import KafkaConnection, parse_bootstrap

pytestmark = pytest.mark.slow


def _controllers(root: Path) -> dict[int, tuple[str, tuple[str, int]]]:
    """node id -> (name, listener address), from the cluster's controller-N.properties."""
    out = {}
    for name in NAMES:
        props = dict(line.split("=", 1) for line in (root / f"{name}.properties").read_text().splitlines()
                     if "=" in line and not line.startswith("#"))
        host, port = props["listeners"].split("://", 1)[1].rsplit(":", 1)
        out[int(props["node.id"])] = (name, (host, int(port)))
    return out


def _raw(conn: KafkaConnection, topic: str, partition: int) -> DescribeQuorumResponse:
    req = DescribeQuorumRequest(topics=(TopicData(topic_name=topic, partitions=(PartitionData(partition_index=partition),)),))
    return conn.request(req, DescribeQuorumResponse)


def test_describe_quorum_via_broker_names_leader_and_follows_a_failover(cluster) -> None:
    root, bootstrap = cluster
    ctl = _controllers(root)
    broker = KafkaConnection(*parse_bootstrap(bootstrap)[0], timeout=5.0)
    try:
        apis = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in broker.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="0"), ApiVersionsResponse).api_keys}
        assert apis.get(55) == (0, 1)

        deadline = time.time() + 15
        while True:  # the quorum and the brokers' registrations settle
            name, epoch = _active(root)
            q = describe_quorum(broker, 1)
            if name and q["leader_id"] is not None and q["observers"] and len(q["observers"]) == 3:
                break
            assert time.time() < deadline, f"no settled quorum: {q}"
            time.sleep(0.2)
        leader = q["leader_id"]
        assert ctl[leader][0] == name and q["leader_epoch"] == epoch, (q, name, epoch)
        assert q["high_watermark"] > 0
        assert sorted(v["id"] for v in q["voters"]) == sorted(ctl)
        own = [v for v in q["voters"] if v["id"] == leader][0]
        assert own["last_fetch_ms"] > 0 and own["last_caught_up_ms"] > 0
        assert sorted(o["id"] for o in q["observers"]) == [1, 2, 3]

        # a follower controller, asked directly, is not the leader
        follower = next(n for n in ctl if n != leader)
        direct = KafkaConnection(*ctl[follower][1], timeout=5.0)
        at_leader = KafkaConnection(*ctl[leader][1], timeout=5.0)
        try:
            p = _raw(direct, "__cluster_metadata", 0).topics[0].partitions[0]
            assert p.error_code == ErrorCode.not_leader_or_follower
            bad = _raw(at_leader, "other", 0).topics[0].partitions[0]
            assert bad.error_code == ErrorCode.unknown_topic_or_partition
        finally:
            direct.close()
            at_leader.close()

        os.kill(_pid(root, ctl[leader][0]), signal.SIGKILL)
        deadline = time.time() + 20
        while True:
            after = describe_quorum(broker, 1)
            if after["leader_id"] not in (None, leader):
                break
            assert time.time() < deadline, f"no new leader named after the SIGKILL: {after}"
            time.sleep(0.2)
        assert after["leader_epoch"] > q["leader_epoch"]
        assert after["leader_id"] in ctl
    finally:
        broker.close()
