"""Preflight reads the release of a Kafka JVM started without kafka-run-class.sh.

A lab (or the SSH lab test, tests/remote/test_real_kafka.py) may start ``java ... -cp
'/opt/kafka/libs/*' kafka.Kafka server.properties``: the classpath names no jar, Java expands
the wildcard itself, and no ``kafka-server-start.sh`` points at the install. Preflight lists that
directory on the host and finds ``kafka_2.13-VERSION.jar`` there. The host is a Kafka install
layout and a real long-running process whose command line is that JVM's (tests/harness/
test_preflight_local.py's host, with the config away from the install, so only the classpath
can tell the release); the control is the same process without the ``-cp`` entry.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import yaml

from harness.inventory import load_inventory
from harness.preflight import Options, preflight
from tests.harness.test_preflight_local import kafka_host, running  # noqa: F401 - the fixture


def jvm_like(tmp: Path, *, classpath: bool) -> Path:
    inv = kafka_host(tmp)
    doc = yaml.safe_load(inv.read_text())
    host = doc["all"]["children"]["brokers"]["hosts"]["b1"]
    # the config outside the install: no install dir beside it to find libs/ in
    cfg = tmp / "etc" / "server.properties"
    cfg.parent.mkdir()
    cfg.write_text(Path(host["kafka_config"]).read_text())
    host["kafka_config"] = str(cfg)
    argv = [sys.executable, "-c", "import time; time.sleep(600)"]
    if classpath:
        argv += ["-cp", f"{tmp / 'kafka' / 'libs'}/*"]
    argv += ["kafka.Kafka", str(cfg)]
    host["kafka_service"]["command"] = " ".join(shlex.quote(a) for a in argv)
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    return inv


def kafka_summary(inv: Path) -> str:
    return preflight(load_inventory(inv), Options()).hosts[0].checks["kafka"].summary


def test_a_wildcard_classpath_gives_the_release(tmp_path: Path, running):  # noqa: F811
    inv = jvm_like(tmp_path, classpath=True)
    running(inv)
    assert kafka_summary(inv).startswith("3.7.0 broker")


def test_without_the_classpath_the_release_is_unknown(tmp_path: Path, running):  # noqa: F811
    inv = jvm_like(tmp_path, classpath=False)
    running(inv)
    assert kafka_summary(inv).startswith("? broker")
