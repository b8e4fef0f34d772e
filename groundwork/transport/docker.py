"""Docker transport: one container is one host, reached through the Docker engine's API.

Why these choices:
- The docker SDK, not the ``docker`` CLI: errors come back typed (container missing,
  not running, paused) and turn into one :class:`TransportError` line each.
- A container is found by name/id, by label (``key=value``) or by compose project and
  service (``compose:PROJECT/SERVICE``), so a compose file a team already has works.
- Host-level faults are the engine's own verbs: :meth:`kill` (a signal to the container's
  PID 1: with ``--init`` SIGKILL takes every process down at once, the container analogue
  of a power cut), :meth:`pause`/:meth:`unpause` (cgroup freezer: a stalled host whose
  TCP connections stay open — the "zombie broker" of docs/seeds.md#seed-002), :meth:`restart`.
- Network faults go into the container's network namespace with ``nsenter -t <pid> -n``
  run **on the Docker host** (``run(..., net=True)`` / :meth:`net_exec`): the host's own
  iptables/tc act on the container's interfaces, so the container needs neither
  NET_ADMIN nor iptables installed, and a fault cannot be undone from inside it. This
  needs root on the machine running faultline and a local engine; with a remote engine
  (``DOCKER_HOST=ssh://...``) give the containers ``cap_add: [NET_ADMIN]`` and use plain
  ``run`` (the nemeses' default), which execs iptables inside the container.
- Files go in and out with ``put_archive``/``get_archive`` (what ``docker cp`` does),
  which also reaches named volumes mounted in the container.
"""
from __future__ import annotations

import io
import os
import posixpath
import shlex
import struct
import subprocess
import tarfile
import time
from typing import Any, Sequence

import docker
import docker.errors
from docker.models.containers import Container

from groundwork.transport.base import CommandFailed, CommandResult, Transport, TransportError, to_shell
from groundwork.transport.procs import alive_script as _alive_script, spawn_detached


def engine(client: docker.DockerClient | None = None) -> docker.DockerClient:
    """A client for the engine in DOCKER_HOST (default: the local socket), one line if down."""
    if client is not None:
        return client
    try:
        c = docker.from_env(timeout=120)
        c.ping()
        return c
    except docker.errors.DockerException as e:
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise TransportError(f"docker engine not reachable at {where}: "
                             f"{str(e).splitlines()[0][:160]}") from None


