"""An end-to-end run on the embedded cluster with the kill nemesis.

`faultline run campaigns/kill-restart.yaml` (shortened with --set) against real kraftsim
processes, real confluent-kafka clients and the real Spark checker. Then `faultline check`
on the same directory must reproduce the verdict; it is asked with ``--expect loss`` (a
known-bad expectation for a run that lost nothing), which must flip the exit code to 1
while the verdict's findings stay identical, and rewrite the report from the new verdict
(check and report are one step, harness/check.py: a report never shows an older verdict).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.harness.clirun import REPO, faultline, force_cleanup, pids_matching, read_jsonl

# Spark checks dominate; on a loaded 2-core machine one takes minutes (see the report figures)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def test_kill_restart_run_then_check_again(tmp_path: Path) -> None:
    state, results = tmp_path / "state", tmp_path / "results"
    try:
        r = faultline(["run", str(REPO / "campaigns" / "kill-restart.yaml"), "--seed", "11",
                       "--set", "workload.duration=8", "--set", "workload.producers=1",
                       "--results-dir", str(results), "--no-progress"], state, timeout=900)
        out_lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
        assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr tail:\n{r.stderr[-3000:]}"
        assert "Traceback" not in r.stdout
        run_dir = Path(out_lines[-1])
        assert run_dir.parent == results and run_dir.is_dir(), f"last line is not the run dir: {out_lines[-1]!r}"

        # the directory holds what docs/history-format.md lists
        assert (run_dir / "campaign.yaml").exists()
        run = json.loads((run_dir / "run.json").read_text())
        assert run["seed"] == 11 and run["expect"] == "no-loss" and run["campaign"] == "kill-restart"
        assert run["topic"]["min_insync_replicas"] == 2, run.get("topic")
        assert "--seed 11" in run["command"] and run["ended_wall"] > run["started_wall"]
        hist = sorted(p.name for p in (run_dir / "history").glob("*.jsonl"))
        assert {"producer-0.jsonl", "consumer-0.jsonl", "drain.jsonl"} <= set(hist), hist
        sends = [x for x in read_jsonl(run_dir / "history" / "producer-0.jsonl") if x["type"] == "ok"]
        assert len(sends) > 50, "the producer acknowledged almost nothing"
        tl = read_jsonl(run_dir / "timeline.jsonl")
        kills = [e for e in tl if e.get("kind") == "nemesis" and e.get("fault") == "kill"]
        assert [e["phase"] for e in kills] == ["start", "stop", "start", "stop"], kills
        assert all(e["targets"] and e["targets"][0].startswith("broker-") for e in kills)
        events = read_jsonl(run_dir / "cluster-logs" / "controller" / "events.jsonl")
        killed = kills[0]["targets"][0]
        kid = int(killed.split("-")[1])
        regs = [e for e in events if e.get("event") == "broker_registered" and e.get("broker") == kid]
        assert len(regs) >= 2, f"{killed} should have registered again after the kill: {regs}"
        assert (run_dir / "observer.jsonl").stat().st_size > 0

        verdict = json.loads((run_dir / "verdict.json").read_text())
        assert verdict["valid"] is True and verdict["as_expected"] is True
        assert verdict["counts"]["lost_write"] == 0 and verdict["acked_writes"] >= len(sends)
        # the min-ISR invariant ran, with the topic's setting, and found every ack legal
        assert verdict["checker"]["min_insync_replicas"] == 2 and verdict["counts"]["ack_below_min_isr"] == 0

        assert _badge(run_dir) == "as expected"

        # nothing of the run is left running
        assert pids_matching(str(run_dir)) == []

        # `faultline check` again, with a wrong expectation: same findings, exit 1
        c = faultline(["check", str(run_dir), "--expect", "loss"], state, timeout=900)
        assert c.returncode == 1, f"exit {c.returncode}\n{c.stdout}\n{c.stderr[-2000:]}"
        again = json.loads((run_dir / "verdict.json").read_text())
        assert again["valid"] == verdict["valid"] and again["counts"] == verdict["counts"]
        assert again["acked_writes"] == verdict["acked_writes"] and again["as_expected"] is False
        assert _badge(run_dir) == "UNEXPECTED"
        assert "EXPECTED LOSS NOT REPRODUCED" in (run_dir / "junit.xml").read_text()
    finally:
        force_cleanup(results, state)


def _badge(run_dir: Path) -> str:
    m = re.search(r'id="verdict-expectation" class="badge \w+">([^<]+)<', (run_dir / "report.html").read_text())
    assert m is not None, "report.html has no verdict badge"
    return m.group(1)
