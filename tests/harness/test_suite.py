"""`faultline suite`: bad suite files, judging cells, and a suite SIGKILLed mid-cell then resumed.

The resume test shows that a suite SIGKILLed mid-cell and resumed finishes with every cell
once and leaves nothing behind: a real suite process (real kraftsim clusters, real clients,
real Spark) is SIGKILLed while its second cell runs; then ``--resume`` heals, drops the
unfinished run and runs the rest. Nothing of the killed cell may still run afterwards, and the
heal ledger must hold nothing of the suite's runs.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
FAULTLINE = [sys.executable, "-m", "harness.cli"]


def _faultline(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 60,
               cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FAULTLINE, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, **(env or {})})


# --- bad suite files: exit 2, one line naming file and field --------------------------------------

BAD = [
    ("cells: []\n", "cells", "non-empty list"),
    ("cells:\n  - {campaign: ../../campaigns/kill-restart.yaml}\n", "cells[0].expect", "missing required key"),
    ("cells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: lossy}\n", "cells[0].expect", "no-loss, loss, loss-allowed"),
    ("cells:\n  - {campaign: nowhere.yaml, expect: no-loss}\n", "cells[0].campaign", "not found"),
    ("cells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: no-loss, colour: red}\n",
     "cells[0].colour", "unknown key"),
    ("cells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: no-loss, set: {topic.partitions: 0}}\n",
     "cells[0]", "topic.partitions"),
    ("cells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: no-loss, seeds: [1, x]}\n",
     "cells[0].seeds[1]", "integer"),
    ("cells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: no-loss}\n"
     "  - {campaign: ../../campaigns/kill-restart.yaml, expect: loss}\n", "cells[1].name", "already defined"),
    ("cells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: no-loss, set: [expect=loss]}\n",
     "cells[0].set", "cell's own key"),
    ("retention: {keep_last: 0}\ncells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: no-loss}\n",
     "retention.keep_last", ">= 1"),
    ("retention: {keep: 3}\ncells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: no-loss}\n",
     "retention.keep", "unknown key"),
]


def _bad_file(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "a" / "b"
    d.mkdir(parents=True)
    # the campaigns are found relative to the suite file: make ../../campaigns point at ours
    (tmp_path / "campaigns").symlink_to(ROOT / "campaigns")
    (tmp_path / "inventory").symlink_to(ROOT / "inventory")
    f = d / "bad.yaml"
    f.write_text(text, encoding="utf-8")
    return f


def _one_line(stderr: str, f: Path, field: str, want: str) -> None:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert str(f) in lines[0] and field in lines[0] and want in lines[0], lines[0]
    assert "Traceback" not in stderr


@pytest.mark.parametrize("text,field,want", BAD, ids=[b[1] + ":" + b[2].split()[0] for b in BAD])
def test_bad_suite_file_is_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 text: str, field: str, want: str) -> None:
    from harness.cli import main

    f = _bad_file(tmp_path, text)
    with pytest.raises(SystemExit) as ex:
        main(["suite", str(f), "--results-dir", str(tmp_path / "res")])
    assert ex.value.code == 2
    _one_line(capsys.readouterr().err, f, field, want)
    assert not (tmp_path / "res").exists(), "nothing may run (or be created) for a bad suite file"


def test_bad_suite_file_through_the_console_script(tmp_path: Path) -> None:
    text, field, want = BAD[2]
    f = _bad_file(tmp_path, text)
    p = _faultline(["suite", str(f), "--results-dir", str(tmp_path / "res")])
    assert p.returncode == 2, p.stderr
    _one_line(p.stderr, f, field, want)


def test_retention_keep_last_is_read_and_kept_for_resume(tmp_path: Path) -> None:
    """``retention: {keep_last: N}`` beside ``--keep-last`` (which wins); it survives suite.json,
    so a resumed suite prunes as the first would have."""
    from harness.suite.spec import SuiteSpec, load_suite
    f = _bad_file(tmp_path, "retention: {keep_last: 4}\ncells:\n  - {campaign: ../../campaigns/kill-restart.yaml, "
                            "expect: no-loss}\n")
    spec = load_suite(f, validate_campaigns=False)
    assert spec.keep_last == 4
    assert SuiteSpec.from_json(json.loads(json.dumps(spec.to_json()))).keep_last == 4
    f.write_text("cells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: no-loss}\n")
    assert load_suite(f, validate_campaigns=False).keep_last is None


def test_not_a_suite_dir_for_resume_is_exit_2(tmp_path: Path) -> None:
    p = _faultline(["suite", "--resume", str(tmp_path)])
    assert p.returncode == 2 and "not a suite directory" in p.stderr and len(p.stderr.strip().splitlines()) == 1


# --- SIGKILL mid-cell, then --resume --------------------------------------------------------------

TINY_CAMPAIGN = """
name: tiny
target: {inventory: %s}
topic: {name: faultline, partitions: 1, replication_factor: 3, min_insync_replicas: 2}
workload: {producers: 1, consumers: 0, rate: 50, duration: 6, drain_timeout: 10, recovery_timeout: 10}
nemesis:
  schedule: targeted
  steps:
    - wait: 2
    - {start: kill, target: random-broker, as: k, duration: 2}
