"""The replicas' own logs as evidence for acks (checkers/replicas.py), without Spark.

Each case is a hand-built sequence of one follower's events - the fields kraftsim's fetcher and
storage write (``follower_append``, ``truncation``, ``recovery``), already on the run clock as
checkers/load.py delivers them - and one acknowledged offset. The question: did this replica
*certainly* lack the offset when the ack was given? Every "no" case is a way the evidence could
mislead a checker into a false flag: a restart between samples, a truncation, a sample within
the clock slack, no sample after the ack.
"""
from __future__ import annotations

import numpy as np
import pytest

from checkers.replicas import CLOCK_SLACK_S, replica_logs

T, P = "t", 0


def app(t: float, before: int, leo: int, epoch: int = 7, broker: int = 2) -> dict:
    return {"t": t, "event": "follower_append", "topic": T, "partition": P, "broker": broker, "broker_epoch": epoch,
            "from_offset": before, "log_end_offset": leo, "node": str(broker)}


def trunc(t: float, frm: int, to: int, broker: int = 2) -> dict:
    # storage's truncation carries only the writer's node (as a string after checkers/load.py)
    return {"t": t, "event": "truncation", "topic": T, "partition": P, "from_offset": frm, "to_offset": to,
            "node": str(broker), "broker": None}


def recovery(t: float, leo: int, broker: int = 2) -> dict:
    return {"t": t, "event": "recovery", "topic": T, "partition": P, "log_end_offset": leo, "node": str(broker),
            "broker": None}


def lacked(events: list[dict], offset: int, invoke_t: float, ack_t: float) -> bool:
    logs = replica_logs(events)
    (log,) = logs[(T, P)]
    return bool(log.lacking(np.array([offset]), np.array([invoke_t]), np.array([ack_t]))[0])


S = CLOCK_SLACK_S


def test_a_follower_frozen_across_the_ack_lacked_it():
    # replicating until t=10 (LEO 50), nothing until t=20, then it appends from 50: at the ack of
    # offset 60 (t=15) its log ended at 50
    ev = [app(9.0, 40, 45), app(10.0, 45, 50), app(20.0, 50, 90)]
    assert lacked(ev, 60, 14.9, 15.0)
    assert not lacked(ev, 49, 14.9, 15.0)          # offset 49 it did hold


def test_a_follower_that_caught_up_before_the_ack_held_it():
    ev = [app(9.0, 40, 45), app(10.0, 45, 70), app(20.0, 70, 90)]
    assert not lacked(ev, 60, 14.9, 15.0)


def test_the_bound_is_the_first_sample_past_the_clock_slack():
    # at t=15.5 the follower still ended at 50; by t=15+slack+0.5 it had more than 60: with the
    # clock mapping uncertain by the slack, the earlier sample may have been before the ack
    ev = [app(9.0, 40, 50), app(15.5, 50, 55), app(15.0 + S + 0.5, 61, 90)]
    assert not lacked(ev, 60, 14.9, 15.0)
    # the same, the catch-up well after the slack: certainly lacking
    ev = [app(9.0, 40, 50), app(15.5, 50, 55), app(15.0 + S + 0.5, 55, 90)]
    assert lacked(ev, 60, 14.9, 15.0)


def test_a_restart_between_the_samples_hides_what_it_held():
    # epoch 7 before, epoch 9 after: the broker restarted (a page-cache loss or a wiped disk can
    # have taken offsets it held at the ack), so the later "from 0" says nothing about t=15
    ev = [app(9.0, 40, 70, epoch=7), app(20.0, 0, 90, epoch=9)]
    assert not lacked(ev, 60, 14.9, 15.0)
    ev = [app(9.0, 40, 70, epoch=7), recovery(18.0, 10), app(20.0, 10, 90, epoch=7)]
    assert not lacked(ev, 60, 14.9, 15.0)          # a recovery bounds nothing


def test_a_truncation_after_the_ack_breaks_the_bound():
    # it held 70 at t=16, truncated to 30 at t=18, appended from 30 at t=20: no bound for t=15
    ev = [app(9.0, 40, 50), app(16.0, 50, 70), trunc(18.0, 70, 30), app(20.0, 30, 90)]
    assert not lacked(ev, 60, 14.9, 15.0)
    # a truncation that is itself the first sample past the ack bounds it by its from_offset
    ev = [app(9.0, 40, 50), trunc(20.0, 50, 30), app(21.0, 30, 90)]
    assert lacked(ev, 60, 14.9, 15.0)


def test_no_sample_after_the_ack_or_none_before_the_invoke_is_no_evidence():
    assert not lacked([app(9.0, 40, 50)], 60, 14.9, 15.0)            # silent since: killed? paused?
    assert not lacked([app(14.0, 40, 50), app(20.0, 50, 90)], 60, 14.9, 15.0)  # no sample before invoke - slack


def test_only_partitions_with_follower_appends_have_evidence():
    # Kafka's logs give truncations but no follower log end: no independent evidence there
    assert replica_logs([trunc(5.0, 10, 5)]) == {}
    logs = replica_logs([app(1.0, 0, 5, broker=2), app(1.0, 0, 5, broker=3), trunc(2.0, 5, 3, broker=3)])
    assert [r.broker for r in logs[(T, P)]] == [2, 3]
    assert list(logs[(T, P)][1].shrink_t) == [2.0]


@pytest.mark.parametrize("missing", ["from_offset", "broker_epoch", "t", "topic"])
def test_an_append_without_its_fields_is_ignored(missing):
    e = app(1.0, 0, 5)
    e[missing] = None
    assert replica_logs([e]) == {}
