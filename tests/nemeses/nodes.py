"""A minimal test-only node over LocalTransport, for nemesis tests.

Why here: the harness's ClusterNode (harness/cluster.py) knows inventories and kraftsim
configs; nemesis tests only need what the ``nemeses.base.Node`` protocol names. The
service it runs is whatever command the test gives (a kraftsim broker, a UDP listener).
"""
from __future__ import annotations

import random
import signal
import time
from pathlib import Path

from groundwork.clock import RunClock
from groundwork.ledger import Ledger
from groundwork.timeline import Timeline
from groundwork.transport.local import LocalTransport, kill_process_group
from nemeses.base import NemesisContext


class TestNode:
    __test__ = False  # not a pytest class

    def __init__(self, name: str, role: str, node_id: int, address: str, netns: str | None = None,
                 command: list[str] | None = None, log_path: str = "/dev/null",
                 pid_file: str | None = None, transport=None, env: dict[str, str] | None = None,
                 sudo: bool = False):
        self.name, self.role, self.node_id, self.address = name, role, node_id, address
        self.transport = transport or LocalTransport(name, netns=netns)
        self.command, self.log_path, self.pid_file = command, log_path, pid_file
        self.env, self.sudo = env, sudo
        self.pids: list[int] = []

    def start_service(self) -> None:
        assert self.command, f"{self.name}: no service command"
        pid = self.transport.spawn(self.command, log_path=self.log_path, env=self.env, sudo=self.sudo)
        self.pids = [pid]
        if self.pid_file:
            self.transport.write_text(self.pid_file, f"{pid}\n", sudo=self.sudo)

    def stop_service(self, sig: int = signal.SIGTERM) -> None:
        for pid in self.service_pids():
            if isinstance(self.transport, LocalTransport):
                kill_process_group(pid, sig)
            else:
                self.transport.signal(pid, sig, sudo=self.sudo)
        deadline = time.monotonic() + 10
        while any(self.transport.pid_alive(p) for p in self.service_pids()) and time.monotonic() < deadline:
            time.sleep(0.05)

    def service_pids(self) -> list[int]:
        pids = list(self.pids)
        text = self.transport.read_text(self.pid_file) if self.pid_file else None
        if text:
            try:
                pids.append(int(text.split()[0]))
            except (ValueError, IndexError):
                pass
        return [p for p in dict.fromkeys(pids) if self.transport.pid_alive(p)]


def make_ctx(tmp: Path, nodes: list[TestNode], seed: int = 7, **settings) -> NemesisContext:
    clock = RunClock()
    return NemesisContext(nodes={n.name: n for n in nodes}, timeline=Timeline(tmp / "timeline.jsonl", clock),
                          ledger=Ledger(tmp / "ledger.jsonl"), rng=random.Random(seed),
                          inventory_path=str(tmp / "inventory.yaml"), settings=settings)
