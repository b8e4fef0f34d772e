"""The heal ledger: every fault is written down *before* it is applied.

Why: faults must heal even when the harness dies by SIGKILL. A fault's record holds all a
fresh process needs to undo it (the nemesis name, the inventory path, and the nemesis's
own ``undo`` data such as rule comments, pids, proxy pids). `faultline heal` and the next
`faultline run` replay every entry that has no matching ``healed`` line.

The ledger lives in a state directory outside any run directory (``$FAULTLINE_STATE_DIR``,
default ``~/.local/state/faultline``) so it is found without knowing which run crashed.
One JSON Lines file, appended and fsynced per entry::

    {"op": "apply", "id": "...", "kind": "fault"|"process", "nemesis": "kill", "inventory": "...",
     "record": {...}, "wall": 1700000000.0}
    {"op": "healed", "id": "...", "wall": ...}
"""
from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator


def state_dir() -> Path:
    d = Path(os.environ.get("FAULTLINE_STATE_DIR") or Path.home() / ".local" / "state" / "faultline")
    d.mkdir(parents=True, exist_ok=True)
    return d


def new_id(prefix: str = "f") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Ledger:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else state_dir() / "ledger.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def _append(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)

    def apply(self, entry_id: str, kind: str, record: dict[str, Any], **meta: Any) -> None:
        """Record that a fault (or a process we started) is about to exist."""
        self._append({"op": "apply", "id": entry_id, "kind": kind, "record": record,
                      "wall": time.time(), **meta})

    def healed(self, entry_id: str) -> None:
        self._append({"op": "healed", "id": entry_id, "wall": time.time()})

    def entries(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        with open(self.path, "rb") as fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break
                try:
                    yield json.loads(raw)
                except ValueError:
                    continue

    def open_entries(self) -> list[dict[str, Any]]:
        """Entries applied and not yet healed, newest first (undo in reverse order)."""
        applied: dict[str, dict[str, Any]] = {}
        for e in self.entries():
            if e.get("op") == "apply":
                applied[e["id"]] = e
            elif e.get("op") == "healed":
                applied.pop(e.get("id"), None)
        return list(reversed(list(applied.values())))

    def compact(self) -> None:
        """Rewrite the ledger with only its open entries (after a full heal it is empty)."""
        keep = list(reversed(self.open_entries()))
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for e in keep:
                fh.write(json.dumps(e, separators=(",", ":"), default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
