"""What a delivery report means for the history: ``ok``, definite ``fail`` or unknown ``info``.

Why a table of its own: the checker's failed_write_visible anomaly (docs/anomalies.md) trusts
the ``fail`` type to mean *the records were not appended*. Recording ``fail`` for a send whose
outcome is in fact unknown would turn Kafka's documented behaviour into false anomalies;
recording ``info`` for a definite failure only weakens the check. So anything not proven
"never appended" is ``info``.

docs/seeds.md#seed-003-2-6 (min.insync.replicas): ``NOT_ENOUGH_REPLICAS`` is returned *before* the append
(ISR < Min ISR when the request arrives), ``NOT_ENOUGH_REPLICAS_AFTER_APPEND`` *after* the
records were written to the leader's log; docs/seeds.md#seed-003-2-7 (HWM): such records "can get
committed (despite having been negatively acknowledged) and read by consumers". A broker-side
``REQUEST_TIMED_OUT`` means the leader appended but the ISR did not confirm within the
produce timeout, so it is also unknown.

Error names: broker errors (code >= 0) are named as Kafka names them in
``kio.schema.errors.ErrorCode`` (upper-cased, e.g. ``NOT_LEADER_OR_FOLLOWER``, which
librdkafka calls ``NOT_LEADER_FOR_PARTITION``); librdkafka's local errors (code < 0) keep
librdkafka's name (``_MSG_TIMED_OUT``) and code (-192).

Classification (what librdkafka puts in the delivery report, and when):

====================================  =====  ===============================================
error in the delivery report           type   why
====================================  =====  ===============================================
none                                   ok     acknowledged; offset = the assigned offset
NOT_LEADER_OR_FOLLOWER (6)             fail*  produce reached a non-leader; nothing appended
LEADER_NOT_AVAILABLE (5)               fail*  no leader (election under way); not appended
UNKNOWN_TOPIC_OR_PARTITION (3)         fail*  broker does not host the partition
NOT_ENOUGH_REPLICAS (19)               fail*  ISR < min ISR at arrival (003 §2.6): rejected
CORRUPT_MESSAGE / INVALID_RECORD /     fail   batch failed validation before the append
MESSAGE_TOO_LARGE / RECORD_LIST_TOO_
LARGE / INVALID_REQUIRED_ACKS /
INVALID_TIMESTAMP / *_AUTHORIZATION_
FAILED / UNSUPPORTED_FOR_MESSAGE_
FORMAT / POLICY_VIOLATION
_UNKNOWN_PARTITION (-190),             fail   librdkafka refused it locally, never sent
_UNKNOWN_TOPIC (-188)
_PURGE_QUEUE (-152)                    fail*  purged from the local queue, never sent
NOT_ENOUGH_REPLICAS_AFTER_APPEND (20)  info   appended, ISR shrank below min ISR (003 §2.6)
REQUEST_TIMED_OUT (7)                  info   appended on the leader, ISR ack timed out
NETWORK_EXCEPTION (13)                 info   connection lost with the request in flight
KAFKA_STORAGE_ERROR (56)               info   the log dir failed during the append
_MSG_TIMED_OUT (-192)                  info   message.timeout.ms expired; it may have been
                                              sent (librdkafka: "possibly persisted")
_TIMED_OUT (-185), _TRANSPORT (-195)   info   request lost with the broker connection
_PURGE_INFLIGHT (-151)                 info   purged while a request carrying it was out
_DESTROY, _FATAL, idempotence errors,  info   outcome not knowable from the report
anything not listed above
====================================  =====  ===============================================

``fail*``: definite only when librdkafka could not have retried the message
(``retries=0``). A message that is retried may have been appended by an earlier attempt
(e.g. one answered ``NOT_ENOUGH_REPLICAS_AFTER_APPEND`` or cut by ``_TRANSPORT``) even when
its *last* attempt was rejected, so with retries these errors are recorded as ``info``.
For that reason the non-idempotent :class:`~workloads.producer.ProducerWorkload` sets
``retries=0`` unless told otherwise (the idempotent producer needs retries, and its
retriable errors surface as ``_MSG_TIMED_OUT`` anyway).
"""
from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaError
from kio.schema.errors import ErrorCode

OK, FAIL, INFO = "ok", "fail", "info"

#: broker errors that mean the leader rejected the batch before appending it, and that
#: librdkafka retries (so they are definite only without retries)
_REJECTED_RETRIABLE: frozenset[int] = frozenset({
    ErrorCode.not_leader_or_follower,
    ErrorCode.leader_not_available,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.not_enough_replicas,
})

#: broker errors that mean the batch failed validation or authorisation before the
#: append; librdkafka does not retry them
_REJECTED_PERMANENT: frozenset[int] = frozenset({
    ErrorCode.corrupt_message,
    ErrorCode.message_too_large,
    ErrorCode.record_list_too_large,
    ErrorCode.invalid_required_acks,
    ErrorCode.invalid_timestamp,
    ErrorCode.topic_authorization_failed,
    ErrorCode.cluster_authorization_failed,
    ErrorCode.unsupported_for_message_format,
    ErrorCode.policy_violation,
    ErrorCode.invalid_record,
})

#: librdkafka local errors for messages that never left the client
_LOCAL_NEVER_SENT: frozenset[int] = frozenset({
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
})
_LOCAL_NEVER_SENT_UNLESS_RETRIED: frozenset[int] = frozenset({
    KafkaError._PURGE_QUEUE,
})


@dataclass(frozen=True, slots=True)
class Outcome:
    """One delivery report, as the history records it."""
    type: str               # ok | fail | info
    error: str | None       # Kafka / librdkafka error name
    error_code: int | None


def error_name(code: int, fallback: str | None = None) -> str:
    """Kafka's name for a broker error code (kio, incl. -1), librdkafka's for a local one."""
    if code >= -1:
        try:
            return ErrorCode(code).name.upper()
        except ValueError:
            pass
    if fallback:
        return fallback
    return f"UNKNOWN_ERROR_{code}"


def classify_code(code: int, *, retries_possible: bool, name: str | None = None) -> Outcome:
    """Classify a delivery-report error code; see the module table."""
    label = error_name(code, name)
    if code == 0:
        return Outcome(OK, None, None)
    if code in _REJECTED_PERMANENT or code in _LOCAL_NEVER_SENT:
        return Outcome(FAIL, label, code)
    if code in _REJECTED_RETRIABLE or code in _LOCAL_NEVER_SENT_UNLESS_RETRIED:
        return Outcome(INFO if retries_possible else FAIL, label, code)
    return Outcome(INFO, label, code)


def classify(err: KafkaError | None, *, retries_possible: bool) -> Outcome:
    """Classify the ``err`` argument of a confluent-kafka delivery callback."""
    if err is None:
        return Outcome(OK, None, None)
    return classify_code(err.code(), retries_possible=retries_possible, name=err.name())
