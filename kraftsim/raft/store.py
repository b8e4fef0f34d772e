"""The ``quorum-state`` file, byte-compatible with Kafka's FileQuorumStateStore.

Why persist it at all: a voter must never vote twice in one epoch nor forget the epoch it has
seen, or two leaders could be elected for the same epoch after a restart (KIP-595, "Persisted
state"). Kafka writes the file on every state transition (QuorumState.durableTransitionTo ->
FileQuorumStateStore.writeElectionState): one JSON line, ``QuorumStateData`` plus
``data_version``. With a static voter set (``controller.quorum.voters``, kraft.version 0) Kafka
writes data version 0 (KRaftVersion.quorumStateVersion)::

    {"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}

The write is Kafka's: ``quorum-state.tmp``, fsync, atomic rename, fsync of the directory
(FileQuorumStateStore.writeElectionStateToFile, Utils.atomicMoveWithFallback). The file lives in
the metadata partition's directory, ``<metadata.log.dir>/__cluster_metadata-0/quorum-state``,
where KafkaRaftManager puts it.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from kraftsim.storage.checkpoints import fsync_dir

FILE_NAME = "quorum-state"  # FileQuorumStateStore.DEFAULT_FILE_NAME
NO_LEADER = -1
NOT_VOTED = -1
LOWEST_SUPPORTED_VERSION, HIGHEST_SUPPORTED_VERSION = 0, 1


class QuorumStateError(ValueError):
    """The quorum-state file cannot be read; the message is one line naming the file."""


@dataclass(frozen=True)
class ElectionState:
    """Kafka's ElectionState: the epoch, the elected leader (or -1), the voted candidate (or -1)."""

    epoch: int
    leader_id: int = NO_LEADER
    voted_id: int = NOT_VOTED
    voters: frozenset[int] = field(default_factory=frozenset)

    def has_leader(self) -> bool:
        return self.leader_id != NO_LEADER

    def has_voted(self) -> bool:
        return self.voted_id != NOT_VOTED

    def is_leader(self, node_id: int) -> bool:
        return self.leader_id == node_id

    def is_voted_candidate(self, node_id: int) -> bool:
        return self.voted_id == node_id


class FileQuorumStateStore:
    def __init__(self, path: Path):
        self.path = Path(path)

    def read(self) -> ElectionState | None:
        """FileQuorumStateStore.readElectionState: None when the file does not exist."""
        try:
            line = self.path.read_text(encoding="utf-8").split("\n", 1)[0]
        except FileNotFoundError:
            return None
        except OSError as e:
            raise QuorumStateError(f"{self.path}: cannot read ({e.strerror})") from None
        try:
            data = json.loads(line)
        except ValueError:
            raise QuorumStateError(f"{self.path}: not a JSON object on its first line") from None
        if not isinstance(data, dict):
            raise QuorumStateError(f"{self.path}: a JSON object is wanted")
        version = data.get("data_version")
        if not isinstance(version, int):
            raise QuorumStateError(f"{self.path}: data_version is missing")
        if not LOWEST_SUPPORTED_VERSION <= version <= HIGHEST_SUPPORTED_VERSION:
            raise QuorumStateError(f"{self.path}: data_version {version} is not within 0..1")
        try:
            voters = frozenset(int(v["voterId"]) for v in (data.get("currentVoters") or []))
            return ElectionState(int(data.get("leaderEpoch", -1)), int(data.get("leaderId", -1)),
                                 int(data.get("votedId", -1)), voters)
        except (TypeError, ValueError, KeyError):
            raise QuorumStateError(f"{self.path}: leaderEpoch/leaderId/votedId/currentVoters malformed") from None

    def write(self, state: ElectionState) -> None:
        """Version 0 (static voters), written atomically and durably."""
        data = {"clusterId": "", "leaderId": state.leader_id, "leaderEpoch": state.epoch,
                "votedId": state.voted_id, "appliedOffset": 0,
                "currentVoters": [{"voterId": v} for v in sorted(state.voters)], "data_version": 0}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, separators=(",", ":")))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
