"""The log4j levels preflight reads: Kafka 3.x ``log4j.properties`` and 4.x ``log4j2.yaml``.

The configs below have the shape of the files Kafka ships (``config/log4j.properties`` of the
3.x releases, ``config/log4j2.yaml`` from 4.0: a root logger at INFO, ``kafka`` and
``org.apache.kafka`` at INFO, ``state.change.logger`` and ``org.apache.kafka.controller`` with
their own appenders at INFO), trimmed to the logger lines. Each needed logger resolves through
its nearest configured ancestor as log4j resolves it.
"""
from __future__ import annotations

from checkers.kafkalog.loggers import NEEDED
from harness.preflight import log4j

KAFKA3 = """\
log4j.rootLogger=INFO, stdout, kafkaAppender
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.kafka.request.logger=WARN, requestAppender
log4j.additivity.kafka.request.logger=false
log4j.logger.kafka.network.RequestChannel$=WARN, requestAppender
log4j.logger.org.apache.kafka.controller=INFO, controllerAppender
log4j.additivity.org.apache.kafka.controller=false
log4j.logger.kafka.controller=TRACE, controllerAppender
log4j.logger.kafka.log.LogCleaner=INFO, cleanerAppender
log4j.logger.state.change.logger=INFO, stateChangeAppender
log4j.additivity.state.change.logger=false
log4j.logger.kafka.authorizer.logger=INFO, authorizerAppender
"""

KAFKA4 = """\
Configuration:
  Properties:
    Property:
      - name: "kafka.logs.dir"
        value: "."
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
        - ref: KafkaAppender
    Logger:
      - name: kafka
        level: INFO
      - name: org.apache.kafka
        level: INFO
      - name: kafka.request.logger
        level: WARN
        additivity: false
      - name: org.apache.kafka.controller
        level: INFO
        additivity: false
      - name: state.change.logger
        level: INFO
        additivity: false
"""


def test_kafka_default_configs_give_the_reader_everything():
    for text, name in ((KAFKA3, "log4j.properties"), (KAFKA4, "log4j2.yaml")):
        configured = log4j.levels(text, name)
        assert log4j.too_quiet(configured) == [], name
        assert log4j.effective(configured, "kafka.cluster.Partition") == ("INFO", "kafka")
        assert log4j.effective(configured, "state.change.logger") == ("INFO", "state.change.logger")
        assert log4j.effective(configured, "kafka.request.logger")[0] == "WARN"


def test_state_change_logger_at_warn_is_named_with_what_is_lost():
    text = KAFKA3.replace("log4j.logger.state.change.logger=INFO", "log4j.logger.state.change.logger=WARN")
    quiet = log4j.too_quiet(log4j.levels(text, "log4j.properties"))
    assert [(q[0], q[1], q[2]) for q in quiet] == [("state.change.logger", "WARN", "state.change.logger")]
    assert "elections" in quiet[0][3]
    assert log4j.fix_line("state.change.logger", False) == "set log4j.logger.state.change.logger=INFO, ..."


def test_a_quiet_ancestor_is_one_line_and_a_finer_child_overrides_it():
    text = KAFKA4.replace("      - name: kafka\n        level: INFO", "      - name: kafka\n        level: WARN")
    quiet = log4j.too_quiet(log4j.levels(text, "log4j2.yaml"))
    # every kafka.* logger the reader needs is decided by `kafka`: one line for it
    assert [(q[1], q[2]) for q in quiet] == [("WARN", "kafka")]
    assert sum(1 for n in NEEDED if n.startswith("kafka.")) > 1
    # a child set finer than its quiet parent logs what the reader needs
    text2 = text.replace("    Logger:\n", "    Logger:\n      - name: kafka.cluster.Partition\n        level: DEBUG\n")
    assert log4j.effective(log4j.levels(text2, "log4j2.yaml"), "kafka.cluster.Partition") == ("DEBUG", "kafka.cluster.Partition")
    assert log4j.fix_line("kafka", True) == "set level: INFO on the Logger named kafka"


def test_root_at_error_without_kafka_loggers_blinds_everything_once():
    text = "log4j.rootLogger=ERROR, stdout\n"
    quiet = log4j.too_quiet(log4j.levels(text, "log4j.properties"))
    assert [(q[1], q[2]) for q in quiet] == [("ERROR", "root")]


def test_a_variable_level_is_unknown_not_a_fault():
    text = KAFKA4.replace("    Root:\n      level: INFO", "    Root:\n      level: \"${env:ROOT_LEVEL}\"")
    configured = log4j.levels(text, "log4j2.yaml")
    assert configured[""] is None
    assert log4j.too_quiet(configured) == []


def test_unreadable_formats_say_so():
    try:
        log4j.levels("<Configuration/>", "log4j2.xml")
    except log4j.UnreadableConfig as e:
        assert "log4j2.xml" in str(e)
    else:
        raise AssertionError("an XML config was read")
    try:
        log4j.levels("Configuration: [", "log4j2.yaml")
    except log4j.UnreadableConfig as e:
        assert "not YAML" in str(e)
    else:
        raise AssertionError("broken YAML was read")
