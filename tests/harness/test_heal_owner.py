"""`faultline heal` and the start of `faultline run` must not heal the faults of a run that
is still going (two users, or CI next to a developer, on one machine), yet must heal those
of a dead run, even when its pid has since been reused."""
from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from harness.heal import _start_time, heal_all
from groundwork.ledger import Ledger


def test_live_owner_is_skipped_dead_owner_is_healed(tmp_path: Path) -> None:
    owner = subprocess.Popen(["sleep", "60"])            # stands for a running `faultline run`
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a process that run started
    try:
        ledger = Ledger(tmp_path / "ledger.jsonl")
        live = {"pid": owner.pid, "start": _start_time(owner.pid)}
        ledger.apply("p-live", "process", {"what": "x", "pid": victim.pid, "match": "sleep"}, owner=live)
        rep = heal_all(ledger)
        assert rep.healed == [] and len(rep.skipped) == 1 and victim.poll() is None
        # same pid, different start time: a recycled pid is not a live owner
        ledger.apply("p-live", "process", {"what": "x", "pid": victim.pid, "match": "sleep"},
                     owner={"pid": owner.pid, "start": "1"})
        rep = heal_all(ledger)
        assert len(rep.healed) == 1 and victim.wait(10) == -signal.SIGKILL
        assert ledger.open_entries() == []
    finally:
        for p in (owner, victim):
            p.kill()
            p.wait()


def test_force_heals_a_live_owners_entry(tmp_path: Path) -> None:
    owner = subprocess.Popen(["sleep", "60"])
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        ledger = Ledger(tmp_path / "ledger.jsonl")
        ledger.apply("p-1", "process", {"what": "x", "pid": victim.pid, "match": "sleep"},
                     owner={"pid": owner.pid, "start": _start_time(owner.pid)})
        rep = heal_all(ledger, force=True)
        assert len(rep.healed) == 1 and victim.wait(10) == -signal.SIGKILL
    finally:
        for p in (owner, victim):
            p.kill()
            p.wait()
