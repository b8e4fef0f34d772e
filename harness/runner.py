"""The run loop: one campaign against one target, from setup to verdict.

Why this order: set up the cluster (embedded: start kraftsim;
remote: check every host answers and runs Kafka), create the topic, start the observer
and the recorded workloads, drive the nemesis schedule, **heal everything**, wait for
recovery (a leader and min ISR on every partition), stop the clients, run the final
drain read (what the cluster holds at the end is what decides "lost"), collect the
cluster's event logs, then check and report. One :class:`RunClock` stamps histories,
timeline and observer; ``run.json.wall_at_t0`` maps the cluster's wall-clock event logs
onto it.

Always heal: every fault and every process this loop starts (kraftsim, clients) is in
the heal ledger before it exists; the ``finally`` below heals on any exit, including
SIGINT/SIGTERM (the CLI turns those into :class:`Interrupted`); a SIGKILLed run is healed
by `faultline heal` or the next `faultline run` from the ledger.
"""
from __future__ import annotations

import json
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.outcome import EXIT_CONFIG, EXIT_INFRA, EXIT_OK
from harness.campaign import Campaign
from harness.check import CheckPrep, check_and_report
from groundwork.clock import RunClock
from groundwork.config import ConfigError
from harness.cluster import Cluster, InfraError
from harness.heal import OwnedLedger, heal_all, heal_process, owner
from harness.inventory import load_inventory
from harness.latest import point_latest
from harness.placement import seeded_assignment
from groundwork.ledger import Ledger, new_id
from groundwork.timeline import Timeline
from nemeses.base import REGISTRY, NemesisContext
from nemeses.lossyfs import RunDisks
from nemeses.reboot import run_notes as page_cache_notes
from nemeses.schedule_runner import ScheduleError, ScheduleRunner
from targets.apache_kafka import EmbeddedApacheKafka, resolve_release
from targets.base import EmbeddedTarget
from targets.kafka_settings import sort as sort_kafka_settings
from targets.kraftsim import EmbeddedKraftsim
from workloads.history import read_jsonl
from workloads.kafka_wire import probe
from workloads.security import PLAINTEXT, ClientSecurity


class Interrupted(BaseException):
    """SIGINT/SIGTERM arrived: heal and leave (BaseException so no `except Exception` eats it)."""


@dataclass
class RunStatus:
    """What the progress display shows; written by the run loop, read by the CLI."""
    phase: str = "starting"
    started: float = field(default_factory=time.monotonic)
    acked: int = 0
    failed: int = 0
    info: int = 0
    read: int = 0
    fault: str = "-"
    ops_per_s: float = 0.0
    _last: tuple[float, int] = (0.0, 0)

    def update_rate(self) -> None:
        now, done = time.monotonic(), self.acked + self.failed + self.info
        t0, d0 = self._last
        if t0 and now > t0:
            self.ops_per_s = (done - d0) / (now - t0)
        self._last = (now, done)


@dataclass
class RunResult:
    run_dir: Path
    verdict: dict[str, Any] | None
    exit_code: int
    message: str


class View:
    """The schedule's window onto the cluster: observer samples + cluster event logs."""

    def __init__(self, cluster: Cluster, observer: Any):
        self.cluster, self.observer = cluster, observer

    def partition_state(self, partition: int) -> dict[str, Any] | None:
        if self.observer is None:
            return None
        rec = self.observer.latest().get(partition)
        if not rec or rec.get("error"):
            return None
        return rec

    def events_since(self, wall: float) -> list[dict[str, Any]]:
        return self.cluster.events_since(wall)

    def has_events(self, node: Any) -> bool:
        return self.cluster.has_events(node)


def target_name(camp: Campaign) -> str:
    """The target as the index and JUnit group runs: the inventory's name, or ``apache-kafka`` for the
    embedded real-Kafka cluster (its release is :func:`target_version`)."""
    return "apache-kafka" if camp.inventory.embedded == "apache-kafka" else camp.inventory_path.stem


def target_version(camp: Campaign) -> str:
    """What the run runs against, for run.json, the report, the index and JUnit."""
    inv = camp.inventory
    if not inv.embedded:
        return "kafka (remote)"
    if inv.embedded == "apache-kafka":
        return f"apache-kafka {resolve_release(inv.embedded_version, sort_kafka_settings(camp.settings))}"
    try:  # kraftsim ships in the faultline distribution: its version is the distribution's
        from importlib.metadata import version
        return f"kraftsim {version('faultline')}"
    except Exception:  # noqa: BLE001 - running from a source tree without metadata
        return "kraftsim"