expect: no-loss
""" % (ROOT / "inventory" / "local.yaml")

TINY_SUITE = """
name: tiny-resume
cells:
  - {name: one, campaign: tiny.yaml, seeds: 1, expect: no-loss}
  - {name: two, campaign: tiny.yaml, seeds: 2, expect: no-loss}
  - {name: three, campaign: tiny.yaml, seeds: 3, expect: no-loss}
"""


def _log(suite_dir: Path) -> list[dict]:
    out = []
    for ln in (suite_dir / "suite-log.jsonl").read_text().splitlines():
        try:
            out.append(json.loads(ln))
        except ValueError:
            pass
    return out


def _procs_mentioning(text: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            pids.append(int(d.name))
    return pids


@pytest.mark.slow
def test_suite_sigkilled_mid_cell_resumes_each_cell_once(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY_CAMPAIGN, encoding="utf-8")
    (tmp_path / "suite.yaml").write_text(TINY_SUITE, encoding="utf-8")
    results = tmp_path / "results"
    state = tmp_path / "state"  # a ledger of our own: what is left open is ours alone
    env = {**os.environ, "FAULTLINE_STATE_DIR": str(state)}
    suite = subprocess.Popen([*FAULTLINE, "suite", str(tmp_path / "suite.yaml"), "--results-dir", str(results),
                              "--no-progress"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 400
        suite_dir = None
        while time.monotonic() < deadline:
            dirs = list(results.glob("suite-tiny-resume-*"))
            if dirs and (dirs[0] / "suite-log.jsonl").exists():
                suite_dir = dirs[0]
                started = [r for r in _log(suite_dir) if r.get("event") == "cell_started"]
                if any(r["cell"] == "two" for r in started):
                    break
            assert suite.poll() is None, suite.communicate()
            time.sleep(0.3)
        else:
            pytest.fail("the suite never started its second cell")
        assert suite_dir is not None
        time.sleep(6)  # mid-cell: the second run's cluster and clients are up, maybe a fault applied
        child = next(r for r in _log(suite_dir) if r.get("event") == "cell_started" and r["cell"] == "two")
        os.kill(suite.pid, signal.SIGKILL)
        suite.wait(timeout=10)
    finally:
        if suite.poll() is None:
            os.killpg(suite.pid, signal.SIGKILL)
            suite.wait()

    finished = {r["cell"] for r in _log(suite_dir) if r.get("event") == "cell_finished"}
    assert finished == {"one"}
    p = subprocess.run([*FAULTLINE, "suite", "--resume", str(suite_dir), "--no-progress"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == str(suite_dir)

    log = _log(suite_dir)
    done = [r["cell"] for r in log if r.get("event") == "cell_finished"]
    assert sorted(done) == ["one", "three", "two"], done          # every cell exactly once
    assert all(r["outcome"] == "as-expected" for r in log if r.get("event") == "cell_finished")
    assert any(r.get("event") == "suite_resumed" for r in log)
    runs = sorted(d.name for d in (suite_dir / "runs").iterdir() if d.is_dir() and not d.is_symlink())
    assert len(runs) == 3, runs                                  # the unfinished run was removed
    assert {Path(r["run_dir"]).name for r in log if r.get("event") == "cell_finished"} == set(runs)
    for r in runs:
        assert (suite_dir / "runs" / r / "verdict.json").is_file() and (suite_dir / "runs" / r / "report.html").is_file()
    # nothing left behind: no process of the suite's runs, nothing open in the ledger
    assert not _procs_mentioning(str(suite_dir)), "processes of the suite's runs still alive"
    assert _start_time(child["child_pid"]) != child["child_start"], "the killed suite's cell still runs"
    from groundwork.ledger import Ledger
    assert Ledger(state / "ledger.jsonl").open_entries() == []
    # one index, one JUnit file with a case per cell
    html = (suite_dir / "index.html").read_text()
    assert html.count('data-cell="') == 3 and "as-expected" in html
    import junitparser as jp
    cases = [c for s in jp.JUnitXml.fromfile(str(suite_dir / "junit.xml")) for c in s]
    assert len(cases) == 3 and all(not c.result for c in cases)


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def test_a_cell_naming_anomalies_replaces_its_campaigns(tmp_path: Path) -> None:
    """A bug's campaign forbids its anomaly as written (the fixed side); the vulnerable cell
    requires it. The cell's anomaly keys replace the campaign's, the one it leaves out cleared,
    so the suite loads and the run judges exactly the cell's expectation; a cell naming none
    keeps the campaign's forbid list."""
    from harness.campaign import load_campaign
    from harness.suite.spec import load_suite
    f = _bad_file(tmp_path, "cells:\n"
                            "  - {name: fixed, campaign: ../../campaigns/bugs/KAFKA-15489.yaml, expect: no-loss}\n"
                            "  - {name: vulnerable, campaign: ../../campaigns/bugs/KAFKA-15489.yaml, expect: no-loss,\n"
                            "     set: {target.kafka.version: 3.6.2}, require_anomalies: [controller_split_brain]}\n")
    fixed, vulnerable = load_suite(f).cells   # validates both cells by loading their campaigns
    assert "forbid_anomalies=null" in vulnerable.overrides
    assert "require_anomalies=[controller_split_brain]" in vulnerable.overrides
    exp = load_campaign(vulnerable.campaign, overrides=vulnerable.overrides).expectation
    assert (exp.require_anomalies, exp.forbid_anomalies) == (("controller_split_brain",), ())
    assert not any("anomalies" in o for o in fixed.overrides)
    exp = load_campaign(fixed.campaign, overrides=fixed.overrides).expectation
    assert (exp.require_anomalies, exp.forbid_anomalies) == ((), ("controller_split_brain",))


