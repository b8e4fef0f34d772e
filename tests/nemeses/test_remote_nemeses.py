"""The same nemesis code, through the SSH transport, against a kraftsim broker on an
sshd-in-namespace lab host.

A real OpenSSH sshd runs in the namespace of host ``s1`` (netlab lab "nem"); broker 1 is
started on it over SSH (sudo), the controller and broker 2 run in their own namespaces.
The page-cache-loss cut (script over ``python3 -`` through SSH) and a cut-from-controller
partition (iptables over SSH) act on s1; results are read from the segment files and from
kraftsim's own event logs.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from groundwork.transport.ssh import SshTransport
from nemeses.netfilter import tagged_rules
from nemeses.network_partition import NetworkPartition
from nemeses.reboot import Reboot
from tests.nemeses.kraftsim_cluster import wait_for
from tests.nemeses.nodes import TestNode, make_ctx
from tests.nemeses.segments import log_end_offset
from tests.support.netlab import LABS, SUBNET_PREFIX, NetLab, cleanup_stale, sh
from tests.support.sshd import start_sshd

REPO = str(Path(__file__).resolve().parents[2])
USER = "fl-nem-ssh"
SUDOERS = Path("/etc/sudoers.d/faultline-nemeses-tests")

pytestmark = pytest.mark.timeout(300)


def events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for l in path.read_text().splitlines():
        try:
            out.append(json.loads(l))
        except ValueError:
            pass
    return out


def remove_user() -> None:
    sh("pkill", "-KILL", "-u", USER, check=False)
    sh("userdel", USER, check=False)
    SUDOERS.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def lab():
    # sshd drops privileges to the test user: its files must be on a world-traversable path
    root = Path(tempfile.mkdtemp(prefix="fl-nem-ssh-"))
    os.chmod(root, 0o755)
    cleanup_stale("nem")
    remove_docker_objects()     # a killed run's network may hold this lab's subnet (NetLab.up refuses)
    remove_user()
    lab = NetLab("nem", ["c", "s1", "s2"]).up()
    sshd = None
    try:
        sh("useradd", "-M", "-d", str(root / "home"), "-s", "/bin/sh", USER)
        sh("usermod", "-p", "*", USER)                       # key auth needs an unlocked account
        SUDOERS.write_text(f"{USER} ALL=(ALL) NOPASSWD: ALL\n")
        os.chmod(SUDOERS, 0o440)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / "client"))
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / "hostkey"))
        (root / "authorized_keys").write_text((root / "client.pub").read_text())
        ip = lab.ips["s1"]
        (root / "sshd_config").write_text(
            f"ListenAddress {ip}:22\nHostKey {root}/hostkey\nPidFile {root}/sshd.pid\n"
            f"AuthorizedKeysFile {root}/authorized_keys\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nStrictModes no\nUsePAM no\nUseDNS no\n")
        (root / "known_hosts").write_text(f"{ip} {(root / 'hostkey.pub').read_text().strip()}\n")
        sshd = start_sshd(lab.ns("s1"), ip, 22, root / "sshd_config", root / "sshd.log")
        yield lab, root
    finally:
        if sshd is not None:
            os.killpg(sshd.pid, 9)
        lab.down()
        remove_user()
        shutil.rmtree(root, ignore_errors=True)


def write_props(path: Path, d: dict) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in d.items()))


def test_page_cache_loss_and_controller_cut_over_ssh(lab):
    netlab, root = lab
    ips = netlab.ips
    ctl_addr = f"{ips['c']}:9093"
    d = root / "cluster"
    d.mkdir()
    os.chmod(d, 0o777)
    common = {"log.flush.interval.messages": 40, "min.insync.replicas": 1}
    write_props(d / "controller.properties", {"node.id": 1000, "process.roles": "controller",
                "listeners": f"CONTROLLER://{ctl_addr}", "metadata.log.dir": d / "controller" / "metadata",
                "event.log": d / "controller" / "events.jsonl", **common})
    for i, h in ((1, "s1"), (2, "s2")):
        write_props(d / f"broker-{i}.properties", {"node.id": i, "process.roles": "broker",
                    "listeners": f"PLAINTEXT://{ips[h]}:9092", "controller.quorum.bootstrap.servers": ctl_addr,
                    "log.dirs": d / f"broker-{i}" / "data", "event.log": d / f"broker-{i}" / "events.jsonl",
                    "pid.file": d / f"broker-{i}.pid", **common})
    py = [sys.executable, "-m", "kraftsim"]
    env = {"PYTHONPATH": REPO}
    ssh = SshTransport("s1", ips["s1"], 22, USER, str(root / "client"), known_hosts=str(root / "known_hosts"),
                       sudo=True)
    ctl = TestNode("controller", "controller", 1000, ips["c"], netns=netlab.ns("c"),
                   command=[*py, "controller", "--config", str(d / "controller.properties")],
                   log_path=str(d / "controller.log"), env=env)
    b1 = TestNode("broker-1", "broker", 1, ips["s1"], transport=ssh, sudo=True, env=env,
                  command=[*py, "broker", "--config", str(d / "broker-1.properties")],
                  log_path=str(d / "broker-1.log"), pid_file=str(d / "broker-1.pid"))
    b1.log_dirs = [str(d / "broker-1" / "data")]
    b2 = TestNode("broker-2", "broker", 2, ips["s2"], netns=netlab.ns("s2"), env=env,
                  command=[*py, "broker", "--config", str(d / "broker-2.properties")],
                  log_path=str(d / "broker-2.log"))
    try:
        for n in (ctl, b1, b2):
            n.start_service()
        cev = d / "controller" / "events.jsonl"
        wait_for(lambda: {e.get("broker") for e in events(cev) if e.get("event") == "broker_unfenced"} >= {1, 2},
                 45, "both brokers unfenced")
        assert ssh.run(["cat", f"/proc/{b1.service_pids()[0]}/cmdline"]).stdout.count("kraftsim") == 1
        bootstrap = f"{ips['s1']}:9092,{ips['s2']}:9092"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("r", 1, 2)])["r"].result(30)
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        acked = []
        wait_for(lambda: any(e.get("event") == "leader_elected" and e.get("topic") == "r" for e in events(cev)),
                 20, "topic r has a leader")
        for i in range(230):
            p.produce("r", f"v{i}".encode(), partition=0, on_delivery=lambda e, m: acked.append(e is None))
            if i % 20 == 19:
                p.flush(20)
        p.flush(30)
        assert sum(acked) == 230

        ctx = make_ctx(root / "ctx", [ctl, b1, b2])
        # -- page-cache loss through SSH -------------------------------------------------
        nem = Reboot()
        nem.setup(ctx)
        old = b1.service_pids()
        rec = nem.start(["broker-1"], mode="truncate-unflushed", restart=False)
        assert not any(b1.transport.pid_alive(x) for x in old)
        part = rec.undo["detail"]["broker-1"]["partitions"]["r-0"]
        assert log_end_offset(d / "broker-1" / "data" / "r-0") == part["expected_log_end_offset"] == part["recovery_point"]
        t0 = time.time()
        nem.stop(rec)                                              # restarted over SSH
        rev = wait_for(lambda: [e for e in events(d / "broker-1" / "events.jsonl")
                                if e.get("event") == "recovery" and e.get("topic") == "r" and e["wall"] >= t0 - 1],
                       30, "kraftsim recovery on broker-1")
        assert rev[0]["log_end_offset"] == part["expected_log_end_offset"]
        wait_for(lambda: [e for e in events(cev) if e.get("event") == "broker_unfenced" and e.get("broker") == 1
                          and e["wall"] >= t0], 30, "broker-1 back")
        # -- cut broker-1 from the controller: rules over SSH on s1 ------------------------
        part_nem = NetworkPartition()
        part_nem.setup(ctx)
        t1 = time.time()
        prec = part_nem.start(["broker-1"], shape="controller")
        assert tagged_rules(ssh, prec.id), "no rule on the SSH host"
        wait_for(lambda: [e for e in events(cev) if e.get("event") == "broker_fenced" and e.get("broker") == 1
                          and e["wall"] >= t1], 30, "controller fences the cut broker (seed 002)")
        t2 = time.time()
        part_nem.stop(prec)
        assert tagged_rules(ssh) == []
        wait_for(lambda: [e for e in events(cev) if e.get("event") == "broker_unfenced" and e.get("broker") == 1
                          and e["wall"] >= t2], 30, "broker-1 unfenced after heal")
    finally:
        for n in (b1, b2, ctl):
            try:
                n.stop_service(9)
            except Exception:
                pass
        ssh.close()


# ---- controllers: the KRaft metadata log (metadata.log.dir) in reach over SSH and in Docker

def consume_all(bootstrap: str, topic: str, want: int, timeout: float = 60) -> list[bytes]:
    """Every value of partition 0 from the beginning, until ``want`` of them (or the timeout)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fl-check-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < want and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


