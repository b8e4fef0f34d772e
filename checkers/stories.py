"""Loss stories: per topic-partition that lost writes, what happened, in order, and which rule let it.

The attribution (checkers/attribution.py) lists, per lost write, every fault and event in its
window - on a KIP-903 run some twenty lines per row, the same lines for 1,400 rows. A reviewer
wants the causal chain once per partition: which replica came back short and why, how it got
(back) into the ISR, which election made it leader, which Kafka rule was (or was not) applied,
and what was lost. This module classifies that chain into a stable *mechanism* label
(:data:`MECHANISMS`, the contract in docs/verdict-format.md §stories) and tells it in 3-8
sentences, each step pointing at the event line it comes from.

Inputs are the run's small logs as the driver already holds them (checkers/load.py: timeline
rows, cluster and proxy events with ``source`` and ``line``), run.json, the features the run
recorded as in force (checkers/features.py: which Kafka rules were on) and the per-partition
extent of the lost writes the partition tasks return (checkers/kernel.py ``lost_extent``).
Pure Python and stdlib only: the report, ``faultline suite``, ``faultline shrink`` and the
Kafka-log event source use the same labels, and none of them needs Spark to read them.

The classifier reads evidence, never a scenario name: the same events from Kafka's own logs
give the same label. A pattern it does not recognise is ``unexplained`` - said plainly, with
the events it saw.

A second kind of story (``kind`` :data:`EVENT_STORY`, :func:`build_event_stories`) tells, from
the same event rows and steps, what happened to each partition when there is no history to say
what was lost (a directory holding only Kafka's logs, checkers/events_only.py): its elections,
ISR changes, AlterPartition answers, truncations, recoveries, fences and controller failovers.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from checkers.features import FeaturesInForce, Gate
from checkers.values import as_int, num, page_cache_cuts

#: the stable machine labels (docs/verdict-format.md): the primary one is the protocol step that
#: let the loss through; a story lists the others that also applied
MECHANISMS: dict[str, str] = {
    "stale_alter_partition_readmit": "replica re-added to the ISR by a stale AlterPartition (KIP-903)",
    "last_replica_standing": "last ISR member re-elected after losing its tail (KIP-966)",
    "unclean_election": "unclean election of an out-of-sync replica (unclean.leader.election.enable, KIP-704)",
    "empty_replica_elected": "an empty or truncated replica elected leader",
    "truncated_to_lossy_leader": "followers truncated to a leader that lost its tail",
    "ack_below_min_isr": "acknowledged with fewer copies than min.insync.replicas",
    "metadata_log_lost": "the KRaft quorum lost committed metadata: partition state went back to before the loss (KIP-853)",
    "page_cache_cut_uncertain": "uncertain (page-cache cut): lost only in offsets the cut removed although "
                                "Kafka may have fsynced them",
    "unexplained": "no recorded fault or event explains the loss",
}

#: a story's ``kind``: why writes were lost (one per partition that lost writes), or what the
#: cluster's events say happened to a partition (or to the cluster) when no history was checked
#: (verdict.json ``event_stories``, checkers/events_only.py)
LOSS_STORY, EVENT_STORY = "loss", "events"

#: cluster clocks vs the run clock (as checkers/attribution.py)
SLACK_S = 2.0
#: the most sentences a story tells (the last one is always what was lost)
MAX_SENTENCES = 8

_SHORTENING_FAULTS = ("disk-wipe", "wipe")
#: KafkaRaftClient.handleFetchResponse's KafkaException, logged by the fatal fault handler (real
#: Kafka) or kraftsim's fatal_fault: a replica of __cluster_metadata told to cut records it had
#: seen committed - the quorum elected a leader without them
_METADATA_LOST = re.compile(r"requested truncation to offset (-?\d+), which is below the current high watermark\D*(-?\d+)")
_CRASH_FAULTS = ("reboot", "kill", "restart", "power", "page-cache")




def _t(v: float | None) -> str:
    return "t=?" if v is None else f"t={v:.3f}s"


def _truthy(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.strip().lower() in ("true", "1", "yes", "on"))


def _ref(row: dict[str, Any] | None) -> dict[str, Any]:
    if not row:
        return {"source": None, "line": None}
    return {"source": row.get("source"), "line": row.get("line")}


def unclean_allowed(run: dict[str, Any]) -> bool:
    """unclean.leader.election.enable as the run set it: the topic's config over the target's
    switch (Kafka: a topic config overrides the broker default;
    ReplicationControlManager -> ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic)."""
    topic = run.get("topic") if isinstance(run.get("topic"), dict) else {}
    for src in (topic.get("config") if isinstance(topic.get("config"), dict) else {}, topic,
                run.get("settings") if isinstance(run.get("settings"), dict) else {}, run.get("switches") or {}):
        for k in ("unclean.leader.election.enable", "unclean_leader_election_enable"):
            if k in src:
                return _truthy(src[k])
    return False


def _gate_state(g: Gate) -> str:
    """How a story names a gate's state: on or off and what decided it (the run's own record,
    checkers/features.py), or that the run does not say - never a guess from a version string."""
    if g.enabled is None:
        return f"not recorded as on or off ({g.because()})"
    return f"on ({g.because()}), yet did not stop it" if g.enabled else f"off ({g.because()})"


#: what ``allowed_by`` names when every replica that held the lost writes lost its unflushed
#: copy: a mechanism Kafka's defaults allow (log.flush.interval.messages/ms unset: an acks=all
#: write is acknowledged from the replicas' page cache, UnifiedLog.append does not fsync)
UNFLUSHED_LOSS = "every replica's unflushed data lost (no fsync before the ack, Kafka's default flush settings)"


def _holders(state: list[dict[str, Any]], a0: float | None, prior_isr: list[int] | None) -> list[int]:
    """The replicas that held the lost writes: the ISR when the first of them was acknowledged
    (acks=all waits for every ISR member, Partition.checkEnoughReplicasReachOffset), else the
    ISR before the election."""
    if a0 is not None:
        before = [e for e in state if e["t"] <= a0]
        if before:
            return sorted({x for x in before[-1].get("isr") or [] if as_int(x) is not None and as_int(x) >= 0})
    return sorted(set(prior_isr or []))


@dataclass
class _World:
    """The run's events, indexed the way the classifier asks."""
    events: list[dict[str, Any]]
    faults: list[dict[str, Any]]                 # {t, stop, fault, brokers, id, row}
    host_node: dict[str, int] = field(default_factory=dict)
    #: page-cache cuts' uncertain ranges: {t, host, broker, topic, partition, cut: (from, to), why, row}
    uncertain_cuts: list[dict[str, Any]] = field(default_factory=list)

    def broker_of(self, name: str) -> int | None:
        if name in self.host_node:
            return self.host_node[name]
        m = re.search(r"(\d+)$", name or "")
        return int(m.group(1)) if m else None


