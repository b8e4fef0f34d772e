"""``faultline preflight`` against real lab hosts: sshd in network namespaces running kraftsim.

The lab is the one tests/remote/test_campaigns.py runs a campaign on (a controller and three
brokers, each started by its inventory's ``kafka_service`` before faultline arrives, as on a
real lab). A healthy inventory passes (exit 0; the only warnings are the reboots these
namespaces can only emulate, since they share this machine's kernel). Then one host is broken
the two ways a lab breaks most: the inventory names a log dir that is not on the host, and its
login user has no sudo at all. Preflight must print the table, exit 3, and name exactly those
two problems on that host, each with its fix, and nothing else may fail.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.cluster import ClusterNode, make_transport
from harness.inventory import load_inventory
from tests.remote.sshlab import NOSUDO_USER, SshLab, kraftsim_inventory

pytestmark = pytest.mark.timeout(300)
REPO = Path(__file__).resolve().parents[2]
HOSTS = ["controller", "broker-1", "broker-2", "broker-3"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = SshLab(HOSTS)
    tmp = tmp_path_factory.mktemp("preflight-lab")
    try:
        lab.up()
        inv_path = kraftsim_inventory(lab, tmp / "ssh-lab.yaml")
        inv = load_inventory(inv_path)
        for spec in sorted(inv.hosts.values(), key=lambda s: s.role != "controller"):
            ClusterNode(spec, make_transport(inv, spec)).start_service()
        yield lab, inv_path
    finally:
        lab.down()


def preflight(inventory: Path, state: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FAULTLINE_STATE_DIR": str(state)}
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "preflight", str(inventory)],
                          cwd=REPO, capture_output=True, text=True, timeout=240, env=env)


def problem_lines(stdout: str, status: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if ln.startswith(status + " ")]


def row(stdout: str, host: str) -> str:
    rows = [ln for ln in stdout.splitlines() if ln.startswith("│") and ln.strip("│ ").startswith(host + " ")]
    assert len(rows) == 1, stdout
    return rows[0]


def test_healthy_lab_passes(lab, tmp_path: Path):
    _, inv_path = lab
    p = preflight(inv_path, tmp_path / "state")
    print(p.stdout)
    assert p.returncode == 0, p.stdout + p.stderr
    assert problem_lines(p.stdout, "FAIL") == []
    # the namespaces share this kernel: a SysRq reboot would be emulated, and preflight says so
    warns = problem_lines(p.stdout, "warn")
    assert all(" reboot: reboots here are emulated" in w for w in warns), warns
    for host in HOSTS:
        r = row(p.stdout, host)
        assert "FAIL" not in r
        assert "kraftsim 0.1 " + ("controller" if host == "controller" else "broker") in r, r
    assert "can work" in p.stdout


def test_broken_host_is_named_with_exactly_its_two_problems(lab, tmp_path: Path):
    _, inv_path = lab
    doc = yaml.safe_load(inv_path.read_text())
    b2 = doc["all"]["children"]["brokers"]["hosts"]["broker-2"]
    real_dir = b2["kafka_data_dirs"][0]
    missing = real_dir + "-missing"
    assert not Path(missing).exists()
    b2.update({"ansible_user": NOSUDO_USER, "faultline_sudo": True, "kafka_data_dirs": [missing]})
    broken = tmp_path / "broken-lab.yaml"
    broken.write_text(yaml.safe_dump(doc, sort_keys=False))

    p = preflight(broken, tmp_path / "state")
    print(p.stdout)
    print(p.stderr)
    assert p.returncode == 3, p.stdout + p.stderr
    fails = problem_lines(p.stdout, "FAIL")
    assert len(fails) == 2, fails
    sudo_line = next(f for f in fails if f.startswith("FAIL broker-2 sudo: "))
    dirs_line = next(f for f in fails if f.startswith("FAIL broker-2 dirs: "))
    assert f"sudo -n refused for {NOSUDO_USER}" in sudo_line and "; fix: grant" in sudo_line
    assert f"log dir {missing} does not exist" in dirs_line and f"log.dirs={real_dir}" in dirs_line
    assert f"; fix: set kafka_data_dirs to Kafka's log.dirs: [{real_dir}]" in dirs_line
    # the table: broker-2 fails in exactly those two columns, every other host in none
    r = row(p.stdout, "broker-2")
    cells = [c.strip() for c in r.strip("│").split("│")]
    assert [c.split()[0] for c in cells[2:]].count("FAIL") == 2, r
    for host in HOSTS:
        if host != "broker-2":
            assert "FAIL" not in row(p.stdout, host)
    # the one error line names them too
    assert "broker-2 sudo, broker-2 dirs" in p.stderr, p.stderr
