"""SSH transport: a lab host reached with paramiko, the way an operator reaches it.

Why these choices:
- Host keys are checked against known_hosts (``RejectPolicy``) unless the inventory says
  ``faultline_accept_new_host_keys: true``: a fault-injection tool that kills brokers and
  wipes disks must not be talked into doing it to a machine that merely answers on the
  right address. A *changed* key is refused even then.
- Every argv element is ``shlex.quote``-d and the whole script runs under ``sh -c`` so the
  login shell of the lab user (bash, zsh, fish) cannot change its meaning.
- A hard-rebooted host (the point of a reboot nemesis, docs/seeds.md#seed-003 "broker epochs" / docs/seeds.md#seed-002
  "incarnations": the host comes back as a new incarnation) drops the connection; the
  transport reconnects with tenacity's exponential backoff, and only connection errors
  are retried — a wrong key or host key fails at once with one line.
- ``sudo`` is what the inventory grants (``faultline_sudo``): ``run(..., sudo=True)`` is
  wrapped in ``sudo -n`` (or ``sudo -S`` fed from the environment variable named by
  ``faultline_sudo_password_env``); the password goes over the channel's stdin only and
  never into an argv, a log line or an exception.
"""
from __future__ import annotations

import os
import shlex
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import paramiko
import tenacity

from groundwork.transport.base import CommandFailed, CommandResult, Transport, TransportError, to_shell
from groundwork.transport.procs import alive_script as _alive_script, spawn_detached

#: errors worth retrying: the host is (still) down or rebooting
_RETRYABLE = (OSError, EOFError, paramiko.ssh_exception.NoValidConnectionsError,
              paramiko.ssh_exception.SSHException)
_FATAL = (paramiko.AuthenticationException, paramiko.BadHostKeyException, paramiko.PasswordRequiredException)


class HostKeyUnknown(TransportError):
    """The server's host key is not in known_hosts and accepting new keys was not asked for."""


class _Fatal(Exception):
    """Wraps a TransportError that must not be retried (auth, host key)."""

    def __init__(self, err: TransportError):
        self.err = err


