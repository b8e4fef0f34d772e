"""A lab reached only through a jump host named in an ssh config file, as a lab user's ~/.ssh/config does.

The lab: five real sshd hosts in namespaces (tests/support/netlab.py lab "jump"); every host but
``jump`` refuses ssh from anyone but the jump host (its own iptables: a TCP reset), so a transport
that ignored ProxyJump fails at once - the control below shows it does. Kafka's ports stay open,
so the workload's clients reach the brokers directly, as on a lab whose bastion guards only ssh.
The ssh config is a file the test writes (the inventory's ``faultline_ssh_config``); this
machine's ~/.ssh is never read. A whole campaign through such a jump host - real Apache Kafka on
the lab hosts, kill-restart - is tests/remote/test_campaigns.py's SSH run.
"""
from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from groundwork.transport.base import TransportError
from groundwork.transport.ssh import HostKeyUnknown, SshTransport, resolve_hop
from tests.remote.sshlab import SshLab, ssh_config

HOSTS = ["jump", "controller", "broker-1", "broker-2", "broker-3"]


@pytest.fixture(scope="module")
def jump_lab(tmp_path_factory):
    lab = SshLab(HOSTS, lab_name="jump", users=False)
    try:
        lab.up()
        lab.only_via("jump")
        yield lab
    finally:
        lab.down()


def transport(lab: SshLab, host: str, cfg: Path | str, **kw) -> SshTransport:
    return SshTransport(host, lab.by_name[host].ip, None, "root", lab.client_key, known_hosts=lab.known_hosts,
                        ssh_config=str(cfg), retry_for=0, connect_timeout=5, **kw)


def test_inventory_values_win_over_the_ssh_config(tmp_path):
    """ssh -G's order: what the inventory gives, then the first matching Host block, then
    OpenSSH's defaults; ProxyJump hops come from the config only."""
    cfg = paramiko.SSHConfig.from_text("Host db-*\n  HostName 10.0.0.5\n  User kafka\n  Port 2222\n"
                                       "  IdentityFile /keys/lab\n  ProxyJump admin@bastion:2022,inner\n")
    hop, jumps = resolve_hop("db-1", cfg)
    assert (hop.host, hop.port, hop.user, hop.key_files) == ("10.0.0.5", 2222, "kafka", ("/keys/lab",))
    assert jumps == ["admin@bastion:2022", "inner"]
    hop, _ = resolve_hop("db-1", cfg, port=22, user="root", key_file="/keys/inv")
    assert (hop.host, hop.port, hop.user, hop.key_files) == ("10.0.0.5", 22, "root", ("/keys/inv",))
    with pytest.raises(TransportError, match="ProxyCommand is not supported"):
        resolve_hop("x", paramiko.SSHConfig.from_text("Host x\n  ProxyCommand nc %h %p\n"))


def test_without_proxyjump_the_lab_refuses(jump_lab, tmp_path):
    """The control: the same host, no ssh config - refused, so the tests below prove the jump."""
    (tmp_path / "empty").write_text("")
    t = transport(jump_lab, "broker-1", tmp_path / "empty")
    assert t.alive() is False and "cannot reach" in (t.last_error or ""), t.last_error
    assert transport(jump_lab, "jump", tmp_path / "empty").alive() is True


def test_a_host_behind_the_jump_is_reached_through_it(jump_lab, tmp_path):
    t = transport(jump_lab, "broker-2", ssh_config(jump_lab, tmp_path / "config"))
    try:
        assert [j.alias for j in t.jumps] == ["bastion"] and "via root@" in t.where
        addrs = t.run(["ip", "-o", "-4", "addr", "show"], check=True).stdout
        assert jump_lab.by_name["broker-2"].ip in addrs and jump_lab.by_name["jump"].ip not in addrs
    finally:
        t.close()


def test_both_host_keys_are_verified(jump_lab, tmp_path):
    """known_hosts without the jump host's key, then without the target's: refused, naming which."""
    cfg = ssh_config(jump_lab, tmp_path / "config")
    lines = Path(jump_lab.known_hosts).read_text().splitlines()
    jip, bip = jump_lab.by_name["jump"].ip, jump_lab.by_name["broker-3"].ip
    for missing, says in ((jip, f"jump host bastion: host key of {jip}:22 is unknown"),
                          (bip, f"broker-3: host key of {bip}:22 is unknown")):
        kh = tmp_path / f"kh-{missing}"
        kh.write_text("\n".join(ln for ln in lines if not ln.startswith(missing + " ")) + "\n")
        t = SshTransport("broker-3", bip, None, "root", jump_lab.client_key, known_hosts=str(kh),
                         ssh_config=str(cfg), retry_for=0, connect_timeout=5)
        with pytest.raises(HostKeyUnknown, match=says):
            t.run("true")
        t.close()
    # asked for (faultline_accept_new_host_keys), both keys are taken and remembered
    kh = tmp_path / "kh-new"
    t = SshTransport("broker-3", bip, None, "root", jump_lab.client_key, known_hosts=str(kh), ssh_config=str(cfg),
                     accept_new_host_keys=True, retry_for=0, connect_timeout=5)
    assert t.run("true").ok
    t.close()
    assert {ln.split()[0] for ln in kh.read_text().splitlines()} == {jip, bip}
