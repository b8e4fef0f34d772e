"""The transport contract: how faultline reaches a host, whatever the host is.

Why one small interface: nemeses and the run loop must work unchanged against the
embedded cluster (``local``), lab hosts (``ssh``) and containers (``docker``). A nemesis
says *what* to do to a host in shell commands and files; the transport decides *how* to
get there. Implementations: ``groundwork.transport.local``, ``.ssh``, ``.docker``.

Rules every implementation keeps:
- ``run`` takes an argv list (each element quoted for the remote shell with
  ``shlex.quote``) or a string that is *already* a shell script the caller built from
  quoted parts; it never interpolates secrets into logs.
- ``sudo=True`` runs as root where the inventory grants it (a no-op when already root).
- ``netns`` (local transport) or the container's namespace (docker) is where network
  faults are applied: ``run(..., net=True)`` runs the command in the host's network
  namespace for transports where that differs from where ``run`` normally executes.
- Errors reaching the host raise :class:`TransportError` with one clear line.
"""
from __future__ import annotations

import abc
import shlex
from dataclasses import dataclass
from typing import Sequence


class TransportError(RuntimeError):
    """The host could not be reached or did not answer: infrastructure, exit code 3."""


@dataclass
class CommandResult:
    argv: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def check(self) -> "CommandResult":
        if self.exit_code != 0:
            raise CommandFailed(self)
        return self


class CommandFailed(RuntimeError):
    def __init__(self, result: CommandResult):
        self.result = result
        err = (result.stderr or result.stdout).strip().splitlines()
        super().__init__(f"command failed with exit {result.exit_code}: {result.argv}"
                         + (f": {err[-1]}" if err else ""))


def to_shell(cmd: str | Sequence[str]) -> str:
    """An argv list becomes one shell string with every argument quoted."""
    if isinstance(cmd, str):
        return cmd
    return " ".join(shlex.quote(str(c)) for c in cmd)


class Transport(abc.ABC):
    """One host (machine, network namespace or container)."""

    #: the inventory name of the host
    name: str

    @abc.abstractmethod
    def run(self, cmd: str | Sequence[str], *, sudo: bool = False, timeout: float | None = 60,
            check: bool = False, input: str | None = None) -> CommandResult:
        """Run a command to completion on the host."""

    @abc.abstractmethod
    def spawn(self, cmd: str | Sequence[str], *, log_path: str, sudo: bool = False,
              env: dict[str, str] | None = None) -> int:
        """Start a long-running process detached on the host; return its pid there."""

    @abc.abstractmethod
    def put(self, local_path: str, remote_path: str) -> None:
        """Copy a local file to the host."""

    @abc.abstractmethod
    def get(self, remote_path: str, local_path: str) -> None:
        """Copy a file from the host."""

    @abc.abstractmethod
    def signal(self, pid: int, sig: int, *, sudo: bool = False) -> bool:
        """Send a signal to a process on the host; False when it no longer exists."""

    @abc.abstractmethod
    def alive(self) -> bool:
        """Whether the host answers now."""

    @abc.abstractmethod
    def reconnect(self, timeout: float = 120.0) -> None:
        """Wait for the host to answer again (after a reboot), raising TransportError."""

    def close(self) -> None:
        """Release connections; the host itself is untouched."""

    def power_cycle(self, timeout: float = 120.0) -> list[int] | None:
        """Crash the whole host at once and boot it again, if this transport can without
        touching anything else; return the pids that died, or None when it cannot (the
        caller then kills what it can reach). Only a container can: an SSH host has no
        reset button but SysRq, and a namespace shares the harness's kernel."""
        return None

    def pid_alive(self, pid: int) -> bool:
        return self.run(["kill", "-0", str(pid)]).ok

    def read_text(self, path: str) -> str | None:
        r = self.run(["cat", path])
        return r.stdout if r.ok else None

    def write_text(self, path: str, text: str, *, sudo: bool = False) -> None:
        self.run(f"cat > {shlex.quote(path)}", input=text, sudo=sudo, check=True)
