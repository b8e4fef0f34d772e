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


def test_commands_import_the_shared_module_never_the_one_that_registers_them() -> None:
    """harness/cli/__init__.py imports every command module to register it; a command module
    that imported it back (for the app, the consoles or Exit) made a cycle, and under
    ``python -m harness.cli`` a second copy of the package module with its own Exit class."""
    from tests.test_import_rules import REPO, imports_of

    cli = REPO / "harness" / "cli"
    commands = sorted(p for p in cli.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert {p.stem for p in commands} >= {"common", "run", "check", "shrink", "suite"}
    back = [(p.name, line, name) for p in commands for line, name in imports_of(REPO, p)
            if name == "harness.cli" or (name.startswith("harness.cli.") and name != "harness.cli.common")]
    assert back == [], back
    shared = [(line, name) for line, name in imports_of(REPO, cli / "common.py") if name.startswith("harness")]
    assert shared == [], shared