class SshTransport(Transport):
    def __init__(self, name: str, host: str, port: int = 22, user: str | None = None,
                 key_file: str | None = None, *, known_hosts: str | None = None,
                 accept_new_host_keys: bool = False, sudo: bool = False,
                 sudo_password_env: str | None = None, connect_timeout: float = 10.0,
                 retry_for: float = 30.0):
        self.name, self.host, self.port = name, host, int(port or 22)
        self.user = user or os.environ.get("USER") or "root"
        self.key_file = os.path.expanduser(key_file) if key_file else None
        self.known_hosts = os.path.expanduser(known_hosts or "~/.ssh/known_hosts")
        self.accept_new_host_keys = accept_new_host_keys
        self.sudo = sudo
        self.sudo_password_env = sudo_password_env
        self.connect_timeout = connect_timeout
        #: how long ``run`` waits for a dropped connection to come back before giving up
        self.retry_for = retry_for
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.RLock()
        #: connection attempts made by the last (re)connect, for tests and the timeline
        self.last_connect_attempts = 0
        self.connects = 0
        #: why the last :meth:`alive` said False (one line), for the run loop's pre-flight
        self.last_error: str | None = None

    # --- construction from an inventory -------------------------------------------------
    @classmethod
    def from_host(cls, spec: Any, inv: Any, **kw: Any) -> "SshTransport":
        """Build from harness.inventory's HostSpec and Inventory (duck-typed: ``name,
        address, port, user, key_file, sudo`` and ``known_hosts, accept_new_host_keys,
        sudo_password_env``); relative key/known_hosts paths are relative to the inventory."""
        base = Path(getattr(inv, "path", ".")).parent

        def rel(p: str | None) -> str | None:
            if not p:
                return None
            p = os.path.expanduser(p)
            return p if os.path.isabs(p) else str(base / p)

        return cls(spec.name, spec.address, spec.port or 22, spec.user, rel(spec.key_file),
                   known_hosts=rel(getattr(inv, "known_hosts", None)),
                   accept_new_host_keys=bool(getattr(inv, "accept_new_host_keys", False)),
                   sudo=bool(getattr(spec, "sudo", False)),
                   sudo_password_env=getattr(inv, "sudo_password_env", None), **kw)

    @property
    def where(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    # --- connection -----------------------------------------------------------------------
    def _connect_once(self) -> paramiko.SSHClient:
        c = paramiko.SSHClient()
        if os.path.exists(self.known_hosts):
            try:
                c.load_host_keys(self.known_hosts)
            except (OSError, paramiko.SSHException) as e:
                raise _Fatal(TransportError(f"{self.name}: cannot read known_hosts {self.known_hosts}: {e}"))
        if self.accept_new_host_keys:
            c.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        else:
            c.set_missing_host_key_policy(paramiko.RejectPolicy())
        pkey_args: dict[str, Any] = {}
        if self.key_file:
            if not os.path.exists(self.key_file):
                raise _Fatal(TransportError(f"{self.name}: ssh key file {self.key_file} does not exist"))
            pkey_args["key_filename"] = self.key_file
        try:
            c.connect(self.host, port=self.port, username=self.user, timeout=self.connect_timeout,
                      banner_timeout=self.connect_timeout, auth_timeout=self.connect_timeout,
                      allow_agent=True, look_for_keys=self.key_file is None, **pkey_args)
        except paramiko.BadHostKeyException:
            c.close()
            raise _Fatal(TransportError(
                f"{self.name}: host key of {self.host}:{self.port} has CHANGED from the one in {self.known_hosts}; "
                f"refusing to connect (remove the old entry with `ssh-keygen -R '[{self.host}]:{self.port}' "
                f"-f {self.known_hosts}` if the host was reinstalled)"))
        except _FATAL as e:
            c.close()
            how = f"key {self.key_file}" if self.key_file else "agent/default keys"
            raise _Fatal(TransportError(f"{self.name}: authentication failed for {self.where} with {how}: "
                                        f"{str(e).splitlines()[0] if str(e) else type(e).__name__}"))
        except paramiko.SSHException as e:
            c.close()
            if "not found in known_hosts" in str(e):
                raise _Fatal(HostKeyUnknown(
                    f"{self.name}: host key of {self.host}:{self.port} is unknown (not in {self.known_hosts}); "
                    f"refusing to connect — add it with `ssh-keyscan -p {self.port} {self.host} >> {self.known_hosts}` "
                    f"or set faultline_accept_new_host_keys: true in the inventory"))
            raise
        except Exception:
            c.close()
            raise
        if self.accept_new_host_keys:
            try:
                Path(self.known_hosts).parent.mkdir(parents=True, exist_ok=True)
                c.save_host_keys(self.known_hosts)
            except OSError:
                pass  # accepting without remembering still lets this run proceed
        tr = c.get_transport()
        if tr is not None:
            tr.set_keepalive(5)
        return c

    def _connect(self, retry_for: float) -> None:
        """Connect, retrying connection errors with exponential backoff for ``retry_for`` s."""
        self._drop()
        attempts = 0

        def attempt() -> paramiko.SSHClient:
            nonlocal attempts
            attempts += 1
            return self._connect_once()

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_RETRYABLE),
            wait=tenacity.wait_exponential(multiplier=0.2, max=2.0),
            stop=tenacity.stop_after_delay(max(retry_for, 0.0)) if retry_for > 0 else tenacity.stop_after_attempt(1),
            reraise=True)
        try:
            self._client = retrying(attempt)
        except _Fatal as f:
            self.last_connect_attempts = attempts
            raise f.err from None
        except _RETRYABLE as e:
            self.last_connect_attempts = attempts
            detail = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise TransportError(f"{self.name}: cannot reach {self.host}:{self.port} over ssh "
                                 f"({attempts} attempt{'s' if attempts != 1 else ''} in {retry_for:.0f}s): {detail}") from None
        self.last_connect_attempts = attempts
        self.connects += 1

    def _drop(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:
                pass
            self._client = None

    def _active(self) -> bool:
        tr = self._client.get_transport() if self._client else None
        return bool(tr and tr.is_active())

    def _ensure(self, retry_for: float | None = None) -> paramiko.SSHClient:
        with self._lock:
            if not self._active():
                self._connect(self.retry_for if retry_for is None else retry_for)
            assert self._client is not None
            return self._client

    # --- commands ---------------------------------------------------------------------------
    def _sudo_prefix(self, sudo: bool) -> tuple[str, str | None]:
        """The wrapper for a root command and the password line to feed, if any."""
        if not (sudo and self.sudo):
            return "", None
        if self.sudo_password_env:
            pw = os.environ.get(self.sudo_password_env)
            if pw is None:
                raise TransportError(f"{self.name}: sudo password variable {self.sudo_password_env} is not set")
            return "sudo -S -p '' -- ", pw + "\n"
        return "sudo -n -- ", None

    def _wrap(self, script: str, sudo: bool) -> tuple[str, str | None]:
        prefix, pw = self._sudo_prefix(sudo)
        return f"{prefix}sh -c {shlex.quote(script)}", pw

    def _open_session(self, retry_for: float | None = None) -> paramiko.Channel:
        """A fresh channel; a connection found dead *before* the command is sent is
        re-established (with retries) once — safe, because nothing has run yet."""
        for attempt in (1, 2):
            client = self._ensure(retry_for)
            try:
                tr = client.get_transport()
                if tr is None:
                    raise EOFError("no transport")
                return tr.open_session(timeout=self.connect_timeout)
            except (paramiko.SSHException, OSError, EOFError) as e:
                self._drop()
                if attempt == 2:
                    raise TransportError(f"{self.name}: ssh session to {self.host}:{self.port} lost: "
                                         f"{e or type(e).__name__}") from None
        raise AssertionError("unreachable")

    def run(self, cmd: str | Sequence[str], *, sudo: bool = False, timeout: float | None = 60,
            check: bool = False, input: str | None = None) -> CommandResult:
        return self._run(cmd, sudo=sudo, timeout=timeout, check=check, input=input)

    def _run(self, cmd: str | Sequence[str], *, sudo: bool = False, timeout: float | None = 60,
             check: bool = False, input: str | None = None, retry_for: float | None = None) -> CommandResult:
        script = to_shell(cmd)
        full, pw = self._wrap(script, sudo)
        chan = self._open_session(retry_for)
        try:
            chan.exec_command(full)
            stdin_data = (pw or "") + (input or "")
            if stdin_data:
                chan.sendall(stdin_data.encode())
            chan.shutdown_write()
            out, err = bytearray(), bytearray()
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                got = False
                while chan.recv_ready():
                    out += chan.recv(65536)
                    got = True
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                    got = True
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                if chan.closed and not got:
                    break
                if deadline is not None and time.monotonic() > deadline:
                    raise TransportError(f"{self.name}: command timed out after {timeout}s: {script[:120]}")
                if not got:
                    time.sleep(0.01)
            code = chan.recv_exit_status() if chan.exit_status_ready() else -1
            if code == -1:
                # the channel closed without an exit status: the connection died under us
                self._drop()
                raise TransportError(f"{self.name}: connection to {self.host}:{self.port} dropped while running: {script[:120]}")
        except (paramiko.SSHException, OSError, EOFError) as e:
            self._drop()
            raise TransportError(f"{self.name}: ssh connection to {self.host}:{self.port} lost: {e or type(e).__name__}") from None
        finally:
            chan.close()
        res = CommandResult(script, code, out.decode(errors="replace"), err.decode(errors="replace"))
        if res.exit_code != 0 and sudo and self.sudo and "sudo:" in res.stderr and "password" in res.stderr:
            if self.sudo_password_env:
                raise TransportError(f"{self.name}: sudo on {self.where} rejected the password "
                                     f"from ${self.sudo_password_env}")
            raise TransportError(f"{self.name}: sudo on {self.where} needs a password "
                                 f"(grant NOPASSWD or set faultline_sudo_password_env)")
        return res.check() if check else res

    def spawn(self, cmd: str | Sequence[str], *, log_path: str, sudo: bool = False,
              env: dict[str, str] | None = None) -> int:
        """Start detached (``nohup setsid``: its own session, immune to the ssh channel
        closing) with output to ``log_path``; returns its pid on the host."""
        return spawn_detached(self, cmd, log_path=log_path, sudo=sudo, env=env)

    # --- files ------------------------------------------------------------------------------
    def _sftp(self) -> paramiko.SFTPClient:
        try:
            return self._ensure().open_sftp()
        except (paramiko.SSHException, OSError, EOFError) as e:
            self._drop()
            raise TransportError(f"{self.name}: sftp to {self.host}:{self.port} failed: {e or type(e).__name__}") from None

    def put(self, local_path: str, remote_path: str) -> None:
        parent = os.path.dirname(remote_path)
        if parent:
            self.run(["mkdir", "-p", parent], check=True)
        sftp = self._sftp()
        try:
            sftp.put(local_path, remote_path)
        except OSError as e:
            raise TransportError(f"{self.name}: cannot copy {local_path} to {self.host}:{remote_path}: {e}") from None
        finally:
            sftp.close()

    def get(self, remote_path: str, local_path: str) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(local_path)), exist_ok=True)
        sftp = self._sftp()
        try:
            sftp.get(remote_path, local_path)
        except OSError as e:
            raise TransportError(f"{self.name}: cannot copy {self.host}:{remote_path} to {local_path}: {e}") from None
        finally:
            sftp.close()

    # --- processes and liveness --------------------------------------------------------------
    def signal(self, pid: int, sig: int, *, sudo: bool = False) -> bool:
        r = self.run(f"{_alive_script(pid)} || exit 99; kill -{int(sig)} {int(pid)}", sudo=sudo)
        if r.ok:
            return True
        if r.exit_code == 99 or "no such process" in r.stderr.lower():
            return False
        raise CommandFailed(r)

    def pid_alive(self, pid: int) -> bool:
        # a zombie is not alive for our purposes (same rule as the local transport)
        return self.run(_alive_script(pid)).ok

    def alive(self) -> bool:
        """One connection attempt, no retries: a probe, not a wait. When False,
        :attr:`last_error` holds the one-line reason (unknown host key, auth, unreachable)."""
        self.last_error = None
        try:
            if self._run("true", timeout=self.connect_timeout, retry_for=0).ok:
                return True
            self.last_error = f"{self.name}: `true` failed on {self.where}"
        except TransportError as e:
            self.last_error = str(e)
        return False

    def reconnect(self, timeout: float = 120.0) -> None:
        """Wait for the host (rebooting, sshd restarting) to answer again."""
        with self._lock:
            self._connect(timeout)
        self.run("true", timeout=self.connect_timeout, check=True)

    def close(self) -> None:
        with self._lock:
            self._drop()

    def exec_channel(self, cmd: str | Sequence[str]) -> paramiko.Channel:
        """A channel running ``cmd`` (never with sudo) that the caller talks to while it runs and
        closes: for an exchange ``run`` cannot do, such as preflight's clock ping-pong, where each
        round trip must not include opening a session and starting a process."""
        chan = self._open_session()
        chan.exec_command(f"sh -c {shlex.quote(to_shell(cmd))}")
        return chan


def _silence_paramiko() -> None:
    """paramiko logs full tracebacks for refused keys at ERROR; our one line is enough."""
    import logging
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)


_silence_paramiko()
