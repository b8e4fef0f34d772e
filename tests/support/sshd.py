"""Start a real OpenSSH sshd inside a lab namespace and wait until it accepts connections.

Why one helper: the SSH transport tests and the SSH nemesis tests both need it, and a sshd
that does not come up must say *why* (its own log, its exit status) instead of a bare "timed
out". A sshd that exits at once (it could not bind) is started again a few times; one that runs
but cannot be reached is not: that is the host's routing (tests/support/netlab.py refuses a lab
whose subnet another device holds), and waiting longer cannot help.
"""
from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path


def _listening(ip: str, port: int) -> bool:
    try:
        socket.create_connection((ip, port), timeout=0.5).close()
        return True
    except OSError:
        return False


def start_sshd(ns: str, ip: str, port: int, config: Path, log: Path, timeout: float = 20.0,
               attempts: int = 3) -> subprocess.Popen:
    """Run ``sshd -D -e -f config`` in namespace ``ns`` (its own session, output to ``log``) and
    return once ``ip:port`` accepts a TCP connection; raise with the log's tail otherwise."""
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)   # sshd's privilege-separation dir
    why = ""
    for attempt in range(1, attempts + 1):
        proc = subprocess.Popen(["ip", "netns", "exec", ns, "/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
                                stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _listening(ip, port):
                return proc
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        if proc.poll() is None:     # running but unreachable: a route, not sshd - retrying cannot help
            proc.kill()
            proc.wait(timeout=10)
            why = f"did not listen on {ip}:{port} within {timeout:.0f}s (is the lab's subnet routed elsewhere?)"
            break
        why = f"exited with {proc.returncode}"
        time.sleep(0.5 * attempt)
    tail = log.read_text(errors="replace")[-600:] if log.exists() else "(no log)"
    raise RuntimeError(f"sshd in {ns} {why} (attempt {attempt}); its log ends: {tail}")
