"""Kafka's own log4j files as the checker's event source (checkers/kafkalog, docs/kafka-logs.md).

The KIP-903 fixture (fixtures/kafka-logs/kip903-off/) is the kraftsim run of
fixtures/kip903-off.tar.gz written line by line as a Kafka 3.4 KRaft cluster logs those steps
(make_kip903_logs.py says how; every template is a Kafka 3.4.0 statement): the same run.json,
timeline, observer and proxy events, and per host server.log / controller.log /
state-change.log instead of events.jsonl. The history is the run's own, taken from the tarball.
The unclean-election runs (fixtures/unclean-3.4.tar.gz, unclean-4.1.tar.gz) are written the same
way as Kafka 3.4 and 4.1 log them (fixtures/kafka-logs/make_unclean_logs.py).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from checkers import kafkalog
from checkers.kafkalog import log4j, statements
from checkers.kafkalog.assemble import Assembler
from tests.support.tarballs import unpack

FIXTURES = Path(__file__).parent / "fixtures"
KAFKA_RUN = FIXTURES / "kafka-logs" / "kip903-off"

#: event fields that say where or by whom an event was written, not what happened: kraftsim's
#: controller writes a partition change, Kafka's replicas log it as they apply it
_WHERE = {"wall", "node", "role", "host", "source", "line", "candidates"}
#: events Kafka's logs give that this (older) kraftsim run did not write
_EXTRA = {"controller_activated", "became_leader", "leader_isr", "log_dir_loaded"}


def _unpack_kraftsim(dest: Path, name: str = "kip903-off") -> Path:
    rd = dest / "kraftsim"
    rd.mkdir(parents=True)
    return unpack(FIXTURES / f"{name}.tar.gz", rd)


def _kafka_run(dest: Path, kraftsim_dir: Path, name: str = "kip903-off") -> Path:
    """The Kafka-format run directory: the fixture plus the run's own history."""
    rd = dest / "kafka"
    shutil.copytree(FIXTURES / "kafka-logs" / name, rd)
    shutil.copytree(kraftsim_dir / "history", rd / "history")
    return rd


