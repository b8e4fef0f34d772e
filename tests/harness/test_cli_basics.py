"""The small CLI commands, through the real console script: listing nemeses, checking a
good inventory, and refusing a directory that is not a run (exit 2, one line)."""
from __future__ import annotations

from pathlib import Path

from tests.harness.clirun import LOCAL_INV, faultline


def test_nemeses_lists_the_process_faults(tmp_path: Path) -> None:
    r = faultline(["nemeses"], tmp_path / "state", timeout=120)
    assert r.returncode == 0, r.stderr
    names = {ln.split()[0] for ln in r.stdout.splitlines() if ln.strip()}
    assert {"kill", "pause", "restart"} <= names, r.stdout


def test_inventory_check_accepts_the_default_target(tmp_path: Path) -> None:
    r = faultline(["inventory", "check", str(LOCAL_INV)], tmp_path / "state", timeout=120)
    assert r.returncode == 0 and "embedded kraftsim with 3 broker(s)" in r.stdout, r.stdout + r.stderr


def test_check_and_report_refuse_a_non_run_directory(tmp_path: Path) -> None:
    for cmd in (["check", str(tmp_path)], ["report", str(tmp_path)], ["check", str(tmp_path / "nope")]):
        r = faultline(cmd, tmp_path / "state", timeout=120)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, (cmd, r.stderr)
        assert "run directory" in lines[0]


def test_heal_with_an_empty_ledger(tmp_path: Path) -> None:
    r = faultline(["heal"], tmp_path / "state", timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("0 healed, 0 failed"), r.stdout + r.stderr


def test_report_on_a_malformed_run_file_is_one_line_exit_2(tmp_path: Path) -> None:
    """A run directory whose verdict exists but whose run.json is corrupt is the user's input
    problem (exit 2, the file named), not an infrastructure failure (exit 3)."""
    rd = tmp_path / "run"
    (rd / "history").mkdir(parents=True)
    (rd / "history" / "producer-0.jsonl").write_text("")
    (rd / "verdict.json").write_text('{"valid": true, "counts": {"lost_write": 0}, "acked_writes": 0}\n')
    (rd / "run.json").write_text("{not json\n")
    r = faultline(["report", str(rd)], tmp_path / "state", timeout=120)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "run.json" in lines[0]
