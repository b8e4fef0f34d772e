"""A class-data-sharing archive per Apache Kafka release: a node's JVM starts without loading its classes.

Why: the embedded target starts four to six Kafka JVMs per run and again after every kill and
reboot, on machines with two cores; most of a node's start is loading and verifying the same
classes. Measured here (a combined 4.1.0 node, C1 and the serial collector as every node runs):
ready in 5.8 CPU-s without an archive, 3.1-3.5 with one, 7 s -> 4 s of wall time beside a test.
Faster starts also mean fewer registration timeouts on a loaded machine.

A JDK dynamic archive (``-XX:ArchiveClassesAtExit``) holds the classes one JVM loaded; a later
JVM of the same JDK and class path maps them (``-XX:SharedArchiveFile``). The JVM checks the
archive against itself and, under ``-Xshare:auto`` (the default), ignores one that does not
match with a warning in the node's process.log - slower, never a failure. The archive is made
once per release and java (:func:`ensure`, from the launcher's start): one combined node started
on loopback ports in a temporary directory, stopped with SIGTERM (Kafka's clean shutdown; the
JVM writes the archive as it exits), renamed into place whole. It lives in the release cache
(``cds/``), never beside a user's own Kafka installation.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from groundwork.jvm_cds import archive_key, place
from targets import releases
from targets.kafka_log4j import write as write_log4j

#: a fixed cluster id for the archive's throw-away node (kafka-storage random-uuid's form)
_CLUSTER_ID = "ZmF1bHRsaW5lLWNkcy0xAA"


def archive_file(release: releases.Release, java: str) -> Path:
    """``<release cache>/cds/<version>-<key>.jsa``, keyed by what the JVM would refuse the archive
    for (groundwork/jvm_cds.py: the java binary, each jar of the release's libs/ - a release
    installed again gets an archive of its own)."""
    key = archive_key(java, [release.libs])
    return releases.cache_dir() / "cds" / f"{release.version}-{key}.jsa"


def java_options(release: releases.Release, java: str) -> tuple[str, ...]:
    """``-XX:SharedArchiveFile=...`` when the release has an archive for this java, else nothing."""
    f = archive_file(release, java)
    return (f"-XX:SharedArchiveFile={f}",) if f.is_file() else ()


def ensure(release: releases.Release, java: str, jvm_opts: tuple[str, ...], say: Callable[[str], None],
           work_root: Path) -> Path | None:
    """The release's archive, made now if missing; None (said in one line) when it could not be
    made - the cluster then starts without it. ``work_root``: where the throw-away node lives
    (the cluster's directory: a harness killed meanwhile leaves a JVM `faultline heal` finds)."""
    f = archive_file(release, java)
    if f.is_file():
        return f
    say(f"archiving Apache Kafka {release.version}'s classes for faster node starts (once) ...")
    try:
        return make(release, java, jvm_opts, work_root)
    except (OSError, subprocess.SubprocessError, RuntimeError) as e:
        say(f"Apache Kafka {release.version}: no class archive ({e}); nodes start without one")
        return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make(release: releases.Release, java: str, jvm_opts: tuple[str, ...], work_root: Path,
         timeout: float = 180.0) -> Path:
    """Start one combined node with ``-XX:ArchiveClassesAtExit``, wait until its broker listener
    answers, stop it with SIGTERM, and move the archive into place. Raises RuntimeError."""
    final = archive_file(release, java)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    work_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafka-cds-", dir=work_root) as d:
        work = Path(d)
        broker, controller = _free_port(), _free_port()
        props = {"process.roles": "broker,controller", "node.id": "1",
                 "controller.quorum.voters": f"1@127.0.0.1:{controller}",
                 "listeners": f"PLAINTEXT://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller}",
                 "controller.listener.names": "CONTROLLER",
                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                 "log.dirs": str(work / "data"), "offsets.topic.replication.factor": "1",
                 "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}
        cfg = work / "server.properties"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        _, log4j_prop = write_log4j(work, release.logging)
        fmt = subprocess.run([java, "-Xmx128m", *jvm_opts, "-cp", release.classpath, "kafka.tools.StorageTool",
                              "format", "-t", _CLUSTER_ID, "-c", str(cfg)],
                             capture_output=True, text=True, timeout=120)
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka-storage format exited {fmt.returncode}")
        argv = [java, "-Xms512m", "-Xmx512m", *jvm_opts, f"-XX:ArchiveClassesAtExit={tmp}",
                f"-Dkafka.logs.dir={work / 'logs'}", log4j_prop, "-cp", release.classpath, "kafka.Kafka", str(cfg)]
        with open(work / "process.log", "wb") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if p.poll() is not None:
                    raise RuntimeError(f"the node exited {p.returncode} before it listened")
                try:
                    socket.create_connection(("127.0.0.1", broker), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the node did not listen within {timeout:.0f} s") from None
                    time.sleep(0.5)
            time.sleep(2.0)   # past the listener: the broker's first metadata and group coordinator
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=120)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        try:
            if not tmp.is_file() or tmp.stat().st_size == 0:
                raise RuntimeError(f"the JVM wrote no archive (exit {p.returncode})")
            place(tmp, final, java, [release.libs])
        finally:
            tmp.unlink(missing_ok=True)
    return final
