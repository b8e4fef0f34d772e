"""Running the real ``faultline`` console script from tests, and reading what it left.

Why a helper: every harness test drives the CLI exactly as a user does (a subprocess in
its own process group, its own heal-ledger directory via FAULTLINE_STATE_DIR), and every
test must clean up what a run started even when the test fails.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
LOCAL_INV = REPO / "inventory" / "local.yaml"


def cli() -> list[str]:
    exe = shutil.which("faultline")
    return [exe] if exe else [sys.executable, "-c", "from harness.cli import main; main()"]


def env_for(state_dir: Path) -> dict[str, str]:
    return {**os.environ, "FAULTLINE_STATE_DIR": str(state_dir), "PYTHONUNBUFFERED": "1"}


def faultline(args: list[str], state_dir: Path, *, timeout: float = 600, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cli() + args, capture_output=True, text=True, timeout=timeout,
                          env=env_for(state_dir), cwd=cwd or REPO)


def spawn(args: list[str], state_dir: Path, log: Path) -> subprocess.Popen:
    fh = open(log, "wb")
    try:
        return subprocess.Popen(cli() + args, stdout=fh, stderr=subprocess.STDOUT, env=env_for(state_dir),
                                cwd=REPO, start_new_session=True)
    finally:
        fh.close()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True):
        if line.endswith("\n"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def wait_for(pred, timeout: float, what: str, interval: float = 0.25):  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def pids_matching(text: str) -> list[int]:
    r = subprocess.run(["pgrep", "-f", "--", text], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split() if p.strip().isdigit() and int(p) != os.getpid()]


def proc_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def force_cleanup(run_root: Path, state_dir: Path) -> None:
    """Last-resort cleanup for a failing test: heal from the ledger, then kill by directory."""
    try:
        faultline(["heal"], state_dir, timeout=120)
    except Exception:  # noqa: BLE001
        pass
    for pid in pids_matching(str(run_root)):
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
