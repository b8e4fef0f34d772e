"""Test support: a quorum of real ``python -m kraftsim.raft`` processes on loopback.

Each node gets its own loopback address (127.0.<net>.<id>) so an iptables rule can cut one node
off from the others (the raft client binds its outgoing sockets to its listener address, so
the source address of every packet names the node). ``Quorum.close`` always kills every process
it started and removes every iptables rule it inserted, even when a test failed.
"""
from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.kraftsim.conftest import REPO


def _free_port(hosts: list[str]) -> int:
    for _ in range(200):
        port = random.randrange(30000, 60000)
        ok = True
        for h in hosts:
            with socket.socket() as s:
                try:
                    s.bind((h, port))
                except OSError:
                    ok = False
                    break
        if ok:
            return port
    raise RuntimeError("no free port")


@dataclass
class Quorum:
    root: Path
    n: int = 3
    settings: dict[str, str] = field(default_factory=dict)
    procs: dict[int, subprocess.Popen] = field(default_factory=dict)
    rules: list[list[str]] = field(default_factory=list)
    stopped: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.net = random.randrange(100, 250)
        self.hosts = {i: f"127.0.{self.net}.{i}" for i in range(1, self.n + 1)}
        self.port = _free_port(list(self.hosts.values()))
        voters = ",".join(f"{i}@{h}:{self.port}" for i, h in self.hosts.items())
        for i, h in self.hosts.items():
            d = self.dir(i)
            d.mkdir(parents=True, exist_ok=True)
            props = {
                "node.id": str(i), "process.roles": "controller", "listeners": f"CONTROLLER://{h}:{self.port}",
                "controller.quorum.voters": voters, "metadata.log.dir": str(d / "metadata"),
                "event.log": str(d / "events.jsonl"), "pid.file": str(d / "pid"),
                "raftnode.applied.file": str(d / "applied.jsonl"), "raftnode.status.file": str(d / "status.json"),
                "raftnode.append.interval.ms": "50", **self.settings,
            }
            (d / "node.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    # ---------------------------------------------------------------- processes

    def dir(self, i: int) -> Path:
        return self.root / f"node-{i}"

    def start(self, i: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        out = open(self.dir(i) / "process.log", "ab")
        self.procs[i] = subprocess.Popen([sys.executable, "-m", "kraftsim.raft", "--config",
                                          str(self.dir(i) / "node.properties")],
                                         stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                         start_new_session=True)
        self.stopped.discard(i)

    def start_all(self) -> None:
        for i in self.hosts:
            self.start(i)

    def kill(self, i: int) -> float:
        """SIGKILL (the page cache survives: nothing flushed is lost). Returns the wall time."""
        p = self.procs[i]
        t = time.time()
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(10)
        return t

    def pause(self, i: int) -> float:
        self.stopped.add(i)
        os.kill(self.procs[i].pid, signal.SIGSTOP)
        return time.time()

    def resume(self, i: int) -> None:
        self.stopped.discard(i)
        os.kill(self.procs[i].pid, signal.SIGCONT)

    def stop(self, i: int, timeout: float = 10.0) -> int | None:
        p = self.procs[i]
        if p.poll() is None:
            if i in self.stopped:
                self.resume(i)
            p.send_signal(signal.SIGTERM)
            try:
                return p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(5)
        return p.returncode

    def alive(self, i: int) -> bool:
        return i in self.procs and self.procs[i].poll() is None

    # ---------------------------------------------------------------- network

    def isolate(self, i: int) -> None:
        """DROP every packet between node i and the others, both ways (a symmetric partition)."""
        for j, h in self.hosts.items():
            if j == i:
                continue
            for src, dst in ((self.hosts[i], h), (h, self.hosts[i])):
                spec = ["INPUT", "-p", "tcp", "-s", src, "-d", dst, "-j", "DROP",
                        "-m", "comment", "--comment", f"faultline-test-raft-{os.getpid()}"]
                subprocess.run(["iptables", "-I", *spec], check=True, capture_output=True)
                self.rules.append(spec)

    def heal(self) -> None:
        for spec in self.rules:
            while subprocess.run(["iptables", "-D", *spec], capture_output=True).returncode == 0:
                pass
        self.rules.clear()

    def close(self) -> None:
        self.heal()
        for i, p in self.procs.items():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGCONT)
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(10)

    # ---------------------------------------------------------------- observations

    def status(self, i: int) -> dict[str, Any] | None:
        """Node i's last status snapshot, only if written by the process running now."""
        try:
            st = json.loads((self.dir(i) / "status.json").read_text())
        except (OSError, ValueError):
            return None
        p = self.procs.get(i)
        return st if p is not None and st.get("pid") == p.pid else None

    def events(self, i: int) -> list[dict[str, Any]]:
        path = self.dir(i) / "events.jsonl"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line cut by SIGKILL
        return out

    def all_events(self, name: str | None = None) -> list[dict[str, Any]]:
        evs = [e for i in self.hosts for e in self.events(i)]
        return sorted((e for e in evs if name is None or e["event"] == name), key=lambda e: e["wall"])

    def applied(self, i: int) -> list[dict[str, Any]]:
        path = self.dir(i) / "applied.jsonl"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def leader(self, exclude: set[int] = frozenset(), min_epoch: int = 0) -> tuple[int, int] | None:
        """(leader, epoch) when a live, running node reports being Leader at >= min_epoch and a
        majority of live nodes agree on it."""
        sts = {i: self.status(i) for i in self.hosts if self.alive(i) and i not in self.stopped and i not in exclude}
        for i, st in sts.items():
            if st and st["state"] == "Leader" and st["epoch"] >= min_epoch and time.time() - st["wall"] < 1.0:
                agree = sum(1 for s in sts.values() if s and s["epoch"] == st["epoch"] and s["leader"] == i)
                if agree >= self.n // 2 + 1:
                    return i, st["epoch"]
        return None

    def wait_leader(self, timeout: float = 20.0, **kw: Any) -> tuple[int, int]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = self.leader(**kw)
            if got:
                return got
            time.sleep(0.05)
        raise AssertionError(f"no leader within {timeout} s: " + json.dumps({i: self.status(i) for i in self.hosts}))

    # ---------------------------------------------------------------- checks

    def leaders_by_epoch(self) -> dict[int, set[int]]:
        by: dict[int, set[int]] = defaultdict(set)
        for e in self.all_events("controller_elected"):
            by[e["epoch"]].add(e["node"])
        return by

    def committed_by_offset(self) -> dict[int, set[str]]:
        """Every record any node's state machine saw, by offset (records as canonical JSON)."""
        by: dict[int, set[str]] = defaultdict(set)
        for i in self.hosts:
            for a in self.applied(i):
                by[a["offset"]].add(json.dumps(a["record"], sort_keys=True))
        return by

    def segment_batches(self, i: int) -> list[tuple[int, int, int]]:
        """(base offset, last offset, leader epoch) of every batch in node i's metadata log files."""
        from kraftsim.storage import records
        d = self.dir(i) / "metadata" / "__cluster_metadata-0"
        out = []
        for seg in sorted(d.glob("*.log")):
            data = seg.read_bytes()
            out += [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in records.iter_batches(data, 0)]
        return out
