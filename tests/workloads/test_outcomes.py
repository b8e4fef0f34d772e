"""The delivery-report table: which errors are definite failures and which are unknown.

Uses real confluent_kafka.KafkaError objects (what the delivery callback receives).
Known-bad controls: NOT_ENOUGH_REPLICAS_AFTER_APPEND and REQUEST_TIMED_OUT were appended on
the leader (docs/seeds.md#seed-003-2-6/§2.7) and must never be recorded as ``fail``.
"""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from workloads.outcomes import FAIL, INFO, OK, classify, classify_code, error_name
from workloads.producer import build_config, retries_possible

CASES = [
    # code, retries possible?, expected type, expected name
    (KafkaError.NOT_LEADER_FOR_PARTITION, False, FAIL, "NOT_LEADER_OR_FOLLOWER"),
    (KafkaError.NOT_LEADER_FOR_PARTITION, True, INFO, "NOT_LEADER_OR_FOLLOWER"),
    (KafkaError.NOT_ENOUGH_REPLICAS, False, FAIL, "NOT_ENOUGH_REPLICAS"),
    (KafkaError.NOT_ENOUGH_REPLICAS, True, INFO, "NOT_ENOUGH_REPLICAS"),
    (KafkaError.LEADER_NOT_AVAILABLE, False, FAIL, "LEADER_NOT_AVAILABLE"),
    (KafkaError.UNKNOWN_TOPIC_OR_PART, False, FAIL, "UNKNOWN_TOPIC_OR_PARTITION"),
    (KafkaError.MSG_SIZE_TOO_LARGE, True, FAIL, "MESSAGE_TOO_LARGE"),
    (KafkaError.INVALID_MSG, True, FAIL, "CORRUPT_MESSAGE"),
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, True, FAIL, "TOPIC_AUTHORIZATION_FAILED"),
    (KafkaError._UNKNOWN_PARTITION, True, FAIL, "_UNKNOWN_PARTITION"),
    (KafkaError._PURGE_QUEUE, False, FAIL, "_PURGE_QUEUE"),
    (KafkaError._PURGE_QUEUE, True, INFO, "_PURGE_QUEUE"),
    # appended or maybe appended: never a definite failure
    (KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, False, INFO, "NOT_ENOUGH_REPLICAS_AFTER_APPEND"),
    (KafkaError.REQUEST_TIMED_OUT, False, INFO, "REQUEST_TIMED_OUT"),
    (KafkaError.NETWORK_EXCEPTION, False, INFO, "NETWORK_EXCEPTION"),
    (KafkaError.KAFKA_STORAGE_ERROR, False, INFO, "KAFKA_STORAGE_ERROR"),
    (KafkaError._MSG_TIMED_OUT, False, INFO, "_MSG_TIMED_OUT"),
    (KafkaError._TIMED_OUT, False, INFO, "_TIMED_OUT"),
    (KafkaError._TRANSPORT, False, INFO, "_TRANSPORT"),
    (KafkaError._PURGE_INFLIGHT, False, INFO, "_PURGE_INFLIGHT"),
    (KafkaError._FATAL, False, INFO, "_FATAL"),
    (KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, True, INFO, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
    (KafkaError.UNKNOWN, False, INFO, "UNKNOWN_SERVER_ERROR"),
]


@pytest.mark.parametrize("code,retries,want,name", CASES)
def test_delivery_report_table(code, retries, want, name):
    out = classify(KafkaError(code), retries_possible=retries)
    assert (out.type, out.error, out.error_code) == (want, name, code)


def test_no_error_is_ok():
    assert classify(None, retries_possible=True).type == OK
    assert classify_code(0, retries_possible=False).type == OK


def test_error_names_follow_kio_for_broker_codes():
    assert error_name(107) == "INELIGIBLE_REPLICA"
    assert error_name(-192, "_MSG_TIMED_OUT") == "_MSG_TIMED_OUT"
    assert error_name(31999) == "UNKNOWN_ERROR_31999"


def test_retries_default_to_zero_without_idempotence():
    conf = build_config("b:1", "p", idempotence=False, acks="all", extra_config=None, max_in_flight=None)
    assert conf["retries"] == 0 and conf["acks"] == "all" and not retries_possible(conf)
    conf = build_config("b:1", "p", idempotence=False, acks="all", extra_config={"retries": 3},
                        max_in_flight=1)
    assert retries_possible(conf) and conf["max.in.flight.requests.per.connection"] == 1
    conf = build_config("b:1", "p", idempotence=True, acks="all", extra_config=None, max_in_flight=None)
    assert "retries" not in conf and retries_possible(conf)
