"""Kafka nodes that stopped during the run though no fault stopped them.

Why: a run tests the cluster it started. A controller whose raft thread hit a fatal error halts
(Kafka 3.4.1+: RaftIoThread.doWork → ``fatalFaultHandler.handleFault("Unexpected error in raft
IO thread")``, ProcessTerminatingFaultHandler → ``Exit.halt(1)``; before 3.4.1 only the raft
thread dies and the process lives on, answering nothing). With three controllers the quorum
survives one such halt and the workload goes on, so the run looks healthy - yet it ran on two
voters, not the three it meant to test. The verdict names every such node (``halts``) and a run
that found nothing is inconclusive (checkers/outcome.py, a thin reason); a loss it found stands.

Two sources, both small logs the driver already holds (checkers/load.py):

- ``fatal_fault`` events in a node's event log (kraftsim writes one as it halts or its raft
  thread dies, docs/kraftsim-raft.md);
- the harness's ``node_exit`` timeline records: after the heal every node must run, and a node
  no process fault touched must run as the same process (harness/runner.py ``check_nodes``),
  which is how a real Kafka node that exited shows, whatever its reason.
"""
from __future__ import annotations

from typing import Any

#: halts named in the inconclusive reason before "and N more"
_NAMED = 5


def node_halts(events: list[dict[str, Any]], timeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per halt, in time order: ``{"host", "t", "how": "fatal_fault" | "node_exit",
    "text", "event": {"source", "line"}}``."""
    out = []
    for e in events:
        if e.get("event") != "fatal_fault":
            continue
        halted = e.get("halted")
        what = "halted" if halted is not False else "raft thread died (the process lives on, answering nothing)"
        text = f"{e.get('host') or e.get('node')}: {what}: {e.get('fault') or 'fatal fault'}: {e.get('error') or '?'}"
        out.append({"host": e.get("host") or e.get("node"), "t": e.get("t"), "how": "fatal_fault", "text": text,
                    "event": {"source": e.get("source"), "line": e.get("line")}})
    for r in timeline:
        if r.get("kind") != "node_exit":
            continue
        out.append({"host": r.get("host"), "t": r.get("t"), "how": "node_exit", "text": r.get("text") or "",
                    "event": {"source": r.get("source"), "line": r.get("line")}})
    out.sort(key=lambda h: (h["t"] is None, h["t"] or 0.0))
    return out


def halt_reasons(halts: list[dict[str, Any]]) -> list[str]:
    """The thin reason the halts give (one line), or none: every host once, first halt first."""
    if not halts:
        return []
    first: dict[str, dict[str, Any]] = {}
    for h in halts:
        first.setdefault(str(h.get("host")), h)
    parts = [(f"t={h['t']:.1f}s " if isinstance(h.get("t"), (int, float)) else "") + str(h.get("text"))
             for h in list(first.values())[:_NAMED]]
    more = len(first) - _NAMED
    return [f"{len(first)} node{'s' if len(first) != 1 else ''} stopped during the run without a fault stopping "
            f"{'them' if len(first) != 1 else 'it'}, so the run did not test the cluster it meant to: "
            + "; ".join(parts) + (f"; and {more} more" if more > 0 else "")]
