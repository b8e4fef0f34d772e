"""Kafka's log statements that carry cluster state, as patterns: one record -> one observation.

Every pattern names the Kafka source file and method whose statement it reads, and the
versions whose wording it matches (the project's Kafka mirror: tags 3.4.0 to 3.8.0, the 3.9
branch, trunk of late 2024 that became 4.0). Where a statement's wording changed, each wording has its own pattern. A record
that matches none is not an error: most of Kafka's log is of no interest here (counted as
``other``). A record that starts like one of these statements but whose fields do not parse
is counted as ``not_understood`` - that is what a new Kafka wording looks like.

An observation is a plain dict: ``kind`` plus the fields the statement gives. Who logged it
(``node``) comes from the statement's log prefix (``[Broker id=1]``, ``[Partition foo-0 broker=1]``,
``[QuorumController id=3000]``, ``[Controller 3000]``...) or, for prefixes without an id
(``[UnifiedLog ...]``, ``[LogLoader ...]``, LogManager), from the host.
"""
from __future__ import annotations

import re
from typing import Any, Callable

Obs = dict[str, Any]

#: log prefixes that name the logging node
_NODE_PREFIXES = (
    re.compile(r"^\[Broker id=(\d+)(?: epoch=\d+)?\] "),                        # StateChangeLogger (broker side)
    re.compile(r"^\[Partition \S+ broker=(\d+)\] "),                             # Partition.scala logIdent
    re.compile(r"^\[ReplicaFetcher replicaId=(\d+), leaderId=-?\d+(?:, fetcherId=\d+)?\] "),  # ReplicaFetcherThread
    re.compile(r"^\[(?:QuorumController id=|Controller )(\d+)\] "),             # QuorumController LogContext (3.5+ / 3.4)
    re.compile(r"^\[BrokerLifecycleManager id=(\d+)\] "),
    re.compile(r"^\[(?:ControllerServer|BrokerServer|KafkaRaftServer) id=(\d+)\] "),
    re.compile(r"^\[RaftManager id=(\d+)\] "),
)
_PREFIX_RE = re.compile(r"^\[[^\]]*\] ")


def node_of(message: str) -> int | None:
    """The node id a message's log prefix names, if any."""
    for rx in _NODE_PREFIXES:
        m = rx.match(message)
        if m:
            return int(m.group(1))
    return None


def strip_prefix(message: str) -> tuple[str, str]:
    """(the ``[...] `` log prefix or "", the message after it)."""
    m = _PREFIX_RE.match(message)
    return (m.group(0), message[m.end():]) if m else ("", message)


def split_tp(tp: str) -> tuple[str, int] | None:
    """``my-topic-12`` -> (``my-topic``, 12): Kafka's TopicPartition.toString is topic-partition."""
    topic, sep, part = tp.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


def int_list(text: str | None) -> list[int] | None:
    """``[1, 2]``, ``1,2``, ``List(1, 2)``, ``Set(1)`` -> [1, 2]; "" or ``[]`` -> []."""
    if text is None:
        return None
    return [int(x) for x in re.findall(r"-?\d+", text)]


def broker_states(text: str) -> tuple[list[int], dict[str, int]] | None:
    """``[BrokerState(brokerId=1, brokerEpoch=-1), ...]`` (AlterPartition v3, KIP-903) -> ids, epochs."""
    pairs = re.findall(r"BrokerState\(brokerId=(-?\d+), brokerEpoch=(-?\d+)\)", text)
    if not pairs:
        return None
    return [int(b) for b, _ in pairs], {b: int(e) for b, e in pairs if int(e) != -1}


def kv(text: str) -> dict[str, str]:
    """``a=1, isr=[1, 2], name='x'`` -> {a: "1", isr: "[1, 2]", name: "x"} (generated toString forms)."""
    out: dict[str, str] = {}
    for m in re.finditer(r"(\w+)=(\[[^\]]*\]|'[^']*'|[^,\)\s]+)", text):
        v = m.group(2)
        out.setdefault(m.group(1), v[1:-1] if v.startswith("'") else v)
    return out


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


#: LeaderRecoveryState (metadata/LeaderRecoveryState.java): RECOVERED=0, RECOVERING=1
_LRS = {"RECOVERED": 0, "RECOVERING": 1}


def _lrs(v: str | None) -> int | None:
    if v is None:
        return None
    return _LRS.get(v.strip(), _int(v))


# ------------------------------------------------------------------------------ controller

