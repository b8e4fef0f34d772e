"""Lost writes and writes unseen at the end (docs/anomalies.md §lost_write, §unseen_at_end).

The headline question of the harness. Following Jepsen's ``lost-write-cases``: we cannot
expect every acknowledged value to be read (a consumer may lag, a write may land after the
last poll), so a write only counts as *lost* when reading provably went past it:

* some read of the same partition returned an offset greater than the write's acknowledged
  offset (the reader's fetch position crossed it), or
* the final drain read the whole partition (a ``drain-end`` record exists for it).

And a write some consumer read earlier is lost too when the final drain read its whole
partition and did not return it: the log it was in was replaced (KIP-903's empty replica
elected, seed 000; an unclean election, seed 001) - the durable end state no longer holds it.

Otherwise an unread acknowledged write is *unseen at end* - an availability symptom, reported
apart. A value read at another offset is not lost (see duplicate / offset_mismatch): matching is
by value within the topic. Seed 003 §2.7: an ``acks=all`` acknowledgement means the HWM passed
the record, so every later complete read must return it.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.frames import TP, Frames


#: candidate rows up to which they are broadcast to the reads instead of shuffling both
BROADCAST_ROWS = 2_000_000


def lost_and_unseen(fr: Frames) -> dict[str, DataFrame]:
    """Return ``{"lost_write": df, "unseen_at_end": df}`` evidence frames.

    A write counts as read when its value was read anywhere in its topic. The co-partitioned
    join answers "read in its own partition" for every write; only the candidates it leaves
    (normally few) are looked up in the other partitions' reads.
    """
    rv = fr.read_values.select(*TP, "value", F.lit(True).alias("_read"), F.col("drained").alias("_drained"))
    stats = F.broadcast(fr.part_stats.select(*TP, "max_read_offset", "drain_end", "drain_end_t"))
    acked = fr.ok_sends.join(rv, [*TP, "value"], "left").join(stats, TP, "left")
    read_past = F.coalesce(F.col("max_read_offset") > F.col("offset"), F.lit(False))
    drained = F.col("drain_end").isNotNull()
    same_read = F.coalesce(F.col("_read"), F.lit(False))
    same_drained = F.coalesce(F.col("_drained"), F.lit(False))
    # not read in its own partition, or (drained partition) not drained there: a superset of lost + unseen
    cand = fr.keep(acked.where(~same_read | (drained & ~same_drained)))
    other = fr.reads.select(F.col("topic").alias("o_topic"), F.col("partition").alias("o_partition"),
                            F.col("value").alias("o_value"), "f")
    keys = cand.select(*TP, "value", "process", "op")
    if cand.count() <= BROADCAST_ROWS:   # the usual case: no shuffle of the reads at all
        keys = F.broadcast(keys)
    seen = (other.join(keys,
                       (F.col("o_topic") == F.col("topic")) & (F.col("o_value") == F.col("value"))
                       & (F.col("o_partition") != F.col("partition")), "inner")
            .groupBy(*TP, "process", "op")
            .agg(F.lit(True).alias("_read_elsewhere"), F.max(F.col("f") == "drain").alias("_drained_elsewhere")))
    cand = cand.join(seen, [*TP, "process", "op"], "left")
    was_read = same_read | F.coalesce(F.col("_read_elsewhere"), F.lit(False))
    in_drain = same_drained | F.coalesce(F.col("_drained_elsewhere"), F.lit(False))
    lost = (cand.where((~was_read & read_past) | (drained & ~in_drain))
            .withColumn("lost_because", F.when(~was_read & read_past, F.lit("read_past_offset"))
                        .when(~was_read, F.lit("final_drain_read_whole_partition"))
                        .otherwise(F.lit("final_drain_missed_read_earlier"))))
    # the lost rows are few and read twice below (the sweep's keys and the join back): keep them
    lost = _with_miss_t(fr, fr.keep(lost))
    lost = lost.select(*TP, "offset", "value", "process", "op", "invoke_t", "ack_t",
                       "max_read_offset", "drain_end", "lost_because", "miss_t", "miss_by")
    unseen = (cand.where(~was_read & ~read_past & ~drained)
              .select(*TP, "offset", "value", "process", "op", "invoke_t", "ack_t", "max_read_offset"))
    return {"lost_write": lost, "unseen_at_end": unseen}


#: the result of the per-partition sweep (one row per lost write)
_MISS_SCHEMA = ("topic string, partition int, process string, op long, after_t double, after_reader string, any_t double, any_reader string")


def _first_polls_past(keys, polls):  # (pandas.DataFrame, pandas.DataFrame) -> pandas.DataFrame
    """For each lost write, the first read after its ack that passed its offset - a sweep.

    Runs once per topic-partition (Spark cogroup). Walking the polls backwards in time keeps a
    stack of the polls not dominated by a later-added (earlier) poll with a max_offset at least
    as high; the answer for (ack_t, offset) is then a binary search. O((polls + writes) log
    polls), where the join of every lost write with every poll was quadratic (2,251 lost writes
    x 10,787 polls of one KIP-903 run: 20 s). ``any_*``: the earliest poll at any time past it.
    """
    import bisect

    import numpy as np
    import pandas as pd

    nq = len(keys)
    after_t, any_t = np.full(nq, np.nan), np.full(nq, np.nan)
    after_r: list = [None] * nq
    any_r: list = [None] * nq
    if nq and len(polls):
        p = polls.sort_values(["t_first", "reader"], kind="mergesort").reset_index(drop=True)
        pt, pm, pr = p["t_first"].to_numpy(float), p["max_offset"].to_numpy(), p["reader"].to_numpy()
        # any time: polls by max_offset descending, with the running argmin of t
        by_m = np.argsort(-pm, kind="mergesort")
        run_best = []
        best = -1
        for i in by_m:
            if best < 0 or pt[i] < pt[best] or (pt[i] == pt[best] and i < best):
                best = int(i)
            run_best.append(best)
        neg_m_sorted = -pm[by_m]                       # ascending
        ack, off = keys["ack_t"].to_numpy(float), keys["offset"].to_numpy()
        neg: list[int] = []                           # stack of -max_offset, increasing bottom..top
        idx: list[int] = []
        j = len(p) - 1
        for q in np.argsort(-np.nan_to_num(ack, nan=-np.inf), kind="mergesort"):
            a, x = ack[q], off[q]
            n = int(np.searchsorted(neg_m_sorted, -x, side="left"))   # polls with max_offset > x
            if n:
                any_t[q], any_r[q] = pt[run_best[n - 1]], pr[run_best[n - 1]]
            if np.isnan(a):
                continue
            while j >= 0 and pt[j] >= a:
                while neg and -neg[-1] <= pm[j]:
                    neg.pop()
                    idx.pop()
                neg.append(-int(pm[j]))
                idx.append(j)
                j -= 1
            k = bisect.bisect_left(neg, -int(x)) - 1
            if k >= 0:
                after_t[q], after_r[q] = pt[idx[k]], pr[idx[k]]
    # explicit dtypes: an empty or all-null object column would not convert to Arrow strings
    return pd.DataFrame({"topic": pd.Series(keys["topic"].to_numpy(), dtype=object),
                         "partition": pd.Series(keys["partition"].to_numpy(), dtype="int32"),
                         "process": pd.Series(keys["process"].to_numpy(), dtype=object),
                         "op": pd.Series(keys["op"].to_numpy(), dtype="int64"),
                         "after_t": after_t, "after_reader": pd.Series(after_r, dtype=object),
                         "any_t": any_t, "any_reader": pd.Series(any_r, dtype=object)})


#: lost writes x polls above which the per-partition sweep replaces the plain join. The sweep
#: costs a Python worker start (seconds); the join costs one comparison per pair.
SWEEP_ABOVE_PAIRS = 20_000_000


def _with_miss_t(fr: Frames, lost: DataFrame) -> DataFrame:
    """When was the write first missed: the first poll after the ack whose reads passed its offset.

    Falls back to the drain's end, then to any read past it (even one before the ack). Works on
    per-poll aggregates (one row per poll op and partition), never on every message read. With
    few lost writes a join against the polls is cheapest; with many (a KIP-903 run loses
    thousands) it is a per-topic-partition sweep (:func:`_first_polls_past`). Both give the
    same rows (tests/checkers/test_miss_time.py).
    """
    polls = fr.poll_ops.select(*TP, F.col("process").alias("reader"), "t_first", "max_offset")
    keys = lost.select("process", "op", *TP, "offset", "ack_t")
    if lost.count() * fr.poll_ops.count() > SWEEP_ABOVE_PAIRS:
        # fresh column ids on one side: both sides descend from the same history, and Spark
        # refuses a cogroup whose grouping columns it cannot tell apart
        keys = keys.select(*[F.col(c).alias(c) for c in keys.columns])
        j = (keys.groupBy(*TP).cogroup(polls.groupBy(*TP))
             .applyInPandas(lambda k, p: _first_polls_past(k, p), schema=_MISS_SCHEMA))
    else:
        pj = polls.select(F.col("topic").alias("p_topic"), F.col("partition").alias("p_partition"),
                          "reader", "t_first", "max_offset")
        cond = ((F.col("topic") == F.col("p_topic")) & (F.col("partition") == F.col("p_partition"))
                & (F.col("max_offset") > F.col("offset")))
        j = (keys.join(pj, cond, "inner")
             .groupBy(*TP, "process", "op")
             .agg(F.min(F.when(F.col("t_first") >= F.col("ack_t"), F.struct("t_first", "reader"))).alias("after"),
                  F.min(F.struct("t_first", "reader")).alias("any"))
             .select(*TP, "process", "op", F.col("after.t_first").alias("after_t"), F.col("after.reader").alias("after_reader"),
                     F.col("any.t_first").alias("any_t"), F.col("any.reader").alias("any_reader")))
    out = lost.join(j, [*TP, "process", "op"], "left")
    read_earlier = F.col("lost_because") == "final_drain_missed_read_earlier"
    # a write read before it vanished was first missed by the final drain
    return (out.withColumn("miss_t", F.when(read_earlier, F.col("drain_end_t"))
                           .otherwise(F.coalesce(F.col("after_t"), F.col("drain_end_t"), F.col("any_t"))))
            .withColumn("miss_by", F.when(read_earlier, F.lit("drain")).otherwise(F.coalesce(F.col("after_reader"),
                                              F.when(F.col("drain_end_t").isNotNull(), F.lit("drain")),
                                              F.col("any_reader"))))
            .drop("after_t", "after_reader", "any_t", "any_reader"))
