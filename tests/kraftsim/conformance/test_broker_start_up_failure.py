"""A broker process's start-up that fails, and one SIGTERMed while starting: which leaves the
clean-shutdown marker (KAFKA-15375's two paths, told apart by a real Kafka 3.5.1 run).

Kafka (3.3-4.x, core/src/main/scala/kafka/server/BrokerServer.scala): ``shutdown`` begins with
``if (!maybeChangeStatus(STARTED, SHUTTING_DOWN)) return``, and STARTED comes only after the
broker was unfenced, so a SIGTERM while it starts shuts nothing down - no LogManager.shutdown, no
marker, on every release. A start-up that *fails* is different: BrokerLifecycleManager's
RegistrationTimeoutEvent (no registration accepted within
``initial.broker.registration.timeout.ms``) cancels initialCatchUpFuture, and startup's catch
sets STARTED, logs "Fatal error during broker startup. Prepare to shutdown", runs the whole
shutdown() - LogManager.shutdown marks every live dir on 3.5.1, only loaded or clean ones from
3.5.2 (gate clean_shutdown_marker_needs_load) - and Kafka.main exits 1.

The real run that showed kraftsim wrong (faultline's kafka-bugs suite, 29 Nov 2026, cell
KAFKA-15375/vulnerable-3.5.1 on apache-kafka): broker 1, cut from the controller, SIGTERMed while
it could not register, logged only "Terminating process due to signal SIGTERM" and "App info
kafka.server for 1 unregistered"; its next start logged "Recovering 9 logs from ... since no
clean shutdown file was found". kraftsim had run its whole shutdown and written the marker.

Each case here is a kraftsim broker process whose controller does not exist (nothing listens
on the address), over log dirs whose last shutdown was unclean.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftsim.storage.checkpoints import CLEAN_SHUTDOWN_FILE
from tests.kraftsim.conformance.test_log_manager_clean_shutdown import CLUSTER, _crashed_logs
from tests.kraftsim.conftest import REPO, _env, free_base_port

pytestmark = pytest.mark.slow


def _broker(tmp_path: Path, dirs: list[Path], kafka_version: str, timeout_ms: int) -> subprocess.Popen:
    base = free_base_port(2)
    cfg = tmp_path / "broker.properties"
    cfg.write_text(f"node.id=1\ncluster.id={CLUSTER}\nlisteners=PLAINTEXT://127.0.0.1:{base}\n"
                   f"controller.quorum.bootstrap.servers=127.0.0.1:{base + 1}\n"   # nothing listens there
                   f"log.dirs={','.join(str(d) for d in dirs)}\nevent.log={tmp_path}/events.jsonl\n"
                   f"metadata.version=3.5\nkafka.version={kafka_version}\n"
                   f"initial.broker.registration.timeout.ms={timeout_ms}\n")
    return subprocess.Popen([sys.executable, "-m", "kraftsim", "broker", "--config", str(cfg)], env=_env(),
                            cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def _wait(p: subprocess.Popen, seconds: float) -> int:
    try:
        return p.wait(seconds)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("kafka_version,marked", [("3.5.1", True), ("3.5.2", False)])
def test_a_start_up_that_fails_on_the_registration_timeout_shuts_down_whole(tmp_path, kafka_version, marked):
    dirs = _crashed_logs(tmp_path)
    p = _broker(tmp_path, dirs, kafka_version, timeout_ms=1500)
    code = _wait(p, 30)
    log = p.stderr.read().decode() if p.stderr else ""     # kraftsim's text log
    assert code == 1, log                                  # Kafka.main: exit 1
    assert [(d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs] == [marked, marked]
    assert "unable to register with the controller quorum" in log and "Fatal error during broker startup" in log


@pytest.mark.parametrize("kafka_version", ["3.5.1", "3.5.2"])
def test_a_sigterm_while_starting_shuts_nothing_down(tmp_path, kafka_version):
    dirs = _crashed_logs(tmp_path)
    p = _broker(tmp_path, dirs, kafka_version, timeout_ms=60_000)
    deadline = time.monotonic() + 20
    events = tmp_path / "events.jsonl"
    while time.monotonic() < deadline and p.poll() is None and not events.exists():
        time.sleep(0.05)
    time.sleep(1.5)                # started: registering (and failing to) for a while
    assert p.poll() is None, "the broker exited before the SIGTERM"
    p.send_signal(signal.SIGTERM)
    assert _wait(p, 20) == 0
    assert [(d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs] == [False, False]
