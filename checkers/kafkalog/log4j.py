"""Read Kafka's log4j files: records with a wall time, a level, a message and a logger.

Kafka's shipped logging configuration (``config/log4j.properties`` up to 3.9,
``config/log4j2.yaml`` from 4.0) writes every appender with the pattern
``[%d] %p %m (%c)%n``::

    [2024-05-01 12:00:00,123] INFO [Partition foo-0 broker=1] ISR updated to 1,2 and version updated to 4 (kafka.cluster.Partition)

Strimzi's broker images write ``%d{ISO8601} %p %m (%c) [%t]%n`` (no brackets around the date,
the thread after the logger); both are read.

``%d`` is ``yyyy-MM-dd HH:mm:ss,SSS`` in the JVM's time zone (the host's unless the broker
runs with ``-Duser.timezone``), so a record's wall time needs that zone: the collector asks
the host (``date +%z``) or takes ``kafka_log_timezone`` from the inventory, and records it in
``kafka-logs.json`` next to the files. A message can span lines (stack traces, multi-line
exceptions): lines that do not start a record belong to the record before them.

The appenders roll hourly (``DailyRollingFileAppender``, ``DatePattern='.'yyyy-MM-dd-HH``),
so ``server.log.2024-05-01-11`` holds the hour before ``server.log``; every file of a kind is
read and the records are ordered by time.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: the three files Kafka's log4j configuration writes that carry cluster state changes
#: (``${kafka.logs.dir}/server.log``, ``controller.log``, ``state-change.log``)
KINDS = ("server", "controller", "state-change")
#: Kafka 4.0's ``config/log4j2.yaml`` rolls ``state-change.log`` to ``stage-change.log.<hour>``
#: (its RollingFile ``filePattern``): a 4.0/4.1 broker's log dir (and faultline's collector,
#: harness/cluster.py) holds the older hours of the state-change log under that name
FILE_RE = re.compile(r"^(server|controller|state-change|stage-change)\.log(?:\.(\d{4}-\d{2}-\d{2}(?:-\d{2})?))?$")
#: written by the collector next to the files: node id, role, time zone, what was copied
META_FILE = "kafka-logs.json"

#: ``docker compose logs`` puts ``service  | `` before every line of a container's stdout (where
#: the Bitnami and apache/kafka images send all of Kafka's loggers); a file saved from it is
#: read as the log it wraps. Strimzi's broker images log ``%d{ISO8601} %p %m (%c) [%t]%n``: the
#: date without brackets and the thread after the logger
#: (``2022-10-14 22:52:00,541 INFO [LogLoader partition=...] Recovering unflushed segment 0
#: (kafka.log.LogLoader) [log-recovery-/var/lib/kafka/data-0/kafka-log2]``)
_RECORD_RE = re.compile(
    r"^(?:[\w.-]+\s+\|\s)?(?:\[(?P<d>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})[,.](?P<ms>\d{3})\]|"
    r"(?P<d2>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})[,.](?P<ms2>\d{3}))\s+"
    r"(?P<level>TRACE|DEBUG|INFO|WARN|ERROR|FATAL)\s+(?P<msg>.*)$")
#: the logger at the end of the pattern (``%c``, or ``%c:%L`` as Kafka's test log4j config
#: writes it: ``(org.apache.kafka.controller.ReplicationControlManager:1700)``), then Strimzi's
#: ``[%t]``; a message may itself contain parentheses
_LOGGER_RE = re.compile(r"^(.*) \(([A-Za-z_$][\w.$-]*)(?::\d+)?\)(?: \[[^\]\n]*\])?\s*$", re.S)


@dataclass(frozen=True)
class Record:
    """One log4j record (its continuation lines joined with newlines)."""
    wall: float
    level: str
    message: str
    logger: str
    file: str           # the file's name inside the host folder
    line: int           # 1-based line of the record's first line
    #: the line after a formatted record that logged a Throwable: its toString, ``Class: message``
    #: (ProcessTerminatingFaultHandler's "Encountered fatal fault: ..." says why only there)
    thrown: str = ""


def parse_zone(text: str | None) -> tzinfo:
    """``+0200``, ``+02:00``, ``-0500``, ``Z``/``UTC`` or an IANA name; None or empty: UTC."""
    if not text or text.strip().upper() in ("Z", "UTC", "GMT"):
        return timezone.utc
    s = text.strip()
    m = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", s)
    if m:
        delta = timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        return timezone(-delta if m.group(1) == "-" else delta)
    try:
        return ZoneInfo(s)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"time zone {text!r}; want +HHMM, +HH:MM, UTC or an IANA name such as Europe/Berlin") from None


def read_meta(host_dir: Path) -> dict:
    """The collector's ``kafka-logs.json`` (empty when absent or unreadable: defaults apply)."""
    p = host_dir / META_FILE
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def log_files(host_dir: Path) -> list[Path]:
    """Kafka's log files in a host folder, rolled files (older hours) before the current one."""
    found = [p for p in host_dir.iterdir() if p.is_file() and FILE_RE.match(p.name)] if host_dir.is_dir() else []
    return sorted(found, key=lambda p: (FILE_RE.match(p.name).group(1), FILE_RE.match(p.name).group(2) is None,  # type: ignore[union-attr]
                                        FILE_RE.match(p.name).group(2) or ""))  # type: ignore[union-attr]


