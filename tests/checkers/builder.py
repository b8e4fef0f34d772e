"""Hand-built histories for checker tests, written exactly as workloads/history.py records them.

Why a builder: the table tests and the property tests must produce histories in the real
file format (one JSON Lines file per process, invoke/completion pairs linked by ``op``), so
that the checker under test reads them the way it reads a real run.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from workloads import history as H


class HistoryBuilder:
    """Collect records per process; ``write(run_dir)`` lays out a run directory."""

    def __init__(self) -> None:
        self.records: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.ops: dict[str, int] = defaultdict(int)
        self.timeline: list[dict[str, Any]] = []
        self.events: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.observer: list[dict[str, Any]] = []

    def _op(self, process: str) -> int:
        self.ops[process] += 1
        return self.ops[process]

    def send(self, process: str, topic: str, partition: int, value: str, offset: int | None,
             t: float, t_done: float | None = None, type: str = "ok", error: str | None = None,
             error_code: int | None = None) -> None:
        op = self._op(process)
        rs = self.records[process]
        rs.append(H.record(t=t, process=process, op=op, type="invoke", f="send", topic=topic,
                           partition=partition, value=value))
        if type == "none":  # the writer died: no completion at all
            return
        rs.append(H.record(t=t_done if t_done is not None else t + 0.01, process=process, op=op, type=type, f="send",
                           topic=topic, partition=partition, value=value,
                           offset=offset if type == "ok" else None, error=error, error_code=error_code))

    def poll(self, process: str, topic: str, partition: int, msgs: Iterable[tuple[int, str]], t: float,
             f: str = "poll") -> None:
        op = self._op(process)
        rs = self.records[process]
        rs.append(H.record(t=t, process=process, op=op, type="invoke", f=f))
        for i, (off, val) in enumerate(msgs):
            rs.append(H.record(t=t + 0.001 * (i + 1), process=process, op=op, type="ok", f=f, topic=topic,
                               partition=partition, offset=off, value=val))

    def drain(self, topic: str, partition: int, msgs: Iterable[tuple[int, str]], end: int, t: float,
              process: str = "drain") -> None:
        msgs = list(msgs)
        if msgs:
            self.poll(process, topic, partition, msgs, t, f="drain")
        op = self._op(process)
        self.records[process].append(H.record(t=t + 0.5, process=process, op=op, type="ok", f="drain-end",
                                              topic=topic, partition=partition, offset=end))

    def fault(self, fid: str, fault: str, targets: list[str], start: float, stop: float | None) -> None:
        self.timeline.append({"v": 1, "t": start, "kind": "nemesis", "phase": "start", "id": fid, "fault": fault,
                              "targets": targets, "detail": {}})
        if stop is not None:
            self.timeline.append({"v": 1, "t": stop, "kind": "nemesis", "phase": "stop", "id": fid, "fault": fault,
                                  "targets": targets, "detail": {}})

    def event(self, host: str, t: float, event: str, role: str = "controller", node: int = 0, **fields: Any) -> None:
        self.events[host].append({"wall": WALL0 + t, "node": node, "role": role, "event": event, **fields})

    def write(self, run_dir: Path, *, expect: str = "no-loss", switches: dict[str, Any] | None = None,
              topic: dict[str, Any] | None = None, extra_lines: dict[str, str] | None = None) -> Path:
        run_dir = Path(run_dir)
        (run_dir / "history").mkdir(parents=True, exist_ok=True)
        for proc, rs in self.records.items():
            with open(run_dir / "history" / f"{proc}.jsonl", "w", encoding="utf-8") as fh:
                for r in sorted(rs, key=lambda r: (r["t"], r["op"])):
                    fh.write(json.dumps(r, separators=(",", ":")) + "\n")
                if extra_lines and proc in extra_lines:
                    fh.write(extra_lines[proc])
        if self.timeline:
            (run_dir / "timeline.jsonl").write_text("".join(json.dumps(r) + "\n" for r in self.timeline))
        for host, evs in self.events.items():
            d = run_dir / "cluster-logs" / host
            d.mkdir(parents=True, exist_ok=True)
            (d / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evs))
        if self.observer:
            (run_dir / "observer.jsonl").write_text("".join(json.dumps(o) + "\n" for o in self.observer))
        run = {"run_id": run_dir.name, "campaign": "test", "expect": expect, "wall_at_t0": WALL0,
               "switches": switches or {}, "target_version": "hand-built"}
        if topic is not None:
            run["topic"] = topic
        (run_dir / "run.json").write_text(json.dumps(run))
        return run_dir


WALL0 = 1_800_000_000.0
