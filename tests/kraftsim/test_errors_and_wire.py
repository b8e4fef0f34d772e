"""Bad configuration, a corrupt segment, and the wire-level promises.

- Bad config: one line ``kraftsim: FILE: key 'x': <what is wanted>``, exit code 2, no traceback,
  no hang — for the broker, the controller and the cluster launcher.
- Corrupt segment: a follower's segment is damaged while it is down; on restart it logs a
  ``truncation`` and a ``recovery`` event, re-fetches from the leader and rejoins the ISR.
- Wire: ApiVersions at an unknown version gets Kafka's v0 answer (UNSUPPORTED_VERSION + the
  supported ranges); an unsupported Produce version gets UNSUPPORTED_VERSION in a response and
  the connection stays usable.
"""
from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from tests.kraftsim.clients import TrackingProducer, create_topic, describe_partitions, _recv
from tests.kraftsim.conftest import REPO, _env, free_base_port

GOOD_BROKER = """node.id=1
listeners=PLAINTEXT://127.0.0.2:{port}
controller.quorum.bootstrap.servers=127.0.0.1:{cport}
log.dirs={dir}/data
"""


def _run(args: list[str], timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftsim", *args], capture_output=True, text=True,
                          timeout=timeout, env=_env(), cwd=str(REPO))


def _one_line_error(p: subprocess.CompletedProcess, *needles: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("extra,needles", [
    ("min.insync.replica=2\n", ["key 'min.insync.replica'", "unknown key"]),
    ("min.insync.replicas=two\n", ["key 'min.insync.replicas'", "integer"]),
    ("kip903.enabled=yes\n", ["key 'kip903.enabled'", "true or false"]),
    ("eligible.leader.replicas.version=2\n", ["key 'eligible.leader.replicas.version'", "<= 1"]),
    ("metadata.version=banana\n", ["key 'metadata.version'"]),
    ("listeners=127.0.0.2\n", ["key 'listeners'", "NAME://HOST:PORT"]),
    ("this is not a property\n", ["key=value is wanted"]),
])
def test_bad_broker_config_is_one_line_and_exit_2(tmp_path, extra, needles):
    cfg = tmp_path / "b.properties"
    cfg.write_text(GOOD_BROKER.format(port=40001, cport=40000, dir=tmp_path) + extra)
    line = _one_line_error(_run(["broker", "--config", str(cfg)]), *needles)
    assert line.startswith(f"kraftsim: {cfg}: ")


def test_missing_required_key_and_missing_file(tmp_path):
    cfg = tmp_path / "c.properties"
    cfg.write_text("node.id=1000\nlisteners=CONTROLLER://127.0.0.1:40000\n")
    _one_line_error(_run(["controller", "--config", str(cfg)]), "key 'metadata.log.dir'", "required")
    _one_line_error(_run(["broker", "--config", str(tmp_path / "nope.properties")]), "cannot read")


def test_port_in_use_and_wrong_log_dir_identity(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        s.listen(1)
        port = s.getsockname()[1]
        cfg = tmp_path / "b.properties"
        cfg.write_text(GOOD_BROKER.format(port=port, cport=40000, dir=tmp_path))
        _one_line_error(_run(["broker", "--config", str(cfg)]), "key 'listeners'")
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "meta.properties").write_text("version=1\ncluster.id=other\nnode.id=7\n")
    cfg.write_text(GOOD_BROKER.format(port=free_base_port(1) + 1, cport=40000, dir=tmp_path))
    _one_line_error(_run(["broker", "--config", str(cfg)]), "key 'log.dirs'", "node.id")


def test_cluster_launcher_rejects_bad_set(tmp_path):
    _one_line_error(_run(["cluster", "--dir", str(tmp_path / "c"), "--set", "min.insync.replicas=x"]),
                    "key 'min.insync.replicas'")
    _one_line_error(_run(["cluster", "--dir", str(tmp_path / "c"), "--set", "bogus.key=1"]), "bogus.key")


def test_corrupt_follower_segment_is_truncated_and_refetched(kraftsim_cluster):
    c = kraftsim_cluster(brokers=3)
    create_topic(c.bootstrap, "cs", assignment=[[1, 2, 3]], min_isr=2)
    prod = TrackingProducer(c.bootstrap)
    for i in range(500):
        prod.send("cs", f"c{i:04d}".encode() * 5, partition=0)
    prod.flush(20)
    assert len(prod.acked) == 500
    time.sleep(0.3)
    c.kill("broker-3")
    seg = sorted((c.data_dir(3) / "cs-0").glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    mid = len(data) // 2
    data[mid] ^= 0xFF  # one flipped byte in the middle: CRC32C mismatch in that batch
    seg.write_bytes(bytes(data))
    t0 = time.time()
    c.start_broker(3)
    tr = c.wait_event(lambda e: e["event"] == "truncation" and e["topic"] == "cs", name="broker-3", after=t0)
    rec = c.wait_event(lambda e: e["event"] == "recovery" and e["topic"] == "cs", name="broker-3", after=t0)
    assert tr["to_offset"] < 500 and rec["log_end_offset"] == tr["to_offset"]
    end = time.time() + 20
    while time.time() < end and sorted(describe_partitions(*c.addr(1), "cs")[0].isr_nodes) != [1, 2, 3]:
        time.sleep(0.2)
    assert sorted(describe_partitions(*c.addr(1), "cs")[0].isr_nodes) == [1, 2, 3]
    log = (c.dir / "broker-3" / "process.log").read_text()
    assert "Traceback" not in log


def _raw(sock: socket.socket, api_key: int, version: int, corr: int, body: bytes, flexible: bool) -> bytes:
    client = b"\x00\x04test"
    header = struct.pack(">hhi", api_key, version, corr) + client + (b"\x00" if flexible else b"")
    msg = header + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    size = struct.unpack(">i", _recv(sock, 4))[0]
    return _recv(sock, size)


def test_unsupported_versions_get_an_error_not_a_dropped_connection(kraftsim_cluster):
    c = kraftsim_cluster(brokers=1)
    with socket.create_connection(c.addr(1), timeout=5) as s:
        # ApiVersions v99: a v0 response, header v0, error UNSUPPORTED_VERSION, our ranges
        data = _raw(s, 18, 99, 1, b"", flexible=False)
        assert struct.unpack(">i", data[:4])[0] == 1
        cls = load_response_schema(18, 0)
        resp, _ = entity_reader(cls)(data, 4)
        assert resp.error_code is ErrorCode.unsupported_version
        ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert ranges[0] == (3, 9) and ranges[75] == (0, 0) and 56 not in ranges
        # Metadata v13 (above what we advertise): a v13 response carrying UNSUPPORTED_VERSION
        data = _raw(s, 3, 13, 2, b"\x00\x01\x00\x00", flexible=True)
        assert struct.unpack(">i", data[:4])[0] == 2
        resp13, _ = entity_reader(load_response_schema(3, 13))(data, 5)
        assert resp13.error_code is ErrorCode.unsupported_version
        # the connection still works: a real ApiVersions v3
        data = _raw(s, 18, 3, 3, b"\x02t\x021\x00", flexible=True)
        resp, _ = entity_reader(load_response_schema(18, 3))(data, 4)
        assert resp.error_code is ErrorCode.none and ranges == {k.api_key: (k.min_version, k.max_version)
                                                                for k in resp.api_keys}
