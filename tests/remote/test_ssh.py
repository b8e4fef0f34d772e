"""SSH transport against real OpenSSH sshd in network namespaces.

Each check is verified from outside the transport where it can be: files by the remote
sha256sum and by /proc on this machine (the namespaces share our pid and mount
namespaces), reboots by killing every process in the host's namespace.
"""
from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from pathlib import Path

import pytest

from groundwork.transport.base import CommandFailed, TransportError
from groundwork.transport.ssh import HostKeyUnknown, SshTransport
from tests.remote.sshlab import PW_USER, PW_USER_PASSWORD, USER, SshLab

pytestmark = pytest.mark.timeout(120)


def transport(lab: SshLab, host: str = "h1", user: str = USER, **kw) -> SshTransport:
    h = lab.by_name[host]
    kw.setdefault("known_hosts", lab.known_hosts)
    kw.setdefault("key_file", lab.client_key)
    kw.setdefault("retry_for", 5.0)
    key = kw.pop("key_file")
    return SshTransport(host, h.ip, h.port, user, key, **kw)


def test_commands_quote_every_argument_and_report_exit_codes(ssh_lab: SshLab):
    t = transport(ssh_lab)
    try:
        nasty = ["a b", "$HOME", "'q'", '"dq"', ";touch /tmp/fl-pwned", "`id`", "*"]
        r = t.run(["printf", "%s\\n", *nasty], check=True)
        assert r.stdout.splitlines() == nasty
        assert not os.path.exists("/tmp/fl-pwned")
        r = t.run(["sh", "-c", "echo out; echo err >&2; exit 7"])
        assert (r.exit_code, r.stdout, r.stderr) == (7, "out\n", "err\n")
        with pytest.raises(CommandFailed, match="exit 7"):
            t.run("exit 7", check=True)
        assert t.run(["cat"], input="line1\nline2\n").stdout == "line1\nline2\n"
        # the command really ran on the namespace host: its address is the lab IP
        assert ssh_lab.by_name["h1"].ip in t.run(["ip", "-4", "addr"]).stdout
        assert t.run(["id", "-un"]).stdout.strip() == USER
    finally:
        t.close()


def test_file_copy_both_ways_verified_by_remote_checksum(ssh_lab: SshLab, tmp_path: Path):
    t = transport(ssh_lab)
    try:
        data = os.urandom(700_000)
        src = tmp_path / "seg.log"
        src.write_bytes(data)
        remote = str(ssh_lab.root / "home" / USER / "data" / "00000000000000000000.log")
        t.put(str(src), remote)
        remote_sum = t.run(["sha256sum", remote], check=True).stdout.split()[0]
        assert remote_sum == hashlib.sha256(data).hexdigest()
        t.run(["sh", "-c", f"printf 'written remotely' > {remote}.meta"], check=True)
        t.get(remote + ".meta", str(tmp_path / "back" / "meta"))
        assert (tmp_path / "back" / "meta").read_text() == "written remotely"
        with pytest.raises(TransportError, match="cannot copy"):
            t.get("/nonexistent/file", str(tmp_path / "x"))
    finally:
        t.close()


def test_sudo_nopasswd_runs_as_root_only_when_asked(ssh_lab: SshLab):
    t = transport(ssh_lab, sudo=True)
    plain = transport(ssh_lab, sudo=False)
    try:
        assert t.run(["id", "-u"], sudo=True, check=True).stdout.strip() == "0"
        assert t.run(["id", "-u"]).stdout.strip() != "0"
        # an inventory that grants no sudo never wraps a command in sudo
        assert plain.run(["id", "-u"], sudo=True).stdout.strip() != "0"
        # a root-only file written with sudo, checked from this machine
        target = ssh_lab.root / "root-only"
        t.write_text(str(target), "by root\n", sudo=True)
        assert target.read_text() == "by root\n" and target.stat().st_uid == 0
    finally:
        t.close()
        plain.close()