def _world(events: list[dict[str, Any]], timeline: list[dict[str, Any]]) -> _World:
    evs = sorted((e for e in events if num(e.get("t")) is not None), key=lambda e: (e["t"], e.get("line") or 0))
    host_node: dict[str, int] = {}
    for e in evs:
        n = as_int(e.get("node"))
        h = e.get("host")
        if h and h not in ("proxy", "controller") and n is not None and n >= 0:
            host_node.setdefault(h, n)
    w = _World(evs, [], host_node)
    starts: dict[str, dict[str, Any]] = {}
    stops: dict[str, float] = {}
    for r in timeline:
        if r.get("kind") != "nemesis" or num(r.get("t")) is None:
            continue
        fid = str(r.get("id"))
        if r.get("phase") == "start":
            starts.setdefault(fid, r)
        elif r.get("phase") == "stop":
            stops[fid] = max(stops.get(fid, -math.inf), float(r["t"]))
    for fid, r in starts.items():
        targets = [str(x) for x in r.get("targets") or [] if x is not None]
        w.faults.append({"t": float(r["t"]), "stop": stops.get(fid), "fault": str(r.get("fault") or "?"), "id": fid,
                         "targets": targets, "brokers": [b for b in (w.broker_of(x) for x in targets) if b is not None],
                         "row": r})
    w.faults.sort(key=lambda f: f["t"])
    w.uncertain_cuts = _uncertain_cuts(timeline, w)
    return w


def _uncertain_cuts(timeline: list[dict[str, Any]], w: _World) -> list[dict[str, Any]]:
    """The ``page_cache_cut.uncertain`` ranges the reboot nemesis records in its timeline note
    (docs/nemeses.md: offsets cut although Kafka may have fsynced them, e.g. with
    ``log.flush.interval.messages`` or ``.ms`` set, or unknown flush settings)."""
    out = []
    for r, host, pc in page_cache_cuts(timeline):
        for u in pc.get("uncertain") or []:
            cut = u.get("cut") if isinstance(u, dict) else None
            if isinstance(cut, list) and len(cut) == 2 and as_int(cut[0]) is not None and as_int(cut[1]) is not None:
                out.append({"t": float(r["t"]), "host": host, "broker": w.broker_of(host), "topic": u.get("topic"),
                            "partition": as_int(u.get("partition")), "cut": (as_int(cut[0]), as_int(cut[1])),
                            "why": "; ".join(str(x) for x in u.get("why") or []), "row": r})
    return out


def _tp(e: dict[str, Any], topic: str, partition: int) -> bool:
    return e.get("topic") == topic and as_int(e.get("partition")) == partition


def _epochs(e: dict[str, Any]) -> dict[int, int]:
    raw = e.get("broker_epochs")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    if isinstance(raw, dict):
        return {int(k): int(v) for k, v in raw.items() if as_int(k) is not None and as_int(v) is not None}
    if isinstance(raw, list):   # [{"broker_id": b, "broker_epoch": e}, ...]
        out = {}
        for x in raw:
            if isinstance(x, dict):
                b, ep = as_int(x.get("broker_id", x.get("broker"))), as_int(x.get("broker_epoch", x.get("epoch")))
                if b is not None and ep is not None:
                    out[b] = ep
        return out
    return {}


@dataclass
class _Step:
    t: float | None
    kind: str
    text: str
    row: dict[str, Any] | None
    rank: int = 5          # lower = keep when the story must be shortened
    count: int | None = None   # an events story's grouped repeats (e.g. rejections): how many

    def as_dict(self) -> dict[str, Any]:
        return {"t": None if self.t is None else round(self.t, 3), "kind": self.kind, "text": self.text,
                "event": _ref(self.row)}


def _overrule(primary: str, mechs: list[str], cause: str) -> str:
    """``cause`` explains the loss before the step found so far, which stays first of the others."""
    if primary != "unexplained":
        mechs.insert(0, primary)
    return cause


def _node_of(e: dict[str, Any]) -> int | None:
    """The broker an event is about: its ``broker`` field, else the node that wrote it."""
    b = as_int(e.get("broker"))
    return b if b is not None else as_int(e.get("node"))


