"""``python -m nemeses.proxy --listen HOST:PORT --upstream HOST:PORT[,HOST:PORT...] --control-dir DIR --events FILE``

One listener per upstream (ports PORT, PORT+1, ... or any free ones for port 0); the ``ready``
file in the control directory lists them, one line per upstream, in order.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path


def _addr(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"want HOST:PORT, got {s!r}")
    return host, int(port)


def _addrs(s: str) -> list[tuple[str, int]]:
    return [_addr(x.strip()) for x in s.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nemeses.proxy", description=__doc__)
    ap.add_argument("--listen", type=_addr, required=True, help="HOST:PORT brokers connect to (port 0 = any)")
    ap.add_argument("--upstream", type=_addrs, required=True,
                    help="HOST:PORT of the controller, or a comma-separated list (one per quorum voter)")
    ap.add_argument("--control-dir", type=Path, required=True)
    ap.add_argument("--events", type=Path, required=True, help="proxy-events.jsonl")
    ap.add_argument("--node", type=int, default=-1, help="node id written in events")
    ap.add_argument("--source", default=None,
                    help="source address of upstream connections (DNAT placement excludes it)")
    a = ap.parse_args(argv)
    from nemeses.proxy.server import Proxy
    try:
        asyncio.run(Proxy(a.listen, a.upstream, a.control_dir, a.events, a.node, source=a.source).serve())
    except OSError as e:
        print(f"proxy: cannot listen on {a.listen[0]}:{a.listen[1]}: {e.strerror or e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
