"""iptables rules tagged with ``faultline:<fault id>``, added and removed through a transport.

Why a tag: several faults may be applied at once (a partition and a lossy link), other
tools may own rules on the same host, and `faultline heal` runs in a fresh process that
knows only the ledger entry. Every rule a fault adds carries ``-m comment --comment
faultline:<id>``; heal lists the host's rules (``iptables -S``) and deletes exactly the
ones with that comment, so healing is idempotent and never touches anything else.

Rules are applied with :func:`net_run`: on a local network namespace and on an SSH host
that is the host's own netfilter; for a Docker container it is the container's network
namespace entered from the Docker host (``run(..., net=True)``, see docs/nemeses.md).
"""
from __future__ import annotations

import inspect
import shlex
from dataclasses import dataclass
from typing import Any, Sequence

from groundwork.transport.base import CommandFailed, Transport
from groundwork.transport.local import LocalTransport

TAG_PREFIX = "faultline:"
CHAINS = ("INPUT", "OUTPUT", "FORWARD")


def net_namespace(node: Any) -> Any:
    """A key for the network namespace a node's transport runs network commands in: nodes of
    one local namespace (the embedded cluster's brokers on 127.0.0.x: one ``lo``) share it;
    every other host has its own."""
    t = node.transport
    return ("local", getattr(t, "netns", None)) if isinstance(t, LocalTransport) else node.name


def net_run(transport: Transport, cmd: str | Sequence[str], **kw):
    """Run a network command (iptables, tc, ip, ss) where the host's network namespace is.

    For a container that is its namespace entered from the Docker host (``net=True``: the
    host's iptables/tc act on the container's interfaces, no NET_ADMIN or iptables needed
    in the image); for other transports ``run`` already executes there."""
    try:
        takes_net = "net" in inspect.signature(transport.run).parameters
    except (TypeError, ValueError):
        takes_net = False
    if takes_net:
        kw["net"] = True
    return transport.run(cmd, sudo=True, **kw)


def tag(fault_id: str) -> str:
    return f"{TAG_PREFIX}{fault_id}"


@dataclass(frozen=True)
class Rule:
    """One DROP rule. ``src``/``dst`` are IPv4 addresses; ``port`` narrows to one TCP port
    (destination port on the way to it, source port on the way back)."""
    chain: str
    src: str | None = None
    dst: str | None = None
    proto: str | None = None
    dport: int | None = None
    sport: int | None = None
    probability: float | None = None   # iptables `statistic` match: random loss

    def argv(self, comment: str) -> list[str]:
        a = [self.chain]
        if self.src:
            a += ["-s", self.src]
        if self.dst:
            a += ["-d", self.dst]
        if self.proto or self.dport or self.sport:
            a += ["-p", self.proto or "tcp"]
        if self.dport:
            a += ["--dport", str(self.dport)]
        if self.sport:
            a += ["--sport", str(self.sport)]
        a += ["-m", "comment", "--comment", comment]
        if self.probability is not None:
            a += ["-m", "statistic", "--mode", "random", "--probability", f"{self.probability:.6f}"]
        return a + ["-j", "DROP"]


def add_rules(transport: Transport, rules: list[Rule], fault_id: str) -> None:
    """Insert rules at the top of their chains (before any ACCEPT a host may have)."""
    comment = tag(fault_id)
    for r in rules:
        argv = r.argv(comment)
        res = net_run(transport, ["iptables", "-w", "5", "-I", *argv])
        if not res.ok:
            raise CommandFailed(res)


def add_raw(transport: Transport, table: str, chain: str, spec: list[str], fault_id: str) -> None:
    """A rule other than a DROP (DNAT, REJECT) in ``table``, tagged like the others."""
    res = net_run(transport, ["iptables", "-w", "5", "-t", table, "-I", chain, "-m", "comment",
                              "--comment", tag(fault_id), *spec])
    if not res.ok:
        raise CommandFailed(res)


def tagged_rules(transport: Transport, fault_id: str | None = None, table: str = "filter") -> list[list[str]]:
    """The ``-A ...`` rule specs on the host carrying our tag (one fault, or any faultline one)."""
    res = net_run(transport, ["iptables", "-w", "5", "-t", table, "-S"])
    if not res.ok:
        return []
    want = tag(fault_id) if fault_id else TAG_PREFIX
    out = []
    for line in res.stdout.splitlines():
        if not line.startswith("-A "):
            continue
        parts = shlex.split(line)
        try:
            c = parts[parts.index("--comment") + 1]
        except (ValueError, IndexError):
            continue
        if (c == want) if fault_id else c.startswith(want):
            out.append(parts)
    return out


def remove_rules(transport: Transport, fault_id: str | None, tables: tuple[str, ...] = ("filter",)) -> int:
    """Delete every rule tagged for ``fault_id`` (or every faultline rule when None) in the
    given tables. Returns how many were removed; a host without such rules is not an error."""
    n = 0
    for table in tables:
        for parts in tagged_rules(transport, fault_id, table):
            res = net_run(transport, ["iptables", "-w", "5", "-t", table, "-D", *parts[1:]])
            n += int(res.ok)
    return n
