"""Effects of known Kafka bugs that are not lost writes (checkers/effects.py), from planted evidence,
and their run-level families (checkers/families.py) with the columns evidence.SCHEMAS declares.

Each case has its control: the same evidence one fact short must not be named.
"""
from __future__ import annotations

import json
from pathlib import Path

from checkers import effects, evidence
from checkers.families import run_level


def _trunc(hwm: int | None, to: int = 168, part: int = 0) -> dict:
    e = {"event": "truncation", "t": 15.0, "node": 1, "topic": "faultline", "partition": part, "from_offset": 223,
         "to_offset": to, "reason": "diverging_epoch", "source": "cluster-logs/broker-1/events.jsonl", "line": 7}
    if hwm is not None:
        e["high_watermark"] = hwm
    return e


def _inconsistent(off: int, part: int = 0) -> dict:
    return {"topic": "faultline", "partition": part, "offset": off, "n_values": 2,
            "values": "producer-0-1 producer-1-2", "observed_by": "reader-0 drain"}


def test_uncommitted_read_needs_a_truncation_below_the_replicas_high_watermark() -> None:
    rows = [_inconsistent(o) for o in (167, 168, 200, 223)]
    got = effects.uncommitted_reads(rows, [_trunc(223)])
    assert [r["offset"] for r in got] == [168, 200]   # [to_offset, high_watermark)
    assert "below its high watermark 223" in got[0]["text"] and got[0]["broker"] == 1
    assert got[0]["source"] == "cluster-logs/broker-1/events.jsonl" and got[0]["line"] == 7
    # controls: a truncation at its HWM (3.4.1: the HWM waits), none recorded, another partition
    assert effects.uncommitted_reads(rows, [_trunc(168)]) == []
    assert effects.uncommitted_reads(rows, [_trunc(None)]) == []
    assert effects.uncommitted_reads(rows, [_trunc(223, part=1)]) == []


def _unclean(t: float, part: int = 0) -> dict:
    return {"event": "leader_elected", "t": t, "host": "controller", "topic": "faultline", "partition": part,
            "leader": 2, "reason": "unclean"}


def test_hwm_regression_is_a_cut_below_the_replicas_own_high_watermark() -> None:
    """KAFKA-14704's state told by the broker alone, read or not: a truncation below the replica's
    high watermark, unless an unclean election of that partition came first."""
    (got,) = effects.hwm_regressions([_trunc(223)])
    assert (got["broker"], got["topic"], got["partition"], got["to_offset"], got["high_watermark"]) == \
        (1, "faultline", 0, 168, 223)
    assert "below its own high watermark 223" in got["text"] and got["line"] == 7
    # controls: at its HWM (3.4.1 truncates before raising it), none recorded, after an unclean
    # election of the partition (the setting permits removing committed records)
    assert effects.hwm_regressions([_trunc(168)]) == [] and effects.hwm_regressions([_trunc(None)]) == []
    assert effects.hwm_regressions([_unclean(14.0), _trunc(223)]) == []
    # ... but only of that partition, and only one that came before the cut
    assert len(effects.hwm_regressions([_unclean(14.0, part=1), _trunc(223)])) == 1
    assert len(effects.hwm_regressions([_unclean(16.0), _trunc(223)])) == 1


def test_hwm_regression_from_real_kafka_3_4_0_lines() -> None:
    """The demoted leader of a real 3.4.0 run (corpus source faultline-3.4.0-kafka-14704-demoted-leader,
    docs/kafka-logs.md): its "Truncating to offset 129" and "Non-monotonic update of high watermark
    from (offset=130 ...)" lines are one hwm_regression, named by the file and line that told it."""
    from checkers import kafkalog
    src = Path(__file__).parent / "kafka_logs_real" / "faultline-3.4.0-kafka-14704-demoted-leader"
    events = [{**e, "t": e["wall"]} for e in kafkalog.read_cluster_logs(src / "cluster-logs")]
    (got,) = effects.hwm_regressions(events)
    assert (got["broker"], got["partition"], got["to_offset"], got["high_watermark"]) == (1, 4, 129, 130)
    line = (src / "cluster-logs" / got["source"].split("cluster-logs/", 1)[-1]).read_text().splitlines()[got["line"] - 1]
    assert "faultline-4" in line, line


def _note(t: float, host: str) -> dict:
    return {"kind": "note", "t": t, "detail": json.dumps({host: {"mode": "truncate-unflushed",
                                                                 "page_cache_cut": {"truncated_bytes": 100}}})}


def _load(t: float, host: str, clean: bool, d: str = "/d/broker-2/data") -> dict:
    return {"event": "log_dir_loaded", "t": t, "host": host, "node": 2, "log_dir": d, "clean_shutdown": clean}


def test_log_not_recovered_is_a_clean_load_first_after_a_cut() -> None:
    cut = [_note(10.0, "broker-2")]
    got = effects.logs_not_recovered([_load(1.0, "broker-2", False), _load(30.0, "broker-2", True)], cut)
    assert [(r["host"], r["log_dir"], r["t"]) for r in got] == [("broker-2", "/d/broker-2/data", 30.0)]
    # controls: recovered after the cut (then a later clean restart is fine); no cut; another host
    assert effects.logs_not_recovered([_load(20.0, "broker-2", False), _load(30.0, "broker-2", True)], cut) == []
    assert effects.logs_not_recovered([_load(30.0, "broker-2", True)], []) == []
    assert effects.logs_not_recovered([_load(30.0, "broker-3", True)], cut) == []


def test_log_dir_offline_and_the_run_level_families() -> None:
    """The three answer once per run (check-safe), each row exactly the schema's columns, so a
    large answer writes the same Parquet table as a small one stays in verdict.json."""
    class View:
        events = [{"event": "log_dir_offline", "t": 3.0, "host": "broker-1", "node": 1, "log_dir": "/d",
                   "error": "Malformed line in checkpoint file"}, _trunc(223), _load(30.0, "broker-2", True)]
        timeline = [_note(10.0, "broker-2")]
        inconsistent_offsets = [_inconsistent(o) for o in (167, 168)]
    found, failures = run_level(View())
    assert not failures
    assert {k: n for k, (_, n) in found.items() if k in ("uncommitted_read", "hwm_regression", "log_not_recovered",
                                                          "log_dir_offline")} == {
        "uncommitted_read": 1, "hwm_regression": 1, "log_not_recovered": 1, "log_dir_offline": 1}
    for name in ("uncommitted_read", "hwm_regression", "log_not_recovered", "log_dir_offline"):
        cols, n = found[name]
        assert list(cols) == [c for c, _ in evidence.SCHEMAS[name]], name
        assert evidence.to_table(name, cols, n).num_rows == n
    assert "Malformed line" in found["log_dir_offline"][0]["text"][0]

    class NoPartitions:   # a view without the partitions' rows (a logs-only check): none found
        events = View.events
        timeline: list = []
    found, failures = run_level(NoPartitions())
    assert not failures and found["uncommitted_read"][1] == 0 and found["log_not_recovered"][1] == 0