# ClusterControlManager.replay(RegisterBrokerRecord): 3.4-3.5 "Registered new broker: {}",
# "Re-registered broker incarnation: {}", "Re-registered broker id {}: {}"; 3.6+ "Replayed initial
# RegisterBrokerRecord for broker {}: {}", "... modifying the registration for broker {}: {}",
# "... establishing a new incarnation of broker {}: {}". The record's generated toString carries
# brokerId, brokerEpoch and fenced.
_REGISTER = re.compile(
    r"^(?:Registered new broker: |Re-registered broker incarnation: |Re-registered broker id \d+: |"
    r"Replayed (?:initial RegisterBrokerRecord|RegisterBrokerRecord modifying the registration|"
    r"RegisterBrokerRecord establishing a new incarnation of) (?:for )?broker \d+: )RegisterBrokerRecord\((.*)\)\.?$", re.S)
_REGISTER_START = ("Registered new broker", "Re-registered broker", "Replayed initial RegisterBrokerRecord",
                   "Replayed RegisterBrokerRecord")

# ReplicationControlManager.maybeFenceOneStaleBroker (3.4+); from 4.0 it names the broker epoch
# it fences: "Fencing broker 0 at epoch 9 because its session has timed out."
_FENCE_TIMEOUT = re.compile(r"^Fencing broker (\d+)(?: at epoch (-?\d+))? because its session has timed out\.$")
# BrokerHeartbeatManager.calculateNextBrokerState (3.4+): a controlled shutdown fences the broker
_FENCE_SHUTDOWN = re.compile(r"^Unfenced broker (\d+) has requested and been granted "
                             r"(a controlled shutdown|an immediate shutdown|fencing)\.?$")
# BrokerHeartbeatManager.calculateNextBrokerState: "it's" in 3.4, "its" from 3.5
_UNFENCE = re.compile(r"^The request from broker (\d+) to unfence has been granted because it has caught up "
                      r"with the offset of it'?s register broker record (-?\d+)\.$")
# ClusterControlManager.replay(FenceBrokerRecord|UnfenceBrokerRecord|BrokerRegistrationChangeRecord), 3.6+
_REG_CHANGE = re.compile(r"^Replayed (FenceBrokerRecord|UnfenceBrokerRecord|BrokerRegistrationChangeRecord) "
                         r"modifying the registration for broker (\d+): \w+\((.*)\)$")
# BrokerLifecycleManager.BrokerRegistrationResponseHandler (broker side, 3.4+)
_REGISTERED_BROKER_SIDE = re.compile(r"^Successfully registered broker (\d+) with broker epoch (-?\d+)$")

# ReplicationControlManager.replay(PartitionRecord): 3.4-3.5 "Created partition {} and {}.",
# 3.6+ "Replayed PartitionRecord for new partition {} and {}." / "... for existing partition {} and {}."
_PARTITION_RECORD = re.compile(
    r"^(?:Created partition|Replayed PartitionRecord for (new|existing) partition) (\S+) with topic ID (\S+) "
    r"and PartitionRegistration\((.*)\)\.?$")
# PartitionRegistration.maybeLogPartitionChange: INFO for unclean changes, DEBUG otherwise (3.4+);
# diff() lists the changed fields as "name: old -> new" joined by ", "
_PARTITION_CHANGE = re.compile(r"^(UNCLEAN )?partition change for (\S+?)(?: with topic ID (\S+))?: (.*)$", re.S)
_DIFF_ITEM = re.compile(r"(\w+): (\[[^\]]*\]|\S+?) -> (\[[^\]]*\]|[^,\s]+)")