def produce_acked(bootstrap: str, topic: str, prefix: str, n: int) -> list[bytes]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    acked: list[bytes] = []
    for i in range(n):
        p.produce(topic, f"{prefix}{i}".encode(), partition=0,
                  on_delivery=lambda e, m: acked.append(m.value()) if e is None else None)
        if i % 20 == 19:
            p.flush(20)
    p.flush(30)
    return acked


def controller_reboot_checks(nem: Reboot, ctl, ctl_events, admin_bootstrap: str, topic: str,
                             seg_dir) -> None:
    """Reboot the controller with page-cache loss (left down), check the cut against its
    metadata log on disk, heal, and check it recovered to exactly that and serves again."""
    rec = nem.start([ctl.name], mode="truncate-unflushed", restart=False)
    d = rec.undo["detail"][ctl.name]
    part = d["partitions"]["__cluster_metadata-0"]
    assert d["page_cache_cut"]["flush_model"] == "checkpoint" and d["page_cache_cut"]["uncertain"] == []
    assert part["log_end_offset_before"] > 0 and part["expected_log_end_offset"] == part["durable_offset"]
    assert log_end_offset(seg_dir()) == part["expected_log_end_offset"]
    t0 = time.time()
    nem.stop(rec)                                                 # heal: started again through the transport
    rev = wait_for(lambda: [e for e in events(ctl_events()) if e.get("event") == "recovery"
                            and e.get("topic") == "__cluster_metadata" and e["wall"] >= t0 - 1],
                   60, "the controller recovers its metadata log")
    assert rev[0]["log_end_offset"] == part["expected_log_end_offset"]
    wait_for(lambda: [e for e in events(ctl_events()) if e.get("event") == "controller_elected" and e["wall"] >= t0],
             60, "the controller leads its quorum again")
    # it serves: a new topic is created (a controller decision), and writes go on
    admin = AdminClient({"bootstrap.servers": admin_bootstrap})   # kept alive until the result is in
    admin.create_topics([NewTopic(f"{topic}-after", 1, 1)])[f"{topic}-after"].result(60)


