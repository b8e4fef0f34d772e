"""The min ISR an acks=all ack had to meet in this run: Kafka's rule in force, decided once.

Why its own module: Kafka changed the rule. From 3.7.0 the broker caps min.insync.replicas at
the replication factor - ``Partition.effectiveMinIsr`` =
``leaderLog.config.minInSyncReplicas.min(remoteReplicasMap.size + 1)``
(core/src/main/scala/kafka/cluster/Partition.scala, KAFKA-15583 edc7e10a745, first 3.7.0), read
by ``checkEnoughReplicasReachOffset`` and ``appendRecordsToLeader``. Before it (3.6.0's
Partition.scala: ``val minIsr = leaderLog.config.minInSyncReplicas``) the raw config applies, so
a min ISR above the replication factor refuses every acks=all write. Which one applied is a
feature gate the run records (``effective_min_isr``, read through :mod:`checkers.features`, the
one reader of the gates); the checker never compares versions itself.

Without a record (real Kafka; a kraftsim run before the gate was recorded) the capped rule is
*assumed* and the verdict says so: it is the weaker promise (min(m, RF) <= m), so an ack it flags
breaks the rule of every Kafka version. Without the replication factor (run.json ``topic``) no
cap can be computed and the raw setting is judged, as the checker always did.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checkers.features import FeaturesInForce

#: the gate kraftsim records for Kafka 3.7's cap (kraftsim/features.py ``GATES``; features.json)
GATE = "effective_min_isr"


@dataclass(frozen=True)
class MinIsrRule:
    """What ``ack_below_min_isr`` judged against, and why."""
    min_insync_replicas: int | None     # the topic's setting (else the target's default)
    replication_factor: int | None      # run.json topic.replication_factor
    effective: int | None               # what an ack had to meet; None: not evaluated
    rule: str                           # one sentence: which rule, decided by what (or assumed)
    assumed: bool                       # the run did not record the rule: the weaker one was taken

    def as_dict(self) -> dict[str, Any]:
        return {"min_insync_replicas": self.min_insync_replicas, "replication_factor": self.replication_factor,
                "effective_min_isr": self.effective, "rule": self.rule, "assumed": self.assumed}


def _as_int(v: Any) -> int | None:
    try:
        return int(v) if v is not None and not isinstance(v, bool) else None
    except (TypeError, ValueError):
        return None


def replication_factor(run: dict[str, Any]) -> int | None:
    """The topic's replication factor as the runner created it (run.json ``topic``)."""
    topic = run.get("topic")
    return _as_int(topic.get("replication_factor")) if isinstance(topic, dict) else None


def rule_in_force(min_isr: int | None, rf: int | None, features: FeaturesInForce) -> MinIsrRule:
    """The effective min ISR: capped at the replication factor when the run's ``effective_min_isr``
    gate is on, raw when it is off, capped (and said to be assumed) when the run does not say."""
    if min_isr is None:
        return MinIsrRule(None, rf, None, "min.insync.replicas unknown (run.json names no topic setting or "
                                          "switch): not evaluated", False)
    if rf is None:
        return MinIsrRule(min_isr, None, min_isr, f"min.insync.replicas={min_isr} as set: the replication factor "
                                                  "is not recorded (run.json topic), so no cap could apply", False)
    capped = min(min_isr, rf)
    gate = features.gate(GATE)
    if gate.enabled is None:
        return MinIsrRule(min_isr, rf, capped, f"min(min.insync.replicas={min_isr}, replication factor={rf}) = "
                                               f"{capped} assumed: the {GATE} gate was not recorded "
                                               f"({gate.because()}); the capped rule (Kafka 3.7+ "
                                               "Partition.effectiveMinIsr) is the weaker one, so an ack it flags "
                                               "breaks the rule of every Kafka version", True)
    if gate.enabled:
        return MinIsrRule(min_isr, rf, capped, f"min(min.insync.replicas={min_isr}, replication factor={rf}) = "
                                               f"{capped}: Partition.effectiveMinIsr caps it ({GATE} on, "
                                               f"{gate.because()})", False)
    return MinIsrRule(min_isr, rf, min_isr, f"min.insync.replicas={min_isr} uncapped: before Kafka 3.7 "
                                            f"Partition.checkEnoughReplicasReachOffset reads the raw config "
                                            f"({GATE} off, {gate.because()})", False)
