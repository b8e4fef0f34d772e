"""Unreachable hosts, wrong credentials, unknown host keys, missing containers.

Each is one clear line on stderr and exit code 3, from the pre-flight probe
(``python -m harness.probe``) and from ``faultline run`` itself, and nothing is
left behind: no ssh sessions on the lab hosts, no containers, no open heal-ledger entries.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest
import yaml

from tests.remote import dockerlab
from tests.remote.sshlab import USER, SshLab

pytestmark = pytest.mark.timeout(180)
REPO = Path(__file__).resolve().parents[2]


def ssh_inventory(lab: SshLab, tmp: Path, *, hosts: dict[str, str], key: str | None = None,
                  known_hosts: str | None = None) -> Path:
    """An ssh inventory of brokers at the given addresses (a controller on h1)."""
    def host(i: int, addr: str, role: str) -> dict:
        return {"ansible_host": addr, "kafka_node_id": i,
                "kafka_listeners": f"{'CONTROLLER' if role == 'c' else 'PLAINTEXT'}://{addr}:{9093 if role == 'c' else 9092}"}
    doc = {"all": {
        "vars": {"faultline_transport": "ssh", "ansible_user": USER,
                 "ansible_ssh_private_key_file": key or lab.client_key,
                 "faultline_known_hosts": known_hosts or lab.known_hosts, "faultline_ssh_config": "none",
                 "kafka_service": {"command": "sleep 1000", "pidfile": "/tmp/fl-none.pid"}},
        "children": {
            "controllers": {"hosts": {"controller": host(1000, lab.by_name["h1"].ip, "c")}},
            "brokers": {"hosts": {name: host(i, addr, "b") for i, (name, addr) in enumerate(hosts.items(), 1)}},
        }}}
    p = tmp / "ssh-inventory.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def probe(inventory: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.probe", str(inventory)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def sessions(lab: SshLab, host: str) -> set[str]:
    """Processes in the lab host's namespace: the sshd listener and any live sessions."""
    return set(subprocess.run(["ip", "netns", "pids", lab.by_name[host].ns], capture_output=True,
                              text=True).stdout.split())


def sessions_settle(lab: SshLab, host: str, before: set[str], within_s: float = 10.0) -> set[str]:
    """The host's processes once sshd has reaped the probe's connections, or as they stand after
    ``within_s``.

    The probe has exited by now, so its side of every connection is closed; but sshd's
    per-connection (preauth) child exits on its own schedule after the client goes, and a
    check made the instant the probe returns can still see it (CI saw exactly that once).
    A session the harness really left open would still be there after ``within_s``.
    """
    deadline = time.monotonic() + within_s
    while (now := sessions(lab, host)) != before and time.monotonic() < deadline:
        time.sleep(0.2)
    return now


def error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip()]


def test_probe_all_reachable_is_exit_0(ssh_lab: SshLab, tmp_path: Path):
    inv = ssh_inventory(ssh_lab, tmp_path, hosts={"broker-1": ssh_lab.by_name["h1"].ip,
                                                  "broker-2": ssh_lab.by_name["h2"].ip})
    p = probe(inv)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count(": ok (ssh)") == 3


def test_unreachable_host_is_one_line_exit_3(ssh_lab: SshLab, tmp_path: Path):
    before = sessions(ssh_lab, "h1")
    # 10.250.1.99 is on the ssh lab's bridge (so nothing leaves 10.250.0.0/16) but no one is there
    inv = ssh_inventory(ssh_lab, tmp_path, hosts={"broker-1": ssh_lab.by_name["h1"].ip, "broker-2": "10.250.1.99"})
    p = probe(inv)
    assert p.returncode == 3
    lines = error_lines(p.stderr)
    assert len(lines) == 1 and "broker-2" in lines[0] and "cannot reach 10.250.1.99:22" in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    assert sessions_settle(ssh_lab, "h1", before) == before