def _kraftsim_events(rd: Path) -> list[dict]:
    out = []
    for p in sorted((rd / "cluster-logs").glob("*/events.jsonl")):
        out += [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
    return sorted(out, key=lambda e: e["wall"])


# ------------------------------------------------------------------ the KIP-903 run, event by event

#: what Kafka's logs of a run cannot state, per fixture (docs/kafka-logs.md, "What Kafka's logs cannot
#: say"): the 4.x run has a partition left without a leader, seen only in its follower's line
#: (no ISR), and a broker started on an emptied dir, whose LogManager says nothing of a clean shutdown
_CANNOT = {"kip903-off": set(), "kip903-on": {("isr_changed", "isr"), ("broker_registered", "clean_shutdown")}}


@pytest.mark.parametrize("name", ["kip903-off", "kip903-on"])
def test_kip903_events_from_kafka_logs_equal_kraftsims(tmp_path, name):
    """kip903-off as Kafka 3.4 logs it (the loss), kip903-on as Kafka 4.x logs it (KIP-903's
    INELIGIBLE_REPLICA, the newer wordings)."""
    ks = _kraftsim_events(_unpack_kraftsim(tmp_path, name))
    stats = kafkalog.Stats()
    run = FIXTURES / "kafka-logs" / name
    got = kafkalog.read_cluster_logs(run / "cluster-logs", stats=stats)
    assert stats.not_understood == 0 and stats.problems == [], stats
    assert stats.other >= 5                 # the noise lines were read and passed over
    mine = [e for e in got if e["event"] not in _EXTRA]
    assert [e["event"] for e in mine] == [e["event"] for e in ks]
    compared = 0
    for k, m in zip(ks, mine):
        # a replica logs a controller decision milliseconds after the controller made it
        assert abs(k["wall"] - m["wall"]) < 0.01, (k, m)
        for f in (set(k) & set(m)) - _WHERE:
            if k[f] is None or m[f] is None or k[f] == {} and m[f] is None:
                continue
            assert m[f] == k[f], f"{k['event']} at {k['wall']:.3f}: {f} {m[f]!r} from Kafka's logs, {k[f]!r} from kraftsim"
            compared += 1
    # not vacuous: the fields attribution and the stories read are all there
    need = {"leader_elected": ("leader", "leader_epoch", "partition_epoch", "isr", "reason"),
            "isr_changed": ("leader", "leader_epoch", "partition_epoch", "isr", "reason"),
            "alter_partition": ("leader", "new_isr", "partition_epoch", "accepted"),
            "truncation": ("from_offset", "to_offset", "reason"),
            "recovery": ("log_end_offset", "recovery_point", "reason"),
            "broker_registered": ("broker", "broker_epoch", "clean_shutdown"),
            "broker_fenced": ("broker", "broker_epoch", "reason"), "broker_unfenced": ("broker", "broker_epoch")}
    missing = set()
    for e in mine:
        for f in need.get(e["event"], ()):
            if e.get(f) is None:
                missing.add((e["event"], f))
    assert missing == _CANNOT[name]
    assert compared > 100
    if name == "kip903-off":
        # the new leader's side of the fatal election: broker 2 took over with an empty log
        bl = [e for e in got if e["event"] == "became_leader" and e["broker"] == 2]
        assert bl and bl[0]["log_end_offset"] == 0 and bl[0]["leader_epoch"] == 1
    else:
        # KIP-903's reject: the controller's line and the leader's make one event with both halves
        rej = [e for e in got if e["event"] == "alter_partition" and e["accepted"] is False]
        assert [(e["error"], e["broker_epochs"], e["partition_epoch"]) for e in rej] == \
            [("INELIGIBLE_REPLICA", {"1": 0, "2": 10}, 1)]
    # every event names the line it came from
    for e in got:
        line = (run / e["source"]).read_text().splitlines()[e["line"] - 1]
        assert line.startswith("["), (e, line)


# ------------------------------------------------------------------ one statement per wording

_TID = "gP3Yt7ZQR3mXrPq9l0b0aw"
_REG_36 = ("RegisterBrokerRecord(brokerId=2, isMigratingZkBroker=false, incarnationId=u9Jm1m2hRtKj8F4bTq1y8w, brokerEpoch=42, "
           "endPoints=[BrokerEndpoint(name='PLAINTEXT', host='kafka-2', port=9092, securityProtocol=0)], "
           "features=[BrokerFeature(name='metadata.version', minSupportedVersion=1, maxSupportedVersion=19)], rack=null, "
           "fenced=true, inControlledShutdown=false, logDirs=[AAAAAAAAAAAAAAAAAAAAAA])")

WORDINGS = [
    # ClusterControlManager.replay(RegisterBrokerRecord), 3.6+
    ("[QuorumController id=3000] Replayed RegisterBrokerRecord establishing a new incarnation of broker 2: " + _REG_36,
     {"kind": "registered", "broker": 2, "broker_epoch": 42, "fenced": True}),
    ("[QuorumController id=3000] Replayed initial RegisterBrokerRecord for broker 2: " + _REG_36,
     {"kind": "registered", "broker": 2, "broker_epoch": 42}),
    # 3.4/3.5
    ("[Controller 3000] Re-registered broker incarnation: " + _REG_36, {"kind": "registered", "broker": 2}),
    # ClusterControlManager.replay(BrokerRegistrationChangeRecord / FenceBrokerRecord / UnfenceBrokerRecord), 3.6+
    ("[QuorumController id=3000] Replayed BrokerRegistrationChangeRecord modifying the registration for broker 2: "
     "BrokerRegistrationChangeRecord(brokerId=2, brokerEpoch=42, fenced=-1, inControlledShutdown=0, logDirs=[])",
     {"kind": "unfence", "broker": 2, "broker_epoch": 42}),
    ("[QuorumController id=3000] Replayed BrokerRegistrationChangeRecord modifying the registration for broker 2: "
     "BrokerRegistrationChangeRecord(brokerId=2, brokerEpoch=42, fenced=1, inControlledShutdown=0, logDirs=[])",
     {"kind": "fence", "broker": 2, "broker_epoch": 42}),
    ("[QuorumController id=3000] Replayed FenceBrokerRecord modifying the registration for broker 2: "
     "FenceBrokerRecord(id=2, epoch=42)", {"kind": "fence", "broker": 2, "broker_epoch": 42}),
    # BrokerHeartbeatManager: "its" from 3.5, "it's" in 3.4
    ("[QuorumController id=3000] The request from broker 2 to unfence has been granted because it has caught up with "
     "the offset of its register broker record 42.", {"kind": "unfence", "broker": 2}),
    ("[QuorumController id=3000] Unfenced broker 2 has requested and been granted a controlled shutdown.",
     {"kind": "fence", "broker": 2, "reason": "controlled_shutdown"}),
    # ReplicationControlManager.replay(PartitionRecord), 3.6+ (with directories and ELR, KIP-858/KIP-966)
    (f"[QuorumController id=3000] Replayed PartitionRecord for new partition my-topic-3 with topic ID {_TID} and "
     "PartitionRegistration(replicas=[1, 2, 3], directories=[AAAAAAAAAAAAAAAAAAAAAA, AAAAAAAAAAAAAAAAAAAAAA, "
     "AAAAAAAAAAAAAAAAAAAAAA], isr=[1, 2, 3], removingReplicas=[], addingReplicas=[], elr=[], lastKnownElr=[], leader=1, "
     "leaderRecoveryState=RECOVERED, leaderEpoch=0, partitionEpoch=0).",
     {"kind": "partition_created", "topic": "my-topic", "partition": 3, "leader": 1, "isr": [1, 2, 3], "elr": [],
      "leader_epoch": 0, "partition_epoch": 0, "leader_recovery_state": 0}),
    # PartitionRegistration.maybeLogPartitionChange, unclean (INFO), 3.4 and 3.7+ diff orders
    (f"[QuorumController id=3000] UNCLEAN partition change for foo-0 with topic ID {_TID}: isr: [1] -> [2], "
     "leader: 1 -> 2, leaderRecoveryState: RECOVERED -> RECOVERING, leaderEpoch: 3 -> 4, partitionEpoch: 5 -> 6",
     {"kind": "partition_state", "unclean": True, "leader": 2, "isr": [2], "leader_epoch": 4, "partition_epoch": 6,
      "leader_recovery_state": 1}),
    (f"[QuorumController id=3000] UNCLEAN partition change for foo-0 with topic ID {_TID}: isr: [1] -> [2], "
     "leader: 1 -> 2, leaderRecoveryState: RECOVERED -> RECOVERING, leaderEpoch: 3 -> 4, elr: [1] -> [], "
     "partitionEpoch: 5 -> 6", {"kind": "partition_state", "leader": 2, "elr": [], "partition_epoch": 6}),
    # ReplicationControlManager.validateAlterPartitionData: KIP-903's reject, 3.5+ (BrokerState) and 3.4 (ids)
    ("[QuorumController id=3000] Rejecting AlterPartition request from node 1 for foo-0 because it specified "
     "ineligible replicas [2 (broker epoch mismatch: requested=10 VS expected=13)] in the new ISR "
     "[BrokerState(brokerId=1, brokerEpoch=-1), BrokerState(brokerId=2, brokerEpoch=10)].",
     {"kind": "alter_rejected", "leader": 1, "error": "INELIGIBLE_REPLICA", "error_code": 107, "new_isr": [1, 2],
      "broker_epochs": {"2": 10}}),
    ("[Controller 3000] Rejecting AlterPartition request from node 1 for foo-0 because it specified ineligible "
     "replicas [2 (fenced)] in the new ISR [1, 2].",
     {"kind": "alter_rejected", "error": "INELIGIBLE_REPLICA", "new_isr": [1, 2]}),
    ("[Controller 3000] Rejecting AlterPartition request from node 1 for foo-0 because the current partition epoch "
     "is 7, not 6.", {"kind": "alter_rejected", "error": "INVALID_UPDATE_VERSION", "partition_epoch": 6}),
    # QuorumController.handleLeaderChange: 3.6+ and 3.4 wordings
    ("[QuorumController id=3001] Becoming the active controller at epoch 7, next write offset 1234.",
     {"kind": "controller_active", "controller_epoch": 7}),
    ("[Controller 3001] Becoming the active controller at epoch 7, committed offset 10, committed epoch 6",
     {"kind": "controller_active", "controller_epoch": 7}),
    ("[QuorumController id=3001] Renouncing the leadership due to a metadata log event. We were the leader at epoch 7, "
     "but in the new epoch 8, the leader is 3002. Reverting to last stable offset 1200.",
     {"kind": "controller_renounced", "controller_epoch": 7, "new_controller": 3002}),
    # QuorumController.handleEventException: the line starts with the failed event's name. Rendered from
    # 3.4.0/3.5.0's log.warn and 3.6.0's EventHandlerExceptionInfo.failureMessage (its INFO line for a
    # NotLeaderException, and the catch-all through LoggingFaultHandler, without the controller prefix)
    ("[QuorumController id=3001] maybeFenceReplicas: failed with unknown server exception NotLeaderException at epoch 7 "
     "in 1523 us.  Renouncing leadership and reverting to the last committed offset 1200.",
     {"kind": "controller_renounced", "controller_epoch": 7, "last_committed_offset": 1200,
      "reason": "maybeFenceReplicas: NotLeaderException"}),
    ("[QuorumController id=3001] alterPartition: event failed with NotLeaderException (treated as "
     "NotControllerException) at epoch 7 in 40 microseconds. Renouncing leadership and reverting to the last "
     "committed offset 1200.",
     {"kind": "controller_renounced", "controller_epoch": 7, "last_committed_offset": 1200,
      "reason": "alterPartition: NotLeaderException (treated as NotControllerException)"}),
    ("Encountered quorum controller fault: handleCommit[baseOffset=1201]: event failed with NullPointerException "
     "(treated as UnknownServerException) at epoch 7 in 40 microseconds. Renouncing leadership and reverting to the "
     "last committed offset 1200.",
     {"kind": "controller_renounced", "controller_epoch": 7, "role": "controller",
      "reason": "handleCommit[baseOffset=1201]: NullPointerException (treated as UnknownServerException)"}),
    ("[QuorumController id=3001] registerBroker: event unable to start processing because of InterruptedException "
     "(treated as UnknownServerException) at epoch 7. Renouncing leadership and reverting to the last committed "
     "offset 1200.", {"kind": "controller_renounced", "controller_epoch": 7, "last_committed_offset": 1200}),
    # LogLoader.recoverLog before 3.3: the bare wording, the partition in the prefix
    ("[LogLoader partition=__consumer_offsets-48, dir=/var/lib/kafka/data-0/kafka-log2] Recovering unflushed segment 0",
     {"kind": "recovering", "topic": "__consumer_offsets", "partition": 48, "segment": 0}),
    # Partition.makeLeader: 3.6+ wording (under-min-isr, previous leader) and the one without the flag
    (f"[Broker id=1] Leader foo-0 with topic id Some({_TID}) starts at leader epoch 5 from offset 100 with partition "
     "epoch 9, high watermark 90, ISR [1], adding replicas [] and removing replicas [] (under-min-isr). Previous leader "
     "Some(3) and previous leader epoch was 4.",
     {"kind": "became_leader", "leader_epoch": 5, "log_end_offset": 100, "partition_epoch": 9, "hwm": 90, "isr": [1]}),
    (f"[Broker id=1] Leader foo-0 with topic id Some({_TID}) starts at leader epoch 5 from offset 100 with partition "
     "epoch 9, high watermark 90, ISR [1,2], adding replicas [] and removing replicas [] . Previous leader None and "
     "previous leader epoch was 4.", {"kind": "became_leader", "isr": [1, 2]}),
    ("[Broker id=2] Follower foo-0 starts at leader epoch 5 from offset 80 with partition epoch 9 and high watermark "
     "70. Current leader is 1. Previous leader Some(1) and previous leader epoch was 5.",
     {"kind": "became_follower", "leader": 1, "leader_epoch": 5, "log_end_offset": 80}),
    # Partition.handleAlterPartitionUpdate: 3.5+ puts "(under-min-isr)" or an extra space before "and"
    ("[Partition foo-0 broker=1] ISR updated to 1  and version updated to 7",
     {"kind": "alter_accepted", "isr": [1], "partition_epoch": 7}),
    ("[Partition foo-0 broker=1] ISR updated to 1 (under-min-isr) and version updated to 7",
     {"kind": "alter_accepted", "isr": [1], "partition_epoch": 7}),
    # Partition.handleAlterPartitionError, 3.5+ (isrWithBrokerEpoch) and 3.4 (isr=List)
    ("[Partition foo-0 broker=1] Failed to alter partition to PendingExpandIsr(newInSyncReplicaId=2, "
     "sentLeaderAndIsr=LeaderAndIsr(leader=1, leaderEpoch=0, isrWithBrokerEpoch=List(BrokerState(brokerId=1, "
     "brokerEpoch=-1), BrokerState(brokerId=2, brokerEpoch=10)), leaderRecoveryState=RECOVERED, partitionEpoch=1), "
     "leaderRecoveryState=RECOVERED, lastCommittedState=CommittedPartitionState(isr=Set(1), "
     "leaderRecoveryState=RECOVERED)) since the controller rejected the request with INELIGIBLE_REPLICA. Partition "
     "state has been reset to the latest committed state CommittedPartitionState(isr=Set(1), "
     "leaderRecoveryState=RECOVERED).",
     {"kind": "alter_failed", "error": "INELIGIBLE_REPLICA", "new_isr": [1, 2], "broker_epochs": {"2": 10},
      "partition_epoch": 1, "leader_epoch": 0}),
    ("[Partition foo-0 broker=1] Failed to alter partition to PendingExpandIsr(newInSyncReplicaId=2, "
     "sentLeaderAndIsr=LeaderAndIsr(leader=1, leaderEpoch=0, isr=List(1, 2), leaderRecoveryState=RECOVERED, "
     "partitionEpoch=1), leaderRecoveryState=RECOVERED, lastCommittedState=CommittedPartitionState(isr=Set(1), "
     "leaderRecoveryState=RECOVERED)) since the controller rejected the request with INELIGIBLE_REPLICA. Partition "
     "state has been reset to the latest committed state CommittedPartitionState(isr=Set(1), leaderRecoveryState=RECOVERED).",
     {"kind": "alter_failed", "new_isr": [1, 2], "partition_epoch": 1}),
    # LogManager.loadLogs: 3.5+ wordings (the load summary's offsets: 3.6+)
    ("Recovering 3 logs from /data since no clean shutdown file was found", {"kind": "log_dir", "clean": False}),
    ("Skipping recovery of 3 logs from /data since clean shutdown file was found", {"kind": "log_dir", "clean": True}),
    (f"Completed load of Log(dir=/data/foo-0, topicId={_TID}, topic=foo, partition=0, highWatermark=5, "
     "lastStableOffset=5, logStartOffset=0, logEndOffset=9) with 1 segments, local-log-start-offset 0 and "
     "log-end-offset 9 in 12ms (1/1 completed in /data)",
     {"kind": "log_loaded", "topic": "foo", "partition": 0, "log_end_offset": 9, "log_start_offset": 0}),
    # LogDirFailureChannel.maybeAddOfflineLogDir: the dir a checkpoint's failure takes offline
    ("Error while reading checkpoint file /data/foo-0/leader-epoch-checkpoint",
     {"kind": "log_dir_failed", "dir": "/data"}),
    ("Error while writing to checkpoint file /data/recovery-point-offset-checkpoint",
     {"kind": "log_dir_failed", "dir": "/data"}),
    ("Error while loading log dir /data", {"kind": "log_dir_failed", "dir": "/data"}),
    # LogLoader (Java, 4.0): integer division prints one number
    ("[LogLoader partition=foo-0, dir=/data] Recovering unflushed segment 0. 0 recovered for foo-0.",
     {"kind": "recovering", "segment": 0}),
    ("[LogLoader partition=foo-0, dir=/data] Corruption found in segment 0, truncating to offset 57",
     {"kind": "corruption", "to_offset": 57}),
    # AbstractFetcherThread: offset out of range, and the high-watermark truncation
    ("[ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] Reset fetch offset for partition foo-0 from 120 to current "
     "leader's latest offset 100", {"kind": "truncate_reason", "from_offset": 120, "to_offset": 100,
                                    "reason": "offset_out_of_range"}),
    ("[ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] Truncating partition foo-0 with TruncationState(offset=90, "
     "completed=true) due to local high watermark 90", {"kind": "truncate_reason", "reason": "high_watermark"}),
    ("[UnifiedLog partition=foo-0, dir=/data] Truncating to 100 has no effect as the largest offset in the log is 99",
     {"kind": "truncate_noop", "log_end_offset": 100}),
]


@pytest.mark.parametrize("message,want", WORDINGS, ids=[f"w{i}" for i in range(len(WORDINGS))])
def test_each_wording_parses(message, want):
    got = statements.parse(message)
    assert isinstance(got, dict), got
    for k, v in want.items():
        assert got.get(k) == v, (k, got)


def test_a_changed_wording_is_counted_not_raised(tmp_path):
    """A statement we read, in a wording we do not know, counts as not understood."""
    h = tmp_path / "cluster-logs" / "b1"
    h.mkdir(parents=True)
    (h / "state-change.log").write_text(
        "[2024-05-01 12:00:00,000] INFO [Broker id=1] Leader foo-0 with topic id None begins leading at epoch 5 "
        "(state.change.logger)\n"
        "[2024-05-01 12:00:00,001] INFO [Broker id=1] Shrinking ISR from 1,2 to 1 because of reasons (kafka.cluster.Partition)\n")
    st = kafkalog.Stats()
    assert kafkalog.read_cluster_logs(tmp_path / "cluster-logs", stats=st) == []
    assert st.records == 2 and st.not_understood == 2


# ------------------------------------------------------------------ log4j files

def test_log4j_time_zone_stack_traces_and_torn_lines(tmp_path):
    h = tmp_path / "cluster-logs" / "broker-1"
    h.mkdir(parents=True)
    (h / "kafka-logs.json").write_text(json.dumps({"node_id": 1, "timezone": "+02:00"}))
    (h / "server.log.2024-05-01-11").write_text(
        "partial line from before the roll\n"
        "[2024-05-01 11:59:59,999] WARN [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Error in response for "
        "fetch request (type=FetchRequest, replicaId=1) (kafka.server.ReplicaFetcherThread)\n"
        "java.io.IOException: Connection to 2 was disconnected before the response was read\n"
        "\tat org.apache.kafka.clients.NetworkClientUtils.sendAndReceive(NetworkClientUtils.java:99)\n")
    (h / "server.log").write_bytes(
        b"[2024-05-01 12:00:00,500] INFO [UnifiedLog partition=foo-0, dir=/data] Truncating to offset 7 (kafka.log.UnifiedLog)\n"
        b"\xff\xfe not utf-8 at all\n"
        b"[2024-05-01 12:00:01,0")
    rs = log4j.ReadStats()
    files = log4j.log_files(h)
    assert [f.name for f in files] == ["server.log.2024-05-01-11", "server.log"]
    recs = [r for f in files for r in log4j.read_records(f, log4j.parse_zone("+02:00"), rs)]
    assert [r.logger for r in recs] == ["kafka.server.ReplicaFetcherThread", "kafka.log.UnifiedLog"]
    assert recs[1].wall == pytest.approx(1714557600.5)       # 12:00:00.5 at +02:00 = 10:00:00.5 UTC
    assert rs.orphan == 1 and rs.continuation == 4     # two trace lines, the bad bytes, the torn record
    st = kafkalog.Stats()
    ev = kafkalog.read_cluster_logs(tmp_path / "cluster-logs", stats=st)
    assert [(e["event"], e["broker"], e["to_offset"], e["wall"]) for e in ev] == [("truncation", 1, 7, 1714557600.5)]
    assert st.problems == []


def test_strimzi_layout_is_read_as_kafkas_own():
    """Strimzi's broker pattern ``%d{ISO8601} %p %m (%c) [%t]``: the date has no brackets and the
    thread follows the logger. The corpus source's real lines (strimzi-7484-3.2-log-recovery) give
    their wall times, loggers and messages as Kafka's own layout would, and a stack trace in that
    layout still belongs to the record before it."""
    f = (Path(__file__).parent / "kafka_logs_real" / "strimzi-7484-3.2-log-recovery" / "cluster-logs"
         / "strimzi-kafka" / "server.log")
    rs = log4j.ReadStats()
    recs = log4j.read_records(f, log4j.parse_zone("UTC"), rs)
    assert [r.logger for r in recs] == ["kafka.log.LogManager", "kafka.log.LogLoader", "kafka.log.UnifiedLog$",
                                        "kafka.log.UnifiedLog$"]
    assert recs[0].wall == pytest.approx(1665787920.539) and recs[1].wall == pytest.approx(1665787920.541)
    assert recs[1].message == ("[LogLoader partition=__consumer_offsets-48, dir=/var/lib/kafka/data-0/kafka-log2] "
                               "Recovering unflushed segment 0")
    assert rs.no_logger == 0 and rs.orphan == 0


def test_strimzi_layout_stack_trace_and_threads(tmp_path):
    h = tmp_path / "cluster-logs" / "kafka-0"
    h.mkdir(parents=True)
    (h / "server.log").write_text(
        "2024-05-01 12:00:00,500 INFO [UnifiedLog partition=foo-0, dir=/data] Truncating to offset 7 "
        "(kafka.log.UnifiedLog) [ReplicaFetcherThread-0-2]\n"
        "2024-05-01 12:00:01,000 WARN [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Error in fetch "
        "(kafka.server.ReplicaFetcherThread) [ReplicaFetcherThread-0-2]\n"
        "java.io.IOException: Connection to 2 was disconnected before the response was read\n"
        "\tat org.apache.kafka.clients.NetworkClientUtils.sendAndReceive(NetworkClientUtils.java:99)\n"
        "[2024-05-01 12:00:02,000] INFO [Partition foo-0 broker=1] ISR updated to 1,2 and version updated to 3 "
        "(kafka.cluster.Partition)\n")
    rs = log4j.ReadStats()
    recs = log4j.read_records(h / "server.log", log4j.parse_zone(None), rs)
    assert [(r.level, r.logger) for r in recs] == [("INFO", "kafka.log.UnifiedLog"),
                                                   ("WARN", "kafka.server.ReplicaFetcherThread"),
                                                   ("INFO", "kafka.cluster.Partition")]
    assert recs[0].wall == pytest.approx(1714564800.5) and rs.continuation == 2 and rs.no_logger == 0
    ev = kafkalog.read_cluster_logs(tmp_path / "cluster-logs")
    assert [(e["event"], e.get("to_offset")) for e in ev][:1] == [("truncation", 7)]


def test_a_controller_renouncing_after_a_failed_event_is_an_event(tmp_path):
    """QuorumController.handleEventException: the line starts with the failed event's name (3.6+,
    rendered from EventHandlerExceptionInfo.failureMessage; no real 3.4+ line was found, docs/kafka-logs.md),
    and the catch-all comes through LoggingFaultHandler without the controller's prefix."""
    h = tmp_path / "cluster-logs" / "controller-3001"
    h.mkdir(parents=True)
    (h / "kafka-logs.json").write_text(json.dumps({"node_id": 3001, "timezone": "UTC"}))
    (h / "controller.log").write_text(
        "[2024-05-01 12:00:00,000] INFO [QuorumController id=3001] Becoming the active controller at epoch 7, next "
        "write offset 1234. (org.apache.kafka.controller.QuorumController)\n"
        "[2024-05-01 12:00:05,000] INFO [QuorumController id=3001] alterPartition: event failed with "
        "NotLeaderException (treated as NotControllerException) at epoch 7 in 40 microseconds. Renouncing "
        "leadership and reverting to the last committed offset 1300. (org.apache.kafka.controller.QuorumController)\n")
    (h / "server.log").write_text(
        "[2024-05-01 12:00:09,000] ERROR Encountered quorum controller fault: handleCommit[baseOffset=1301]: event "
        "failed with NullPointerException (treated as UnknownServerException) at epoch 9 in 40 microseconds. "
        "Renouncing leadership and reverting to the last committed offset 1300. "
        "(org.apache.kafka.server.fault.LoggingFaultHandler)\n"
        "java.lang.NullPointerException\n")
    st = kafkalog.Stats()
    ev = kafkalog.read_cluster_logs(tmp_path / "cluster-logs", stats=st)
    got = [(e["event"], e["node"], e["role"], e["controller_epoch"], e.get("reason"), e.get("last_committed_offset"))
           for e in ev]
    assert got == [("controller_activated", 3001, "controller", 7, None, None),
                   ("controller_renounced", 3001, "controller", 7,
                    "alterPartition: NotLeaderException (treated as NotControllerException)", 1300),
                   ("controller_renounced", 3001, "controller", 9,
                    "handleCommit[baseOffset=1301]: NullPointerException (treated as UnknownServerException)", 1300)]
    assert st.not_understood == 0


def test_unknown_time_zone_is_one_line_and_reads_as_utc(tmp_path):
    h = tmp_path / "cluster-logs" / "b1"
    h.mkdir(parents=True)
    (h / "kafka-logs.json").write_text(json.dumps({"timezone": "Mars/Olympus"}))
    (h / "server.log").write_text("[2024-05-01 12:00:00,000] INFO [Partition foo-0 broker=1] ISR updated to 1,2 and "
                                  "version updated to 3 (kafka.cluster.Partition)\n")
    st = kafkalog.Stats()
    ev = kafkalog.read_cluster_logs(tmp_path / "cluster-logs", stats=st)
    assert len(st.problems) == 1 and "Mars/Olympus" in st.problems[0] and "\n" not in st.problems[0]
    assert ev[0]["wall"] == pytest.approx(1714564800.0) and ev[0]["event"] == "alter_partition"


def test_binary_garbage_is_counted_never_raised(tmp_path):
    h = tmp_path / "cluster-logs" / "b1"
    h.mkdir(parents=True)
    (h / "controller.log").write_bytes(bytes(range(256)) * 50 + b"\n[9999-99-99 99:99:99,999] INFO x (y)\n")
    st = kafkalog.Stats()
    assert kafkalog.read_cluster_logs(tmp_path / "cluster-logs", stats=st) == []
    assert st.records == 0 and st.not_records >= 1


def test_a_host_with_events_jsonl_is_not_read_twice(tmp_path):
    h = tmp_path / "cluster-logs" / "broker-1"
    h.mkdir(parents=True)
    (h / "events.jsonl").write_text("")
    (h / "server.log").write_text("[2024-05-01 12:00:00,000] INFO [Partition foo-0 broker=1] ISR updated to 1,2 and "
                                  "version updated to 3 (kafka.cluster.Partition)\n")
    assert kafkalog.host_dirs(tmp_path / "cluster-logs") == []


# ------------------------------------------------------------------ reasons the logs imply

def _obs(wall, kind, node=1000, **f):
    return {"kind": kind, "wall": wall, "node": node, "role": "broker", "host": "h", "source": "s", "line": 1, **f}


def test_fence_explains_the_next_election_and_the_controller_reject_absorbs_the_brokers():
    a = Assembler()
    a.add(_obs(0.0, "registered", broker=1, broker_epoch=5, fenced=True))
    a.add(_obs(0.1, "unfence", broker=1))
    a.add(_obs(0.2, "partition_created", topic="t", partition=0, leader=1, leader_epoch=0, partition_epoch=0,
               isr=[1, 2], elr=None, leader_recovery_state=0))
    a.add(_obs(5.0, "fence", broker=1, reason="session_timeout"))
    a.add(_obs(5.01, "became_leader", node=2, topic="t", partition=0, leader_epoch=1, log_end_offset=40,
               partition_epoch=1, hwm=40, isr=[2]))
    a.add(_obs(6.0, "alter_rejected", topic="t", partition=0, leader=2, error="INELIGIBLE_REPLICA", error_code=107,
               new_isr=[2, 1], broker_epochs={"1": 5}))
    a.add(_obs(6.01, "alter_failed", node=2, topic="t", partition=0, error="INELIGIBLE_REPLICA", error_code=107,
               new_isr=[2, 1], partition_epoch=1))
    kinds = [(e["event"], e.get("reason")) for e in a.events]
    assert kinds == [("broker_registered", None), ("broker_unfenced", None), ("leader_elected", "initial"),
                     ("broker_fenced", "session_timeout"), ("became_leader", None), ("leader_elected", "leader_fenced"),
                     ("leader_isr", None), ("alter_partition", None), ("leader_isr", None)]
    a.events = [e for e in a.events if e["event"] != "leader_isr"]
    assert a.events[1]["broker_epoch"] == 5 and a.events[3]["broker_epoch"] == 5
    rej = a.events[-1]
    assert (rej["accepted"], rej["error"], rej["leader"], rej["partition_epoch"], rej["broker_epochs"]) == \
        (False, "INELIGIBLE_REPLICA", 2, 1, {"1": 5})


def test_a_leader_cut_from_the_controller_keeps_acting_on_its_own_isr():
    """A zombie leader: the controller fences broker 1 (its heartbeats stopped arriving) and
    writes the ISR without it, but broker 1, cut from the controller only, never hears of it
    and keeps answering acks=all by the ISR it was last told (Partition.checkEnoughReplicasReachOffset
    reads the leader's own partitionState). Its log says so: it became leader with ISR [1,2,3]
    and then "ISR updated to 1,2,3". ``leader_isr`` carries that view, and the checker's
    ISR timeline (checkers/invariants.py) takes it over the controller's: the size stays 3,
    so its acks are not judged below min ISR 2."""
    from checkers.invariants import isr_timelines
    a = Assembler()
    a.add(_obs(0.0, "partition_created", topic="t", partition=0, leader=1, leader_epoch=0, partition_epoch=0,
               isr=[1, 2, 3], elr=None, leader_recovery_state=0))
    a.add(_obs(0.01, "became_leader", node=1, topic="t", partition=0, leader_epoch=0, log_end_offset=0,
               partition_epoch=0, hwm=0, isr=[1, 2, 3]))
    a.add(_obs(3.0, "alter_accepted", node=1, topic="t", partition=0, isr=[1, 2, 3], partition_epoch=1))
    a.add(_obs(6.0, "fence", broker=1, reason="session_timeout"))
    a.add(_obs(6.0, "partition_state", topic="t", partition=0, leader=2, leader_epoch=1, partition_epoch=2,
               isr=[2], leader_recovery_state=0, observed="follower"))
    mine = [(e["t"], e["broker"], e["maximal_isr"]) for e in
            ({**e, "t": e["wall"]} for e in a.events if e["event"] == "leader_isr")]
    assert mine == [(0.01, 1, [1, 2, 3]), (3.0, 1, [1, 2, 3])]
    events = [{**e, "t": e["wall"]} for e in a.events]
    tl = isr_timelines(events, [], use_events=True)[("t", 0)]
    assert list(tl[1]) == [3, 3]            # the leader's view; the controller's [2] is not used


# ------------------------------------------------------------------ the checker on both run directories

def _lost_categories(rd: Path) -> dict[tuple, frozenset]:
    df = pd.read_parquet(rd / "anomalies" / "lost_write.parquet")
    cats = ("faults", "elections", "isr_changes", "alter_partition", "broker_events", "removed_by")
    return {(r.topic, int(r.partition), int(r.offset), r.value): frozenset(c for c in cats if len(r[c]) > 0)
            for _, r in df.iterrows()}


@pytest.mark.timeout(1500)
def test_checker_tells_the_same_story_from_kafka_logs(spark, tmp_path):
    from checkers.job import check_run
    ks_dir = _unpack_kraftsim(tmp_path)
    kafka_dir = _kafka_run(tmp_path, ks_dir)
    vk = check_run(ks_dir, spark=spark)
    vl = check_run(kafka_dir, spark=spark)
    assert vl["counts"]["lost_write"] == vk["counts"]["lost_write"] > 0
    # the same mechanism label, from kraftsim's events and from Kafka's log4j files
    assert vk["mechanisms"] and set(vl["mechanisms"]) == set(vk["mechanisms"])
    assert vl["mechanisms"] == vk["mechanisms"]
    assert [(s["topic"], s["partition"], s["mechanism"]) for s in vl["stories"]] == \
        [(s["topic"], s["partition"], s["mechanism"]) for s in vk["stories"]]
    assert "unexplained" not in vl["mechanisms"]
    # told in the same steps (wipe, registration, the AlterPartition, the kill, the election, the
    # truncation, what was lost) and ending with the same loss
    for sk, sl in zip(vk["stories"], vl["stories"]):
        assert sl["mechanisms"] == sk["mechanisms"]
        assert [x["kind"] for x in sl["steps"]] == [x["kind"] for x in sk["steps"]]
        assert sl["lost"] == sk["lost"] and sl["sentences"][-1] == sk["sentences"][-1]
        assert all(x["event"]["source"] for x in sl["steps"] if x["kind"] not in ("fault", "lost"))
    # the same attribution categories for every lost write
    ck, cl = _lost_categories(ks_dir), _lost_categories(kafka_dir)
    assert ck.keys() == cl.keys() and len(ck) == vk["counts"]["lost_write"]
    diff = {k: (ck[k], cl[k]) for k in ck if ck[k] != cl[k]}
    assert not diff, list(diff.items())[:3]
    assert all("removed_by" in c and "alter_partition" in c and "elections" in c for c in cl.values())
    # the report's election and ISR tables read the same events from Kafka's logs as from kraftsim's
    from harness.report.inputs import load_run as report_inputs
    ek, el = report_inputs(ks_dir).events, report_inputs(kafka_dir).events

    def changes(ev):
        rows = ev[ev["event"].isin(["leader_elected", "isr_changed"])]
        return sorted({(r.event, int(r.partition_epoch), int(r.leader)) for r in rows.itertuples()})
    assert changes(el) and changes(el) == changes(ek)


# ------------------------------------------------------------------ the unclean election, as Kafka 3.4 and 4.1 log it

#: the unclean-election runs (campaigns/unclean-election.yaml with unclean.leader.election.enable=true):
#: fixtures/unclean-<v>.tar.gz is the kraftsim run at that metadata.version, fixtures/kafka-logs/unclean-<v>/
#: the same run as Kafka <v> logs it (make_unclean_logs.py)
UNCLEAN = ["unclean-3.4", "unclean-4.1"]


@pytest.mark.parametrize("name", UNCLEAN)
def test_the_unclean_election_from_kafka_logs_is_kraftsims(tmp_path, name):
    """The steps the story is told from, field by field: the election outside the ISR (its
    partition and leader epochs, the ISR of one out-of-sync replica, RECOVERING), the new leader's
    log as it took over, the truncations of the old ISR members back to it and their recoveries."""
    ks = _kraftsim_events(_unpack_kraftsim(tmp_path, name))
    st = kafkalog.Stats()
    got = kafkalog.read_cluster_logs(FIXTURES / "kafka-logs" / name / "cluster-logs", stats=st)
    assert st.not_understood == 0 and st.problems == [], st

    def pick(events, kind, **want):
        return [e for e in events if e["event"] == kind and all(e.get(k) == v for k, v in want.items())]
    (uk,) = pick(ks, "leader_elected", reason="unclean")
    (ul,) = pick(got, "leader_elected", reason="unclean")
    assert abs(uk["wall"] - ul["wall"]) < 0.01
    for f in ("leader", "leader_epoch", "partition_epoch", "isr", "leader_recovery_state"):
        assert ul[f] == uk[f], (f, ul[f], uk[f])
    assert ul["leader_recovery_state"] == 1 and ul["source"].endswith("controller/controller.log")
    bk, bl = pick(ks, "became_leader", broker=uk["leader"], leader_epoch=uk["leader_epoch"]), \
        pick(got, "became_leader", broker=uk["leader"], leader_epoch=uk["leader_epoch"])
    assert [(e["log_end_offset"], e["hwm"]) for e in bl] == [(e["log_end_offset"], e["hwm"]) for e in bk]
    for kind, fields in (("truncation", ("from_offset", "to_offset", "reason")),
                         ("recovery", ("log_end_offset", "recovery_point", "reason"))):
        mk = sorted((e["node"], *(e[f] for f in fields)) for e in pick(ks, kind))
        ml = sorted((e["broker"], *(e[f] for f in fields)) for e in pick(got, kind))
        assert mk and ml == mk, (kind, ml, mk)
    # the RECOVERING leader's own AlterPartition marks it RECOVERED
    (rk,) = pick(ks, "isr_changed", leader_recovery_state=0, partition_epoch=uk["partition_epoch"] + 1)
    (rl,) = pick(got, "isr_changed", partition_epoch=uk["partition_epoch"] + 1)
    assert (rl["reason"], rl["isr"], rl["leader_recovery_state"]) == (rk["reason"], rk["isr"], 0)
    # it is the controller's UNCLEAN line that says so: without it the new leader's own line
    # (leader epoch, ISR of itself) tells of an election, not of an unclean one
    cut = tmp_path / "cut" / "cluster-logs"
    shutil.copytree(FIXTURES / "kafka-logs" / name / "cluster-logs", cut)
    ctl = cut / "controller" / "controller.log"
    ctl.write_text("".join(x for x in ctl.read_text().splitlines(True) if "UNCLEAN partition change" not in x))
    (el,) = pick(kafkalog.read_cluster_logs(cut), "leader_elected", partition_epoch=uk["partition_epoch"])
    assert el["leader"] == uk["leader"] and el["reason"] != "unclean"


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("name", UNCLEAN)
def test_checker_tells_the_unclean_story_from_kafka_logs(spark, tmp_path, name):
    """The same mechanisms, story and attribution from Kafka's logs as from kraftsim's events, and
    the story allowed by the topic's setting: unclean.leader.election.enable=true."""
    from checkers.job import check_run
    ks_dir = _unpack_kraftsim(tmp_path, name)
    kafka_dir = _kafka_run(tmp_path, ks_dir, name)
    vk = check_run(ks_dir, spark=spark)
    vl = check_run(kafka_dir, spark=spark)
    assert vl["counts"]["lost_write"] == vk["counts"]["lost_write"] > 0
    assert set(vk["mechanisms"]) == {"unclean_election"} and vl["mechanisms"] == vk["mechanisms"]
    assert [(s["topic"], s["partition"], s["mechanism"], s["allowed_by"]) for s in vl["stories"]] == \
        [(s["topic"], s["partition"], s["mechanism"], s["allowed_by"]) for s in vk["stories"]] == \
        [("faultline", 0, "unclean_election", "unclean.leader.election.enable=true")]
    (sk,), (sl,) = vk["stories"], vl["stories"]
    assert [x["kind"] for x in sl["steps"]] == [x["kind"] for x in sk["steps"]]
    assert sl["lost"] == sk["lost"] and sl["sentences"][-1] == sk["sentences"][-1]
    el = next(x for x in sl["steps"] if x["kind"] == "election")
    line = (kafka_dir / el["event"]["source"]).read_text().splitlines()[el["event"]["line"] - 1]
    assert "UNCLEAN partition change for faultline-0" in line, line
    ck, cl = _lost_categories(ks_dir), _lost_categories(kafka_dir)
    assert ck.keys() == cl.keys() and len(ck) == vk["counts"]["lost_write"]
    diff = {k: (ck[k], cl[k]) for k in ck if ck[k] != cl[k]}
    assert not diff, list(diff.items())[:3]
    assert all("elections" in c and "faults" in c for c in cl.values())


# ------------------------------------------------------------------ collection from the hosts (harness/cluster.py)

def test_collect_kafka_logs_from_hosts(tmp_path):
    """Three lab hosts on the local transport, no event log: one names its log dir and zone only
    on its JVM command line (as kafka-run-class.sh does), one in the inventory, one nowhere."""
    import signal
    import textwrap
    import time
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from groundwork.transport.local import kill_process_group
    from harness.cluster import Cluster
    from harness.inventory import load_inventory

    now = time.time()
    d1, d2 = tmp_path / "kafka-1" / "logs", tmp_path / "kafka-2" / "logs"
    d1.mkdir(parents=True)
    d2.mkdir(parents=True)
    hour = datetime.fromtimestamp(now, ZoneInfo("Europe/Berlin")).strftime("%Y-%m-%d-%H")
    (d1 / "server.log").write_text("[2024-05-01 12:00:00,000] INFO [Partition foo-0 broker=1] ISR updated to 1,2 and "
                                   "version updated to 3 (kafka.cluster.Partition)\n")
    (d1 / f"server.log.{hour}").write_text("[2024-05-01 11:00:00,000] INFO [Controller 1] something (x.Y)\n")
    (d1 / "server.log.2020-01-01-00").write_text("an hour long before the run\n")
    (d1 / "state-change.log").write_text("")
    # Kafka 4.0's log4j2.yaml rolls state-change.log to stage-change.log.<hour>
    (d1 / f"stage-change.log.{hour}").write_text("[2024-05-01 11:00:00,000] INFO [Broker id=1] something (x.Y)\n")
    (d1 / "stage-change.log.2020-01-01-00").write_text("an hour long before the run\n")
    (d1 / "controller.log").write_text("")
    (d1 / "kafka-request.log").write_text("not ours\n")
    (d2 / "server.log").write_text("[2024-05-01 12:00:00,000] INFO [UnifiedLog partition=foo-0, dir=/d] Truncating to "
                                   "offset 7 (kafka.log.UnifiedLog)\n")
    py = sys_executable()
    hosts = {
        1: f"{{kafka_node_id: 1, kafka_service: {{command: \"{py} -c 'import time; time.sleep(600)' "
           f"-Dkafka.logs.dir={d1} -Duser.timezone=Europe/Berlin\", pidfile: {tmp_path}/b1.pid, log: {tmp_path}/b1.out}}}}",
        2: f"{{kafka_node_id: 2, kafka_log_dir: {d2}, kafka_log_timezone: '+05:30', "
           f"kafka_service: {{command: 'sleep 600', pidfile: {tmp_path}/b2.pid}}}}",
        3: f"{{kafka_node_id: 3, kafka_service: {{command: 'sleep 600', pidfile: {tmp_path}/b3.pid}}}}",
    }
    inv = tmp_path / "inv.yaml"
    inv.write_text(textwrap.dedent("""
        all:
          vars: {faultline_transport: local, kafka_bootstrap: "127.0.0.1:1"}
          children:
            brokers:
              hosts:
        """) + "".join(f"        broker-{i}: {h}\n" for i, h in hosts.items()))
    cluster = Cluster.from_inventory(load_inventory(inv))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"started_wall": now - 5, "wall_at_t0": now - 5}))
    try:
        for n in cluster.nodes.values():
            n.start_service()
        deadline = time.monotonic() + 10
        while not all(n.service_pids() for n in cluster.nodes.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        problems = cluster.collect_logs(run_dir)
    finally:
        for n in cluster.nodes.values():
            for pid in n.service_pids():
                kill_process_group(pid, signal.SIGKILL)
    cl = run_dir / "cluster-logs"
    assert sorted(p.name for p in (cl / "broker-1").iterdir()) == sorted(
        ["controller.log", "kafka-logs.json", "server.log", f"server.log.{hour}", "state-change.log",
         f"stage-change.log.{hour}", "b1.out"])
    meta1 = json.loads((cl / "broker-1" / "kafka-logs.json").read_text())
    assert meta1["node_id"] == 1 and meta1["timezone"] == "Europe/Berlin"
    assert meta1["files"]["server"] == f"{d1}/server.log"
    assert meta1["collected"][f"stage-change.log.{hour}"] == f"{d1}/stage-change.log.{hour}"
    meta2 = json.loads((cl / "broker-2" / "kafka-logs.json").read_text())
    assert meta2["timezone"] == "+05:30" and (cl / "broker-2" / "server.log").exists()
    # broker-2 has no controller.log / state-change.log: said, not fatal; broker-3 has nothing to collect
    assert any("broker-2" in p and "state-change.log not found" in p for p in problems), problems
    assert any(p.startswith("broker-3: no event log and no Kafka log dir") for p in problems), problems
    assert all("\n" not in p for p in problems)
    ev = [(e["host"], e["event"], e["wall"]) for e in kafkalog.read_cluster_logs(cl)]
    assert ("broker-1", "alter_partition", pytest.approx(1714557600.0)) in ev       # 12:00 CEST
    assert ("broker-2", "truncation", pytest.approx(1714545000.0)) in ev            # 12:00 +05:30
    # the leader's answer from the controller is no election: the state before it is unknown here
    assert ("broker-1", "isr_changed", pytest.approx(1714557600.0)) in ev


def sys_executable() -> str:
    import sys
    return sys.executable


@pytest.mark.parametrize("var,value,want", [
    ("kafka_log_timezone", "'Mars/Olympus'", "want +HHMM, +HH:MM, UTC or an IANA name"),
    ("kafka_log_files", "{server: /x/server.log, gc: /x/gc.log}", "kafka_log_files.gc"),
])
def test_inventory_rejects_bad_kafka_log_vars(tmp_path, var, value, want):
    from groundwork.config import ConfigError
    from harness.inventory import load_inventory
    inv = tmp_path / "inv.yaml"
    inv.write_text("all:\n  vars: {faultline_transport: local, kafka_bootstrap: '127.0.0.1:1'}\n  children:\n"
                   "    brokers:\n      hosts:\n"
                   f"        b1: {{kafka_node_id: 1, {var}: {value}, kafka_service: {{systemd: kafka}}}}\n")
    with pytest.raises(ConfigError) as ei:
        load_inventory(inv)
    msg = str(ei.value)
    assert want in msg and "\n" not in msg.strip(), msg


# ------------------------------------------------------------------ order across files when clocks tie

def test_a_registration_tie_across_files_follows_the_broker_epochs(tmp_path):
    """The bitnami-3.7 corpus source's lines (tests/checkers/kafka_logs_real/), without the docker
    compose prefix, in the files Kafka's log4j config sends them to: the broker's answer for epoch
    31 and the controller's record of epoch 32 carry the same millisecond. Broker epochs are
    metadata offsets, so 31 came first; the broker epoch must run 30, 31, 32 and never back."""
    h = tmp_path / "cluster-logs" / "kafka-1"
    h.mkdir(parents=True)
    reg = ("[QuorumController id=0] Replayed RegisterBrokerRecord modifying the registration for broker 0: "
           "RegisterBrokerRecord(brokerId=0, isMigratingZkBroker=false, incarnationId=KEy_3lnCREO8_HvGOHb9jA, "
           "brokerEpoch={e}, endPoints=[BrokerEndpoint(name='PLAINTEXT', host='0868aaa976bd', port=9092, "
           "securityProtocol=0)], features=[BrokerFeature(name='metadata.version', minSupportedVersion=1, "
           "maxSupportedVersion=19)], rack=null, fenced=true, inControlledShutdown=false, "
           "logDirs=[HyCjphIex5ZBIzvhgimqaw]) (org.apache.kafka.controller.ClusterControlManager)")
    (h / "controller.log").write_text(
        f"[2024-06-09 07:41:17,900] INFO {reg.format(e=31)}\n[2024-06-09 07:41:17,927] INFO {reg.format(e=32)}\n")
    (h / "server.log").write_text(
        "[2024-06-09 07:41:17,927] INFO [BrokerLifecycleManager id=0] Successfully registered broker 0 with broker "
        "epoch 31 (kafka.server.BrokerLifecycleManager)\n"
        "[2024-06-09 07:41:17,953] INFO [BrokerLifecycleManager id=0] Successfully registered broker 0 with broker "
        "epoch 32 (kafka.server.BrokerLifecycleManager)\n")
    ev = kafkalog.read_cluster_logs(tmp_path / "cluster-logs")
    assert [(e["event"], e["broker_epoch"]) for e in ev] == [("broker_registered", 31), ("broker_registered", 32)]


def test_a_standby_controller_replays_as_state_until_it_knows_the_leader():
    """QuorumController.handleLeaderChange tells a standby who leads ("In the new epoch E, the
    leader is L."); the records it replayed before are state, those after are live."""
    a = Assembler()
    a.add(_obs(0.0, "process_start", node=3001))
    a.add(_obs(0.1, "registered", node=3001, broker=1, broker_epoch=5, fenced=True, replayed=True))
    a.add(_obs(0.2, "unfence", node=3001, broker=1, broker_epoch=5, replayed=True))
    a.add(_obs(0.3, "controller_standby", node=3001, controller_epoch=4, new_controller=3000))
    a.add(_obs(9.0, "fence", node=3001, broker=1, broker_epoch=5, reason=None, replayed=True))
    assert [(e["event"], e["broker_epoch"]) for e in a.events] == [("broker_fenced", 5)]


def test_a_record_written_twice_by_two_appenders_is_read_once(tmp_path):
    """A logger given its own appender besides the root logger's, both writing to one file, puts
    every record there twice, back to back (the observer-matrix-4.3.1 corpus source). Two
    rejections of different partitions in the same millisecond stay two."""
    from checkers.kafkalog.log4j import ReadStats, parse_zone, read_records
    rej = ("[2024-05-01 12:00:00,100] INFO [QuorumController id=1] Rejecting AlterPartition request from node 2 for "
           "{tp} because it specified ineligible replicas [3 (fenced)] in the new ISR [BrokerState(brokerId=2, "
           "brokerEpoch=7), BrokerState(brokerId=3, brokerEpoch=9)]. (org.apache.kafka.controller.ReplicationControlManager)\n")
    h = tmp_path / "cluster-logs" / "controller"
    h.mkdir(parents=True)
    (h / "server.log").write_text(rej.format(tp="a-0") * 2 + rej.format(tp="b-0"))
    rs = ReadStats()
    assert len(read_records(h / "server.log", parse_zone(None), rs)) == 2 and rs.repeated == 1
    ev = kafkalog.read_cluster_logs(tmp_path / "cluster-logs")
    assert [(e["event"], e["topic"], e["accepted"]) for e in ev] == [("alter_partition", "a", False),
                                                                     ("alter_partition", "b", False)]


def test_a_torn_leader_epoch_checkpoint_at_start_is_a_log_dir_offline(tmp_path):
    """Kafka 3.7's lines when a broker's load finds a leader-epoch checkpoint of zeros
    (CheckpointFileWithFailureHandler.read → LogDirFailureChannel.maybeAddOfflineLogDir, then
    LogManager.handleLogDirFailure halting): one log_dir_offline per dir and process start, as
    kraftsim writes it, whatever else the channel logs for the same dir."""
    h = tmp_path / "cluster-logs" / "kafka-2"
    h.mkdir(parents=True)
    (h / "kafka-logs.json").write_text(json.dumps({"node_id": 2, "timezone": "UTC"}))
    start = ("[2024-05-01 12:00:0{s},000] INFO Loading logs from log dirs ArrayBuffer(/data) "
             "(kafka.log.LogManager)\n")
    failed = ("[2024-05-01 12:00:0{s},100] ERROR Error while reading checkpoint file /data/foo-0/leader-epoch-checkpoint "
              "(org.apache.kafka.storage.internals.log.LogDirFailureChannel)\n"
              "java.io.IOException: Malformed line in checkpoint file [/data/foo-0/leader-epoch-checkpoint]: \0\0\0\0\n"
              "\tat org.apache.kafka.server.common.CheckpointFile$CheckpointReadBuffer.read(CheckpointFile.java:162)\n"
              "[2024-05-01 12:00:0{s},200] ERROR Error while reading checkpoint file /data/foo-1/leader-epoch-checkpoint "
              "(org.apache.kafka.storage.internals.log.LogDirFailureChannel)\n"
              "[2024-05-01 12:00:0{s},900] FATAL Shutdown broker because all log dirs in /data have failed "
              "(kafka.log.LogManager)\n")
    (h / "server.log").write_text(start.format(s=1) + failed.format(s=1) + start.format(s=5) + failed.format(s=5))
    st = kafkalog.Stats()
    ev = [e for e in kafkalog.read_cluster_logs(tmp_path / "cluster-logs", stats=st) if e["event"] == "log_dir_offline"]
    assert [(e["node"], e["log_dir"]) for e in ev] == [(2, "/data"), (2, "/data")]
    assert "leader-epoch-checkpoint" in ev[0]["error"] and st.not_understood == 0
