"""The Apache Kafka release cache (targets/releases.py): what Maven is asked for, what counts as
installed, a distribution recorded in place, and the one line a run gets when a release is
missing and cannot be fetched."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from targets import releases
from tests.support.kafka import releases_under_test


def test_the_pom_asks_for_the_broker_and_the_logging_backend_its_distribution_ships():
    """3.4.0's LICENSE-binary lists reload4j 1.2.19, 3.4.1's 1.2.25 (gradle/dependencies.gradle at
    the tags); 4.x moved to log4j 2 with the slf4j 1 binding (Kafka pins slf4j-api 1.7.36)."""
    p340, p341, p410 = releases.pom("3.4.0"), releases.pom("3.4.1"), releases.pom("4.1.0")
    assert "<artifactId>kafka_2.13</artifactId><version>3.4.0</version>" in p340
    assert "<artifactId>reload4j</artifactId><version>1.2.19</version>" in p340
    assert "<artifactId>reload4j</artifactId><version>1.2.25</version>" in p341
    assert "<artifactId>slf4j-reload4j</artifactId><version>1.7.36</version>" in p341
    assert "<artifactId>log4j-slf4j-impl</artifactId>" in p410 and "reload4j" not in p410
    assert "log4j-slf4j2-impl" not in p410


def test_the_tests_releases_are_installed_with_their_logging_backend():
    """scripts/setup-test-host.sh installs tests/kafka-releases.txt; each has its broker jar and the
    backend's jars on the classpath (without one Kafka logs nothing and faultline reads nothing)."""
    for v in releases_under_test():
        rel = releases.installed(v)
        assert rel is not None, f"{v} not in the cache {releases.cache_dir()} (scripts/setup-test-host.sh installs it)"
        jars = {p.name for p in rel.libs.glob("*.jar")}
        assert f"kafka_2.13-{v}.jar" in jars
        want = ("log4j-core-", "log4j-slf4j-impl-") if v.startswith("4.") else ("reload4j-", "slf4j-reload4j-")
        for prefix in want:
            assert any(j.startswith(prefix) for j in jars), f"{v}: no {prefix}*.jar in {rel.libs}"


def test_a_distribution_is_recorded_in_place(tmp_path):
    """`faultline kafka install --kafka-home DIR`: an unpacked distribution (here the cached jars of
    a real release laid out as DIR/libs) is used where it is, its version read from its core jar."""
    v = releases_under_test()[-1]
    home = tmp_path / f"kafka_2.13-{v}"
    home.mkdir()
    (home / "libs").symlink_to(releases.installed(v).libs)
    cache = tmp_path / "cache"
    rel = releases.install_home(home, root=cache)
    assert (rel.version, rel.source, rel.libs) == (v, "kafka-home", home.resolve() / "libs")
    assert [r.version for r in releases.list_installed(cache)] == [v]


def test_a_release_whose_jars_are_gone_is_not_installed(tmp_path):
    (tmp_path / "4.1.0" / "libs").mkdir(parents=True)
    (tmp_path / "4.1.0" / "release.json").write_text('{"version": "4.1.0", "libs": "%s"}' % (tmp_path / "4.1.0" / "libs"))
    assert releases.installed("4.1.0", tmp_path) is None


def test_a_missing_release_that_maven_cannot_fetch_is_one_line_naming_the_install_command(tmp_path):
    """Offline: Maven's own offline mode stands in for a machine without Maven Central (mvn -o with
    an empty local repository cannot resolve anything)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    mvn = fake / "mvn"
    real = shutil.which("mvn")
    mvn.write_text(f"#!/bin/sh\nexec {real} -o -Dmaven.repo.local={tmp_path / 'm2'} \"$@\"\n")
    mvn.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "FAULTLINE_KAFKA_CACHE": str(tmp_path / "cache")}
    code = "from targets import releases; releases.install('3.8.1', mvn=%r)" % str(mvn)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode != 0
    last = p.stderr.strip().splitlines()[-1]
    assert "NotInstalled" in last and "Apache Kafka 3.8.1 is not installed" in last
    assert "faultline kafka install 3.8.1" in last
    assert not any((tmp_path / "cache").glob("3.8.1*")), "a failed install must leave nothing that looks installed"


def test_the_cli_installs_lists_and_refuses_a_bad_release(tmp_path):
    env = {**os.environ, "FAULTLINE_KAFKA_CACHE": str(tmp_path)}
    p = subprocess.run([sys.executable, "-m", "harness.cli", "kafka", "install", "4.1"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert p.returncode == 2 and "an Apache Kafka release like 4.1.0" in p.stderr
    p = subprocess.run([sys.executable, "-m", "harness.cli", "kafka", "list"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert p.returncode == 0 and "no Apache Kafka release installed" in p.stderr
