"""Disk wipe / replacement: the broker returns with an empty log and a new broker epoch.

Why: docs/seeds.md#seed-000 step 4 - the replica that was being added to the ISR "finishes startup, but
the disk has been replaced". Combined with a held AlterPartition (nemeses.alter_partition)
this is the KIP-903 race; alone it checks that an empty replica is kept out of the ISR
until it has caught up (docs/seeds.md#seed-003-2-9 consistency rules) and that the controller gives it a
new broker epoch at registration (docs/seeds.md#seed-003-1-2-2).

SIGKILL the node, run ``nemeses/scripts/wipe_log_dirs.py`` on the host (``python3 -``:
empties every log dir, rewrites meta.properties with the same node.id and cluster.id and a
new directory.id), then restart it (``restart: false`` leaves it down until heal). Where the
inventory gives the node's format command (``kafka_service.format``: ``kafka-storage format -t
ID -c FILE --ignore-formatted`` - the embedded Apache Kafka target always does), the dirs are left
empty and that command formats them, as an operator brings a replaced disk back: the same node id
and cluster id, the release's own meta.properties (a new directory.id from 3.7), and for a
controller the bootstrap metadata a formatted metadata log dir starts with. A broker's
disk is its ``log.dirs``; a controller's is its ``metadata.log.dir`` (the KRaft metadata log and
``quorum-state``): it comes back empty and catches up from the quorum's leader as a follower.
Nothing is undone by heal - a wiped disk stays wiped - heal only ensures it runs again.
"""
from __future__ import annotations

import json
from typing import Any

from nemeses.base import FaultRecord, Nemesis, register
from nemeses.hostinfo import wipe_dirs
from nemeses.reboot import kill_broker
from nemeses.scripts import script_text


@register
class DiskWipe(Nemesis):
    name = "disk-wipe"
    acts_on_service = True
    description = "SIGKILL a broker or controller, empty its log (or metadata log) dirs keeping node.id/cluster.id, restart it"

    def start(self, targets: list[str], **params: Any) -> FaultRecord:
        unknown = [t for t in targets if t not in self.ctx.nodes]
        if unknown or not targets:
            raise ValueError(f"disk-wipe: unknown target(s) {unknown or targets}; known: {', '.join(self.ctx.nodes)}")
        nodes = [self.ctx.nodes[t] for t in targets]
        plan = {n.name: wipe_dirs(n, params) for n in nodes}
        record = FaultRecord(fault=self.name, targets=list(targets), params=dict(params), undo={"restart": targets})
        self.begin(record)
        detail = {}
        for node in nodes:
            killed = kill_broker(node)
            record.undo.setdefault("killed", {})[node.name] = killed   # a wipe that fails now is healed by a start
            self.update(record)
            fmt = getattr(getattr(getattr(node, "spec", None), "service", None), "format", None)
            argv = ["python3", "-", "--node-id", str(node.node_id)]
            for d in plan[node.name]:
                argv += ["--log-dir", d]
            if params.get("cluster_id"):
                argv += ["--cluster-id", str(params["cluster_id"])]
            if fmt:
                argv.append("--empty")
            res = node.transport.run(argv, input=script_text("wipe_log_dirs.py"), sudo=True, timeout=120)
            if not res.ok:
                raise ValueError((res.stderr.strip().splitlines() or [f"{node.name}: disk wipe failed"])[-1])
            detail[node.name] = {"killed": killed, **json.loads(res.stdout)}
            if fmt:
                detail[node.name]["formatted"] = format_storage(node, fmt)
        record.undo["detail"] = detail
        self.update(record)
        self.ctx.timeline.event("note", fault_id=record.id, what="disk wiped", detail=detail)
        if params.get("restart", True):
            for node in nodes:
                self.start_unless_held(node, record)
        return record

    def keeps_down(self, record: FaultRecord) -> list[str]:
        """With ``restart: false`` the wiped broker stays down until this fault's heal."""
        return [] if record.params.get("restart", True) else list(record.targets)

    def stop(self, record: FaultRecord) -> None:
        self.end(record, started=self.start_stopped_targets(record))


def format_storage(node: Any, command: str) -> str:
    """Run the node's ``kafka-storage format`` on its host; returns what it said it formatted
    (``Formatting ... with metadata.version X``); a refusal is the fault's one error line."""
    res = node.transport.run(command, timeout=180)
    lines = [ln.strip() for ln in (res.stdout + res.stderr).splitlines() if ln.strip()]
    if not res.ok:
        raise ValueError(f"{node.name}: kafka-storage format failed after the wipe: "
                         f"{next((ln for ln in lines if 'Exception' in ln or 'rror' in ln), lines[-1] if lines else '')}")
    return "; ".join(ln for ln in lines if ln.startswith("Formatting")) or "formatted"
