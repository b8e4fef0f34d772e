"""kraftsim's KRaft quorum: Raft (KIP-595) among the controllers for ``__cluster_metadata``.

Why a package of its own: the controller state machine (``kraftsim/controller.py``) decides
*what* goes into the metadata log; this package decides *whether it is committed*, exactly as
Kafka splits ``QuorumController`` from ``KafkaRaftClient``. Kafka's ``raft/`` module is the
authority for every rule here (files and methods are cited where a rule decides a vote, an
election, a commit or a truncation):

- ``config``: ``controller.quorum.voters`` / ``controller.quorum.bootstrap.servers`` and the
  ``controller.quorum.*`` timeouts (QuorumConfig.java);
- ``store``: the ``quorum-state`` file (FileQuorumStateStore.java, QuorumStateData.json);
- ``states``: Unattached / Candidate / Leader / Follower / Resigned and their transitions
  (QuorumState.java and the *State.java classes);
- ``log``: the replicated metadata log on kraftsim's segment storage (KafkaMetadataLog.scala,
  ReplicatedLog.java), flushed the way the raft client flushes it;
- ``rpc``: Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch through kio (RaftUtil.java);
- ``client``: the event loop that ties them together (KafkaRaftClient.java);
- ``node``: a standalone ``python -m kraftsim.raft --config F`` process for conformance tests.
"""