def test_page_cache_loss_of_a_controller_over_ssh(lab):
    """The controller runs on the SSH host; its metadata log dir comes from the inventory's
    ``kafka_metadata_log_dir`` (a ClusterNode, as a run builds it)."""
    import yaml
    from harness.cluster import ClusterNode
    from harness.inventory import load_inventory
    netlab, root = lab
    ips = netlab.ips
    ctl_addr = f"{ips['s1']}:9093"
    d = root / "cluster-ctl"
    d.mkdir()
    os.chmod(d, 0o777)
    md = d / "controller" / "metadata"
    write_props(d / "controller.properties", {"node.id": 1000, "process.roles": "controller",
                "listeners": f"CONTROLLER://{ctl_addr}", "metadata.log.dir": md,
                "event.log": d / "controller" / "events.jsonl", "min.insync.replicas": 1})
    inv = d / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"all": {"vars": {
        "faultline_transport": "ssh", "ansible_user": USER, "ansible_ssh_private_key_file": str(root / "client"),
        "faultline_known_hosts": str(root / "known_hosts"), "faultline_ssh_config": "none", "faultline_sudo": True,
        "kafka_bootstrap": f"{ips['c']}:9092", "kafka_implementation": "kraftsim"},
        "children": {"controllers": {"hosts": {"controller": {
            "ansible_host": ips["s1"], "kafka_node_id": 1000, "kafka_listeners": f"CONTROLLER://{ctl_addr}",
            "kafka_metadata_log_dir": str(md),
            "kafka_service": {"command": f"env PYTHONPATH={REPO} {sys.executable} -m kraftsim controller "
                                         f"--config {d / 'controller.properties'}",
                              "pidfile": str(d / "controller.pid"), "log": str(d / "controller.log")}}}},
            "brokers": {"hosts": {"broker-1": {"ansible_host": ips["c"], "kafka_node_id": 1,
                                               "kafka_service": {"systemd": "unused"}}}}}}}))
    spec = load_inventory(inv).hosts["controller"]
    assert spec.metadata_log_dir == str(md) and spec.data_dirs == []
    ssh = SshTransport("controller", ips["s1"], 22, USER, str(root / "client"), known_hosts=str(root / "known_hosts"),
                       sudo=True)
    ctl = ClusterNode(spec, ssh)
    py = [sys.executable, "-m", "kraftsim"]
    env = {"PYTHONPATH": REPO}
    brokers = []
    for i, h in ((1, "c"), (2, "s2")):
        write_props(d / f"broker-{i}.properties", {"node.id": i, "process.roles": "broker",
                    "listeners": f"PLAINTEXT://{ips[h]}:9092", "controller.quorum.bootstrap.servers": ctl_addr,
                    "log.dirs": d / f"broker-{i}" / "data", "event.log": d / f"broker-{i}" / "events.jsonl",
                    "min.insync.replicas": 1})
        brokers.append(TestNode(f"broker-{i}", "broker", i, ips[h], netns=netlab.ns(h), env=env,
                                command=[*py, "broker", "--config", str(d / f"broker-{i}.properties")],
                                log_path=str(d / f"broker-{i}.log")))
    cev = d / "controller" / "events.jsonl"
    try:
        ctl.start_service()
        for b in brokers:
            b.start_service()
        wait_for(lambda: {e.get("broker") for e in events(cev) if e.get("event") == "broker_unfenced"} >= {1, 2},
                 45, "both brokers unfenced")
        bootstrap = f"{ips['c']}:9092,{ips['s2']}:9092"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("cr", 1, 2)])["cr"].result(30)
        wait_for(lambda: any(e.get("event") == "leader_elected" and e.get("topic") == "cr" for e in events(cev)),
                 20, "topic cr has a leader")
        acked = produce_acked(bootstrap, "cr", "a", 100)
        assert len(acked) == 100
        nem = Reboot()
        nem.setup(make_ctx(root / "ctx-ctl", [ctl, *brokers]))
        controller_reboot_checks(nem, ctl, lambda: cev, bootstrap, "cr", lambda: md / "__cluster_metadata-0")
        acked += produce_acked(bootstrap, "cr", "b", 100)
        assert len(acked) == 200
        got = consume_all(bootstrap, "cr", 200)
        assert sorted(got) == sorted(acked), "an acknowledged write is missing after the controller's reboot"
    finally:
        for n in (*brokers, ctl):
            try:
                n.stop_service(9)
            except Exception:
                pass
        ssh.close()


