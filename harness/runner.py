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
from harness.cluster import Cluster, EmbeddedKraftsim, InfraError
from harness.heal import OwnedLedger, heal_all, heal_process, owner
from harness.inventory import load_inventory
from groundwork.ledger import Ledger, new_id
from groundwork.timeline import Timeline
from nemeses.base import REGISTRY, NemesisContext
from nemeses.reboot import run_notes as page_cache_notes
from nemeses.schedule_runner import ScheduleError, ScheduleRunner
from workloads.history import read_jsonl


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


def target_version(camp: Campaign) -> str:
    if not camp.inventory.embedded:
        return "kafka (remote)"
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
            return run_id, d
        except FileExistsError:
            continue
    raise InfraError(f"cannot create a run directory under {results_dir}")


def write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def create_topic(bootstrap: str, camp: Campaign, timeout: float = 30.0) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    t = camp.topic
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    nt = NewTopic(t.name, num_partitions=t.partitions, replication_factor=t.replication_factor,
                  config={**t.configs, "min.insync.replicas": str(t.min_insync_replicas)})
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
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
            if hasattr(err, "retriable") and not err.retriable() and name not in ("_TRANSPORT", "_TIMED_OUT", "NOT_CONTROLLER"):
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
        self.embedded: EmbeddedKraftsim | None = None
        self.cluster: Cluster | None = None
        self.observer: Any = None
        self.clients: list[Any] = []
        self.client_entries: list[str] = []
        self.sched: ScheduleRunner | None = None
        self.run_json: dict[str, Any] = {}
        self.notes: list[str] = []
        #: each node's service pids when the nemesis phase began (:meth:`check_nodes`)
        self.pids_before: dict[str, list[int]] = {}

    # -- run.json ---------------------------------------------------------------------------
    def write_run_json(self, **extra: Any) -> None:
        c = self.camp
        self.run_json.update({
            "run_id": self.run_id, "campaign": c.name, "campaign_path": str(c.path),
            "inventory": str(c.inventory_path), "target": c.inventory_path.stem, "seed": c.seed,
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

    def setup_cluster(self) -> None:
        c = self.camp
        if c.inventory.embedded:
            self.embedded = EmbeddedKraftsim(self.run_dir, c.inventory.kraftsim_brokers, c.settings, self.ledger,
                                             controllers=c.inventory.kraftsim_controllers)
            bootstrap = self.embedded.start()
            inv = load_inventory(self.embedded.write_inventory())
            self.cluster = Cluster.from_inventory(inv, embedded=self.embedded)
            self.cluster.bootstrap = bootstrap
            # what kraftsim ran: kafka.version, metadata.version, each gate and what decided it
            self.run_json["features"] = json.loads((self.embedded.dir / "features.json").read_text())
        else:
            self.cluster = Cluster.from_inventory(c.inventory)
            self.cluster.check_reachable()
        self.run_json["bootstrap"] = self.cluster.bootstrap
        self.write_run_json()

    def _register_client(self, name: str, pid: int | None) -> None:
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
        self.observer = Observer(bootstrap, c.topic.name, self.run_dir / "observer.jsonl", self.clock.now)
        self.observer.start()
        if not self.observer.wait_until(all_partitions(c.topic.partitions, c.topic.min_insync_replicas), 30.0):
            raise InfraError(f"topic {c.topic.name}: not every partition has a leader and min ISR "
                             f"{c.topic.min_insync_replicas} within 30s ({self.observer.last_error or 'no error'})")
        extra = {"request.timeout.ms": int(c.workload.request_timeout * 1000)}
        for i in range(c.workload.producers):
            p = ProducerWorkload(f"producer-{i}", bootstrap, c.topic.name, c.topic.partitions, self.history_dir,
                                 self.clock.now, rate=c.workload.rate, idempotence=c.workload.idempotence,
                                 extra_config=extra)
            self.clients.append(p)
            p.start()
            self._register_client(p.process, p.pid)
        for i in range(c.workload.consumers):
            cw = ConsumerWorkload(f"consumer-{i}", bootstrap, c.topic.name, c.topic.partitions, self.history_dir,
                                  self.clock.now)
            self.clients.append(cw)
            cw.start()
            self._register_client(cw.process, cw.pid)
        for i in range(c.workload.epochless_readers):
            rw = EpochlessReaderWorkload(f"reader-{i}", bootstrap, c.topic.name, c.topic.partitions, self.history_dir,
                                         self.clock.now, fetch_wait_ms=c.workload.reader_fetch_wait_ms)
            self.clients.append(rw)
            rw.start()
            self._register_client(rw.process, rw.pid)

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
        if isinstance(s.get("proxy"), dict):
            proxy = dict(s["proxy"])
            proxy.setdefault("control_dir", str(self.run_dir / "proxy"))
            proxy.setdefault("events", str(self.run_dir / "proxy-events.jsonl"))
            s["proxy"] = proxy
        return s

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
                     self.clock.now, timeout=c.workload.drain_timeout)
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
            create_topic(self.cluster.bootstrap, c)  # type: ignore[union-attr]
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
