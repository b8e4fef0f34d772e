"""Malformed inventories and campaigns through the real CLI.

Each case runs ``faultline`` in a subprocess (the console script users run) and must give
exit code 2, exactly one line on stderr naming the file and what is wrong, and no
traceback. The cases run three at a time (each is ~1 s of interpreter start-up); every
case is its own test so a regression names the case.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOCAL_INV = str(REPO / "inventory" / "local.yaml")

GOOD_HOST = """
        b1:
          ansible_host: 10.250.7.10
          kafka_node_id: 1
          kafka_service: {command: "kafka-server-start.sh /etc/kafka/server.properties", pidfile: /run/kafka.pid}
"""


def inv(body: str) -> str:
    return textwrap.dedent(body)


def ssh_inv(host_extra: str = "", all_vars: str = "faultline_transport: ssh") -> str:
    return inv(f"""
    all:
      vars: {{{all_vars}}}
      children:
        brokers:
          hosts:
            b1:
              ansible_host: 10.250.7.10
              kafka_node_id: 1
              kafka_service: {{systemd: kafka}}
              {host_extra}
    """)


def campaign(**parts: str) -> str:
    base = {
        "target": f"target: {{inventory: {LOCAL_INV}}}",
        "topic": "topic: {name: t, partitions: 3, replication_factor: 3, min_insync_replicas: 2}",
        "workload": "workload: {producers: 1, duration: 5}",
        "nemesis": "nemesis: {schedule: none}",
        "expect": "expect: no-loss",
    }
    base.update(parts)
    return "\n".join(v for v in base.values() if v) + "\n"


# (case id, kind, file content (str or bytes or None = missing), extra args, expected substring)
CASES: list[tuple[str, str, object, list[str], str]] = [
    # --- inventories: `faultline inventory check FILE`
    ("inv-yaml-syntax", "inv", "all:\n  vars: {faultline_transport: local\n", [], "YAML syntax error"),
    ("inv-python-tag", "inv", "all: !!python/object/apply:os.system ['touch {PWNED}']\n", [], "not allowed"),
    ("inv-top-is-list", "inv", "- all\n- hosts\n", [], "expected a mapping"),
    ("inv-empty", "inv", "", [], "inventory is empty"),
    ("inv-unknown-top-key", "inv", "all: {}\nbrokers: {}\n", [], "brokers: unknown key"),
    ("inv-unknown-faultline-var", "inv", ssh_inv("faultline_colour: red"), [], "b1.faultline_colour: unknown key"),
    ("inv-node-id-string", "inv", ssh_inv().replace("kafka_node_id: 1", "kafka_node_id: one"), [], "kafka_node_id: expected an integer"),
    ("inv-missing-service", "inv", ssh_inv().replace("kafka_service: {systemd: kafka}", ""), [], "kafka_service: missing required key"),
    ("inv-service-both", "inv", ssh_inv().replace("{systemd: kafka}", "{systemd: kafka, command: x, pidfile: /p}"), [], "exactly one of systemd"),
    ("inv-command-no-pidfile", "inv", ssh_inv().replace("{systemd: kafka}", "{command: kafka-start}"), [], "kafka_service.pidfile: missing"),
    ("inv-ssh-no-host", "inv", ssh_inv().replace("ansible_host: 10.250.7.10", ""), [], "ansible_host: missing required key"),
    ("inv-bad-transport", "inv", ssh_inv(all_vars="faultline_transport: telnet"), [], "faultline_transport: expected one of local, ssh, docker"),
    ("inv-port-range", "inv", ssh_inv("ansible_port: 70000"), [], "ansible_port: expected an integer <= 65535"),
    ("inv-bad-listeners", "inv", ssh_inv("kafka_listeners: nonsense"), [], "kafka_listeners: expected NAME://host:port"),
    ("inv-data-dirs-int", "inv", ssh_inv("kafka_data_dirs: 5"), [], "kafka_data_dirs: expected a list of strings"),
    ("inv-unknown-group", "inv", "all:\n  children:\n    zookeepers: {hosts: {z1: {}}}\n", [], "all.children.zookeepers: unknown key"),
    ("inv-embedded-over-ssh", "inv", "all:\n  vars: {faultline_transport: ssh, faultline_embedded: kraftsim}\n", [], "needs faultline_transport: local"),
    ("inv-duplicate-node-id", "inv", inv("""
        all:
          vars: {faultline_transport: ssh}
          children:
            brokers:
              hosts:
                b1: {ansible_host: 10.250.7.10, kafka_node_id: 1, kafka_service: {systemd: kafka}}
                b2: {ansible_host: 10.250.7.11, kafka_node_id: 1, kafka_service: {systemd: kafka}}
        """), [], "node id 1 is already used by b1"),
    ("inv-lab-var-not-listed", "inv", ssh_inv("ntp_server: 10.0.0.1"), [], "faultline_ignore_vars"),
    ("inv-missing-file", "inv", None, [], "inventory not found"),
    ("inv-not-utf8", "inv", b"\xff\xfe\x00all: {}\n", [], "not UTF-8"),
    # --- campaigns: `faultline run FILE`
    ("camp-min-isr-above-rf", "camp", campaign(topic="topic: {replication_factor: 2, min_insync_replicas: 3}"), [], "topic.min_insync_replicas: 3 is above replication_factor 2"),
    ("camp-rf-above-brokers", "camp", campaign(topic="topic: {replication_factor: 5, min_insync_replicas: 2}"), [], "topic.replication_factor: 5 is more than the target's 3 broker(s)"),
    ("camp-missing-target", "camp", campaign(target=""), [], "target: missing required key"),
    ("camp-inventory-missing", "camp", campaign(target="target: {inventory: no/such/inventory.yaml}"), [], "target.inventory: inventory file no/such/inventory.yaml not found"),
    ("camp-unknown-workload-key", "camp", campaign(workload="workload: {producers: 1, threads: 4}"), [], "workload.threads: unknown key"),
    ("camp-negative-rate", "camp", campaign(workload="workload: {rate: -5}"), [], "workload.rate: expected a number > 0"),
    ("camp-bad-expect", "camp", campaign(expect="expect: maybe"), [], "expect: expected one of no-loss, loss"),
    ("camp-partitions-string", "camp", campaign(topic="topic: {partitions: three}"), [], "topic.partitions: expected an integer"),
    ("camp-unknown-fault", "camp", campaign(nemesis="nemesis: {schedule: targeted, steps: [{start: meteor, target: broker-1}]}"), [], "unknown fault 'meteor'"),
    ("camp-stop-unknown-name", "camp", campaign(nemesis="nemesis: {schedule: targeted, steps: [{stop: k9}]}"), [], "no earlier step started a fault 'as' 'k9'"),
    ("camp-selector-partition", "camp", campaign(nemesis="nemesis: {schedule: targeted, steps: [{start: kill, target: 'leader-of:9'}]}"), [], "leader-of:P needs a partition number below 3"),
    ("camp-unknown-condition", "camp", campaign(nemesis="nemesis: {schedule: targeted, steps: [{until: {moon-phase: full}}]}"), [], "unknown condition"),
    ("camp-two-step-kinds", "camp", campaign(nemesis="nemesis: {schedule: targeted, steps: [{wait: 1, note: hi}]}"), [], "a step has exactly one of"),
    ("camp-random-no-faults", "camp", campaign(nemesis="nemesis: {schedule: random, random: {interval: 3}}"), [], "nemesis.random.faults: missing required key"),
    ("camp-random-concurrency-zero", "camp", campaign(nemesis="nemesis: {schedule: random, random: {faults: [kill], concurrency: 0}}"), [], "nemesis.random.concurrency: expected an integer >= 1, got 0"),
    ("camp-python-tag", "camp", "!!python/name:os.system\n", [], "not allowed"),
    ("camp-settings-not-scalar", "camp", campaign(target=f"target: {{inventory: {LOCAL_INV}, settings: {{kip903.enabled: [1, 2]}}}}"), [], "target.settings.kip903.enabled: expected a scalar"),
    ("camp-controllers-zero", "camp", campaign(), ["--set", "target.controllers=0"], "target.controllers: expected an integer >= 1"),
    ("camp-controllers-remote", "camp", campaign(target=f"target: {{inventory: {REPO / 'inventory' / 'lab.example.yaml'}, controllers: 3}}"), [],
     "target.controllers: sets the embedded kraftsim cluster's controller count"),
    ("camp-set-unknown-key", "camp", campaign(), ["--set", "colour=red"], "--set: colour: unknown campaign key"),
    ("camp-set-bad-type", "camp", campaign(), ["--set", "workload.duration=soon"], "workload.duration: expected a number"),
    ("camp-set-no-equals", "camp", campaign(), ["--set", "workload.duration"], "expected dotted.key=value"),
    ("camp-is-directory", "camp", "DIR", [], "must be a regular file"),
]


def _run_case(tmp: Path, case: tuple[str, str, object, list[str], str]) -> subprocess.CompletedProcess:
    cid, kind, content, extra, _ = case
    d = tmp / cid
    d.mkdir()
    f = d / ("inventory.yaml" if kind == "inv" else "campaign.yaml")
    if content == "DIR":
        f.mkdir()
    elif isinstance(content, bytes):
        f.write_bytes(content)
    elif isinstance(content, str):
        f.write_text(content.replace("{PWNED}", str(d / "pwned")), encoding="utf-8")
    faultline = shutil.which("faultline")
    cli = [faultline] if faultline else [sys.executable, "-m", "harness.cli"]
    args = ["inventory", "check", str(f)] if kind == "inv" else ["run", str(f), "--results-dir", str(d / "results"), "--no-progress"]
    env = {**os.environ, "FAULTLINE_STATE_DIR": str(d / "state")}
    return subprocess.run(cli + args + extra, capture_output=True, text=True, timeout=120, cwd=d, env=env)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess]:
    tmp = tmp_path_factory.mktemp("config-errors")
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda c: _run_case(tmp, c), CASES))
    out = {c[0]: r for c, r in zip(CASES, results)}
    out["_tmp"] = tmp  # type: ignore[assignment]
    return out


def test_at_least_twenty_cases() -> None:
    assert len(CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_input_is_one_line_exit_2(outcomes: dict[str, subprocess.CompletedProcess], case) -> None:
    cid, kind, content, _, expect = case
    r = outcomes[cid]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, f"{cid}: exit {r.returncode}\nstdout={r.stdout}\nstderr={r.stderr}"
    assert "Traceback" not in r.stderr + r.stdout, f"{cid}: traceback\n{r.stderr}"
    assert len(lines) == 1, f"{cid}: expected exactly one stderr line, got {len(lines)}:\n{r.stderr}"
    assert expect in lines[0], f"{cid}: {expect!r} not in {lines[0]!r}"
    if kind in ("inv", "camp") and content not in (None,) and not cid.startswith("camp-set-no"):
        name = "inventory" if (kind == "inv" or "inventory" in expect) else "campaign"
        assert name + ".yaml" in lines[0] or "--set" in lines[0], f"{cid}: the line does not name the file: {lines[0]!r}"
    # no run directory appears for a campaign refused at validation
    res = Path(outcomes["_tmp"]) / cid / "results"  # type: ignore[arg-type]
    assert not res.exists() or not any(res.iterdir()), f"{cid}: a run started"


def test_python_tag_constructed_nothing(outcomes: dict[str, subprocess.CompletedProcess]) -> None:
    tmp = Path(outcomes["_tmp"])  # type: ignore[arg-type]
    assert not (tmp / "inv-python-tag" / "pwned").exists()
