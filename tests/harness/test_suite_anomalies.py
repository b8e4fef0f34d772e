"""A suite cell's anomaly expectation replaces its campaign's (harness/suite/spec.py).

A bug pair's campaign file is its fixed side (``forbid_anomalies``); its vulnerable cell
requires the same anomaly. Validated through the real campaign, as every suite is before it
runs: the campaign's forbid beside the cell's require would be a bad expectation.
"""
from __future__ import annotations

from pathlib import Path

from harness.suite.spec import load_suite

ROOT = Path(__file__).resolve().parents[2]


def test_a_cell_stating_anomalies_states_both_lists(tmp_path: Path) -> None:
    camp = ROOT / "campaigns" / "bugs" / "KAFKA-14704.yaml"
    f = tmp_path / "s.yaml"
    f.write_text(f"""cells:
  - name: fixed
    campaign: {camp}
    expect: no-loss
  - name: vulnerable
    campaign: {camp}
    set: {{target.kafka.version: "3.4.0"}}
    expect: no-loss
    require_anomalies: [uncommitted_read]
""", encoding="utf-8")
    cells = {c.id: c for c in load_suite(f).cells}
    assert not any("anomalies" in o for o in cells["fixed"].overrides)   # the campaign's forbid stays
    vuln = cells["vulnerable"]
    assert "require_anomalies=[uncommitted_read]" in vuln.overrides and "forbid_anomalies=null" in vuln.overrides
    assert vuln.require_anomalies == ["uncommitted_read"] and vuln.forbid_anomalies == []
