"""Network partitions: isolate, halves, bridge, one-way, between, cut-from-controller.

Why these shapes: they are Jepsen's partition vocabulary plus the one fault KRaft adds
(docs/seeds.md#seed-002 "Controller Heartbeat"): a broker that reaches its peers but not the controller
must fence itself (broker-side timeout) while the controller fences it (controller-side
timeout) and elects elsewhere (docs/seeds.md#seed-003-1-2-2 broker epochs and fencing, §2.8 elections).

How: each shape becomes a *grudge* (node -> nodes whose packets it drops, as in
``jepsen.nemesis``), realised as iptables DROP rules in each victim host's INPUT chain,
tagged ``faultline:<fault id>`` (see :mod:`nemeses.netfilter`). Dropping on input at
the receiver makes a one-way cut exactly one-way at the packet level (TCP, which needs
both directions, then fails both ways, as on a real asymmetric link). The controller cut
is applied on the broker's host only (OUTPUT to and INPUT from the controller, optionally
only its port), so the controller host is never touched. Heal deletes exactly the tagged
rules on every host it touched, and is idempotent.

The module is named for what it cuts, the network (``checkers/partition.py`` is a Kafka topic
partition); the fault keeps its campaign name ``partition``, which campaigns, timelines and the
heal ledgers of earlier runs carry.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from groundwork.transport.local import LocalTransport
from nemeses.base import FaultRecord, Nemesis, Node, register
from nemeses.netfilter import Rule, add_rules, remove_rules

SHAPES = ("isolate", "halves", "bridge", "one-way", "between", "controller")


def _ip(node: Node) -> str:
    return node.address.split(":")[0]


def grudge(shape: str, nodes: list[str], targets: list[str], params: dict[str, Any]) -> dict[str, set[str]]:
    """``victim -> {sources whose packets the victim drops}`` for a shape.

    ``nodes`` are all participants (in a stable order; the caller shuffles with the run's
    seeded RNG where the shape is random); ``targets`` choose the side for isolate/halves.
    """
    g: dict[str, set[str]] = defaultdict(set)

    def cut(a: list[str], b: list[str]) -> None:
        for x in a:
            for y in b:
                if x != y:
                    g[x].add(y)
                    g[y].add(x)

    if shape == "isolate":
        if not targets:
            raise ValueError("partition isolate: give the node to isolate as the target")
        cut(targets, [n for n in nodes if n not in targets])
    elif shape == "halves":
        side = targets or nodes[: len(nodes) // 2]
        cut(side, [n for n in nodes if n not in side])
    elif shape == "bridge":
        # Jepsen's bridge: two halves that cannot talk, except through one node in the middle
        if len(nodes) < 3:
            raise ValueError("partition bridge: needs at least 3 nodes")
        mid = len(nodes) // 2
        bridge = targets[0] if targets else nodes[mid]
        rest = [n for n in nodes if n != bridge]
        cut(rest[: len(rest) // 2], rest[len(rest) // 2:])
    elif shape == "between":
        # the first target against the other targets only (e.g. a follower and its leader,
        # so the follower cannot fetch while it still reaches the controller)
        if len(targets) < 2:
            raise ValueError("partition between: give two or more targets (the first is cut from the rest)")
        cut(targets[:1], targets[1:])
    elif shape == "one-way":
        src, dst = params.get("from"), params.get("to")
        if not src or not dst:
            raise ValueError("partition one-way: params 'from' and 'to' (node names) are required")
        for d in ([dst] if isinstance(dst, str) else dst):
            for s in ([src] if isinstance(src, str) else src):
                g[d].add(s)
    else:
        raise ValueError(f"partition: shape must be one of {', '.join(SHAPES)}, got {shape!r}")
    return dict(g)


@register
class NetworkPartition(Nemesis):
    name = "partition"
    description = "drop traffic between nodes: isolate, halves, bridge, one-way, between, controller"

    def _nodes(self, names: list[str]) -> list[Node]:
        missing = [n for n in names if n not in self.ctx.nodes]
        if missing:
            raise ValueError(f"partition: unknown node(s) {', '.join(missing)}; known: {', '.join(self.ctx.nodes)}")
        return [self.ctx.nodes[n] for n in names]

    def plan(self, targets: list[str], params: dict[str, Any]) -> dict[str, list[Rule]]:
        """Rules per host name, computed without touching anything (shown in dry runs)."""
        shape = params.get("shape", "isolate")
        rules: dict[str, list[Rule]] = defaultdict(list)
        if shape == "controller":
            controllers = [n for n in self.ctx.nodes.values() if n.role == "controller"]
            if not controllers:
                raise ValueError("partition controller: the inventory has no node with role controller")
            port = params.get("port")
            for b in self._nodes(targets or [n.name for n in self.ctx.brokers()]):
                for c in controllers:
                    rules[b.name].append(Rule("OUTPUT", src=_ip(b), dst=_ip(c), dport=port))
                    rules[b.name].append(Rule("INPUT", src=_ip(c), dst=_ip(b), sport=port))
            return dict(rules)
        names = list(params.get("nodes") or [n for n in self.ctx.nodes])
        if shape in ("halves", "bridge") and not targets:
            self.ctx.rng.shuffle(names)
        for victim, sources in grudge(shape, names, targets, params).items():
            v = self.ctx.nodes[victim]
            for s in sorted(sources):
                rules[victim].append(Rule("INPUT", src=_ip(self.ctx.nodes[s]), dst=_ip(v)))
        return dict(rules)

    def start(self, targets: list[str], **params: Any) -> FaultRecord:
        plan = self.plan(targets, params)
        record = FaultRecord(fault=self.name, targets=list(targets), params=dict(params),
                             undo={"hosts": sorted(plan)})
        self.begin(record)
        try:
            for host, rules in plan.items():
                add_rules(self.ctx.nodes[host].transport, rules, record.id)
        except Exception:
            self.stop(record)
            raise
        return record

    def stop(self, record: FaultRecord) -> None:
        removed = 0
        for host in record.undo.get("hosts", []):
            node = self.ctx.nodes.get(host)
            # a heal without the inventory's nodes: the embedded cluster's hosts are this
            # machine; elsewhere nothing carries this fault's tag, so nothing is touched
            t = node.transport if node is not None else LocalTransport(host)
            removed += remove_rules(t, record.id)
        self.end(record, rules_removed=removed)
