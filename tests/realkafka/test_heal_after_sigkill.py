"""`faultline run --target apache-kafka` SIGKILLed mid-fault, then `faultline heal`: nothing is left.

The run applies five real faults at once to a real Kafka cluster - a SIGSTOPped broker JVM
(pause), a broker isolated by faultline-tagged iptables rules in its network namespace, a
SIGKILLed broker, a tbf qdisc on the controller's interface (link rate) and the AlterPartition
proxy, a process of its own placed by DNAT in every broker's namespace (delay) - and is then
killed with SIGKILL: its JVMs, its namespaces, its lossyfs disks (the target's default), its proxy
and its clients live on, orphaned. `faultline heal` (the heal ledger alone) must then leave no
Kafka JVM of the run, no process naming the run directory, no proxy, no client, no mount, no
faultline-tagged iptables rule, no rule naming the run's bridge (its FORWARD rule) and no qdisc
on this machine, no namespace or device of the run's network, and an empty ledger.

Other tests' real-Kafka clusters may run meanwhile (their own ``flk<tag>`` namespaces, bridge,
veths and FORWARD rule): the host-wide comparisons ignore exactly those devices and look only
at rules naming this run, and are as strict as tests/harness/test_heal_after_sigkill.py otherwise.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.harness.clirun import LOCAL_INV, faultline, force_cleanup, pids_matching, proc_state, read_jsonl, spawn, \
    wait_for
from tests.realkafka.realcluster import RELEASES, mounts_under

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

VERSION = RELEASES[-1]
CAMPAIGN = textwrap.dedent(f"""
    name: crash-real
    target: {{inventory: {LOCAL_INV}}}
    topic: {{name: crash, partitions: 3, replication_factor: 3, min_insync_replicas: 2}}
    workload: {{producers: 1, consumers: 0, rate: 50, duration: 300}}
    nemesis:
      schedule: targeted
      settings:
        proxy: {{listen: auto, upstream: auto, placement: dnat}}
      steps:
        - wait: 1
        - {{start: pause, target: broker-1, as: p}}
        - {{start: partition, target: broker-2, as: cut, params: {{shape: isolate}}}}
        - {{start: kill, target: broker-3, as: k}}
        - {{start: link, target: controller, as: slow, params: {{kind: rate, rate: 1mbit}}}}
        - {{start: alter-partition, target: broker-2, as: ap, params: {{mode: delay, delay_ms: 200}}}}
        - wait: 300
    expect: no-loss
""")
FAULTS = {"pause", "partition", "kill", "link", "alter-partition"}


def iptables() -> list[str]:
    return subprocess.run(["iptables-save"], capture_output=True, text=True).stdout.splitlines()


def qdiscs(mine: set[str]) -> set[str]:
    """This machine's qdiscs, but those of the devices other tests' real-Kafka clusters hold
    meanwhile (their bridge ``flk<tag>`` and veths ``flk<tag>v<n>``, not this run's)."""
    out = set()
    for line in subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True).stdout.splitlines():
        m = re.search(r" dev (flk[0-9a-f]{4})(?:v\d+)?[@: ]", line)   # a cluster's bridge flkTAG, veths flkTAGvN
        if m and m.group(1) not in mine:
            continue
        out.add(line)
    return out


def netns_names() -> set[str]:
    return set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())


def link_exists(dev: str) -> bool:
    return subprocess.run(["ip", "link", "show", "dev", dev], capture_output=True).returncode == 0


