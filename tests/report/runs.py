"""Synthetic run directories for the report tests.

Synthetic on purpose: the report only reads files, so hand-written files in
the shared run-directory contract exercise it fully and make the expected numbers known
exactly. Only the evidence is hand-written: whether it meets the run's expectation is decided
by the checker's own decision (:func:`checkers.outcome.decide`, :func:`decide_verdict`), as
check_run does, so the report is tested against what the checker would write. The loss run tells docs/seeds.md#seed-000's story: broker 2's disk is wiped, a delayed
AlterPartition re-admits it, the leader dies, broker 2 is elected with an empty log and
three acknowledged writes are gone; one later AlterPartition is rejected with
INELIGIBLE_REPLICA (107).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from checkers.outcome import Evidence, Expectation, decide

WALL0 = 1_795_000_000.0  # 2026-11-17, wall time of t=0
TOPIC = "faultline"

# (partition, offset, value, producer, ack_t, attribution)
LOST = [
    (1, 1201, "producer-0-1187", "producer-0", 21.402,
     "faults: wipe[broker-2] f-2 20.000-25.000 | elections: leader_elected leader=2 reason=leader_fenced"),
    (1, 1202, "producer-1-1190", "producer-1", 21.455,
     "faults: wipe[broker-2] f-2 20.000-25.000 | elections: leader_elected leader=2 reason=leader_fenced"),
    (2, 877, "producer-0-1193", "producer-0", 21.731,
     "faults: wipe[broker-2] f-2 | alter_partition: accepted new_isr=[0,2]"),
]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _throughput(duration: int, dip: tuple[int, int] | None) -> pd.DataFrame:
    rows = []
    for s in range(duration):
        ok, fail, info, p50, p99 = 180, 0, 0, 4.0 + (s % 3), 12.0 + (s % 5)
        if dip and dip[0] <= s < dip[1]:
            ok, fail, info, p50, p99 = 20, 40, 6, 90.0, 1800.0
        rows.append({"second": s, "ok": ok, "fail": fail, "info": info,
                     "latency_p50_ms": p50, "latency_p99_ms": p99})
    return pd.DataFrame(rows)


def _run_json(run_id: str, campaign: str, expect: str, seed: int, kip903: bool, duration: float) -> dict[str, Any]:
    return {
        "run_id": run_id, "campaign": campaign, "campaign_path": f"campaigns/{campaign}.yaml",
        "inventory": "inventory/local.yaml", "target": "kraftsim-local", "seed": seed,
        "wall_at_t0": WALL0, "started_wall": WALL0, "ended_wall": WALL0 + duration, "duration_s": duration,
        "expect": expect, "switches": {"kip903.enabled": kip903, "eligible.leader.replicas.version": 0},
        "target_version": "kraftsim 0.1",
        "command": f"faultline run campaigns/{campaign}.yaml --seed {seed} --set target.kip903.enabled={str(kip903).lower()}",
    }


def decide_verdict(run_dir: Path) -> dict[str, Any]:
    """Fill verdict.json's decision fields (outcome, as_expected, expectations, ...) from its
    evidence and run.json's expectation, with the checker's one decision; returns the verdict.
    Call again after editing the evidence."""
    run = json.loads((run_dir / "run.json").read_text())
    v = json.loads((run_dir / "verdict.json").read_text())
    exp = Expectation.from_run(run)
    v.update(decide(exp, Evidence(lost=int(v["counts"]["lost_write"]), acked=v.get("acked_writes"), valid=v["valid"],
                                  invalid_because=list(v.get("invalid_because") or []), counts=v["counts"],
                                  stories=list(v.get("stories") or []))).to_verdict(exp))
    (run_dir / "verdict.json").write_text(json.dumps(v, indent=1))
    return v


def make_loss_run(root: Path, *, expect: str = "no-loss", run_id: str = "20261117T000000-kip903-off",
                  wall0: float = WALL0) -> Path:
    """A run that lost 3 acknowledged writes (2 on faultline-1, 1 on faultline-2)."""
    d = root / run_id
    d.mkdir(parents=True)
    duration = 60.0
    run = _run_json(run_id, "kip903-wipe-race", expect, 7, False, duration)
    run["wall_at_t0"] = run["started_wall"] = wall0
    (d / "run.json").write_text(json.dumps(run, indent=1))
    (d / "campaign.yaml").write_text(f"name: kip903-wipe-race\nexpect: {expect}\nseed: 7\n")
    lost = 3
    verdict = {
        "valid": False, "acked_writes": 10_440,
        "invalid_because": ["lost_write", "inconsistent_offset", "realtime_offset_regression"],
        "history_records": 48_113,
        "counts": {"lost_write": lost, "unseen_at_end": 0, "inconsistent_offset": 2, "duplicate": 0,
                   "offset_mismatch": 0, "nonmonotonic_send": 0, "send_skip": 0,
                   "realtime_offset_regression": 1, "nonmonotonic_poll": 0, "poll_skip": 0,
                   "failed_write_visible": 0, "failed_write_visible_allowed": 4},
        "examples": {"lost_write": [{"topic": TOPIC, "partition": p, "offset": o, "value": v, "process": pr,
                                     "ack_t": t} for p, o, v, pr, t, _ in LOST],
                     "realtime_offset_regression": [{"topic": TOPIC, "partition": 1, "offset": 1201,
                                                     "value": "producer-1-1300", "invoke_t": 31.2,
                                                     "prior_offset": 1460}]},
        "lost_writes_by_partition": {f"{TOPIC}@1": 2, f"{TOPIC}@2": 1},
        # as checkers/verdict.py writes it: identity, window, per-category arrays, one-line summary
        "attribution": [{"topic": TOPIC, "partition": p, "offset": o, "value": v, "process": pr, "ack_t": t,
                         "miss_t": 52.0, "miss_by": "drain", "lost_because": "final_drain_read_whole_partition", "faults": [a.split(" | ")[0]],
                         "elections": [], "attribution": a}
                        for p, o, v, pr, t, a in LOST],
    }
    (d / "verdict.json").write_text(json.dumps(verdict, indent=1))
    decide_verdict(d)
    (d / "anomalies").mkdir()
    pd.DataFrame([{"topic": TOPIC, "partition": p, "offset": o, "value": v, "process": pr, "op": i,
                   "invoke_t": t - 0.004, "ack_t": t, "max_read_offset": 1460 if p == 1 else 1310,
                   "drain_end": 1461 if p == 1 else 1311, "lost_because": "final_drain_read_whole_partition",
                   "miss_t": 52.0, "miss_by": "drain",
                   "attribution": a} for i, (p, o, v, pr, t, a) in enumerate(LOST)]
                 ).to_csv(d / "anomalies" / "lost_write.csv", index=False)
    pd.DataFrame([{"topic": TOPIC, "partition": 1, "offset": 1201, "values": "producer-0-1187|producer-1-1300"},
                  {"topic": TOPIC, "partition": 1, "offset": 1202, "values": "producer-1-1190|producer-0-1301"}]
                 ).to_csv(d / "anomalies" / "inconsistent_offset.csv", index=False)
    (d / "aggregates").mkdir()
    _throughput(int(duration), (20, 27)).to_csv(d / "aggregates" / "throughput.csv", index=False)
    # the checker's shape (checkers/aggregates.py): every partition, lost or not
    pd.DataFrame([{"topic": TOPIC, "partition": p, "acked": a, "max_acked_offset": m, "max_read_offset": m,
                   "drain_end": m + 1, "lost": n, "unseen_at_end": 0}
                  for p, a, m, n in ((0, 3480, 3479, 0), (1, 3470, 1460, 2), (2, 3490, 1310, 1))]
                 ).to_csv(d / "aggregates" / "lost_by_partition.csv", index=False)
    _jsonl(d / "timeline.jsonl", [
        {"v": 1, "t": 0.0, "kind": "phase", "phase": "setup", "detail": {}},
        {"v": 1, "t": 2.0, "kind": "phase", "phase": "workload", "detail": {}},
        {"v": 1, "t": 18.0, "kind": "nemesis", "phase": "start", "id": "f-1", "fault": "alter-partition-delay",
         "targets": ["broker-0"], "detail": {"delay_s": 6}},
        {"v": 1, "t": 20.0, "kind": "nemesis", "phase": "start", "id": "f-2", "fault": "wipe",
         "targets": ["broker-2"], "detail": {}},
        {"v": 1, "t": 24.0, "kind": "nemesis", "phase": "stop", "id": "f-1", "fault": "alter-partition-delay",
         "targets": ["broker-0"], "detail": {}},
        {"v": 1, "t": 25.0, "kind": "nemesis", "phase": "stop", "id": "f-2", "fault": "wipe",
         "targets": ["broker-2"], "detail": {}},
        {"v": 1, "t": 32.0, "kind": "nemesis", "phase": "start", "id": "f-3", "fault": "kill",
         "targets": ["broker-0"], "detail": {}},
        {"v": 1, "t": 40.0, "kind": "nemesis", "phase": "stop", "id": "f-3", "fault": "kill",
         "targets": ["broker-0"], "detail": {}},
        {"v": 1, "t": 45.0, "kind": "phase", "phase": "heal", "detail": {}},
        {"v": 1, "t": 50.0, "kind": "phase", "phase": "drain", "detail": {}},
    ])
    obs = []
    for s in range(0, 60):
        for p in range(3):
            leader = 0
            if p in (1, 2) and 21.8 <= s < 33:
                leader = 0
            if p in (1, 2) and s >= 33:
                leader = 2
            if p == 0 and 32 <= s < 35:
                leader = None
            obs.append({"t": s + 0.1 * p, "topic": TOPIC, "partition": p, "leader": leader if leader is not None else -1,
                        "leader_epoch": 1 + (s >= 33), "isr": [0, 1, 2] if s < 20 else [0, 1], "elr": [],
                        "error": "LEADER_NOT_AVAILABLE" if leader is None else None})
    _jsonl(d / "observer.jsonl", obs)

    def ev(t: float, node: int, role: str, event: str, **kw: Any) -> dict[str, Any]:
        return {"wall": wall0 + t, "node": node, "role": role, "event": event, **kw}
    ctl = [ev(0.5, 100, "controller", "broker_registered", broker=b, broker_epoch=10 + b,
              previous_broker_epoch=-1, clean_shutdown=True) for b in range(3)]
    for p in range(3):
        ctl.append(ev(1.0, 100, "controller", "leader_elected", topic=TOPIC, partition=p, leader=0, leader_epoch=1,
                      partition_epoch=1, isr=[0, 1, 2], elr=[], reason="initial", leader_recovery_state=0,
                      candidates=[0, 1, 2]))
    ctl += [
        ev(20.1, 100, "controller", "broker_fenced", broker=2, broker_epoch=12, reason="heartbeat_timeout"),
        ev(20.2, 100, "controller", "isr_changed", topic=TOPIC, partition=1, leader=0, leader_epoch=1,
           partition_epoch=2, isr=[0, 1], elr=[], reason="broker_fenced"),
        ev(20.2, 100, "controller", "isr_changed", topic=TOPIC, partition=2, leader=0, leader_epoch=1,
           partition_epoch=2, isr=[0, 1], elr=[], reason="broker_fenced"),
        ev(21.0, 100, "controller", "broker_registered", broker=2, broker_epoch=40, previous_broker_epoch=12,
           clean_shutdown=False),
        ev(21.8, 100, "controller", "alter_partition", topic=TOPIC, partition=1, leader=0, new_isr=[0, 1, 2],
           broker_epochs={"0": 10, "1": 11, "2": 12}, partition_epoch=2, version=2, accepted=True, error=None,
           error_code=0),
        ev(21.8, 100, "controller", "alter_partition", topic=TOPIC, partition=2, leader=0, new_isr=[0, 1, 2],
           broker_epochs={"0": 10, "1": 11, "2": 12}, partition_epoch=2, version=2, accepted=True, error=None,
           error_code=0),
        ev(28.0, 100, "controller", "alter_partition", topic=TOPIC, partition=0, leader=0, new_isr=[0, 1, 2],
           broker_epochs={"0": 10, "1": 11, "2": 12}, partition_epoch=1, version=3, accepted=False,
           error="INELIGIBLE_REPLICA", error_code=107),
        ev(32.2, 100, "controller", "broker_fenced", broker=0, broker_epoch=10, reason="heartbeat_timeout"),
        ev(32.3, 100, "controller", "leader_elected", topic=TOPIC, partition=0, leader=-1, leader_epoch=2,
           partition_epoch=2, isr=[0], elr=[], reason="leader_fenced", leader_recovery_state=0, candidates=[]),
        ev(32.3, 100, "controller", "leader_elected", topic=TOPIC, partition=1, leader=2, leader_epoch=2,
           partition_epoch=4, isr=[1, 2], elr=[], reason="leader_fenced", leader_recovery_state=0,
           candidates=[{"broker": 2, "log_start_offset": 0, "log_end_offset": 0, "local_log_size_bytes": 0},
                       {"broker": 1, "log_start_offset": 0, "log_end_offset": 1460,
                        "local_log_size_bytes": 190_000}]),
        ev(32.3, 100, "controller", "leader_elected", topic=TOPIC, partition=2, leader=2, leader_epoch=2,
           partition_epoch=4, isr=[1, 2], elr=[], reason="leader_fenced", leader_recovery_state=0,
           candidates=[2, 1]),
        ev(34.9, 100, "controller", "leader_elected", topic=TOPIC, partition=0, leader=1, leader_epoch=3,
           partition_epoch=3, isr=[1], elr=[], reason="unclean", leader_recovery_state=1, candidates=[1]),
        ev(40.5, 100, "controller", "broker_registered", broker=0, broker_epoch=55, previous_broker_epoch=10,
           clean_shutdown=False),
    ]
    _jsonl(d / "cluster-logs" / "controller-100" / "events.jsonl", ctl)
    _jsonl(d / "cluster-logs" / "broker-2" / "events.jsonl", [
        ev(40.8, 2, "broker", "truncation", topic=TOPIC, partition=1, from_offset=1460, to_offset=1190,
           reason="leader_epoch"),
        ev(21.0, 2, "broker", "recovery", topic=TOPIC, partition=1, recovery_point=0, log_end_offset=0,
           truncated_bytes=0, reason="disk_wiped"),
        ev(21.0, 2, "broker", "recovery", topic=TOPIC, partition=2, recovery_point=0, log_end_offset=0,
           truncated_bytes=0, reason="disk_wiped"),
    ])
    _jsonl(d / "cluster-logs" / "broker-1" / "events.jsonl", [   # the unclean winner's own side (docs/seeds.md#seed-004)
        ev(34.95, 1, "broker", "became_leader", topic=TOPIC, partition=0, broker=1, leader_epoch=3,
           log_start_offset=0, log_end_offset=1190, hwm=1100, local_log_size_bytes=153_600,
           local_log_start_timestamp=1_763_000_000_000, leader_recovery_state=1),
        ev(34.95, 1, "broker", "became_leader", topic=TOPIC, partition=0, broker=1, leader_epoch=9,
           log_start_offset=0, log_end_offset=5, hwm=5, local_log_size_bytes=1, local_log_start_timestamp=-1,
           leader_recovery_state=0),   # another epoch: not this election's
    ])
    _jsonl(d / "proxy-events.jsonl", [
        ev(18.5, -1, "proxy", "alter_partition_held", topic=TOPIC, partition=1, delay_s=3.2),
    ])
    return d


def make_clean_run(root: Path, *, expect: str = "no-loss", run_id: str = "20261118T000000-kip903-on",
                   wall0: float = WALL0 + 86_400) -> Path:
    """A run with KIP-903 on: no lost write; the stale AlterPartition is rejected (107)."""
    d = root / run_id
    d.mkdir(parents=True)
    duration = 40.0
    run = _run_json(run_id, "kip903-wipe-race", expect, 8, True, duration)
    run["wall_at_t0"] = run["started_wall"] = wall0
    (d / "run.json").write_text(json.dumps(run, indent=1))
    verdict = {"valid": True, "acked_writes": 7_100,
               "invalid_because": [], "history_records": 29_004,
               "counts": {"lost_write": 0, "unseen_at_end": 0, "inconsistent_offset": 0, "duplicate": 0,
                          "offset_mismatch": 0, "nonmonotonic_send": 0, "send_skip": 0,
                          "realtime_offset_regression": 0, "nonmonotonic_poll": 0, "poll_skip": 0,
                          "failed_write_visible": 0, "failed_write_visible_allowed": 0},
               "examples": {}, "lost_writes_by_partition": {}, "attribution": []}
    (d / "verdict.json").write_text(json.dumps(verdict, indent=1))
    decide_verdict(d)
    (d / "aggregates").mkdir()
    _throughput(int(duration), (20, 22)).to_csv(d / "aggregates" / "throughput.csv", index=False)
    _jsonl(d / "timeline.jsonl", [
        {"v": 1, "t": 20.0, "kind": "nemesis", "phase": "start", "id": "f-1", "fault": "wipe",
         "targets": ["broker-2"], "detail": {}},
        {"v": 1, "t": 24.0, "kind": "nemesis", "phase": "stop", "id": "f-1", "fault": "wipe",
         "targets": ["broker-2"], "detail": {}},
    ])

    def ev(t: float, event: str, **kw: Any) -> dict[str, Any]:
        return {"wall": wall0 + t, "node": 100, "role": "controller", "event": event, **kw}
    _jsonl(d / "cluster-logs" / "controller-100" / "events.jsonl", [
        ev(1.0, "leader_elected", topic=TOPIC, partition=0, leader=0, leader_epoch=1, partition_epoch=1,
           isr=[0, 1, 2], elr=[], reason="initial", leader_recovery_state=0, candidates=[0, 1, 2]),
        ev(22.0, "alter_partition", topic=TOPIC, partition=0, leader=0, new_isr=[0, 1, 2],
           broker_epochs={"0": 10, "1": 11, "2": 12}, partition_epoch=2, version=3, accepted=False,
           error="INELIGIBLE_REPLICA", error_code=107),
    ])
    return d