# ReplicationControlManager.validateAlterPartitionData (3.4+): the reasons of an AlterPartition
# reject at INFO/ERROR (the leader-epoch ones are DEBUG) and the error each returns
_ALTER_REJECT = re.compile(r"^Rejecting AlterPartition request from node (\d+) for (\S+)-(\d+) because (.*)$", re.S)
#: named groups: ``ineligible``, ``isr`` (the proposed ISR), ``pe`` (a partition epoch the line states)
_REJECT_REASONS: list[tuple[re.Pattern[str], str]] = [
    # 4.3 states the proposal and the controller's current state: "... ineligible replicas [3 (observer)]
    # in the new ISR. Proposed ISR was [BrokerState(...), ...] and current ISR is [1, 2, 4]. Current
    # replica set is [3, 1, 2, 4]. Current partitionEpoch is 15. Current leaderEpoch is 7." The
    # epochs checks come first in validateAlterPartitionData, so the proposal's partition epoch is
    # the current one
    (re.compile(r"^it specified ineligible replicas (?P<ineligible>.*) in the new ISR\. Proposed ISR was (?P<isr>.*) "
                r"and current ISR is \[[^\]]*\]\. Current replica set is \[[^\]]*\]\. Current partitionEpoch is "
                r"(?P<pe>-?\d+)\. Current leaderEpoch is -?\d+\.$", re.S), "INELIGIBLE_REPLICA"),
    (re.compile(r"^it specified ineligible replicas (?P<ineligible>.*) in the new ISR (?P<isr>.*)\.$", re.S),
     "INELIGIBLE_REPLICA"),
    (re.compile(r"^the current partition epoch is (-?\d+), which is greater than the local value (-?\d+)\.$"), "NOT_CONTROLLER"),
    (re.compile(r"^the current leader epoch is (-?\d+), which is greater than the local value (-?\d+)\.$"), "NOT_CONTROLLER"),
    (re.compile(r"^the current partition epoch is (-?\d+), not (?P<pe>-?\d+)\.$"), "INVALID_UPDATE_VERSION"),
    (re.compile(r"^the current leader epoch is (-?\d+), not (-?\d+)\.$"), "FENCED_LEADER_EPOCH"),
    (re.compile(r"^the current leader is (-?\d+)\.$"), "INVALID_REQUEST"),
    (re.compile(r"^it specified an invalid ISR (?P<isr>.*?)(?: that doesn't include itself)?\.$", re.S), "INVALID_REQUEST"),
    (re.compile(r"^the ISR (.*) had more than one replica while the leader was still recovering", re.S), "INVALID_REQUEST"),
    (re.compile(r"^the leader recovery state cannot change from RECOVERED to RECOVERING\.$"), "INVALID_REQUEST"),
]
#: Errors.java codes of the AlterPartition errors above (clients/.../common/protocol/Errors.java)
ERROR_CODES = {"UNKNOWN_TOPIC_OR_PARTITION": 3, "NOT_CONTROLLER": 41, "INVALID_REQUEST": 42,
               "OPERATION_NOT_ATTEMPTED": 55, "FENCED_LEADER_EPOCH": 74, "STALE_BROKER_EPOCH": 77,
               "INVALID_UPDATE_VERSION": 95, "UNKNOWN_TOPIC_ID": 100, "INELIGIBLE_REPLICA": 107,
               "NEW_LEADER_ELECTED": 108}

# QuorumController.QuorumMetaLogListener.handleLeaderChange: 3.4 "... committed offset {}, committed
# epoch {}" (3.4-3.5), "... next write offset {}." (3.6+); and the renounce warning (all versions)
_ACTIVE = re.compile(r"^Becoming the active controller at epoch (\d+)")
_RENOUNCE = re.compile(r"^Renouncing the leadership due to a metadata log event\. We were the leader at epoch (\d+), "
                       r"but in the new epoch (\d+), the leader is (\S+?)\.")
# QuorumController.handleEventException: an event that failed with an unexpected exception makes
# the active controller renounce. 3.3-3.5 (WARN): "{event}: failed with unknown server exception {X} at
# epoch {E} in {N} us.  Renouncing leadership and reverting to the last committed offset {O}."; 3.6+
# (EventHandlerExceptionInfo.failureMessage, INFO "{event}: {message}" for a NotLeaderException or
# UnexpectedBaseOffsetException, or through the non-fatal fault handler, LoggingFaultHandler's ERROR
# "Encountered quorum controller fault: {event}: {message}" for the catch-all): "event failed with {X}
# (treated as {Y}) at epoch {E} in {N} microseconds. Renouncing leadership and reverting to the last
# committed offset {O}." ("event unable to start processing because of {X} ..." when it never ran).
# The line starts with the event's name, so it is found by this mark rather than by its start.
RENOUNCE_MARK = "Renouncing leadership and reverting to the last committed offset"
_RENOUNCE_FAILED = re.compile(
    r"^(?:Encountered quorum controller fault: )?(?P<event>.+?): (?:event failed with|event unable to start "
    r"processing because of|failed with unknown server exception) (?P<exc>[\w$.]+)(?: \(treated as (?P<as>\w+)\))? "
    r"at epoch (?P<epoch>-?\d+)(?: in -?\d+ (?:us|microseconds))?\.\s+" + RENOUNCE_MARK + r" (?P<offset>-?\d+)\.", re.S)

# ------------------------------------------------------------------------------ broker

# Partition.makeLeader (state.change.logger): 3.4-3.5 "... Previous leader epoch was {}.", 3.5+ an
# "(under-min-isr)" slot after the replicas, 3.6+ "Previous leader {} and previous leader epoch was {}."
_LEADER = re.compile(
    r"^Leader (\S+) with topic id (\S+) starts at leader epoch (-?\d+) from offset (-?\d+) with partition epoch "
    r"(-?\d+), high watermark (-?\d+), ISR \[([^\]]*)\], adding replicas \[[^\]]*\] and removing replicas "
    r"\[[^\]]*\]\s*(\(under-min-isr\))?\s*\.")
