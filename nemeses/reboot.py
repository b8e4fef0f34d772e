"""Reboot with page-cache loss: truncate-unflushed, lossyfs, lazyfs, sysrq.

Why (docs/seeds.md#seed-000, opening: "the broker reboots and some logs have not flushed from the page
cache ... the data on this broker is lost"; docs/seeds.md#seed-003, Last Replica Standing): Kafka acks
``acks=all`` writes from memory; only its own fsyncs (segment rolls, ``log.flush.interval.*``,
the KRaft client's flush of the metadata log) or the OS make them durable. A SIGKILL alone keeps
the page cache, so it does not lose anything; a power loss does.

Targets are brokers (their ``log.dirs``, and ``metadata.log.dir`` when it is elsewhere) and
controllers (their ``metadata.log.dir``: the KRaft metadata log, nemeses.hostinfo.fault_dirs).

Modes (``params.mode``):

- ``truncate-unflushed`` (everywhere): SIGKILL the node, then run
  ``nemeses/scripts/truncate_unflushed.py`` on the host with ``python3 -`` (stdlib only; it
  reads Kafka's recovery-point-offset-checkpoint and record batch v2 headers) to cut each
  partition back to what Kafka had fsynced (``cut: durable``, old name ``recovery-point``) or a
  seeded random point after it (``cut: random``), then restart. How the durable point is found
  depends on who wrote the logs (hostinfo.implementation): on kraftsim the checkpoint is exact;
  on Apache Kafka it is the checkpoint, raised by every rolled segment and by what
  ``log.flush.interval.messages`` forced (the broker's own settings, hostinfo.flush_config), and
  what cannot be known exactly is recorded as uncertain, per partition, on the timeline.
  Checkpoint files written without fsync (Kafka 3.7.x's leader-epoch checkpoint after a
  truncation) are put in a state a crash may leave them in (``durable``: the new size, zeros;
  ``random``: old, empty, zeros or new), exact on kraftsim (its record of what it left
  un-fsynced), by the writeback window and ``kafka_version`` on Apache Kafka (uncertain); the
  note's ``page_cache_cut.checkpoints`` names each file and its state.
- ``lossyfs``: where the node's dirs (hostinfo.fault_dirs) are on lossyfs, faultline's own
  filesystem that keeps exactly what was fsynced (lossyfs/, nemeses/lossyfs.py): SIGKILL the
  node and wait until its processes are gone (their dying writes - a closing mapping's dirty
  pages - land first, and count as unsynced), ``crash`` every lossyfs mount under those dirs
  (the daemon restores the durable state and remounts), restart. Nothing is modelled: what
  Kafka fsynced (files and directories) is what stays. The note names, per mount, every file
  cut (size before, durable size, bytes dropped), every path removed and every name restored.
  Dirs on no lossyfs mount: the start raises one line before anything is killed.
- ``lazyfs``: where the data dir is on LazyFS, SIGKILL the node and write
  ``lazyfs::clear-cache`` to LazyFS's FIFO (``params.fifo``), as Jepsen does; restart.
- ``sysrq``: where ``/proc/sysrq-trigger`` is writable, ``echo b`` to it (immediate reboot,
  no sync), wait for the host with ``transport.reconnect``, start the node. Where it is
  not (these machines' kernels, and every host that shares the harness's kernel), the host
  crash is emulated: every process of the host's network namespace (local namespaces), of
  the container (Docker: the engine kills its init, then starts it again with its volumes),
  or the node's processes (SSH hosts without SysRq) are SIGKILLed, and
  ``truncate-unflushed`` is applied before the restart. Which one ran is recorded on the
  timeline.

``restart: false`` leaves the node down until ``stop`` (heal) starts it.

A reboot that fails after its crash (no such log dir, a cut that could not run, a LazyFS that
took no command) has killed its node: the record says so (``undo.killed``, written as each node
goes down), and the heal - called by the schedule when the start raises, or by `faultline heal`
from the ledger - starts every target that is not running, exactly as a normal heal does.
"""
from __future__ import annotations

