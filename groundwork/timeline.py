"""The run timeline: every nemesis start/stop and harness phase, on the run clock.

Written as JSON Lines (``RUN/timeline.jsonl``), append-only and flushed per event, because a
fault that was applied but not recorded would make a loss unattributable. Record shape::

    {"v": 1, "t": 12.5, "kind": "nemesis", "phase": "start", "id": "f-3", "fault": "kill",
     "targets": ["broker-2"], "detail": {...}}

``kind`` is ``nemesis`` (phase ``start``/``stop``, or ``failed``: the fault's start raised and
whatever it had done was healed, ``detail.reason`` one line and ``detail.undone`` what the heal
did), ``phase`` (harness phases such as ``setup``, ``workload``, ``heal``, ``drain``), ``node_exit``
(a Kafka node found not running, or running under another pid, though no fault of the run had
stopped it: ``host``, ``text``) or ``note``.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from groundwork.clock import RunClock

TIMELINE_VERSION = 1


class Timeline:
    def __init__(self, path: str | Path, clock: RunClock):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self._lock = threading.Lock()

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        rec = {"v": TIMELINE_VERSION, "t": round(self.clock.now(), 6), "kind": kind, **fields}
        line = json.dumps(rec, separators=(",", ":"), default=str) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
        return rec

    def fault_started(self, fault_id: str, fault: str, targets: list[str], **detail: Any) -> dict[str, Any]:
        return self.event("nemesis", phase="start", id=fault_id, fault=fault, targets=targets, detail=detail)

    def fault_stopped(self, fault_id: str, fault: str, targets: list[str], **detail: Any) -> dict[str, Any]:
        return self.event("nemesis", phase="stop", id=fault_id, fault=fault, targets=targets, detail=detail)

    def fault_failed(self, fault_id: str, fault: str, targets: list[str], **detail: Any) -> dict[str, Any]:
        """A fault whose start raised (``detail``: ``reason``, ``undone``): it is counted as failed,
        never as applied, by the verdict (docs/verdict-format.md ``faults``)."""
        return self.event("nemesis", phase="failed", id=fault_id, fault=fault, targets=targets, detail=detail)

    def phase(self, name: str, **detail: Any) -> dict[str, Any]:
        return self.event("phase", phase=name, detail=detail)


class NullTimeline(Timeline):
    """A timeline that records nothing: for `faultline heal`, which has no run to write to."""

    def __init__(self) -> None:  # noqa: D401 - deliberately no file
        self.clock = RunClock()
        self._lock = threading.Lock()

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        return {"v": TIMELINE_VERSION, "t": self.clock.now(), "kind": kind, **fields}