# Partition.makeFollower (state.change.logger), both wordings of the previous leader
_FOLLOWER = re.compile(
    r"^Follower (\S+) starts at leader epoch (-?\d+) from offset (-?\d+) with partition epoch (-?\d+) and "
    r"high watermark (-?\d+)\. Current leader is (-?\d+)\.")
# Partition.makeLeader / makeFollower when the leader epoch did not change: the partition state
# (LeaderAndIsrPartitionState's generated toString) is the new ISR and partition epoch
_SKIPPED = re.compile(
    r"^Skipped the become-(leader|follower) state change for (\S+) with topic id (\S+) and partition state "
    r"LeaderAndIsrPartitionState\(([^)]*)\) since (it is already (?:the|a) (?:leader|follower)|the (?:leader|follower) is already at a newer)")
# Partition.handleAlterPartitionUpdate (3.4+; from 3.5 an "(under-min-isr)" slot before "and")
_ISR_UPDATED = re.compile(r"^ISR updated to ([\d,]*)\s*(\(under-min-isr\))?\s*and version updated to (-?\d+)$")
# Partition.handleAlterPartitionError: INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED at INFO, others DEBUG
_ALTER_FAILED = re.compile(r"^Failed to alter partition to (.*) since the controller rejected the request with (\w+)\.", re.S)
#: ... and the committed state the leader falls back to (the same line, from 3.3)
_RESET_TO = re.compile(r"reset to the latest committed state CommittedPartitionState\(isr=(?:Set|List)?\(([^)]*)\)")
# Partition.maybeShrinkIsr (3.4+): the leader's proposal, not yet committed. What it needs is the
# two ISRs; the leader's offsets after them are read when the message has them (a quote cut at
# the first sentence, or wrapped onto the next line, still is this statement)
_SHRINKING = re.compile(r"^Shrinking ISR from ([\d,]*) to ([\d,]*)\.(?:\s+Leader: \(highWatermark: (-?\d+), "
                        r"endOffset: (-?\d+)\)\.)?")

# AbstractFetcherThread.maybeTruncateToEpochEndOffsets / truncateToHighWatermark (3.4+)
# ReplicaFetcherThread.truncate (3.4+): a follower cutting below the high watermark it knew
_BELOW_HWM = re.compile(r"^Truncating (\S+) to offset (-?\d+) below high watermark (-?\d+)")
_FETCH_TRUNCATE = re.compile(r"^Truncating partition (\S+) with TruncationState\(offset=(-?\d+), completed=\w+\) "
                             r"due to (leader epoch and offset|local high watermark)")
# AbstractFetcherThread.fetchOffsetAndTruncate (offset out of range): truncate to the leader's end
_RESET_TRUNCATE = re.compile(r"^Reset fetch offset for partition (\S+) from (-?\d+) to current leader's latest offset (-?\d+)")
_RESET_FULLY = re.compile(r"^Truncate fully and reset fetch offset for partition (\S+) from (-?\d+) to the current "
                          r"leader's start offset (-?\d+)")
