"""The min ISR rule in force for ``ack_below_min_isr``: capped at the replication factor from Kafka
3.7, raw before, assumed capped when the run does not say (checkers/min_isr.py).

The table of hand-built cases (tests/checkers/cases.py ``MIN_ISR_RULE_CASES``, RF 2 and
min.insync.replicas 3) is written three times, identical but for the run's features record - the
file kraftsim's launcher writes, here in the nested shape that records ``kafka.version`` - and
each run is checked by the real checker job (Spark). The record alone decides which acks are
flagged.
"""
from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from checkers.job import check_run
from tests.checkers.builder import HistoryBuilder
from tests.checkers.cases import MIN_ISR_RULE_CASES

#: the features record per rule (None: no record, as on real Kafka)
RECORDS = {
    "capped": {"kafka.version": "3.7.0", "metadata.version": "3.7-IV4",
               "gates": {"effective_min_isr": {"on": True, "decided_by": "kafka.version", "kind": "software"}}},
    "raw": {"kafka.version": "3.6.2", "metadata.version": "3.6-IV2",
            "gates": {"effective_min_isr": {"on": False, "decided_by": "kafka.version", "kind": "software"}}},
    "unrecorded": None,
}


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    out = {}
    for rule, record in RECORDS.items():
        b = HistoryBuilder()
        for c in MIN_ISR_RULE_CASES:
            c.build(b, c.name)
        rd = b.write(tmp_path_factory.mktemp(rule) / "run", topic={"name": "t", "replication_factor": 2,
                                                                   "min_insync_replicas": 3})
        if record is not None:
            (rd / "cluster").mkdir()
            (rd / "cluster" / "features.json").write_text(json.dumps(record))
        verdict = check_run(rd, spark=spark)
        with open(rd / "anomalies" / "ack_below_min_isr.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        out[rule] = (verdict, rows)
    return out


@pytest.mark.parametrize("rule", list(RECORDS))
@pytest.mark.parametrize("case", MIN_ISR_RULE_CASES, ids=[c.name for c in MIN_ISR_RULE_CASES])
def test_case_under_rule(runs, rule, case):
    _, rows = runs[rule]
    mine = [r for r in rows if r["topic"] == case.name]
    assert len(mine) == getattr(case, rule), f"{case.name} under the {rule} rule: {mine}"
    for r in mine:
        assert r["judged_by"] == case.judged_by, r
        assert int(r["min_insync_replicas"]) == (3 if rule == "raw" else 2)


def test_the_verdict_says_which_rule_and_what_decided_it(runs):
    capped = runs["capped"][0]["checker"]["ack_below_min_isr"]
    assert (capped["min_insync_replicas"], capped["replication_factor"], capped["effective_min_isr"]) == (3, 2, 2)
    assert capped["assumed"] is False and "effective_min_isr on, kafka.version=3.7.0" in capped["rule"]
    raw = runs["raw"][0]["checker"]["ack_below_min_isr"]
    assert raw["effective_min_isr"] == 3 and raw["assumed"] is False
    assert "uncapped" in raw["rule"] and "kafka.version=3.6.2" in raw["rule"]
    unrec = runs["unrecorded"][0]["checker"]["ack_below_min_isr"]
    assert unrec["effective_min_isr"] == 2 and unrec["assumed"] is True
    assert "assumed" in unrec["rule"] and "no features.json" in unrec["rule"]
    # per partition, the evidence: the replicas' own logs where followers recorded them, else the
    # leader's ISR view, labelled as the fallback
    assert capped["judged_by"] == {"replica_logs": ["rf2-replicas-one-copy@0", "rf2-replicas-two-copies@0"],
                                   "leader_isr": ["rf2-leader-isr-one@0", "rf2-leader-isr-two@0"]}
    assert capped["note"].startswith("judged from an ISR view: no independent replica evidence") \
        and "leader_isr" in capped["note"]


def test_replica_evidence_overrides_the_leaders_full_isr(runs):
    # rf2-replicas-one-copy: the leader said ISR [1, 2]; the follower's log says it lacked offset 1
    _, rows = runs["capped"]
    (r,) = [r for r in rows if r["topic"] == "rf2-replicas-one-copy"]
    assert (r["copies_at_most"], r["replicas_lacking"], r["replication_factor"]) == ("1", "2", "2")
    assert (r["isr_at_invoke"], r["isr_at_ack"]) == ("2", "2")
    assert Counter(x["judged_by"] for x in rows) == Counter({"replica_logs": 1, "leader_isr": 1})


def test_without_a_replication_factor_the_setting_is_judged_raw(spark, tmp_path: Path):
    b = HistoryBuilder()
    case = next(c for c in MIN_ISR_RULE_CASES if c.name == "rf2-leader-isr-two")
    case.build(b, case.name)
    v = check_run(b.write(tmp_path / "run", topic={"name": "t", "min_insync_replicas": 3}), spark=spark)
    info = v["checker"]["ack_below_min_isr"]
    assert (info["effective_min_isr"], info["replication_factor"]) == (3, None)
    assert "replication factor is not recorded" in info["rule"]
    assert v["counts"]["ack_below_min_isr"] == 1
