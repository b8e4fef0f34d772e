"""Lab hosts for the SSH transport tests: a real OpenSSH sshd in each network namespace.

Why real sshd: host-key checking, key auth, sudo, SFTP and a dropped connection after a
"reboot" are exactly what paramiko must get right against a real server; a fake would
test our assumptions instead. Each host has its own host key, sshd_config and pid file
in a temp dir; the test users (one with NOPASSWD sudo, one whose sudo needs a password,
and one without any sudo) are created for the session and removed, with their sudoers files, at
teardown.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.netlab import NetLab, cleanup_stale, sh
from tests.support.sshd import start_sshd

USER = "fl-ssh-nopw"
PW_USER = "fl-ssh-pw"
PW_USER_PASSWORD = "fl-test-Secret-42"
NOSUDO_USER = "fl-ssh-nosudo"   # logs in with the lab key; no sudoers entry at all
SUDOERS = Path("/etc/sudoers.d/faultline-remote-tests")


@dataclass
class SshHost:
    name: str
    ns: str
    ip: str
    dir: Path
    port: int = 22
    proc: subprocess.Popen | None = None

    @property
    def config(self) -> Path:
        return self.dir / "sshd_config"

    @property
    def known_hosts_name(self) -> str:
        """How OpenSSH and paramiko name the host in known_hosts (no brackets on port 22)."""
        return self.ip if self.port == 22 else f"[{self.ip}]:{self.port}"

    @property
    def host_pub(self) -> str:
        return (self.dir / "ssh_host_ed25519_key.pub").read_text().strip()


@dataclass
class SshLab:
    hosts: list[str]
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="fl-sshlab-")))
    lab: NetLab | None = None
    by_name: dict[str, SshHost] = field(default_factory=dict)
    #: the NetLab (subnet, namespace names) this lab uses (tests/support/netlab.py LABS)
    lab_name: str = "ssh"
    #: create the test users and their sudoers file (shared by every lab that makes them: a lab
    #: whose tests log in as root only leaves them alone)
    users: bool = True

    @property
    def client_key(self) -> str:
        return str(self.root / "client_ed25519")

    @property
    def known_hosts(self) -> str:
        return str(self.root / "known_hosts")

    def up(self) -> "SshLab":
        cleanup_stale(self.lab_name)
        os.chmod(self.root, 0o755)
        # NetLab lets its bridge forward even while dockerd's FORWARD policy is DROP
        self.lab = NetLab(self.lab_name, self.hosts).up()
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.client_key)
        if self.users:
            self._users()
        auth = self.root / "authorized_keys"
        auth.write_text(Path(self.client_key + ".pub").read_text())
        os.chmod(auth, 0o644)
        kh = []
        for h in self.hosts:
            d = self.root / h
            d.mkdir()
            os.chmod(d, 0o755)
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "ssh_host_ed25519_key"))
            host = SshHost(h, self.lab.ns(h), self.lab.ips[h], d)
            host.config.write_text(
                f"ListenAddress {host.ip}:{host.port}\n"
                f"HostKey {d}/ssh_host_ed25519_key\n"
                f"PidFile {d}/sshd.pid\n"
                f"AuthorizedKeysFile {auth}\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
                "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nUseDNS no\n"
                "ClientAliveInterval 2\nClientAliveCountMax 2\n"
                "Subsystem sftp internal-sftp\n")
            self.by_name[h] = host
            kh.append(f"{host.known_hosts_name} {host.host_pub}")
            self.start(h)
        Path(self.known_hosts).write_text("\n".join(kh) + "\n")
        return self

    def _users(self) -> None:
        self._remove_users()
        for u in (USER, PW_USER, NOSUDO_USER):
            home = self.root / "home" / u
            sh("useradd", "-M", "-d", str(home), "-s", "/bin/sh", u)
            home.mkdir(parents=True)
            shutil.chown(home, u, u)
        # sshd (UsePAM no) refuses a locked account ("!" in shadow) even for key auth
        sh("usermod", "-p", "*", USER)
        sh("usermod", "-p", "*", NOSUDO_USER)
        sh("chpasswd", input=f"{PW_USER}:{PW_USER_PASSWORD}\n")
        SUDOERS.write_text(f"{USER} ALL=(ALL) NOPASSWD: ALL\n{PW_USER} ALL=(ALL) ALL\n")
        os.chmod(SUDOERS, 0o440)

    def _remove_users(self) -> None:
        for u in (USER, PW_USER, NOSUDO_USER):
            sh("pkill", "-KILL", "-u", u, check=False)
            sh("userdel", u, check=False)
        SUDOERS.unlink(missing_ok=True)

    def start(self, name: str) -> None:
        """Start sshd in the host's namespace and wait until it accepts connections."""
        h = self.by_name[name]
        h.proc = start_sshd(h.ns, h.ip, h.port, h.config, h.dir / "sshd.log")

    def crash(self, name: str) -> None:
        """A hard reboot: everything running in the host's namespace dies at once."""
        h = self.by_name[name]
        for pid in sh("ip", "netns", "pids", h.ns, check=False).stdout.split():
            sh("kill", "-9", pid, check=False)
        if h.proc is not None:
            try:
                os.killpg(h.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            h.proc.wait(timeout=10)
            h.proc = None

    def down(self) -> None:
        for name in list(self.by_name):
            try:
                self.crash(name)
            except Exception:
                pass
        try:
            if self.lab is not None:
                self.lab.down()
        finally:
            if self.users:
                self._remove_users()
        shutil.rmtree(self.root, ignore_errors=True)

    def only_via(self, jump: str) -> None:
        """Every host but ``jump`` refuses ssh (port 22) from anywhere but the jump host - this
        machine included (a TCP reset, at once) - in its own namespace's iptables, which go with
        the namespace. Kafka's ports stay open to the workload's clients."""
        jip = self.by_name[jump].ip
        for name, h in self.by_name.items():
            if name != jump:
                sh("ip", "netns", "exec", h.ns, "iptables", "-A", "INPUT", "-p", "tcp", "--dport", str(h.port),
                   "!", "-s", jip, "-j", "REJECT", "--reject-with", "tcp-reset")


def kraftsim_inventory(lab: SshLab, path: Path, settings: dict[str, object] | None = None, *,
                       ssh_config: Path | None = None) -> Path:
    """An ssh inventory of the lab's hosts running kraftsim (a ``controller`` host and
    ``broker-N`` hosts), with each host's server.properties written under the lab dir.

    The hosts log in as root with the lab's client key; kraftsim runs with this machine's
    Python (the namespaces share our filesystem), started by the inventory's
    ``kafka_service.command`` exactly as on a lab host. Hosts other than ``controller`` and
    ``broker-N`` (a jump host) are not Kafka's. ``ssh_config``: the OpenSSH client config the
    transport reads (never this machine's ~/.ssh/config: ``none`` without one)."""
    import sys

    import yaml

    settings = {"kip903.enabled": "true", "eligible.leader.replicas.version": 1,
                "unclean.leader.election.enable": "false", "min.insync.replicas": 2,
                "default.replication.factor": 3, **(settings or {})}
    ctl = lab.by_name["controller"]
    groups: dict[str, dict] = {"controllers": {"hosts": {}}, "brokers": {"hosts": {}}}
    for name, h in lab.by_name.items():
        if name != "controller" and not name.startswith("broker-"):
            continue
        role = "controller" if name == "controller" else "broker"
        d = h.dir / "kraftsim"
        d.mkdir(exist_ok=True)
        listeners = f"CONTROLLER://{h.ip}:9093" if role == "controller" else f"PLAINTEXT://{h.ip}:9092"
        node_id = 1000 if role == "controller" else int(name.rsplit("-", 1)[1])
        props = {"node.id": node_id, "process.roles": role, "listeners": listeners,
                 "event.log": d / "events.jsonl", "cluster.id": "faultline-ssh-lab-00000"}
        if role == "controller":
            props["metadata.log.dir"] = d / "metadata"
        else:
            props["controller.quorum.bootstrap.servers"] = f"{ctl.ip}:9093"
            props["log.dirs"] = d / "data"
        props.update(settings)
        cfg = d / "server.properties"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        groups[role + "s"]["hosts"][name] = {
            "ansible_host": h.ip, "kafka_node_id": node_id, "kafka_listeners": listeners,
            **({"kafka_metadata_log_dir": str(d / "metadata")} if role == "controller" else
               {"kafka_data_dirs": [str(d / "data")]}),
            "kafka_event_log": str(d / "events.jsonl"),
            "kafka_service": {"command": f"{sys.executable} -m kraftsim {role} --config {cfg}",
                              "pidfile": str(d / "kraftsim.pid"), "log": str(d / "kraftsim.log")},
        }
    doc = {"all": {"vars": {"faultline_transport": "ssh", "ansible_user": "root",
                            "ansible_ssh_private_key_file": lab.client_key,
                            "faultline_known_hosts": lab.known_hosts,
                            "faultline_ssh_config": str(ssh_config) if ssh_config else "none",
                            "kafka_cluster_id": "faultline-ssh-lab-00000", "kafka_implementation": "kraftsim"},
                   "children": groups}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def ssh_config(lab: SshLab, path: Path, known_extra: str = "") -> Path:
    """A lab user's ssh config: the jump host by an alias, every lab address through it."""
    j = lab.by_name["jump"]
    subnet = j.ip.rsplit(".", 1)[0]
    path.write_text(textwrap.dedent(f"""\
        Host bastion
          HostName {j.ip}
          User root
          IdentityFile {lab.client_key}
        Host {subnet}.* !{j.ip}
          ProxyJump bastion
        {known_extra}"""))
    return path
