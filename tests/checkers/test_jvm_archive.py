"""The Spark driver's class archive: `python -m checkers.jvm_archive` makes one the driver maps.

Real JVMs throughout: the installation's archive - the one scripts/setup-test-host.sh made with
the same command, else the test makes it (one real check of its own small lossy history, about a
minute) - is mapped by a session checkers.session starts with ``-Xshare:on`` (the JVM refuses to
start when it cannot map the archive), and the class-loading log says Spark's classes came from
it. The control: ``-Xshare:on`` is a real check (a garbage archive stops the JVM),
and under the default ``-Xshare:auto`` the same garbage only costs the speed.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

CHILD = """
from checkers.session import start_session
spark, _ = start_session(app_name="archive-test", log=__import__("pathlib").Path(r"{log}"))
assert spark.range(10).count() == 10
print(spark.sparkContext.getConf().get("spark.driver.extraJavaOptions"))
"""


def test_the_archive_made_is_mapped_by_the_checkers_driver(tmp_path: Path) -> None:
    env = dict(os.environ)
    p = subprocess.run([sys.executable, "-m", "checkers.jvm_archive", "--if-missing"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    archive = Path(p.stdout.strip())
    assert archive.is_file() and archive.parent.name == "spark-cds", p.stdout
    assert archive.stat().st_size > 10 * 2**20   # Spark's classes, not a stub
    assert not list(archive.parent.glob(".*.tmp"))

    loaded = tmp_path / "classload.log"
    env["FAULTLINE_SPARK_DRIVER_JAVA_OPTIONS"] = f"-Xshare:on -Xlog:class+load=info:file={loaded}"
    p = subprocess.run([sys.executable, "-c", CHILD.format(log=tmp_path / "jvm.log")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:] + (tmp_path / "jvm.log").read_text(errors="replace")[-2000:]
    assert f"-XX:SharedArchiveFile={archive}" in p.stdout, p.stdout
    lines = loaded.read_text(errors="replace").splitlines()
    shared = [ln for ln in lines if "org.apache.spark." in ln and "source: shared objects file (top)" in ln]
    assert any(" org.apache.spark.sql.SparkSession " in ln for ln in shared), lines[-20:]
    assert len(shared) > 1000, len(shared)


def test_a_bad_archive_stops_the_jvm_only_when_sharing_is_required(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsa"
    bad.write_bytes(b"\0" * 4096)
    from checkers.session import java_binary
    on = subprocess.run([java_binary(), f"-XX:SharedArchiveFile={bad}", "-Xshare:on", "-version"],
                        capture_output=True, text=True, timeout=120)
    auto = subprocess.run([java_binary(), f"-XX:SharedArchiveFile={bad}", "-version"],
                          capture_output=True, text=True, timeout=120)
    assert on.returncode != 0, on.stderr
    assert auto.returncode == 0, auto.stderr