def test_wrong_key_is_one_line_exit_3(ssh_lab: SshLab, tmp_path: Path):
    other = tmp_path / "not-authorized"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    before = sessions(ssh_lab, "h2")
    inv = ssh_inventory(ssh_lab, tmp_path, hosts={"broker-1": ssh_lab.by_name["h2"].ip}, key=str(other))
    p = probe(inv)
    assert p.returncode == 3
    lines = error_lines(p.stderr)
    assert len(lines) == 2 and all("authentication failed" in ln for ln in lines), p.stderr
    assert all(str(other) in ln for ln in lines)
    assert sessions_settle(ssh_lab, "h2", before) == before


def test_unknown_host_key_is_one_line_exit_3(ssh_lab: SshLab, tmp_path: Path):
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    inv = ssh_inventory(ssh_lab, tmp_path, hosts={"broker-1": ssh_lab.by_name["h2"].ip}, known_hosts=str(kh))
    p = probe(inv)
    assert p.returncode == 3
    lines = error_lines(p.stderr)
    assert len(lines) == 2 and all("unknown" in ln and "faultline_accept_new_host_keys" in ln for ln in lines)
    assert kh.read_text() == "", "a refused key must not be recorded"


def _docker_state(c: docker.DockerClient) -> tuple[set[str], set[str], set[str]]:
    return ({x.name for x in c.containers.list(all=True)}, {n.name for n in c.networks.list()},
            {v.name for v in c.volumes.list()})


@pytest.fixture(scope="module")
def engine():
    dockerlab.ensure_dockerd()
    return docker.from_env()


def test_missing_container_is_one_line_exit_3(engine, tmp_path: Path):
    inv = dockerlab.test_inventory(tmp_path, brokers=1)
    before = _docker_state(engine)
    p = probe(inv)
    assert p.returncode == 3
    lines = error_lines(p.stderr)
    assert len(lines) == 2 and all("not found on the docker engine" in ln for ln in lines), p.stderr
    assert "fl-test-broker-1" in p.stderr and "Traceback" not in p.stderr
    assert _docker_state(engine) == before


def test_faultline_run_against_a_missing_container_exits_3_and_leaves_nothing(engine, tmp_path: Path):
    """The real user path: `faultline run` with a Docker inventory whose containers are gone."""
    inv = dockerlab.test_inventory(tmp_path, brokers=3)  # the campaign's topic wants 3 replicas
    state = tmp_path / "state"
    before = _docker_state(engine)
    env = {**os.environ, "FAULTLINE_STATE_DIR": str(state)}
    p = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run",
                        str(REPO / "campaigns" / "kill-restart.yaml"), "--set", f"target.inventory={inv}",
                        "--results-dir", str(tmp_path / "results"), "--no-progress"],
                       cwd=REPO, capture_output=True, text=True, timeout=150, env=env)
    assert p.returncode == 3, p.stderr[-2000:]
    errs = [ln for ln in p.stderr.splitlines() if ln.startswith("faultline: error:")]
    assert len(errs) == 1 and "\n" not in errs[0], p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    assert _docker_state(engine) == before
    ledger = state / "ledger.jsonl"
    if ledger.exists():
        from groundwork.ledger import Ledger
        assert Ledger(ledger).open_entries() == [], "a failed pre-flight must leave no open heal entries"


def test_image_build_with_unreachable_mirror_is_one_line_exit_3(engine, tmp_path: Path):
    """debootstrap against a mirror that does not answer (a closed port on loopback)."""
    import glob
    import tempfile
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "fl-rootfs-*")))
    # through the main CLI, as documented (`faultline docker build-image`)
    p = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "docker", "build-image",
                        "--base", "faultline/test-base:unbuildable",
                        "--tag", "faultline/test-image:unbuildable", "--mirror", "http://127.0.0.1:9/debian"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 3
    lines = error_lines(p.stderr)
    assert lines[-1].startswith("faultline docker build-image: debootstrap from http://127.0.0.1:9/debian failed")
    assert "Traceback" not in p.stderr
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "fl-rootfs-*"))) == before
    assert not engine.images.list(name="faultline/test-base")
