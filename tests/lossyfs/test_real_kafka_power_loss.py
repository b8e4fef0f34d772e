"""Proof on real Apache Kafka: a power loss on lossyfs loses exactly what Kafka had not fsynced.

Three `faultline run`s of the embedded Apache Kafka target (one controller, one broker, every
node's disk a lossyfs mount) go side by side, each its own cluster and heal ledger:

- ``unflushed``: an RF 1 topic rolled every 2 s (``segment.ms``: each roll's ``flush-log`` task,
  UnifiedLog.roll -> flushUptoOffsetExclusive, fsyncs the older segments; nothing else is
  fsynced), its broker rebooted with ``mode: auto`` (lossyfs here). The checker's lost set must be
  exactly the acknowledged writes the crash did not keep: offsets read from the record batches of
  each segment's kept bytes as lossyfs reported them (``files``: durable size; ``kept``: whole;
  ``removed``: nothing). Known-bad control: some are lost.
- ``flush-every-message``: the same with ``flush.messages=1`` (UnifiedLog.append flushes after
  every append): nothing acknowledged is lost; the crash may drop the last batch, written but
  not yet fsynced (nor acknowledged) when the SIGKILL came.
- both reboots run the truncate-unflushed cut as a dry run between the kill and the crash
  (``compare_cut``): it must never remove a byte lossyfs kept.
- ``killed``: a run SIGKILLed (the harness only: its JVMs and lossyfs daemons live on) once its
  disks are mounted; preflight's ``reboot`` column says lossyfs for every node of the orphaned
  cluster; then `faultline heal`: no lossyfs mount and no process of the run is left.

The pre-crash acknowledgements are told from the post-restart ones by the order of events on the
run's one clock, not by a guessed delay: the crashed broker is dead from its SIGKILL until its
restart, which begins only after the reboot's ``reboot applied`` note is written (Reboot.start), so
an acknowledgement the producer recorded before that note came from the broker that crashed, and
one recorded after it from the restarted one. The offsets alone cannot tell them apart: when the
crash drops nothing acknowledged, the producer's retries land on the next offsets and its
acknowledged offsets never fall back.
"""
from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest
from kio.records.readers import read_batch

from harness.inventory import load_inventory
from harness.preflight import Options, preflight
from tests.harness.clirun import faultline, force_cleanup, pids_matching, read_jsonl, spawn, wait_for
from tests.support.kafka import releases_under_test

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

RELEASE = releases_under_test()[-1]
TOPIC = "lossy"
CELLS = {
    "unflushed": ({"segment.ms": 2000}, {}, "loss"),
    # the cut reads a topic's flush.messages from the reboot's kafka_config (it lives in the metadata)
    "flush-every-message": ({"segment.ms": 2000, "flush.messages": 1}, {"kafka_config": {"flush.messages": 1}},
                            "no-loss"),
}