def _story(st: dict[str, Any], w: _World, run: dict[str, Any], min_isr: int | None,
           features: FeaturesInForce) -> dict[str, Any]:
    topic, part = st["topic"], int(st["partition"])
    n = int(st.get("lost") or 0)
    l0, l1 = as_int(st.get("lost_first_offset")), as_int(st.get("lost_last_offset"))
    a0, a1 = num(st.get("lost_first_ack_t")), num(st.get("lost_last_ack_t"))
    m1 = num(st.get("lost_last_miss_t"))
    lo = (a0 if a0 is not None else 0.0) - SLACK_S
    hi = (m1 if m1 is not None else math.inf) + SLACK_S
    pe = [e for e in w.events if _tp(e, topic, part)]
    # the controller's side of an AlterPartition; the proxy's copy only when the controller wrote none
    ctl_ap = [e for e in pe if e.get("event") == "alter_partition" and e.get("host") != "proxy"]
    if not ctl_ap:
        ctl_ap = [e for e in w.events if e.get("event") == "alter_partition" and e.get("host") == "proxy"
                  and as_int(e.get("partition")) == part]
    state = [e for e in pe if e.get("event") in ("leader_elected", "isr_changed")]
    l0k = l0 if l0 is not None else -1

    def state_before(t: float) -> dict[str, Any] | None:
        """The partition's state before ``t``. A change read from a line that states no ISR
        (real Kafka: a replica's state-change line, checkers/kafkalog gives ``isr`` null) keeps
        the last ISR stated before it: an unknown ISR is not an empty one."""
        prior = [e for e in state if e["t"] < t]
        if not prior:
            return None
        last = prior[-1]
        if last.get("isr") is None:
            known = next((e for e in reversed(prior) if e.get("isr") is not None), None)
            if known is not None:
                last = {**last, "isr": known["isr"]}
        return last

    def became(b: int, epoch: int | None, after: float) -> dict[str, Any] | None:
        for e in pe:
            if e.get("event") == "became_leader" and _node_of(e) == b and e["t"] >= after - SLACK_S and (
                    epoch is None or as_int(e.get("leader_epoch")) in (None, epoch)):
                return e
        return None

    def shortening(b: int, before: float) -> tuple[str, dict[str, Any], float] | None:
        """Why broker b's log lacked the lost offsets by ``before``: a wipe, a recovery or a
        truncation that left it at or below the first lost offset (latest first)."""
        found: list[tuple[float, str, dict[str, Any]]] = []
        for f in w.faults:
            if f["t"] <= before and b in f["brokers"] and any(k in f["fault"] for k in _SHORTENING_FAULTS):
                found.append((f["t"], "wipe", f))
        for e in pe:
            if e["t"] > before + SLACK_S or _node_of(e) != b:
                continue
            leo = as_int(e.get("log_end_offset"))
            if e.get("event") == "recovery" and leo is not None and leo <= l0k and e["t"] >= lo:
                found.append((e["t"], "recovery", e))
            to = as_int(e.get("to_offset"))
            if e.get("event") == "truncation" and to is not None and to <= l0k and e["t"] >= lo:
                found.append((e["t"], "truncation", e))
        if not found:
            return None
        t, kind, row = max(found, key=lambda x: x[0])
        return kind, row, t

    def crash(b: int, t0: float, t1: float) -> dict[str, Any] | None:
        """The latest crash-like fault of broker b that started in [t0, t1]."""
        got = [f for f in w.faults if t0 <= f["t"] <= t1 and b in f["brokers"]
               and any(k in f["fault"] for k in _CRASH_FAULTS)]
        return got[-1] if got else None

    def own_loss(b: int) -> tuple[str, dict[str, Any], float] | None:
        """Broker b lost the writes by itself: its disk wiped, or its log recovered ending at or
        below the first lost offset (the unflushed tail gone with the page cache), in the window."""
        got = shortening(b, hi if math.isfinite(hi) else math.inf)
        if got is not None and got[0] in ("wipe", "recovery"):
            return got
        found = [(f["t"], f) for f in w.faults if lo <= f["t"] <= hi and b in f["brokers"]
                 and any(k in f["fault"] for k in _SHORTENING_FAULTS)]
        return ("wipe", found[-1][1], found[-1][0]) if found else None

    def registered(b: int, t0: float, t1: float) -> dict[str, Any] | None:
        regs = [e for e in w.events if e.get("event") == "broker_registered" and _node_of(e) == b
                and t0 - SLACK_S <= e["t"] <= t1]
        return regs[-1] if regs else None

    steps: list[_Step] = []
    mechs: list[str] = []
    primary = "unexplained"
    allowed_by = None

    # 1. the election that put a leader without the lost writes in charge
    elections = [e for e in pe if e.get("event") == "leader_elected" and lo <= e["t"] <= hi
                 and as_int(e.get("leader")) is not None and as_int(e.get("leader")) >= 0
                 and e.get("reason") != "initial"]
    loss_el = None
    why_short = None
    # First the winners whose own became_leader shows a log at or below the first lost offset:
    # what the log held at takeover is direct evidence. Only then a shortening near the election:
    # its time window has slack for clock skew, so a truncation that came *after* the election,
    # caused by a later leader (a dead ISR member elected cleanly, then an unclean winner that
    # everyone truncated to), could otherwise be read as the earlier winner's shortness.
    # Elections after the first lost write was acknowledged come first: one within the clock-skew
    # slack before it is a candidate only when no later one explains the loss - its winner may
    # have taken over short and then acknowledged the lost writes itself, lost by a later
    # election (a kill, a clean election, then an unclean one back to the killed leader).
    ordered = ([e for e in elections if a0 is None or e["t"] >= a0]
               + [e for e in elections if a0 is not None and e["t"] < a0])
    for direct in (True, False):
        for e in ordered:
            b = as_int(e.get("leader"))
            bl = became(b, as_int(e.get("leader_epoch")), e["t"])
            shown = bl is not None and as_int(bl.get("log_end_offset")) is not None \
                and as_int(bl.get("log_end_offset")) <= l0k
            sh = shortening(b, e["t"])
            if (shown and direct) or (not direct and (shown or sh)):
                loss_el, why_short = e, sh
                break
        if loss_el is not None:
            break
    if loss_el is None:     # no winner known to be short: the first leader change after the first ack
        loss_el = next((e for e in elections if a0 is None or e["t"] >= a0), None)
    follower_trunc = [e for e in pe if e.get("event") == "truncation" and lo <= e["t"] <= hi
                      and as_int(e.get("to_offset")) is not None and as_int(e.get("to_offset")) <= l0k
                      and (as_int(e.get("from_offset")) or 0) > l0k
                      and (loss_el is None or (_node_of(e) != as_int(loss_el.get("leader")) and e["t"] >= loss_el["t"]))]

    if loss_el is not None:
        wb = as_int(loss_el.get("leader"))
        et = loss_el["t"]
        ep = as_int(loss_el.get("leader_epoch"))
        prior = state_before(et)
        prior_isr = [x for x in (prior or {}).get("isr") or [] if x is not None] if prior else None
        old_leader = as_int((prior or {}).get("leader"))
        reason = str(loss_el.get("reason") or "")
        bl = became(wb, ep, et)
        leo = as_int(bl.get("log_end_offset")) if bl else None
        # why the winner was short
        if why_short:
            kind, row, t = why_short
            if kind == "wipe":
                steps.append(_Step(t, "fault", f"At {_t(t)} broker {wb}'s disk was wiped ({row['fault']} {row['id']}): "
                                   f"its copy of {topic}@{part} was gone.", row["row"], 1))
            elif kind == "recovery":
                cr = crash(wb, lo - 60.0, t)
                if cr is not None:
                    steps.append(_Step(cr["t"], "fault", f"At {_t(cr['t'])} broker {wb} was hit by {cr['fault']} "
                                       f"({cr['id']}).", cr["row"], 3))
                steps.append(_Step(t, "recovery", f"At {_t(t)} broker {wb} recovered {topic}@{part} with its log "
                                   f"ending at offset {row.get('log_end_offset')} ({row.get('reason') or 'recovery'}): "
                                   f"it held none of the lost writes.", row, 1))
            else:
                steps.append(_Step(t, "truncation", f"At {_t(t)} broker {wb} truncated {topic}@{part} from offset "
                                   f"{row.get('from_offset')} to {row.get('to_offset')} ({row.get('reason') or 'truncation'}).",
                                   row, 1))
        short_t = why_short[2] if why_short else None
        reg = registered(wb, short_t if short_t is not None else lo, et)
        if reg is not None:
            clean = reg.get("clean_shutdown")
            steps.append(_Step(reg["t"], "broker_registered",
                               f"At {_t(reg['t'])} broker {wb} registered again with broker epoch {reg.get('broker_epoch')}"
                               + (" after an unclean shutdown" if clean is False else "") + ".", reg, 4))
        # how it got into the ISR it was elected from: an AlterPartition accepted after it came back short
        readmit = None
        if short_t is not None:
            for ap in ctl_ap:
                if short_t <= ap["t"] <= et and ap.get("accepted") is not False and wb in (ap.get("new_isr") or []):
                    readmit = ap
        if reason == "unclean" or (prior_isr is not None and wb not in prior_isr
                                   and reason not in ("elr", "last_known_leader")):
            primary = "unclean_election"
            allowed = unclean_allowed(run)
            # The counterfactual: would the writes have survived with unclean election off? Only
            # if a replica that held them (the ISR when they were acknowledged) still held them
            # when it came back - Kafka would then have waited for it. A holder whose own log
            # came back short (recovered without its unflushed tail, or wiped) could not: it
            # would be elected from the ISR with the same hole, or, with KIP-966's ELR, leave the
            # partition without a leader - the writes were gone from every replica either way.
            holders = _holders(state, a0, prior_isr)
            own = {h: own_loss(h) for h in holders}
            every_copy_lost = bool(holders) and all(own.values())
            if every_copy_lost:
                for h, (kind, row, t) in sorted(own.items()):
                    if kind == "wipe":
                        steps.append(_Step(t, "fault", f"At {_t(t)} broker {h}'s disk was wiped ({row['fault']} "
                                           f"{row['id']}): its copy of {topic}@{part} was gone.", row["row"], 1))
                    else:
                        steps.append(_Step(t, "recovery", f"At {_t(t)} broker {h}, which held the lost writes in the "
                                           f"ISR, recovered {topic}@{part} with its log ending at offset "
                                           f"{row.get('log_end_offset')} ({row.get('reason') or 'recovery'}): its "
                                           f"unflushed copy of them was lost in the same failure.", row, 1))
            causes = ([UNFLUSHED_LOSS] if every_copy_lost else []) + (["unclean.leader.election.enable=true"]
                                                                      if allowed else [])
            allowed_by = "; ".join(causes) or None
            if every_copy_lost:
                rule = ((f"allowed by unclean.leader.election.enable=true, but not the loss's only cause: every "
                         f"replica that held the writes ({', '.join(map(str, holders))}) lost its unflushed copy of "
                         f"them, so with unclean leader election off they were lost all the same "
                         f"(Kafka acknowledges before fsync; ELR at best keeps the partition offline)") if allowed else
                        f"although unclean.leader.election.enable is not set; every replica that held the writes "
                        f"({', '.join(map(str, holders))}) had lost its unflushed copy of them anyway")
            else:
                rule = ("allowed by unclean.leader.election.enable=true (ReplicationControlManager: an unclean "
                        "election picks any live replica when no ISR member is left, KIP-704)" if allowed else
                        "although unclean.leader.election.enable is not set (an election outside the ISR breaks "
                        "PartitionChangeBuilder.electAnyLeader's rule)")
            outside = ("with no ISR member left" if prior_isr == [] else
                       f"from outside the ISR {prior_isr if prior_isr is not None else '?'}")
            steps.append(_Step(et, "election", f"At {_t(et)} the controller elected broker {wb} leader of {topic}@{part} "
                               f"(leader epoch {ep}) {outside}: an unclean election, {rule}.", loss_el, 0))
        elif reason in ("elr", "last_known_leader") or (
                prior_isr is not None and prior_isr == [wb] and why_short and why_short[0] in ("recovery", "truncation")):
            primary = "last_replica_standing"
            alone = next((e for e in state if e["t"] < et and [x for x in e.get("isr") or [] if x is not None] == [wb]
                          and as_int(e.get("leader")) == wb), None)
            if alone is not None:
                steps.append(_Step(alone["t"], "isr_changed", f"At {_t(alone['t'])} the ISR of {topic}@{part} shrank to "
                                   f"[{wb}] (partition epoch {alone.get('partition_epoch')}): broker {wb} alone held "
                                   f"the writes acknowledged from then on.", alone, 2))
            rule = ("KIP-966's rule (ReplicationControlManager.handleBrokerUncleanShutdown: a broker back from an "
                    "unclean shutdown leaves the ELR) was " + _gate_state(features.gate("elr")))
            steps.append(_Step(et, "election", f"At {_t(et)} broker {wb}, the last replica standing in the ISR "
                               f"{prior_isr if prior_isr is not None else ''}, was elected leader again (leader epoch {ep}, "
                               f"reason {reason or '?'}) with its shortened log; {rule}.", loss_el, 0))
        else:
            if readmit is not None:
                primary = "stale_alter_partition_readmit"
                bep = _epochs(readmit)
                sent = bep.get(wb)
                ver = as_int(readmit.get("version"))
                carried = (f"carrying broker epoch {sent} for it" if sent is not None else
                           f"carrying no broker epochs (AlterPartition v{ver})" if ver is not None and ver < 3 else
                           "carrying no broker epoch for it")
                rule = ("KIP-903's check (ReplicationControlManager.ineligibleReplicasForIsr: reject a replica whose "
                        "broker epoch does not match its registration with INELIGIBLE_REPLICA) was "
                        + _gate_state(features.gate("kip903")))
                steps.append(_Step(readmit["t"], "alter_partition",
                                   f"At {_t(readmit['t'])} the controller accepted an AlterPartition from leader "
                                   f"{readmit.get('leader')} that put broker {wb} back into the ISR {readmit.get('new_isr')} "
                                   f"(partition epoch {readmit.get('partition_epoch')}), {carried}; {rule}.", readmit, 0))
                mechs.append("empty_replica_elected")
            elif why_short is not None or (leo is not None and leo <= l0k):
                primary = "empty_replica_elected"
            short_txt = (" with an empty log" if leo == 0 or (why_short and why_short[0] == "wipe") else
                         f" with its log ending at offset {leo}" if leo is not None else "")
            rule = ("a clean election from the ISR (PartitionChangeBuilder.electAnyLeader); Kafka assumes every ISR "
                    "member holds every acknowledged record (Partition.checkEnoughReplicasReachOffset)")
            steps.append(_Step(et, "election", f"At {_t(et)} the controller elected broker {wb} leader of {topic}@{part} "
                               f"(leader epoch {ep}, ISR {loss_el.get('isr')}){short_txt}: {rule}.", loss_el, 0))
        # the old leader's failure
        if old_leader is not None and old_leader >= 0 and old_leader != wb:
            cr = crash(old_leader, lo - 5.0, et) or next(
                (f for f in reversed(w.faults) if lo - 5.0 <= f["t"] <= et and old_leader in f["brokers"]), None)
            if cr is not None:
                steps.append(_Step(cr["t"], "fault", f"At {_t(cr['t'])} leader broker {old_leader} was hit by "
                                   f"{cr['fault']} ({cr['id']}).", cr["row"], 3))
        told = why_short is not None or any(s.kind == "election" and ("log ending" in s.text or "empty log" in s.text)
                                            for s in steps)
        if bl is not None and leo is not None and not told:
            steps.append(_Step(bl["t"], "became_leader", f"Broker {wb} took over at {_t(bl['t'])} with log end offset {leo} "
                               f"(HWM {bl.get('hwm')}): it held none of the lost writes from offset {l0} on.", bl, 2))
        if (primary == "unexplained" and follower_trunc) or (follower_trunc and primary != "unexplained"):
            if primary == "unexplained":
                primary = "truncated_to_lossy_leader"
            else:
                mechs.append("truncated_to_lossy_leader")
    elif follower_trunc:
        primary = "truncated_to_lossy_leader"
        rows = [e for e in state if e["t"] <= follower_trunc[0]["t"]]
        leader = as_int(rows[-1].get("leader")) if rows else None
        who = f"leader broker {leader}" if leader is not None and leader >= 0 else "the leader"
        steps.append(_Step(follower_trunc[0]["t"], "note",
                           f"No election of {topic}@{part} is recorded between the first ack and the miss, yet "
                           f"{who}'s followers truncated below the acknowledged offsets to match it: its log had lost "
                           f"the tail (as a restarted broker acting on its old leadership would).", None, 0))
    if follower_trunc:
        brokers = sorted({b for b in (_node_of(e) for e in follower_trunc) if b is not None})
        e0 = follower_trunc[0]
        leader_txt = f" to match leader broker {as_int(loss_el.get('leader'))}" if loss_el is not None else ""
        steps.append(_Step(e0["t"], "truncation", f"At {_t(e0['t'])} broker{'s' if len(brokers) > 1 else ''} "
                           f"{', '.join(map(str, brokers))} truncated {topic}@{part} from offset {e0.get('from_offset')} "
                           f"to {e0.get('to_offset')}{leader_txt} ({e0.get('reason') or 'truncation'}; "
                           f"Partition.truncateTo): the last copies of the lost writes were gone.", e0,
                           2 if primary != "truncated_to_lossy_leader" else 0))
    below = int(st.get("lost_below_min_isr") or 0)
    if below:
        if below >= n and primary in ("unexplained", "truncated_to_lossy_leader", "empty_replica_elected"):
            if primary != "unexplained":
                mechs.insert(0, primary)
            primary = "ack_below_min_isr"
        else:
            mechs.append("ack_below_min_isr")
        how = ("fewer replicas than that held them, by the followers' own log end offsets"
               if st.get("lost_below_min_isr_by") == "replica_logs" else "the ISR was below it")
        steps.append(_Step(a0, "ack", f"{below} of the {n} lost writes were acknowledged below "
                           f"min.insync.replicas={min_isr} ({how}; Partition.checkEnoughReplicasReachOffset must "
                           f"answer NOT_ENOUGH_REPLICAS instead).", None, 0 if primary == "ack_below_min_isr" else 2))
    if primary == "unexplained":
        seen = sorted({f"{f['fault']}[{','.join(f['targets'])}]" for f in w.faults if f["t"] <= hi
                       and (f["stop"] is None or f["stop"] >= lo - 30.0)})
        n_el = len(elections)
        steps.append(_Step(a0, "note", f"Unexplained: no election, recovery or truncation of {topic}@{part} recorded "
                           f"between the first ack and the last miss shows where the writes went.", None, 0))
        steps.append(_Step(a0, "note", f"In that window: {n_el} leader election{'s' if n_el != 1 else ''} of the "
                           f"partition, {len(pe)} events of it in all, faults {', '.join(seen) or 'none'}; "
                           f"the raw evidence is below.", None, 0))
    # the metadata quorum forgot committed records before the loss: whatever election lost the
    # writes ran on partition state rolled back to before them (a leader epoch, an ISR reissued)
    md = next((e for e in w.events if e.get("event") == "fatal_fault" and e["t"] <= hi
               and _METADATA_LOST.search(str(e.get("error") or ""))), None)
    if md is not None:
        m = _METADATA_LOST.search(str(md.get("error")))
        assert m is not None
        primary = _overrule(primary, mechs, "metadata_log_lost")
        steps.append(_Step(md["t"], "fault", f"At {_t(md['t'])} {md.get('host') or 'a broker'} was told by the "
                           f"metadata quorum's new leader to truncate __cluster_metadata to offset {m.group(1)}, below "
                           f"its high watermark {m.group(2)} (KafkaRaftClient.handleFetchResponse; it halted): the "
                           f"quorum had lost committed metadata, and the partition's leader and ISR went back to "
                           f"an older state.", md, 0))
    # every lost offset lies where a page-cache cut of the broker that came back short removed
    # bytes Kafka may have fsynced: a real power loss may have kept them, so not shown to be Kafka's
    if l0 is not None and l1 is not None:
        short = as_int(loss_el.get("leader")) if loss_el is not None else None
        unc = [c for c in w.uncertain_cuts if c["topic"] == topic and c["partition"] == part
               and c["t"] <= hi and c["cut"][0] <= l0 and l1 < c["cut"][1] and (short is None or c["broker"] == short)]
        if unc:
            c = unc[-1]
            primary = _overrule(primary, mechs, "page_cache_cut_uncertain")
            steps.append(_Step(c["t"], "fault", f"At {_t(c['t'])} the page-cache cut of {c['host']} removed offsets "
                               f"{c['cut'][0]}-{c['cut'][1] - 1} of {topic}@{part}, which Kafka may have fsynced "
                               f"({c['why'] or 'uncertain cut point'}): every lost write lies there, so a real power "
                               f"loss may have kept them - uncertain (page-cache cut), not shown to be Kafka's.",
                               c["row"], 0))
    steps.sort(key=lambda s: (math.inf if s.t is None else s.t))
    while len(steps) > MAX_SENTENCES - 1:
        drop = max(range(len(steps)), key=lambda i: (steps[i].rank, i))
        steps.pop(drop)
    where = f"offset {l0}" if l0 == l1 else f"offsets {l0}-{l1}"
    when = f"at {_t(a0)}" if a0 == a1 else f"between {_t(a0)} and {_t(a1)}"
    lost_txt = f"Lost: {n} acknowledged write{'s' if n != 1 else ''} of {topic}@{part}, {where}, acknowledged {when}."
    sentences = [s.text for s in steps] + [lost_txt]
    while len(sentences) < 3:
        sentences.insert(len(sentences) - 1, f"The partition's leader, ISR and broker events around the loss are "
                                              f"in the evidence below ({len(pe)} events of {topic}@{part}).")
    others = [m for m in dict.fromkeys(mechs) if m != primary]
    return {"kind": LOSS_STORY, "topic": topic, "partition": part, "mechanism": primary, "mechanisms": [primary, *others],
            "label": MECHANISMS[primary], "allowed_by": allowed_by, "sentences": sentences,
            "steps": [s.as_dict() for s in steps],
            "lost": {"count": n, "first_offset": l0, "last_offset": l1,
                     "first_ack_t": None if a0 is None else round(a0, 3),
                     "last_ack_t": None if a1 is None else round(a1, 3)}}


