"""Which Kafka behaviours are in force, derived from ``metadata.version`` as Kafka derives them.

A Kafka cluster's protocol behaviour is switched by its metadata.version
(``server-common/.../MetadataVersion.java``), not by one flag per fix. kraftsim does the same, so
a campaign says ``metadata.version: 3.4`` against ``4.1`` and gets the vulnerable and the fixed
cluster. Each gate may still be overridden by an explicit key for experiments; ``describe()``
says what was in force and where each value came from, and the cluster launcher writes that into
the run (``features.json``) so a verdict never depends on a guess about the target.

Gates (MetadataVersion constant or release, and what it switches):

- ``kip903`` — IBP_3_5_IV1 "Adds replica epoch to Fetch request (KIP-903)": Fetch v15 carries
  ``ReplicaState.ReplicaEpoch``, AlterPartition v3 carries ``NewIsrWithEpochs`` and the controller
  answers INELIGIBLE_REPLICA to a stale broker epoch (seed 000). Override: ``kip903.enabled``.
- ``leader_epoch_bump_on_isr_shrink`` — ``MetadataVersion.isLeaderEpochBumpRequiredOnIsrShrink``
  (true before IBP_3_6_IV0, KAFKA-15021): the controller bumps the leader epoch when it shrinks
  an ISR. Override: ``isr.shrink.leader.epoch.bump``.
- ``hwm_requires_min_isr`` — KAFKA-15583 (Kafka 3.7): ``Partition.maybeIncrementLeaderHW``
  returns early while ``isUnderMinIsr``. This is a software change, not a metadata.version gate
  in Kafka; kraftsim models one software version per metadata.version, so a 3.7+ metadata.version
  stands for a 3.7+ broker. Override: ``hwm.min.isr.enabled``.
- ``elr`` — KIP-966 Eligible Leader Replicas: supported from IBP_4_0_IV1
  (``MetadataVersion.isElrSupported``); the ``eligible.leader.replicas.version`` feature is opt-in
  on 4.0 and on by default for new clusters from 4.1 (seed 003 §2.4). Override:
  ``eligible.leader.replicas.version`` (0 or 1).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

#: the newest feature level ("IV") of each release: ``MetadataVersion.fromVersionString("3.5")``
#: picks the latest IV of that release, and so does kraftsim for a version given without one
LATEST_IV: dict[tuple[int, int], int] = {
    (3, 0): 1, (3, 1): 0, (3, 2): 0, (3, 3): 3, (3, 4): 0, (3, 5): 2, (3, 6): 2, (3, 7): 4,
    (3, 8): 0, (3, 9): 0, (4, 0): 3, (4, 1): 1, (4, 2): 0,
}

MetadataVersion = tuple[int, int, int]

IBP_3_2_IV0: MetadataVersion = (3, 2, 0)
IBP_3_5_IV1: MetadataVersion = (3, 5, 1)
IBP_3_6_IV0: MetadataVersion = (3, 6, 0)
IBP_3_7_IV0: MetadataVersion = (3, 7, 0)
IBP_4_0_IV1: MetadataVersion = (4, 0, 1)
IBP_4_1_IV0: MetadataVersion = (4, 1, 0)


def parse_metadata_version(text: str) -> MetadataVersion:
    """``3.4`` → (3, 4, 0); ``3.9-IV0`` → (3, 9, 0); a release without an IV gets its newest IV."""
    m = re.match(r"^(\d+)\.(\d+)(?:-IV(\d+))?$", text.strip())
    if not m:
        raise ValueError("a Kafka metadata version like 3.4 or 3.9-IV0 is wanted")
    major, minor = int(m.group(1)), int(m.group(2))
    if (major, minor) < (3, 0):
        raise ValueError("a KRaft metadata version (3.0 or newer) is wanted")
    iv = int(m.group(3)) if m.group(3) is not None else LATEST_IV.get((major, minor), 0)
    return major, minor, iv


def format_metadata_version(mv: MetadataVersion) -> str:
    return f"{mv[0]}.{mv[1]}-IV{mv[2]}"


@dataclass(frozen=True)
class Features:
    """The behaviours in force on one node; see the module docstring for each gate's source."""
    metadata_version: MetadataVersion
    kip903: bool
    leader_epoch_bump_on_isr_shrink: bool
    hwm_requires_min_isr: bool
    elr: bool
    #: gate name → "metadata.version" or the config key that overrode it
    source: Mapping[str, str]

    def describe(self) -> dict[str, Any]:
        """What was in force, for run records and events: ``{"metadata.version": "3.4-IV0", ...}``."""
        out: dict[str, Any] = {"metadata.version": format_metadata_version(self.metadata_version)}
        for name in ("kip903", "leader_epoch_bump_on_isr_shrink", "hwm_requires_min_isr", "elr"):
            out[name] = {"enabled": getattr(self, name), "from": self.source[name]}
        return out


#: gate → (config key that overrides it, how to read the key's value as a bool)
OVERRIDES: dict[str, str] = {
    "kip903": "kip903.enabled",
    "leader_epoch_bump_on_isr_shrink": "isr.shrink.leader.epoch.bump",
    "hwm_requires_min_isr": "hwm.min.isr.enabled",
    "elr": "eligible.leader.replicas.version",
}


def derive(values: Mapping[str, Any]) -> Features:
    """Gates from a parsed config: metadata.version first, then any explicit override (not None)."""
    mv: MetadataVersion = values["metadata.version"]
    derived = {
        "kip903": mv >= IBP_3_5_IV1,
        "leader_epoch_bump_on_isr_shrink": mv < IBP_3_6_IV0,
        "hwm_requires_min_isr": mv >= IBP_3_7_IV0,
        "elr": mv >= IBP_4_1_IV0,
    }
    source = {k: "metadata.version" for k in derived}
    for gate, key in OVERRIDES.items():
        v = values.get(key)
        if v is not None:
            derived[gate] = bool(v)
            source[gate] = key
    return Features(metadata_version=mv, source=source, **derived)
