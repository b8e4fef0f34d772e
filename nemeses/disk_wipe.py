"""Disk wipe / replacement: the broker returns with an empty log and a new broker epoch.

Why: seed 000 step 4 - the replica that was being added to the ISR "finishes startup, but
the disk has been replaced". Combined with a held AlterPartition (nemeses.alter_partition)
this is the KIP-903 race; alone it checks that an empty replica is kept out of the ISR
until it has caught up (seed 003 §2.9 consistency rules) and that the controller gives it a
new broker epoch at registration (seed 003 §1.2.2).

SIGKILL the node, run ``nemeses/scripts/wipe_log_dirs.py`` on the host (``python3 -``:
empties every log dir, rewrites meta.properties with the same node.id and cluster.id and a
new directory.id), then restart it (``restart: false`` leaves it down until heal). A broker's
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
            argv = ["python3", "-", "--node-id", str(node.node_id)]
            for d in plan[node.name]:
                argv += ["--log-dir", d]
            if params.get("cluster_id"):
                argv += ["--cluster-id", str(params["cluster_id"])]
            res = node.transport.run(argv, input=script_text("wipe_log_dirs.py"), sudo=True, timeout=120)
            if not res.ok:
                raise ValueError((res.stderr.strip().splitlines() or [f"{node.name}: disk wipe failed"])[-1])
            detail[node.name] = {"killed": killed, **json.loads(res.stdout)}
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
