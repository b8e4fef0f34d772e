"""``python -m kraftsim controller|broker --config FILE``, ``python -m kraftsim cluster ...`` and
``python -m kraftsim versions [--json]`` (the Kafka releases and metadata versions kraftsim knows,
kraftsim/versions.py: how the harness, which never imports kraftsim, reads that table).

Why one entry point: the harness starts kraftsim exactly as it starts Kafka on a lab host — as
separate processes it can SIGKILL, restart and isolate (``ip netns exec NS python -m kraftsim
broker --config F``). Errors are one line on stderr and exit code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

# kio registers hypothesis strategies when hypothesis is importable; a kraftsim process never
# needs them and the import costs ~0.4 s per process start (the cluster must be ready in <= 5 s).
sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]


def _serve(role: str, config_path: str) -> int:
    from kraftsim.config import ConfigError, load
    from kraftsim.events import EventLog
    try:
        cfg = load(Path(config_path), role)
    except ConfigError as e:
        print(str(e), file=sys.stderr, flush=True)
        return 2
    if cfg["pid.file"]:
        try:
            Path(cfg["pid.file"]).parent.mkdir(parents=True, exist_ok=True)
            Path(cfg["pid.file"]).write_text(f"{os.getpid()}\n")
        except OSError as e:
            print(f"kraftsim: {config_path}: key 'pid.file': cannot write {cfg['pid.file']} ({e.strerror})",
                  file=sys.stderr, flush=True)
            return 2
    events = EventLog(cfg["event.log"], int(cfg["node.id"]), role)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if role == "controller":
            from kraftsim.controller import Controller
            node = Controller(cfg, events)
        else:
            from kraftsim.broker.server import BrokerServer
            node = BrokerServer(cfg, events)
        await node.run(stop)
        return int(getattr(node, "exit_code", 0))

    try:
        return asyncio.run(main())
    except OSError as e:
        key = "listeners" if e.errno in (98, 99, 13) else "log.dirs"
        print(f"kraftsim: {config_path}: key '{key}': cannot use it ({e.strerror or e})", file=sys.stderr, flush=True)
        return 2
    except Exception as e:  # storage identity mismatches and the like: one line, no traceback
        from kraftsim.raft.store import QuorumStateError
        from kraftsim.storage.manager import StorageConfigError
        if isinstance(e, (StorageConfigError, QuorumStateError)):
            key = "metadata.log.dir" if role == "controller" else "log.dirs"
            print(f"kraftsim: {config_path}: key '{key}': {e}", file=sys.stderr, flush=True)
            return 2
        raise
    finally:
        events.close()


def _versions(as_json: bool) -> int:
    import json

    from kraftsim.versions import table
    t = table()
    if as_json:
        print(json.dumps(t, separators=(",", ":")))
        return 0
    for line in t["lines"]:
        print(f"{line['line']:<5} metadata.version {line['metadata_versions'][0]} .. {line['metadata_version']:<9} "
              f"releases {', '.join(line['releases'])}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from kraftsim import __version__
    ap = argparse.ArgumentParser(prog="python -m kraftsim", description="embedded KRaft cluster for faultline")
    ap.add_argument("--version", action="version", version=f"kraftsim {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for role in ("controller", "broker"):
        p = sub.add_parser(role)
        p.add_argument("--config", required=True)
    c = sub.add_parser("cluster")
    c.add_argument("--brokers", type=int, default=3)
    c.add_argument("--controllers", type=int, default=1, help="controllers (a raft quorum when more than 1)")
    c.add_argument("--dir", required=True)
    c.add_argument("--host-prefix", default="127.0.0")
    c.add_argument("--base-port", type=int, default=19092)
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--check", action="store_true",
                   help="validate the arguments and settings, print the features in force, start nothing")
    v = sub.add_parser("versions", help="the Kafka releases and metadata versions kraftsim knows")
    v.add_argument("--json", action="store_true", help="one JSON document (what the harness reads)")
    args = ap.parse_args(argv)
    if args.cmd == "versions":
        return _versions(args.json)
    if args.cmd == "cluster":
        from kraftsim.cluster import run_cluster
        return run_cluster(args)
    return _serve(args.cmd, args.config)


if __name__ == "__main__":
    sys.exit(main())
