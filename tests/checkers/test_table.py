"""Hand-built histories, one known-bad and one known-good case per anomaly.

The whole table is one run directory checked once by the real checker job (real Spark,
real files); each case lives in its own topic. Then the outputs are read back from disk
(verdict.json, anomalies/*.csv, aggregates/*.csv) the way the report engineer reads them.
"""
from __future__ import annotations

import csv
import json
from collections import Counter

import pandas as pd
import pytest

from checkers.job import ANOMALIES, check_run
from tests.checkers.cases import CASES, INVALIDATING, build_table


@pytest.fixture(scope="module")
def table_run(spark, tmp_path_factory):
    # the clean case's producer was SIGKILLed mid-line: the torn tail must be ignored
    torn = {"clean.producer-0": '{"v":1,"t":99.0,"process":"clean.producer-0","op":99,"type":"ok","f":"se'}
    # min ISR 2 from the topic as the runner records it; the broker default (a switch) says 1
    # and must lose to it, as in Kafka - else the ack_below_min_isr case goes unflagged
    rd = build_table().write(tmp_path_factory.mktemp("table") / "table-run", expect="no-loss",
                             switches={"min.insync.replicas": 1}, topic={"name": "t", "min_insync_replicas": 2},
                             extra_lines=torn)
    with open(rd / "history" / "clean.producer-0.jsonl", "r+") as fh:   # one line that is not a record
        first, rest = fh.read().split("\n", 1)       # line 1 stays a record: precheck reads it
        fh.seek(0)
        fh.write(first + '\n{"v":1,"t":"soon","process":"clean.producer-0"}\n' + rest)
    verdict = check_run(rd, spark=spark)
    per_topic: dict[str, Counter] = {}
    for name in ANOMALIES:
        with open(rd / "anomalies" / f"{name}.csv", newline="") as fh:
            for row in csv.DictReader(fh):
                per_topic.setdefault(row["topic"], Counter())[name] += 1
    return rd, verdict, per_topic


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(table_run, case):
    _, _, per_topic = table_run
    got = per_topic.get(case.name, Counter())
    assert got[case.anomaly] == case.expected, f"{case.name}: {case.anomaly} rows {got[case.anomaly]}, all: {dict(got)}"
    for a in case.absent:
        assert got[a] == 0, f"{case.name}: {a} must not be reported, got {dict(got)}"
    if case.clean:
        bad = {a: n for a, n in got.items() if a in INVALIDATING and n}
        assert not bad, f"{case.name}: a good history was flagged: {bad}"


def test_verdict_shape_and_counts(table_run):
    rd, verdict, per_topic = table_run
    on_disk = json.loads((rd / "verdict.json").read_text())
    assert on_disk["counts"] == verdict["counts"]
    assert set(verdict["counts"]) == set(ANOMALIES)
    for name in ANOMALIES:
        assert verdict["counts"][name] == sum(c[name] for c in per_topic.values()), name
    assert verdict["valid"] is False and verdict["as_expected"] is False and verdict["expected"] == "no-loss"
    assert "lost_write" in verdict["invalid_because"] and "unseen_at_end" not in verdict["invalid_because"]
    # keys are <topic>@<partition>: unambiguous for topics with dashes (and digits) in their names
    assert verdict["lost_writes_by_partition"]["lost-read-past@0"] == 1
    assert all(k.rsplit("@", 1)[0] in {c.name for c in CASES} for k in verdict["lost_writes_by_partition"])
    assert verdict["acked_writes"] > 30
    assert verdict["examples"]["lost_write"]


def test_attribution_names_fault_election_alterpartition_and_truncation(table_run):
    rd, verdict, _ = table_run
    row = next(a for a in verdict["attribution"] if a["topic"] == "lost-read-past")
    assert row["offset"] == 1 and row["lost_because"] == "read_past_offset"
    assert row["ack_t"] == pytest.approx(2.01) and row["miss_t"] == pytest.approx(5.001)
    assert any(f.startswith("kill[broker-1] f-kill") for f in row["faults"]), row["faults"]
    assert not any("f-late" in f for f in row["faults"]), "a fault 100 s later is not in the window"
    assert any("leader_elected" in e and "leader=2" in e for e in row["elections"]), row["elections"]
    assert any("alter_partition" in e and "accepted=true" in e for e in row["alter_partition"])
    assert any("broker_registered" in e and "broker_epoch=7" in e for e in row["broker_events"])
    assert any("truncation" in e and "to_offset=1" in e for e in row["removed_by"])
    # the winner's own log (docs/seeds.md#seed-004 fields) is part of the election, and it never had offset 1;
    # the takeover before the ack is an election in the window but removed nothing
    assert any("became_leader @broker-2/2" in e and "log_end_offset=1" in e and "local_log_size_bytes=70" in e
               for e in row["elections"]), row["elections"]
    assert any("became_leader @broker-1/1" in e for e in row["elections"]), row["elections"]
    assert [e for e in row["removed_by"] if "became_leader" in e] == [
        next(e for e in row["elections"] if "became_leader @broker-2/2" in e)], row["removed_by"]
    lost = pd.read_csv(rd / "anomalies" / "lost_write.csv")
    cols = {"topic", "partition", "offset", "value", "process", "invoke_t", "ack_t", "max_read_offset", "attribution"}
    assert cols <= set(lost.columns)
    assert "elections: " in lost.loc[lost.topic == "lost-read-past", "attribution"].iloc[0]
    pq = pd.read_parquet(rd / "anomalies" / "lost_write.parquet")
    assert len(pq) == len(lost)


def test_aggregates(table_run):
    rd, verdict, _ = table_run
    tp = pd.read_csv(rd / "aggregates" / "throughput.csv")
    assert list(tp.columns) == ["second", "ok", "fail", "info", "latency_p50_ms", "latency_p99_ms"]
    assert tp["ok"].sum() == verdict["acked_writes"]
    assert tp["fail"].sum() == 3 and tp["info"].sum() >= 5
    lbp = pd.read_csv(rd / "aggregates" / "lost_by_partition.csv")
    assert int(lbp.loc[lbp.topic == "lost-read-past", "lost"].iloc[0]) == 1
    assert int(lbp.loc[lbp.topic == "unseen-not-lost", "unseen_at_end"].iloc[0]) == 1


def test_history_records_and_bad_lines(table_run):
    """history_records counts the records of the schema; the bad line and the torn tail are
    counted apart (docs/verdict-format.md)."""
    rd, verdict, _ = table_run
    lines = sum(len(p.read_text().splitlines()) for p in (rd / "history").glob("*.jsonl"))
    assert verdict["bad_lines"] == 1 and verdict["torn_lines"] == 1
    assert verdict["history_records"] == lines - 2       # every complete line but the bad one (and the torn)
