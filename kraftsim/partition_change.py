"""One partition change, computed as Kafka's controller computes it.

A port of ``metadata/src/main/java/org/apache/kafka/controller/PartitionChangeBuilder.java``
(Apache Kafka; method names kept so a reader can compare line by line). Every controller
decision about a partition — the leader's AlterPartition, a fenced broker, a controlled
shutdown, an unclean restart, an unfenced broker — goes through :meth:`PartitionChangeBuilder.build`
with a target ISR; the builder decides the ELR, the election, the LastKnownELR, the recovery
state and the epochs. Why one builder: the divergences kraftsim used to have (ELR filled only on
fencing, any ex-ELR member remembered as "last known", an ISR shrink that never bumped the leader
epoch before 3.6) all came from each event computing its own partial rule.

Deliberate choices, each a Kafka version:
- ``useLastKnownLeaderInBalancedRecovery`` is true, as ReplicationControlManager leaves it: the
  LastKnownELR holds only the last known leader.
- ``canElectLastKnownLeader`` requires the last known leader to be an acceptable leader
  (KAFKA-19522, Kafka 4.1; 4.0 elected it even when fenced). kraftsim turns ELR on by default
  from metadata.version 4.1, so the 4.1 behaviour is the one modelled.
- Reassignment (adding/removing replicas) is not modelled. Directories (KIP-858) are, from
  metadata.version 3.7-IV2 (``setAssignmentChanges``): every change writes the replicas'
  directories when they differ from the partition's, so ``setDirectory`` alone is a change.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from enum import Enum
from typing import Callable

from kraftsim.features import Features
from kraftsim.metadata import NO_LEADER, RECOVERED, RECOVERING, PartitionState

#: PartitionChangeRecord.leader when the leader does not change (Kafka: NO_LEADER_CHANGE)
NO_LEADER_CHANGE = -2
#: DirectoryId.UNASSIGNED (Uuid "AAAAAAAAAAAAAAAAAAAAAA"): a replica whose broker has no single log dir
UNASSIGNED_DIR = "AAAAAAAAAAAAAAAAAAAAAA"


class Election(Enum):
    """PartitionChangeBuilder.Election (PREFERRED is not used by kraftsim's controller)."""
    ONLINE = "online"
    UNCLEAN = "unclean"


@dataclass
class ChangeRecord:
    """The fields of Kafka's PartitionChangeRecord; None = unchanged."""
    leader: int = NO_LEADER_CHANGE
    isr: list[int] | None = None
    elr: list[int] | None = None
    last_known_elr: list[int] | None = None
    leader_recovery_state: int | None = None
    directories: list[str] | None = None

    def is_noop(self) -> bool:
        """PartitionChangeBuilder.changeRecordIsNoOp."""
        return (self.leader == NO_LEADER_CHANGE and self.isr is None and self.elr is None
                and self.last_known_elr is None and self.leader_recovery_state is None
                and self.directories is None)


@dataclass
class ElectionResult:
    node: int
    unclean: bool


class PartitionChangeBuilder:
    """Mirror of PartitionChangeBuilder for one partition.

    ``is_acceptable_leader`` is ReplicationControlManager's LeaderAcceptor: registered, unfenced,
    not in controlled shutdown (``ClusterControlManager.isActive``), adjusted by the event
    (``generateLeaderAndIsrUpdates``' brokerToRemove / brokerToAdd / brokerWithUncleanShutdown).
    ``min_isr`` is the effective min ISR (``getTopicEffectiveMinIsr``: capped at the RF).
    """

    def __init__(self, partition: PartitionState, is_acceptable_leader: Callable[[int], bool],
                 features: Features, min_isr: int):
        self.partition = partition
        self.is_acceptable_leader = is_acceptable_leader
        self.features = features
        self.min_isr = min_isr
        self.elr_enabled = features.elr
        self.use_last_known_leader = True
        self.election = Election.ONLINE
        self.unclean_shutdown_replicas: list[int] | None = None
        self.target_isr = list(partition.isr)
        self.target_replicas = list(partition.replicas)
        self.target_elr = list(partition.elr)
        self.target_last_known_elr = list(partition.last_known_elr)
        self.target_leader_recovery_state = partition.leader_recovery_state
        #: DirectoryId.createAssignmentMap(replicas, directories): replica -> directory id
        self.target_directories: dict[int, str] = dict(zip(partition.replicas, partition.directories or []))
        #: setDefaultDirProvider: the directory of a replica the map lacks (ClusterDescriber.defaultDir)
        self.default_dir: Callable[[int], str] = lambda _r: UNASSIGNED_DIR
        #: docs/seeds.md#seed-004's eligibility test (None: the preference is off, Kafka's behaviour)
        self.local_log_eligible: Callable[[int], bool] | None = None
        #: how the leader was chosen when it changed: "isr", "elr", "last_known_leader", "unclean"
        self.elected_by: str | None = None

    # -- setters (the subset kraftsim uses) ------------------------------------------------

    def set_target_isr(self, isr: list[int]) -> "PartitionChangeBuilder":
        self.target_isr = list(isr)
        return self

    def set_election(self, election: Election) -> "PartitionChangeBuilder":
        self.election = election
        return self

    def set_unclean_shutdown_replicas(self, replicas: list[int]) -> "PartitionChangeBuilder":
        self.unclean_shutdown_replicas = list(replicas)
        return self

    def set_local_log_eligibility(self, eligible: Callable[[int], bool]) -> "PartitionChangeBuilder":
        """docs/seeds.md#seed-004 (a proposal, NOT Kafka; only when its thresholds are set): replicas whose local
        log is long enough are tried first in the election."""
        self.local_log_eligible = eligible
        return self

    def _election_order(self) -> list[int]:
        """docs/seeds.md#seed-004, "Leader Election Algorithm Changes": stably sort the target replicas so
        eligible ones come first (assignment order kept within each group); without the
        preference, Kafka's order: the target replicas as assigned."""
        if self.local_log_eligible is None:
            return self.target_replicas
        return sorted(self.target_replicas, key=lambda r: not self.local_log_eligible(r))

    def set_directory(self, broker: int, directory: str) -> "PartitionChangeBuilder":
        """setDirectory: the replica on ``broker`` is in log directory ``directory`` (KIP-858,
        ReplicationControlManager.handleAssignReplicasToDirs)."""
        self.target_directories[broker] = directory
        return self

    def set_default_dir_provider(self, default_dir: Callable[[int], str]) -> "PartitionChangeBuilder":
        self.default_dir = default_dir
        return self

    def set_target_leader_recovery_state(self, lrs: int) -> "PartitionChangeBuilder":
        self.target_leader_recovery_state = lrs
        return self

    # -- election ---------------------------------------------------------------------------

    def _is_valid_new_leader(self, replica: int) -> bool:
        """isValidNewLeader: in the target ISR, or in the ELR when the target ISR is empty."""
        in_sync = replica in self.target_isr or (not self.target_isr and replica in self.target_elr)
        return in_sync and self.is_acceptable_leader(replica)

    def _can_elect_last_known_leader(self) -> bool:
        """canElectLastKnownLeader (with KAFKA-19522's liveness check)."""
        if not self.elr_enabled or not self.use_last_known_leader:
            return False
        if self.target_elr or self.target_isr:
            return False
        if len(self.partition.last_known_elr) != 1:
            return False
        return self.is_acceptable_leader(self.partition.last_known_elr[0])

    def elect_leader(self) -> ElectionResult:
        """electAnyLeader (ONLINE and UNCLEAN)."""
        if self.partition.leader != NO_LEADER and self._is_valid_new_leader(self.partition.leader):
            return ElectionResult(self.partition.leader, False)
        for r in self._election_order():
            if self._is_valid_new_leader(r):
                self.elected_by = "isr" if r in self.target_isr else "elr"
                return ElectionResult(r, False)
        if self._can_elect_last_known_leader():
            self.elected_by = "last_known_leader"
            return ElectionResult(self.partition.last_known_elr[0], True)
        if self.election is Election.UNCLEAN:
            for r in self.target_replicas:
                if self.is_acceptable_leader(r):
                    self.elected_by = "unclean"
                    return ElectionResult(r, True)
        self.elected_by = None
        return ElectionResult(NO_LEADER, False)

    def _try_election(self, record: ChangeRecord) -> None:
        """tryElection: an ELR winner becomes the ISR alone; an unclean winner too, RECOVERING."""
        result = self.elect_leader()
        if result.node == self.partition.leader:
            return
        if result.node in self.target_elr:
            self.target_isr = [result.node]
            self.target_elr = [r for r in self.target_elr if r != result.node]
        record.leader = result.node
        if result.unclean:
            record.isr = [result.node]
            if self.partition.leader_recovery_state != RECOVERING and self.features.leader_recovery:
                record.leader_recovery_state = RECOVERING  # KIP-704 (gate leader_recovery)

    # -- epochs -----------------------------------------------------------------------------

    def _trigger_leader_epoch_bump_for_isr_shrink_if_needed(self, record: ChangeRecord) -> None:
        """triggerLeaderEpochBumpForIsrShrinkIfNeeded: before 3.6-IV0 (KAFKA-15021) a shrink
        re-sets the current leader, which bumps the leader epoch on merge."""
        if not self.features.leader_epoch_bump_on_isr_shrink:
            return
        if record.leader != NO_LEADER_CHANGE or record.isr is None:
            return
        if not set(self.partition.isr) <= set(record.isr):
            record.leader = self.partition.leader

    # -- ELR --------------------------------------------------------------------------------

    def _maybe_populate_target_elr(self) -> None:
        """maybePopulateTargetElr: below min ISR, the current ISR and ELR members outside the
        target ISR (and not uncleanly shut down) form the ELR; at/above it, both lists clear."""
        if not self.elr_enabled:
            return
        if len(self.target_isr) >= self.min_isr:
            self.target_elr = []
            self.target_last_known_elr = []
            return
        target_isr = set(self.target_isr)
        unclean = set(self.unclean_shutdown_replicas or [])
        candidates = set(self.target_elr) | set(self.partition.isr)
        self.target_elr = sorted(r for r in candidates if r not in target_isr and r not in unclean)
        candidates |= set(self.target_last_known_elr)
        self.target_last_known_elr = sorted(r for r in candidates
                                            if r not in target_isr and r not in self.target_elr)

    def _maybe_update_record_elr(self, record: ChangeRecord) -> None:
        """maybeUpdateRecordElr: an unclean election (or ELR off) clears ELR and LastKnownELR."""
        clean = record.isr is None
        if not clean or not self.elr_enabled:
            self.target_elr = []
            self.target_last_known_elr = []
        if self.target_elr != list(self.partition.elr):
            record.elr = list(self.target_elr)
        if (self.use_last_known_leader and len(self.partition.last_known_elr) == 1
                and (record.leader == NO_LEADER
                     or (record.leader == NO_LEADER_CHANGE and self.partition.leader == NO_LEADER))):
            self.target_last_known_elr = list(self.partition.last_known_elr)
        if self.use_last_known_leader:
            return
        if self.target_last_known_elr != list(self.partition.last_known_elr):
            record.last_known_elr = list(self.target_last_known_elr)

    def _maybe_update_last_known_leader(self, record: ChangeRecord) -> None:
        """maybeUpdateLastKnownLeader: the first time the ISR becomes empty, remember the leader;
        clear it once the partition has (or keeps) a leader."""
        if not self.use_last_known_leader or not self.elr_enabled:
            return
        p = self.partition
        if record.isr is not None and not record.isr and (len(p.last_known_elr) != 1
                                                          or p.last_known_elr[0] != p.leader):
            record.last_known_elr = [p.leader]
        elif ((record.leader >= 0 or (p.leader != NO_LEADER and record.leader != NO_LEADER))
              and p.last_known_elr):
            record.last_known_elr = []

    # -- build ------------------------------------------------------------------------------

    def build_record(self) -> ChangeRecord | None:
        """build(): the PartitionChangeRecord, or None for a no-op."""
        record = ChangeRecord()
        self._maybe_populate_target_elr()
        self._try_election(record)
        self._maybe_update_record_elr(record)
        # With ELR on, the ISR may become empty; without it the last member stays ("last replica
        # standing") because an empty target ISR is never written.
        if (record.isr is None and (self.target_isr or self.elr_enabled)
                and self.target_isr != list(self.partition.isr)):
            record.isr = list(self.target_isr)
        self._trigger_leader_epoch_bump_for_isr_shrink_if_needed(record)
        self._maybe_update_last_known_leader(record)
        self._set_assignment_changes(record)
        if self.target_leader_recovery_state != self.partition.leader_recovery_state:
            record.leader_recovery_state = self.target_leader_recovery_state
        return None if record.is_noop() else record

    def _set_assignment_changes(self, record: ChangeRecord) -> None:
        """setAssignmentChanges (directories only: reassignment is not modelled): from
        metadata.version 3.7-IV2 the replicas' directories, written when they differ."""
        if not self.features.directory_assignment or not self.target_replicas:
            return
        dirs = [self.target_directories.get(r) or self.default_dir(r) for r in self.target_replicas]
        if dirs != list(self.partition.directories or []):
            record.directories = dirs

    def build(self) -> PartitionState | None:
        """The partition after the change (PartitionRegistration.merge), or None for a no-op:
        partition epoch + 1 on every change, leader epoch + 1 whenever the record sets a leader."""
        record = self.build_record()
        if record is None:
            return None
        return merge(self.partition, record)


def merge(p: PartitionState, record: ChangeRecord) -> PartitionState:
    """PartitionRegistration.merge."""
    new = copy.deepcopy(p)
    if record.isr is not None:
        new.isr = list(record.isr)
    if record.leader != NO_LEADER_CHANGE:
        new.leader = record.leader
        new.leader_epoch = p.leader_epoch + 1
    if record.leader_recovery_state is not None:
        new.leader_recovery_state = record.leader_recovery_state
    if record.elr is not None:
        new.elr = list(record.elr)
    if record.last_known_elr is not None:
        new.last_known_elr = list(record.last_known_elr)
    if record.directories is not None:
        new.directories = list(record.directories)
    new.partition_epoch = p.partition_epoch + 1
    if p.leader != NO_LEADER:
        new.last_leader = p.leader if new.leader == NO_LEADER else new.leader
    elif new.leader != NO_LEADER:
        new.last_leader = new.leader
    return new


__all__ = ["PartitionChangeBuilder", "Election", "ChangeRecord", "merge", "NO_LEADER_CHANGE", "RECOVERED", "UNASSIGNED_DIR"]
