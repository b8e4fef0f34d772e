"""Fixtures for kraftsim end-to-end tests: real clusters via ``python -m kraftsim cluster``.

``kraftsim_cluster(brokers=3, settings={...})`` starts a cluster in a temporary directory on
free loopback ports and returns a :class:`KCluster`. Teardown always stops it: SIGTERM to the
launcher (which stops what it started and whatever the pid files name), then SIGKILL to the
process group of every pid file and every process a test restarted — even if the test failed.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

REPO = Path(__file__).resolve().parents[2]
FAST = {  # short timeouts keep each scenario to seconds; every value is a real Kafka knob
    "broker.session.timeout.ms": "1500",
    "broker.heartbeat.interval.ms": "200",
    "replica.lag.time.max.ms": "2000",
}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def free_base_port(n: int) -> int:
    """A base port with base..base+n free on the addresses the cluster will bind."""
    for _ in range(200):
        base = random.randrange(30000, 60000 - n)
        ok = True
        for i in range(n + 1):
            with socket.socket() as s:
                try:
                    s.bind((f"127.0.0.{1 + i}", base + i))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port range")


@dataclass
class KCluster:
    dir: Path
    brokers: int
    base_port: int
    launcher: subprocess.Popen
    bootstrap: str
    extra: list[subprocess.Popen] = field(default_factory=list)

    def addr(self, broker: int) -> tuple[str, int]:
        return f"127.0.0.{1 + broker}", self.base_port + broker

    @property
    def controller_addr(self) -> tuple[str, int]:
        return "127.0.0.1", self.base_port

    def pid(self, name: str) -> int | None:
        try:
            return int((self.dir / f"{name}.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def signal(self, name: str, sig: int) -> None:
        pid = self.pid(name)
        assert pid, f"no pid for {name}"
        os.kill(pid, sig)

    def kill(self, name: str) -> None:
        """SIGKILL and wait until the process is gone (page cache stays: no fsync happens)."""
        pid = self.pid(name)
        assert pid
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        end = time.time() + 5
        while time.time() < end:
            for p in [self.launcher, *self.extra]:
                p.poll()
            try:
                st = Path(f"/proc/{pid}/stat").read_text()
                if st.rsplit(")", 1)[1].split()[0] == "Z":
                    break
            except OSError:
                break
            time.sleep(0.02)

    def start_broker(self, broker: int) -> subprocess.Popen:
        """Restart a broker by hand, exactly as the contract says."""
        out = open(self.dir / f"broker-{broker}" / "process.log", "ab")
        p = subprocess.Popen([sys.executable, "-m", "kraftsim", "broker", "--config",
                              str(self.dir / f"broker-{broker}.properties")],
                             stdout=out, stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
        out.close()
        self.extra.append(p)
        return p

    def data_dir(self, broker: int) -> Path:
        return self.dir / f"broker-{broker}" / "data"

    def events(self, name: str = "controller") -> list[dict[str, Any]]:
        path = self.dir / name / "events.jsonl"
        out = []
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def wait_event(self, pred: Callable[[dict], bool], name: str = "controller", timeout: float = 20.0,
                   after: float = 0.0) -> dict[str, Any]:
        end = time.time() + timeout
        while time.time() < end:
            for e in self.events(name):
                if e["wall"] >= after and pred(e):
                    return e
            time.sleep(0.05)
        raise AssertionError(f"no matching event in {name}/events.jsonl within {timeout}s")

    def stop(self, graceful: bool = True) -> None:
        """Graceful: SIGTERM the launcher (what a user does). Not graceful (fixture teardown, to
        keep the suite quick): SIGKILL every process group named by a pid file, then the launcher."""
        if not graceful:
            self._kill_all()
        if self.launcher.poll() is None:
            self.launcher.send_signal(signal.SIGTERM)
            try:
                self.launcher.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.launcher.kill()
        self._kill_all()

    def _ours(self, pid: int) -> bool:
        """Only a kraftsim process of this cluster (pid files outlive their process; pids get reused)."""
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return False
        return "kraftsim" in cmd and str(self.dir) in cmd

    def _kill_all(self) -> None:
        for name in ["controller", *[f"broker-{i}" for i in range(1, self.brokers + 1)]]:
            pid = self.pid(name)
            if pid and self._ours(pid):
                for fn in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
                    try:
                        fn()
                    except OSError:
                        pass
        for p in self.extra:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
            p.wait(timeout=5)


def start_cluster(root: Path, brokers: int = 3, settings: dict[str, Any] | None = None,
                  fast: bool = True, base_port: int | None = None) -> KCluster:
    base = base_port or free_base_port(brokers)
    sets = {**(FAST if fast else {}), **{k: str(v).lower() if isinstance(v, bool) else str(v)
                                         for k, v in (settings or {}).items()}}
    cmd = [sys.executable, "-m", "kraftsim", "cluster", "--brokers", str(brokers), "--dir", str(root),
           "--base-port", str(base)]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                         start_new_session=True)
    line = p.stdout.readline() if p.stdout else ""
    if not line.startswith("bootstrap.servers="):
        p.wait(timeout=30)
        raise AssertionError(f"cluster did not start: {line!r} {p.stderr.read() if p.stderr else ''}")
    return KCluster(root, brokers, base, p, line.strip().split("=", 1)[1])


@pytest.fixture
def kraftsim_cluster(tmp_path: Path):
    """Factory: ``kraftsim_cluster(brokers=3, settings={...}, dir=None) -> KCluster``."""
    made: list[KCluster] = []

    def factory(brokers: int = 3, settings: dict[str, Any] | None = None, dir: Path | None = None,
                fast: bool = True, base_port: int | None = None) -> KCluster:
        root = Path(dir) if dir else tmp_path / f"cluster{len(made)}"
        c = start_cluster(root, brokers, settings, fast, base_port)
        made.append(c)
        return c

    yield factory
    for c in made:
        c.stop(graceful=False)
