"""The per-partition views the report derives from cluster events and the observer."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.report import events as ev
from harness.report.inputs import load_run
from tests.report.runs import TOPIC, make_loss_run


def test_error_names_come_from_kio() -> None:
    assert ev.error_name(107) == "INELIGIBLE_REPLICA"
    assert ev.error_name(107, "INELIGIBLE_REPLICA") == "INELIGIBLE_REPLICA"
    assert ev.error_name(None) == ""


def test_availability_counts_leaderless_time_and_rejections(tmp_path: Path) -> None:
    data = load_run(make_loss_run(tmp_path))
    series = ev.leader_series(data.events, data.observer)
    # exact events win over observer samples: faultline-0 had no leader from 32.3 to 34.9
    assert [(round(t, 3), leader) for t, leader in series[f"{TOPIC}@0"]] == [(1.0, 0), (32.3, None), (34.9, 1)]
    av = ev.availability(series, 60.0, data.observer, ev.alter_partitions(data.events)).set_index("partition")
    assert av.loc[f"{TOPIC}@0", "no leader (s)"] == 2.6
    assert av.loc[f"{TOPIC}@0", "leaderless stretches"] == 1
    assert av.loc[f"{TOPIC}@0", "rejected AlterPartition"] == 1
    assert av.loc[f"{TOPIC}@0", "observer errors"] == 3
    assert av.loc[f"{TOPIC}@1", "no leader (s)"] == 0 and av.loc[f"{TOPIC}@1", "leader changes"] == 1


def test_whole_topic_observer_errors_do_not_invent_a_partition() -> None:
    obs = pd.DataFrame([
        {"t": 1.0, "topic": TOPIC, "partition": 0, "leader": 1, "error": None},
        {"t": 2.0, "topic": TOPIC, "partition": None, "leader": None, "error": "NO_BROKER_ANSWERED"},
    ])
    empty = pd.DataFrame(columns=["t", "event", "topic", "partition"])
    series = ev.leader_series(empty, obs)
    assert list(series) == [f"{TOPIC}@0"]
    av = ev.availability(series, 5.0, obs, ev.alter_partitions(empty))
    assert list(av["partition"]) == [f"{TOPIC}@0", f"{TOPIC} (whole topic)"]


def test_write_unavailability_counts_missing_seconds_as_no_acks() -> None:
    tp = pd.DataFrame({"second": [12, 13, 17, 20, 21], "ok": [5, 5, 0, 4, 4], "fail": [0, 0, 3, 0, 0],
                       "info": [0, 0, 0, 0, 1]})
    w = ev.write_unavailability(tp)
    assert w["longest stretch without an acknowledged send (s)"] == "6 (from t=14)"
    assert w["seconds with failed or indeterminate sends"] == 2
    assert w["acknowledged sends"] == 18 and w["failed sends"] == 3


def test_partition_keys_sort_naturally() -> None:
    keys = [f"{TOPIC}@10", f"{TOPIC}@2", "other@1", f"{TOPIC}@0"]
    assert sorted(keys, key=ev.pkey_order) == [f"{TOPIC}@0", f"{TOPIC}@2", f"{TOPIC}@10", "other@1"]
