"""The kraftsim broker process, split along the classes of Kafka's broker it mirrors.

Why these seams: each module is one of Kafka's broker classes, so a rule cited as
``BrokerLifecycleManager`` or ``Partition.maybeIncrementLeaderHW`` is found in the module of that
name (docs/kraftsim.md, fidelity table), and a change to one of them touches one room:

- ``server``: BrokerServer.scala - builds the parts, ``startup`` order, shutdown;
- ``lifecycle``: BrokerLifecycleManager.scala - registration, heartbeats, the unfence handshake,
  controlled shutdown (and docs/seeds.md#seed-002's draft self-fencing, off by default);
- ``metadata_publisher``: the broker's metadata listener and BrokerMetadataPublisher.scala -
  replays ``__cluster_metadata`` into the image, publishes it once startup allows;
- ``replica_manager``: ReplicaManager.scala - the partitions of this broker, appendRecords /
  fetchMessages / readFromLog, ISR expiration and high-watermark checkpoints;
- ``partition``: Partition.scala - one partition's leader/follower state, HWM, ISR, acks=all;
- ``alter_partition``: AlterPartitionManager.scala - queues and (re)sends AlterPartition;
- ``fetcher``: ReplicaFetcherManager.scala / ReplicaFetcherThread.scala (AbstractFetcherThread) -
  follower fetching, truncation on a diverging epoch or an out-of-range offset, tiered start;
- ``apis``: KafkaApis.scala - the client request handlers and the forwarding to controllers;
- ``remote_log_manager``: RemoteLogManager.java - KIP-405 tiering, KIP-1023, docs/seeds.md#seed-004's reports.

The parts reach each other through the :class:`~kraftsim.broker.server.BrokerServer` that built
them (``b.lifecycle``, ``b.replica_manager``, ...), as Kafka's BrokerServer hands each manager
its collaborators; none imports the server, so the import arrows run one way.
"""
