"""Process faults on brokers and controllers: kill (SIGKILL), pause (SIGSTOP), clean restart.

Why these three: they are the crash-stop faults every replication protocol must survive,
and each exercises a different path of KRaft (seed 003 §1.2.2, seed 002):
- ``kill``: SIGKILL, no clean-shutdown marker, so the broker re-registers with a new
  broker epoch and recovers its log from the recovery point; the controller fences it
  after missed heartbeats and elects from the ISR. Heal = start the service again.
  A step's ``duration`` (or ``params.restart_after``) is the downtime.
- ``pause``: SIGSTOP, a "gray" failure: the process holds its sockets and leadership but
  answers nothing until SIGCONT; the controller fences it and, on resume, the broker finds
  itself fenced with a stale epoch. Heal = SIGCONT the recorded pids.
- ``restart``: SIGTERM, wait for exit (clean shutdown, so ``clean_shutdown: true`` at
  re-registration), start again after ``params.downtime`` seconds (default 0: at once).

Everything heal needs is in the FaultRecord's ``undo`` (target names and the pids seen),
so `faultline heal` in a new process can SIGCONT a paused pid even if the inventory's
node cannot be rebuilt. The record grows with each signal sent (``killed``, ``stopped``), so a
start that raises half-way (the second target unreachable) is healed exactly: the heal starts
every target that is down and resumes every recorded pid, and does nothing to the others.
"""
from __future__ import annotations

import signal
import threading
import time
from typing import Any

from nemeses.base import FaultRecord, Nemesis, Node, register


class _ProcessNemesis(Nemesis):
    acts_on_service = True

    def _node(self, name: str) -> Node:
        if name not in self.ctx.nodes:
            raise ValueError(f"{self.name}: unknown target {name!r}; known: {', '.join(sorted(self.ctx.nodes))}")
        return self.ctx.nodes[name]

    def _targets(self, targets: list[str]) -> list[Node]:
        if not targets:
            raise ValueError(f"{self.name}: give at least one target host")
        return [self._node(t) for t in targets]

    def _begin_with_pids(self, targets: list[str], params: dict[str, Any]) -> tuple[list[Node], FaultRecord]:
        """Resolve the targets and ledger their pids before any signal is sent, so a heal in a
        new process knows exactly which processes this fault touched."""
        nodes = self._targets(targets)
        pids = {n.name: n.service_pids() for n in nodes}
        rec = FaultRecord(fault=self.name, targets=list(targets), params=dict(params), undo={"pids": pids})
        self.begin(rec)
        return nodes, rec

    def _did(self, record: FaultRecord, what: str, name: str) -> None:
        """Ledger what was just done to ``name`` (``killed``, ``stopped``): a start that raises
        after it is healed from this record."""
        record.undo.setdefault(what, []).append(name)
        self.update(record)

    def _ensure_running(self, node: Node, record: FaultRecord) -> bool:
        """Start the service if no process of it runs and no other applied fault keeps it
        down; True when it started it."""
        if node.service_pids():
            return False
        return self.start_unless_held(node, record)


@register
class Kill(_ProcessNemesis):
    name = "kill"
    description = "SIGKILL the broker/controller process; heal restarts it (step duration = downtime)"

    def start(self, targets: list[str], **params: Any) -> FaultRecord:
        nodes, rec = self._begin_with_pids(targets, params)
        for n in nodes:
            n.stop_service(signal.SIGKILL)
            self._did(rec, "killed", n.name)
        restart_after = params.get("restart_after")
        if restart_after is not None:
            # heal on our own after the delay (Jepsen's kill+restart); stop() stays idempotent
            t = threading.Timer(float(restart_after), self._restart_later, args=(rec,))
            t.daemon = True
            t.start()
        return rec

    def _restart_later(self, rec: FaultRecord) -> None:
        try:
            for name in rec.targets:
                self._ensure_running(self._node(name), rec)
        except Exception as e:  # noqa: BLE001 - heal retries; note it
            self.ctx.timeline.event("note", text=f"kill {rec.id}: restart after delay failed: {e}")

    def keeps_down(self, record: FaultRecord) -> list[str]:
        """A killed broker stays down until this fault's heal (or ``restart_after``) starts it."""
        return list(record.targets)

    def stop(self, record: FaultRecord) -> None:
        self.end(record, restarted=self.start_stopped_targets(record))


@register
class Pause(_ProcessNemesis):
    name = "pause"
    description = "SIGSTOP the broker/controller process (a gray failure); heal sends SIGCONT"

    def start(self, targets: list[str], **params: Any) -> FaultRecord:
        nodes, rec = self._begin_with_pids(targets, params)
        for n in nodes:
            for pid in rec.undo["pids"][n.name]:
                n.transport.signal(pid, signal.SIGSTOP, sudo=getattr(n, "sudo", False))
            self._did(rec, "stopped", n.name)
        return rec

    def stop(self, record: FaultRecord) -> None:
        resumed = 0
        for name, pids in record.undo.get("pids", {}).items():
            node = self.ctx.nodes.get(name)
            for pid in pids:
                if node is not None:
                    ok = node.transport.signal(int(pid), signal.SIGCONT, sudo=getattr(node, "sudo", False))
                else:  # the inventory is gone: the pid was local (only local pids outlive a lost inventory here)
                    import os
                    try:
                        os.kill(int(pid), signal.SIGCONT)
                        ok = True
                    except OSError:
                        ok = False
                resumed += int(ok)
        self.end(record, resumed=resumed)


@register
class Restart(_ProcessNemesis):
    name = "restart"
    description = "clean restart: SIGTERM, wait for exit, start again after params.downtime (default 0)"

    def start(self, targets: list[str], **params: Any) -> FaultRecord:
        nodes, rec = self._begin_with_pids(targets, params)
        for n in nodes:
            n.stop_service(signal.SIGTERM)
            self._did(rec, "stopped", n.name)
        downtime = float(params.get("downtime", 0) or 0)
        if downtime > 0:
            time.sleep(downtime)
        for n in nodes:
            self._ensure_running(n, rec)
        return rec

    def stop(self, record: FaultRecord) -> None:
        self.end(record, restarted=self.start_stopped_targets(record))
