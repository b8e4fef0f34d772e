"""Degraded links: loss, rate, delay - using what the target's kernel offers, or saying so.

Why: a slow or lossy link makes followers fall behind, shrinks ISRs and lets AlterPartition
and heartbeats race (seed 003 §2.9 ISR changes on lag; seed 002 heartbeat timeouts), without
a clean partition. Lab hosts usually have ``tc netem``; these machines' kernels do not
(no ``sch_netem``), so each kind uses the mechanism that exists and fails with one line
naming the host and the missing piece otherwise:

- ``loss``: iptables ``statistic`` match (``--mode random --probability p``) on INPUT,
  from ``peers`` (or from everyone), tagged ``faultline:<fault id>`` like partitions.
- ``rate``: a root ``tbf`` qdisc on the host's interface (egress), with handle ``fa17:``
  so heal deletes only a qdisc it added; refused when the interface already has a root
  qdisc of someone else's.
- ``delay``: ``netem delay`` as a root qdisc (handle ``fa17:``) where the kernel has it.
  Where it does not, the fault refuses in one line; the userspace alternative is the
  alter-partition nemesis in ``mode: delay-all`` (nemeses.alter_partition), whose proxy
  delays every frame of the broker-controller connections it carries (placed by
  configuration).
"""
from __future__ import annotations

from typing import Any

from groundwork.transport.base import Transport
from groundwork.transport.local import LocalTransport
from nemeses.base import FaultRecord, Nemesis, Node, register
from nemeses.netfilter import Rule, add_rules, net_namespace, net_run, remove_rules

HANDLE = "fa17:"
KINDS = ("loss", "rate", "delay")


class Unavailable(RuntimeError):
    """The target cannot do this kind of degradation; the message is one line."""


def interface(t: Transport, node: Node) -> str:
    """The interface that carries the node's address (default route as a fallback)."""
    res = net_run(t, ["ip", "-o", "-4", "addr", "show"])
    ip = node.address.split(":")[0]
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[3].split("/")[0] == ip:
            return parts[1]
    res = net_run(t, ["ip", "route", "show", "default"])
    parts = res.stdout.split()
    if "dev" in parts:
        return parts[parts.index("dev") + 1]
    raise Unavailable(f"{node.name}: no interface carries {ip} and there is no default route")


def root_qdisc(t: Transport, dev: str) -> str:
    res = net_run(t, ["tc", "qdisc", "show", "dev", dev, "root"])
    return res.stdout.strip().splitlines()[0] if res.stdout.strip() else ""


def capabilities(t: Transport) -> dict[str, bool]:
    """What this host offers (used by `faultline doctor` style checks and docs)."""
    return {"iptables": net_run(t, ["iptables", "-w", "5", "-S", "INPUT"]).ok,
            "statistic": net_run(t, "iptables -m statistic --help >/dev/null 2>&1").ok,
            "tc": net_run(t, ["tc", "-V"]).ok}


@register
class LinkDegrade(Nemesis):
    name = "link"
    description = "degrade links: loss (iptables statistic), rate (tbf), delay (netem where present)"

    def _apply_qdisc(self, node: Node, args: list[str], what: str) -> str:
        t = node.transport
        dev = interface(t, node)
        current = root_qdisc(t, dev)
        if current and not any(k in current for k in ("noqueue", "pfifo_fast", "fq_codel", "mq ", "noop")) \
                and HANDLE not in current:
            raise Unavailable(f"{node.name}: {dev} already has a root qdisc ({current}); not replacing it")
        res = net_run(t, ["tc", "qdisc", "replace", "dev", dev, "root", "handle", HANDLE, *args])
        if not res.ok:
            err = (res.stderr.strip().splitlines() or ["tc failed"])[-1]
            if "unknown" in err.lower():
                raise Unavailable(f"{node.name}: link {what} needs tc {args[0]}, which this kernel lacks"
                                  + ("; for a userspace delay of the controller link use alter-partition mode: delay-all"
                                     if args[0] == "netem" else ""))
            raise Unavailable(f"{node.name}: tc {args[0]} on {dev} failed: {err}")
        return dev

    def exclusive(self, targets: list[str], params: dict[str, Any]) -> set[str]:
        """rate and delay replace the interface's root qdisc (handle ``fa17:``): two at once in
        one network namespace would be one qdisc, removed by the first heal. loss rules are
        tagged per fault and compose."""
        if params.get("kind", "loss") == "loss":
            return set()
        return {f"link-qdisc:{net_namespace(self.ctx.nodes[t])}" for t in targets if t in self.ctx.nodes}

    def start(self, targets: list[str], **params: Any) -> FaultRecord:
        kind = params.get("kind", "loss")
        if kind not in KINDS:
            raise ValueError(f"link: kind must be one of {', '.join(KINDS)}, got {kind!r}")
        unknown = [t for t in targets if t not in self.ctx.nodes]
        if unknown or not targets:
            raise ValueError(f"link: unknown target(s) {unknown or targets}; known: {', '.join(self.ctx.nodes)}")
        nodes = [self.ctx.nodes[t] for t in targets]
        if kind == "loss":
            p = float(params.get("probability", 0.2))
            if not 0 < p <= 1:
                raise ValueError(f"link loss: probability must be in (0, 1], got {p}")
            for n in nodes:
                if not net_run(n.transport, "iptables -m statistic --help >/dev/null 2>&1").ok:
                    raise Unavailable(f"{n.name}: iptables has no 'statistic' match; link loss unavailable")
        record = FaultRecord(fault=self.name, targets=list(targets), params=dict(params), undo={"hosts": targets})
        self.begin(record)
        try:
            devs: dict[str, str] = {}
            record.undo["devs"] = devs
            for n in nodes:
                if kind == "loss":
                    peers = params.get("peers") or [m for m in self.ctx.nodes if m != n.name]
                    add_rules(n.transport, [Rule("INPUT", src=self.ctx.nodes[m].address.split(":")[0],
                                                 probability=p) for m in peers], record.id)
                elif kind == "rate":
                    rate = str(params.get("rate", "1mbit"))
                    devs[n.name] = self._apply_qdisc(n, ["tbf", "rate", rate, "burst",
                                                         str(params.get("burst", "32kbit")),
                                                         "latency", str(params.get("latency", "400ms"))], "rate")
                    self.update(record)   # each qdisc in the ledger as it is added
                else:
                    devs[n.name] = self._apply_qdisc(n, ["netem", "delay", f"{int(params.get('delay_ms', 100))}ms"]
                                                     + ([f"{int(params['jitter_ms'])}ms"] if params.get("jitter_ms") else []),
                                                     "delay")
                    self.update(record)
            self.update(record)
        except Exception as e:
            # e.g. no netem: undo what was added, record the refusal, and say it in one line
            self.stop(record, error=str(e).splitlines()[0] if str(e) else type(e).__name__)
            raise
        return record

    def stop(self, record: FaultRecord, **detail: Any) -> None:
        removed = 0
        for name in record.undo.get("hosts", []):
            n = self.ctx.nodes.get(name)
            if n is None:   # heal without nodes: only this machine can be reached; tags keep it exact
                removed += remove_rules(LocalTransport(name), record.id)
                continue
            removed += remove_rules(n.transport, record.id)
            dev = (record.undo.get("devs") or {}).get(name)
            if dev and HANDLE in root_qdisc(n.transport, dev):
                removed += int(net_run(n.transport, ["tc", "qdisc", "del", "dev", dev, "root"]).ok)
        self.end(record, removed=removed, **detail)