import json
import shlex
import signal
import subprocess
import time
from typing import Any

from groundwork.transport.base import TransportError
from nemeses.base import FaultRecord, Nemesis, Node, register
from nemeses.hostinfo import KRAFTSIM, fault_dirs, flush_config, implementation, kafka_version
from nemeses import lossyfs
from nemeses.scripts import script_text

MODES = ("truncate-unflushed", "lossyfs", "lazyfs", "sysrq")


def kill_broker(node: Node, timeout: float = 10.0) -> list[int]:
    """SIGKILL the broker's processes and wait until they are gone."""
    pids = node.service_pids()
    node.stop_service(signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while any(node.transport.pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


def truncate_unflushed(node: Node, dirs: list[str], cut: str = "durable", seed: int = 0,
                       extra_markers: list[str] | None = None, *, flush_model: str = "kafka",
                       config: dict[str, str] | None = None, config_known: bool = True,
                       kafka_version: str | None = None) -> dict[str, Any]:
    """Run the cut on the host; returns its JSON report (raises with its one error line).

    ``flush_model``: ``checkpoint`` where the checkpoint is current (kraftsim), ``kafka`` for
    Apache Kafka's flush paths; ``config``: the broker's ``log.flush.*`` settings;
    ``kafka_version``: the broker's release where known (Kafka 3.7.x leaves truncations'
    leader-epoch checkpoints un-fsynced)."""
    argv = ["python3", "-", "--cut", cut, "--seed", str(seed), "--flush-model", flush_model,
            "--role", "controller" if node.role == "controller" else "broker"]
    if kafka_version:
        argv += ["--kafka-version", kafka_version]
    for d in dirs:
        argv += ["--log-dir", d]
    for m in extra_markers or []:
        argv += ["--clean-marker", m]
    for k, v in sorted((config or {}).items()):
        argv += ["--config", f"{k}={v}"]
    if not config_known:
        argv.append("--config-unknown")
    res = node.transport.run(argv, input=script_text("truncate_unflushed.py"), sudo=True, timeout=120)
    if not res.ok:
        raise ValueError((res.stderr.strip().splitlines() or [f"{node.name}: truncate failed"])[-1])
    return json.loads(res.stdout)


def summarise(report: dict[str, Any]) -> dict[str, Any]:
    """The timeline keeps the figures, not every file name.

    ``page_cache_cut.uncertain`` lists, per partition, the offsets the cut removed although
    Kafka may have fsynced them (``cut``) and those it kept although Kafka may not have
    (``kept``), with their bytes: a loss lying only in a ``cut`` range may be the cut's, not
    Kafka's (checkers/stories.py labels it so; docs/nemeses.md)."""
    parts = report.get("partitions", [])
    uncertain = [{"topic": p["topic"], "partition": p["partition"], **p["uncertain"]}
                 for p in parts if p.get("uncertain")]
    ckpts = report.get("checkpoints", [])
    return {"partitions": {f"{p['topic']}-{p['partition']}": {
        "recovery_point": p["recovery_point"], "durable_offset": p.get("durable_offset"),
        "durable_by": p.get("durable_by"), "log_end_offset_before": p["log_end_offset_before"],
        "expected_log_end_offset": p["expected_log_end_offset"], "truncated_bytes": p["truncated_bytes"]}
        for p in parts}, "markers_removed": len(report.get("markers_removed", [])),
        "page_cache_cut": {"flush_model": report.get("flush_model"), "flush": report.get("flush"),
                           "config_known": report.get("config_known"),
                           "truncated_bytes": sum(p["truncated_bytes"] for p in parts),
                           "uncertain_cut_bytes": sum(u.get("cut_bytes", 0) for u in uncertain),
                           "uncertain_kept_bytes": sum(u.get("kept_bytes", 0) for u in uncertain),
                           "uncertain": uncertain,
                           # the checkpoint files written without fsync, in the state the crash left
                           # them (old | empty | torn | new | kept), each with what is uncertain
                           "checkpoints": [{"file": c["file"], "topic": c["topic"], "partition": c["partition"],
                                            "state": c["state"], "bytes_before": c["bytes_before"],
                                            "bytes_after": c["bytes_after"], "exact": c["exact"],
                                            **({"uncertain": c["uncertain"]} if c.get("uncertain") else {})}
                                           for c in ckpts]}}


def cut_note(detail: dict[str, Any]) -> str:
    """The note's text: how much each host's cut removed and how much of it is uncertain."""
    out = []
    for host, d in detail.items():
        if isinstance(d, dict) and d.get("mode") == "lossyfs":
            out.append(lossyfs_note(host, d))
            continue
        pc = d.get("page_cache_cut") if isinstance(d, dict) else None
        if not pc:
            continue
        txt = f"{host}: page-cache cut ({pc['flush_model']}) removed {pc['truncated_bytes']} bytes"
        if pc["uncertain_cut_bytes"] or pc["uncertain_kept_bytes"]:
            txt += (f"; uncertain: {pc['uncertain_cut_bytes']} bytes cut that Kafka may have fsynced, "
                    f"{pc['uncertain_kept_bytes']} kept that it may not have")
        ckpts = pc.get("checkpoints") or []
        if ckpts:
            states: dict[str, int] = {}
            for c in ckpts:
                states[c["state"]] = states.get(c["state"], 0) + 1
            txt += (f"; {len(ckpts)} checkpoint file{'s' if len(ckpts) != 1 else ''} written without fsync: "
                    + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
            if any(c.get("uncertain") for c in ckpts):
                txt += " (uncertain: see the note's detail)"
        out.append(txt)
    return "; ".join(out) or "reboot applied"


def lossyfs_note(host: str, d: dict[str, Any], most: int = 8) -> str:
    """One host's lossyfs crash in a line: bytes dropped, and the files and names it touched
    (the first ``most`` files by bytes dropped; the note's detail has them all)."""
    crashes = d.get("lossyfs") or {}
    files = [f for c in crashes.values() for f in c.get("files", [])]
    removed = [r for c in crashes.values() for r in c.get("removed", [])]
    restored = [r for c in crashes.values() for r in c.get("restored", [])]
    txt = f"{host}: lossyfs crash dropped {d.get('dropped_bytes', 0)} bytes"
    cut = sorted((f for f in files if f.get("dropped_bytes") or f.get("restored_bytes")),
                 key=lambda f: (-int(f.get("dropped_bytes") or 0), f["path"]))
    if cut:
        txt += " (" + ", ".join(f"{f['path']} {f['size_before']}->{f['durable_size']}"
                                + (f" +{f['restored_bytes']} restored" if f.get("restored_bytes") else "")
                                for f in cut[:most]) + (f", {len(cut) - most} more" if len(cut) > most else "") + ")"
    if removed:
        txt += f"; {len(removed)} path{'s' if len(removed) != 1 else ''} removed"
    if restored:
        txt += f"; {len(restored)} name{'s' if len(restored) != 1 else ''} restored"
    return txt


def run_notes(timeline: list[dict[str, Any]]) -> list[str]:
    """What the run's notes (run.json ``notes``) say of its page-cache cuts, from the reboots'
    timeline notes: every cut with uncertain bytes or un-fsynced checkpoint files, as its note
    says it (with the fault id and time), and one line for the others - so a reader of the run learns how much of what the
    cuts removed Kafka may have had on disk (docs/nemeses.md, "What the timeline records")."""
    out, plain, plain_bytes = [], 0, 0
    for r in timeline:
        if r.get("kind") != "note" or r.get("what") != "reboot applied" or not isinstance(r.get("detail"), dict):
            continue
        if any(isinstance(d, dict) and d.get("mode") == "lossyfs" for d in r["detail"].values()):
            # exact, nothing uncertain - and what it dropped is the run's evidence: said each time
            out.append(f"t={float(r.get('t') or 0):.1f}s reboot {r.get('fault_id')}: {r.get('text')}")
            continue
        cuts = [d.get("page_cache_cut") for d in r["detail"].values() if isinstance(d, dict)]
        cuts = [c for c in cuts if isinstance(c, dict)]
        if any(c.get("uncertain_cut_bytes") or c.get("uncertain_kept_bytes") or c.get("checkpoints") for c in cuts):
            out.append(f"t={float(r.get('t') or 0):.1f}s reboot {r.get('fault_id')}: {r.get('text')}")
        else:
            plain += 1
            plain_bytes += sum(int(c.get("truncated_bytes") or 0) for c in cuts)
    if plain:
        out.append(f"{plain} page-cache cut{'s' if plain != 1 else ''} removed {plain_bytes} bytes, none of them "
                   "uncertain" + (f" ({len(out)} other{'s' if len(out) != 1 else ''} above)" if out else ""))
    return out


@register
class Reboot(Nemesis):
    name = "reboot"
    acts_on_service = True
    description = ("crash a broker or controller losing its unflushed page cache "
                   "(truncate-unflushed | lossyfs | lazyfs | sysrq)")

    def start(self, targets: list[str], **params: Any) -> FaultRecord:
        mode = params.get("mode", "truncate-unflushed")
        if mode not in MODES:
            raise ValueError(f"reboot: mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode == "lazyfs" and not params.get("fifo"):
            raise ValueError("reboot lazyfs: params.fifo (LazyFS's fifo_path) is required")
        nodes = [self.ctx.nodes[t] for t in targets] if all(t in self.ctx.nodes for t in targets) else None
        if not nodes:
            raise ValueError(f"reboot: unknown target(s) {targets}; known: {', '.join(self.ctx.nodes)}")
        seed = int(params.get("seed", self.ctx.rng.randrange(2**31)))
        record = FaultRecord(fault=self.name, targets=list(targets), params={**params, "seed": seed},
                             undo={"restart": targets})
        self.begin(record)
        detail: dict[str, Any] = {}
        for node in nodes:
            detail[node.name] = self._crash(node, mode, seed, params, record)
        record.undo["detail"] = detail
        self.update(record)
        self.ctx.timeline.event("note", fault_id=record.id, what="reboot applied", text=cut_note(detail),
                                detail=detail)
        if params.get("restart", True):
            for node in nodes:
                self.start_unless_held(node, record)
        return record

    def keeps_down(self, record: FaultRecord) -> list[str]:
        """With ``restart: false`` the crashed broker stays down until this fault's heal."""
        return [] if record.params.get("restart", True) else list(record.targets)

    def _down(self, record: FaultRecord, node: Node, killed: list[int]) -> None:
        """Ledger that ``node`` was crashed (the pids that died) before anything else can fail."""
        record.undo.setdefault("killed", {})[node.name] = killed
        self.update(record)

    def _crash(self, node: Node, mode: str, seed: int, params: dict[str, Any], record: FaultRecord) -> dict[str, Any]:
        if mode == "lossyfs":
            return self._crash_lossyfs(node, params, record)
        dirs = fault_dirs(node, params) if mode != "lazyfs" else []
        model = "checkpoint" if implementation(node) == KRAFTSIM else "kafka"
        # the running broker names its config: read it before the crash takes the process away
        config, source = flush_config(node, params) if model == "kafka" and dirs else ({}, None)
        cut = params.get("cut", "durable")

        def cut_now() -> dict[str, Any]:
            return truncate_unflushed(node, dirs, cut, seed, params.get("clean_markers"), flush_model=model,
                                      config=config, config_known=source is not None,
                                      kafka_version=kafka_version(node, params) if model == "kafka" else None)
        if mode == "sysrq":
            why = sysrq_emulated(node)
            if why is None:
                self._down(record, node, node.service_pids())
                node.transport.run("echo 1 > /proc/sys/kernel/sysrq; echo b > /proc/sysrq-trigger",
                                   sudo=True, timeout=5)
                node.transport.reconnect(float(params.get("reconnect_timeout", 300)))
                return {"mode": "sysrq", "emulated": False}
            killed = self._kill_host(node, float(params.get("reconnect_timeout", 300)))
            self._down(record, node, killed)
            report = cut_now()
            return {"mode": "sysrq", "emulated": True, "why": why,
                    "killed": killed, "flush_config_source": source, **summarise(report)}
        killed = kill_broker(node)
        self._down(record, node, killed)
        if mode == "lazyfs":
            fifo = params["fifo"]
            res = node.transport.run(f"timeout 10 sh -c {shlex.quote('echo lazyfs::clear-cache > ' + shlex.quote(fifo))}",
                                     sudo=True, timeout=20)
            if not res.ok:
                raise TransportError(f"{node.name}: LazyFS fifo {fifo} took no command (is LazyFS running?)")
            return {"mode": "lazyfs", "killed": killed, "fifo": fifo}
        report = cut_now()
        return {"mode": mode, "killed": killed, "flush_config_source": source, **summarise(report)}

    def _crash_lossyfs(self, node: Node, params: dict[str, Any], record: FaultRecord) -> dict[str, Any]:
        """SIGKILL, wait until gone, crash each lossyfs mount under the node's dirs."""
        mounts = lossyfs.mounts_under(node.transport, fault_dirs(node, params), node.name)
        killed = kill_broker(node)
        self._down(record, node, killed)
        crashes = {m.mountpoint: lossyfs.crash_summary(lossyfs.crash(node.transport, m)) for m in mounts}
        return {"mode": "lossyfs", "killed": killed, "lossyfs": crashes,
                "dropped_bytes": sum(c["dropped_bytes"] for c in crashes.values())}

    def _kill_host(self, node: Node, timeout: float) -> list[int]:
        """Emulated host crash: every process of the node's namespace, or of its container
        (killed by the engine and started again), or else its broker."""
        cycled = node.transport.power_cycle(timeout)
        if cycled is not None:
            return cycled
        netns = getattr(node.transport, "netns", None)
        if netns:
            pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split()
            for p in pids:
                node.transport.signal(int(p), signal.SIGKILL)
            kill_broker(node)
            return [int(p) for p in pids]
        return kill_broker(node)

    def stop(self, record: FaultRecord) -> None:
        """Heal: every target node is running again (started if the fault left it down)."""
        self.end(record, started=self.start_stopped_targets(record))


def _shares_local_kernel(node: Node) -> bool:
    """Whether the target runs on the harness machine's own kernel.

    Why: a network namespace, a container or an sshd-in-namespace test host shares this
    kernel, so a real SysRq reboot there would reboot the machine running faultline. Same
    boot id (``/proc/sys/kernel/random/boot_id``) means same kernel; an unreadable boot id
    is treated as "same" so the dangerous path needs positive proof of a separate host.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            ours = fh.read().strip()
    except OSError:
        return True
    theirs = node.transport.run(["cat", "/proc/sys/kernel/random/boot_id"])
    return not theirs.ok or theirs.stdout.strip() in ("", ours)


def sysrq_emulated(node: Node) -> str | None:
    """Why a ``sysrq`` reboot of ``node`` would be emulated, or None when it would be real.

    The one place this is decided: the reboot asks it before crashing a host, and
    ``faultline preflight`` asks it to say which reboot modes a lab will really get.
    """
    if _shares_local_kernel(node):
        return "the host shares the harness machine's kernel (same boot id)"
    if not node.transport.run("test -w /proc/sysrq-trigger", sudo=True).ok:
        return "no /proc/sysrq-trigger on this kernel"
    return None
