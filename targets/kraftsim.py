"""The embedded kraftsim cluster: ``python -m kraftsim cluster`` for one run.

Why a launcher and not an import: kraftsim is a program faultline starts (on this machine here,
in a container or on a lab host elsewhere), never a library it imports, so the code the embedded
tests exercise is the code that runs a lab. :class:`EmbeddedKraftsim` starts the cluster in
``RUN/cluster``, records it in the heal ledger as a ``process`` entry before it exists, waits for
its ``bootstrap.servers=`` line and writes ``RUN/inventory.yaml``: an ordinary local inventory of
those processes (pid files, ``python -m kraftsim broker --config ...`` restart commands, event
logs). Faults are recorded against that file, so `faultline heal` rebuilds the same nodes.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from groundwork.config import ConfigError
from groundwork.ledger import Ledger, new_id
from groundwork.transport.local import LocalTransport, kill_process_group
from targets.base import InfraError


def read_properties(path: Path) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        k, sep, v = line.partition("=")
        if sep:
            props[k.strip()] = v.strip()
    return props


def kraftsim_set_args(settings: dict[str, Any]) -> list[str]:
    """Target settings as ``python -m kraftsim cluster`` arguments (``--set key=value``)."""
    return [a for k, v in settings.items() for a in ("--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}")]


def check_settings(brokers: int, controllers: int, settings: dict[str, Any]) -> dict[str, Any]:
    """What kraftsim's start would refuse, asked without starting anything (``python -m kraftsim
    cluster --check``): ConfigError with kraftsim's line, else the features in force (kafka.version,
    metadata.version, every gate and what decided it). kraftsim's table of Kafka's versions
    (kraftsim/features.py) is also what a real Apache Kafka cluster's record is read from."""
    cmd = [sys.executable, "-m", "kraftsim", "cluster", "--check", "--dir", "-", "--brokers", str(brokers),
           "--controllers", str(controllers), *kraftsim_set_args(settings)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode == 2:
        raise ConfigError(None, "target.settings", f"kraftsim refuses the cluster settings: "
                          f"{(p.stderr.strip().splitlines() or ['?'])[-1][:300]}")
    if p.returncode != 0:
        raise InfraError(f"`python -m kraftsim cluster --check` exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return json.loads(p.stdout)


class EmbeddedKraftsim:
    """``python -m kraftsim cluster`` for one run, registered in the ledger as a process."""

    READY_RE = re.compile(r"^bootstrap\.servers=(\S+)\s*$", re.M)

    def __init__(self, run_dir: Path, brokers: int, settings: dict[str, Any], ledger: Ledger, controllers: int = 1):
        self.run_dir = run_dir
        self.dir = run_dir / "cluster"
        self.brokers = brokers
        self.controllers = controllers
        self.settings = settings
        self.ledger = ledger
        self.log = self.dir / "cluster.log"
        self.pid: int | None = None
        self.entry_id = new_id("p")
        self.bootstrap = ""
        self.host_prefix = self.pick_host_prefix()

    @staticmethod
    def pick_host_prefix() -> str:
        """A random 127.X.Y loopback prefix: kraftsim puts node k on 127.X.Y.(1+k), so runs and
        tests on one machine (several engineers, CI) never collide on ip:port."""
        import random as _r
        import socket
        rng = _r.SystemRandom()
        for _ in range(20):
            prefix = f"127.{rng.randrange(16, 250)}.{rng.randrange(0, 256)}"
            try:
                with socket.socket() as s:
                    s.bind((f"{prefix}.1", 19092))
                return prefix
            except OSError:
                continue
        return "127.0.0"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "kraftsim", "cluster", "--brokers", str(self.brokers), "--dir", str(self.dir),
               "--host-prefix", self.host_prefix]
        if self.controllers > 1:  # a KRaft controller quorum (default: the single controller)
            cmd += ["--controllers", str(self.controllers)]
        return cmd + kraftsim_set_args(self.settings)

    def start(self, timeout: float = 90.0) -> str:
        self.dir.mkdir(parents=True, exist_ok=True)
        record = {"what": "kraftsim cluster", "dir": str(self.dir), "pid": None}
        self.ledger.apply(self.entry_id, "process", record)  # before it exists
        self.pid = LocalTransport("embedded").spawn(self.command(), log_path=str(self.log))
        self.ledger.apply(self.entry_id, "process", {**record, "pid": self.pid, "pgid": self.pid})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
            m = self.READY_RE.search(text)
            if m:
                self.bootstrap = m.group(1)
                return self.bootstrap
            code = self._exit_code()
            if code is not None or not LocalTransport("embedded").pid_alive(self.pid):
                last = [ln for ln in text.splitlines() if ln.strip()][-1:] or ["(no output)"]
                if code == 2:  # kraftsim's own "bad configuration" exit: a setting the user gave
                    raise ConfigError(None, "target.settings", f"kraftsim refused the cluster settings: {last[0][:300]}")
                raise InfraError(f"kraftsim cluster exited before it was ready: {last[0][:300]} (log: {self.log})")
            time.sleep(0.1)
        raise InfraError(f"kraftsim cluster not ready within {timeout:g}s (log: {self.log})")

    def _exit_code(self) -> int | None:
        """The launcher is our child: reap it and return its exit code once it has exited."""
        try:
            pid, status = os.waitpid(self.pid or -1, os.WNOHANG)
        except ChildProcessError:
            return None
        if pid == 0:
            return None
        return os.waitstatus_to_exitcode(status)

    def write_inventory(self) -> Path:
        """Describe the running cluster as a plain local inventory (RUN/inventory.yaml)."""
        py = shlex.quote(sys.executable)
        brokers: dict[str, Any] = {}
        controllers: dict[str, Any] = {}
        for props_file in sorted(self.dir.glob("*.properties")):
            stem = props_file.stem
            props = read_properties(props_file)
            role = "controller" if stem.startswith("controller") else "broker"
            m = re.search(r"(\d+)$", stem)
            node_id = int(props.get("node.id") or (m.group(1) if m else 0))
            host: dict[str, Any] = {
                "kafka_node_id": node_id,
                "kafka_service": {
                    "command": f"{py} -m kraftsim {role} --config {shlex.quote(str(props_file))}",
                    "pidfile": str(self.dir / f"{stem}.pid"),
                    "log": str(self.dir / stem / "process.log"),
                },
                "kafka_event_log": str(self.dir / stem / "events.jsonl"),
            }
            listeners = props.get("advertised.listeners") or props.get("listeners")
            if listeners and re.search(r"://[^,]+:\d+", listeners):
                host["kafka_listeners"] = listeners
            dirs = props.get("log.dirs") or props.get("log.dir")
            if dirs:
                host["kafka_data_dirs"] = [d for d in dirs.split(",") if d]
            if props.get("metadata.log.dir"):   # a controller's KRaft metadata log (reboot, disk-wipe)
                host["kafka_metadata_log_dir"] = props["metadata.log.dir"]
            (controllers if role == "controller" else brokers)[stem] = host
        if not brokers:
            raise InfraError(f"kraftsim wrote no broker-<id>.properties in {self.dir}")
        # a controller sharing a node id with a broker (combined numbering) gets its own id space
        ids = {h["kafka_node_id"] for h in brokers.values()}
        for h in controllers.values():
            if h["kafka_node_id"] in ids:
                h["kafka_node_id"] = 1000 + h["kafka_node_id"]
        # kafka_implementation: kraftsim rewrites recovery-point-offset-checkpoint at every flush, so
        # a page-cache-loss cut may trust it exactly (nemeses.hostinfo.implementation)
        doc = {"all": {"vars": {"faultline_transport": "local", "kafka_bootstrap": self.bootstrap,
                                "kafka_implementation": "kraftsim"},
                       "children": {"brokers": {"hosts": brokers},
                                    **({"controllers": {"hosts": controllers}} if controllers else {})}}}
        path = self.run_dir / "inventory.yaml"
        path.write_text("# generated by faultline: the embedded kraftsim cluster of this run\n"
                        + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        return path

    def features(self) -> dict[str, Any]:
        """What kraftsim ran: kafka.version, metadata.version, each gate and what decided it."""
        return json.loads((self.dir / "features.json").read_text())

    def stop(self) -> None:
        """SIGTERM (kraftsim stops brokers restarted by hand too), then make sure."""
        if self.pid is not None and LocalTransport("embedded").pid_alive(self.pid):
            os.kill(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + 15
            while LocalTransport("embedded").pid_alive(self.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        kill_embedded({"pid": self.pid, "pgid": self.pid, "dir": str(self.dir)})
        self.ledger.healed(self.entry_id)


def kill_embedded(record: dict[str, Any]) -> int:
    """Kill whatever an embedded cluster left: its process group, every pid file in its
    directory, and any process whose command line names the directory. Returns kills sent."""
    sent = 0
    pgid = record.get("pgid")
    if pgid:
        kill_process_group(int(pgid), signal.SIGKILL)
        sent += 1
    d = record.get("dir")
    if not d:
        return sent
    sent += kill_pid_files(Path(d))
    r = subprocess.run(["pgrep", "-f", "--", str(d)], capture_output=True, text=True)
    for line in r.stdout.split():
        try:
            pid = int(line)
        except ValueError:
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, signal.SIGKILL)
            sent += 1
        except OSError:
            pass
    return sent


def kill_pid_files(d: Path) -> int:
    """SIGKILL the process of every pid file in an embedded cluster's directory (its nodes),
    continued first so a paused one dies too. Returns kills sent."""
    sent = 0
    for pf in d.glob("*.pid"):
        try:
            pid = int(pf.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        for fn in (lambda p: os.killpg(p, signal.SIGCONT), lambda p: os.kill(p, signal.SIGCONT)):
            try:
                fn(pid)
            except OSError:
                pass
        try:
            os.kill(pid, signal.SIGKILL)
            sent += 1
        except OSError:
            pass
    return sent
