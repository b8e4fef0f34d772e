"""A runtime-only install renders the report: the wheel, a fresh venv, no test extra.

Why: CI installs ``.[test]`` into a Python that allows it, which hid that the report imported
junitparser (a test-only dependency) at runtime: on a stock machine the README's first command
ran the campaign and then said ``report unavailable: ModuleNotFoundError``. This test builds
the wheel, installs it into a new virtual environment without any extra, and has that
environment's ``faultline report`` write report.html and junit.xml for a run directory made by
the report tests' builders. It runs outside the checkout, so nothing is imported from the
source tree by accident.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.report.runs import make_loss_run

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_wheel_without_test_extra_renders_report(tmp_path: Path) -> None:
    # build from a copy: pip builds in-tree, and a stale build/ must neither leak into the
    # wheel nor be left in the checkout
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", ".venv", "venv", "results", "__pycache__", ".pytest_cache"))
    wheels = tmp_path / "wheels"
    p = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(src)], tmp_path, 600)
    assert p.returncode == 0, p.stderr[-2000:]
    wheel = next(wheels.glob("faultline-*.whl"))

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    p = _run([str(py), "-m", "pip", "install", "-q", str(wheel)], tmp_path, 1200)
    assert p.returncode == 0, p.stderr[-2000:]
    # the premise: the test extra is not there
    p = _run([str(py), "-c", "import importlib.util as u; print(u.find_spec('junitparser') is None, "
              "u.find_spec('pytest') is None)"], tmp_path, 60)
    assert p.stdout.split() == ["True", "True"], p.stdout + p.stderr

    run = make_loss_run(tmp_path / "results")
    p = _run([str(env_dir / "bin" / "faultline"), "report", str(run)], tmp_path, 300)
    assert p.returncode == 0, p.stdout + p.stderr
    html = (run / "report.html").read_text(encoding="utf-8")
    assert "faultline" in html and len(html) > 5000
    junit = (run / "junit.xml").read_text(encoding="utf-8")
    assert "<testsuites" in junit and "<testcase" in junit and "UNEXPECTED LOSS" in junit
    # and it is JUnit a CI server reads (junitparser is in the test extra: parse with it here)
    import junitparser as jp
    cases = [c for s in jp.JUnitXml.fromfile(str(run / "junit.xml")) for c in s]
    assert any(c.result and isinstance(c.result[0], jp.Failure) for c in cases)