# ---- Docker: kraftsim brokers in real containers (harness.docker.cluster, the documented way)

DOCKER_LABEL = {"faultline.nemtest": "1"}


def nemdock(last: int) -> str:
    """An address on the Docker lab's own subnet (never the SSH lab's: the host would route one
    of them to the other's bridge)."""
    return f"{SUBNET_PREFIX}.{LABS['nemdock']}.{last}"


def docker_inventory(tmp: Path) -> Path:
    """inventory/docker.yaml with this suite's names, network and subnet (lab "nemdock"), so
    neither a developer's cluster, the remote-target tests' containers nor the SSH lab is touched."""
    import yaml
    doc = yaml.safe_load((Path(REPO) / "inventory" / "docker.yaml").read_text())
    v = doc["all"]["vars"]
    v["docker_network"], v["docker_subnet"] = "fl-nem", nemdock(0) + "/24"
    v["docker_kraftsim_settings"] = {**v["docker_kraftsim_settings"], "min.insync.replicas": 1,
                                     "default.replication.factor": 2, "log.flush.interval.messages": 40}
    ctl = doc["all"]["children"]["controllers"]["hosts"]["controller"]
    ctl["faultline_container"], ctl["kafka_listeners"] = "fl-nem-controller", f"CONTROLLER://{nemdock(10)}:9093"
    doc["all"]["children"]["brokers"]["hosts"] = {
        f"broker-{i}": {"faultline_container": f"fl-nem-broker-{i}", "kafka_node_id": i,
                        "kafka_listeners": f"PLAINTEXT://{nemdock(10 + i)}:9092"} for i in (1, 2)}
    path = tmp / "docker-nem.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def remove_docker_objects() -> None:
    """Every container, volume and network this module labelled, left by a killed run too; a
    no-op when no Docker engine answers."""
    import docker
    try:
        c = docker.from_env()
        c.ping()
    except docker.errors.DockerException:
        return
    for ct in c.containers.list(all=True, filters={"label": "faultline.nemtest=1"}):
        ct.remove(force=True, v=True)
    for vol in c.volumes.list(filters={"label": "faultline.nemtest=1"}):
        vol.remove(force=True)
    for n in c.networks.list(filters={"label": "faultline.nemtest=1"}):
        n.remove()


