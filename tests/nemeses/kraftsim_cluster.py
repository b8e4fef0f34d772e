"""A real kraftsim cluster (``python -m kraftsim cluster``) for nemesis tests, with nodes.

Started in its own session; stopped with SIGTERM and then, whatever happened, every pid
file's process and the launcher's process group are killed.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from groundwork.transport.local import kill_process_group
from tests.nemeses.nodes import TestNode


def props(path: Path) -> dict[str, str]:
    return dict(l.split("=", 1) for l in path.read_text().splitlines() if "=" in l and not l.startswith("#"))


class KraftsimCluster:
    def __init__(self, root: Path, brokers: int = 3, base_port: int = 19700, settings: dict[str, Any] | None = None):
        self.root, self.n, self.base_port = root, brokers, base_port
        self.settings = settings or {}
        self.proc: subprocess.Popen | None = None
        self.bootstrap = ""
        self.nodes: dict[str, TestNode] = {}

    def start(self, timeout: float = 90) -> "KraftsimCluster":
        cmd = [sys.executable, "-m", "kraftsim", "cluster", "--brokers", str(self.n), "--dir", str(self.root),
               "--base-port", str(self.base_port)]
        for k, v in self.settings.items():
            cmd += ["--set", f"{k}={v}"]
        self.root.mkdir(parents=True, exist_ok=True)
        log = open(self.root / "launcher.log", "ab")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=str(Path(__file__).resolve().parents[2]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(r"bootstrap\.servers=(\S+)", (self.root / "launcher.log").read_text(errors="replace"))
            if m:
                self.bootstrap = m.group(1)
                break
            if self.proc.poll() is not None:
                raise RuntimeError("kraftsim cluster exited: " + (self.root / "launcher.log").read_text()[-500:])
            time.sleep(0.2)
        else:
            raise RuntimeError(f"kraftsim cluster not ready in {timeout}s")
        for i in range(1, self.n + 1):
            cfg = self.root / f"broker-{i}.properties"
            p = props(cfg)
            node = TestNode(f"broker-{i}", "broker", i, p["listeners"].split("//")[1].rsplit(":", 1)[0],
                            command=[sys.executable, "-m", "kraftsim", "broker", "--config", str(cfg)],
                            log_path=str(self.root / f"broker-{i}" / "restart.log"),
                            pid_file=str(self.root / f"broker-{i}.pid"))
            node.log_dirs = p["log.dirs"].split(",")
            node.implementation = "kraftsim"   # its checkpoint is exact (nemeses.hostinfo.implementation)
            self.nodes[node.name] = node
        c = TestNode("controller", "controller", 1000, "127.0.0.1", pid_file=str(self.root / "controller.pid"))
        cp = props(self.root / "controller.properties")
        c.listeners = cp["listeners"]
        c.metadata_log_dir, c.implementation = cp["metadata.log.dir"], "kraftsim"
        self.nodes["controller"] = c
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                pass
        for pf in self.root.glob("*.pid"):
            try:
                os.kill(int(pf.read_text().split()[0]), signal.SIGKILL)
            except (OSError, ValueError, IndexError):
                pass
        if self.proc is not None:
            kill_process_group(self.proc.pid)

    def events(self, name: str) -> list[dict[str, Any]]:
        p = self.root / name / "events.jsonl"
        if not p.exists():
            return []
        out = []
        for l in p.read_text().splitlines():
            try:
                out.append(json.loads(l))
            except ValueError:
                pass
        return out


def wait_for(pred: Callable[[], Any], timeout: float, what: str, poll: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
