"""A raft node alone: ``python -m kraftsim.raft --config FILE``.

Why it exists: the quorum's conformance tests (tests/kraftsim/raft/) must run three real
processes they can SIGKILL, SIGSTOP and cut off with iptables, with nothing but the raft layer
in them, so that a lost record or a second leader can only be the raft layer's fault.

Besides Kafka's keys it reads three test-only ones:
- ``raftnode.append.interval.ms``: while leader, append one record every so often
  (``{"type": "raftnode", "writer", "epoch", "seq", "wall"}``) — a stand-in for the controller;
- ``raftnode.applied.file``: the state machine — every committed record handed to it is written
  there as ``{"offset", "epoch", "record"}`` lines (flushed per line: SIGKILL keeps them);
- ``raftnode.status.file``: a JSON snapshot of the quorum state, rewritten every 100 ms.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from kraftsim.events import EventLog
from kraftsim.raft.client import NotLeader, RaftClient, write_json_atomic
from kraftsim.raft.config import NodeConfig
from kraftsim.raft.log import RaftLog
from kraftsim.wire import Server


class RaftNode:
    def __init__(self, cfg: NodeConfig, events: EventLog):
        self.cfg = cfg
        self.ev = events
        self.applied_fh = open(cfg.applied_file, "a", buffering=1) if cfg.applied_file else None
        self.client: RaftClient | None = None
        self.seq = 0

    def _on_commit(self, batch: list[tuple[int, int, dict[str, Any]]]) -> None:
        if self.applied_fh is not None:
            self.applied_fh.write("".join(json.dumps({"offset": o, "epoch": e, "record": r}, separators=(",", ":")) + "\n"
                                          for o, e, r in batch))

    async def _workload(self) -> None:
        assert self.client is not None
        interval = self.cfg.append_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            c = self.client
            if c.is_leader():
                self.seq += 1
                try:
                    c.append([{"type": "raftnode", "writer": self.cfg.node_id, "epoch": c.quorum.epoch,
                               "seq": self.seq, "wall": time.time()}])
                except NotLeader:
                    pass

    async def _status(self) -> None:
        assert self.client is not None and self.cfg.status_file is not None
        while True:
            try:
                write_json_atomic(self.cfg.status_file, self.client.status())
            except OSError:
                pass
            await asyncio.sleep(0.1)

    async def run(self, stop: asyncio.Event) -> None:
        cfg = self.cfg
        holder: dict[str, RaftClient] = {}
        log = RaftLog(cfg.metadata_dir, cfg.node_id, cfg.cluster_id, segment_bytes=cfg.segment_bytes,
                      on_event=lambda n, f: holder["c"].storage_event(n, f) if "c" in holder else self.ev.emit(n, **f))
        self.client = client = RaftClient(cfg.node_id, cfg.cluster_id, cfg.host, cfg.quorum, log, self.ev,
                                          on_commit=self._on_commit)
        holder["c"] = client
        server = Server(client.api_versions(), client.handlers(), on_error=self.ev.log)
        await server.start(cfg.host, cfg.port)
        tasks = []
        if cfg.append_interval_ms > 0:
            tasks.append(asyncio.ensure_future(self._workload()))
        if cfg.status_file is not None:
            tasks.append(asyncio.ensure_future(self._status()))
        try:
            await client.run(stop)
        finally:
            for t in tasks:
                t.cancel()
            server.close()
            if cfg.status_file is not None:
                try:
                    write_json_atomic(cfg.status_file, {**client.status(), "state": "Stopped"})
                except OSError:
                    pass
            log.close(clean=True)
            if self.applied_fh:
                self.applied_fh.close()


def main(argv: list[str] | None = None) -> int:
    import argparse

    from kraftsim.properties import ConfigError
    from kraftsim.raft.config import load_node_config
    from kraftsim.raft.store import QuorumStateError
    from kraftsim.storage.manager import StorageConfigError

    ap = argparse.ArgumentParser(prog="python -m kraftsim.raft", description="a kraftsim raft node alone (tests)")
    ap.add_argument("--config", required=True)
    args = ap.parse_args(argv)
    try:
        cfg = load_node_config(Path(args.config))
    except ConfigError as e:
        print(str(e), file=sys.stderr, flush=True)
        return 2
    if cfg.pid_file:
        cfg.pid_file.parent.mkdir(parents=True, exist_ok=True)
        cfg.pid_file.write_text(f"{os.getpid()}\n")
    events = EventLog(cfg.event_log, cfg.node_id, "controller")

    async def amain() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await RaftNode(cfg, events).run(stop)

    try:
        asyncio.run(amain())
        return 0
    except OSError as e:
        key = "listeners" if e.errno in (98, 99, 13) else "metadata.log.dir"
        print(f"kraftsim: {args.config}: key '{key}': cannot use it ({e.strerror or e})", file=sys.stderr, flush=True)
        return 2
    except (StorageConfigError, QuorumStateError) as e:
        print(f"kraftsim: {args.config}: key 'metadata.log.dir': {e}", file=sys.stderr, flush=True)
        return 2
    finally:
        events.close()