def build_stories(stats: list[dict[str, Any]], events: list[dict[str, Any]], timeline: list[dict[str, Any]],
                  run: dict[str, Any], *, features: FeaturesInForce,
                  min_isr: int | None = None) -> list[dict[str, Any]]:
    """One story per topic-partition with lost writes (``stats`` rows with ``lost`` > 0 and the
    ``lost_*`` extent of checkers/kernel.py), ordered by lost count then name. ``features``: the
    gates the run recorded as in force (checkers/features.py); a story names a gate's state as
    that record says, or says the run does not record it."""
    todo = [s for s in stats if int(s.get("lost") or 0) > 0 and s.get("partition") is not None]
    if not todo:
        return []
    w = _world(events, timeline)
    out = [_story(s, w, run, min_isr, features) for s in todo]
    out.sort(key=lambda s: (-s["lost"]["count"], str(s["topic"]), s["partition"]))
    return out


def mechanism_counts(stories: list[dict[str, Any]]) -> dict[str, int]:
    """{primary mechanism: lost writes} over the run (verdict.json ``mechanisms``)."""
    out: dict[str, int] = {}
    for s in stories:
        out[s["mechanism"]] = out.get(s["mechanism"], 0) + int(s["lost"]["count"])
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


# --- what happened: the events-only story kind -----------------------------------------------------
#
# Without histories (a directory holding only Kafka's logs, checkers/events_only.py) nothing says
# which writes were lost, but the same events the loss stories read still say what the cluster
# did: per partition, its elections (unclean ones first among them), ISR changes, AlterPartition
# answers (every rejection counted), truncations and recoveries, with the fences of its replicas
# and the controller failovers around them; and one story of the cluster itself. The same event
# rows, the same steps pointing at the line each comes from, told in time order.