# UnifiedLog.truncateTo (3.4+): the log's own truncation; prefix [UnifiedLog partition=T-P, dir=D]
_LOG_PREFIX = re.compile(r"^\[(?:UnifiedLog|Log|LogLoader) partition=([^\s,\]]+)(?:, dir=([^\]]*))?\] ")
_TRUNCATE = re.compile(r"^Truncating to offset (-?\d+)$")
_TRUNCATE_NOOP = re.compile(r"^Truncating to (-?\d+) has no effect as the largest offset in the log is (-?\d+)$")
# UnifiedLog.updateHighWatermarkMetadata (3.4+): the high watermark moved down - after a truncation,
# UnifiedLog.truncateTo lowering it to the new log end: the replica's high watermark stood above the
# records it cut (KAFKA-14704's 3.4.0 follower raised it over its divergent tail first)
_HWM_DOWN = re.compile(r"^Non-monotonic update of high watermark from \(offset=(-?\d+)[^)]*\) to \(offset=(-?\d+)")
# LogManager.loadLogs: 3.4 "Attempting recovery for all logs in {} since no clean shutdown file was found",
# 3.5+ "Recovering {n} logs from {} since no clean shutdown file was found" (and the clean forms)
_DIR_UNCLEAN = re.compile(r"^(?:Attempting recovery for all logs in|Recovering \d+ logs from) (\S+) since no clean shutdown file was found")
_DIR_CLEAN = re.compile(r"^Skipping recovery (?:for all logs in|of \d+ logs from) (\S+) since clean shutdown file was found")
# LogLoader.recoverLog (Scala to 3.9, Java in 4.0 where "{}/{}" became one integer division): the
# segments recovered and a corruption cut; before 3.3 the line was only "Recovering unflushed segment
# {baseOffset}" (3.0-3.2 LogLoader.recoverLog), its partition in the [LogLoader partition=...] prefix
_RECOVERING = re.compile(r"^Recovering unflushed segment (-?\d+)(?:\. \S+ recovered for (\S+)\.)?$")
_CORRUPTION = re.compile(r"^Corruption found in segment (-?\d+), ?truncating to offset (-?\d+)")
# LogManager.loadLogs: "Completed load of {log} with {n} segments in {ms}ms (...)"; 3.6+ adds
# ", local-log-start-offset {} and log-end-offset {}"; the log is UnifiedLog.toString
_LOADED = re.compile(r"^Completed load of Log\(dir=([^,]+), (.*?)\) with (\d+) segments")
# LogManager.loadLogs (3.4+): a broker starting; what it finds about a clean shutdown follows
_LOADING = re.compile(r"^Loading logs from log dirs ")
# LogDirFailureChannel.maybeAddOfflineLogDir (ERROR, its message first; 3.4+): a checkpoint that
# cannot be read (CheckpointFileWithFailureHandler.read: "Error while reading checkpoint file
# {path}") or written, or LogManager.loadLogs' IOException ("Error while loading log dir {dir}").
# The dir the channel takes offline: a leader-epoch checkpoint's grandparent
# (LeaderEpochCheckpointFile: file.getParentFile().getParent()), an offset checkpoint's parent
# (OffsetCheckpointFile: file.getParent)
_CKPT_FAILED = re.compile(r"^Error while (reading|writing to) checkpoint file (\S+)")
_DIR_FAILED = re.compile(r"^Error while loading log dir (\S+)")
# A Kafka process starting: Log4jControllerRegistration's line is the first every process writes
# (3.4+); ControllerServer.startup and SharedServer.start name the node. What a controller
# replays after it, until it is caught up, is the metadata log it wrote before.
_PROCESS_START = re.compile(r"^(?:Registered kafka:type=kafka\.Log4jController MBean|Starting controller$|"
                            r"Starting SharedServer$)")
# QuorumController.handleLeaderChange for a standby (3.4+): it knows the active controller
_STANDBY = re.compile(r"^In the new epoch (\d+), the leader is (\S+?)\.$")
# ProcessTerminatingFaultHandler.handleFault (3.4.1+; server-common .../fault/): logged, then
# Exit.halt - e.g. KafkaRaftClientDriver's "Unexpected error in raft IO thread" (RaftIoThread
# before 3.7). The Throwable's toString follows on the next line ("Class: message"); the
# non-fatal LoggingFaultHandler says "Encountered <type> fault", never "fatal".
_FATAL = re.compile(r"^Encountered fatal fault: (.+)$", re.S)
_THROWN = re.compile(r"^[\w.$]+(?:Exception|Error|Throwable)(?:: (.*))?$", re.S)

#: message starts that should have matched a pattern above: a failure to parse is "not understood"
WATCHED = ("Registered new broker", "Re-registered broker", "Replayed initial RegisterBrokerRecord",
           "Replayed RegisterBrokerRecord", "Fencing broker", "Unfenced broker", "The request from broker",
           "Replayed FenceBrokerRecord", "Replayed UnfenceBrokerRecord", "Replayed BrokerRegistrationChangeRecord",
           "Created partition", "Replayed PartitionRecord", "UNCLEAN partition change", "partition change for",
           "Rejecting AlterPartition",
           "Becoming the active controller", "Renouncing the leadership", "Leader ", "Follower ",
           "Skipped the become-", "ISR updated to", "Failed to alter partition", "Shrinking ISR",
           "Truncating partition", "Reset fetch offset", "Truncate fully", "Truncating to",
           "Recovering unflushed segment", "Corruption found in segment", "Completed load of Log",
           "Successfully registered broker", "In the new epoch", "Error while reading checkpoint file",
           "Error while writing to checkpoint file", "Error while loading log dir", "Encountered fatal fault")


def _tp(text: str) -> dict[str, Any] | None:
    tp = split_tp(text)
    return None if tp is None else {"topic": tp[0], "partition": tp[1]}


def _registration(body: str) -> Obs | None:
    f = kv(body)
    b, e = _int(f.get("brokerId")), _int(f.get("brokerEpoch"))
    if b is None or e is None:
        return None
    return {"kind": "registered", "broker": b, "broker_epoch": e, "fenced": f.get("fenced") != "false"}


def _partition_registration(body: str) -> dict[str, Any]:
    f = kv(body)
    return {"leader": _int(f.get("leader")), "leader_epoch": _int(f.get("leaderEpoch")),
            "partition_epoch": _int(f.get("partitionEpoch")), "isr": int_list(f.get("isr")),
            "elr": int_list(f.get("elr")), "leader_recovery_state": _lrs(f.get("leaderRecoveryState"))}


