"""The run-level anomalies read from the cluster's events: two active controllers at once, an ISR
change stuck (checkers/quorum.py, checkers/isr_changes.py).

Events are given as checkers/load.py hands them to the checker (``t`` on the run clock, ``host``,
the kraftsim fields); the timeline rows as the nemeses write them. The cases pair each finding
with the near miss Kafka 3.7+ shows (a check-quorum resignation, an answered proposal) and the
faults that must not count (a killed or paused leader claims nothing).
"""
from __future__ import annotations

from checkers import isr_changes, quorum
from checkers.families import FAMILIES, run_level


def _ev(t: float, host: str, event: str, **fields) -> dict:
    role = "controller" if host.startswith("controller") else "proxy" if host == "proxy" else "broker"
    return {"t": t, "host": host, "role": role, "event": event, "node": fields.pop("node", None), **fields}


def _fault(fid: str, fault: str, host: str, start: float, stop: float | None = None) -> list[dict]:
    rows = [{"t": start, "kind": "nemesis", "phase": "start", "id": fid, "fault": fault, "targets": [host]}]
    if stop is not None:
        rows.append({"t": stop, "kind": "nemesis", "phase": "stop", "id": fid, "fault": fault, "targets": [host]})
    return rows


def _elected(t: float, host: str, node: str, epoch: int) -> dict:
    return _ev(t, host, "controller_elected", node=node, epoch=epoch, leader=int(node))


def _resigned(t: float, host: str, node: str, epoch: int, reason: str) -> dict:
    return _ev(t, host, "controller_resigned", node=node, epoch=epoch, leader=int(node), reason=reason)


def test_a_leader_cut_from_its_voters_that_never_resigns_is_split_brain():
    """Kafka 3.6: controller-1 (epoch 2) is cut from the others at t=10; controller-2 is elected in
    epoch 3 at t=11.8 and fences the three brokers; controller-1 resigns only on learning epoch 3
    after the heal at t=30: 18.2 s of two active controllers."""
    events = [_elected(1.0, "controller-1", "1000", 2), _elected(11.8, "controller-2", "1001", 3),
              *[_ev(15.0 + b, "controller-2", "broker_fenced", node="1001", broker=b, reason="session_timeout")
                for b in (1, 2, 3)],
              _resigned(30.0, "controller-1", "1000", 2, "higher_epoch")]
    rows = quorum.split_brain(events, [])
    assert len(rows) == 1
    r = rows[0]
    assert (r["old_leader"], r["old_epoch"], r["new_leader"], r["new_epoch"]) == (1000, 2, 1001, 3)
    assert (r["from_t"], r["to_t"], r["seconds"]) == (11.8, 30.0, 18.2)
    assert r["ended_by"] == "controller-1 resigned (higher_epoch)"
    assert (r["brokers_fenced"], r["fenced_brokers"]) == (3, "1,2,3")


def test_real_kafka_controller_activations_are_tenures_too():
    """On real Kafka the tenures come from QuorumController's lines (checkers/kafkalog):
    ``controller_activated`` / ``controller_renounced`` with the epoch as ``controller_epoch``. 3.6:
    the cut controller never renounces; 3.7+: it renounces when check quorum makes its raft leader
    resign. Before, real Kafka's events made no tenure at all and no split brain was ever found."""
    act = [_ev(1.0, "controller-1", "controller_activated", node="1000", controller_epoch=2),
           _ev(11.8, "controller-2", "controller_activated", node="1001", controller_epoch=3)]
    rows = quorum.split_brain(act, [], end_t=30.0)
    assert [(r["old_leader"], r["new_leader"], r["seconds"]) for r in rows] == [(1000, 1001, 18.2)]
    renounced = [_ev(11.5, "controller-1", "controller_renounced", node="1000", controller_epoch=2)]
    assert quorum.split_brain(act + renounced, [], end_t=30.0) == []


def test_check_quorum_resignation_is_not_split_brain():
    """Kafka 3.7: the cut-off leader resigns 1.5 fetch timeouts after its last majority Fetch;
    the new one was elected a fraction of a second before: no row."""
    events = [_elected(1.0, "controller-1", "1000", 2), _elected(11.2, "controller-2", "1001", 3),
              _resigned(11.5, "controller-1", "1000", 2, "check_quorum")]
    assert quorum.split_brain(events, []) == []


def test_a_killed_or_paused_leader_claims_nothing():
    """A leader SIGKILLed (or SIGSTOPped) at t=10 never resigns by an event, but its tenure ends
    with the process fault the timeline recorded: no split brain with its successor."""
    for fault in ("kill", "pause"):
        events = [_elected(1.0, "controller-1", "1000", 2), _elected(11.5, "controller-2", "1001", 3),
                  _ev(40.0, "controller-2", "broker_fenced", node="1001", broker=1)]
        assert quorum.split_brain(events, _fault("f1", fault, "controller-1", 10.0, 20.0)) == [], fault
    # a network partition is no such fault: the same events with a partition are split brain
    events = [_elected(1.0, "controller-1", "1000", 2), _elected(11.5, "controller-2", "1001", 3),
              _ev(40.0, "controller-2", "broker_fenced", node="1001", broker=1)]
    assert len(quorum.split_brain(events, _fault("f2", "partition", "controller-1", 10.0, 20.0))) == 1


