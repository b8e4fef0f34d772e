"""campaigns/suites/seeds.yaml on the embedded cluster: every cell meets its expectation, and
the known-bad controls really lose acknowledged writes.

Why this is the test that matters: the fixed cells' "no loss" means something only while the
vulnerable cells of the same scenarios lose data - KIP-903 at metadata.version 3.4 (seed 000),
Last Replica Standing before ELR (seed 003 §2.4), unclean election enabled (seed 001, KIP-704,
a loss the configuration allows). It runs the real suite command: real kraftsim clusters,
iptables partitions, librdkafka producers, one Spark session judging every run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VULNERABLE = ("kip-903/vulnerable-3.4", "last-replica-standing/vulnerable-3.9", "unclean-election/enabled")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_seeds_suite(tmp_path: Path) -> None:
    env = {**os.environ, "FAULTLINE_STATE_DIR": str(tmp_path / "state"), "PYTHONUNBUFFERED": "1"}
    p = subprocess.run([sys.executable, "-m", "harness.cli", "suite", str(ROOT / "campaigns" / "suites" / "seeds.yaml"),
                        "--results-dir", str(tmp_path / "results"), "--no-progress"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=1700)
    suite_dir = Path(p.stdout.strip().splitlines()[-1])
    log = [json.loads(ln) for ln in (suite_dir / "suite-log.jsonl").read_text().splitlines()]
    cells = {r["cell"]: r for r in log if r.get("event") == "cell_finished"}
    summary = "\n".join(f"{c}: {r['outcome']}: {r['reason']}" for c, r in cells.items())
    assert p.returncode == 0, f"{p.stderr[-3000:]}\n{summary}"
    spec = json.loads((suite_dir / "suite.json").read_text())
    assert set(cells) == {c["id"] for c in spec["cells"]}, summary
    assert all(r["outcome"] == "as-expected" for r in cells.values()), summary
    for name in VULNERABLE:
        assert cells[name]["lost"] and cells[name]["lost"] > 0, f"{name} lost nothing:\n{summary}"
    # the unclean election's loss is labelled as allowed by configuration
    assert "unclean.leader.election.enable=true" in cells["unclean-election/enabled"]["label"], summary
    # the fixed cells lost nothing
    for name, r in cells.items():
        if name not in VULNERABLE:
            assert r["lost"] == 0, f"{name}:\n{summary}"
    html = (suite_dir / "index.html").read_text()
    assert html.count('data-cell="') == len(cells)
