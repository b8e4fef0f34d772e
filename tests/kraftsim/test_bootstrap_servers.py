"""``controller.quorum.bootstrap.servers`` is a list (KIP-853, QuorumConfig.parseBootstrapServers):
a broker without ``controller.quorum.voters`` tries each address until a controller answers.

Real processes: one controller, one broker whose list names a dead address first. The broker
must register with the controller behind the second address (the controller's
``broker_registered`` event). Before, only the first entry was read, so the broker never
registered.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.clirun import read_jsonl
from tests.kraftsim.conftest import REPO, _env, free_base_port

pytestmark = pytest.mark.slow


def test_broker_tries_every_bootstrap_address(tmp_path: Path) -> None:
    base = free_base_port(3)
    dead, cport, bport = base, base + 1, base + 2     # nothing listens on `dead`
    ctl = tmp_path / "controller.properties"
    ctl.write_text(f"node.id=1000\nlisteners=CONTROLLER://127.0.0.1:{cport}\n"
                   f"metadata.log.dir={tmp_path}/ctl\nevent.log={tmp_path}/ctl-events.jsonl\n")
    brk = tmp_path / "broker.properties"
    brk.write_text(f"node.id=1\nlisteners=PLAINTEXT://127.0.0.2:{bport}\n"
                   f"controller.quorum.bootstrap.servers=127.0.0.1:{dead},127.0.0.1:{cport}\n"
                   f"log.dirs={tmp_path}/data\nevent.log={tmp_path}/broker-events.jsonl\n")
    procs = []
    try:
        for role, cfg in (("controller", ctl), ("broker", brk)):
            procs.append(subprocess.Popen([sys.executable, "-m", "kraftsim", role, "--config", str(cfg)],
                                          env=_env(), cwd=str(REPO), stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True))
        deadline = time.monotonic() + 30
        registered: list[dict] = []
        while not registered and time.monotonic() < deadline:
            registered = [e for e in read_jsonl(tmp_path / "ctl-events.jsonl")
                          if e["event"] == "broker_registered" and e["broker"] == 1]
            time.sleep(0.1)
        assert registered, "the broker never registered: the second bootstrap address was not tried"
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
