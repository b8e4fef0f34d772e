"""Lost writes and writes unseen at the end (docs/anomalies.md §lost_write, §unseen_at_end).

The headline question of the harness. Following Jepsen's ``lost-write-cases``: we cannot
expect every acknowledged value to be read (a consumer may lag, a write may land after the
last poll), so a write only counts as *lost* when reading provably went past it:

* some read of the same partition returned an offset greater than the write's acknowledged
  offset (the reader's fetch position crossed it), or
* the final drain read the whole partition (a ``drain-end`` record exists for it).

And a write some consumer read earlier is lost too when the final drain read its whole
partition and did not return it: the log it was in was replaced (KIP-903's empty replica
elected, docs/seeds.md#seed-000; an unclean election, docs/seeds.md#seed-001) - the durable end state no longer holds it.

Otherwise an unread acknowledged write is *unseen at end* - an availability symptom, reported
apart. A value read at another offset is not lost (see duplicate / offset_mismatch): matching is
by value within the topic. docs/seeds.md#seed-003-2-7: an ``acks=all`` acknowledgement means the HWM passed
the record, so every later complete read must return it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from checkers.partition import Partition, send_cols

#: foreign reads, by (topic, value): (partition, offset, read by the drain, reader) - values read
#: in a partition none of their sends went to (checkers/kernel.py gathers them across partitions)
Foreign = dict[tuple[str | None, str], list[tuple[int, int, bool, str]]]


def lost_and_unseen(p: Partition, foreign: Foreign) -> dict[str, tuple[dict[str, Any], int]]:
    """``{"lost_write": (columns, n), "unseen_at_end": (columns, n)}`` for one partition.

    A write counts as read when its value was read anywhere in its topic: in its own partition
    (a lookup by value code), or elsewhere - then the read is foreign there (values are unique
    per send, docs/history-format.md) and ``foreign`` holds it.
    """
    acked = np.flatnonzero(p.ok_mask())                  # the acknowledged sends (index into p.sends)
    n_acked = len(acked)
    value_code = p.sends.vc[acked]                        # -1: the send recorded no value
    acked_offset = p.sends.offset.values[acked]
    read_here, drained_here = p.read_flags()              # per value code
    has_value = value_code >= 0
    if len(read_here):
        read_in_partition = has_value & read_here[np.maximum(value_code, 0)]
        drained_in_partition = has_value & drained_here[np.maximum(value_code, 0)]
    else:
        read_in_partition = drained_in_partition = np.zeros(n_acked, dtype=bool)
    max_read_offset = p.max_read_offset()
    read_past_offset = acked_offset < max_read_offset if max_read_offset is not None else np.zeros(n_acked, dtype=bool)
    # a drain-end record: the drain read all of it (a numpy bool: ``~`` of a Python bool is -1/-2)
    whole_partition_drained = np.bool_(p.drain_end is not None)
    maybe_missing = ~read_in_partition | (whole_partition_drained & ~drained_in_partition)
    read_elsewhere = np.zeros(n_acked, dtype=bool)
    drained_elsewhere = np.zeros(n_acked, dtype=bool)
    if foreign:
        for i in np.flatnonzero(maybe_missing & has_value):
            value = p.values[int(value_code[i])].as_py()
            for partition, _, by_drain, _ in foreign.get((p.topic, value), ()):
                if partition != p.partition:
                    read_elsewhere[i] = True
                    drained_elsewhere[i] |= by_drain
    was_read = read_in_partition | read_elsewhere
    in_drain = drained_in_partition | drained_elsewhere
    is_lost = maybe_missing & ((~was_read & read_past_offset) | (whole_partition_drained & ~in_drain))
    is_unseen = maybe_missing & ~was_read & ~read_past_offset & ~whole_partition_drained
    lost_sends, unseen_sends = acked[is_lost], acked[is_unseen]   # indexes into p.sends
    never_read, past = ~was_read[is_lost], read_past_offset[is_lost]
    because = np.where(never_read & past, "read_past_offset",
                       np.where(never_read, "final_drain_read_whole_partition", "final_drain_missed_read_earlier"))
    n_lost, n_unseen = len(lost_sends), len(unseen_sends)
    lost = {**send_cols(p, lost_sends), "max_read_offset": [max_read_offset] * n_lost,
            "drain_end": [p.drain_end] * n_lost, "lost_because": because.tolist()}
    lost.update(_miss(p, lost_sends, because))
    unseen = {**send_cols(p, unseen_sends), "max_read_offset": [max_read_offset] * n_unseen}
    return {"lost_write": (lost, n_lost), "unseen_at_end": (unseen, n_unseen)}


def _miss(p: Partition, lost_sends: np.ndarray, because: np.ndarray) -> dict[str, Any]:
    """When was the write first missed: the first poll after the ack whose reads passed its offset.

    Falls back to the drain's end, then to any read past it (even one before the ack); a write
    read before it vanished was first missed by the final drain. Per-poll extents (one row per
    poll op), never every message read; :func:`first_polls_past` is a sweep, not a join.
    """
    import pandas as pd

    n_lost = len(lost_sends)
    if n_lost == 0:
        return {"miss_t": np.zeros(0), "miss_by": []}
    sends, polls = p.sends, p.polls
    keys = pd.DataFrame({"topic": [p.topic] * n_lost, "partition": np.full(n_lost, p.partition or 0, dtype=np.int32),
                         "process": sends.proc[lost_sends], "op": sends.op[lost_sends],
                         "offset": sends.offset.values[lost_sends], "ack_t": sends.complete_t[lost_sends]})
    if n_lost * len(polls.t_first) <= DIRECT_PAIRS:
        first_past = _first_polls_direct(p, keys)
    else:
        poll_extents = pd.DataFrame({"t_first": polls.t_first, "reader": [p.processes[int(c)] for c in polls.proc],
                                     "max_offset": polls.max_offset})
        first_past = first_polls_past(keys, poll_extents)
    drain_end_t = p.drain_end_t
    miss_t: list[float | None] = []
    miss_by: list[str | None] = []
    for i in range(n_lost):
        if because[i] == "final_drain_missed_read_earlier":
            miss_t.append(drain_end_t)
            miss_by.append("drain")
            continue
        after_t, after_reader = first_past["after_t"].iat[i], first_past["after_reader"].iat[i]
        any_t, any_reader = first_past["any_t"].iat[i], first_past["any_reader"].iat[i]
        if not np.isnan(after_t):
            miss_t.append(float(after_t)); miss_by.append(after_reader)
        elif drain_end_t is not None:
            miss_t.append(drain_end_t); miss_by.append("drain")
        elif not np.isnan(any_t):
            miss_t.append(float(any_t)); miss_by.append(any_reader)
        else:
            miss_t.append(None); miss_by.append(None)
    return {"miss_t": np.array([np.nan if v is None else v for v in miss_t], dtype=np.float64), "miss_by": miss_by}


#: lost writes x polls up to which each lost write scans the polls directly (numpy, one pass
#: per write); above it the sweep (:func:`first_polls_past`) - both exact, same tie-break
DIRECT_PAIRS = 20_000_000


def _first_polls_direct(p: Partition, keys):  # -> pandas.DataFrame like first_polls_past
    import pandas as pd

    polls = p.polls
    out: dict[str, list] = {"after_t": [], "after_reader": [], "any_t": [], "any_reader": []}
    for ack_t, offset in zip(keys["ack_t"].to_numpy(float), keys["offset"].to_numpy()):
        past = polls.max_offset > offset
        after_ack = past & (polls.t_first >= ack_t) if not np.isnan(ack_t) else None
        for name, chosen in (("any", past), ("after", after_ack)):
            if chosen is None or not chosen.any():
                out[f"{name}_t"].append(np.nan)
                out[f"{name}_reader"].append(None)
                continue
            candidates = np.flatnonzero(chosen)
            first_t = polls.t_first[candidates].min()
            reader = min(p.processes[int(c)] for c in polls.proc[candidates[polls.t_first[candidates] == first_t]])
            out[f"{name}_t"].append(float(first_t))
            out[f"{name}_reader"].append(reader)
    return pd.DataFrame(out)


def first_polls_past(keys, polls):  # (pandas.DataFrame, pandas.DataFrame) -> pandas.DataFrame
    """For each lost write, the first read after its ack that passed its offset - a sweep.

    Runs once per topic-partition. Walking the polls backwards in time keeps a
    stack of the polls not dominated by a later-added (earlier) poll with a max_offset at least
    as high; the answer for (ack_t, offset) is then a binary search. O((polls + writes) log
    polls), where the join of every lost write with every poll was quadratic (2,251 lost writes
    x 10,787 polls of one KIP-903 run: 20 s). ``any_*``: the earliest poll at any time past it.
    """
    import bisect

    import numpy as np
    import pandas as pd

    n_writes = len(keys)
    after_t, any_t = np.full(n_writes, np.nan), np.full(n_writes, np.nan)
    after_reader: list = [None] * n_writes
    any_reader: list = [None] * n_writes
    if n_writes and len(polls):
        by_time = polls.sort_values(["t_first", "reader"], kind="mergesort").reset_index(drop=True)
        poll_t = by_time["t_first"].to_numpy(float)
        poll_max_offset = by_time["max_offset"].to_numpy()
        poll_reader = by_time["reader"].to_numpy()
        # any time: polls by max_offset descending, with the running earliest poll among them
        by_max_offset = np.argsort(-poll_max_offset, kind="mergesort")
        earliest_so_far = []
        earliest = -1
        for i in by_max_offset:
            if earliest < 0 or poll_t[i] < poll_t[earliest] or (poll_t[i] == poll_t[earliest] and i < earliest):
                earliest = int(i)
            earliest_so_far.append(earliest)
        neg_max_offsets = -poll_max_offset[by_max_offset]           # ascending
        ack_t, offset = keys["ack_t"].to_numpy(float), keys["offset"].to_numpy()
        stack_neg_max: list[int] = []                 # stack of -max_offset, increasing bottom..top
        stack_poll: list[int] = []                    # the poll (row of by_time) of each stack entry
        next_poll = len(by_time) - 1                  # polls are added latest first
        for w in np.argsort(-np.nan_to_num(ack_t, nan=-np.inf), kind="mergesort"):   # latest ack first
            write_ack_t, write_offset = ack_t[w], offset[w]
            n_past = int(np.searchsorted(neg_max_offsets, -write_offset, side="left"))  # polls with max_offset > it
            if n_past:
                best = earliest_so_far[n_past - 1]
                any_t[w], any_reader[w] = poll_t[best], poll_reader[best]
            if np.isnan(write_ack_t):
                continue
            while next_poll >= 0 and poll_t[next_poll] >= write_ack_t:
                while stack_neg_max and -stack_neg_max[-1] <= poll_max_offset[next_poll]:
                    stack_neg_max.pop()
                    stack_poll.pop()
                stack_neg_max.append(-int(poll_max_offset[next_poll]))
                stack_poll.append(next_poll)
                next_poll -= 1
            pos = bisect.bisect_left(stack_neg_max, -int(write_offset)) - 1
            if pos >= 0:
                after_t[w], after_reader[w] = poll_t[stack_poll[pos]], poll_reader[stack_poll[pos]]
    # explicit dtypes: an empty or all-null object column would not convert to Arrow strings
    return pd.DataFrame({"topic": pd.Series(keys["topic"].to_numpy(), dtype=object),
                         "partition": pd.Series(keys["partition"].to_numpy(), dtype="int32"),
                         "process": pd.Series(keys["process"].to_numpy(), dtype=object),
                         "op": pd.Series(keys["op"].to_numpy(), dtype="int64"),
                         "after_t": after_t, "after_reader": pd.Series(after_reader, dtype=object),
                         "any_t": any_t, "any_reader": pd.Series(any_reader, dtype=object)})


