"""The target cluster: its nodes (behind transports), its bootstrap servers, its logs.

Why here and not in the nemeses: a nemesis only knows :class:`nemeses.base.Node`
(start/stop the service, its pids, its transport). How a service is started — a systemd
unit on a lab host, a command with a pid file in a container, or a kraftsim process on
this machine — is inventory knowledge, and lives in :class:`ClusterNode`.

An embedded target (targets/: kraftsim, or a real Apache Kafka cluster) is made concrete at
run time: its launcher starts the cluster in ``RUN/cluster`` and writes ``RUN/inventory.yaml``,
an ordinary local inventory of the processes it started, which this module then reads like a
lab's. Faults are recorded against that file, so `faultline heal` rebuilds the same nodes.
"""
from __future__ import annotations

import json
import re
import signal
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from checkers import kafkalog
from checkers.kafkalog.log4j import parse_zone
from harness.inventory import KAFKA_LOG_FILES, HostSpec, Inventory, load_inventory
from groundwork.transport.base import Transport, TransportError
from groundwork.transport.local import LocalTransport
from targets.base import EmbeddedTarget, InfraError  # noqa: F401 - InfraError: the harness's name for it


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
    embedded: EmbeddedTarget | None = None
    _events_cache: tuple[float, list[dict[str, Any]]] = field(default=(0.0, []), repr=False)
    #: live Kafka logs (:meth:`_live_kafka_events`): the scratch folder, each host's paths and zone,
    #: the size of each copied file
    _live_dir: Path | None = field(default=None, repr=False)
    _live_paths: dict[str, tuple[dict[str, str], str | None]] = field(default_factory=dict, repr=False)
    _live_sizes: dict[str, int] = field(default_factory=dict, repr=False)
    _kafka_cache: tuple[float, list[dict[str, Any]]] = field(default=(0.0, []), repr=False)
    #: event log path -> (characters parsed, the events parsed from them)
    _parsed: dict[str, tuple[int, list[dict[str, Any]]]] = field(default_factory=dict, repr=False)

    @classmethod
    def from_inventory(cls, inv: Inventory, *, embedded: EmbeddedTarget | None = None) -> "Cluster":
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
        """Cluster events with ``wall >= wall`` from every node's event log (cached 0.1 s); on
        real Kafka hosts (no event log) from Kafka's own log4j files as they are now, read by
        the same reader the checker uses (checkers/kafkalog). Why live: a campaign's ``until:``
        steps wait on the events they need (a re-registration, a controller election), and on
        real Kafka those are only in its logs; without them ``restarted`` would mean only "the
        JVM runs", 20-60 s before the broker registers on a loaded machine."""
        at, cached = self._events_cache
        now = time.monotonic()
        if now - at > 0.1:
            cached = []
            for n in self.nodes.values():
                p = self.event_log_path(n)
                if not p:
                    continue
                try:
                    text = n.transport.read_text(p) or ""
                except TransportError:
                    continue
                # an event log only grows: parse only the lines added since the last read
                seen, parsed = self._parsed.get(p, (0, []))
                if len(text) < seen:
                    seen, parsed = 0, []
                end = text.rfind("\n") + 1
                for line in text[seen:end].splitlines():
                    try:
                        parsed.append(json.loads(line))
                    except ValueError:
                        continue
                self._parsed[p] = (max(seen, end), parsed)
                cached += parsed
            kat, kafka = self._kafka_cache
            if now - kat > 0.5:   # real Kafka's logs: read and assembled whole, so less often
                kafka = self._live_kafka_events()
                self._kafka_cache = (now, kafka)
            cached += kafka
            self._events_cache = (now, cached)
        return [e for e in cached if isinstance(e.get("wall"), (int, float)) and e["wall"] >= wall]

    def has_events(self, node: ClusterNode) -> bool:
        """Whether the events of ``node`` can be read while the run goes on: its event log, or
        Kafka's logs where the inventory says where they are."""
        return bool(self.event_log_path(node) or node.spec.log_dir or node.spec.log_files)

    def _live_kafka_events(self) -> list[dict[str, Any]]:
        """Events from the current Kafka log files of the hosts without an event log: each file
        copied as it is now into a scratch folder laid out as the collector lays out
        ``RUN/cluster-logs`` (a file unchanged since the last read is not copied again), then
        read as a whole by :func:`checkers.kafkalog.read_cluster_logs`, so an event is made
        exactly as the checker will make it from the collected files."""
        hosts = [n for n in self.nodes.values() if not self.event_log_path(n) and (n.spec.log_dir or n.spec.log_files)]
        if not hosts:
            return []
        if self._live_dir is None:
            import tempfile
            self._live_dir = Path(tempfile.mkdtemp(prefix="faultline-live-logs-"))
        for n in hosts:
            dest = self._live_dir / n.name
            dest.mkdir(exist_ok=True)
            if n.name not in self._live_paths:
                paths, zone = self.kafka_log_paths(n)
                if zone is None:    # as the collector does: the host's own zone
                    r = n.transport.run(["date", "+%z"])
                    zone = r.stdout.strip() if r.ok and r.stdout.strip() else None
                self._live_paths[n.name] = (paths, zone)
            paths, zone = self._live_paths[n.name]
            meta = dest / kafkalog.META_FILE
            if not meta.exists():
                meta.write_text(json.dumps({"node_id": n.node_id, "role": n.role, "timezone": zone or "UTC"}),
                                encoding="utf-8")
            for kind, remote in paths.items():
                try:
                    text = n.transport.read_text(remote)
                except TransportError:
                    continue
                if text is None:
                    continue
                local = dest / KAFKA_LOG_FILES[kind]
                if self._live_sizes.get(str(local)) != len(text):
                    local.write_text(text, encoding="utf-8")
                    self._live_sizes[str(local)] = len(text)
        try:
            return kafkalog.read_cluster_logs(self._live_dir)
        except Exception:  # noqa: BLE001 - a live read never stops a run; the checker reads the files again
            return []

    def close_live(self) -> None:
        """Remove the scratch folder of the live Kafka logs."""
        if self._live_dir is not None:
            import shutil
            shutil.rmtree(self._live_dir, ignore_errors=True)
            self._live_dir = None

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


def load_cluster_inventory(path: str | Path) -> Inventory:
    return load_inventory(path)