#: the most steps an events story tells (grouped repeats count once); the rest are counted
MAX_EVENT_STEPS = 12
#: fences, registrations and controller changes this long before a partition's first event belong
#: to its story (a fence explains the election after it: checkers/kafkalog/assemble.py uses 10 s)
EVENT_CONTEXT_S = 30.0

#: what each AlterPartition error means, in Kafka's words (ReplicationControlManager.validateAlterPartitionData)
_REJECT_MEANS = {
    "INELIGIBLE_REPLICA": "a replica it proposed was fenced, shutting down or registered with another broker "
                          "epoch (KIP-841, KIP-903)",
    "INVALID_UPDATE_VERSION": "it named a partition epoch that is no longer the current one",
    "FENCED_LEADER_EPOCH": "it named a leader epoch that is no longer the current one",
    "NOT_CONTROLLER": "the controller was not (or no longer) the active one",
    "INVALID_REQUEST": "the proposed ISR was not valid",
    "OPERATION_NOT_ATTEMPTED": "the controller did not attempt it",
    "NEW_LEADER_ELECTED": "a new leader had been elected",
}
_FENCE_WHY = {"session_timeout": "its session timed out", "controlled_shutdown": "it asked for a controlled shutdown",
              "fence_requested": "it asked to be fenced"}
