"""The log4j loggers whose lines the reader takes events from, and the level they must log at.

Why here, beside the statements: every pattern in :mod:`checkers.kafkalog.statements` is an
INFO line of one Kafka class's logger. A lab whose log4j config raises one of those loggers
above INFO (``log4j.logger.state.change.logger=WARN``, a ``level: WARN`` in ``log4j2.yaml``)
leaves the reader blind to what that logger says, without any error: no elections, no ISR
changes, no truncations. ``faultline preflight`` (harness.preflight) checks each host's log4j
config against this list, so the one owner of "what the reader reads" is also the owner of
"what the reader needs".

A logger's name is its class's (``Logging``/``LoggerFactory.getLogger(X.class)``), except
``state.change.logger`` (``kafka.controller.StateChangeLogger``'s own named logger). Where a
class moved between versions (3.4-3.9 Scala in ``kafka.log``, 4.0 Java in
``org.apache.kafka.storage.internals.log``), both names are listed.
"""
from __future__ import annotations

#: the level the statements are logged at (a logger at INFO, DEBUG or TRACE writes them)
LEVEL = "INFO"

#: logger -> what the reader takes from its INFO lines (the statements.py entries it feeds)
NEEDED: dict[str, str] = {
    "state.change.logger": "each replica's become-leader/follower line: elections, leader epochs, "
                           "the ISR as a leader takes over (Partition.makeLeader/makeFollower)",
    "kafka.cluster.Partition": "ISR updates and AlterPartition failures "
                               "(Partition.handleAlterPartitionUpdate/handleAlterPartitionError, maybeShrinkIsr)",
    "kafka.server.ReplicaFetcherThread": "follower truncations (ReplicaFetcherThread.truncate, "
                                         "AbstractFetcherThread.maybeTruncateToEpochEndOffsets)",
    "kafka.log.UnifiedLog": "a log's own truncation (UnifiedLog.truncateTo, 3.4-3.9)",
    "org.apache.kafka.storage.internals.log.UnifiedLog": "a log's own truncation (UnifiedLog.truncateTo, 4.0)",
    "kafka.log.LogManager": "log recovery after an unclean shutdown (LogManager.loadLogs)",
    "kafka.log.LogLoader": "the segments recovered (LogLoader.recoverLog, 3.4-3.9)",
    "org.apache.kafka.storage.internals.log.LogLoader": "the segments recovered (LogLoader.recoverLog, 4.0)",
    "kafka.server.BrokerLifecycleManager": "a broker's registration and its broker epoch",
    "org.apache.kafka.controller.QuorumController": "the active controller and its epoch",
    "org.apache.kafka.controller.ReplicationControlManager": "fencing, partition records, unclean "
                                                             "elections, AlterPartition rejects",
    "org.apache.kafka.controller.ClusterControlManager": "registrations as the controller replays them",
    "org.apache.kafka.controller.BrokerHeartbeatManager": "unfencing and controlled shutdowns",
}
