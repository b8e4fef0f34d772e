"""Inventory keys that put controllers in a fault's reach: ``kafka_metadata_log_dir``
(``metadata.log.dir``), ``kafka_config`` (server.properties on the host) and
``kafka_implementation`` (who wrote the logs, which decides how much a page-cache loss cuts).

Each bad value is one line naming the file, the key and what is wanted; the embedded cluster's
generated inventory names every controller's metadata log dir and says ``kraftsim``. Before
these keys, a controller of the embedded cluster had no dir at all (``reboot`` on it failed with
"no log dirs known")."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from groundwork.config import ConfigError
from groundwork.ledger import Ledger
from targets.kraftsim import EmbeddedKraftsim
from harness.inventory import load_inventory
from nemeses.hostinfo import fault_dirs, implementation, wipe_dirs
from tests.harness.clirun import faultline


def inventory(tmp: Path, host_vars: str) -> Path:
    p = tmp / "inv.yaml"
    p.write_text("all:\n  vars: {faultline_transport: local, kafka_bootstrap: '127.0.0.1:1'}\n  children:\n"
                 "    brokers:\n      hosts:\n        b1: {kafka_node_id: 1, kafka_service: {systemd: kafka}}\n"
                 "    controllers:\n      hosts:\n"
                 f"        c1: {{kafka_node_id: 3000, kafka_service: {{systemd: kafka}}, {host_vars}}}\n")
    return p


@pytest.mark.parametrize("var,value,want", [
    ("kafka_metadata_log_dir", "relative/meta", "kafka_metadata_log_dir: an absolute path on the host is wanted"),
    ("kafka_metadata_log_dir", "[/a, /b]", "kafka_metadata_log_dir: expected a non-empty string"),
    ("kafka_config", "server.properties", "kafka_config: an absolute path on the host is wanted"),
    ("kafka_implementation", "confluent", "kafka_implementation: expected one of apache-kafka, kraftsim"),
])
def test_bad_values_are_one_line(tmp_path, var, value, want):
    with pytest.raises(ConfigError) as ei:
        load_inventory(inventory(tmp_path, f"{var}: {value}"))
    msg = str(ei.value)
    assert want in msg and "c1" in msg and "inv.yaml" in msg and "\n" not in msg.strip(), msg


def test_cli_reports_a_bad_metadata_dir_in_one_line_exit_2(tmp_path):
    r = faultline(["inventory", "check", str(inventory(tmp_path, "kafka_metadata_log_dir: meta"))], tmp_path / "state")
    assert r.returncode == 2, r.stderr
    lines = [l for l in (r.stderr + r.stdout).splitlines() if l.strip()]
    assert len(lines) == 1 and "kafka_metadata_log_dir" in lines[0], lines


def test_controller_dirs_come_from_the_metadata_log_dir(tmp_path):
    inv = load_inventory(inventory(tmp_path, "kafka_metadata_log_dir: /var/lib/kafka/meta, kafka_data_dirs: [/d]"))
    from harness.cluster import Cluster
    c = Cluster.from_inventory(inv)
    ctl, b1 = c.nodes["c1"], c.nodes["b1"]
    assert fault_dirs(ctl) == wipe_dirs(ctl) == ["/var/lib/kafka/meta"]
    assert implementation(ctl) == "apache-kafka"
    with pytest.raises(ValueError, match="no log dirs known"):
        fault_dirs(b1)


def test_embedded_inventory_exposes_each_controllers_metadata_log_dir(tmp_path):
    from kraftsim.cluster import layout
    emb = EmbeddedKraftsim(tmp_path, 3, {}, Ledger(tmp_path / "ledger.jsonl"), controllers=3)
    emb.dir.mkdir(parents=True)
    emb.bootstrap = "127.0.0.2:19093"     # what the launcher's bootstrap.servers= line would have said
    for name, cfg in layout(3, emb.dir, "127.0.0", 19092, {}, controllers=3).items():
        (emb.dir / f"{name}.properties").write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
    inv = load_inventory(emb.write_inventory())
    ctls = sorted(inv.controllers, key=lambda h: h.name)
    assert [h.name for h in ctls] == ["controller-1", "controller-2", "controller-3"]
    assert [h.metadata_log_dir for h in ctls] == [str(emb.dir / f"controller-{k}" / "metadata") for k in (1, 2, 3)]
    assert all(h.implementation == "kraftsim" for h in inv.hosts.values())
    from harness.cluster import Cluster
    c = Cluster.from_inventory(inv)
    assert fault_dirs(c.nodes["controller-2"]) == [str(emb.dir / "controller-2" / "metadata")]
    assert fault_dirs(c.nodes["broker-1"]) == [str(emb.dir / "broker-1" / "data")]
    assert sys.executable in inv.hosts["controller-1"].service.command
