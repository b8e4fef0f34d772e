"""``faultline campaign check`` / ``faultline suite check``: what ``run`` would refuse, refused
with one line and exit 2 before anything starts; every shipped campaign and suite passes.

"Before anything starts" is watched, not assumed: the CLI runs under ``strace -f -e execve``, so
every program it or its children executed is listed; only ``python -m kraftsim versions`` (the
version table, harness/versions.py) and ``python -m kraftsim cluster --check`` (kraftsim's own
refusals) may run - no kraftsim broker, controller or cluster, no java.
"""
from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from harness.plan import campaign_plan, check_campaign, check_suite
from tests.harness.clirun import REPO, cli, env_for

CAMPAIGNS = sorted((REPO / "campaigns").glob("*.yaml")) + sorted((REPO / "campaigns" / "bugs").glob("*.yaml"))
SUITES = sorted((REPO / "campaigns" / "suites").glob("*.yaml"))
LOCAL_INV = REPO / "inventory" / "local.yaml"


def traced(args: list[str], tmp: Path) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """Run the CLI under strace; return its result and the argv of every program executed."""
    trace = tmp / "execve.trace"
    p = subprocess.run(["strace", "-f", "-qq", "-s", "300", "-e", "trace=execve", "-o", str(trace), *cli(), *args],
                       capture_output=True, text=True, timeout=300, env=env_for(tmp / "state"), cwd=REPO)
    argvs = []
    for line in trace.read_text().splitlines():
        m = re.search(r'execve\("[^"]*", \[(.*?)\]', line)
        if m and not re.search(r"= -1 E[A-Z]+ ", line):   # a failed exec (PATH search) ran nothing
            argvs.append(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
    return p, argvs


def started(argvs: list[list[str]]) -> list[str]:
    """What ran that a check must never start: java, or kraftsim other than its two questions."""
    bad = []
    for a in argvs:
        text = " ".join(a)
        if any(Path(x).name == "java" for x in a[:1]) or "java" in Path(a[0]).name:
            bad.append(text)
        elif "kraftsim" in text and not ("kraftsim versions" in text or ("kraftsim cluster" in text and "--check" in text)):
            bad.append(text)
    return bad


def campaign(tmp: Path, settings: str = "", steps: str = "[{wait: 1}]") -> Path:
    f = tmp / "c.yaml"
    f.write_text(textwrap.dedent(f"""\
        name: check-me
        target:
          inventory: {LOCAL_INV}
          settings: {{{settings}}}
        workload: {{duration: 2}}
        nemesis: {{schedule: targeted, steps: {steps}}}
        """))
    return f


@pytest.mark.parametrize("path", CAMPAIGNS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_shipped_campaign_checks(path: Path):
    camp, features = check_campaign(path)
    plan = campaign_plan(camp, features)
    assert plan[0].startswith(f"campaign  {camp.name}") and any(ln.startswith("expect    ") for ln in plan)
    if camp.inventory.embedded:
        assert features is not None and any(ln.startswith("versions  kafka.version ") for ln in plan)


@pytest.mark.parametrize("path", SUITES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_shipped_suite_checks(path: Path):
    spec, lines = check_suite(path)
    assert len(lines) == 1 + len(spec.cells) and all(c.id in "\n".join(lines) for c in spec.cells)


@pytest.mark.parametrize("settings,override,want", [
    ('metadata.version: "9.9"', None,
     "target.settings.metadata.version: 9.9 is not a Kafka metadata version (no release line 9.9); nearest: 4.4"),
    ('metadata.version: "3.10"', None,
     "target.settings.metadata.version: 3.10 is not a Kafka metadata version (no release line 3.10); nearest: 3.9 or 4.0"),
    ("metadata.version: 3.10", None, "target.settings.metadata.version: 3.1 is a number, not a version: quote it"),
    ('metadata.version: "4.1"', "target.kafka.version=3.4.9",
     "target.settings.kafka.version: 3.4.9 is not a Kafka release; nearest: 3.4.1 or 3.5.0"),
    ('metadata.version: "4.1"', "target.kafka.version=3.9.0",   # kraftsim's own refusal, asked with --check
     "target.settings: kraftsim refuses the cluster settings: kraftsim: cluster: --set: key 'kafka.version': "
     "3.9.0 is older than metadata.version 4.1-IV1"),
])
def test_a_malformed_campaign_is_one_line_and_starts_nothing(tmp_path, settings, override, want):
    f = campaign(tmp_path, settings)
    p, argvs = traced(["campaign", "check", str(f), *(["--set", override] if override else [])], tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"faultline: error: {f}: {want}"), p.stderr
    assert started(argvs) == [] and any("kraftsim versions" in " ".join(a) for a in argvs)
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("*.jsonl"))


def test_a_bad_step_is_refused_before_kraftsim_is_asked(tmp_path):
    f = campaign(tmp_path, 'metadata.version: "3.4"', steps="[{start: klil, target: random-broker}]")
    p, argvs = traced(["campaign", "check", str(f)], tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "nemesis.steps[0].start: unknown fault 'klil'" in p.stderr
    assert started(argvs) == [] and not any("--check" in a for a in argvs)


def test_a_good_campaign_prints_its_plan_and_starts_no_cluster(tmp_path):
    for mv in ("4.1", "3.9", "3.4"):
        f = campaign(tmp_path, f'metadata.version: "{mv}"', steps="[{wait: 1}, {start: kill, target: random-broker, "
                                                                   "as: k, duration: 2}]")
        p, argvs = traced(["campaign", "check", str(f)], tmp_path)
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith(f"{f}: ok\n") and f"metadata.version {mv}-IV" in p.stdout
        assert "2. start kill target random-broker as k for 2s" in p.stdout
        assert started(argvs) == [] and any("--check" in a for a in argvs)


def test_a_suite_with_a_bad_cell_is_one_line(tmp_path):
    f = campaign(tmp_path, 'metadata.version: "4.1"')
    s = tmp_path / "s.yaml"
    s.write_text(f"cells:\n  - {{name: good, campaign: {f}, expect: no-loss}}\n"
                 f"  - {{name: bad, campaign: {f}, expect: no-loss, set: {{target.metadata.version: \"3.7-IV5\"}}}}\n")
    p, argvs = traced(["suite", "check", str(s)], tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "3.7-IV5 is not a Kafka metadata version; nearest: 3.7-IV4 or 3.8-IV0" in p.stderr
    assert started(argvs) == []
    s.write_text(f"cells:\n  - {{name: good, campaign: {f}, expect: no-loss, set: {{target.metadata.version: 3.10}}}}\n")
    p = subprocess.run([*cli(), "suite", "check", str(s)], capture_output=True, text=True, timeout=120,
                       env=env_for(tmp_path / "state"), cwd=REPO)
    assert p.returncode == 2 and "cells[0].set.target.metadata.version: 3.1 is a number, not a version" in p.stderr


def test_faultline_suite_file_still_runs_the_suite(tmp_path):
    """`faultline suite FILE` is still the run (the default command of the suite group): a suite
    without a file is refused by the run's own check, not as an unknown command."""
    p = subprocess.run([*cli(), "suite", "--resume", str(tmp_path)], capture_output=True, text=True, timeout=120,
                       env=env_for(tmp_path / "state"), cwd=REPO)
    assert p.returncode == 2 and "not a suite directory" in p.stderr, p.stderr
