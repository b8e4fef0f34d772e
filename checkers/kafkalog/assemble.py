"""Turn the observations of every host, in time order, into kraftsim's event records.

Why a state machine and not one event per line: Kafka logs one controller decision on
every replica that applies it (``Leader ... starts at``, ``Follower ... starts at``,
``Skipped the become-follower state change ... partition state ...``) and logs at INFO only
part of what kraftsim's controller states in one event. So:

* **Replays are state**: what a controller logs replaying its metadata log after it starts and
  before it knows who leads updates the state here and makes no event (docs/kafka-logs.md,
  "Rules the real logs taught"); every AlterPartition rejection is an event.
* **Partition changes** are keyed by partition epoch (``PartitionChangeBuilder`` bumps it on
  every change): the first observation of an epoch makes the event, later ones fill the fields
  it lacked (a follower's line has no ISR; the leader's has). ``leader_elected`` when the
  leader changed to a broker (a controller diff naming the leader always is), else
  ``isr_changed`` - kraftsim's rule
  (kraftsim/controller.py ``_commit_partition``).
* **Reasons** the logs do not state are inferred and only from what they do state: ``initial``
  (the controller created the partition), ``unclean`` (``UNCLEAN partition change``),
  ``alter_partition`` (the leader's ``ISR updated to ... version updated to N`` for that
  epoch), ``leader_fenced`` / ``controlled_shutdown`` (the old leader or a removed ISR member
  was fenced for that reason in the seconds before), ``isr`` (a partition without a leader
  got one from the ISR last stated). Otherwise the reason is null.
* **Broker epochs** of fence/unfence come from the broker's latest registration;
  ``clean_shutdown`` of a registration from the broker's LogManager line as it started (clean
  shutdown file found or not); ``previous_broker_epoch`` is not logged (null).
* **Truncations** take their reason from the fetcher's line before ``Truncating to offset``
  and their ``from_offset`` from the fetcher (offset out of range names it) or from the last
  log end offset that broker's log stated for the partition (load, ``starts at ... from offset``,
  a no-op truncation): Kafka does not log the end offset it cut from, and a follower that
  fetched after its last stated end offset cut from higher - a lower bound, said so in
  docs/kafka-logs.md.
* **The leader's own ISR** (``leader_isr``, the view ``ack_below_min_isr`` falls back to: Kafka's
  logs have no follower log end, docs/anomalies.md): the
  ISR a broker states as it becomes leader (``Leader ... starts at ..., ISR [...]``) and each
  committed ISR it is told (``ISR updated to ...``); a rejected AlterPartition
  (``Failed to alter partition``) brings it back to the committed one the line states. Kafka logs no INFO
  line for a pending expansion (Partition.prepareIsrExpand), so the maximal ISR stated is the
  committed one - a shrink's pending state changes nothing (the maximal ISR stays the old one).
* **Recovery**: a log loaded from a directory without a clean shutdown file (LogManager's
  line), with its log end offset; ``recovery_point`` is the first unflushed segment recovered
  (Kafka logs no recovery point at INFO), ``truncated_bytes`` 0 unless a corruption was found.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: seconds before a partition change within which a fence explains it (controller decisions
#: are logged within milliseconds of each other; replicas apply them within a heartbeat)
FENCE_EXPLAINS_S = 10.0
#: the controller's reject and the leader's line for the same request are logged within
#: milliseconds of each other; a leader re-sends a rejected request every ~500 ms
#: (AlterPartitionManager's retry backoff), so each line pairs with at most one of the other side
SAME_REJECT_S = 0.3


@dataclass
class _Broker:
    epoch: int | None = None
    fenced: bool = True


@dataclass
class _Part:
    leader: int | None = None
    leader_epoch: int | None = None
    partition_epoch: int | None = None
    isr: list[int] | None = None
    lrs: int | None = None
    last_isr: list[int] | None = None           # the last ISR a line stated (a follower's line states none)
    event: dict[str, Any] | None = None        # the event of the current partition epoch


@dataclass
class Assembler:
    """Feed observations in time order (:meth:`add`), then take :attr:`events`."""
    events: list[dict[str, Any]] = field(default_factory=list)
    brokers: dict[int, _Broker] = field(default_factory=dict)
    parts: dict[tuple[str, int], _Part] = field(default_factory=dict)
    fences: list[tuple[float, int, str | None]] = field(default_factory=list)       # wall, broker, reason
    accepted: dict[tuple[str, int, int], dict[str, Any]] = field(default_factory=dict)  # (tp, new epoch) -> alter event
    leo: dict[tuple[int | None, str, int], int] = field(default_factory=dict)       # (node, tp) -> last stated LEO
    lso: dict[tuple[int | None, str, int], int] = field(default_factory=dict)
    pending_trunc: dict[tuple[int | None, str, int], dict[str, Any]] = field(default_factory=dict)
    unclean_dirs: dict[tuple[int | None, str], bool] = field(default_factory=dict)
    recovering: dict[tuple[int | None, str, int], int] = field(default_factory=dict)
    corrupt: set[tuple[int | None, str, int]] = field(default_factory=set)
    shutdown_clean: dict[int | None, bool] = field(default_factory=dict)          # node -> its last start found a clean shutdown file
    #: (leader node, tp) -> (leader epoch, the committed ISR it acts on): a rejection reverts to it
    acting_isr: dict[tuple[int | None, str, int], tuple[int | None, list[int]]] = field(default_factory=dict)
    last_trunc: dict[tuple[int | None, str, int], dict[str, Any]] = field(default_factory=dict)
    unused: int = 0                             # observations that changed nothing (duplicates)
    #: (node, log dir) taken offline since that node's process last started loading its logs
    offline: set[tuple[int | None, str]] = field(default_factory=set)
    #: hosts whose controller is loading its metadata log: started, not yet active or standby
    loading: set[str] = field(default_factory=set)
    replayed: int = 0                           # records replayed while loading: state, no event
    _quiet: bool = False

    def _emit(self, o: dict[str, Any], event: str, **fields: Any) -> dict[str, Any]:
        rec = {"wall": o["wall"], "node": o["node"], "role": o["role"], "event": event, **fields,
               "host": o["host"], "source": o["source"], "line": o["line"]}
        if not self._quiet:
            self.events.append(rec)
        return rec

    def _replay(self, o: dict[str, Any]) -> None:
        """A record a controller replays while loading its metadata log (ClusterControlManager /
        ReplicationControlManager.replay before QuorumController.handleLeaderChange tells it who
        leads): the state it had before this process started, so no event - the registrations,
        fences and partition changes it states happened before, not now."""
        self.replayed += 1
        self._quiet = True
        try:
            k = o["kind"]
            if k == "registered":
                b = self.brokers.setdefault(o["broker"], _Broker())
                b.epoch, b.fenced = o["broker_epoch"], bool(o["fenced"])
            elif k in ("fence", "unfence"):
                b = self.brokers.setdefault(o["broker"], _Broker())
                b.fenced = k == "fence"
                if o.get("broker_epoch") is not None:
                    b.epoch = o["broker_epoch"]
            elif k in ("partition_created", "partition_state"):
                self._partition(o, created=k == "partition_created")
        finally:
            self._quiet = False

    # ------------------------------------------------------------------ brokers
    def _registered(self, o: dict[str, Any]) -> None:
        b = self.brokers.setdefault(o["broker"], _Broker())
        if o.get("broker_side") and b.epoch is not None and o["broker_epoch"] < b.epoch:
            # a broker epoch is the metadata offset of its registration record, so it only grows:
            # the broker's answer to an earlier registration, logged after the controller's next
            self.unused += 1
            return
        if b.epoch == o["broker_epoch"] and o.get("broker_side"):
            self.unused += 1            # the broker's own line for a registration the controller logged
            return
        if b.epoch == o["broker_epoch"] and not b.fenced:
            self.unused += 1
            return
        b.epoch, b.fenced = o["broker_epoch"], bool(o["fenced"])
        # the broker's own LogManager said, as it started, whether it found a clean shutdown file
        self._emit(o, "broker_registered", broker=o["broker"], broker_epoch=o["broker_epoch"],
                   previous_broker_epoch=None, clean_shutdown=self.shutdown_clean.get(o["broker"]))

    def _fence(self, o: dict[str, Any]) -> None:
        b = self.brokers.setdefault(o["broker"], _Broker(fenced=False))
        if b.fenced:
            self.unused += 1
            return
        b.fenced = True
        epoch = o.get("broker_epoch") if o.get("broker_epoch") is not None else b.epoch
        if not self._quiet:
            self.fences.append((o["wall"], o["broker"], o.get("reason")))
        self._emit(o, "broker_fenced", broker=o["broker"], broker_epoch=epoch, reason=o.get("reason"))

    def _unfence(self, o: dict[str, Any]) -> None:
        b = self.brokers.setdefault(o["broker"], _Broker())
        if not b.fenced:
            self.unused += 1
            return
        b.fenced = False
        epoch = o.get("broker_epoch") if o.get("broker_epoch") is not None else b.epoch
        self._emit(o, "broker_unfenced", broker=o["broker"], broker_epoch=epoch)

    # ------------------------------------------------------------------ partitions
    def _fence_reason(self, wall: float, brokers: set[int]) -> str | None:
        for w, b, reason in reversed(self.fences):
            if w > wall + 1.0:
                continue
            if w < wall - FENCE_EXPLAINS_S:
                break
            if b in brokers:
                return "controlled_shutdown" if reason == "controlled_shutdown" else "leader_fenced"
        return None

    def _partition(self, o: dict[str, Any], created: bool = False, starts_epoch: bool = False) -> None:
        """One observation of a partition state. ``starts_epoch``: a replica's line that it starts
        a new leader epoch (Partition.makeLeader/makeFollower), an election even when the state
        before it is unknown; other first sightings of a partition are not called elections."""
        key = (o["topic"], o["partition"])
        p = self.parts.setdefault(key, _Part())
        pe = o.get("partition_epoch")
        if pe is None:
            self.unused += 1
            return
        if p.partition_epoch is not None and pe <= p.partition_epoch:
            if pe == p.partition_epoch and p.event is not None:     # the same change seen again: fill gaps
                for f, v in (("isr", o.get("isr")), ("leader_recovery_state", o.get("leader_recovery_state")),
                             ("elr", o.get("elr"))):
                    if v is not None and p.event.get(f) is None:
                        p.event[f] = v
                        if f == "isr":
                            p.isr = p.last_isr = v
            else:
                self.unused += 1
            return
        new_leader = o.get("leader") if o.get("leader") is not None else p.leader
        new_le = o.get("leader_epoch") if o.get("leader_epoch") is not None else p.leader_epoch
        partial = o.get("partial")       # a diff: unchanged fields keep their values
        new_isr = o.get("isr") if o.get("isr") is not None else (p.isr if partial else None)
        lrs = o.get("leader_recovery_state")
        if lrs is None and (partial or o.get("observed") == "follower"):
            lrs = p.lrs
        old_leader, old_isr = p.leader, p.isr or []
        if o.get("leader_changed"):
            leader_changed = True       # the controller's diff names the leader: it changed, whatever we knew
        elif p.partition_epoch is None:
            leader_changed = created or starts_epoch
        else:
            leader_changed = old_leader != new_leader
        if created or pe == 0:          # PartitionRecord's first epoch: the partition was just created
            reason: str | None = "initial"
        elif o.get("unclean"):
            reason = "unclean"
        elif (key[0], key[1], pe) in self.accepted:
            reason = "alter_partition"
        else:
            gone = set(old_isr) - set(new_isr or old_isr)
            if old_leader is not None and old_leader != new_leader:
                gone.add(old_leader)
            reason = self._fence_reason(o["wall"], gone) if gone else None
            if reason is None and old_leader == -1 and new_leader is not None and new_leader >= 0 \
                    and new_leader in (p.last_isr or []):
                reason = "isr"          # an offline partition got a leader from its ISR again
        fields = {"topic": key[0], "partition": key[1], "leader": new_leader, "leader_epoch": new_le,
                  "partition_epoch": pe, "isr": new_isr, "elr": o.get("elr"), "reason": reason,
                  "leader_recovery_state": lrs}
        name = "leader_elected" if leader_changed and new_leader is not None and new_leader >= 0 else "isr_changed"
        p.event = self._emit(o, name, **fields)
        p.leader, p.leader_epoch, p.partition_epoch, p.isr, p.lrs = new_leader, new_le, pe, new_isr, lrs
        if new_isr is not None:
            p.last_isr = new_isr

    def _became_leader(self, o: dict[str, Any]) -> None:
        node = o["node"]
        key = (node, o["topic"], o["partition"])
        self.leo[key] = o["log_end_offset"]
        self._emit(o, "became_leader", topic=o["topic"], partition=o["partition"], broker=node,
                   leader_epoch=o["leader_epoch"], log_start_offset=self.lso.get(key),
                   log_end_offset=o["log_end_offset"], hwm=o["hwm"], local_log_size_bytes=None,
                   local_log_start_timestamp=None, leader_recovery_state=0)
        # Partition.makeLeader: the new state (this broker leads, with that ISR) as of this partition epoch
        self._partition({**o, "leader": node, "leader_recovery_state": 0, "observed": "leader"}, starts_epoch=True)
        self._leader_isr(o, node, o["leader_epoch"], o["partition_epoch"], o["isr"])

    def _leader_isr(self, o: dict[str, Any], node: int, leader_epoch: int | None, partition_epoch: int | None,
                    isr: list[int] | None) -> None:
        """The ISR this broker acts on as leader (Partition.partitionState: committed = maximal
        as far as INFO logs tell)."""
        if isr is None:
            return
        self.acting_isr[(node, o["topic"], o["partition"])] = (leader_epoch, list(isr))
        self._emit(o, "leader_isr", topic=o["topic"], partition=o["partition"], broker=node,
                   leader_epoch=leader_epoch, partition_epoch=partition_epoch, isr=list(isr), maximal_isr=list(isr))

    def _alter_accepted(self, o: dict[str, Any]) -> None:
        key = (o["topic"], o["partition"])
        p = self.parts.get(key)
        new_pe = o["partition_epoch"]
        if (key[0], key[1], new_pe) in self.accepted:       # one answer per partition epoch
            self.unused += 1
            return
        lrs = p.lrs if p is not None else None
        ev = self._emit(o, "alter_partition", topic=key[0], partition=key[1], leader=o["node"], new_isr=o["isr"],
                        broker_epochs=None, partition_epoch=new_pe - 1 if new_pe > 0 else new_pe, version=None,
                        leader_recovery_state=lrs, accepted=True, error=None, error_code=0)
        self.accepted[(key[0], key[1], new_pe)] = ev
        if p is not None and p.partition_epoch == new_pe and p.event is not None and p.event["reason"] is None:
            p.event["reason"] = "alter_partition"      # the metadata update was logged first
        # Partition.handleAlterPartitionUpdate: the committed state the controller answered
        self._partition({**o, "leader": o["node"], "leader_epoch": p.leader_epoch if p else None,
                         "leader_recovery_state": lrs})
        # Partition.handleAlterPartitionUpdate: the leader now acts on the committed ISR
        self._leader_isr(o, o["node"], p.leader_epoch if p else None, new_pe, o["isr"])

    def _alter_rejected(self, o: dict[str, Any], broker_side: bool) -> None:
        """Every rejection is an event: a leader re-sends a rejected AlterPartition until it is
        answered otherwise, and Kafka logs each answer on the controller
        (ReplicationControlManager.validateAlterPartitionData) and on the leader
        (Partition.handleAlterPartitionError). The two lines of one answer make one event: a
        line pairs with the other side's nearest unpaired line of the same partition, leader
        and error within :data:`SAME_REJECT_S`."""
        leader = o["node"] if broker_side else o["leader"]
        rej = None
        for e in reversed(self.events):
            if o["wall"] - e["wall"] > SAME_REJECT_S:
                break
            if (e["event"] == "alter_partition" and e["accepted"] is False and e["topic"] == o["topic"]
                    and e["partition"] == o["partition"] and e["error"] == o["error"] and e["leader"] == leader
                    and e.get("_side") not in (None, "broker" if broker_side else "controller", "both")):
                rej = e
                break
        if rej is not None:
            for f in ("new_isr", "broker_epochs", "partition_epoch"):    # the two lines complete each other
                if rej.get(f) is None and o.get(f) is not None:
                    rej[f] = o[f]
            rej["_side"] = "both"
            self.unused += 1
        else:
            p = self.parts.get((o["topic"], o["partition"]))
            rej = self._emit(o, "alter_partition", topic=o["topic"], partition=o["partition"], leader=leader,
                             new_isr=o.get("new_isr"), broker_epochs=o.get("broker_epochs"),
                             partition_epoch=o.get("partition_epoch"), version=None,
                             leader_recovery_state=p.lrs if p else None, accepted=False, error=o["error"],
                             error_code=o.get("error_code"))
            rej["_side"] = "broker" if broker_side else "controller"
        if broker_side:
            # Partition.handleAlterPartitionError: back to the committed state, which the line
            # states (CommittedPartitionState(isr=...)); else the last one this reader saw
            acting = self.acting_isr.get((o["node"], o["topic"], o["partition"]))
            isr = o.get("committed_isr") if o.get("committed_isr") is not None else (acting[1] if acting else None)
            le = o.get("leader_epoch") if o.get("leader_epoch") is not None else (acting[0] if acting else None)
            self._leader_isr(o, o["node"], le, o.get("partition_epoch"), isr)

    # ------------------------------------------------------------------ storage
    def _truncate(self, o: dict[str, Any]) -> None:
        key = (o["node"], o["topic"], o["partition"])
        to = o["to_offset"]
        last = self.last_trunc.get(key)
        if last is not None and last["to_offset"] == to and self.leo.get(key) == to and o["wall"] - last["wall"] <= 1.0:
            # ReplicaFetcherThread's "below high watermark" warning and UnifiedLog's own line of one cut
            if o.get("hwm") is not None and o["hwm"] > to:
                last["high_watermark"] = o["hwm"]
            else:
                self.unused += 1
            return
        pend = self.pending_trunc.pop(key, None) or {}
        frm = pend.get("from_offset", self.leo.get(key))
        self.leo[key] = to
        self.last_trunc[key] = self._emit(o, "truncation", topic=o["topic"], partition=o["partition"],
                                          broker=o["node"], from_offset=frm if frm is None or frm >= to else to,
                                          to_offset=to, reason=pend.get("reason"))
        if o.get("hwm") is not None and o["hwm"] > to:
            self.last_trunc[key]["high_watermark"] = o["hwm"]

    def _hwm_lowered(self, o: dict[str, Any]) -> None:
        """The high watermark a truncation cut below. Kafka states it in no truncation line at
        INFO (ReplicaFetcherThread.truncate's "below high watermark" warning is tested after
        UnifiedLog.truncateTo has already lowered it to the new end, so it cannot fire for a
        cut tail), but UnifiedLog.updateHighWatermarkMetadata warns when that lowering happens:
        down to the truncation's offset, within a second of it, it is that cut's."""
        key = (o["node"], o["topic"], o["partition"])
        last = self.last_trunc.get(key)
        if (last is not None and last["to_offset"] == o["to_hwm"] and o["wall"] - last["wall"] <= 1.0
                and o["from_hwm"] > o["to_hwm"]):
            last["high_watermark"] = o["from_hwm"]
        else:
            self.unused += 1

    def _loaded(self, o: dict[str, Any]) -> None:
        key = (o["node"], o["topic"], o["partition"])
        if o.get("log_end_offset") is not None:
            self.leo[key] = o["log_end_offset"]
        if o.get("log_start_offset") is not None:
            self.lso[key] = o["log_start_offset"]
        d = o["dir"].rstrip("/")
        parent = d.rsplit("/", 1)[0] if "/" in d else d
        unclean = self.unclean_dirs.get((o["node"], parent))
        if unclean is None:
            unclean = key in self.recovering
        rp = self.recovering.pop(key, None)
        corrupt = key in self.corrupt
        self.corrupt.discard(key)
        if not unclean:
            return
        self._emit(o, "recovery", topic=o["topic"], partition=o["partition"], broker=o["node"],
                   recovery_point=rp if rp is not None else o.get("log_end_offset"),
                   log_end_offset=o.get("log_end_offset"), truncated_bytes=None if corrupt else 0,
                   reason="unclean_shutdown" + (": corruption found" if corrupt else ""))

    # ------------------------------------------------------------------ entry
    def add(self, o: dict[str, Any]) -> None:
        k = o["kind"]
        if o.get("replayed") and o.get("host") in self.loading:
            self._replay(o)
            return
        if k == "process_start":
            self.loading.add(o["host"])
        elif k == "controller_standby":
            self.loading.discard(o["host"])
        elif k == "registered":
            self._registered(o)
        elif k == "fence":
            self._fence(o)
        elif k == "unfence":
            self._unfence(o)
        elif k == "partition_created":
            self._partition(o, created=True)
        elif k == "partition_state":
            self._partition(o)
            if o.get("observed") == "leader":
                # Partition.makeLeader with the same leader epoch ("Skipped the become-leader state
                # change ... since it is already the leader"): updateAssignmentAndIsr ran first, so
                # the leader now acts on this committed ISR - the way an AlterPartition answer
                # reaches it when the metadata update wins the race with the response
                self._leader_isr(o, o["node"], o.get("leader_epoch"), o.get("partition_epoch"), o.get("isr"))
        elif k == "became_leader":
            self._became_leader(o)
        elif k == "became_follower":
            self.leo[(o["node"], o["topic"], o["partition"])] = o["log_end_offset"]
            self._partition({**o, "isr": None, "observed": "follower"}, starts_epoch=True)
        elif k == "alter_accepted":
            self._alter_accepted(o)
        elif k == "alter_rejected":
            self._alter_rejected(o, broker_side=False)
        elif k == "alter_failed":
            self._alter_rejected(o, broker_side=True)
        elif k == "leo":
            self.leo[(o["node"], o["topic"], o["partition"])] = o["log_end_offset"]
        elif k == "truncate_noop":
            # UnifiedLog.truncateTo past the end: nothing cut, and the fetcher's reason is spent
            key = (o["node"], o["topic"], o["partition"])
            self.leo[key] = o["log_end_offset"]
            self.pending_trunc.pop(key, None)
        elif k == "truncate_reason":
            self.pending_trunc[(o["node"], o["topic"], o["partition"])] = o
        elif k == "truncate":
            self._truncate(o)
        elif k == "hwm_lowered":
            self._hwm_lowered(o)
        elif k == "truncation":
            self.leo[(o["node"], o["topic"], o["partition"])] = o["to_offset"]
            self._emit(o, "truncation", topic=o["topic"], partition=o["partition"], broker=o["node"],
                       from_offset=o["from_offset"], to_offset=o["to_offset"], reason=o["reason"])
        elif k == "log_start":
            self.shutdown_clean.pop(o["node"], None)    # a new start: only its own lines tell
            self.offline = {nd for nd in self.offline if nd[0] != o["node"]}
        elif k == "log_dir_failed":
            # LogDirFailureChannel: a dir goes offline once per process (maybeAddOfflineLogDir
            # logs every error, queues the dir once); kraftsim's log_dir_offline
            key = (o["node"], o["dir"].rstrip("/") or "/")
            if key in self.offline:
                self.unused += 1
            else:
                self.offline.add(key)
                self._emit(o, "log_dir_offline", log_dir=key[1], error=o["error"])
        elif k == "log_dir":
            self.unclean_dirs[(o["node"], o["dir"].rstrip("/"))] = not o["clean"]
            self.shutdown_clean[o["node"]] = o["clean"]     # (several log dirs: the last one's word)
            # LogManager.loadLogs: the dir loaded with recovery or, with a clean-shutdown file, without
            # (kraftsim's log_dir_loaded; checkers/effects.py log_not_recovered, KAFKA-15375)
            self._emit(o, "log_dir_loaded", log_dir=o["dir"].rstrip("/") or "/", clean_shutdown=o["clean"])
        elif k == "recovering":
            self.recovering.setdefault((o["node"], o["topic"], o["partition"]), o["segment"])
        elif k == "corruption":
            self.corrupt.add((o["node"], o["topic"], o["partition"]))
        elif k == "log_loaded":
            self._loaded(o)
        elif k == "controller_active":
            self.loading.discard(o["host"])
            self._emit(o, "controller_activated", controller_epoch=o["controller_epoch"])
        elif k == "fatal_fault":
            # kraftsim's fatal_fault (checkers/halts.py): ProcessTerminatingFaultHandler always halts
            self._emit(o, "fatal_fault", component="raft" if "raft" in o["fault"] else None, fault=o["fault"],
                       error=o["error"], halted=True)
        elif k == "controller_renounced":
            # QuorumMetaLogListener.handleLeaderChange names the new leader; handleEventException
            # names the failed event and the offset the controller reverts to instead
            self._emit(o, "controller_renounced", controller_epoch=o["controller_epoch"],
                       new_controller_epoch=o.get("new_controller_epoch"), new_controller=o.get("new_controller"),
                       reason=o.get("reason"), last_committed_offset=o.get("last_committed_offset"))
        else:
            self.unused += 1