class DockerTransport(Transport):
    def __init__(self, name: str, container: str, *, docker_client: docker.DockerClient | None = None,
                 sudo: bool = True):
        """``container``: a name or id, ``label:key=value`` (or bare ``key=value``), or
        ``compose:PROJECT/SERVICE``. ``sudo`` is accepted for symmetry: exec runs as root
        when asked, which the engine always permits."""
        self.name = name
        self.selector = container
        self._client = docker_client
        self._container: Container | None = None
        #: why the last :meth:`alive` said False (one line), for the run loop's pre-flight
        self.last_error: str | None = None

    # --- finding the container -----------------------------------------------------------
    @classmethod
    def from_host(cls, spec: Any, inv: Any = None, **kw: Any) -> "DockerTransport":
        """Build from harness.inventory's HostSpec (``name``, ``container``)."""
        return cls(spec.name, spec.container, **kw)

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = engine()
        return self._client

    def _find(self) -> Container:
        sel = self.selector
        try:
            if sel.startswith("compose:"):
                project, _, service = sel[len("compose:"):].partition("/")
                filters = {"label": [f"com.docker.compose.project={project}"]
                           + ([f"com.docker.compose.service={service}"] if service else [])}
                found = self.client.containers.list(all=True, filters=filters)
            elif sel.startswith("label:") or ("=" in sel and "/" not in sel):
                found = self.client.containers.list(all=True, filters={"label": [sel.removeprefix("label:")]})
            else:
                return self.client.containers.get(sel)
        except docker.errors.NotFound:
            raise TransportError(f"{self.name}: container {sel!r} not found on the docker engine "
                                 f"(`docker ps -a` lists no such container)") from None
        except docker.errors.DockerException as e:
            raise TransportError(f"{self.name}: docker engine error looking up {sel!r}: "
                                 f"{str(e).splitlines()[0][:160]}") from None
        if len(found) != 1:
            what = "no container matches" if not found else f"{len(found)} containers match"
            raise TransportError(f"{self.name}: {what} {sel!r}; the selector must pick exactly one")
        return found[0]

    @property
    def container(self) -> Container:
        if self._container is None:
            self._container = self._find()
        return self._container

    def _state(self) -> dict[str, Any]:
        c = self.container
        try:
            c.reload()
        except docker.errors.NotFound:
            self._container = None
            raise TransportError(f"{self.name}: container {self.selector!r} no longer exists") from None
        return c.attrs.get("State", {})

    def status(self) -> str:
        """running | paused | exited | created | restarting | dead"""
        st = self._state()
        return "paused" if st.get("Paused") else str(st.get("Status", "unknown"))

    def ip(self, network: str | None = None) -> str:
        nets = self.container.attrs.get("NetworkSettings", {}).get("Networks", {})
        if network:
            return nets[network]["IPAddress"]
        for n in nets.values():
            if n.get("IPAddress"):
                return n["IPAddress"]
        raise TransportError(f"{self.name}: container {self.selector!r} has no IP address")

    def _require_running(self) -> Container:
        st = self.status()
        if st != "running":
            raise TransportError(f"{self.name}: container {self.container.name} is {st}, not running")
        return self.container

    def _api(self, what: str, fn: Any, *a: Any, **kw: Any) -> Any:
        try:
            return fn(*a, **kw)
        except docker.errors.NotFound:
            self._container = None
            raise TransportError(f"{self.name}: container {self.selector!r} not found while trying to {what}") from None
        except docker.errors.APIError as e:
            raise TransportError(f"{self.name}: cannot {what} container {self.selector!r}: "
                                 f"{(e.explanation or str(e)).splitlines()[0][:200]}") from None

    # --- commands ---------------------------------------------------------------------------
    def run(self, cmd: str | Sequence[str], *, sudo: bool = False, timeout: float | None = 60,
            check: bool = False, input: str | None = None, net: bool = False) -> CommandResult:
        """Run in the container (``docker exec``), or with ``net=True`` in its network
        namespace from the Docker host (``nsenter -t PID -n``, see module doc)."""
        if net:
            return self.net_exec(cmd, timeout=timeout, check=check, input=input)
        script = to_shell(cmd)
        c = self._require_running()
        inner = script
        if input is not None:
            # exec has no simple stdin: stage the input as a file in the container
            stage = f"/tmp/.fl-stdin-{os.getpid()}-{time.monotonic_ns()}"
            self._put_bytes(input.encode(), stage)
            inner = f"( {script}\n) < {shlex.quote(stage)}; rc=$?; rm -f {shlex.quote(stage)}; exit $rc"
        argv = ["sh", "-c", inner]
        if timeout is not None:
            argv = ["timeout", "-s", "KILL", str(max(1, int(round(timeout)))), *argv]
        t0 = time.monotonic()
        code, out, err = self._api("exec in", self._exec, c, argv, "root" if sudo else "")
        if timeout is not None and code == 137 and time.monotonic() - t0 >= timeout - 0.5:
            raise TransportError(f"{self.name}: command timed out after {timeout}s: {script[:120]}")
        r = CommandResult(script, code, (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace"))
        return r.check() if check else r

    def _exec(self, c: Container, argv: list[str], user: str) -> tuple[int, bytes, bytes]:
        """``docker exec``: its exit code, stdout and stderr, the multiplexed stream read from the
        HTTP response's own buffered reader.

        Why not ``exec_run(demux=True)``: docker-py reads the stream from the raw socket beneath
        that reader (``APIClient._get_raw_response_socket``), so whatever the reader took in with
        the response's headers is skipped and a frame header is read out of the payload - a real
        run's log collection died of it ("ValueError: 107 is not a valid stream"; docker-py's
        intermittent demux desync). The frames are Docker's documented stream format: an 8-byte
        header (stream 1 stdout, 2 stderr; big-endian length), then the payload."""
        api = self.client.api
        ex = api.exec_create(c.id, argv, stdout=True, stderr=True, user=user)
        res = api._post_json(api._url("/exec/{0}/start", ex["Id"]), data={"Tty": False, "Detach": False},
                             headers={"Connection": "Upgrade", "Upgrade": "tcp"}, stream=True)
        api._raise_for_status(res)
        fp = res.raw._fp.fp          # BufferedReader: read(n) returns n bytes, or fewer only at EOF
        out, err = bytearray(), bytearray()
        try:
            while len(head := fp.read(8)) == 8:
                stream, n = struct.unpack(">BxxxL", head)
                data = fp.read(n)
                (err if stream == 2 else out).extend(data)
                if len(data) < n:
                    break
        finally:
            res.close()
        code = api.exec_inspect(ex["Id"]).get("ExitCode")
        return (int(code) if code is not None else -1), bytes(out), bytes(err)

    def net_exec(self, cmd: str | Sequence[str], *, timeout: float | None = 60, check: bool = False,
                 input: str | None = None) -> CommandResult:
        """Run a host command (iptables, tc, ip) inside the container's network namespace."""
        script = to_shell(cmd)
        pid = int(self._state().get("Pid") or 0)
        if pid <= 0:
            raise TransportError(f"{self.name}: container {self.selector!r} is not running; "
                                 f"no network namespace to enter")
        try:
            p = subprocess.run(["nsenter", "-t", str(pid), "-n", "sh", "-c", script], capture_output=True,
                               text=True, input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TransportError(f"{self.name}: command timed out after {timeout}s: {script[:120]}") from None
        except OSError as e:
            raise TransportError(f"{self.name}: nsenter unavailable on this host: {e}") from None
        r = CommandResult(script, p.returncode, p.stdout, p.stderr)
        return r.check() if check else r

    def spawn(self, cmd: str | Sequence[str], *, log_path: str, sudo: bool = False,
              env: dict[str, str] | None = None) -> int:
        """Start detached in the container (reparented to its init when the exec ends); always
        as root, which the engine permits (``sudo`` is accepted for the interface)."""
        return spawn_detached(self, cmd, log_path=log_path, sudo=True, env=env)

    # --- files ------------------------------------------------------------------------------
    def _put_bytes(self, data: bytes, remote_path: str, mode: int = 0o644) -> None:
        c = self.container
        parent, base = posixpath.split(remote_path)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(base)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        if parent and parent != "/" and self.status() == "running":
            # put_archive needs the directory to exist; a stopped container must have it
            self.run(["mkdir", "-p", parent], sudo=True, check=True)
        try:
            ok = c.put_archive(parent or "/", buf.getvalue())
        except docker.errors.NotFound:
            raise TransportError(f"{self.name}: cannot copy to {remote_path} in {c.name}: "
                                 f"directory {parent} does not exist (or the container is gone)") from None
        except docker.errors.APIError as e:
            raise TransportError(f"{self.name}: cannot copy to {remote_path} in {c.name}: "
                                 f"{(e.explanation or str(e)).splitlines()[0][:200]}") from None
        if not ok:
            raise TransportError(f"{self.name}: copying to {remote_path} in {c.name} failed")

    def put(self, local_path: str, remote_path: str) -> None:
        try:
            with open(local_path, "rb") as fh:
                data = fh.read()
            mode = os.stat(local_path).st_mode & 0o777
        except OSError as e:
            raise TransportError(f"{self.name}: cannot read {local_path}: {e}") from None
        self._put_bytes(data, remote_path, mode)

    def get(self, remote_path: str, local_path: str) -> None:
        c = self.container
        try:
            stream, _stat = c.get_archive(remote_path)
        except docker.errors.NotFound:
            raise TransportError(f"{self.name}: cannot copy {remote_path} out of {c.name}: no such file "
                                 f"(or the container is gone)") from None
        except docker.errors.APIError as e:
            raise TransportError(f"{self.name}: cannot copy {remote_path} out of {c.name}: "
                                 f"{(e.explanation or str(e)).splitlines()[0][:200]}") from None
        buf = io.BytesIO(b"".join(stream))
        with tarfile.open(fileobj=buf) as tar:
            member = next((m for m in tar.getmembers() if m.isfile()), None)
            if member is None:
                raise TransportError(f"{self.name}: {remote_path} in {c.name} is not a regular file")
            fh = tar.extractfile(member)
            assert fh is not None
            data = fh.read()
        os.makedirs(os.path.dirname(os.path.abspath(local_path)), exist_ok=True)
        with open(local_path, "wb") as out:
            out.write(data)

    # --- processes and the container itself ----------------------------------------------------
    def signal(self, pid: int, sig: int, *, sudo: bool = False) -> bool:
        r = self.run(f"{_alive_script(pid)} || exit 99; kill -{int(sig)} {int(pid)}", sudo=True)
        if r.ok:
            return True
        if r.exit_code == 99 or "no such process" in (r.stderr + r.stdout).lower():
            return False
        raise CommandFailed(r)

    def pid_alive(self, pid: int) -> bool:
        if self.status() != "running":
            return False
        return self.run(_alive_script(pid)).ok

    def kill(self, signal: str | int = "SIGKILL") -> None:
        """Signal the container's main process (the engine's ``docker kill``)."""
        self._api("kill", self.container.kill, signal=signal)

    def pause(self) -> None:
        self._api("pause", self.container.pause)

    def unpause(self) -> None:
        self._api("unpause", self.container.unpause)

    def stop(self, timeout: int = 10) -> None:
        self._api("stop", self.container.stop, timeout=timeout)

    def start(self) -> None:
        self._api("start", self.container.start)

    def power_cycle(self, timeout: float = 120.0) -> list[int] | None:
        """A host crash for a container: the engine SIGKILLs its init, so the kernel kills every
        process of its PID namespace at once (a power cut: nothing runs its exit path), then the
        container is started again with its filesystem and volumes as they were - a reboot.
        The page cache is the Docker host's and survives; the reboot nemesis cuts what was
        unflushed. Returns the Docker host's pids of the processes that died."""
        if self.status() == "paused":
            self.unpause()
        top = self._api("list processes of", self.container.top) or {}
        titles = top.get("Titles") or []
        col = titles.index("PID") if "PID" in titles else 1
        pids = [int(p[col]) for p in top.get("Processes") or [] if len(p) > col and str(p[col]).isdigit()]
        self.kill("SIGKILL")
        self._api("wait for", self.container.wait, timeout=max(1, int(timeout)), condition="not-running")
        self.start()
        self.reconnect(timeout)
        return pids

    def restart(self, timeout: int = 10) -> None:
        """Stop (SIGTERM, then SIGKILL after ``timeout`` s) and start again: a host reboot."""
        if self.status() == "paused":
            self.unpause()
        self._api("restart", self.container.restart, timeout=timeout)

    def alive(self) -> bool:
        """Running and answering; when not, :attr:`last_error` says why in one line."""
        self.last_error = None
        try:
            st = self.status()
            if st != "running":
                self.last_error = f"{self.name}: container {self.selector!r} is {st}, not running"
                return False
            if self.run("true", timeout=10).ok:
                return True
            self.last_error = f"{self.name}: container {self.selector!r} does not run commands"
        except TransportError as e:
            self.last_error = str(e)
        return False

    def reconnect(self, timeout: float = 120.0) -> None:
        """Wait for the container to be running and answering again."""
        deadline = time.monotonic() + timeout
        last = "unknown"
        while time.monotonic() < deadline:
            try:
                last = self.status()
                if last == "running" and self.run("true", timeout=10).ok:
                    return
            except TransportError as e:
                last = str(e)
            time.sleep(0.3)
        raise TransportError(f"{self.name}: container {self.selector!r} not running after {timeout:.0f}s ({last})")