def new_run_dir(results_dir: Path, camp: Campaign) -> tuple[str, Path]:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = f"{camp.name}-{stamp}-s{camp.seed}"
    for i in range(1000):
        run_id = base if i == 0 else f"{base}-{i}"
        d = results_dir / run_id
        try:
            d.mkdir(parents=True, exist_ok=False)
            point_latest(results_dir, d)   # RESULTS/latest: the newest run
            return run_id, d
        except FileExistsError:
            continue
    raise InfraError(f"cannot create a run directory under {results_dir}")


def write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def create_topic(bootstrap: str, camp: Campaign, timeout: float = 30.0, security: ClientSecurity = PLAINTEXT) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    t = camp.topic
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000, **security.librdkafka()})
    config = {**t.configs, "min.insync.replicas": str(t.min_insync_replicas)}
    nt = NewTopic(t.name, num_partitions=t.partitions, replication_factor=t.replication_factor, config=config)
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if t.placement == "seeded" and nt.replica_assignment is None:
            try:   # every broker of the cluster, as the controller would place over them
                ids = sorted(admin.list_topics(timeout=10).brokers)
            except Exception as e:  # noqa: BLE001 - not up yet: try again
                last = f"{type(e).__name__}: {e}"
                time.sleep(0.5)
                continue
            if len(ids) < t.replication_factor:
                last = f"{len(ids)} broker(s) registered, replication factor {t.replication_factor}"
                time.sleep(0.5)
                continue
            # (this client wants the partition count beside an assignment, never the replication factor)
            nt = NewTopic(t.name, num_partitions=t.partitions,
                          replica_assignment=seeded_assignment(ids, t.partitions, t.replication_factor, camp.seed),
                          config=config)
        fut = admin.create_topics([nt], operation_timeout=10, request_timeout=15)[t.name]
        try:
            fut.result(timeout=20)
            return
        except KafkaException as e:
            err = e.args[0] if e.args else None
            name = err.name() if hasattr(err, "name") else str(e)
            if name == "TOPIC_ALREADY_EXISTS":
                return
            last = f"{name}: {err.str() if hasattr(err, 'str') else e}"
            # UNKNOWN (UNKNOWN_SERVER_ERROR): a KRaft controller that renounced while creating the
            # topic answers it (QuorumController.handleEventException, 3.3-3.5: "createTopics: failed
            # with unknown server exception NotLeaderException ... Renouncing leadership"), seen on
            # real 3.4.0 controllers electing again and again on a loaded machine: try the next one
            if (hasattr(err, "retriable") and not err.retriable()
                    and name not in ("_TRANSPORT", "_TIMED_OUT", "NOT_CONTROLLER", "UNKNOWN")):
                raise InfraError(f"cannot create topic {t.name}: {last}") from None
        except Exception as e:  # noqa: BLE001 - futures time out with concurrent errors
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.5)
    raise InfraError(f"cannot create topic {t.name} within {timeout:g}s: {last}")


def all_partitions(n: int, min_isr: int) -> Any:
    def pred(latest: dict[int, dict[str, Any]]) -> bool:
        for p in range(n):
            r = latest.get(p)
            if not r or r.get("error") or r.get("leader") in (None, -1) or len(r.get("isr") or []) < min_isr:
                return False
        return True
    return pred