def _diff(body: str) -> dict[str, Any]:
    """PartitionRegistration.diff: only the changed fields, their new values (and whether the
    leader is one of them: a diff naming ``leader`` is a leader change, whatever came before)."""
    new: dict[str, Any] = {}
    for name, _old, val in _DIFF_ITEM.findall(body):
        if name == "leader":
            new["leader_changed"] = True
        if name in ("isr", "elr"):
            new[name] = int_list(val)
        elif name == "leader":
            new["leader"] = _int(val)
        elif name == "leaderEpoch":
            new["leader_epoch"] = _int(val)
        elif name == "partitionEpoch":
            new["partition_epoch"] = _int(val)
        elif name == "leaderRecoveryState":
            new["leader_recovery_state"] = _lrs(val)
    return new


#: every statement above starts with one of these (after its log prefix): a cheap first test,
#: since most of server.log is none of them
_STARTS = WATCHED + ("Attempting recovery", "Skipping recovery", "Recovering ", "Loading logs from log dirs",
                     "Registered kafka:type=kafka.Log4jController", "Starting controller", "Starting SharedServer",
                     "Truncating ", "Non-monotonic update of high watermark")


def parse(message: str, thrown: str = "") -> Obs | None | bool:
    """The observation a message makes (``thrown``: the record's Throwable line, if it logged
    one); None: not one of ours; False: ours but unparsable."""
    prefix, msg = strip_prefix(message)
    if not msg.startswith(_STARTS) and RENOUNCE_MARK not in msg:
        return None
    m = _FATAL.match(msg)
    if m:
        t = _THROWN.match(thrown)
        return {"kind": "fatal_fault", "fault": m.group(1).strip(), "error": (t.group(1) or thrown) if t else thrown}
    m = _LOG_PREFIX.match(prefix) if prefix else None
    log_tp = _tp(m.group(1)) if m else None
    log_dir = m.group(2) if m else None
    for fn in _PARSERS:
        got = fn(msg, prefix, log_tp, log_dir)
        if got is not None:
            return got
    if msg.startswith(WATCHED) or RENOUNCE_MARK in msg:
        return False
    return None


Parser = Callable[[str, str, "dict[str, Any] | None", "str | None"], "Obs | None"]


def _controller(msg: str, prefix: str, log_tp: dict | None, log_dir: str | None) -> Obs | None:
    m = _REGISTER.match(msg)
    if m:
        got = _registration(m.group(1))
        if got is not None:
            got["replayed"] = True      # ClusterControlManager.replay: a record, not a decision
        return got
    m = _FENCE_TIMEOUT.match(msg)
    if m:
        out = {"kind": "fence", "broker": int(m.group(1)), "reason": "session_timeout"}
        if m.group(2) is not None:
            out["broker_epoch"] = int(m.group(2))
        return out
    m = _FENCE_SHUTDOWN.match(msg)
    if m:
        return {"kind": "fence", "broker": int(m.group(1)),
                "reason": "fence_requested" if m.group(2) == "fencing" else "controlled_shutdown"}
    m = _UNFENCE.match(msg)
    if m:
        return {"kind": "unfence", "broker": int(m.group(1))}
    m = _REG_CHANGE.match(msg)
    if m:
        f = kv(m.group(3))
        epoch = _int(f.get("epoch", f.get("brokerEpoch")))
        if m.group(1) == "FenceBrokerRecord":
            return {"kind": "fence", "broker": int(m.group(2)), "broker_epoch": epoch, "reason": None, "replayed": True}
        if m.group(1) == "UnfenceBrokerRecord":
            return {"kind": "unfence", "broker": int(m.group(2)), "broker_epoch": epoch, "replayed": True}
        # BrokerRegistrationFencingChange: FENCE=1, NONE=0, UNFENCE=-1 (metadata/BrokerRegistrationFencingChange.java)
        fenced = _int(f.get("fenced"))
        if fenced == 1:
            return {"kind": "fence", "broker": int(m.group(2)), "broker_epoch": epoch, "reason": None, "replayed": True}
        if fenced == -1:
            return {"kind": "unfence", "broker": int(m.group(2)), "broker_epoch": epoch, "replayed": True}
        return {"kind": "noop"}
    m = _REGISTERED_BROKER_SIDE.match(msg)
    if m:
        return {"kind": "registered", "broker": int(m.group(1)), "broker_epoch": int(m.group(2)), "fenced": True,
                "broker_side": True}
    m = _PARTITION_RECORD.match(msg)
    if m:
        tp = _tp(m.group(2))
        if tp is None:
            return None
        return {"kind": "partition_created" if m.group(1) != "existing" else "partition_state", **tp,
                **_partition_registration(m.group(4)), "observed": "controller", "replayed": True}
    m = _PARTITION_CHANGE.match(msg)
    if m:
        tp = _tp(m.group(2))
        if tp is None:
            return None
        # ReplicationControlManager.replay(PartitionChangeRecord) logs it
        return {"kind": "partition_state", **tp, **_diff(m.group(4)), "unclean": bool(m.group(1)),
                "observed": "controller", "partial": True, "replayed": True}
    m = _ALTER_REJECT.match(msg)
    if m:
        why = m.group(4)
        for rx, err in _REJECT_REASONS:
            r = rx.match(why)
            if r is None:
                continue
            out: Obs = {"kind": "alter_rejected", "topic": m.group(2), "partition": int(m.group(3)),
                        "leader": int(m.group(1)), "error": err, "error_code": ERROR_CODES[err]}
            g = r.groupdict()
            if err == "INELIGIBLE_REPLICA":
                states = broker_states(g["isr"])
                if states is not None:
                    out["new_isr"], out["broker_epochs"] = states
                else:
                    out["new_isr"] = int_list(g["isr"])
                out["ineligible"] = g["ineligible"]
            elif g.get("isr") is not None:
                out["new_isr"] = int_list(g["isr"])     # e.g. KAFKA-15353's re-sent empty ISR "[]"
            if g.get("pe") is not None:
                out["partition_epoch"] = int(g["pe"])     # the one the leader sent
            return out
        return None
    m = _ACTIVE.match(msg)
    if m:
        return {"kind": "controller_active", "controller_epoch": int(m.group(1))}
    m = _STANDBY.match(msg)
    if m:
        return {"kind": "controller_standby", "controller_epoch": int(m.group(1)), "new_controller": _int(m.group(2))}
    m = _RENOUNCE.match(msg)
    if m:
        return {"kind": "controller_renounced", "controller_epoch": int(m.group(1)),
                "new_controller_epoch": int(m.group(2)), "new_controller": _int(m.group(3))}
    m = _RENOUNCE_FAILED.match(msg)
    if m:
        exc = m.group("exc") + (f" (treated as {m.group('as')})" if m.group("as") else "")
        # LoggingFaultHandler's line has no controller prefix, and its logger is not the controller's
        return {"kind": "controller_renounced", "controller_epoch": int(m.group("epoch")),
                "new_controller_epoch": None, "new_controller": None, "role": "controller",
                "reason": f"{m.group('event')}: {exc}", "last_committed_offset": int(m.group("offset"))}
    return None


