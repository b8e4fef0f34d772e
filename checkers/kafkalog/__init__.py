"""Kafka's own logs as an event source: log4j files in, kraftsim's event records out.

On a real Kafka cluster there is no ``events.jsonl``: the broker and controller write
``server.log``, ``controller.log`` and ``state-change.log`` (Kafka's ``config/log4j.properties``
/ ``log4j2.yaml``). The harness copies them into ``RUN/cluster-logs/<host>/``
(harness/cluster.py); :func:`read_cluster_logs` reads every host folder that has them and
no ``events.jsonl``, and returns the same records kraftsim writes (docs/kraftsim.md, "Events":
``wall``, ``node``, ``role``, ``event`` and the event's fields) plus ``host``, ``source`` and
``line`` (the file, relative to the run directory, and the line of the statement that made the
event, as checkers/load.py gives kraftsim's), so attribution and the loss stories
work on real Kafka as on kraftsim. Format details, version differences and what the logs
cannot say: docs/kafka-logs.md.

Pure standard library (runs on the driver before Spark starts). A line it does not
understand is counted (:class:`Stats`), never raised.
"""
from __future__ import annotations

import heapq
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from checkers.kafkalog import statements
from checkers.kafkalog.assemble import Assembler
from checkers.kafkalog.log4j import META_FILE, ReadStats, log_files, parse_zone, read_meta, read_records

__all__ = ["read_cluster_logs", "host_dirs", "has_kafka_logs", "Stats", "META_FILE"]


@dataclass
class Stats:
    """What the Kafka logs of a run held, per the reader: for the verdict and the collector."""
    files: int = 0
    lines: int = 0
    records: int = 0
    used: int = 0              # records that made or completed an event
    other: int = 0             # records of no interest (most of server.log)
    not_understood: int = 0    # records that start like a statement we read but did not parse
    not_records: int = 0       # lines that are neither a record nor a continuation (cut files)
    events: int = 0
    problems: list[str] = field(default_factory=list)   # one line each (bad time zone, unreadable file)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def has_kafka_logs(host_dir: Path) -> bool:
    return bool(log_files(host_dir))


def host_dirs(cluster_logs: Path) -> list[Path]:
    """Host folders whose events come from Kafka's logs: they have log files and no events.jsonl."""
    if not cluster_logs.is_dir():
        return []
    return [d for d in sorted(cluster_logs.iterdir())
            if d.is_dir() and not (d / "events.jsonl").exists() and has_kafka_logs(d)]


def _host_node(host_dir: Path, meta: dict[str, Any], records: list) -> int | None:
    """The host's node id: the collector's note of the inventory, else the first log prefix naming one."""
    nid = meta.get("node_id")
    if isinstance(nid, int) and not isinstance(nid, bool):
        return nid
    for r in records:
        n = statements.node_of(r.message)
        if n is not None:
            return n
    return None


def read_cluster_logs(cluster_logs: Path, hosts: list[Path] | None = None,
                      stats: Stats | None = None) -> list[dict[str, Any]]:
    """kraftsim-shaped event records from the Kafka logs of ``hosts`` (default: :func:`host_dirs`).

    All hosts are read into one time-ordered stream before events are made: a controller's
    fence explains a broker's leader change, a fetcher's line gives the reason of the log's
    truncation. Events are returned in time order.
    """
    st = stats if stats is not None else Stats()
    streams: list[list[tuple[tuple, dict[str, Any]]]] = []      # one per file, in the file's own order
    for hi, hd in enumerate(hosts if hosts is not None else host_dirs(cluster_logs)):
        meta = read_meta(hd)
        try:
            zone = parse_zone(meta.get("timezone"))
        except ValueError as e:
            st.problems.append(f"{hd / META_FILE}: field 'timezone': {e}; read as UTC")
            zone = parse_zone(None)
        rs = ReadStats()
        per_file = []
        for fi, f in enumerate(log_files(hd)):
            st.files += 1
            try:
                per_file.append((fi, read_records(f, zone, rs)))
            except OSError as e:
                st.problems.append(f"{f}: unreadable ({e.strerror or e})")
        st.lines += rs.lines
        st.records += rs.records
        st.not_records += rs.orphan
        host_node = _host_node(hd, meta, [r for _, recs in per_file for r in recs])
        for fi, records in per_file:
            stream = []
            for r in records:
                got = statements.parse(r.message, r.thrown)
                if got is None:
                    st.other += 1
                    continue
                if got is False:
                    st.not_understood += 1
                    continue
                node = statements.node_of(r.message)
                role = got.pop("role", None) or (
                    "controller" if r.logger.startswith("org.apache.kafka.controller") else "broker")
                got.update(wall=r.wall, node=node if node is not None else host_node, role=role,
                           host=hd.name, source=f"{cluster_logs.name}/{hd.name}/{r.file}", line=r.line)
                stream.append(((r.wall, _causal(got), hi, fi), got))
            streams.append(stream)
    asm = Assembler()
    n = 0
    # Each file in its own order; across files by time, and where clocks tie (the same
    # millisecond) by the epochs that order them causally: a broker logs its registration's
    # epoch after the controller wrote it, so "registered with broker epoch 31" comes before
    # the controller's record of epoch 32 stamped in the same millisecond.
    for _, o in heapq.merge(*streams, key=lambda x: x[0]):
        n += 1
        asm.add(o)
    st.used = n - asm.unused - asm.replayed
    asm.events.sort(key=lambda e: e["wall"])
    for e in asm.events:
        for k in [k for k in e if k.startswith("_")]:
            del e[k]
    st.events = len(asm.events)
    return asm.events


def _causal(o: dict[str, Any]) -> int:
    """The epoch that orders an observation among others of the same millisecond: a
    registration's broker epoch (the metadata offset of its record), a partition state's
    partition epoch; -1 when the line states neither."""
    if o["kind"] == "registered":
        return int(o["broker_epoch"])
    pe = o.get("partition_epoch")
    return int(pe) if isinstance(pe, int) else -1
