"""Heal what the ledger says is still applied: `faultline heal` and the start of every run.

Why from the ledger alone: the process that applied a fault may be dead (SIGKILL, OOM,
a crashed laptop). Each open entry says which nemesis applied it, against which
inventory, with the nemesis's own undo data; a fresh process rebuilds the nodes from that
inventory file and calls ``REGISTRY[nemesis].stop(record)``. Entries of kind
``process`` (the embedded cluster, proxies) are killed by recorded pid/process group.
Entries are undone newest first (a broker restarted before its cluster is stopped, a
rule removed before the proxy behind it goes). A failing entry is reported and left open
so the next heal retries it; the others still heal.
"""
from __future__ import annotations

import os
import random
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cluster import Cluster, kill_embedded
from harness.config import ConfigError
from harness.inventory import load_inventory
from harness.ledger import Ledger
from harness.timeline import NullTimeline, Timeline
from harness.transport.local import kill_process_group
from nemeses.base import FaultRecord, NemesisContext, REGISTRY
from nemeses.schedule import load_nemeses


@dataclass
class HealReport:
    healed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner() -> dict[str, Any]:
    """Who applies an entry: this process (pid + kernel start time, so a recycled pid is
    not mistaken for a live owner)."""
    return {"pid": os.getpid(), "start": _start_time(os.getpid())}


def owner_alive(entry: dict[str, Any]) -> bool:
    """Whether the faultline process that wrote this entry still runs (and is not us)."""
    o = entry.get("owner") or {}
    pid = o.get("pid")
    if not pid or pid == os.getpid():
        return False
    return _start_time(int(pid)) == o.get("start")


class OwnedLedger(Ledger):
    """A ledger whose entries say which live process owns them, so a second `faultline run`
    (or `faultline heal` without --force) never heals the faults of a run still going."""

    def apply(self, entry_id: str, kind: str, record: dict[str, Any], **meta: Any) -> None:
        meta.setdefault("owner", owner())
        super().apply(entry_id, kind, record, **meta)


def _ctx_for(inv_path: str | None, ledger: Ledger, timeline: Timeline, cache: dict[str, Any],
             override: str | None) -> NemesisContext:
    path = override or inv_path or ""
    if path not in cache:
        nodes: dict[str, Any] = {}
        if path and Path(path).exists():
            inv = load_inventory(path)
            if not inv.embedded:
                nodes = dict(Cluster.from_inventory(inv).nodes)
        cache[path] = NemesisContext(nodes=nodes, timeline=timeline, ledger=ledger, rng=random.Random(0),
                                     inventory_path=path)
    return cache[path]


def heal_process(record: dict[str, Any]) -> None:
    """A process faultline started (embedded cluster, proxy): kill it and what it left."""
    if record.get("dir"):
        kill_embedded(record)
        return
    if record.get("pgid"):
        kill_process_group(int(record["pgid"]), signal.SIGCONT)
        kill_process_group(int(record["pgid"]), signal.SIGKILL)
    pid = record.get("pid")
    if pid:
        match = record.get("match")
        if match:  # guard against a recycled pid: only kill what still looks like ours
            try:
                cmdline = Path(f"/proc/{int(pid)}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                return
            if match not in cmdline:
                return
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(int(pid), sig)
            except OSError:
                pass


def heal_all(ledger: Ledger | None = None, *, inventory: str | None = None,
             timeline: Timeline | None = None, only_ids: set[str] | None = None,
             force: bool = False) -> HealReport:
    ledger = ledger or Ledger()
    timeline = timeline or NullTimeline()
    load_nemeses()
    report = HealReport()
    cache: dict[str, Any] = {}
    for entry in ledger.open_entries():
        eid = entry.get("id", "?")
        if only_ids is not None and eid not in only_ids:
            continue
        what = f"{entry.get('kind')} {entry.get('nemesis') or entry.get('record', {}).get('what', '')} {eid}".strip()
        if not force and owner_alive(entry):
            report.skipped.append(f"{what} (its faultline run, pid {entry['owner']['pid']}, is still running)")
            continue
        try:
            if entry.get("kind") == "process":
                heal_process(entry.get("record") or {})
                ledger.healed(eid)
            else:
                name = entry.get("nemesis")
                if name not in REGISTRY:
                    raise RuntimeError(f"nemesis {name!r} is not installed")
                rec = FaultRecord.from_json(entry["record"])
                ctx = _ctx_for(entry.get("inventory"), ledger, timeline, cache, inventory)
                nem = REGISTRY[name]()
                nem.setup(ctx)
                nem.stop(rec)  # ends with ledger.healed(rec.id) via Nemesis.end
                if rec.id != eid:
                    ledger.healed(eid)
            report.healed.append(what)
        except ConfigError as e:
            report.failed.append(f"{what}: inventory: {e}")
        except Exception as e:  # noqa: BLE001 - one line per failure; others still heal
            report.failed.append(f"{what}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    if not report.failed and not report.skipped:
        ledger.compact()
    return report