def _partition_changes(msg: str, prefix: str, log_tp: dict | None, log_dir: str | None) -> Obs | None:
    m = _LEADER.match(msg)
    if m:
        tp = _tp(m.group(1))
        if tp is None:
            return None
        return {"kind": "became_leader", **tp, "leader_epoch": int(m.group(3)), "log_end_offset": int(m.group(4)),
                "partition_epoch": int(m.group(5)), "hwm": int(m.group(6)), "isr": int_list(m.group(7))}
    m = _FOLLOWER.match(msg)
    if m:
        tp = _tp(m.group(1))
        if tp is None:
            return None
        return {"kind": "became_follower", **tp, "leader_epoch": int(m.group(2)), "log_end_offset": int(m.group(3)),
                "partition_epoch": int(m.group(4)), "hwm": int(m.group(5)), "leader": int(m.group(6))}
    m = _SKIPPED.match(msg)
    if m:
        tp = _tp(m.group(2))
        if tp is None:
            return None
        if "newer" in m.group(5):
            return {"kind": "noop"}     # a stale state the replica ignored
        f = kv(m.group(4))
        return {"kind": "partition_state", **tp, "leader": _int(f.get("leader")),
                "leader_epoch": _int(f.get("leaderEpoch")), "partition_epoch": _int(f.get("partitionEpoch")),
                "isr": int_list(f.get("isr")), "leader_recovery_state": _lrs(f.get("leaderRecoveryState")),
                "observed": m.group(1)}
    return None


def _partition_ident(prefix: str) -> dict[str, Any] | None:
    m = re.match(r"^\[Partition (\S+) broker=(\d+)\] $", prefix)
    return _tp(m.group(1)) if m else None


