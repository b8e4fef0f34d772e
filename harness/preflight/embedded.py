"""Preflight of the embedded targets: this machine, where each run starts its own cluster.

There are no lab hosts to reach and no lab lock (the cluster is generated per run in
``RUN/cluster``); what a run needs here is a kraftsim that starts - or, for real Apache Kafka, a
Java runtime and the release in the cache (or Maven to fetch it) and root for the nodes' network
namespaces -, writable results and state dirs, free disk, and root (or ``sudo -n``) for the faults
that use iptables/tc.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from groundwork.ledger import state_dir
from harness.inventory import Inventory
from harness.preflight.model import COLUMNS, FAIL, WARN, Check, HostResult, Options, gib, short_line
from targets import netns, releases
from targets.apache_kafka import resolve_release
from targets.kafka_settings import sort as sort_kafka_settings


def check_embedded(inv: Inventory, opts: Options) -> HostResult:
    """The embedded target: this machine runs a fresh kraftsim cluster per run."""
    checks: dict[str, Check] = {c: Check("-", skipped=True) for c in COLUMNS}
    checks["reach"] = Check("local")
    if inv.embedded == "apache-kafka":
        checks["kafka"] = _apache_kafka(inv)
    else:
        r = subprocess.run([sys.executable, "-m", "kraftsim", "--version"], capture_output=True, text=True, timeout=120)
        checks["kafka"] = Check(f"{r.stdout.strip() or '?'} (x{inv.embedded_brokers} per run)")
        if r.returncode != 0:
            checks["kafka"].add(FAIL, f"`{sys.executable} -m kraftsim --version` failed: {short_line(r.stderr or r.stdout)}",
                                "install faultline's kraftsim in this Python")
    results = opts.results_dir.resolve()
    probe_at = next(p for p in [results, *results.parents] if p.exists())
    checks["dirs"] = Check(f"{results} ok")
    for what, d in (("results dir", probe_at), ("state dir", state_dir())):
        if not os.access(d, os.W_OK):
            checks["dirs"].add(FAIL, f"the {what} {d} is not writable", f"make {d} writable or pick another one")
    if os.geteuid() == 0:
        checks["sudo"] = Check("root")
    elif inv.embedded == "apache-kafka":
        checks["sudo"] = Check("no root")
        checks["sudo"].add(FAIL, netns.can_create() or "not root", "run faultline as root")
    else:
        ok = subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0 if shutil.which("sudo") else False
        checks["sudo"] = Check("sudo -n" if ok else "no root")
        if not ok:
            checks["sudo"].add(WARN, "not root and no `sudo -n` here: faults that use iptables/tc cannot run",
                               "run as root or grant NOPASSWD sudo")
    checks["reboot"] = Check("emulated (one kernel)")
    usage = shutil.disk_usage(probe_at)
    checks["disk"] = Check(f"{gib(usage.free // 1024)} free")
    if usage.free < opts.min_free_gb * 1024 ** 3:
        checks["disk"].add(FAIL, f"only {gib(usage.free // 1024)} free under {probe_at}",
                           "free space there or choose --results-dir elsewhere")
    return HostResult("this machine", "embedded", checks)


def _apache_kafka(inv: Inventory) -> Check:
    """The release a run will start: in the cache (or Maven on PATH to fetch it), and a JVM."""
    try:
        version = resolve_release(inv.embedded_version, sort_kafka_settings(inv.embedded_settings))
    except ValueError as e:
        c = Check("?")
        c.add(FAIL, str(e), "fix the inventory's apache_kafka section")
        return c
    rel = releases.installed(version)
    c = Check(f"apache-kafka {version} ({'cached' if rel else 'not cached'}, x{inv.embedded_brokers} per run)")
    if shutil.which("java") is None:
        c.add(FAIL, "no java on PATH: Kafka's JVMs cannot start", "apt-get install default-jre-headless")
    if rel is None and shutil.which("mvn") is None:
        c.add(FAIL, f"Apache Kafka {version} is not in the cache and Maven is not on PATH",
              f"apt-get install maven, then `faultline kafka install {version}`")
    elif rel is None:
        c.add(WARN, f"Apache Kafka {version} is not in the cache: the first run resolves it from Maven Central",
              f"`faultline kafka install {version}` now")
    return c
