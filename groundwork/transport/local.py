"""Local transport: this machine, optionally inside one network namespace.

Why: the embedded cluster (kraftsim) and the namespace test hosts run here; the run loop
and nemeses reach them through the same :class:`Transport` as a lab host over SSH, so
the code path that is tested here is the one that runs against real Kafka.
"""
from __future__ import annotations

import os
import shutil
import signal as _signal
import subprocess
from typing import Sequence

from groundwork.transport.base import CommandResult, Transport, TransportError, to_shell


#: where Debian and Ubuntu install the administration tools faultline runs on a host (iptables,
#: tc, sysctl): on root's PATH in a login shell and under sudo (secure_path), but not on cron's
#: (PATH=/usr/bin:/bin), where nightly runs start, nor under ``env -i``
ADMIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def with_admin_dirs(path: str | None) -> str:
    """``path`` with the :data:`ADMIN_DIRS` it lacks appended (its own order and precedence kept)."""
    parts = [p for p in (path or "").split(os.pathsep) if p]
    return os.pathsep.join(parts + [d for d in ADMIN_DIRS if d not in parts])


class LocalTransport(Transport):
    def __init__(self, name: str, netns: str | None = None):
        self.name = name
        self.netns = netns

    def _wrap(self, script: str, sudo: bool) -> list[str]:
        argv = ["/bin/sh", "-c", script]
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        if sudo and os.geteuid() != 0:
            argv = ["sudo", "-n", *argv]
        return argv

    def read_text(self, path: str) -> str | None:
        """Read the file here, without a ``cat`` process: a network namespace does not change
        which files a path names, and the run loop reads the cluster's event logs every 0.1 s
        while a step waits (a process per read per node would load the machine it measures)."""
        try:
            with open(path, "r", encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except OSError:
            return None

    def run(self, cmd: str | Sequence[str], *, sudo: bool = False, timeout: float | None = 60,
            check: bool = False, input: str | None = None) -> CommandResult:
        script = to_shell(cmd)
        try:
            p = subprocess.run(self._wrap(script, sudo), capture_output=True, text=True,
                               input=input, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise TransportError(f"{self.name}: command timed out after {timeout}s: {script[:120]}") from e
        except OSError as e:
            raise TransportError(f"{self.name}: cannot run command: {e}") from e
        res = CommandResult(script, p.returncode, p.stdout, p.stderr)
        return res.check() if check else res

    def spawn(self, cmd: str | Sequence[str], *, log_path: str, sudo: bool = False,
              env: dict[str, str] | None = None) -> int:
        """Start detached in its own session (so a harness crash does not take it down and
        a kill of its process group reaches its children); returns the pid."""
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
        script = "exec " + to_shell(cmd)
        with open(log_path, "ab") as log:
            p = subprocess.Popen(self._wrap(script, sudo), stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True,
                                 env={**os.environ, **(env or {})})
        return p.pid

    def put(self, local_path: str, remote_path: str) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(remote_path)), exist_ok=True)
        shutil.copyfile(local_path, remote_path)

    def get(self, remote_path: str, local_path: str) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(local_path)), exist_ok=True)
        shutil.copyfile(remote_path, local_path)

    def signal(self, pid: int, sig: int, *, sudo: bool = False) -> bool:
        try:
            os.kill(pid, sig)
            return True
        except ProcessLookupError:
            return False

    def pid_alive(self, pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        # a zombie is not alive for our purposes
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().split(") ", 1)[1][:1] != "Z"
        except OSError:
            return False

    def alive(self) -> bool:
        if self.netns is None:
            return True
        return os.path.exists(f"/var/run/netns/{self.netns}")

    def reconnect(self, timeout: float = 120.0) -> None:
        if not self.alive():
            raise TransportError(f"{self.name}: network namespace {self.netns} does not exist")


def kill_process_group(pid: int, sig: int = _signal.SIGKILL) -> None:
    """Signal a spawned process's whole session/process group, ignoring ones already gone."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
