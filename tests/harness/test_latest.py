"""``RESULTS/latest`` / ``latest-suite`` (harness/latest.py) and the small CLI conveniences:
``faultline --version``, shell completion."""
from __future__ import annotations

import os
import subprocess
import threading

from harness.latest import SUITE_LINK, point_latest
from harness.report.index import runs_table
from tests.harness.clirun import REPO, cli, env_for


def test_latest_points_at_the_newest_and_is_never_missing(tmp_path):
    """Renamed over the old link: a reader polling it while it moves never finds it absent."""
    runs = [tmp_path / f"run-{i}" for i in range(200)]
    for d in runs:
        d.mkdir()
    point_latest(tmp_path, runs[0])
    missing = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if not os.path.lexists(tmp_path / "latest"):
                missing.append(1)
    t = threading.Thread(target=watch)
    t.start()
    for d in runs[1:]:
        point_latest(tmp_path, d)
    stop.set()
    t.join()
    assert missing == []
    assert os.readlink(tmp_path / "latest") == "run-199" and (tmp_path / "latest").resolve() == runs[-1]
    point_latest(tmp_path, runs[3], SUITE_LINK)
    assert (tmp_path / "latest-suite").resolve() == runs[3] and not list(tmp_path.glob(".*.tmp"))


def test_the_runs_index_lists_the_newest_run_once(tmp_path):
    d = tmp_path / "kill-restart-20260101T000000Z-s1"
    d.mkdir()
    (d / "run.json").write_text('{"campaign": "kill-restart", "seed": 1}')
    point_latest(tmp_path, d)
    assert list(runs_table(tmp_path)["run"]) == [d.name]


def test_version_and_completion(tmp_path):
    p = subprocess.run([*cli(), "--version"], capture_output=True, text=True, timeout=60,
                       env=env_for(tmp_path), cwd=REPO)
    assert p.returncode == 0 and p.stdout.strip().startswith("faultline 0.") and p.stdout.count("\n") == 1
    p = subprocess.run([*cli()], capture_output=True, text=True, timeout=60, cwd=REPO,
                       env={**env_for(tmp_path), "_FAULTLINE_COMPLETE": "complete_bash",
                            "COMP_WORDS": "faultline suite c", "COMP_CWORD": "2"})
    assert p.stdout.split() == ["check"], p.stdout + p.stderr