_ELECTED_WHY = {"leader_fenced": "its previous leader was fenced", "controlled_shutdown":
                "its previous leader shut down (controlled shutdown)", "isr": "it had no leader and got one from its ISR",
                "alter_partition": "the leader's AlterPartition", "elr": "from the ELR (KIP-966)",
                "last_known_leader": "the last known leader (KIP-966)"}
_CONTROLLER_UP = ("controller_activated", "controller_elected")
_CONTROLLER_DOWN = ("controller_renounced", "controller_resigned")


def _isr(v: Any) -> list[int] | None:
    return [x for x in (as_int(y) for y in v) if x is not None] if isinstance(v, list) else None


def _at(t: float | None, w0: float | None) -> str:
    """``t=3.120s`` on the run clock, with the wall time (UTC) when the clock's anchor is known:
    an operator matches the wall time with the hosts' logs."""
    if t is None or w0 is None:
        return _t(t)
    from datetime import datetime, timezone
    d = datetime.fromtimestamp(w0 + t, timezone.utc)
    return f"{_t(t)} ({d:%Y-%m-%d %H:%M:%S}.{d.microsecond // 1000:03d} UTC)"


def _controller_epoch(e: dict[str, Any]) -> int | None:
    return as_int(e.get("controller_epoch")) if e.get("controller_epoch") is not None else as_int(e.get("epoch"))


def _failovers(evs: list[dict[str, Any]]) -> set[int]:
    """The ids of the activations that were failovers: a controller became active after another
    one had been, at a higher epoch (KIP-595: each new leader of the quorum bumps it)."""
    out: set[int] = set()
    seen: int | None = None
    for e in evs:
        if e.get("event") in _CONTROLLER_UP:
            ep = _controller_epoch(e)
            if seen is not None and (ep is None or ep > seen):
                out.add(id(e))
            if ep is not None:
                seen = ep if seen is None else max(seen, ep)
    return out


def _controller_steps(evs: list[dict[str, Any]], w0: float | None, failovers: set[int]) -> tuple[list[_Step], int]:
    """The controllers' quorum: each new active controller and each renounce, and how many of
    the activations were failovers (``failovers``: :func:`_failovers` over the whole run)."""
    steps: list[_Step] = []
    n = 0
    for e in evs:
        ev, ep = e.get("event"), _controller_epoch(e)
        who = as_int(e.get("leader")) if ev == "controller_elected" else as_int(e.get("node"))
        if ev in _CONTROLLER_UP:
            again = id(e) in failovers
            n += again
            steps.append(_Step(e["t"], "controller", f"At {_at(e['t'], w0)} controller {who} became the active "
                               f"controller (epoch {ep if ep is not None else '?'})"
                               + (": a controller failover." if again else "."), e, 2 if again else 4))
        elif ev in _CONTROLLER_DOWN:
            why = e.get("reason")
            new = as_int(e.get("new_controller"))
            steps.append(_Step(e["t"], "controller", f"At {_at(e['t'], w0)} controller {who} gave up the "
                               f"leadership of epoch {ep if ep is not None else '?'}"
                               + (f" after {why} failed and reverts to the last committed offset "
                                  f"{e.get('last_committed_offset')} (QuorumController.handleEventException)"
                                  if why and e.get("last_committed_offset") is not None else
                                  f" ({why})" if why else "")
                               + (f"; the new leader is {new}" if new is not None else "") + ".", e, 2))
    return steps, n


def _broker_steps(evs: list[dict[str, Any]], w0: float | None) -> list[_Step]:
    steps = []
    for e in evs:
        b, ep = _node_of(e), e.get("broker_epoch")
        epoch = f"broker epoch {ep}" if ep is not None else "broker epoch not logged"
        if e.get("event") == "broker_fenced":
            why = _FENCE_WHY.get(str(e.get("reason")), str(e.get("reason") or "")) or None
            steps.append(_Step(e["t"], "broker_fenced", f"At {_at(e['t'], w0)} the controller fenced broker {b} "
                               f"({epoch}){': ' + why if why else ''}.", e, 1))
        elif e.get("event") == "broker_unfenced":
            steps.append(_Step(e["t"], "broker_unfenced", f"At {_at(e['t'], w0)} the controller unfenced broker {b} "
                               f"({epoch}).", e, 4))
        elif e.get("event") == "broker_registered":
            clean = e.get("clean_shutdown")
            steps.append(_Step(e["t"], "broker_registered", f"At {_at(e['t'], w0)} broker {b} registered with "
                               f"{epoch}" + (" after an unclean shutdown" if clean is False else "") + ".", e, 3))
    return steps


