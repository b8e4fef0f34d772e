"""The checker's one reader of the features a run recorded as in force (checkers/features.py).

The records are kraftsim's own (``kraftsim.cluster.features_in_force``: what the launcher writes
to features.json and each controller emits as its ``features`` event), so the reader is held to
the format kraftsim really writes. The story tests (test_stories.py) take it through the checker.
"""
from __future__ import annotations

import json
from pathlib import Path

from checkers import features as F
from kraftsim.cluster import features_in_force


def _file(rd: Path, rec: object) -> None:
    (rd / "cluster").mkdir(parents=True, exist_ok=True)
    (rd / "cluster" / "features.json").write_text(rec if isinstance(rec, str) else json.dumps(rec))


def _event(rd: Path, host: str, rec: dict, *, before: int = 0) -> None:
    d = rd / "cluster-logs" / host
    d.mkdir(parents=True, exist_ok=True)
    lines = [{"wall": 1.0, "node": 1, "role": "broker", "event": "broker_registered", "broker": 1}] * before
    lines.append({"wall": 2.0, "node": 1000, "role": "controller", "event": "features", **rec})
    (d / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_features_json_gates_by_metadata_version(tmp_path):
    _file(tmp_path, features_in_force({"metadata.version": "3.5-IV0"}))
    got = F.read(tmp_path)
    assert got.source == "cluster/features.json" and got.versions == {"kafka.version": "3.5.0", "metadata.version": "3.5-IV0"}
    kip = got.gate("kip903")
    assert (kip.enabled, kip.kind, kip.because()) == (False, "protocol", "metadata.version=3.5-IV0")
    assert got.gate("elr").enabled is False


def test_an_override_key_is_named_as_what_decided(tmp_path):
    _file(tmp_path, features_in_force({"metadata.version": "4.1", "kip903.enabled": "false"}))
    kip = F.read(tmp_path).gate("kip903")
    assert (kip.enabled, kip.kind, kip.because()) == (False, "override", "set by kip903.enabled")
    elr = F.read(tmp_path).gate("elr")
    assert (elr.enabled, elr.kind, elr.because()) == (True, "both", "metadata.version=4.1-IV1, kafka.version=4.1.0")


def test_the_controllers_event_when_the_file_is_missing(tmp_path):
    _event(tmp_path, "controller-1", features_in_force({"metadata.version": "3.5-IV1"}), before=2)
    _event(tmp_path, "controller-2", features_in_force({"metadata.version": "3.5-IV1"}))
    got = F.read(tmp_path)
    assert got.source == "cluster-logs/controller-1/events.jsonl line 3"
    assert got.gate("kip903").enabled is True and got.gate("kip903").because() == "metadata.version=3.5-IV1, kafka.version=3.5.0"


def test_the_file_wins_over_the_events(tmp_path):
    _file(tmp_path, features_in_force({"metadata.version": "3.4"}))
    _event(tmp_path, "controller", features_in_force({"metadata.version": "4.1"}))
    got = F.read(tmp_path)
    assert got.source == "cluster/features.json" and got.gate("kip903").enabled is False


def test_controllers_that_disagree_leave_the_gate_unknown(tmp_path):
    _event(tmp_path, "controller-1", features_in_force({"metadata.version": "3.5-IV0"}))
    _event(tmp_path, "controller-2", features_in_force({"metadata.version": "3.5-IV1"}))
    got = F.read(tmp_path)
    kip = got.gate("kip903")
    assert kip.enabled is None and kip.kind == "unknown"
    assert "both on and off" in kip.because() and "controller-2" in kip.because()
    # a gate both sides agree on stays known
    assert got.gate("leader_epoch_bump_on_isr_shrink").enabled is True


def test_no_record_says_unknown(tmp_path):
    """Real Kafka (or a run from before the record): nothing is guessed from run.json."""
    (tmp_path / "run.json").write_text(json.dumps({"switches": {"metadata.version": "3.4"}}))
    got = F.read(tmp_path)
    assert got.source is None and got.problem == F.NO_RECORD
    g = got.gate("kip903")
    assert g.enabled is None and g.because() == F.NO_RECORD
    assert got.as_dict() == {"source": None, "versions": {}, "gates": {}, "problem": F.NO_RECORD}


def test_an_unreadable_file_is_one_line_naming_it(tmp_path):
    _file(tmp_path, "{not json")
    g = F.read(tmp_path).gate("kip903")
    assert g.enabled is None and g.because().startswith("cluster/features.json: not readable as JSON")
    assert "\n" not in g.because()
    _file(tmp_path, {"metadata.version": "3.4-IV0", "kip903": {"enabled": "no", "from": "metadata.version"}})
    g = F.read(tmp_path).gate("kip903")
    assert g.enabled is None and g.because() == ("cluster/features.json: field 'kip903.enabled' is 'no'; "
                                                 "want true or false")


def test_an_unreadable_file_falls_back_to_the_event(tmp_path):
    _file(tmp_path, "[]")
    _event(tmp_path, "controller", features_in_force({"metadata.version": "3.5-IV0"}))
    assert F.read(tmp_path).gate("kip903").because() == "metadata.version=3.5-IV0"


def test_a_software_version_reads_as_the_software_deciding(tmp_path):
    """A record may carry the broker's release beside metadata.version (a fix no metadata.version
    gates): the gate says the software decided it, with no change to the reader."""
    rec = {"metadata.version": "3.6-IV2", "kafka.version": "3.7.0",
           "hwm_requires_min_isr": {"enabled": True, "from": "kafka.version"},
           "kip903": {"enabled": True, "from": "metadata.version"}}
    _file(tmp_path, rec)
    got = F.read(tmp_path)
    assert got.versions == {"metadata.version": "3.6-IV2", "kafka.version": "3.7.0"}
    hwm = got.gate("hwm_requires_min_isr")
    assert (hwm.kind, hwm.because()) == ("software", "kafka.version=3.7.0")
    assert got.gate("kip903").kind == "protocol"


def test_a_nested_record_with_both_versions_reads_the_same(tmp_path):
    """The record kraftsim writes once it models kafka.version beside metadata.version nests its
    gates (``gates: {name: {on, decided_by}}``); ``decided_by: both`` names both versions. A gate
    given as something other than a bool is unknown, naming the field."""
    rec = {"kafka.version": "3.9.0", "kafka.version.default": False, "metadata.version": "3.4-IV0",
           "gates": {"effective_min_isr": {"on": True, "decided_by": "kafka.version", "kind": "software"},
                     "kip903": {"on": False, "decided_by": "both", "kind": "both"},
                     "elr": {"on": False, "decided_by": "eligible.leader.replicas.version"},
                     "pre_vote": {"on": "yes", "decided_by": "kafka.version"}}}
    _file(tmp_path, rec)
    got = F.read(tmp_path)
    assert got.versions == {"metadata.version": "3.4-IV0", "kafka.version": "3.9.0"}
    emi = got.gate("effective_min_isr")
    assert (emi.enabled, emi.kind, emi.because()) == (True, "software", "kafka.version=3.9.0")
    kip = got.gate("kip903")
    assert (kip.enabled, kip.kind, kip.because()) == (False, "both", "metadata.version=3.4-IV0, kafka.version=3.9.0")
    elr = got.gate("elr")
    assert (elr.kind, elr.because()) == ("override", "set by eligible.leader.replicas.version")
    pv = got.gate("pre_vote")
    assert pv.enabled is None and pv.because() == ("cluster/features.json: field 'gates.pre_vote.on' is 'yes'; "
                                                   "want true or false")
