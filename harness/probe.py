"""``python -m harness.probe INVENTORY``: can faultline reach every host?

Why a probe of its own: before a nightly campaign touches anything, an operator wants to
know that every lab host answers over SSH with the inventory's key and known_hosts, that
sudo works where the inventory grants it, and that every container exists — and, when not,
*why*, in one line per host (the run loop's pre-flight only says "does not answer"). Exit
code 3 (infrastructure) when any host fails, 2 for a bad inventory, 0 when all answer.
Nothing is left behind: connections are closed, nothing is started.
"""
from __future__ import annotations

import sys
from pathlib import Path

from checkers.outcome import EXIT_CONFIG, EXIT_INFRA, EXIT_OK
from groundwork.config import ConfigError
from harness.inventory import HostSpec, Inventory, load_inventory
from groundwork.transport.base import Transport, TransportError



def transport_for(inv: Inventory, spec: HostSpec) -> Transport:
    if inv.transport == "ssh":
        from groundwork.transport.ssh import SshTransport
        return SshTransport.from_host(spec, inv, retry_for=0)
    if inv.transport == "docker":
        from groundwork.transport.docker import DockerTransport
        return DockerTransport.from_host(spec, inv)
    from groundwork.transport.local import LocalTransport
    return LocalTransport(spec.name, netns=spec.netns)


def reach_error(inv: Inventory, spec: HostSpec, t: Transport) -> str | None:
    """None when the host answers over the inventory's transport (ssh: with its host key
    verified), else the one-line reason. Shared with ``faultline preflight`` (harness.preflight)."""
    try:
        if not t.alive() and inv.transport == "local":
            return f"{spec.name}: network namespace {spec.netns} does not exist"
        t.run(["true"], timeout=30, check=True)
        return None
    except TransportError as e:
        return str(e).replace("\n", " ")
    except Exception as e:  # noqa: BLE001 - any other failure is still one line
        return f"{spec.name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def sudo_error(spec: HostSpec, t: Transport) -> str | None:
    """None when the host needs no sudo or ``sudo -n`` gives root, else the one-line reason."""
    if not spec.sudo:
        return None
    try:
        r = t.run(["id", "-u"], sudo=True, timeout=30)
    except TransportError as e:
        return str(e).replace("\n", " ")
    if r.stdout.strip() != "0":
        return f"{spec.name}: sudo does not give root (id -u said {r.stdout.strip() or r.stderr.strip()[:80]!r})"
    return None


def probe_host(inv: Inventory, spec: HostSpec) -> str | None:
    """None when the host answers (and sudo works if granted), else the one-line reason."""
    t = transport_for(inv, spec)
    try:
        return reach_error(inv, spec, t) or sudo_error(spec, t)
    finally:
        t.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.probe INVENTORY", file=sys.stderr)
        return EXIT_CONFIG
    try:
        inv = load_inventory(Path(args[0]))
    except ConfigError as e:
        print(f"faultline: error: {e}", file=sys.stderr)
        return EXIT_CONFIG
    if inv.embedded:
        print(f"{args[0]}: embedded {inv.embedded}: nothing to probe")
        return EXIT_OK
    bad = 0
    for spec in inv.hosts.values():
        why = probe_host(inv, spec)
        if why:
            bad += 1
            print(f"faultline: error: {why}", file=sys.stderr, flush=True)
        else:
            print(f"{spec.name}: ok ({inv.transport})", flush=True)
    return EXIT_INFRA if bad else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