@pytest.fixture(scope="module")
def docker_lab(tmp_path_factory):
    from harness.docker import cluster as docker_cluster
    from harness.cluster import ClusterNode
    from harness.inventory import load_inventory
    from tests.remote import dockerlab
    dockerlab.ensure_dockerd()
    remove_docker_objects()
    dockerlab.build_image()
    inv = load_inventory(docker_inventory(tmp_path_factory.mktemp("dockernem")))
    try:
        transports = docker_cluster.up(inv, extra_labels=DOCKER_LABEL)
        nodes = {n: ClusterNode(s, transports[n]) for n, s in inv.hosts.items()}
        yield inv, nodes
    finally:
        docker_cluster.down(inv)
        remove_docker_objects()


def test_page_cache_loss_and_controller_cut_in_docker(docker_lab, tmp_path):
    import docker
    inv, nodes = docker_lab
    client = docker.from_env()

    def vol(host: str, rel: str) -> Path:
        v = client.volumes.get(f"{inv.hosts[host].container}-data")
        return Path(v.attrs["Mountpoint"]) / rel

    cev = vol("controller", "events.jsonl")
    wait_for(lambda: {e.get("broker") for e in events(cev) if e.get("event") == "broker_unfenced"} >= {1, 2},
             60, "both containerised brokers unfenced")
    bootstrap = inv.bootstrap or f"{nemdock(11)}:9092,{nemdock(12)}:9092"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("r", 1, 2)])["r"].result(30)
    wait_for(lambda: any(e.get("event") == "leader_elected" and e.get("topic") == "r" for e in events(cev)),
             20, "topic r has a leader")
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    acked = []
    for i in range(230):
        p.produce("r", f"v{i}".encode(), partition=0, on_delivery=lambda e, m: acked.append(e is None))
        if i % 20 == 19:
            p.flush(20)
    p.flush(30)
    assert sum(acked) == 230
    ctx = make_ctx(tmp_path, list(nodes.values()))
    b1 = nodes["broker-1"]
    # -- page-cache loss: the script runs inside the container (python3 -, stdin staged) ----
    nem = Reboot()
    nem.setup(ctx)
    rec = nem.start(["broker-1"], mode="truncate-unflushed", restart=False)
    part = rec.undo["detail"]["broker-1"]["partitions"]["r-0"]
    assert log_end_offset(vol("broker-1", "data/r-0")) == part["expected_log_end_offset"] == part["recovery_point"]
    assert part["log_end_offset_before"] == 230
    t0 = time.time()
    nem.stop(rec)
    rev = wait_for(lambda: [e for e in events(vol("broker-1", "events.jsonl"))
                            if e.get("event") == "recovery" and e.get("topic") == "r" and e["wall"] >= t0 - 1],
                   30, "kraftsim recovery in the container")
    assert rev[0]["log_end_offset"] == part["expected_log_end_offset"]
    wait_for(lambda: [e for e in events(cev) if e.get("event") == "broker_unfenced" and e.get("broker") == 1
                      and e["wall"] >= t0], 30, "broker-1 back")
    # -- cut from the controller: rules in the container's namespace, from the Docker host --
    pn = NetworkPartition()
    pn.setup(ctx)
    t1 = time.time()
    prec = pn.start(["broker-1"], shape="controller")
    assert tagged_rules(b1.transport, prec.id)
    assert f"faultline:{prec.id}" not in subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    wait_for(lambda: [e for e in events(cev) if e.get("event") == "broker_fenced" and e.get("broker") == 1
                      and e["wall"] >= t1], 30, "controller fences the cut container")
    t2 = time.time()
    pn.stop(prec)
    assert tagged_rules(b1.transport) == []
    wait_for(lambda: [e for e in events(cev) if e.get("event") == "broker_unfenced" and e.get("broker") == 1
                      and e["wall"] >= t2], 30, "broker-1 unfenced after heal")


