"""A release's class archive (targets/kafka_cds.py): made by a real Kafka node's clean exit, mapped
by the next Kafka JVM.

Real JVMs: the archive is made in a fresh cache directory from a combined node of the newest
release the tests run (started on loopback ports, stopped with SIGTERM); then a Kafka tool JVM
with ``-Xshare:on`` (the JVM refuses to start when it cannot map the archive) loads Kafka's
classes from it, which its class-loading log says. The control: a node command of a release
without an archive carries no archive option.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from targets import kafka_cds, releases
from targets.apache_kafka import JVM_OPTS

VERSIONS = [ln.strip() for ln in (Path(__file__).resolve().parents[1] / "kafka-releases.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]


def test_the_archive_a_node_leaves_is_mapped_by_the_next_jvm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rel = releases.installed(VERSIONS[-1])
    assert rel is not None, f"Apache Kafka {VERSIONS[-1]} is not installed (scripts/setup-test-host.sh installs it)"
    java = shutil.which("java") or "java"
    monkeypatch.setenv("FAULTLINE_KAFKA_CACHE", str(tmp_path / "cache"))
    assert kafka_cds.java_options(rel, java) == ()   # the control: nothing in a fresh cache
    said: list[str] = []
    f = kafka_cds.ensure(rel, java, JVM_OPTS, said.append, tmp_path / "work")
    assert f is not None and f.is_file() and f.is_relative_to(tmp_path / "cache"), said
    assert f.stat().st_size > 5 * 2**20 and not list(f.parent.glob(".*.tmp"))
    assert not any((tmp_path / "work").iterdir())   # the throw-away node's directory is gone
    assert kafka_cds.java_options(rel, java) == (f"-XX:SharedArchiveFile={f}",)

    p = subprocess.run([java, *JVM_OPTS, *kafka_cds.java_options(rel, java), "-Xshare:on", "-Xlog:class+load=info",
                        "-cp", rel.classpath, "kafka.tools.StorageTool", "random-uuid"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "org.apache.kafka.common.Uuid source: shared objects file (top)" in p.stdout, p.stdout[-3000:]
