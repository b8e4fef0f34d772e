"""The target cluster: its nodes (behind transports), its bootstrap servers, its logs.

Why here and not in the nemeses: a nemesis only knows :class:`nemeses.base.Node`
(start/stop the service, its pids, its transport). How a service is started — a systemd
unit on a lab host, a command with a pid file in a container, or a kraftsim process on
this machine — is inventory knowledge, and lives in :class:`ClusterNode`.

The embedded target is made concrete at run time: :class:`EmbeddedKraftsim` starts
``python -m kraftsim cluster`` in ``RUN/cluster``, records it in the heal ledger as a
``process`` entry (before it is started), waits for its ``bootstrap.servers=`` line and
writes ``RUN/inventory.yaml``: an ordinary local inventory of those processes (pid files,
``python -m kraftsim broker --config ...`` restart commands, event logs). Faults are
recorded against that file, so `faultline heal` rebuilds the same nodes in a new process.
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
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from checkers import kafkalog
from checkers.kafkalog.log4j import parse_zone
from groundwork.config import ConfigError
from harness.inventory import KAFKA_LOG_FILES, HostSpec, Inventory, load_inventory
from groundwork.ledger import Ledger, new_id
from groundwork.transport.base import Transport, TransportError
from groundwork.transport.local import LocalTransport, kill_process_group


class InfraError(RuntimeError):
    """The target or the machine failed us (not the user's config): exit code 3."""


def make_transport(inv: Inventory, spec: HostSpec) -> Transport:
    """The transport an inventory asks for; SSH and Docker come from the remote-targets part."""
    if inv.transport == "local":
        return LocalTransport(spec.name, netns=spec.netns)
    if inv.transport == "ssh":
        try:
            from groundwork.transport.ssh import SshTransport
        except Exception as e:  # noqa: BLE001
            raise InfraError(f"ssh transport unavailable: {e}") from None
        return SshTransport.from_host(spec, inv)   # ssh config, known_hosts, sudo: as the inventory says
    try:
        from groundwork.transport.docker import DockerTransport
    except Exception as e:  # noqa: BLE001
        raise InfraError(f"docker transport unavailable: {e}") from None
    return DockerTransport(spec.name, spec.container)


class ClusterNode:
    """One inventory host as a :class:`nemeses.base.Node`."""

    def __init__(self, spec: HostSpec, transport: Transport):
        self.spec = spec
        self.name = spec.name
        self.role = spec.role
        self.node_id = int(spec.node_id if spec.node_id is not None else -1)
        self.address = spec.address
        self.transport = transport
        self.sudo = spec.sudo

    def __repr__(self) -> str:
        return f"ClusterNode({self.name}, {self.role}, id={self.node_id})"

    # -- service control ------------------------------------------------------------------
    def start_service(self) -> None:
        svc = self.spec.service
        assert svc is not None
        if svc.systemd:
            self.transport.run(["systemctl", "start", svc.systemd], sudo=True, check=True)
            return
        log = svc.log or f"{svc.pidfile}.log"
        pid = self.transport.spawn(svc.command or "", log_path=log, sudo=self.sudo)
        self.transport.write_text(svc.pidfile or "", f"{pid}\n", sudo=self.sudo)

    def stop_service(self, sig: int = signal.SIGTERM) -> None:
        """Signal the service and wait for it to exit (SIGTERM escalates to SIGKILL after 30 s)."""
        svc = self.spec.service
        assert svc is not None
        if svc.systemd:
            if sig == signal.SIGTERM:
                self.transport.run(["systemctl", "stop", svc.systemd], sudo=True, timeout=120)
            else:
                self.transport.run(["systemctl", "kill", f"--signal={int(sig)}", svc.systemd], sudo=True)
        else:
            for pid in self.service_pids():
                self.transport.signal(pid, sig, sudo=self.sudo)
        deadline = time.monotonic() + (30 if sig == signal.SIGTERM else 10)
        while self.service_pids():
            if time.monotonic() > deadline:
                if sig == signal.SIGTERM:
                    self.stop_service(signal.SIGKILL)
                    return
                raise InfraError(f"{self.name}: service still running after signal {int(sig)}")
            time.sleep(0.05)

    def cmdline(self) -> list[str]:
        """The running service's command line (``/proc/PID/cmdline`` of its pid), ``[]`` when it
        does not run or the host does not answer: where a real Kafka names its config, its
        ``-D`` properties (``kafka.logs.dir``, the log4j config) and its classpath."""
        try:
            pids = self.service_pids()
            text = self.transport.read_text(f"/proc/{pids[0]}/cmdline") if pids else None
        except Exception:  # noqa: BLE001 - a host that does not answer just has no discovery
            return []
        return [a for a in (text or "").split("\0") if a]

    def service_pids(self) -> list[int]:
        svc = self.spec.service
        if svc is None:
            return []
        if svc.systemd:
            r = self.transport.run(["systemctl", "show", "-p", "MainPID", "--value", svc.systemd])
            try:
                pid = int(r.stdout.strip() or 0)
            except ValueError:
                return []
            return [pid] if pid > 0 else []
        text = self.transport.read_text(svc.pidfile or "")
        if not text or not text.split():
            return []
        try:
            pid = int(text.split()[0])
        except ValueError:
            return []
        return [pid] if self.transport.pid_alive(pid) else []


@dataclass
class Cluster:
    """The nodes of one target, its bootstrap servers and where its event logs are."""
    inventory: Inventory
    nodes: dict[str, ClusterNode]
    bootstrap: str
    inventory_path: Path
    embedded: "EmbeddedKraftsim | None" = None
    _events_cache: tuple[float, list[dict[str, Any]]] = field(default=(0.0, []), repr=False)

    @classmethod
    def from_inventory(cls, inv: Inventory, *, embedded: "EmbeddedKraftsim | None" = None) -> "Cluster":
        nodes = {name: ClusterNode(spec, make_transport(inv, spec)) for name, spec in inv.hosts.items()}
        return cls(inv, nodes, inv.bootstrap or "", inv.path, embedded)

    def brokers(self) -> list[ClusterNode]:
        return [n for n in self.nodes.values() if n.role == "broker"]

    def check_reachable(self) -> None:
        """Remote targets: every host answers and its service runs (else exit 3)."""
        for n in self.nodes.values():
            if not n.transport.alive():
                raise InfraError(f"{n.name}: host does not answer ({self.inventory.transport} transport)")
            if not n.service_pids():
                raise InfraError(f"{n.name}: Kafka service is not running (start it, or run `faultline heal`)")

    def event_log_path(self, node: ClusterNode) -> str | None:
        return node.spec.event_log

    def events_since(self, wall: float) -> list[dict[str, Any]]:
        """Cluster events with ``wall >= wall`` from every node's event log (cached 0.5 s)."""
        at, cached = self._events_cache
        if time.monotonic() - at > 0.5:
            cached = []
            for n in self.nodes.values():
                p = self.event_log_path(n)
                if not p:
                    continue
                try:
                    text = n.transport.read_text(p) or ""
                except TransportError:
                    continue
                for line in text.splitlines():
                    try:
                        cached.append(json.loads(line))
                    except ValueError:
                        continue
            self._events_cache = (time.monotonic(), cached)
        return [e for e in cached if isinstance(e.get("wall"), (int, float)) and e["wall"] >= wall]

    def collect_logs(self, run_dir: Path) -> list[str]:
        """Copy each node's event log (and service log) to ``RUN/cluster-logs/<host>/``; on a
        real Kafka host (no event log), Kafka's own log4j files (:meth:`collect_kafka_logs`)."""
        problems = []
        since = _run_start(run_dir)
        for n in self.nodes.values():
            dest = run_dir / "cluster-logs" / n.name
            dest.mkdir(parents=True, exist_ok=True)
            p = self.event_log_path(n)
            if p:
                try:
                    n.transport.get(p, str(dest / "events.jsonl"))
                except Exception as e:  # noqa: BLE001 - a missing log is reported, not fatal
                    problems.append(f"{n.name}: event log {p}: {e}")
            svc = n.spec.service
            if svc and svc.log:
                try:
                    n.transport.get(svc.log, str(dest / Path(svc.log).name))
                except Exception as e:  # noqa: BLE001
                    problems.append(f"{n.name}: service log {svc.log}: {e}")
            if not p or n.spec.log_dir or n.spec.log_files:
                problems += self.collect_kafka_logs(n, dest, since)
        if any(kafkalog.host_dirs(run_dir / "cluster-logs")):
            st = kafkalog.Stats()
            kafkalog.read_cluster_logs(run_dir / "cluster-logs", stats=st)
            problems += [f"kafka logs: {x}" for x in st.problems]
            if st.not_understood:
                problems.append(f"kafka logs: {st.not_understood} of {st.records} records looked like a state change "
                                "but were not understood (a Kafka wording checkers/kafkalog does not know yet)")
        return problems

    # -- Kafka's own log4j files -----------------------------------------------------------------
    def kafka_log_paths(self, node: ClusterNode) -> tuple[dict[str, str], str | None]:
        """(kind -> path on the host, the zone log4j stamps in) of Kafka's log4j files.

        Paths: ``kafka_log_files`` first, else ``kafka_log_dir``/<name>, else the running
        broker's own ``-Dkafka.logs.dir=`` (kafka-run-class.sh passes LOG_DIR to the JVM that
        way), with the names Kafka's log4j configuration gives them. Zone: ``kafka_log_timezone``,
        else the JVM's ``-Duser.timezone=``, else none (the host's, asked at collection).
        """
        spec = node.spec
        jvm: dict[str, str] = {}
        paths_known = bool(spec.log_dir) or len(spec.log_files) == len(KAFKA_LOG_FILES)
        if not paths_known or not spec.log_timezone:
            jvm = self._jvm_properties(node)
        log_dir = spec.log_dir or jvm.get("kafka.logs.dir")
        paths = {k: f"{log_dir.rstrip('/')}/{name}" for k, name in KAFKA_LOG_FILES.items()} if log_dir else {}
        paths.update(spec.log_files)
        return paths, spec.log_timezone or jvm.get("user.timezone")

    @staticmethod
    def _jvm_properties(node: ClusterNode) -> dict[str, str]:
        """``-Dkey=value`` arguments of the running service's command line (/proc/PID/cmdline)."""
        out: dict[str, str] = {}
        for arg in node.cmdline():
            if arg.startswith("-D") and "=" in arg:
                k, _, v = arg[2:].partition("=")
                out[k] = v
        return out

    def collect_kafka_logs(self, node: ClusterNode, dest: Path, since: float | None) -> list[str]:
        """Copy server.log, controller.log and state-change.log (and the hourly rolled files
        of the run's hours, ``server.log.YYYY-MM-DD-HH``) into ``dest`` under Kafka's names,
        with ``kafka-logs.json``: node id, role, time zone and where each file came from
        (checkers/kafkalog reads them; docs/kafka-logs.md)."""
        paths, zone = self.kafka_log_paths(node)
        if not paths:
            return [f"{node.name}: no event log and no Kafka log dir (set kafka_log_dir; the running service "
                    "named no -Dkafka.logs.dir): no elections, ISR changes or truncations from this host"]
        problems: list[str] = []
        if zone is None:
            r = node.transport.run(["date", "+%z"])
            zone = r.stdout.strip() if r.ok and r.stdout.strip() else None
            if zone is None:
                problems.append(f"{node.name}: could not ask the host's time zone (date +%z); Kafka's log times read as UTC")
        try:
            tz = parse_zone(zone)
        except ValueError as e:
            problems.append(f"{node.name}: time zone {zone!r}: {e}; Kafka's log times read as UTC")
            tz, zone = parse_zone(None), None
        collected: dict[str, str] = {}
        for kind, remote in paths.items():
            name = KAFKA_LOG_FILES[kind]
            parent, _, base = remote.rpartition("/")
            r = node.transport.run(["ls", "-1", "--", parent or "/"])
            if not r.ok:
                problems.append(f"{node.name}: Kafka log dir {parent or '/'}: cannot list it ({(r.stderr or r.stdout).strip()[:200]})")
                continue
            for fname in sorted(r.stdout.split()):
                suffix = _rolled_suffix(fname, base)
                if suffix is None or (suffix and not _rolled_in_run(suffix, tz, since)):
                    continue
                # Kafka 4.0's log4j2.yaml names the rolled state-change files stage-change.log.<hour>:
                # keep that name (checkers/kafkalog reads it as the state-change log), so a host that
                # has both names for one hour keeps both files
                aliased = bool(suffix) and not fname.startswith(base + ".")
                local = (_ROLLED_ALIASES[base] if aliased else name) + (f".{suffix}" if suffix else "")
                try:
                    node.transport.get(f"{parent}/{fname}", str(dest / local))
                    collected[local] = f"{parent}/{fname}"
                except Exception as e:  # noqa: BLE001 - a missing log is reported, not fatal
                    problems.append(f"{node.name}: Kafka log {parent}/{fname}: {e}")
            if base not in r.stdout.split():
                problems.append(f"{node.name}: Kafka log {remote} not found (set kafka_log_dir or kafka_log_files)")
        (dest / kafkalog.META_FILE).write_text(json.dumps(
            {"node_id": node.node_id, "role": node.role, "timezone": zone, "files": paths, "collected": collected},
            indent=1) + "\n", encoding="utf-8")
        return problems


def _run_start(run_dir: Path) -> float | None:
    """The run's first wall time (run.json), to pick the rolled log files of the run's hours."""
    try:
        run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    w = run.get("started_wall", run.get("wall_at_t0")) if isinstance(run, dict) else None
    return float(w) if isinstance(w, (int, float)) and not isinstance(w, bool) else None


#: rolled files Kafka names differently from the current one: Kafka 4.0's config/log4j2.yaml rolls
#: state-change.log to ``stage-change.log.%d{yyyy-MM-dd-HH}`` (the 4.0.0 distribution and log dir of
#: tests/checkers/kafka_logs_real/kafka2.13-4.0.0-repo-restart-fence-reelect, PROVENANCE.md)
_ROLLED_ALIASES = {"state-change.log": "stage-change.log"}


def _rolled_suffix(fname: str, base: str) -> str | None:
    """"" for the current file, the DatePattern suffix for a rolled one (under the current file's
    name or its :data:`_ROLLED_ALIASES` name), None for others."""
    if fname == base:
        return ""
    for stem in (base, _ROLLED_ALIASES.get(base)):
        if stem and fname.startswith(stem + ".") and re.fullmatch(r"\d{4}-\d{2}-\d{2}(-\d{2})?", fname[len(stem) + 1:]):
            return fname[len(stem) + 1:]
    return None


def _rolled_in_run(suffix: str, tz: Any, since: float | None) -> bool:
    """A file rolled at ``.yyyy-MM-dd-HH`` holds that hour (``.yyyy-MM-dd``: that day): keep it
    when it ends after the run began (all of them when the start is unknown)."""
    if since is None:
        return True
    parts = [int(x) for x in suffix.split("-")]
    start = datetime(parts[0], parts[1], parts[2], parts[3] if len(parts) > 3 else 0, tzinfo=tz).timestamp()
    return start + (3600 if len(parts) > 3 else 86400) >= since - 60


# ---------------------------------------------------------------------------------------
# the embedded kraftsim cluster

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


def check_embedded(brokers: int, controllers: int, settings: dict[str, Any]) -> dict[str, Any]:
    """What the embedded cluster's start would refuse, asked without starting anything
    (``python -m kraftsim cluster --check``): ConfigError with kraftsim's line, else the features
    in force (kafka.version, metadata.version, gates)."""
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
    for pf in Path(d).glob("*.pid"):
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


def load_cluster_inventory(path: str | Path) -> Inventory:
    return load_inventory(path)