def _alter_results(msg: str, prefix: str, log_tp: dict | None, log_dir: str | None) -> Obs | None:
    tp = _partition_ident(prefix)
    if tp is None:
        return None
    m = _ISR_UPDATED.match(msg)
    if m:
        return {"kind": "alter_accepted", **tp, "isr": int_list(m.group(1)), "partition_epoch": int(m.group(3))}
    m = _ALTER_FAILED.match(msg)
    if m:
        proposed, err = m.group(1), m.group(2)
        sent = re.search(r"sentLeaderAndIsr=LeaderAndIsr\((.*?partitionEpoch=-?\d+)\)", proposed)
        out: Obs = {"kind": "alter_failed", **tp, "error": err, "error_code": ERROR_CODES.get(err)}
        reset = _RESET_TO.search(msg)
        if reset:
            out["committed_isr"] = int_list(reset.group(1))
        if sent:
            body = sent.group(1)
            states = broker_states(body)
            if states is not None:
                out["new_isr"], out["broker_epochs"] = states
            else:
                isr = re.search(r"isr=(?:List|Set)?\(([^)]*)\)", body)
                out["new_isr"] = int_list(isr.group(1)) if isr else None
            pe = re.search(r"partitionEpoch=(-?\d+)", body)
            le = re.search(r"leaderEpoch=(-?\d+)", body)
            out["partition_epoch"] = int(pe.group(1)) if pe else None
            out["leader_epoch"] = int(le.group(1)) if le else None
        return out
    m = _SHRINKING.match(msg)
    if m:
        if m.group(4) is None:
            return {"kind": "noop"}
        return {"kind": "leo", **tp, "log_end_offset": int(m.group(4))}
    return None


def _storage(msg: str, prefix: str, log_tp: dict | None, log_dir: str | None) -> Obs | None:
    if _PROCESS_START.match(msg):
        return {"kind": "process_start"}
    m = _BELOW_HWM.match(msg)
    if m:
        tp = _tp(m.group(1))
        if tp is None:
            return None
        return {"kind": "truncate", **tp, "to_offset": int(m.group(2)), "hwm": int(m.group(3)), "below_hwm": True}
    m = _FETCH_TRUNCATE.match(msg)
    if m:
        tp = _tp(m.group(1))
        if tp is None:
            return None
        return {"kind": "truncate_reason", **tp, "to_offset": int(m.group(2)),
                "reason": "diverging_epoch" if m.group(3).startswith("leader") else "high_watermark"}
    m = _RESET_TRUNCATE.match(msg)
    if m:
        tp = _tp(m.group(1))
        if tp is None:
            return None
        return {"kind": "truncate_reason", **tp, "from_offset": int(m.group(2)), "to_offset": int(m.group(3)),
                "reason": "offset_out_of_range"}
    m = _RESET_FULLY.match(msg)
    if m:
        tp = _tp(m.group(1))
        if tp is None:
            return None
        return {"kind": "truncation", **tp, "from_offset": int(m.group(2)), "to_offset": int(m.group(3)),
                "reason": "offset_out_of_range"}
    if _LOADING.match(msg):
        return {"kind": "log_start"}
    m = _CKPT_FAILED.match(msg)
    if m:
        path = m.group(2).rstrip("/")
        up = 2 if path.rsplit("/", 1)[-1] == "leader-epoch-checkpoint" else 1
        d = path.rsplit("/", up)[0] if path.count("/") >= up else path
        return {"kind": "log_dir_failed", "dir": d or "/", "error": msg.splitlines()[0]}
    m = _DIR_FAILED.match(msg)
    if m:
        return {"kind": "log_dir_failed", "dir": m.group(1), "error": msg.splitlines()[0]}
    m = _DIR_UNCLEAN.match(msg)
    if m:
        return {"kind": "log_dir", "dir": m.group(1), "clean": False}
    m = _DIR_CLEAN.match(msg)
    if m:
        return {"kind": "log_dir", "dir": m.group(1), "clean": True}
    m = _LOADED.match(msg)
    if m:
        f = kv(m.group(2))
        topic, part = f.get("topic"), _int(f.get("partition"))
        if topic is None or part is None:
            return None
        return {"kind": "log_loaded", "topic": topic, "partition": part, "dir": m.group(1),
                "log_start_offset": _int(f.get("logStartOffset")), "log_end_offset": _int(f.get("logEndOffset")),
                "hwm": _int(f.get("highWatermark"))}
    if log_tp is None:
        return None
    m = _TRUNCATE.match(msg)
    if m:
        return {"kind": "truncate", **log_tp, "to_offset": int(m.group(1))}
    m = _TRUNCATE_NOOP.match(msg)
    if m:
        return {"kind": "truncate_noop", **log_tp, "log_end_offset": int(m.group(2)) + 1}
    m = _HWM_DOWN.match(msg)
    if m:
        return {"kind": "hwm_lowered", **log_tp, "from_hwm": int(m.group(1)), "to_hwm": int(m.group(2))}
    m = _RECOVERING.match(msg)
    if m:
        return {"kind": "recovering", **log_tp, "segment": int(m.group(1))}
    m = _CORRUPTION.match(msg)
    if m:
        return {"kind": "corruption", **log_tp, "segment": int(m.group(1)), "to_offset": int(m.group(2))}
    return None


_PARSERS: list[Parser] = [_partition_changes, _alter_results, _storage, _controller]
