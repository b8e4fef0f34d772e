"""kraftsim in network namespaces: each node its own namespace and IP, started the way the
harness starts it on a lab host (``ip netns exec NS python -m kraftsim broker --config F``), and a
real confluent-kafka client in the root namespace reaching the brokers over the lab bridge
(10.250.4.0/24, the ``kraft`` lab; nothing leaves that subnet)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.kraftsim.clients import TrackingProducer, create_topic, read_all
from tests.kraftsim.conftest import REPO
from tests.support.netlab import NetLab, cleanup_stale


def test_cluster_across_network_namespaces(tmp_path: Path):
    cleanup_stale("kraft")
    lab = NetLab("kraft", ["ctl", "b1", "b2", "b3"]).up()
    procs: list[subprocess.Popen] = []
    try:
        ctl_ip = lab.ips["ctl"]
        nodes = {"ctl": (f"node.id=1000\nlisteners=CONTROLLER://{ctl_ip}:9093\n"
                         f"metadata.log.dir={tmp_path}/ctl/md\nevent.log={tmp_path}/ctl/events.jsonl\n"
                         "broker.session.timeout.ms=1500\n", "controller")}
        for i in (1, 2, 3):
            ip = lab.ips[f"b{i}"]
            nodes[f"b{i}"] = (f"node.id={i}\nlisteners=PLAINTEXT://{ip}:9092\n"
                              f"controller.quorum.bootstrap.servers={ctl_ip}:9093\nlog.dirs={tmp_path}/b{i}/data\n"
                              f"event.log={tmp_path}/b{i}/events.jsonl\nbroker.heartbeat.interval.ms=200\n", "broker")
        env = dict(os.environ, PYTHONPATH=str(REPO))
        for name, (props, role) in nodes.items():
            (tmp_path / name).mkdir()
            cfg = tmp_path / f"{name}.properties"
            cfg.write_text(props)
            out = open(tmp_path / name / "process.log", "wb")
            procs.append(subprocess.Popen(["ip", "netns", "exec", lab.ns(name), sys.executable, "-m", "kraftsim",
                                           role, "--config", str(cfg)], stdout=out, stderr=subprocess.STDOUT,
                                          env=env, start_new_session=True))
            out.close()
        end = time.time() + 30
        unfenced: set[int] = set()
        while len(unfenced) < 3 and time.time() < end:
            ev = tmp_path / "ctl" / "events.jsonl"
            if ev.exists():
                unfenced = {json.loads(ln)["broker"] for ln in ev.read_text().splitlines()
                            if '"broker_unfenced"' in ln}
            time.sleep(0.1)
        assert unfenced == {1, 2, 3}, (tmp_path / "ctl" / "process.log").read_text()[-500:]
        regs = [json.loads(ln) for ln in (tmp_path / "ctl" / "events.jsonl").read_text().splitlines()
                if '"broker_registered"' in ln]
        assert len(regs) == 3
        bootstrap = ",".join(f"{lab.ips[f'b{i}']}:9092" for i in (1, 2, 3))
        create_topic(bootstrap, "ns", partitions=3, rf=3, min_isr=2)
        prod = TrackingProducer(bootstrap)
        for i in range(1000):
            prod.send("ns", f"n{i}".encode())
        prod.flush(20)
        assert len(prod.acked) == 1000
        seen = read_all(bootstrap, "ns", [0, 1, 2])
        assert all(seen.get(v) == a for v, a in prod.acked.items())
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        lab.down()
        for p in procs:
            p.wait(timeout=5)