@dataclass
class ReadStats:
    """What reading a host's files met: counted, never raised."""
    lines: int = 0
    records: int = 0
    continuation: int = 0     # lines that belong to the record before them (stack traces)
    orphan: int = 0           # lines before any record (a file cut mid-record by rolling)
    no_logger: int = 0        # records whose message does not end with "(logger)"
    repeated: int = 0         # a record written twice in a row by two appenders (read once)


def read_records(path: Path, zone: tzinfo, stats: ReadStats) -> list[Record]:
    """Every record of one file; undecodable bytes are replaced, odd lines counted."""
    out: list[Record] = []
    cur: list | None = None     # [wall, level, message lines, line]
    seconds: dict[str, float | None] = {}     # "yyyy-MM-dd HH:mm:ss" -> epoch seconds (a busy log repeats them)

    def epoch(text: str) -> float | None:
        if text not in seconds:
            try:
                d = datetime(int(text[0:4]), int(text[5:7]), int(text[8:10]), int(text[11:13]), int(text[14:16]),
                             int(text[17:19]), tzinfo=zone)
                seconds[text] = d.timestamp()
            except ValueError:
                seconds[text] = None
        return seconds[text]

    def flush() -> None:
        if cur is None:
            return
        text = "\n".join(cur[2])
        # an exception's stack trace follows the formatted line, which ends with the logger;
        # a message with newlines in it has the logger after its last line
        m = _LOGGER_RE.match(cur[2][0])
        if m is None and len(cur[2]) > 1:
            m = _LOGGER_RE.match(text)
        thrown = ""
        if m is None:
            stats.no_logger += 1
            msg, logger = cur[2][0], ""
        else:
            msg, logger = m.group(1), m.group(2)
            if len(cur[2]) > 1 and _LOGGER_RE.match(cur[2][0]):
                thrown = cur[2][1].strip()
        prev = out[-1] if out else None
        if prev is not None and (prev.wall, prev.level, prev.message, prev.logger) == (cur[0], cur[1], msg, logger):
            # One event, two lines: a logger given its own appender while the root logger's
            # appender writes to the same file (log4j additivity, e.g. ``log4j.logger.
            # org.apache.kafka.controller=INFO, stdout`` beside ``rootLogger=..., stdout``) writes
            # every record twice, back to back, in the same millisecond. Kafka itself never
            # repeats a statement verbatim within a millisecond (each names its partition,
            # broker or epoch), so the second copy is the same record.
            stats.repeated += 1
            return
        out.append(Record(cur[0], cur[1], msg, logger, path.name, cur[3], thrown))

    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for n, raw in enumerate(fh, 1):
            stats.lines += 1
            line = raw.rstrip("\r\n")
            m = _RECORD_RE.match(line)
            if m is None:
                if cur is None:
                    if line.strip():
                        stats.orphan += 1
                else:
                    stats.continuation += 1
                    cur[2].append(line)
                continue
            flush()
            sec = epoch(m.group("d") or m.group("d2"))
            if sec is None:         # a garbled timestamp: not a record
                stats.orphan += 1
                cur = None
                continue
            stats.records += 1
            cur = [round(sec + int(m.group("ms") or m.group("ms2")) / 1000.0, 3), m.group("level"), [m.group("msg")], n]
    flush()
    return out