def _rejections(run: list[dict[str, Any]], tp: str, w0: float | None, committed: list[int] | None) -> _Step:
    """One step for consecutive rejections of one leader's AlterPartition with one error: a leader
    re-sends a rejected request until the answer changes (AlterPartitionManager), so a reader wants
    them counted, not listed."""
    e0, e1, n = run[0], run[-1], len(run)
    err = str(e0.get("error") or "an error")
    isrs = [i for i in dict.fromkeys(tuple(_isr(e.get("new_isr")) or ()) for e in run) if i]
    proposed = " or ".join(str(list(i)) for i in isrs) or "not logged"
    means = _REJECT_MEANS.get(err)
    fallback = f"; the leader keeps the committed ISR {committed}" if committed is not None else ""
    if n == 1:
        text = (f"At {_at(e0['t'], w0)} the controller rejected leader {e0.get('leader')}'s AlterPartition for {tp} "
                f"(proposed ISR {proposed}, partition epoch {e0.get('partition_epoch')}) with {err}"
                f"{': ' + means if means else ''}{fallback}.")
    else:
        text = (f"Between {_at(e0['t'], w0)} and {_at(e1['t'], w0)} the controller rejected leader "
                f"{e0.get('leader')}'s AlterPartition for {tp} {n} times with {err} (proposed ISR {proposed})"
                f"{': ' + means if means else ''}; the leader re-sends it until the answer changes"
                f"{fallback}.")
    return _Step(e0["t"], "alter_partition", text, e0, 0, count=n)


def _partition_story(topic: str, part: int, pe: list[dict[str, Any]], around: list[dict[str, Any]],
                     w0: float | None, failovers: set[int]) -> dict[str, Any] | None:
    """What the events of one partition say happened (None when they say nothing worth telling:
    only its creation or the leader's own ISR bookkeeping)."""
    tp = f"{topic}@{part}"
    told = [e for e in pe if e.get("event") in ("leader_elected", "isr_changed", "alter_partition", "truncation",
                                                  "recovery")]
    if not [e for e in told if not (e.get("event") == "leader_elected" and e.get("reason") == "initial")]:
        return None
    counts: dict[str, Any] = {"elections": 0, "unclean_elections": 0, "isr_changes": 0, "leaderless": 0,
                              "alter_partition_accepted": 0, "alter_partition_rejected": 0, "rejected_by_error": {},
                              "truncations": 0, "recoveries": 0, "fences": 0, "controller_failovers": 0}
    steps: list[_Step] = []
    prior_isr: list[int] | None = None
    prior_leader: int | None = None
    rejected: list[dict[str, Any]] = []

    def flush() -> None:
        if rejected:
            lead = as_int(rejected[0].get("leader"))
            back = [e for e in pe if e.get("event") == "leader_isr" and _node_of(e) == lead
                    and rejected[0]["t"] <= e["t"] <= rejected[-1]["t"] + 1.0]
            steps.append(_rejections(list(rejected), tp, w0, _isr(back[-1].get("isr")) if back else None))
            rejected.clear()

    for e in told:
        ev = e.get("event")
        if ev == "alter_partition" and e.get("accepted") is False:
            err = str(e.get("error") or "?")
            counts["alter_partition_rejected"] += 1
            counts["rejected_by_error"][err] = counts["rejected_by_error"].get(err, 0) + 1
            if rejected and (rejected[-1].get("leader"), rejected[-1].get("error")) != (e.get("leader"), e.get("error")):
                flush()
            rejected.append(e)
            continue
        if ev == "alter_partition":
            counts["alter_partition_accepted"] += 1     # the ISR change it made is told below
            continue
        flush()
        when = _at(e["t"], w0)
        if ev in ("leader_elected", "isr_changed"):
            leader, isr = as_int(e.get("leader")), _isr(e.get("isr"))
            reason = str(e.get("reason") or "")
            epochs = f"leader epoch {e.get('leader_epoch')}, partition epoch {e.get('partition_epoch')}"
            if ev == "leader_elected" and reason == "initial":
                steps.append(_Step(e["t"], "election", f"At {when} {tp} was created with leader {leader} "
                                   f"(ISR {isr}).", e, 5))
            elif ev == "leader_elected":
                counts["elections"] += 1
                took = next((b for b in pe if b.get("event") == "became_leader" and _node_of(b) == leader
                             and as_int(b.get("leader_epoch")) in (None, as_int(e.get("leader_epoch")))
                             and e["t"] - SLACK_S <= b["t"] <= e["t"] + 10.0), None)
                took_txt = (f"; broker {leader} took over with log end offset {took.get('log_end_offset')}, high "
                            f"watermark {took.get('hwm')}" if took is not None else "")
                outside = prior_isr is not None and leader not in prior_isr
                if reason == "unclean" or outside:
                    counts["unclean_elections"] += 1
                    frm = (f"from outside the ISR {prior_isr}" if prior_isr is not None else
                           "from outside the ISR (the ISR before is not in the logs read)")
                    rec = " in leader recovery state RECOVERING" if as_int(e.get("leader_recovery_state")) == 1 else ""
                    steps.append(_Step(e["t"], "election", f"At {when} the controller elected broker {leader} leader "
                                       f"of {tp} {frm} ({epochs}, ISR {isr}){rec}: an unclean election "
                                       f"(PartitionChangeBuilder: allowed only with unclean.leader.election.enable "
                                       f"or an unclean ElectLeaders request), which can lose acknowledged writes"
                                       f"{took_txt}.", e, 0))
                else:
                    why = _ELECTED_WHY.get(reason)
                    was = f", after broker {prior_leader}" if prior_leader is not None and prior_leader >= 0 else ""
                    steps.append(_Step(e["t"], "election", f"At {when} the controller elected broker {leader} leader "
                                       f"of {tp}{was} ({epochs}, ISR {isr}){': ' + why if why else ''}{took_txt}.",
                                       e, 1))
            elif leader is not None and leader < 0:
                counts["leaderless"] += 1
                why = _ELECTED_WHY.get(reason, "")
                who = f"its leader {prior_leader}" if prior_leader is not None and prior_leader >= 0 else "its leader"
                why = ("; " + why.replace("its previous leader", who)
                       if why and reason in ("leader_fenced", "controlled_shutdown") else "")
                steps.append(_Step(e["t"], "isr_changed", f"At {when} {tp} was left without a leader ({epochs}, ISR "
                                   f"{isr if isr is not None else 'not logged'}){why}.", e, 1))
            else:
                counts["isr_changes"] += 1
                how = " by the leader's AlterPartition" if reason == "alter_partition" else (
                    f" ({reason})" if reason else "")
                old = f" from {prior_isr}" if prior_isr is not None else ""
                steps.append(_Step(e["t"], "isr_changed", f"At {when} the ISR of {tp} changed{old} to {isr}{how} "
                                   f"(partition epoch {e.get('partition_epoch')}).", e, 3))
            if isr is not None:
                prior_isr = isr
            if leader is not None:
                prior_leader = leader
        elif ev == "truncation":
            counts["truncations"] += 1
            frm, to = as_int(e.get("from_offset")), as_int(e.get("to_offset"))
            cut = frm is not None and to is not None and frm > to
            why = {"diverging_epoch": "to match its leader's log (diverging epoch)", "high_watermark":
                   "to its high watermark", "offset_out_of_range": "to its leader's offsets (offset out of range)"}.get(
                str(e.get("reason")), str(e.get("reason") or "truncation"))
            steps.append(_Step(e["t"], "truncation", f"At {when} broker {_node_of(e)} truncated {tp} "
                               + (f"from offset {frm} to {to}, cutting {frm - to} records, " if cut else
                                  f"to offset {to} ")
                               + f"{why} (Partition.truncateTo).", e, 0 if cut else 4))
        elif ev == "recovery":
            counts["recoveries"] += 1
            steps.append(_Step(e["t"], "recovery", f"At {when} broker {_node_of(e)} recovered {tp} after an unclean "
                               f"shutdown, its log ending at offset {e.get('log_end_offset')}.", e, 2))
    flush()
    # the brokers it lives on, and what happened to them and to the controllers meanwhile
    replicas: set[int] = set()
    for e in pe:
        for k in ("leader", "broker", "node"):
            b = as_int(e.get(k))
            if b is not None and b >= 0 and (k != "node" or e.get("role") != "controller"):
                replicas.add(b)
        replicas.update(b for b in (_isr(e.get("isr")) or []) + (_isr(e.get("new_isr")) or []) if b >= 0)
    t0, t1 = told[0]["t"] - EVENT_CONTEXT_S, told[-1]["t"]
    near = [e for e in around if t0 <= e["t"] <= t1]
    brokers = _broker_steps([e for e in near if _node_of(e) in replicas], w0)
    counts["fences"] = sum(1 for s in brokers if s.kind == "broker_fenced")
    ctl, counts["controller_failovers"] = _controller_steps([e for e in near if e.get("event") in
                                                               _CONTROLLER_UP + _CONTROLLER_DOWN], w0, failovers)
    steps += brokers + [s for s in ctl if s.rank <= 2]
    return _event_story(topic, part, tp, steps, counts)