def campaign(tmp: Path, name: str, configs: dict[str, Any], reboot: dict[str, Any], expect: str) -> Path:
    inv = tmp / "inventory.yaml"
    inv.write_text(textwrap.dedent(f"""
        all:
          vars:
            faultline_transport: local
            faultline_embedded: apache-kafka
            apache_kafka: {{version: {RELEASE}, brokers: 1, controllers: 1}}
    """), encoding="utf-8")
    params = json.dumps({"mode": "auto", "compare_cut": True, **reboot})
    path = tmp / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""
        name: {name}
        target: {{inventory: {inv}}}
        topic: {{name: {TOPIC}, partitions: 1, replication_factor: 1, min_insync_replicas: 1,
                 configs: {json.dumps(configs)}}}
        workload: {{producers: 1, consumers: 0, rate: 100, duration: 12, idempotence: true,
                    drain_timeout: 30, recovery_timeout: 60}}
        nemesis:
          schedule: targeted
          steps:
            - wait: 8
            - {{select: "leader-of:0", as: A}}
            - {{start: reboot, target: "@A", as: crashA, params: {params}}}
            - until: {{restarted: "@A"}}
              timeout: 120
            - wait: 2
        expect: {expect}
    """), encoding="utf-8")
    return path


def killed_campaign(tmp: Path) -> Path:
    path = tmp / "killed.yaml"
    path.write_text(textwrap.dedent(f"""
        name: killed
        target: {{inventory: {tmp / 'inventory.yaml'}}}
        topic: {{name: {TOPIC}, partitions: 1, replication_factor: 1, min_insync_replicas: 1}}
        workload: {{producers: 1, consumers: 0, rate: 50, duration: 600}}
        nemesis: {{schedule: targeted, steps: [{{wait: 600}}]}}
        expect: no-loss
    """), encoding="utf-8")
    return path


def lossyfs_mounts_under(root: Path) -> list[str]:
    return [ln.split()[1] for ln in Path("/proc/mounts").read_text().splitlines()
            if ln.split()[2] == "fuse.lossyfs" and ln.split()[1].startswith(str(root))]


def unmount_left(root: Path) -> None:
    for mp in lossyfs_mounts_under(root):
        subprocess.run(["fusermount3", "-u", "-z", mp], capture_output=True)


def run_dir_of(results: Path, name: str) -> Path | None:
    return next(iter(results.glob(f"{name}-*")), None)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("real-power-loss")
    procs: dict[str, subprocess.Popen] = {}
    out: dict[str, Any] = {}
    try:
        for name, (configs, reboot, expect) in CELLS.items():
            camp = campaign(tmp, name, configs, reboot, expect)
            procs[name] = spawn(["run", str(camp), "--seed", "3", "--results-dir", str(tmp / name / "results"),
                                 "--no-progress"], tmp / name / "state", tmp / f"{name}.log")
        procs["killed"] = spawn(["run", str(killed_campaign(tmp)), "--seed", "3", "--results-dir",
                                 str(tmp / "killed" / "results"), "--no-progress"], tmp / "killed" / "state",
                                tmp / "killed.log")
        out["killed"] = kill_and_heal(tmp, procs["killed"])
        for name in CELLS:
            rc = procs[name].wait(1800)
            run_dir = run_dir_of(tmp / name / "results", name)
            assert run_dir is not None and (run_dir / "verdict.json").exists(), \
                f"{name}: exit {rc}\n{(tmp / f'{name}.log').read_text()[-3000:]}"
            out[name] = (rc, run_dir)
        yield out
    finally:
        for name, p in procs.items():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            force_cleanup(tmp / name / "results", tmp / name / "state")
        unmount_left(tmp)
        assert lossyfs_mounts_under(tmp) == []


def kill_and_heal(tmp: Path, proc: subprocess.Popen) -> dict[str, Any]:
    """SIGKILL the harness once its cluster runs on its lossyfs disks, then `faultline heal`."""
    results, state = tmp / "killed" / "results", tmp / "killed" / "state"

    def workload_running() -> Path | None:
        if proc.poll() is not None:
            raise AssertionError(f"the run exited early ({proc.returncode}):\n{(tmp / 'killed.log').read_text()[-3000:]}")
        d = run_dir_of(results, "killed")
        phases = [e.get("phase") for e in read_jsonl(d / "timeline.jsonl")] if d else []
        return d if "workload" in phases else None
    run_dir = wait_for(workload_running, 900, "the killed run's workload", interval=1)
    mounted = lossyfs_mounts_under(run_dir)
    os.kill(proc.pid, signal.SIGKILL)   # the harness alone: its cluster and mounts outlive it
    proc.wait(30)
    alive = pids_matching(str(run_dir))
    # preflight reads the orphaned cluster as any lab: its reboot column finds the disks on lossyfs
    report = preflight(load_inventory(run_dir / "inventory.yaml"), Options())
    reboot = {h.name: h.checks["reboot"].summary for h in report.hosts}
    heal = faultline(["heal"], state, timeout=300)
    return {"mounted": mounted, "alive_after_kill": alive, "reboot_column": reboot, "heal": heal,
            "left": lossyfs_mounts_under(run_dir), "procs_left": pids_matching(str(run_dir))}


def reboot_applied(run_dir: Path) -> dict[str, Any]:
    notes = [r for r in read_jsonl(run_dir / "timeline.jsonl") if r.get("what") == "reboot applied"]
    assert len(notes) == 1, notes
    return notes[0]


def reboot_note(run_dir: Path) -> dict[str, Any]:
    return reboot_applied(run_dir)["detail"]["broker-1"]


def kept_records(run_dir: Path, crash: dict[str, Any]) -> dict[int, str]:
    """offset -> value of every record the crash kept in the topic's partition: the whole record
    batches within each segment's kept bytes, read from the segment files (what Kafka appended
    after its restart lies past them)."""
    keep: dict[str, int] = {f["path"]: f["durable_size"] for f in crash["files"]}
    keep.update({f["path"]: f["size"] for f in crash["kept"]})
    keep.update({r["path"]: 0 for r in crash["removed"]})
    pdir = run_dir / "cluster" / "broker-1" / "disk.backing" / "data" / f"{TOPIC}-0"
    out: dict[int, str] = {}
    for rel, size in keep.items():
        if not (rel.startswith(f"data/{TOPIC}-0/") and rel.endswith(".log")):
            continue
        data, pos = (pdir / Path(rel).name).read_bytes()[:size], 0
        while pos + 12 <= len(data) and pos + 12 + int.from_bytes(data[pos + 8:pos + 12], "big") <= len(data):
            batch, n = read_batch(data, pos)
            out.update({int(r.offset): r.value.decode() for r in batch.records})
            pos += n
        assert pos == size, f"{rel}: kept {size} bytes, whole batches end at {pos}"
    return out


def pre_crash_acks(run_dir: Path) -> dict[int, str]:
    """offset -> value of the writes acknowledged before the crash: those the producer recorded
    before the ``reboot applied`` note (the broker is restarted only after it is written)."""
    applied = float(reboot_applied(run_dir)["t"])
    acks = [r for r in read_jsonl(run_dir / "history" / "producer-0.jsonl")
            if r.get("f") == "send" and r.get("type") == "ok" and r.get("offset") is not None]
    return {r["offset"]: r["value"] for r in acks if float(r["t"]) < applied}


def lost_writes(run_dir: Path) -> dict[int, str]:
    with open(run_dir / "anomalies" / "lost_write.csv", newline="") as fh:
        return {int(r["offset"]): r["value"] for r in csv.DictReader(fh)}


@pytest.mark.parametrize("cell", list(CELLS))
def test_the_checkers_lost_set_is_what_the_crash_did_not_keep(runs: dict[str, Any], cell: str) -> None:
    rc, run_dir = runs[cell]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert rc == 0 and verdict["outcome"] == "as_expected", verdict["outcome_reason"]
    # no workload process died on the way (the lossy broker's restart may end an idempotent
    # producer with a fatal OUT_OF_ORDER_SEQUENCE_NUMBER, which its flush must take in its stride)
    log = (run_dir.parents[1].parent / f"{cell}.log").read_text(errors="replace")
    assert "Traceback" not in log, log[log.index("Traceback"):][:2000]
    detail = reboot_note(run_dir)
    assert detail["mode"] == "lossyfs" and detail["requested"] == "auto"
    (crash,) = detail["lossyfs"].values()
    kept = kept_records(run_dir, crash)
    acked = pre_crash_acks(run_dir)
    assert acked, "no write was acknowledged before the crash"
    # what the crash kept is what was acknowledged there
    assert {o: v for o, v in kept.items() if o in acked} == {o: acked[o] for o in kept if o in acked}
    expected = {o: v for o, v in acked.items() if o not in kept}
    assert lost_writes(run_dir) == expected
    assert verdict["counts"]["lost_write"] == len(expected)
    if cell == "unflushed":
        assert expected, "the control: some acknowledged writes lay past the last flush"
    else:
        assert expected == {} and len(kept) >= len(acked)


@pytest.mark.parametrize("cell", list(CELLS))
def test_the_truncate_unflushed_cut_removes_nothing_lossyfs_kept(runs: dict[str, Any], cell: str) -> None:
    _, run_dir = runs[cell]
    cmp = reboot_note(run_dir)["cut_compared"]
    assert cmp["segments"] > 0 and cmp["unknown"] == [] and cmp["size_mismatch"] == []
    assert cmp["cut_removed_kept"] == 0, cmp["touched"]
    topic = [r for r in cmp["touched"] if r["topic"] == TOPIC]
    if cell == "unflushed":
        assert topic and sum(r["size"] - r["lossyfs_keeps"] for r in topic) > 0
    else:
        # UnifiedLog.append writes the batch (localLog.append) before it fsyncs it (flush(false)):
        # a SIGKILL between the two leaves the last batch unsynced - and unacknowledged. Whatever
        # lossyfs dropped must lie in the cut's uncertain range (one interval below the log end),
        # never in what flush.messages=1 had fsynced.
        assert all(r["size"] - r["lossyfs_keeps"] <= r.get("uncertain_bytes", 0) for r in topic), topic


@pytest.mark.parametrize("cell", list(CELLS))
def test_a_run_that_ends_has_each_disk_unmounted_by_its_living_daemon(runs: dict[str, Any], cell: str) -> None:
    """The cluster's stop kills the JVMs, then asks each lossyfs daemon to unmount while it still
    runs: it logs the unmount and removes its control socket from /tmp as it exits. (A daemon
    killed first, with every process naming the cluster's directory, left its socket behind.)"""
    _, run_dir = runs[cell]
    logs = sorted((run_dir / "cluster").glob("*/lossyfs.log"))
    assert [p.parent.name for p in logs] == ["broker-1", "controller"]
    for log in logs:
        text = log.read_text(errors="replace")
        control = re.search(r"control (\S+), ", text)
        assert control, text[-500:]
        assert "unmounted" in text, f"{log}: the daemon did not unmount the disk itself:\n{text[-500:]}"
        assert not Path(control.group(1)).exists(), f"{control.group(1)} left behind"


def test_heal_after_a_sigkilled_real_kafka_run_leaves_no_lossyfs_mount(runs: dict[str, Any]) -> None:
    k = runs["killed"]
    assert len(k["mounted"]) == 2, "one lossyfs disk per node while the run was alive"
    assert k["alive_after_kill"], "the JVMs and lossyfs daemons should have outlived the harness"
    assert sorted(k["reboot_column"]) == ["broker-1", "controller"]
    assert all("lossyfs" in v for v in k["reboot_column"].values()), k["reboot_column"]
    assert k["heal"].returncode == 0, k["heal"].stdout + k["heal"].stderr
    assert k["left"] == [] and k["procs_left"] == []
