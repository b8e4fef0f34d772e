"""Structured event log: JSON Lines in the shared cluster-event shape.

Why: the checker joins these with client histories on time and partition to attribute a
lost write to an election, a truncation or an accepted AlterPartition. Each line is
``{"wall", "node", "role", "event", ...}``; ``wall`` is ``time.time()`` so the harness maps
it onto its run clock with ``t = wall - wall_at_t0``. Lines are flushed one by one: a
SIGKILLed process leaves every event it wrote.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO


class EventLog:
    def __init__(self, path: Path | None, node: int, role: str):
        self.node, self.role = node, role
        self.fh: TextIO | None = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.fh = open(path, "a", buffering=1)

    def emit(self, event: str, **fields: Any) -> None:
        rec = {"wall": time.time(), "node": self.node, "role": self.role, "event": event, **fields}
        line = json.dumps(rec, separators=(",", ":"), default=str)
        if self.fh is not None:
            self.fh.write(line + "\n")

    def log(self, msg: str) -> None:
        """Free-text diagnostics go to stderr (collected as a text log), never into events."""
        print(f"kraftsim[{self.role} {self.node}]: {msg}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.fh:
            self.fh.close()
            self.fh = None
