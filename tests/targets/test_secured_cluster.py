"""A real Kafka cluster that listens on SASL_SSL only: faultline's clients authenticate, a run on it
is valid with nothing lost, the password is in no file faultline wrote, and a wrong password is one
line at preflight and at run (exit 3).

The cluster is the embedded Apache Kafka target secured with a CA this test makes
(targets/kafka_security.py) and SCRAM-SHA-512 (its user added by the first `kafka-storage format`);
its RUN/inventory.yaml is then used as a lab's inventory, as a user would point faultline at their
own secured cluster: `faultline run ... --set target.inventory=THAT`.
"""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from groundwork.ledger import Ledger
from targets.apache_kafka import EmbeddedApacheKafka, heal
from targets.kafka_security import ListenerSecurity
from tests.support.kafka import releases_under_test

REPO = Path(__file__).resolve().parents[2]
PASSWORD_ENV = "FL_TEST_KAFKA_PASSWORD"


def make_ca(d: Path) -> tuple[Path, Path]:
    d.mkdir(parents=True, exist_ok=True)
    key, crt = d / "ca.key", d / "ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt),
                    "-days", "2", "-subj", "/CN=faultline test CA"], check=True, capture_output=True)
    return crt, key


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """(inventory of a running SASL_SSL cluster, its password, the cluster's directory)."""
    d = tmp_path_factory.mktemp("secured")
    crt, key = make_ca(d / "ca")
    password = secrets.token_urlsafe(18)
    os.environ[PASSWORD_ENV] = password
    sec = ListenerSecurity("SASL_SSL", "SCRAM-SHA-512", "faultline", PASSWORD_ENV, str(crt), str(key))
    ledger = Ledger(d / "ledger.jsonl")
    k = EmbeddedApacheKafka(d / "lab", version=releases_under_test()[-1], brokers=3, controllers=1, settings={},
                            ledger=ledger, security=sec)
    try:
        k.start()
        yield k.write_inventory(), password, d
    finally:
        try:
            k.stop()
        finally:
            for e in ledger.open_entries():
                heal(e.get("record") or {})
            os.environ.pop(PASSWORD_ENV, None)


def faultline(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def test_the_brokers_listen_on_sasl_ssl_only(secured):
    inv, _, _ = secured
    doc = yaml.safe_load(inv.read_text())
    for host in doc["all"]["children"]["brokers"]["hosts"].values():
        assert host["kafka_listeners"].startswith("SASL_SSL://")
        props = Path(host["kafka_config"]).read_text()
        assert "listeners=SASL_SSL://" in props and "PLAINTEXT://" not in props.replace("CONTROLLER:PLAINTEXT", "")


@pytest.mark.slow
def test_a_run_on_it_is_valid_and_writes_the_password_nowhere(secured, tmp_path):
    inv, password, cluster_dir = secured
    results = tmp_path / "results"
    p = faultline("run", "campaigns/kill-restart.yaml", "--set", f"target.inventory={inv}", "--seed", "3",
                  "--set", "workload.duration=8", "--results-dir", str(results), "--no-progress")
    assert p.returncode == 0, p.stderr[-3000:]
    run_dir = Path(p.stdout.strip().splitlines()[-1])
    import json
    v = json.loads((run_dir / "verdict.json").read_text())
    assert v["outcome"] == "as_expected" and v["counts"]["lost_write"] == 0 and v["acked_writes"] > 0
    run = json.loads((run_dir / "run.json").read_text())
    assert run["kafka_client"]["security.protocol"] == "SASL_SSL"
    leaked = [str(f) for root in (run_dir, cluster_dir) for f in root.rglob("*")
              if f.is_file() and password.encode() in f.read_bytes()]
    assert leaked == [], f"the password is written in {leaked}"


def _wrong_password_inventory(inv: Path, tmp_path: Path) -> Path:
    doc = yaml.safe_load(inv.read_text())
    doc["all"]["vars"]["kafka_client"]["sasl.password_env"] = "FL_TEST_WRONG_PASSWORD"
    bad = tmp_path / "wrong-password.yaml"
    bad.write_text(yaml.safe_dump(doc))
    return bad


def test_a_wrong_password_is_one_line_at_preflight_and_at_run(secured, tmp_path):
    inv, _, _ = secured
    bad = _wrong_password_inventory(inv, tmp_path)
    env = {"FL_TEST_WRONG_PASSWORD": "not-the-password"}
    pre = faultline("preflight", str(bad), env=env)
    assert pre.returncode == 3, pre.stdout + pre.stderr
    fails = [ln for ln in pre.stdout.splitlines() + pre.stderr.splitlines() if "kafka_client" in ln and "FAIL" in ln]
    assert len(fails) == 1 and "authentication failed" in fails[0], pre.stdout + pre.stderr
    run = faultline("run", "campaigns/kill-restart.yaml", "--set", f"target.inventory={bad}",
                    "--results-dir", str(tmp_path / "r"), "--no-progress", env=env)
    assert run.returncode == 3, run.stderr[-2000:]
    errors = [ln for ln in run.stderr.splitlines() if ln.startswith("faultline: error:")]
    assert len(errors) == 1 and "authentication failed" in errors[0], run.stderr[-2000:]
    assert "not-the-password" not in run.stderr + run.stdout + pre.stdout + pre.stderr


def test_a_literal_password_in_an_inventory_is_refused(secured, tmp_path):
    inv, _, _ = secured
    doc = yaml.safe_load(inv.read_text())
    doc["all"]["vars"]["kafka_client"]["sasl.password"] = "x"
    f = tmp_path / "literal.yaml"
    f.write_text(yaml.safe_dump(doc))
    p = faultline("inventory", "check", str(f))
    assert p.returncode == 2 and "kafka_client.sasl.password: a secret is never written" in p.stderr
