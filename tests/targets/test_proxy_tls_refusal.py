"""The AlterPartition proxy cannot read a TLS controller listener: a campaign that needs it there is
refused in one line that says why, before any proxy starts (nemeses/alter_partition.py
``refuse_tls_controllers``). The controllers' server.properties are real files read through the
node's transport, as on a lab."""
from __future__ import annotations

import random

import pytest

from groundwork.config import ConfigError
from groundwork.ledger import Ledger
from groundwork.timeline import NullTimeline
from nemeses.alter_partition import refuse_tls_controllers
from nemeses.base import NemesisContext
from tests.nemeses.nodes import TestNode


def ctx_with(tmp_path, props: str) -> NemesisContext:
    cfg = tmp_path / "controller.properties"
    cfg.write_text(props)
    ctl = TestNode("controller", "controller", 1000, "127.0.0.1")
    ctl.config_path = str(cfg)
    broker = TestNode("broker-1", "broker", 1, "127.0.0.2")
    return NemesisContext(nodes={"controller": ctl, "broker-1": broker}, timeline=NullTimeline(),
                          ledger=Ledger(tmp_path / "ledger.jsonl"), rng=random.Random(0), inventory_path="")


@pytest.mark.parametrize("proto", ["SSL", "SASL_SSL"])
def test_a_tls_controller_listener_is_refused_in_one_line(tmp_path, proto):
    ctx = ctx_with(tmp_path, f"process.roles=controller\ncontroller.listener.names=CONTROLLER\n"
                             f"listener.security.protocol.map=CONTROLLER:{proto},SASL_SSL:SASL_SSL\n")
    with pytest.raises(ConfigError) as e:
        refuse_tls_controllers(ctx)
    msg = str(e.value)
    assert "\n" not in msg and f"it is {proto}" in msg and "nemesis.settings.proxy" in msg


@pytest.mark.parametrize("proto", ["PLAINTEXT", "SASL_PLAINTEXT"])
def test_a_clear_text_controller_listener_is_accepted(tmp_path, proto):
    """SASL_PLAINTEXT authenticates in clear and then frames requests as plain Kafka: readable."""
    ctx = ctx_with(tmp_path, f"controller.listener.names=CONTROLLER\n"
                             f"listener.security.protocol.map=CONTROLLER:{proto}\n")
    refuse_tls_controllers(ctx)