class Runner:
    def __init__(self, camp: Campaign, results_dir: Path, command: str, *, ledger: Ledger | None = None,
                 status: RunStatus | None = None, stop_event: threading.Event | None = None,
                 check: bool = True):
        self.camp = camp
        self.results_dir = results_dir
        self.command = command
        self.ledger = ledger or OwnedLedger()
        self.status = status or RunStatus()
        self.stop_event = stop_event or threading.Event()
        self.run_id, self.run_dir = new_run_dir(results_dir, camp)
        self.clock = RunClock()
        self.timeline = Timeline(self.run_dir / "timeline.jsonl", self.clock)
        self.history_dir = self.run_dir / "history"
        self.history_dir.mkdir(parents=True, exist_ok=True)
        #: prepares the check while the run runs: the history's conversion, and Spark when
        #: ``check`` (this process checks the run) - harness/check.py CheckPrep
        self.prep = CheckPrep(self.run_dir, spark=check)
        self.embedded: EmbeddedTarget | None = None
        self.cluster: Cluster | None = None
        self.observer: Any = None
        self.clients: list[Any] = []
        self.client_entries: list[str] = []
        self.sched: ScheduleRunner | None = None
        self.run_json: dict[str, Any] = {}
        self.notes: list[str] = []
        #: how every client authenticates (the inventory's kafka_client, secrets read at set-up)
        self.security: ClientSecurity = PLAINTEXT
        #: each node's service pids when the nemesis phase began (:meth:`check_nodes`)
        self.pids_before: dict[str, list[int]] = {}

    # -- run.json ---------------------------------------------------------------------------
    def write_run_json(self, **extra: Any) -> None:
        c = self.camp
        self.run_json.update({
            "run_id": self.run_id, "campaign": c.name, "campaign_path": str(c.path),
            "inventory": str(c.inventory_path), "target": target_name(c), "seed": c.seed,
            "wall_at_t0": self.clock.wall_at_t0, **c.expectation.to_json(),
            "switches": {str(k): v for k, v in c.settings.items()},
            # the topic as created: the checker's min-ISR invariant reads min_insync_replicas here
            "topic": {"name": c.topic.name, "partitions": c.topic.partitions,
                      "replication_factor": c.topic.replication_factor,
                      "min_insync_replicas": c.topic.min_insync_replicas, "configs": dict(c.topic.configs)},
            "command": self.command, "faults": self.faults_json(), **extra,
        })
        self.run_json.setdefault("started_wall", time.time())
        self.run_json.setdefault("owner", owner())  # the live process running it: faultline prune leaves it alone
        write_json(self.run_dir / "run.json", self.run_json)

    def faults_json(self) -> dict[str, Any]:
        """run.json ``faults``: the schedule's faults applied and failed (nemeses.active) and the
        campaign's ``nemesis.min_applied``; the checker judges them (checkers/outcome.py)."""
        counts = self.sched.faults.summary() if self.sched is not None else {"applied": 0, "failed": 0,
                                                                             "failed_list": []}
        return {**counts, "min_applied": self.camp.schedule.min_applied}

    # -- phases -----------------------------------------------------------------------------
    def phase(self, name: str, **detail: Any) -> None:
        self.status.phase = name
        self.timeline.phase(name, **detail)

    def embedded_target(self) -> EmbeddedTarget:
        """The launcher of the campaign's embedded cluster (targets/)."""
        inv, c = self.camp.inventory, self.camp
        if inv.embedded == "apache-kafka":
            disks = None if inv.embedded_lossyfs is None else RunDisks(
                self.ledger, writeback_ms=inv.embedded_lossyfs, inventory=str(self.run_dir / "inventory.yaml"))
            return EmbeddedApacheKafka(self.run_dir, version=inv.embedded_version, brokers=inv.embedded_brokers,
                                       controllers=inv.embedded_controllers, settings=c.settings, ledger=self.ledger,
                                       combined=inv.embedded_combined, say=self.say, disks=disks,
                                       security=inv.embedded_security)
        return EmbeddedKraftsim(self.run_dir, inv.embedded_brokers, c.settings, self.ledger,
                                controllers=inv.embedded_controllers)

    def say(self, text: str) -> None:
        """Progress of long set-up work (a release resolved from Maven, JVMs started)."""
        self.status.phase = f"setup: {text}"
        self.timeline.event("note", text=text)

    def setup_cluster(self) -> None:
        c = self.camp
        if c.inventory.embedded:
            self.embedded = self.embedded_target()
            bootstrap = self.embedded.start()
            inv = load_inventory(self.embedded.write_inventory())
            self.cluster = Cluster.from_inventory(inv, embedded=self.embedded)
            self.cluster.bootstrap = bootstrap
            # what the cluster ran: kafka.version, metadata.version, each gate and what decided it
            self.run_json["features"] = self.embedded.features()
        else:
            self.cluster = Cluster.from_inventory(c.inventory)
            self.cluster.check_reachable()
        self.run_json["bootstrap"] = self.cluster.bootstrap
        self.security = self.cluster.inventory.client.resolve()
        self.run_json["kafka_client"] = self.security.describe()   # never a secret
        if self.security.protocol != "PLAINTEXT":
            why = probe(self.cluster.bootstrap, self.security)
            if why:
                raise InfraError(f"{self.cluster.inventory.path.name}: kafka_client: {why}")
        self.write_run_json()

    def _register_client(self, name: str, pid: int | None) -> None:
        """The ledger entry of a client process, written as soon as it is spawned (before it is
        ready: a harness killed while a client starts must leave nothing heal does not know)."""
        if pid:
            eid = new_id("p")
            self.ledger.apply(eid, "process", {"what": name, "pid": pid, "match": "multiprocessing"})
            self.client_entries.append(eid)

    def start_workloads(self) -> None:
        from workloads.consumer import ConsumerWorkload
        from workloads.epochless_reader import EpochlessReaderWorkload
        from workloads.observer import Observer
        from workloads.producer import ProducerWorkload

        c, bootstrap = self.camp, self.cluster.bootstrap  # type: ignore[union-attr]
        self.observer = Observer(bootstrap, c.topic.name, self.run_dir / "observer.jsonl", self.clock.now,
                                 security=self.security)
        self.observer.start()
        if not self.observer.wait_until(all_partitions(c.topic.partitions, c.topic.min_insync_replicas), 30.0):
            raise InfraError(f"topic {c.topic.name}: not every partition has a leader and min ISR "
                             f"{c.topic.min_insync_replicas} within 30s ({self.observer.last_error or 'no error'})")
        extra = {"request.timeout.ms": int(c.workload.request_timeout * 1000),
                 "message.timeout.ms": int(c.workload.message_timeout * 1000), **self.security.librdkafka()}
        for i in range(c.workload.producers):
            p = ProducerWorkload(f"producer-{i}", bootstrap, c.topic.name, c.topic.partitions, self.history_dir,
                                 self.clock.now, rate=c.workload.rate, idempotence=c.workload.idempotence,
                                 extra_config=extra)
            self.clients.append(p)
            p.start(on_spawn=lambda pid, name=p.process: self._register_client(name, pid))
        for i in range(c.workload.consumers):
            cw = ConsumerWorkload(f"consumer-{i}", bootstrap, c.topic.name, c.topic.partitions, self.history_dir,
                                  self.clock.now, extra_config=self.security.librdkafka())
            self.clients.append(cw)
            cw.start(on_spawn=lambda pid, name=cw.process: self._register_client(name, pid))
        for i in range(c.workload.epochless_readers):
            rw = EpochlessReaderWorkload(f"reader-{i}", bootstrap, c.topic.name, c.topic.partitions, self.history_dir,
                                         self.clock.now, fetch_wait_ms=c.workload.reader_fetch_wait_ms,
                                         security=self.security)
            self.clients.append(rw)
            rw.start(on_spawn=lambda pid, name=rw.process: self._register_client(name, pid))

    def refresh_status(self) -> None:
        acked = failed = info = read = 0
        for cl in self.clients:
            try:
                s = cl.stats()
            except Exception:  # noqa: BLE001 - a progress figure is not worth a crash
                continue
            if "invoked" in s:
                acked += s.get("ok", 0)
                failed += s.get("fail", 0)
                info += s.get("info", 0)
            else:
                read += s.get("ok", 0)
        self.status.acked, self.status.failed, self.status.info, self.status.read = acked, failed, info, read
        self.status.update_rate()

    def nemesis_settings(self) -> dict[str, Any]:
        s = dict(self.camp.schedule.settings)
        s["bootstrap.servers"] = self.cluster.bootstrap if self.cluster else ""
        s["run_dir"] = str(self.run_dir)
        # the admin client settings a nemesis needs (the AlterPartition hold maps topic ids): in memory only
        s["kafka_client"] = self.security.librdkafka()
        s.setdefault("topic", self.camp.topic.name)  # the workload's topic: what a fault on "partition N" means
        if isinstance(s.get("proxy"), dict):
            proxy = dict(s["proxy"])
            proxy["listen"] = self.proxy_listen(str(proxy.get("listen") or "auto"))
            proxy.setdefault("control_dir", str(self.run_dir / "proxy"))
            proxy.setdefault("events", str(self.run_dir / "proxy-events.jsonl"))
            s["proxy"] = proxy
        return s

    def proxy_listen(self, listen: str) -> str:
        """The AlterPartition proxy's ``listen``: ``auto`` is this machine as the cluster's hosts
        reach it (an embedded Apache Kafka cluster's bridge, ``faultline_harness_address``; else
        loopback, where kraftsim's nodes are), any free port. A loopback address the hosts cannot
        reach (they sit in namespaces of their own) is the campaign's mistake, said in one line."""
        inv = self.cluster.inventory if self.cluster else self.camp.inventory
        host, _, port = listen.rpartition(":") if listen != "auto" else ("auto", "", "0")
        if host == "auto":
            return f"{inv.harness_address or '127.0.0.1'}:{port or 0}"
        if inv.harness_address and host.startswith("127."):
            raise ConfigError(self.camp.path, "nemesis.settings.proxy.listen",
                              f"{listen} is this machine's loopback, which the cluster's hosts (network namespaces "
                              f"of their own) cannot reach; use listen: auto (here {inv.harness_address}:0)")
        return listen

    def drive(self) -> None:
        c = self.camp
        assert self.cluster is not None
        ctx = NemesisContext(nodes=dict(self.cluster.nodes), timeline=self.timeline, ledger=self.ledger,
                             rng=random.Random(c.seed), inventory_path=str(self.cluster.inventory_path),
                             settings=self.nemesis_settings())
        self.pids_before = {name: n.service_pids() for name, n in self.cluster.nodes.items()}
        self.sched = ScheduleRunner(ctx, View(self.cluster, self.observer), c.schedule, stop_event=self.stop_event,
                                    on_fault=lambda s: setattr(self.status, "fault", s))
        end = time.monotonic() + c.workload.duration
        self.sched.run(until_mono=end)
        self.sched.wait_until(end)  # automatic stops still fire

    def heal_faults(self) -> None:
        if self.sched is not None:
            errors = self.sched.heal_all()
            for e in errors:
                self.timeline.event("note", text=f"heal failed: {e}")
                self.notes.append(f"heal failed: {e}")
            self.status.fault = "-"

    def stop_clients(self) -> None:
        for cl in self.clients:
            try:
                cl.stop(timeout=self.camp.workload.request_timeout)
            except Exception as e:  # noqa: BLE001
                self.notes.append(f"{getattr(cl, 'process', '?')}: stop: {e}")
        for eid in self.client_entries:
            self.ledger.healed(eid)
        self.client_entries.clear()

    def recover_and_drain(self) -> None:
        from workloads.drain import drain

        c = self.camp
        self.phase("recovery")
        ok = self.observer.wait_until(all_partitions(c.topic.partitions, c.topic.min_insync_replicas),
                                      c.workload.recovery_timeout)
        if not ok:
            self.timeline.event("note", text=f"cluster did not recover within {c.workload.recovery_timeout:g}s")
            self.notes.append("cluster did not recover before the drain")
        self.check_nodes()
        self.phase("stop-clients")
        self.refresh_status()
        self.stop_clients()
        self.refresh_status()
        self.phase("drain")
        ends = drain(self.cluster.bootstrap, c.topic.name, c.topic.partitions, self.history_dir,  # type: ignore[union-attr]
                     self.clock.now, timeout=c.workload.drain_timeout, extra_config=self.security.librdkafka())
        self.timeline.event("note", text="drain done", ends={str(k): v for k, v in ends.items()})

    def check_nodes(self) -> None:
        """After the heal and the recovery wait, every Kafka node must run, and a node no
        process fault touched must still run as the same process. A node that does not, or
        runs under new pids, exited during the run on its own (Kafka halts on a fatal fault:
        ProcessTerminatingFaultHandler), so the run did not test what it meant to: a
        ``node_exit`` timeline record, which the checker reads (docs/verdict-format.md
        ``halts``). Cheap (one pid lookup per node) and reliable on every target: a heal starts
        every node a fault stopped, so after it nothing is legitimately down."""
        if self.cluster is None or not self.pids_before:
            return
        touched: set[str] = set()
        if self.sched is not None:
            for f in self.sched.faults.started:
                if getattr(REGISTRY.get(f["fault"]), "acts_on_service", True):
                    touched.update(f["targets"])
        for name, node in self.cluster.nodes.items():
            try:
                now = node.service_pids()
            except Exception as e:  # noqa: BLE001 - an unreachable host says nothing about its process
                self.notes.append(f"{name}: cannot read its pids after the run: {type(e).__name__}: {e}")
                continue
            before = self.pids_before.get(name) or []
            if not now:
                text = f"{name} is not running after the heal; no fault of the run left it down"
            elif name not in touched and before and set(now) != set(before):
                text = (f"{name} runs as pid {', '.join(map(str, now))}, not {', '.join(map(str, before))}: "
                        "it exited and was started again though no fault of the run stopped it")
            else:
                continue
            self.timeline.event("node_exit", host=name, node_id=node.node_id, role=node.role, text=text)
            self.notes.append(text)

    def teardown(self) -> None:
        """Everything this run started goes, whatever happened before (called in finally)."""
        for step in (self.heal_faults, self._kill_clients, self._stop_observer, self._collect, self._stop_cluster):
            try:
                step()
            except BaseException as e:  # noqa: BLE001 - teardown must finish
                self.notes.append(f"teardown {step.__name__}: {type(e).__name__}: {e}")

    def _kill_clients(self) -> None:
        if self.client_entries:
            for cl in self.clients:
                try:
                    cl.stop(timeout=1.0)
                except BaseException:  # noqa: BLE001
                    pass
            for eid in list(self.client_entries):
                for e in self.ledger.open_entries():
                    if e.get("id") == eid:
                        heal_process(e.get("record") or {})
                self.ledger.healed(eid)
            self.client_entries.clear()

    def _stop_observer(self) -> None:
        if self.observer is not None:
            self.observer.stop()
            self.observer = None

    def _collect(self) -> None:
        if self.cluster is not None and not (self.run_dir / "cluster-logs").exists():
            self.phase("collect")
            for p in self.cluster.collect_logs(self.run_dir):
                self.notes.append(p)
        if self.cluster is not None:
            self.cluster.close_live()

    def _stop_cluster(self) -> None:
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None

    # -- the whole run ------------------------------------------------------------------------
    def run(self) -> RunResult:
        c = self.camp
        self.run_dir.joinpath("campaign.yaml").write_text(c.resolved_yaml(), encoding="utf-8")
        self.write_run_json(target_version=target_version(c))
        infra: str | None = None
        interrupted = config_error = False
        self.prep.start()   # Spark and the history's conversion, beside the run
        try:
            self.phase("setup")
            self.setup_cluster()
            self.phase("topic")
            create_topic(self.cluster.bootstrap, c, security=self.security)  # type: ignore[union-attr]
            self.phase("workload")
            self.start_workloads()
            self.phase("nemesis")
            self.drive()
            self.phase("heal")
            self.heal_faults()
            self.recover_and_drain()
            self.prep.writers_done()   # the last conversion round, beside collect and the cluster's stop
        except Interrupted:
            interrupted = True
            infra = "interrupted: healed everything and stopped"
            self.timeline.event("note", text="interrupted by signal")
        except ConfigError as e:
            infra, config_error = str(e), True
        except ScheduleError as e:
            infra = f"schedule: {e}"
        except InfraError as e:
            infra = str(e)
        except Exception as e:  # noqa: BLE001 - report as infrastructure failure, one line
            infra = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        finally:
            self.teardown()
            self.prep.stop_following()
            self.notes += self.prep.take_notes()
            # belt and braces: anything this run registered and still open
            # (a fault whose start was cut by a signal is in the ledger but not in the schedule)
            leftovers = heal_all(self.ledger, timeline=self.timeline,
                                 only_ids={e["id"] for e in self.ledger.open_entries()
                                           if str(self.run_dir) in json.dumps(e)})
            self.notes += leftovers.failed
            if self.timeline.path.exists():
                self.notes += page_cache_notes([r for r in read_jsonl(self.timeline.path) if isinstance(r, dict)])
            self.write_run_json(ended_wall=time.time(), duration_s=round(self.clock.now(), 3),
                                notes=self.notes, faults=self.faults_json())
        if infra is not None:
            self.prep.close()
            self.timeline.event("note", text=f"run failed: {infra}")
            self.write_run_json(error=infra)
            return RunResult(self.run_dir, None, EXIT_CONFIG if config_error else EXIT_INFRA, infra)
        return RunResult(self.run_dir, None, EXIT_OK, "workload done")

    def check_and_report(self) -> RunResult:
        """The checker (Spark) and the report, after the cluster is gone; kept out of
        :meth:`run` so the CLI can stop its live display first (Spark's JVM logs go to
        ``RUN/checker.log``, not the terminal). :func:`harness.check.check_and_report`."""
        try:
            checked = check_and_report(self.run_dir, phase=self.phase, prep=self.prep)
        finally:
            self.prep.close()
        self.notes += self.prep.take_notes()
        if checked.verdict is None:
            self.write_run_json(error=checked.message)
            return RunResult(self.run_dir, None, checked.code, checked.message)
        self.notes += checked.notes
        self.write_run_json(notes=self.notes)
        return RunResult(self.run_dir, checked.verdict, checked.code, checked.message)