def test_cell_globs_select_part_of_a_suite_and_a_glob_matching_nothing_is_exit_2(tmp_path: Path) -> None:
    """``--cell GLOB``: the chosen cells in file order, indexed afresh, axes kept only where a
    chosen cell uses them; a glob matching no cell is one line naming the globs (exit 2)."""
    from harness.suite.spec import load_suite, select_cells
    spec = load_suite(ROOT / "campaigns" / "suites" / "seeds.yaml", validate_campaigns=False)
    part = select_cells(spec, ["unclean-election/*", "min-isr/*"])
    assert [c.id for c in part.cells] == [f"{n}[target={t}]" for n in ("unclean-election/enabled", "unclean-election/disabled",
                                                                        "min-isr/4.1") for t in ("kraftsim", "apache-kafka")]
    assert [c.index for c in part.cells] == list(range(6)) and len(spec.cells) > 6
    p = _faultline(["suite", str(ROOT / "campaigns" / "suites" / "seeds.yaml"), "--cell", "nope/*",
                    "--results-dir", str(tmp_path / "r"), "--no-progress", "--no-preflight"])
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "--cell" in lines[0] and "nope/*" in lines[0], p.stderr
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_the_kafka_bugs_suite_pairs_each_bug_on_its_vulnerable_and_fixed_release() -> None:
    """campaigns/suites/kafka-bugs.yaml as shipped: every cell's campaign loads with the cell's
    overrides (load_suite validates them), and each bug is a pair whose vulnerable cell pins an
    older kafka.version and requires the anomaly its fixed cell forbids (or expects the loss)."""
    from harness.campaign import load_campaign
    from harness.suite.spec import load_suite
    spec = load_suite(ROOT / "campaigns" / "suites" / "kafka-bugs.yaml")
    pairs: dict[str, dict[str, object]] = {}
    for c in spec.cells:
        bug, side = c.id.split("/")
        pairs.setdefault(bug, {})[side.split("-")[0]] = load_campaign(c.campaign, overrides=c.overrides, seed=c.seed)
    assert len(pairs) >= 4 and all(set(p) == {"fixed", "vulnerable"} for p in pairs.values()), pairs.keys()
    for bug, p in pairs.items():
        fixed, vuln = p["fixed"].expectation, p["vulnerable"].expectation
        kv = [str(p[s].settings["kafka.version"]) for s in ("vulnerable", "fixed")]
        assert tuple(map(int, kv[0].split("."))) < tuple(map(int, kv[1].split("."))), (bug, kv)
        if vuln.expect == "loss":   # a bug that loses acknowledged writes: the fixed side loses none
            assert fixed.expect == "no-loss", (bug, vuln, fixed)
            continue
        assert vuln.require_anomalies and set(vuln.require_anomalies) <= set(fixed.forbid_anomalies), (bug, vuln, fixed)