def test_sigkill_mid_fault_on_real_kafka_then_heal_leaves_nothing(tmp_path: Path) -> None:
    state, results = tmp_path / "state", tmp_path / "results"
    camp = tmp_path / "crash-real.yaml"
    camp.write_text(CAMPAIGN, encoding="utf-8")
    before_rules, before_qdiscs = set(iptables()), qdiscs(set())
    proc = None
    try:
        proc = spawn(["run", str(camp), "--target", f"apache-kafka:{VERSION}", "--seed", "5", "--results-dir",
                      str(results), "--no-progress", "--no-check"], state, tmp_path / "run.log")
        run_dir = wait_for(lambda: next(iter(results.glob("crash-real-*")), None), 60, "the run directory")

        def started() -> dict[str, str]:
            if proc.poll() is not None:
                raise AssertionError(f"faultline run exited early ({proc.returncode}):\n"
                                     f"{(tmp_path / 'run.log').read_text()[-3000:]}")
            st = {e["fault"]: e["id"] for e in read_jsonl(run_dir / "timeline.jsonl")   # not the proxy's placement
                  if e.get("kind") == "nemesis" and e["phase"] == "start"
                  and (e.get("detail") or {}).get("placement") != "dnat"}
            return st if FAULTS <= set(st) else {}
        wait_for(started, 300, "five faults applied")
        ids = {e["id"] for e in read_jsonl(run_dir / "timeline.jsonl") if e.get("kind") == "nemesis"}
        entries = read_jsonl(state / "ledger.jsonl")
        net = next(e["record"]["net"] for e in entries if (e.get("record") or {}).get("net"))
        proxy = next(e["record"]["pid"] for e in entries if (e.get("record") or {}).get("match") == "nemeses.proxy")
        clients = [e["record"]["pid"] for e in entries
                   if e.get("kind") == "process" and e["record"].get("match") == "multiprocessing"]
        cluster = run_dir / "cluster"
        # the faults are real before the crash
        paused = int((cluster / "broker-1.pid").read_text().split()[0])
        assert proc_state(paused) == "T", "broker-1's JVM should be SIGSTOPped"
        ns = {h: f"{net['bridge']}-{h}" for h in ("broker-2", "controller")}
        rules = subprocess.run(["ip", "netns", "exec", ns["broker-2"], "iptables-save"], capture_output=True,
                               text=True).stdout
        assert "faultline:" in rules and "DROP" in rules, "broker-2's isolation rules should be in its namespace"
        qd = subprocess.run(["ip", "netns", "exec", ns["controller"], "tc", "qdisc", "show", "dev", "eth0"],
                            capture_output=True, text=True).stdout
        assert "tbf" in qd, "the controller's link should be rate-limited"
        assert proc_state(proxy) not in (None, "Z") and clients
        assert mounts_under(run_dir), "the nodes' disks should be lossyfs mounts (the target's default)"

        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        jvms = [p for p in pids_matching("kafka.Kafka") if str(run_dir) in _cmdline(p)]
        assert len(jvms) == 3, f"the cluster's other JVMs should have outlived the harness: {jvms}"

        h = faultline(["heal"], state, timeout=300)
        assert h.returncode == 0, f"heal exit {h.returncode}\n{h.stdout}\n{h.stderr}"
        assert "Traceback" not in h.stdout + h.stderr

        assert [p for p in pids_matching("kafka.Kafka") if str(run_dir) in _cmdline(p)] == [], "a Kafka JVM survived"
        assert pids_matching(str(run_dir)) == [], f"processes of the run survived heal: {pids_matching(str(run_dir))}"
        assert proc_state(proxy) in (None, "Z"), "the AlterPartition proxy survived heal"
        assert [p for p in clients if proc_state(p) not in (None, "Z")] == [], "client processes survived heal"
        assert set(net["netns"]) & netns_names() == set(), "namespaces of the run survived heal"
        assert mounts_under(run_dir) == [], "the run's lossyfs disks are still mounted"
        assert [d for d in [net["bridge"], *net.get("veths", [])] if link_exists(d)] == [], "devices survived heal"
        after = iptables()
        assert not [ln for ln in after if any(f"faultline:{i}" in ln for i in ids)], "tagged iptables rules survived"
        assert not [ln for ln in set(after) - before_rules if net["bridge"] in ln or net["subnet"] in ln], \
            "iptables rules of the run's network survived"
        assert qdiscs({net["bridge"]}) <= before_qdiscs, f"new qdiscs: {qdiscs({net['bridge']}) - before_qdiscs}"
        assert faultline(["heal"], state, timeout=60).stdout.strip().startswith("0 healed"), "ledger not empty"
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        force_cleanup(results, state)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