def test_a_restarted_controller_ends_its_tenure():
    """A controller whose next incarnation writes its ``features`` event stopped leading before."""
    events = [_elected(1.0, "controller-1", "1000", 2), _ev(9.0, "controller-1", "features", node="1000"),
              _elected(11.5, "controller-2", "1001", 3), _ev(30.0, "controller-3", "broker_fenced", broker=1)]
    assert quorum.split_brain(events, []) == []


def _isr(t: float, host: str, broker: int, isr: list[int], proposed: list[int] | None, epoch: int = 4) -> dict:
    return _ev(t, host, "leader_isr", topic="t", partition=0, broker=broker, leader_epoch=epoch, partition_epoch=7,
               isr=isr, maximal_isr=isr, proposed_isr=proposed)


def _answer(t: float, leader: int, new_isr: list[int], error: str | None, host: str = "controller-2") -> dict:
    return _ev(t, host, "alter_partition", topic="t", partition=0, leader=leader, new_isr=new_isr,
               accepted=error is None, error=error)


def test_a_shrink_rejected_invalid_request_stays_stuck():
    """Kafka 3.5.1 broker, 3.4 controller: leader 1 proposes ISR [1,3] at t=5; the rebuilt request
    (NewIsr []) is answered INVALID_REQUEST at t=8 (Kafka keeps the proposal and waits for metadata);
    nothing changes the partition until the records end at t=40: 35 s stuck, its answer named."""
    events = [_isr(1.0, "broker-1", 1, [1, 2, 3], None), _isr(5.0, "broker-1", 1, [1, 2, 3], [1, 3]),
              _answer(8.0, 1, [], "INVALID_REQUEST"), _answer(8.0, 1, [], "INVALID_REQUEST", host="proxy"),
              _ev(40.0, "controller-2", "broker_registered", broker=9)]
    rows = isr_changes.stuck(events, [])
    assert len(rows) == 1
    r = rows[0]
    assert (r["topic"], r["partition"], r["leader"], r["isr"], r["proposed_isr"]) == ("t", 0, 1, "[1,2,3]", "[1,3]")
    assert (r["from_t"], r["to_t"], r["seconds"]) == (5.0, 40.0, 35.0)
    assert r["answers"] == "INVALID_REQUEST (new_isr []) x1" and r["ended_by"].startswith("still pending")


def test_an_answered_or_superseded_proposal_is_not_stuck():
    """Kafka 3.5.2: the same shrink accepted 3 s after it was proposed; and a proposal replaced by
    the controller's own change of the partition (newer metadata) within 10 s."""
    ok = [_isr(5.0, "broker-1", 1, [1, 2, 3], [1, 3]), _answer(8.0, 1, [1, 3], None),
          _isr(8.1, "broker-1", 1, [1, 3], None), _ev(60.0, "controller-2", "broker_registered", broker=9)]
    assert isr_changes.stuck(ok, []) == []
    newer = [_isr(5.0, "broker-1", 1, [1, 2, 3], [1, 3]),
             _ev(9.0, "controller-2", "isr_changed", topic="t", partition=0, leader=1, isr=[1, 3]),
             _ev(60.0, "controller-2", "broker_registered", broker=9)]
    assert isr_changes.stuck(newer, []) == []


def test_an_unanswered_proposal_to_a_controller_that_commits_nothing_is_stuck():
    """Kafka 3.6, the active controller cut from the other controllers: the leader's shrink is
    never answered; it ends with the newer metadata the brokers read after the heal (t=33)."""
    events = [_isr(12.0, "broker-2", 2, [2, 3, 1], [2, 3]),
              _ev(33.0, "controller-2", "leader_elected", topic="t", partition=0, leader=3, isr=[3])]
    rows = isr_changes.stuck(events, [])
    assert [(r["seconds"], r["answers"], r["ended_by"]) for r in rows] == [(21.0, "no answer",
                                                                            "newer metadata (leader_elected)")]


def test_the_run_level_families_answer_their_anomalies_check_safe():
    """Both are declared once in FAMILIES, run once per run; one that raises is named, the other
    still answers (Jepsen's check-safe)."""
    class View:
        events = [_elected(1.0, "controller-1", "1000", 2), _elected(11.8, "controller-2", "1001", 3),
                  _ev(30.0, "controller-2", "broker_fenced", broker=1)]
        timeline: list = []
    found, failures = run_level(View())
    assert found["controller_split_brain"][1] == 1 and found["isr_change_stuck"][1] == 0 and not failures

    class Broken(View):
        events = [{"t": "x", "event": "controller_elected"}]
    names = {f.name for f in FAMILIES if f.run_level}
    found, failures = run_level(Broken())
    assert names >= {"controller_quorum", "isr_changes"}
    assert [f for f, _ in failures] and all(f in names for f, _ in failures)
