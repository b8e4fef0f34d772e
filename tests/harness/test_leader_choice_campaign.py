"""campaigns/leader-choice.yaml as a pair (seed 004, KIP-1023): the real CLI, real kraftsim
clusters with a remote tier, librdkafka producers, one Spark session judging both runs.

What it shows:
- the wiped follower X really re-bootstrapped from the last tiered offset (KIP-1023) and so had
  the short local log when the leader died;
- preference ON: the replica elected then is not X but a long-log one, eligible by seed 004's
  rule (the controller's leader_elected says so);
- preference OFF (Kafka's behaviour): either may win — with this seed, the assignment order;
- either way the checker finds no acknowledged write lost (reads below a short-log leader's
  local log start come from the tier).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = ROOT / "campaigns" / "leader-choice.yaml"


def _run(tmp: Path, name: str, *sets: str) -> Path:
    env = {**os.environ, "FAULTLINE_STATE_DIR": str(tmp / f"state-{name}"), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "harness.cli", "run", str(CAMPAIGN), "--seed", "7", "--no-check",
           "--no-progress", "--results-dir", str(tmp / name)]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stderr[-3000:]
    return Path(p.stdout.strip().splitlines()[-1])


def _events(run_dir: Path) -> list[dict]:
    out = []
    for f in sorted((run_dir / "cluster").glob("*/events.jsonl")):
        out += [json.loads(ln) for ln in f.read_text().splitlines() if ln.strip()]
    return sorted(out, key=lambda e: e["wall"])


def _election_after_wipe(run_dir: Path) -> tuple[int, dict, dict]:
    """(the wiped broker X, the first election after X re-bootstrapped, the winner's became_leader)."""
    evs = _events(run_dir)
    start = next(e for e in evs if e["event"] == "follower_tiered_start" and e["reason"] == "last_tiered_offset")
    x = start["broker"]
    assert start["fetch_offset"] > 0  # KIP-1023: not from offset 0
    el = next(e for e in evs if e["event"] == "leader_elected" and e["wall"] > start["wall"])
    assert x in el["candidates"] and len(el["candidates"]) == 2, el
    won = next(e for e in evs if e["event"] == "became_leader" and e["wall"] >= el["wall"] - 0.001
               and e["broker"] == el["leader"])
    return x, el, won


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_leader_choice_pair(tmp_path: Path) -> None:
    on = _run(tmp_path, "on")
    off = _run(tmp_path, "off", "target.leader.election.eligible.local.log.ms=-1")

    x, el, won = _election_after_wipe(on)
    assert el["leader"] != x, el  # the long-log replica, not the KIP-1023 short one
    pref = el["local_log_preference"]
    assert pref[str(x)]["eligible"] is False and pref[str(el["leader"])]["eligible"] is True, pref
    assert pref[str(x)]["local_log_size_bytes"] < pref[str(el["leader"])]["local_log_size_bytes"]
    # what the report's election table shows for the winner (became_leader)
    for k in ("log_start_offset", "local_log_size_bytes", "local_log_start_timestamp"):
        assert k in won

    x_off, el_off, _ = _election_after_wipe(off)
    assert "local_log_preference" not in el_off  # off: Kafka's election, no seed 004 state used
    assert el_off["leader"] in el_off["candidates"]

    from checkers.job import check_run
    from checkers.session import make_session
    spark = make_session(app_name="leader-choice-test")
    try:
        for run_dir in (on, off):
            v = check_run(run_dir, spark=spark)
            assert v["valid"] is True and v["counts"]["lost_write"] == 0, v
            assert v["acked_writes"] > 1000
    finally:
        spark.stop()
