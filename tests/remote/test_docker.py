"""Docker transport against the real engine.

kraftsim brokers run in containers built by ``faultline docker build-image`` and created by
``faultline docker up``'s code from an inventory; every fault is checked from outside the
container: the engine's own view (inspect), a Kafka client on this machine (confluent-kafka
metadata), TCP from this machine, and the data volume read from the Docker host's disk.
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import docker
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from harness.docker import cluster as docker_cluster
from harness.cluster import ClusterNode
from groundwork.transport.base import CommandFailed, TransportError
from groundwork.transport.docker import DockerTransport
from tests.remote import dockerlab

pytestmark = pytest.mark.timeout(240)


class Lab:
    def __init__(self, inv, transports: dict[str, DockerTransport]):
        self.inv, self.t = inv, transports
        self.nodes = {n: ClusterNode(s, transports[n]) for n, s in inv.hosts.items()}
        self.client = docker.from_env()

    def ip(self, host: str) -> str:
        return self.inv.hosts[host].address

    def brokers_seen(self, bootstrap: str | None = None, timeout: float = 2.0) -> set[int]:
        """Broker ids in the cluster metadata, asked from this machine by a real Kafka client."""
        a = AdminClient({"bootstrap.servers": bootstrap or self.inv.bootstrap, "socket.timeout.ms": 2000})
        return set(a.list_topics(timeout=timeout).brokers)

    def wait_brokers(self, want: set[int], timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                last = self.brokers_seen()
                if last == want:
                    return
            except KafkaException as e:
                last = e
            time.sleep(0.5)
        raise AssertionError(f"cluster metadata never showed brokers {want}; last: {last}")

    def volume_path(self, host: str, rel: str) -> Path:
        """A file on the host's data volume, as the Docker host's filesystem holds it."""
        vol = self.client.volumes.get(f"{self.inv.hosts[host].container}-data")
        return Path(vol.attrs["Mountpoint"]) / rel

    def events(self, host: str) -> list[dict]:
        p = self.volume_path(host, "events.jsonl")
        return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()] if p.exists() else []


def tcp_answers(ip: str, port: int, timeout: float = 1.0) -> bool:
    try:
        socket.create_connection((ip, port), timeout=timeout).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    dockerlab.ensure_dockerd()
    dockerlab.remove_test_objects()
    image = dockerlab.build_image()
    assert image == "faultline/kraftsim:latest"
    inv = dockerlab.load(dockerlab.test_inventory(tmp_path_factory.mktemp("dockerinv"), brokers=2))
    try:
        lab = Lab(inv, docker_cluster.up(inv, extra_labels=dockerlab.TEST_LABEL))  # starts kraftsim too
        lab.wait_brokers({1, 2})
        yield lab
    finally:
        docker_cluster.down(inv)
        dockerlab.remove_test_objects()


def test_image_is_the_locally_built_kraftsim_image(lab: Lab):
    img = lab.client.images.get("faultline/kraftsim:latest")
    assert img.labels.get("org.faultline.image") == "kraftsim" and img.labels.get("org.faultline.src-hash")
    base = lab.client.images.get("faultline/base:bookworm")
    assert base.attrs["Config"]["Labels"].get("org.faultline.base", "").startswith("debootstrap-minbase")
    r = lab.t["broker-1"].run(["python", "-c", "import kio, crc32c, kraftsim, sys; print(sys.version_info[:2])"])
    assert r.ok and r.stdout.strip() == "(3, 11)", r.stderr
    # the broker really runs in the container (engine's process list, seen from outside)
    top = lab.client.containers.get("fl-test-broker-1").top()
    assert any("kraftsim broker" in " ".join(p) for p in top["Processes"])


def test_exec_quoting_files_and_process_signals(lab: Lab, tmp_path: Path):
    t = lab.t["broker-2"]
    nasty = ["a b", "$HOSTNAME", "'q'", ";touch /tmp/pwned", "*"]
    assert t.run(["printf", "%s\\n", *nasty], check=True).stdout.splitlines() == nasty
    assert t.run("ls /tmp/pwned").exit_code != 0
    assert t.run(["sh", "-c", "echo e >&2; exit 5"]).exit_code == 5
    with pytest.raises(CommandFailed):
        t.run("exit 3", check=True)
    assert t.run(["cat"], input="x\ny\n").stdout == "x\ny\n"
    # stdout and stderr apart and whole, over many of the exec stream's frames, a hundred times
    # (docker-py's demuxing reader once lost a response's first bytes and read payload as a frame
    # header: "ValueError: 107 is not a valid stream")
    big = "for i in $(seq 1 3000); do echo out-$i; echo err-$i >&2; done"
    want_out = "".join(f"out-{i}\n" for i in range(1, 3001))
    want_err = "".join(f"err-{i}\n" for i in range(1, 3001))
    for _ in range(100):
        r = t.run(["sh", "-c", "printf 'kafka'; echo ' ok'; echo e >&2"])
        assert (r.exit_code, r.stdout, r.stderr) == (0, "kafka ok\n", "e\n")
    r = t.run(["sh", "-c", big])
    assert r.stdout == want_out and r.stderr == want_err
    src = tmp_path / "blob"
    src.write_bytes(os.urandom(300_000))
    t.put(str(src), "/opt/fl-copy/blob")
    t.get("/opt/fl-copy/blob", str(tmp_path / "back"))
    assert (tmp_path / "back").read_bytes() == src.read_bytes()
    with pytest.raises(TransportError, match="no such file"):
        t.get("/nonexistent/file", str(tmp_path / "nothing"))
    pid = t.spawn(["sleep", "600"], log_path="/tmp/fl-sleep.log")
    top = lambda: {int(p[1]) for p in lab.client.containers.get("fl-test-broker-2").top(ps_args="-eo pid,pid,comm")["Processes"]
                   if p[2] == "sleep" and p[1] != "PID"}  # noqa: E731
    assert t.pid_alive(pid) and len(top()) >= 1
    assert t.signal(pid, 9) is True
    deadline = time.monotonic() + 5
    while t.pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not t.pid_alive(pid) and t.signal(pid, 9) is False


def test_file_copied_into_the_data_volume_is_on_the_volume(lab: Lab, tmp_path: Path):
    t = lab.t["broker-1"]
    data = b"copied by the docker transport\n" + os.urandom(1000)
    (tmp_path / "f").write_bytes(data)
    t.put(str(tmp_path / "f"), "/var/lib/kraftsim/fl-copied/f.bin")
    # outside the container: the Docker host's copy of the named volume
    assert lab.volume_path("broker-1", "fl-copied/f.bin").read_bytes() == data
    # and a file kraftsim wrote on its volume comes out of the container (the controller's
    # event log: it registers the brokers)
    lab.t["controller"].get("/var/lib/kraftsim/events.jsonl", str(tmp_path / "events.jsonl"))
    assert any(json.loads(ln)["event"] == "broker_registered" for ln in (tmp_path / "events.jsonl").read_text().splitlines())


def test_pause_freezes_the_broker_and_unpause_thaws_it(lab: Lab):
    t = lab.t["broker-1"]
    only_b1 = f"{lab.ip('broker-1')}:9092"
    assert lab.brokers_seen(only_b1) == {1, 2}
    t.pause()
    try:
        assert lab.client.containers.get("fl-test-broker-1").attrs["State"]["Paused"] is True
        assert t.status() == "paused" and not t.alive()
        with pytest.raises(KafkaException):
            lab.brokers_seen(only_b1, timeout=2.0)
        with pytest.raises(TransportError, match="paused"):
            t.run(["true"])
    finally:
        t.unpause()
    assert lab.client.containers.get("fl-test-broker-1").attrs["State"]["Paused"] is False
    deadline = time.monotonic() + 20
    while True:
        try:
            assert lab.brokers_seen(only_b1) >= {1}
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def test_kill_is_a_power_cut_and_restart_a_reboot(lab: Lab):
    t, node = lab.t["broker-2"], lab.nodes["broker-2"]
    ip = lab.ip("broker-2")
    def registrations() -> list[dict]:
        return [e for e in lab.events("controller") if e["event"] == "broker_registered" and e["broker"] == 2]

    registered_before = registrations()
    assert registered_before and tcp_answers(ip, 9092)
    t.kill("SIGKILL")
    st = lab.client.containers.get("fl-test-broker-2").attrs["State"]
    assert st["Status"] == "exited" and st["ExitCode"] == 137
    assert not tcp_answers(ip, 9092)
    lab.wait_brokers({1})  # the controller fenced it: seen by a client on this machine
    # reboot: the engine starts the container again; the run loop restarts the broker
    t.restart()
    t.reconnect(timeout=30)
    assert node.service_pids() == []  # nothing survives a power cut
    node.start_service()
    lab.wait_brokers({1, 2})
    registered = registrations()
    assert len(registered) == len(registered_before) + 1
    assert registered[-1]["broker_epoch"] > registered_before[-1]["broker_epoch"]
    assert registered[-1]["clean_shutdown"] is False
    # the data volume survived the reboot
    assert (lab.volume_path("broker-2", "data")).is_dir()


def test_network_faults_enter_the_container_namespace_from_the_host(lab: Lab):
    t = lab.t["broker-1"]
    ip = lab.ip("broker-1")
    rule = ["iptables", "-w", "5", "-I", "INPUT", "-p", "tcp", "--dport", "9092",
            "-m", "comment", "--comment", "faultline:test", "-j", "DROP"]
    t.run(rule, net=True, check=True)
    try:
        assert not tcp_answers(ip, 9092, timeout=1.0)
        assert "faultline:test" in t.run(["iptables", "-S", "INPUT"], net=True).stdout
        # the host's own rules are untouched
        assert "faultline:test" not in os.popen("iptables -S INPUT").read()
        # the nemeses' default path (docker exec, NET_ADMIN) sees the same namespace
        assert "faultline:test" in t.run(["iptables", "-S", "INPUT"], sudo=True, check=True).stdout
    finally:
        t.run([*rule[:3], "-D", *rule[4:]], net=True, check=True)
    assert tcp_answers(ip, 9092)
    assert "faultline:test" not in t.run(["iptables", "-S", "INPUT"], sudo=True, check=True).stdout


def test_missing_container_is_one_clear_line(lab: Lab):
    t = DockerTransport("broker-9", "fl-test-no-such-container", docker_client=lab.client)
    with pytest.raises(TransportError) as ei:
        t.run(["true"])
    msg = str(ei.value)
    assert "\n" not in msg and "fl-test-no-such-container" in msg and "not found" in msg
    assert not t.alive() and "not found" in (t.last_error or "")
    by_label = DockerTransport("x", "label:faultline.test=nope", docker_client=lab.client)
    with pytest.raises(TransportError, match="no container matches"):
        by_label.run(["true"])
    # selecting by label finds exactly one container
    sel = DockerTransport("b1", "label:org.faultline.host=broker-1", docker_client=lab.client)
    assert sel.run(["hostname"]).stdout.strip() == "broker-1"


def test_container_selected_by_compose_project_and_service(lab: Lab):
    """Containers made by a compose file carry these labels (docker compose itself is not
    installed here, so the test sets compose's labels on a real container)."""
    ct = lab.client.containers.run("faultline/kraftsim:latest", name="fl-test-compose-svc", detach=True, init=True,
                                   network_mode="none", hostname="svc-1",
                                   labels={**dockerlab.TEST_LABEL, "com.docker.compose.project": "fltestproj",
                                           "com.docker.compose.service": "kafka"})
    try:
        t = DockerTransport("kafka", "compose:fltestproj/kafka", docker_client=lab.client)
        assert t.run(["hostname"], check=True).stdout.strip() == "svc-1"
        with pytest.raises(TransportError, match="no container matches"):
            DockerTransport("z", "compose:fltestproj/zookeeper", docker_client=lab.client).run(["true"])
    finally:
        ct.remove(force=True)
