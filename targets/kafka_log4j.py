"""The log4j configuration of an embedded Apache Kafka node: Kafka's own, written by faultline.

Why faultline writes it: Maven ships Kafka's jars, not its ``config/`` directory, and without a
configuration log4j writes nothing where faultline's Kafka-log reader looks (checkers/kafkalog:
``server.log``, ``controller.log`` and ``state-change.log`` in ``kafka.logs.dir``). The files below
are the distribution's ``config/log4j.properties`` (3.x, read by reload4j) and
``config/log4j2.yaml`` (4.x, KAFKA-9366), with the same appenders, file names, hourly roll,
pattern and logger levels, minus the console appender (a node's stdout is its process log) and
the request/authorizer appenders' files, which the reader does not read. The levels are Kafka's,
which are what the reader needs (checkers/kafkalog/loggers.py; preflight checks a lab's).
"""
from __future__ import annotations

from pathlib import Path

PATTERN = "[%d] %p %m (%c)%n"

def _daily(name: str, file: str) -> str:
    return (f"log4j.appender.{name}=org.apache.log4j.DailyRollingFileAppender\n"
            f"log4j.appender.{name}.DatePattern='.'yyyy-MM-dd-HH\n"
            f"log4j.appender.{name}.File=${{kafka.logs.dir}}/{file}\n"
            f"log4j.appender.{name}.layout=org.apache.log4j.PatternLayout\n"
            f"log4j.appender.{name}.layout.ConversionPattern={PATTERN}\n\n")


#: config/log4j.properties of 3.9.0 (the same from 3.4 on), without the stdout appender
LOG4J1 = ("# Kafka's config/log4j.properties (3.x), as faultline's embedded Apache Kafka target runs it\n"
          "log4j.rootLogger=INFO, kafkaAppender\n\n"
          + _daily("kafkaAppender", "server.log") + _daily("stateChangeAppender", "state-change.log")
          + _daily("controllerAppender", "controller.log") + _daily("cleanerAppender", "log-cleaner.log")
          + """log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.network.RequestChannel$=WARN
log4j.logger.org.apache.kafka.controller=INFO, controllerAppender
log4j.additivity.org.apache.kafka.controller=false
log4j.logger.kafka.controller=TRACE, controllerAppender
log4j.additivity.kafka.controller=false
log4j.logger.kafka.log.LogCleaner=INFO, cleanerAppender
log4j.additivity.kafka.log.LogCleaner=false
log4j.logger.state.change.logger=INFO, stateChangeAppender
log4j.additivity.state.change.logger=false
""")


def _rolling(name: str, file: str, rolled: str) -> str:
    return f"""      - name: {name}
        fileName: "${{sys:kafka.logs.dir}}/{file}"
        filePattern: "${{sys:kafka.logs.dir}}/{rolled}.%d{{yyyy-MM-dd-HH}}"
        PatternLayout:
          pattern: "{PATTERN}"
        TimeBasedTriggeringPolicy:
          modulate: true
          interval: 1
"""


#: config/log4j2.yaml of 4.0 (KAFKA-9366), without the console appender; it rolls state-change.log
#: to ``stage-change.log.<hour>``, as 4.0's does (harness/cluster.py collects both names)
LOG4J2 = ("# Kafka's config/log4j2.yaml (4.x), as faultline's embedded Apache Kafka target runs it\n"
          "Configuration:\n  Appenders:\n    RollingFile:\n"
          + _rolling("KafkaAppender", "server.log", "server.log")
          + _rolling("StateChangeAppender", "state-change.log", "stage-change.log")
          + _rolling("ControllerAppender", "controller.log", "controller.log")
          + _rolling("CleanerAppender", "log-cleaner.log", "log-cleaner.log")
          + """  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: KafkaAppender
    Logger:
      - name: kafka
        level: INFO
      - name: org.apache.kafka
        level: INFO
      - name: kafka.request.logger
        level: WARN
      - name: kafka.network.RequestChannel$
        level: WARN
      - name: org.apache.kafka.controller
        level: INFO
        additivity: false
        AppenderRef:
          ref: ControllerAppender
      - name: kafka.controller
        level: TRACE
        additivity: false
        AppenderRef:
          ref: ControllerAppender
      - name: kafka.log.LogCleaner
        level: INFO
        additivity: false
        AppenderRef:
          ref: CleanerAppender
      - name: state.change.logger
        level: INFO
        additivity: false
        AppenderRef:
          ref: StateChangeAppender
""")


def write(directory: Path, kind: str) -> tuple[Path, str]:
    """Write the release's log4j configuration into ``directory``; returns (file, the JVM
    system property that points log4j at it)."""
    if kind == "log4j2":
        f = directory / "log4j2.yaml"
        f.write_text(LOG4J2, encoding="utf-8")
        return f, f"-Dlog4j2.configurationFile={f}"
    f = directory / "log4j.properties"
    f.write_text(LOG4J1, encoding="utf-8")
    return f, f"-Dlog4j.configuration=file:{f}"
