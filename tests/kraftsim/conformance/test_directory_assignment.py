"""KIP-858 directory assignment: a wiped broker's new ``directory.id`` moves the partition epoch.

From the real run in ``real_logs/kip903-4.1.0-directory-reassignment/`` (Kafka 4.1.0, its
PROVENANCE.md): a held AlterPartition adding broker 1 back (partition epoch 1) is released after
broker 1's disk was wiped and formatted; broker 1 registered its new log dir, created its logs
there and sent AssignReplicasToDirs; the controller's directory change made the partition epoch
2, so the held request was rejected INVALID_UPDATE_VERSION ("the current partition epoch is 2, not
1") - before the KIP-903 broker-epoch check that would have answered INELIGIBLE_REPLICA, which is
what kraftsim answered before it modelled directories (this test then fails: no Directories, no
AssignReplicasToDirs handler).

Kafka: ``ReplicationControlManager.handleAssignReplicasToDirs`` (a PartitionChangeBuilder with
``setDirectory``; ``PartitionRegistration.merge`` bumps the partition epoch on any change),
``ClusterControlManager.defaultDir`` (a new partition's replica directory: its broker's only log
dir), ``MetadataVersion.isDirectoryAssignmentSupported`` (IBP_3_7_IV2); the partition-epoch check
comes before the ISR eligibility checks in ``validateAlterPartitionData``.
"""
from __future__ import annotations

import re
import uuid
from pathlib import Path

from tests.kraftsim.conformance.controller_harness import (alter, assign_dir, controller, create, heartbeat, part,
                                                             register)

REAL = Path(__file__).parent / "real_logs" / "kip903-4.1.0-directory-reassignment"


def _real() -> dict:
    """What the real run's lines say (each value read from a verbatim line)."""
    ctl = (REAL / "controller.log").read_text()
    created = re.search(r"new partition faultline-0 .*?replicas=\[3, 1\], directories=\[([-\w]+), ([-\w]+)\]", ctl)
    new_dirs = re.search(r"establishing a new incarnation of broker 1: .*?logDirs=\[([-\w]+)\]", ctl)
    reject = re.search(r"\[(.*?)\] INFO .*Rejecting AlterPartition request from node 3 for faultline-0 because the "
                       r"current partition epoch is (\d+), not (\d+)\.", ctl)
    later = re.search(r"Previous partition: PartitionRegistration\(replicas=\[3, 1\], directories=\[([-\w]+), ([-\w]+)\]", ctl)
    sent = re.search(r"^\[(.*?)\] INFO \[AssignmentsManager id=1\] maybeSendAssignments: sending 4 assignments",
                     (REAL / "broker-1-server.log").read_text(), re.M)
    assert created and new_dirs and reject and later and sent
    assert sent.group(1) < reject.group(1)   # the assignment went out before the release was answered
    return {"dir_a": created.group(1), "dir_x_old": created.group(2), "dir_x_new": new_dirs.group(1),
            "current": int(reject.group(2)), "held": int(reject.group(3)), "after": [later.group(1), later.group(2)]}


def test_the_real_run_states_the_directory_change_before_the_rejection() -> None:
    r = _real()
    assert r["dir_x_old"] != r["dir_x_new"] and r["after"] == [r["dir_a"], r["dir_x_new"]]
    assert (r["held"], r["current"]) == (1, 2)


def _cluster(tmp_path: Path, mv: str, r: dict):
    """The real run's partition: replicas [3, 1] led by 3; broker 1 fenced out of the ISR
    (partition epoch 1); the leader's AlterPartition adding broker 1 at its old epoch is held."""
    c = controller(tmp_path, **{"metadata.version": mv})
    epochs = {b: register(c, b, log_dirs=[d]) for b, d in ((3, r["dir_a"]), (1, r["dir_x_old"]), (2, "y5Vd0a3TQlGd9tYhmXu2bw"))}
    for b in epochs:
        heartbeat(c, b)
    create(c, [3, 1])
    c.fence(1, "session_timeout")
    assert part(c).isr == [3] and part(c).partition_epoch == r["held"]
    held = {3: epochs[3], 1: epochs[1]}
    # broker 1 comes back with its disk replaced: a new incarnation, a new directory.id
    register(c, 1, inc=uuid.uuid4(), log_dirs=[r["dir_x_new"]])
    heartbeat(c, 1)
    return c, held


def test_a_directory_assignment_bumps_the_partition_epoch_and_the_held_request_is_stale(tmp_path: Path) -> None:
    r = _real()
    c, held = _cluster(tmp_path, "4.1", r)
    ps0 = part(c)
    assert ps0.directories == [r["dir_a"], r["dir_x_old"]]       # ClusterControlManager.defaultDir at creation
    resp = assign_dir(c, 1, r["dir_x_new"])
    assert resp.error_code.name == "none"
    assert resp.directories[0].topics[0].partitions[0].error_code.name == "none"
    ps = part(c)
    assert ps.directories == r["after"] and ps.partition_epoch == r["current"]
    assert (ps.isr, ps.leader, ps.leader_epoch) == (ps0.isr, ps0.leader, ps0.leader_epoch)   # nothing else changed
    # the same assignment again changes nothing (PartitionChangeBuilder: a no-op record)
    assign_dir(c, 1, r["dir_x_new"])
    assert part(c).partition_epoch == r["current"]
    _, err, _ = alter(c, 3, held, partition_epoch=r["held"])
    assert err.name == "invalid_update_version"


def test_below_3_7_iv2_there_are_no_directories_and_kip_903_answers(tmp_path: Path) -> None:
    """metadata.version 3.7-IV1 (3.7.0 software): no Directories; AssignReplicasToDirs is
    UNSUPPORTED_VERSION and changes nothing; the held request meets the KIP-903 epoch check."""
    r = _real()
    c, held = _cluster(tmp_path, "3.7-IV1", r)
    assert part(c).directories is None
    assert assign_dir(c, 1, r["dir_x_new"]).error_code.name == "unsupported_version"
    assert part(c).partition_epoch == r["held"]
    _, err, _ = alter(c, 3, held, partition_epoch=r["held"])
    assert err.name == "ineligible_replica"
