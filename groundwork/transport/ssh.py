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
- ``~/.ssh/config`` (or the inventory's ``faultline_ssh_config``) is read as OpenSSH reads it,
  with paramiko's ``SSHConfig``, for the name the inventory gives (``ansible_host``): HostName,
  User, Port, IdentityFile and ProxyJump. A value the inventory gives wins (docs/inventory.md).
  A jump host (ProxyJump, hops separated by commas) is reached first and the next hop through a
  ``direct-tcpip`` channel of its transport, as ``ssh -J`` does; each jump host's own settings
  come from the same config file, and its host key is verified against the same known_hosts as
  the target's. ProxyCommand is refused with one line (it would run a local command).
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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Hop:
    """One host to connect to, its settings resolved (inventory first, then ssh config)."""
    alias: str                      # the name looked up in the ssh config
    host: str                       # HostName
    port: int
    user: str
    key_files: tuple[str, ...]      # IdentityFile(s); empty: the agent and default keys

    @property
    def where(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


def read_ssh_config(path: str | None) -> paramiko.SSHConfig | None:
    """The ssh config file as paramiko parses it; None when there is none to read."""
    if not path or not os.path.exists(path):
        return None
    try:
        return paramiko.SSHConfig.from_path(path)
    except (OSError, ValueError, paramiko.SSHException) as e:
        raise TransportError(f"cannot read ssh config {path}: {e}") from None


def resolve_hop(alias: str, cfg: paramiko.SSHConfig | None, *, port: int | None = None, user: str | None = None,
                key_file: str | None = None) -> tuple[Hop, list[str]]:
    """A host's settings, ``ssh -G``-like: what is given here wins, then the ssh config's Host
    blocks, then OpenSSH's defaults (port 22, the local user). Also its ProxyJump hops, as written."""
    found: dict[str, Any] = dict(cfg.lookup(alias)) if cfg is not None else {}
    if found.get("proxycommand") and str(found["proxycommand"]).lower() != "none":
        raise TransportError(f"{alias}: the ssh config's ProxyCommand is not supported (it runs a local command); "
                             f"use ProxyJump")
    keys = (os.path.expanduser(key_file),) if key_file else tuple(os.path.expanduser(k) for k in found.get("identityfile", []))
    hop = Hop(alias=alias, host=str(found.get("hostname") or alias), port=int(port or found.get("port") or 22),
              user=user or str(found.get("user") or "") or os.environ.get("USER") or "root", key_files=keys)
    jump = str(found.get("proxyjump") or "")
    return hop, [] if not jump or jump.lower() == "none" else [j.strip() for j in jump.split(",") if j.strip()]


def parse_jump(spec: str, cfg: paramiko.SSHConfig | None) -> Hop:
    """One ProxyJump hop, ``[user@]host[:port]``, the host itself looked up in the ssh config (as
    OpenSSH does for a jump host); a jump host's own ProxyJump is not followed (list the chain)."""
    user, _, hostport = spec.rpartition("@")
    host, port = hostport, None
    if hostport.startswith("["):                   # [v6]:port
        host, _, rest = hostport[1:].partition("]")
        port = rest[1:] or None
    elif hostport.count(":") == 1:
        host, port = hostport.split(":")
    if port is not None and not port.isdigit():
        raise TransportError(f"ProxyJump {spec!r}: the port must be a number")
    return resolve_hop(host, cfg, port=int(port) if port else None, user=user or None)[0]


class SshTransport(Transport):
    def __init__(self, name: str, host: str, port: int | None = None, user: str | None = None,
                 key_file: str | None = None, *, known_hosts: str | None = None,
                 accept_new_host_keys: bool = False, sudo: bool = False,
                 sudo_password_env: str | None = None, connect_timeout: float = 10.0,
                 retry_for: float = 30.0, ssh_config: str | None = None):
        cfg = read_ssh_config(os.path.expanduser(ssh_config) if ssh_config else None)
        target, jumps = resolve_hop(host, cfg, port=port, user=user, key_file=key_file)
        #: the hops before the target (ProxyJump), first to last
        self.jumps: list[Hop] = [parse_jump(j, cfg) for j in jumps]
        self.target = target
        self.name, self.host, self.port = name, target.host, target.port
        self.user = target.user
        self.key_file = target.key_files[0] if len(target.key_files) == 1 else None
        self.known_hosts = os.path.expanduser(known_hosts or "~/.ssh/known_hosts")
        self.accept_new_host_keys = accept_new_host_keys
        self.sudo = sudo
        self.sudo_password_env = sudo_password_env
        self.connect_timeout = connect_timeout
        #: how long ``run`` waits for a dropped connection to come back before giving up
        self.retry_for = retry_for
        self._client: paramiko.SSHClient | None = None
        #: the jump hosts' clients of the current connection (closed with it)
        self._jump_clients: list[paramiko.SSHClient] = []
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

        return cls(spec.name, spec.address, spec.port, spec.user, rel(spec.key_file),
                   known_hosts=rel(getattr(inv, "known_hosts", None)),
                   accept_new_host_keys=bool(getattr(inv, "accept_new_host_keys", False)),
                   sudo=bool(getattr(spec, "sudo", False)),
                   sudo_password_env=getattr(inv, "sudo_password_env", None),
                   ssh_config=rel(getattr(inv, "ssh_config", None)), **kw)

    @property
    def where(self) -> str:
        via = f" via {', '.join(j.where for j in self.jumps)}" if self.jumps else ""
        return f"{self.user}@{self.host}:{self.port}{via}"

    # --- connection -----------------------------------------------------------------------
    def _connect_once(self) -> paramiko.SSHClient:
        """The jump hosts in order, each through the one before, then the target; every host key
        verified against known_hosts (or, asked for, accepted and remembered)."""
        self._close_jumps()
        sock = None
        hops = [*self.jumps, self.target]
        try:
            for i, hop in enumerate(self.jumps):
                jc = self._open_client(hop, sock, jump=True)
                self._jump_clients.append(jc)
                sock = self._channel_to(jc, hop, hops[i + 1])
            return self._open_client(self.target, sock, jump=False)
        except BaseException:
            self._close_jumps()
            raise

    def _channel_to(self, client: paramiko.SSHClient, via: Hop, nxt: Hop) -> paramiko.Channel:
        """A ``direct-tcpip`` channel from jump host ``via`` to the next hop (``ssh -W host:port``)."""
        tr = client.get_transport()
        if tr is None:
            raise EOFError(f"jump host {via.where} dropped the connection")
        try:
            return tr.open_channel("direct-tcpip", (nxt.host, nxt.port), ("127.0.0.1", 0),
                                   timeout=self.connect_timeout)
        except paramiko.ChannelException as e:
            # the jump host could not reach the next hop (down, rebooting): worth retrying
            raise paramiko.SSHException(f"jump host {via.where} cannot reach {nxt.host}:{nxt.port}: "
                                        f"{e.text or e}") from None

    def _open_client(self, hop: Hop, sock: Any, *, jump: bool) -> paramiko.SSHClient:
        what = f"{self.name}: jump host {hop.alias}" if jump else self.name
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
        for k in hop.key_files:
            if not os.path.exists(k):
                raise _Fatal(TransportError(f"{what}: ssh key file {k} does not exist"))
        if hop.key_files:
            pkey_args["key_filename"] = list(hop.key_files)
        name = hop.host if hop.port == 22 else f"[{hop.host}]:{hop.port}"
        try:
            c.connect(hop.host, port=hop.port, username=hop.user, timeout=self.connect_timeout,
                      banner_timeout=self.connect_timeout, auth_timeout=self.connect_timeout,
                      allow_agent=True, look_for_keys=not hop.key_files, sock=sock, **pkey_args)
        except paramiko.BadHostKeyException:
            c.close()
            raise _Fatal(TransportError(
                f"{what}: host key of {hop.host}:{hop.port} has CHANGED from the one in {self.known_hosts}; "
                f"refusing to connect (remove the old entry with `ssh-keygen -R '{name}' "
                f"-f {self.known_hosts}` if the host was reinstalled)"))
        except _FATAL as e:
            c.close()
            how = f"key {', '.join(hop.key_files)}" if hop.key_files else "agent/default keys"
            raise _Fatal(TransportError(f"{what}: authentication failed for {hop.where} with {how}: "
                                        f"{str(e).splitlines()[0] if str(e) else type(e).__name__}"))
        except paramiko.SSHException as e:
            c.close()
            if "not found in known_hosts" in str(e):
                raise _Fatal(HostKeyUnknown(
                    f"{what}: host key of {hop.host}:{hop.port} is unknown (not in {self.known_hosts}); "
                    f"refusing to connect — add it with `ssh-keyscan -p {hop.port} {hop.host} >> {self.known_hosts}` "
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

    def _close_jumps(self) -> None:
        for jc in reversed(self._jump_clients):
            try:
                jc.close()
            except Exception:
                pass
        self._jump_clients = []

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
            via = f" via {', '.join(j.where for j in self.jumps)}" if self.jumps else ""
            raise TransportError(f"{self.name}: cannot reach {self.host}:{self.port}{via} over ssh "
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
        self._close_jumps()

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
