"""Failed writes that became visible (docs/anomalies.md §failed_write_visible).

Seed 003 §2.7: a produce request can fail *after* the leader appended the batch -
NOT_ENOUGH_REPLICAS_AFTER_APPEND, or a timeout (the client's ``info``) - and the record may
still be replicated and read later; Kafka allows that, so it is only counted
(``failed_write_visible_allowed``). An error that means "never appended" (NOT_ENOUGH_REPLICAS,
NOT_LEADER_OR_FOLLOWER, ...) followed by the value showing up in a read is an anomaly
(``failed_write_visible``): the client was told a lie. Error names are Kafka's (kio.schema.errors,
compared case-insensitively); librdkafka's local timeouts are ``_MSG_TIMED_OUT`` / ``_TIMED_OUT``.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.frames import Frames

#: failures after which the record may have been appended (indeterminate outcomes)
MAYBE_APPENDED_ERRORS = (
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION",
    "_MSG_TIMED_OUT", "_TIMED_OUT", "_TIMED_OUT_QUEUE", "_TRANSPORT", "_PURGE_INFLIGHT",
)
#: the same by Kafka error code (kio.schema.errors.ErrorCode): 20, 7, 13
MAYBE_APPENDED_CODES = (20, 7, 13)


def failed_visible(fr: Frames) -> dict[str, DataFrame]:
    # the (normally few) failed sends, matched against every read of their topic: the failed
    # side is the build side of the join, so the reads are streamed, never shuffled
    failed = fr.sends.where(F.col("type") != "ok")
    keys = failed.select("topic", "value").distinct()
    detail = (fr.reads.join(keys, ["topic", "value"], "inner")
              .groupBy("topic", "value")
              .agg(F.array_join(F.sort_array(F.collect_set(F.concat(F.col("partition").cast("string"), F.lit(":"),
                                                                     F.col("offset").cast("string")))), " ").alias("read_at"),
                   F.array_join(F.sort_array(F.collect_set("process")), " ").alias("readers")))
    failed = (failed.join(detail, ["topic", "value"], "inner")
              .select("process", "op", "topic", "partition", "value", "type", "error", "error_code",
                      "invoke_t", "complete_t", "read_at", "readers"))
    allowed = ((F.col("type") == "info")
               | F.upper(F.coalesce(F.col("error"), F.lit(""))).isin(*MAYBE_APPENDED_ERRORS)
               | F.coalesce(F.col("error_code"), F.lit(-999)).isin(*MAYBE_APPENDED_CODES))
    return {"failed_write_visible": failed.where(~allowed),
            "failed_write_visible_allowed": failed.where(allowed)}
