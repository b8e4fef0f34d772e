"""Kafka's log4j configuration: the level each logger the event reader needs really logs at.

Why: faultline reads elections, ISR changes, truncations and recoveries from Kafka's INFO lines
(checkers.kafkalog.loggers.NEEDED). A lab that raised ``state.change.logger`` to WARN to keep
its disks quiet gives a run with no events and no loss stories, and nothing says why. So
preflight reads the config the broker runs with and resolves each needed logger as log4j does:
the level of the nearest configured ancestor by dotted name (``kafka.cluster.Partition`` <-
``kafka.cluster`` <- ``kafka`` <- the root logger).

Two formats: log4j 1 properties (Kafka 3.x ``config/log4j.properties``: ``log4j.rootLogger=INFO,
appender``, ``log4j.logger.NAME=LEVEL, appender``) and log4j2 YAML (Kafka 4.x
``config/log4j2.yaml``: ``Configuration.Loggers.Root.level`` and ``Configuration.Loggers.Logger``,
a list of ``{name, level}``). A level given as a variable (``${...}``) is unknown, not a fault.
"""
from __future__ import annotations

from typing import Any

import yaml

from checkers.kafkalog.loggers import LEVEL as NEEDED_LEVEL, NEEDED
from nemeses.hostinfo import parse_properties

#: log4j's levels from the most verbose to off (org.apache.logging.log4j.Level)
ORDER = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
ROOT = ""


class UnreadableConfig(ValueError):
    """The file is not a log4j config this module reads (one line)."""


def levels(text: str, name: str) -> dict[str, str | None]:
    """Logger name (``""`` for the root) -> its configured level (upper case), or None when the
    level is a variable; by the file name's format (``.yaml``/``.yml``: log4j2, else log4j 1)."""
    if name.endswith((".yaml", ".yml")):
        return _levels_log4j2_yaml(text)
    if name.endswith(".xml") or name.endswith(".json"):
        raise UnreadableConfig(f"{name}: faultline reads log4j.properties and log4j2.yaml, not this format")
    return _levels_properties(text)


def _level(v: Any) -> str | None:
    if v is None:
        return None
    text = str(v).strip().split(",")[0].strip().upper()
    return text if text in ORDER else None


def _levels_properties(text: str) -> dict[str, str | None]:
    props = parse_properties(text)
    out: dict[str, str | None] = {}
    root = props.get("log4j.rootLogger", props.get("log4j.rootCategory"))
    if root is not None:
        out[ROOT] = _level(root)
    for key, value in props.items():
        for prefix in ("log4j.logger.", "log4j.category."):
            if key.startswith(prefix):
                lvl = value.split(",")[0].strip()
                if lvl:  # "log4j.logger.x=, appender" inherits its level
                    out[key[len(prefix):]] = _level(lvl)
    return out


def _levels_log4j2_yaml(text: str) -> dict[str, str | None]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UnreadableConfig(f"not YAML ({str(e).splitlines()[0]})") from None
    conf = doc.get("Configuration") if isinstance(doc, dict) else None
    loggers = conf.get("Loggers") if isinstance(conf, dict) else None
    if not isinstance(loggers, dict):
        raise UnreadableConfig("no Configuration.Loggers section (a log4j2 YAML config has one)")
    out: dict[str, str | None] = {}
    root = loggers.get("Root")
    if isinstance(root, dict):
        out[ROOT] = _level(root.get("level"))
    entries = loggers.get("Logger") or []
    if isinstance(entries, dict):
        entries = [entries]
    for e in entries if isinstance(entries, list) else []:
        if isinstance(e, dict) and e.get("name") and "level" in e:
            out[str(e["name"])] = _level(e.get("level"))
    return out


def effective(configured: dict[str, str | None], logger: str) -> tuple[str | None, str]:
    """(the level ``logger`` logs at, the configured name that decides it): the logger itself or
    its nearest configured ancestor, else the root; log4j's default root level is ERROR (log4j2)
    / DEBUG (log4j 1) but Kafka's configs always set it, so an unset root is unknown (None)."""
    name = logger
    while True:
        if name in configured:
            return configured[name], name or "root"
        if not name:
            return None, "root"
        name = name.rpartition(".")[0]


def too_quiet(configured: dict[str, str | None]) -> list[tuple[str, str, str, str]]:
    """The needed loggers that log above INFO: (logger, its level, the name deciding it, what
    the reader loses), one per deciding name (``kafka=WARN`` is one line, not five)."""
    out: list[tuple[str, str, str, str]] = []
    seen: set[str] = set()
    for logger, what in NEEDED.items():
        lvl, by = effective(configured, logger)
        if lvl is None or ORDER.index(lvl) <= ORDER.index(NEEDED_LEVEL) or by in seen:
            continue
        seen.add(by)
        out.append((logger, lvl, by, what))
    return out


def fix_line(by: str, fmt_yaml: bool) -> str:
    """How to raise a deciding logger to INFO in the file's own syntax."""
    if fmt_yaml:
        return ("set level: INFO on the Root logger" if by == "root" else
                f"set level: INFO on the Logger named {by}")
    return "set log4j.rootLogger=INFO, ..." if by == "root" else f"set log4j.logger.{by}=INFO, ..."