def _summary(counts: dict[str, Any]) -> str:
    """One line of what the counts say, the gravest first."""
    parts = []

    def n(k: str, one: str, many: str) -> None:
        v = int(counts.get(k) or 0)
        if v:
            parts.append(f"{v} {one if v == 1 else many}")
    n("unclean_elections", "unclean election", "unclean elections")
    clean = int(counts.get("elections") or 0) - int(counts.get("unclean_elections") or 0)
    if clean:
        parts.append(f"{clean} {'election' if clean == 1 else 'elections'}" + (" from the ISR" if
                                                                               counts.get("unclean_elections") else ""))
    rej = int(counts.get("alter_partition_rejected") or 0)
    if rej:
        by = ", ".join(f"{k} ×{v}" for k, v in sorted((counts.get("rejected_by_error") or {}).items()))
        parts.append(f"{rej} AlterPartition rejection{'s' if rej != 1 else ''} ({by})")
    n("truncations", "truncation", "truncations")
    n("recoveries", "recovery after an unclean shutdown", "recoveries after an unclean shutdown")
    n("leaderless", "time without a leader", "times without a leader")
    n("isr_changes", "ISR change", "ISR changes")
    n("fences", "fence of a replica", "fences of its replicas")
    n("broker_fences", "broker fence", "broker fences")
    n("registrations", "broker registration", "broker registrations")
    n("controller_failovers", "controller failover", "controller failovers")
    return ", ".join(parts) or "nothing beyond the initial state"


def _event_story(topic: str | None, part: int | None, what: str, steps: list[_Step],
                 counts: dict[str, Any]) -> dict[str, Any]:
    steps.sort(key=lambda s: (math.inf if s.t is None else s.t))
    kept = list(steps)
    while len(kept) > MAX_EVENT_STEPS:
        kept.pop(max(range(len(kept)), key=lambda i: (kept[i].rank, i)))
    summary = _summary(counts)
    sentences = [s.text for s in kept]
    if len(kept) < len(steps):
        sentences.append(f"{len(steps) - len(kept)} more event{'s' if len(steps) - len(kept) != 1 else ''} of {what} "
                         f"are in the tables below.")
    out_steps = []
    for s in kept:
        d = s.as_dict()
        if s.count is not None:
            d["count"] = s.count
        out_steps.append(d)
    return {"kind": EVENT_STORY, "topic": topic, "partition": part, "label": f"{what}: {summary}",
            "counts": counts, "sentences": sentences, "steps": out_steps}


def _cluster_story(w: _World, w0: float | None, fo: set[int]) -> dict[str, Any] | None:
    """The cluster itself: brokers fenced, registered and unfenced, and the controllers' leadership."""
    brokers = _broker_steps([e for e in w.events if e.get("event") in
                             ("broker_fenced", "broker_unfenced", "broker_registered")], w0)
    ctl, failovers = _controller_steps([e for e in w.events if e.get("event") in _CONTROLLER_UP + _CONTROLLER_DOWN],
                                       w0, fo)
    fences = sum(1 for s in brokers if s.kind == "broker_fenced")
    if not fences and not failovers and not any(s.rank <= 2 for s in ctl):
        return None
    counts = {"broker_fences": fences, "registrations": sum(1 for s in brokers if s.kind == "broker_registered"),
              "unfences": sum(1 for s in brokers if s.kind == "broker_unfenced"), "controller_failovers": failovers,
              "controller_renounces": sum(1 for e in w.events if e.get("event") in _CONTROLLER_DOWN)}
    return _event_story(None, None, "the cluster", brokers + ctl, counts)


def build_event_stories(events: list[dict[str, Any]], timeline: list[dict[str, Any]], *,
                        wall_at_t0: float | None = None) -> list[dict[str, Any]]:
    """What the cluster's events say happened, without a history to say what was lost: one story
    per topic-partition whose events hold more than its creation (elections, ISR changes,
    AlterPartition answers - every rejection counted -, truncations, recoveries, with the fences of
    its replicas and the controller failovers before them), the gravest first (unclean elections,
    then rejections, then the most events), then one story of the cluster (fences, registrations,
    controller failovers) when it has one. ``wall_at_t0``: the run clock's anchor, so each step
    also names its wall time. The same rows as :func:`build_stories` (checkers/load.py), so a
    step points at the line it comes from."""
    w = _world(events, timeline)
    by_part: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for e in w.events:
        if e.get("topic") is not None and as_int(e.get("partition")) is not None:
            by_part.setdefault((str(e["topic"]), int(e["partition"])), []).append(e)
    around = [e for e in w.events if e.get("event") in ("broker_fenced", "broker_unfenced", "broker_registered",
                                                        *_CONTROLLER_UP, *_CONTROLLER_DOWN)]
    fo = _failovers(w.events)
    out = [s for (topic, part), pe in by_part.items()
           if (s := _partition_story(topic, part, pe, around, wall_at_t0, fo)) is not None]
    out.sort(key=lambda s: (-s["counts"]["unclean_elections"], -s["counts"]["alter_partition_rejected"],
                            -len(s["steps"]), str(s["topic"]), s["partition"]))
    cluster = _cluster_story(w, wall_at_t0, fo)
    return out + ([cluster] if cluster is not None else [])
