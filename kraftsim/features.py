"""Which Kafka behaviours are in force: the ONE place where every kraftsim gate is declared.

Kafka switches behaviour two ways, and kraftsim models both:

- **software** (``kafka.version``): most fixes are code changes that apply whatever the
  metadata.version - KAFKA-15583's high-watermark rule is one; a cluster upgraded to 3.9
  software that still runs metadata.version 3.4 (the commonest state after an upgrade) has it;
- **protocol** (``metadata.version``): a wire or record format the whole cluster must agree on
  (server-common ``MetadataVersion.java``): KIP-903's Fetch replica epochs, ELR. Such a gate
  needs the software that knows the format *and* the feature level (kind ``both``), or the
  feature level alone where every software able to run that level has the code.

``kafka.version`` defaults to the release that introduced the metadata.version: x.y.0 for any
x.y-IVn (every IV of a release line first ships in its .0 release; an IV of a release is never
older than that release's software). So ``metadata.version: 3.4`` alone means a 3.4.0 cluster,
and the gates read exactly as kraftsim read metadata.version alone before. A kafka.version older
than that release is refused: software cannot run a metadata.version it does not know.

Each :class:`Gate` says Kafka's name for the behaviour, its kind, the version range(s) in which
it is on, the Kafka source it follows (file/method + commit and first release), and the config
key that may override it for experiments. :func:`derive` decides every gate; ``Features``
exposes them as attributes (``features.kip903``) for the hot paths, and ``describe()`` is what
the run records (``features.json``, the controller's ``features`` event)::

    {"kafka.version": "3.9.0", "kafka.version.default": false, "metadata.version": "3.4-IV0",
     "timing": "fast",
     "gates": {"kip903": {"on": false, "decided_by": "metadata.version", "kind": "both",
                          "kafka_name": ..., "kafka.version": ">= 3.5.0",
                          "metadata.version": ">= 3.5-IV1", "cite": ...}, ...}}

``decided_by`` names what decided the gate's value: ``kafka.version`` or ``metadata.version``
when that version alone did (the other was in range, or the gate reads only one), ``both``
when both versions were needed (an on ``both`` gate, or both out of range), or the overriding
config key. To model another version-dependent behaviour (a bug present in some releases,
a fix from another), add a ``Gate`` to ``GATES`` and read ``features.<name>`` where the rule
lives; nothing else needs to change.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

from kraftsim.versions import (LATEST_IV, KafkaVersion, MetadataVersion, format_kafka_version,  # noqa: F401
                               format_metadata_version, min_metadata_version, parse_kafka_version,
                               parse_metadata_version, release_of)

IBP_3_2_IV0: MetadataVersion = (3, 2, 0)
IBP_3_3_IV1: MetadataVersion = (3, 3, 1)
IBP_3_5_IV1: MetadataVersion = (3, 5, 1)
IBP_3_6_IV0: MetadataVersion = (3, 6, 0)
IBP_3_7_IV0: MetadataVersion = (3, 7, 0)
IBP_3_7_IV2: MetadataVersion = (3, 7, 2)
IBP_4_0_IV1: MetadataVersion = (4, 0, 1)
IBP_4_1_IV0: MetadataVersion = (4, 1, 0)


# ------------------------------------------------------------------------------------ gates

Kind = Literal["software", "protocol", "both"]


@dataclass(frozen=True)
class Range:
    """A half-open version range: ``since`` <= v < ``before`` (either end may be open)."""
    since: tuple[int, int, int] | None = None
    before: tuple[int, int, int] | None = None

    def __contains__(self, v: tuple[int, int, int]) -> bool:
        return (self.since is None or v >= self.since) and (self.before is None or v < self.before)

    def text(self, fmt: Any) -> str:
        parts = ([f">= {fmt(self.since)}"] if self.since else []) + ([f"< {fmt(self.before)}"] if self.before else [])
        return " and ".join(parts) or "any"


@dataclass(frozen=True)
class Gate:
    """One version-dependent Kafka behaviour.

    ``software``: the kafka.version range in which the behaviour is on (software and both);
    ``protocol``: the metadata.version range (protocol and both); ``combine`` for ``both``:
    ``all`` = needs both (a feature level the code must also know), ``any`` = either suffices
    (e.g. old software that always did something newer software does only at old levels).
    """
    name: str
    kafka_name: str
    kind: Kind
    cite: str
    software: Range | None = None
    protocol: Range | None = None
    combine: Literal["all", "any"] = "all"
    override: str | None = None

    def decide(self, kv: KafkaVersion, mv: MetadataVersion) -> tuple[bool, str]:
        """(on, decided_by) from the two versions, before any override."""
        s = kv in self.software if self.software is not None else None
        p = mv in self.protocol if self.protocol is not None else None
        if self.kind == "software":
            return bool(s), "kafka.version"
        if self.kind == "protocol":
            return bool(p), "metadata.version"
        on = (s and p) if self.combine == "all" else (s or p)
        if s == p:
            return bool(on), "both"
        # the versions disagree: the one whose value equals the outcome decided it
        return bool(on), ("kafka.version" if s == on else "metadata.version")

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "kafka_name": self.kafka_name}
        if self.software is not None:
            out["kafka.version"] = self.software.text(format_kafka_version)
        if self.protocol is not None:
            out["metadata.version"] = self.protocol.text(format_metadata_version)
        if self.kind == "both":
            out["combine"] = self.combine
        out["cite"] = self.cite
        return out


#: Every gate kraftsim has, in the order the fidelity table lists them (docs/kraftsim.md).
GATES: tuple[Gate, ...] = (
    Gate("kip903", "KIP-903 replica epochs (MetadataVersion.IBP_3_5_IV1, fetchRequestVersion 15)", "both",
         "server-common/.../MetadataVersion.java fetchRequestVersion (IBP_3_5_IV1); core Partition.scala "
         "isBrokerEpochIsrEligible; ReplicationControlManager.ineligibleReplicasForIsr - KAFKA-14617 "
         "79b5f7f1ce2, 8c88cdb7186, d5e216d6183, first 3.5.0",
         software=Range(since=(3, 5, 0)), protocol=Range(since=IBP_3_5_IV1), override="kip903.enabled"),
    Gate("alter_partition_v3", "AlterPartition v3 with NewIsrWithEpochs (AlterPartitionRequest.json validVersions 0-3)",
         "software",
         "clients/.../AlterPartitionRequest.java Builder and AlterPartitionRequest.json (validVersions 0-2 up to "
         "3.4.x, 0-3 from 3.5.0): a broker builds v3, a controller advertises v3 (ControllerServer's "
         "SimpleApiVersionManager: every version of the schema, whatever the metadata.version); the version "
         "sent is the highest both know, negotiated per connection by NetworkClient from the controller's "
         "ApiVersions; core Partition.scala addBrokerEpochToIsr - KAFKA-14617 8c88cdb7186 / d5e216d6183, first 3.5.0",
         software=Range(since=(3, 5, 0))),
    Gate("alter_partition_build_not_idempotent",
         "AlterPartitionRequest.Builder.build below v3 empties NewIsrWithEpochs (a rebuilt request has an empty ISR)",
         "software",
         "clients/.../AlterPartitionRequest.java Builder.build(version < 3): NewIsrWithEpochs moved into NewIsr "
         "and cleared, so the channel's re-send of the same builder (NodeToControllerRequestThread.handleResponse: "
         "disconnect or NOT_CONTROLLER -> requestQueue.putFirst; NetworkClient.doSend builds again) carries "
         "NewIsr = [] - 3.5.0 and 3.5.1; fixed by KAFKA-15353 6f55160175a (first 3.5.2), bee6c41ff87 (3.6.0), "
         "b41b2dfcf2f (trunk, 3.7.0)",
         software=Range(since=(3, 5, 0), before=(3, 5, 2))),
    Gate("leader_epoch_bump_on_isr_shrink", "MetadataVersion.isLeaderEpochBumpRequiredOnIsrShrink", "both",
         "metadata/.../PartitionChangeBuilder.java triggerLeaderEpochBumpIfNeeded: software before 3.6 "
         "bumps on every ISR shrink; from KAFKA-15021 8ad0ed3e618 (first 3.6.0) only below IBP_3_6_IV0",
         software=Range(before=(3, 6, 0)), protocol=Range(before=IBP_3_6_IV0), combine="any",
         override="isr.shrink.leader.epoch.bump"),
    Gate("leader_recovery", "KIP-704 LeaderRecoveryState (MetadataVersion.isLeaderRecoverySupported)", "both",
         "server-common/.../MetadataVersion.java isLeaderRecoverySupported (IBP_3_2_IV0); PartitionChangeBuilder "
         "tryElection: an unclean leader starts RECOVERING - KAFKA-13587 52621613fd3, first 3.2.0",
         software=Range(since=(3, 2, 0)), protocol=Range(since=IBP_3_2_IV0)),
    Gate("hwm_requires_min_isr", "Partition.maybeIncrementLeaderHW returns early while isUnderMinIsr", "software",
         "core/.../cluster/Partition.scala maybeIncrementLeaderHW - KAFKA-15583 edc7e10a745, first 3.7.0 "
         "(not on 3.6.x)",
         software=Range(since=(3, 7, 0)), override="hwm.min.isr.enabled"),
    Gate("effective_min_isr", "min.insync.replicas capped at the replication factor (effectiveMinIsr)", "software",
         "core/.../cluster/Partition.scala effectiveMinIsr - KAFKA-15583 edc7e10a745, first 3.7.0 (before: the "
         "raw config in checkEnoughReplicasReachOffset / appendRecordsToLeader); controller "
         "ReplicationControlManager.getTopicEffectiveMinIsr - KAFKA-15581 af747fbfed7, first 3.7.0",
         software=Range(since=(3, 7, 0))),
    Gate("isr_expansion_unsynchronised",
         "Partition.updateFollowerFetchState without leaderIsrUpdateLock (ISR expansion reads Replica.stateSnapshot "
         "unsynchronised)", "software",
         "core/.../cluster/Partition.scala 3.5.0-3.6.2: updateFollowerFetchState -> Replica.updateFetchState takes "
         "no lock, so maybeExpandIsr's checks (canAddReplicaToIsr / isReplicaIsrEligible, isFollowerInSync) and "
         "prepareIsrExpand -> addBrokerEpochToIsr read the replica's state at different moments; fixed by "
         "KAFKA-15221 d46781d4db3 (inReadLock(leaderIsrUpdateLock) around updateFetchStateOrThrow), first 3.7.0, "
         "not on 3.5.x / 3.6.x; before 3.5.0 no broker epoch is read (KIP-903)",
         software=Range(since=(3, 5, 0), before=(3, 7, 0))),
    Gate("fetch_fences_stale_replica_epoch", "Replica.updateFetchStateOrThrow (stale broker epoch fenced)",
         "software",
         "core/.../cluster/Replica.scala updateFetchStateOrThrow, Partition.updateFollowerFetchState - "
         "KAFKA-15221 d46781d4db3, first 3.7.0 (not on 3.5.x / 3.6.x)",
         software=Range(since=(3, 7, 0))),
    Gate("elr", "KIP-966 Eligible Leader Replicas (eligible.leader.replicas.version)", "both",
         "MetadataVersion.isElrSupported (IBP_4_0_IV1 on trunk); EligibleLeaderReplicasVersion: opt-in on 4.0, "
         "the default feature level for new clusters from 4.1 (IBP_4_1_IV0); code from KAFKA-15581 "
         "af747fbfed7 (3.7.0, behind unstable MVs until 4.0)",
         software=Range(since=(4, 0, 0)), protocol=Range(since=IBP_4_1_IV0),
         override="eligible.leader.replicas.version"),
    Gate("unclean_shutdown_handler", "ReplicationControlManager.handleBrokerUncleanShutdown (3.8-3.9)", "software",
         "ClusterControlManager.registerBroker -> brokerUncleanShutdownHandler -> "
         "ReplicationControlManager.handleBrokerUncleanShutdown (returns unless isElrSupported) - KAFKA-15586 "
         "376e9e20dbf, first 3.8.0; replaced in 4.0 by handleBrokerShutdown",
         software=Range(since=(3, 8, 0), before=(4, 0, 0))),
    Gate("broker_shutdown_on_reregistration", "ReplicationControlManager.handleBrokerShutdown (KAFKA-18106)",
         "software",
         "ReplicationControlManager.handleBrokerShutdown(brokerId, isCleanShutdown, records): unclean with ELR "
         "-> out of ISR and ELR, else as if fenced - KAFKA-18106 (apache/kafka#18045), first 4.0.0; before it "
         "a re-registration changes no partition (unless the 3.8-3.9 ELR handler applies)",
         software=Range(since=(4, 0, 0))),
    Gate("directory_assignment", "KIP-858 replica directory assignment (MetadataVersion.isDirectoryAssignmentSupported)",
         "both",
         "server-common/.../MetadataVersion.java isDirectoryAssignmentSupported (IBP_3_7_IV2); a broker registers "
         "its log dirs' directory.id (RegisterBrokerRecord v3 LogDirs), a partition names each replica's "
         "directory (PartitionRecord Directories: ClusterControlManager.defaultDir, the broker's only dir), and a "
         "broker whose log of a partition is in another directory than its registration says (a replaced, "
         "newly formatted disk) sends AssignReplicasToDirs (ReplicaManager.applyDelta -> "
         "maybeUpdateTopicAssignment -> AssignmentsManager); the controller writes a PartitionChangeRecord "
         "with the new Directories (ReplicationControlManager.handleAssignReplicasToDirs, "
         "PartitionChangeBuilder.setDirectory): the partition epoch goes up by one - KIP-858, first 3.7.0",
         software=Range(since=(3, 7, 0)), protocol=Range(since=IBP_3_7_IV2)),
    Gate("pre_vote", "KIP-996 Pre-Vote (ProspectiveState, Vote v2 PreVote)", "software",
         "raft/.../KafkaRaftClient.java, QuorumState.transitionToProspective, ProspectiveState, "
         "FollowerState.canGrantPreVote - KAFKA-17641 (Vote v2) / KAFKA-17642 (ProspectiveState), first 4.0.0; "
         "per peer by Vote RPC version, no feature level",
         software=Range(since=(4, 0, 0))),
    Gate("check_quorum", "KRaft leader check quorum (LeaderState.timeUntilCheckQuorumExpires)", "software",
         "raft/.../KafkaRaftClient.java pollLeader: resign when LeaderState.timeUntilCheckQuorumExpires == 0 (no "
         "Fetch from a majority of the voters for 1.5 x controller.quorum.fetch.timeout.ms, "
         "updateCheckQuorumForFollowingVoter) - KAFKA-15489 37416e1aeba, first 3.7.0 (not on 3.6.x); before, "
         "pollLeader resigns only on shutdown or a requested resignation, so a leader cut from the other voters "
         "stays active",
         software=Range(since=(3, 7, 0))),
    Gate("noop_records", "NoOpRecord every metadata.max.idle.interval.ms (MetadataVersion.isNoOpRecordSupported)",
         "both",
         "metadata/.../QuorumController.java maybeScheduleNextWriteNoOpRecord (the active controller appends a "
         "NoOpRecord every metadata.max.idle.interval.ms, default 500); server-common MetadataVersion."
         "isNoOpRecordSupported (IBP_3_3_IV1) - KAFKA-13883 7d1b0926fab, first 3.3.0",
         software=Range(since=(3, 3, 0)), protocol=Range(since=IBP_3_3_IV1)),
    Gate("raft_fatal_fault", "RaftIoThread fatal fault handler (process halts on a raft error)", "software",
         "raft/.../RaftIoThread.java doWork: fatalFaultHandler.handleFault(\"Unexpected error in raft IO "
         "thread\") - KAFKA-14644 c81795692fd (3.4.1) / 598ba5f2fd5 (3.5.0); before, ShutdownableThread "
         "logged \"Error due to\" and the raft thread died with the process still up",
         software=Range(since=(3, 4, 1))),
    # -- storage and replication bugs (campaigns/bugs/): each gate is the fixed behaviour's
    # -- release range, or the buggy one's where the fix restored older behaviour
    Gate("fetcher_truncates_before_hwm",
         "AbstractFetcherThread.processFetchRequest: a partition with a diverging epoch is truncated "
         "before any of its data or the leader's high watermark is processed", "software",
         "core/src/main/scala/kafka/server/AbstractFetcherThread.scala processFetchRequest: 3.4.0 calls "
         "processPartitionData (ReplicaFetcherThread: log.maybeUpdateHighWatermark) and only then reads "
         "FetchResponse.divergingEpoch, truncating after the whole response (truncateOnFetchResponse); from "
         "KAFKA-14704 a diverging partition skips processPartitionData - bd32d98bd7c (trunk, first 3.5.0), "
         "649d5497442 (3.4, first 3.4.1); the 2.8-3.3 backports (852e7c65992 ... b8e01e24060) were never "
         "released, so 2.8.0 (truncation on fetch, KAFKA-10554 7ecc3a579a4) to 3.4.0 have the old order",
         software=Range(since=(3, 4, 1))),
    Gate("clean_shutdown_marker_needs_load",
         "LogManager.shutdown writes .kafka_cleanshutdown only into a log dir that was clean or completely "
         "loaded (hadCleanShutdownFlags, loadLogsCompletedFlags)", "software",
         "core/src/main/scala/kafka/log/LogManager.scala shutdown / loadLogs - KAFKA-15375 703e1d9faaf (trunk, "
         "first 3.7.0), daea0fdff09 (3.6, first 3.6.0), c252e930fb7 (3.5, first 3.5.2); the 3.4 and 3.3 "
         "backports (6624d070348, 8544dba721c) were never released: 3.0.0-3.5.1 write the marker into every "
         "live dir, also when a failed start-up shuts down before LogManager.startup loaded it",
         software=Range(since=(3, 5, 2))),
    Gate("epoch_checkpoint_truncation_unsynced",
         "LeaderEpochFileCache.truncateFromEnd / truncateFromStart write leader-epoch-checkpoint without fsync "
         "(writeToFile(false); CheckpointFile.write(entries, sync = false) renames without a directory fsync)",
         "software",
         "storage/src/main/java/org/apache/kafka/storage/internals/epoch/LeaderEpochFileCache.java "
         "truncateFromEnd, truncateFromStart; server-common/.../server/common/CheckpointFile.java write - "
         "introduced by KAFKA-15046 d71d0639d9d (first 3.7.0), fixed by KAFKA-16541 7c30eed66c4 (3.8, first "
         "3.8.0) / 3835515feaf (trunk, 3.9.0): every write fsyncs, truncations flush asynchronously "
         "(truncateFromEndAsyncFlush -> scheduleOnce writeToFileForTruncation); no 3.7 backport up to the "
         "branch head 7fdfeb120f7 (3.7.2-SNAPSHOT)",
         software=Range(since=(3, 7, 0), before=(3, 8, 0))),
)

GATES_BY_NAME: dict[str, Gate] = {g.name: g for g in GATES}

#: gate → the config key that overrides it (experiments; the run records the override)
OVERRIDES: dict[str, str] = {g.name: g.override for g in GATES if g.override}


@dataclass(frozen=True)
class Features:
    """The behaviours in force on one node; ``features.<gate name>`` is a bool."""
    metadata_version: MetadataVersion
    kafka_version: KafkaVersion
    kafka_version_default: bool
    gates: Mapping[str, bool]
    #: gate name → what decided it ("kafka.version", "metadata.version", "both" or an override key)
    decided_by: Mapping[str, str]
    timing: str = "fast"

    def __getattr__(self, name: str) -> bool:
        gates = object.__getattribute__(self, "gates")
        if name in gates:
            return gates[name]
        raise AttributeError(name)

    def describe(self) -> dict[str, Any]:
        """What was in force, for run records and events (the module docstring shows the format)."""
        return {
            "kafka.version": format_kafka_version(self.kafka_version),
            "kafka.version.default": self.kafka_version_default,
            "metadata.version": format_metadata_version(self.metadata_version),
            "timing": self.timing,
            "gates": {g.name: {"on": self.gates[g.name], "decided_by": self.decided_by[g.name], **g.describe()}
                      for g in GATES},
        }


def software_gate(name: str, kv: KafkaVersion) -> bool:
    """A software gate alone, for a process without a metadata.version (the standalone raft node)."""
    g = GATES_BY_NAME[name]
    if g.kind != "software":
        raise ValueError(f"gate {name} is not a software gate")
    return g.decide(kv, release_of(kv))[0]


def check_versions(kv: KafkaVersion, mv: MetadataVersion) -> None:
    """A kafka.version older than the release that introduced the metadata.version is refused
    (Kafka's broker refuses a finalized metadata.version above what it supports:
    BrokerFeatures / QuorumFeatures.reasonNotSupported), and so is a metadata.version older than
    the software runs (4.x: MetadataVersion.MINIMUM_VERSION, 3.3-IV3)."""
    if kv < release_of(mv):
        raise ValueError(f"{format_kafka_version(kv)} is older than metadata.version {format_metadata_version(mv)}, "
                         f"which Kafka {format_kafka_version(release_of(mv))} introduced: a kafka.version of at least "
                         f"{format_kafka_version(release_of(mv))} is wanted")
    if mv < min_metadata_version(kv):
        raise ValueError(f"Kafka {format_kafka_version(kv)} runs no metadata.version older than "
                         f"{format_metadata_version(min_metadata_version(kv))} (MetadataVersion.MINIMUM_VERSION), "
                         f"got {format_metadata_version(mv)}: a kafka.version below 4.0.0 is wanted")


#: the config key giving the controllers a software version of their own (a rolling upgrade in
#: progress: Kafka's upgrade notes roll the nodes one at a time, so brokers on the new release can
#: talk to controllers still on the old one); brokers ignore it
CONTROLLER_KAFKA_VERSION = "controller.kafka.version"


def derive(values: Mapping[str, Any], role: str = "broker") -> Features:
    """Every gate from a parsed config: the versions first, then any explicit override (not None).
    ``role`` "controller" reads ``controller.kafka.version`` when set (else ``kafka.version``).
    Raises ValueError (the one line to print) for a kafka.version older than the metadata.version."""
    mv: MetadataVersion = values["metadata.version"]
    kv_set = values.get("kafka.version")
    if role == "controller" and values.get(CONTROLLER_KAFKA_VERSION) is not None:
        kv_set = values[CONTROLLER_KAFKA_VERSION]
    kv: KafkaVersion = kv_set if kv_set is not None else release_of(mv)
    check_versions(kv, mv)
    gates: dict[str, bool] = {}
    decided: dict[str, str] = {}
    for g in GATES:
        gates[g.name], decided[g.name] = g.decide(kv, mv)
        if g.override is not None and values.get(g.override) is not None:
            gates[g.name], decided[g.name] = bool(values[g.override]), g.override
    return Features(metadata_version=mv, kafka_version=kv, kafka_version_default=kv_set is None,
                    gates=gates, decided_by=decided, timing=str(values.get("timing") or "fast"))