def test_sudo_password_comes_from_env_and_is_never_logged(ssh_lab: SshLab, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("FL_TEST_SUDO_PW", PW_USER_PASSWORD)
    t = transport(ssh_lab, user=PW_USER, sudo=True, sudo_password_env="FL_TEST_SUDO_PW")
    try:
        r = t.run(["id", "-u"], sudo=True, check=True)
        assert r.stdout.strip() == "0"
        assert PW_USER_PASSWORD not in r.argv + r.stdout + r.stderr
        # input after the password still reaches the command
        assert t.run(["cat"], sudo=True, input="payload\n").stdout == "payload\n"
        monkeypatch.setenv("FL_TEST_SUDO_PW", "wrong-password")
        with pytest.raises(TransportError, match="rejected the password from .FL_TEST_SUDO_PW") as ei:
            t.run(["id", "-u"], sudo=True)
        assert "wrong-password" not in str(ei.value)
        monkeypatch.delenv("FL_TEST_SUDO_PW")
        with pytest.raises(TransportError, match="FL_TEST_SUDO_PW is not set"):
            t.run(["id"], sudo=True)
        assert PW_USER_PASSWORD not in caplog.text and "wrong-password" not in caplog.text
        # without a password source, a password-sudo host fails with one clear line
        nopw = transport(ssh_lab, user=PW_USER, sudo=True)
        with pytest.raises(TransportError, match="needs a password"):
            nopw.run(["id"], sudo=True)
        nopw.close()
    finally:
        t.close()


def test_spawn_detaches_and_signal_reaches_the_process(ssh_lab: SshLab):
    t = transport(ssh_lab)
    try:
        log = str(ssh_lab.root / "home" / USER / "logs" / "svc.log")
        pid = t.spawn(["sh", "-c", "echo started; exec sleep 300"], log_path=log, env={"FL_X": "a b"})
        # same pid namespace: /proc on this machine sees the remote process
        time.sleep(0.3)
        assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"300"]
        assert b"FL_X=a b" in Path(f"/proc/{pid}/environ").read_bytes()
        t.close()  # the ssh session ending must not take the service down
        assert t.pid_alive(pid)
        assert t.read_text(log) == "started\n"
        assert t.signal(pid, 9) is True
        deadline = time.monotonic() + 5
        while t.pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not t.pid_alive(pid)
        assert t.signal(pid, 9) is False
    finally:
        t.close()


def test_rebooted_host_is_reconnected_with_retries(ssh_lab: SshLab):
    t = transport(ssh_lab, "h2", retry_for=30.0)
    try:
        assert t.run(["true"]).ok and t.connects == 1
        ssh_lab.crash("h2")
        assert not t.alive() and "cannot reach" in (t.last_error or "")
        down_for = 3.0
        timer = threading.Timer(down_for, ssh_lab.start, args=("h2",))
        t0 = time.monotonic()
        timer.start()
        try:
            t.reconnect(timeout=60)
        finally:
            timer.join()
        took = time.monotonic() - t0
        assert took >= down_for - 0.2
        assert t.last_connect_attempts >= 2, "reconnect must have retried while the host was down"
        assert t.run(["id", "-un"], check=True).stdout.strip() == USER
        # a plain run() after another crash reconnects on its own (nothing had run yet)
        ssh_lab.crash("h2")
        timer = threading.Timer(1.5, ssh_lab.start, args=("h2",))
        timer.start()
        try:
            assert t.run(["echo", "back"], check=True).stdout == "back\n"
        finally:
            timer.join()
        assert t.connects == 3
    finally:
        t.close()


def test_unknown_host_key_is_refused_by_default_with_one_line(ssh_lab: SshLab, tmp_path: Path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = transport(ssh_lab, known_hosts=str(empty))
    with pytest.raises(HostKeyUnknown) as ei:
        t.run(["true"])
    msg = str(ei.value)
    ip = ssh_lab.by_name["h1"].ip
    assert "\n" not in msg and ip in msg and "unknown" in msg and "faultline_accept_new_host_keys" in msg
    assert t.last_connect_attempts == 1, "a refused host key must not be retried"
    # accepting new keys is explicit, and the accepted key is remembered
    acc = transport(ssh_lab, known_hosts=str(empty), accept_new_host_keys=True)
    assert acc.run(["true"]).ok
    acc.close()
    assert ssh_lab.by_name["h1"].host_pub.split()[1] in empty.read_text()
    again = transport(ssh_lab, known_hosts=str(empty))
    assert again.run(["true"]).ok
    again.close()


def test_changed_host_key_is_refused_even_when_accepting_new_keys(ssh_lab: SshLab, tmp_path: Path):
    h1, h2 = ssh_lab.by_name["h1"], ssh_lab.by_name["h2"]
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"{h1.known_hosts_name} {h2.host_pub}\n")  # h1's address, h2's key
    t = transport(ssh_lab, known_hosts=str(wrong), accept_new_host_keys=True)
    with pytest.raises(TransportError, match="CHANGED") as ei:
        t.run(["true"])
    assert "\n" not in str(ei.value)


def test_wrong_key_and_unreachable_host_fail_with_one_line(ssh_lab: SshLab, tmp_path: Path):
    import subprocess
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    t = transport(ssh_lab, key_file=str(other))
    with pytest.raises(TransportError, match="authentication failed") as ei:
        t.run(["true"])
    assert "\n" not in str(ei.value) and t.last_connect_attempts == 1
    gone = SshTransport("ghost", "10.250.1.99", 22, USER, ssh_lab.client_key, known_hosts=ssh_lab.known_hosts,
                        retry_for=1.0, connect_timeout=1.0)
    with pytest.raises(TransportError, match="cannot reach 10.250.1.99:22") as ei:
        gone.run(["true"])
    assert "\n" not in str(ei.value)
    missing = transport(ssh_lab, key_file=str(tmp_path / "nope"))
    with pytest.raises(TransportError, match="does not exist"):
        missing.run(["true"])