def test_sysrq_in_a_container_power_cycles_the_whole_container(docker_lab, tmp_path):
    """A container shares the harness's kernel, so ``mode: sysrq`` is emulated - and a host
    crash kills every process of the host at once, not only the broker: the engine kills the
    container (a bystander process dies too), starts it again with its volume, the unflushed
    tail is cut, and the broker comes back after an unclean shutdown with a new broker epoch."""
    import docker
    inv, nodes = docker_lab
    client = docker.from_env()
    name = inv.hosts["broker-2"].container
    cev = Path(client.volumes.get(f"{name.replace('broker-2', 'controller')}-data").attrs["Mountpoint"]) / "events.jsonl"
    wait_for(lambda: [e for e in events(cev) if e.get("event") == "broker_unfenced" and e.get("broker") == 2],
             60, "broker-2 unfenced")
    t = nodes["broker-2"].transport
    bystander = t.spawn(["sleep", "1000"], log_path="/tmp/bystander.log")
    assert t.pid_alive(bystander)
    started_before = client.containers.get(name).attrs["State"]["StartedAt"]
    broker_pids = nodes["broker-2"].service_pids()
    assert broker_pids
    nem = Reboot()
    nem.setup(make_ctx(tmp_path, list(nodes.values())))
    t0 = time.time()
    rec = nem.start(["broker-2"], mode="sysrq")
    try:
        d = rec.undo["detail"]["broker-2"]
        assert d["mode"] == "sysrq" and d["emulated"] is True and "shares" in d["why"]
        assert len(d["killed"]) >= len(broker_pids) + 2          # init, the broker, the bystander
        assert client.containers.get(name).attrs["State"]["StartedAt"] != started_before
        ps = t.run(["pgrep", "-a", "-x", "sleep"]).stdout
        assert "sleep infinity" in ps and "sleep 1000" not in ps, ps   # a new init; the bystander died
        assert "partitions" in d                                  # the unflushed cut ran after the boot
        reg = wait_for(lambda: [e for e in events(cev) if e.get("event") == "broker_registered"
                                and e.get("broker") == 2 and e["wall"] >= t0], 60, "broker-2 registers again")
        assert reg[0]["clean_shutdown"] is False
        wait_for(lambda: [e for e in events(cev) if e.get("event") == "broker_unfenced" and e.get("broker") == 2
                          and e["wall"] >= t0], 60, "broker-2 unfenced after the reboot")
    finally:
        nem.stop(rec)
    assert nodes["broker-2"].service_pids()


def test_page_cache_loss_of_the_controller_in_docker(docker_lab, tmp_path):
    """The controller container's metadata log dir comes from inventory/docker.yaml's
    ``kafka_metadata_log_dir``; the cut runs inside the container."""
    import docker
    inv, nodes = docker_lab
    client = docker.from_env()
    ctl = nodes["controller"]
    assert inv.hosts["controller"].metadata_log_dir == "/var/lib/kraftsim/metadata"

    def vol(host: str, rel: str) -> Path:
        v = client.volumes.get(f"{inv.hosts[host].container}-data")
        return Path(v.attrs["Mountpoint"]) / rel

    cev = vol("controller", "events.jsonl")
    wait_for(lambda: {e.get("broker") for e in events(cev) if e.get("event") == "broker_unfenced"} >= {1, 2},
             60, "both containerised brokers unfenced")
    bootstrap = inv.bootstrap or f"{nemdock(11)}:9092,{nemdock(12)}:9092"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("cd", 1, 2)])["cd"].result(30)
    wait_for(lambda: any(e.get("event") == "leader_elected" and e.get("topic") == "cd" for e in events(cev)),
             20, "topic cd has a leader")
    acked = produce_acked(bootstrap, "cd", "a", 100)
    assert len(acked) == 100
    nem = Reboot()
    nem.setup(make_ctx(tmp_path, list(nodes.values())))
    controller_reboot_checks(nem, ctl, lambda: cev, bootstrap, "cd",
                             lambda: vol("controller", "metadata/__cluster_metadata-0"))
    acked += produce_acked(bootstrap, "cd", "b", 100)
    assert len(acked) == 200
    assert sorted(consume_all(bootstrap, "cd", 200)) == sorted(acked)
