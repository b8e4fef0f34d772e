"""Suite axes: every cell once per value of a campaign key, the index showing them side by side.

A real (small) suite runs: a fault-free campaign on the embedded kraftsim cluster, two cells
(one expecting no loss, a control expecting a loss it cannot have) under the axis
``target.timing: [fast, kafka-defaults]`` - four real runs checked in the suite's one Spark
session. The index must put each cell's two runs on one row, one column per timing profile,
each run where its own verdict and run.json say it belongs; bad axes are exit 2 with one line.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from tests.harness.test_suite import ROOT, _bad_file, _faultline, _log, _one_line

CALM_CAMPAIGN = """
name: calm
target: {inventory: %s}
topic: {name: faultline, partitions: 1, replication_factor: 3, min_insync_replicas: 2}
workload: {producers: 1, consumers: 0, rate: 50, duration: 4, drain_timeout: 10, recovery_timeout: 10}
nemesis:
  schedule: targeted
  steps:
    - wait: 1
expect: no-loss
""" % (ROOT / "inventory" / "local.yaml")

AXIS_SUITE = """
name: axis
axes:
  target.timing: [fast, kafka-defaults]
defaults: {timeout: 300}
cells:
  - {name: calm/no-loss, campaign: calm.yaml, seeds: 1, expect: no-loss}
  - {name: calm/control, campaign: calm.yaml, seeds: 1, expect: loss}
"""


def test_axes_expand_like_seeds_and_name_their_cells(tmp_path: Path) -> None:
    from harness.suite.spec import load_suite
    (tmp_path / "calm.yaml").write_text(CALM_CAMPAIGN, encoding="utf-8")
    f = tmp_path / "suite.yaml"
    f.write_text(AXIS_SUITE.replace("seeds: 1, expect: loss", "seeds: [1, 2], expect: loss")
                 .replace("[fast, kafka-defaults]", "[fast, kafka-defaults]\n  workload.rate: [50, 80]"))
    spec = load_suite(f)
    assert spec.axes == {"target.timing": ["fast", "kafka-defaults"], "workload.rate": ["50", "80"]}
    ids = [c.id for c in spec.cells]
    assert len(ids) == 4 + 8 and len(set(ids)) == len(ids)
    assert ids[:4] == ["calm/no-loss[target.timing=fast,workload.rate=50]",
                       "calm/no-loss[target.timing=fast,workload.rate=80]",
                       "calm/no-loss[target.timing=kafka-defaults,workload.rate=50]",
                       "calm/no-loss[target.timing=kafka-defaults,workload.rate=80]"]
    assert ids[4] == "calm/control[s1,target.timing=fast,workload.rate=50]"
    c = spec.cells[6]
    assert c.row == "calm/control[s1]" and c.axes == {"target.timing": "kafka-defaults", "workload.rate": "50"}
    assert "target.timing=kafka-defaults" in c.overrides and "workload.rate=50" in c.overrides
    # the axis value is the run's own setting: the campaign loads with it
    from harness.campaign import load_campaign
    camp = load_campaign(Path(c.campaign), overrides=c.overrides, seed=c.seed)
    assert camp.workload.rate == 50


TARGET_SUITE = """
name: both
axes:
  target: [kraftsim, apache-kafka]
cells:
  - {name: calm/both, campaign: calm.yaml, seeds: 1, expect: no-loss}
  - {name: calm/sim-only, campaign: calm.yaml, seeds: 1, expect: no-loss, axes: {target: [kraftsim]}}
"""


def test_a_cell_keeps_some_axis_values_and_target_runs_one_side(tmp_path: Path) -> None:
    """A cell's own ``axes`` narrows a suite axis (a kraftsim-only scenario on a target axis);
    ``--target X`` on a suite with a target axis runs every cell on X alone, named without the
    axis tag, and leaves out the cells that do not run on X."""
    from harness.suite.spec import load_suite
    (tmp_path / "calm.yaml").write_text(CALM_CAMPAIGN, encoding="utf-8")
    f = tmp_path / "suite.yaml"
    f.write_text(TARGET_SUITE)
    assert [c.id for c in load_suite(f).cells] == ["calm/both[target=kraftsim]", "calm/both[target=apache-kafka]",
                                                   "calm/sim-only[target=kraftsim]"]
    sim = load_suite(f, target="kraftsim")
    assert [c.id for c in sim.cells] == ["calm/both", "calm/sim-only"] and not sim.axes
    real = load_suite(f, target="apache-kafka:4.1.0")
    assert [c.id for c in real.cells] == ["calm/both"] and "target.embedded=apache-kafka:4.1.0" in real.cells[0].overrides
    from groundwork.config import ConfigError
    with pytest.raises(ConfigError, match="not a value of the suite's axis target"):
        f.write_text(TARGET_SUITE.replace("[kraftsim]}}", "[docker]}}"))
        load_suite(f, validate_campaigns=False)



def test_target_refuses_a_suite_whose_own_set_names_another_target(tmp_path: Path) -> None:
    """A suite or cell ``set`` of ``target`` comes after ``--target`` and would win over it: the
    suite would run on the file's target while the user asked for another, without a word.
    Refused, naming where the file sets it; the same target, or a cell that sets none, runs."""
    from groundwork.config import ConfigError
    from harness.suite.spec import load_suite
    (tmp_path / "calm.yaml").write_text(CALM_CAMPAIGN, encoding="utf-8")
    f = tmp_path / "suite.yaml"
    f.write_text("name: x\ndefaults: {set: {target: kraftsim}}\ncells:\n  - {campaign: calm.yaml, expect: no-loss}\n")
    with pytest.raises(ConfigError, match=r"defaults\.set: target kraftsim .* --target apache-kafka cannot run it"):
        load_suite(f, target="apache-kafka")
    assert "target=kraftsim" in load_suite(f, target="kraftsim").cells[0].overrides
    f.write_text("name: x\ncells:\n  - {campaign: calm.yaml, expect: no-loss}\n"
                 "  - {campaign: calm.yaml, name: sim, expect: no-loss, set: {target.embedded: kraftsim}}\n")
    with pytest.raises(ConfigError, match=r"cells\[1\]\.set: target kraftsim"):
        load_suite(f, target="apache-kafka:4.1.0")


BAD_AXES = [
    ("axes: {expect: [loss, no-loss]}\ncells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: no-loss}\n",
     "axes.expect", "cell's own key"),
    ("axes: {target.timing: []}\ncells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: no-loss}\n",
     "axes.target.timing", "non-empty list"),
    ("axes: {target.timing: [fast, fast]}\ncells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: no-loss}\n",
     "axes.target.timing[1]", "listed twice"),
    ("axes: {target.timing: [fast]}\ncells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: no-loss, "
     "set: {target.timing: kafka-defaults}}\n", "cells[0].set", "axis"),
    ("axes: {workload.rate: [50, 0]}\ncells:\n  - {campaign: ../../campaigns/kill-restart.yaml, expect: no-loss}\n",
     "cells[0]", "workload.rate"),
]


@pytest.mark.parametrize("text,field,want", BAD_AXES, ids=[b[1] for b in BAD_AXES])
def test_bad_axes_are_exit_2_with_one_line(tmp_path: Path, text: str, field: str, want: str) -> None:
    f = _bad_file(tmp_path, text)
    p = _faultline(["suite", str(f), "--results-dir", str(tmp_path / "res")])
    assert p.returncode == 2, (p.stdout, p.stderr)
    _one_line(p.stderr, f, field, want)
    assert not (tmp_path / "res").exists()


def _matrix(page: str) -> tuple[list[str], dict[str, dict[str, dict[str, str]]]]:
    """report's side-by-side table: its column headings and, per row, per column, the run shown."""
    t = page[page.index('<table class="data" id="matrix">'):]
    t = t[:t.index("</table>")]
    cols = [html.unescape(x) for x in re.findall(r'<th data-axis="[^"]*">(.*?)</th>', t)]
    rows: dict[str, dict[str, dict[str, str]]] = {}
    for name, body in re.findall(r'<tr class="[^"]*" data-row="([^"]*)">(.*?)</tr>', t, re.S):
        cells = re.findall(r'<td class="axis-run ([^"]*)" data-axis="([^"]*)"(?: data-cell="([^"]*)")?>(.*?)</td>',
                           body, re.S)
        rows[html.unescape(name)] = {html.unescape(axis): {"outcome": outcome, "cell": html.unescape(cell),
                                                            "href": (re.findall(r'href="([^"]*)"', inner) or [""])[0]}
                                     for outcome, axis, cell, inner in cells}
    return cols, rows


@pytest.mark.slow
def test_a_suite_with_an_axis_shows_each_cell_per_value_side_by_side(tmp_path: Path) -> None:
    (tmp_path / "calm.yaml").write_text(CALM_CAMPAIGN, encoding="utf-8")
    (tmp_path / "suite.yaml").write_text(AXIS_SUITE, encoding="utf-8")
    results = tmp_path / "results"
    p = _faultline(["suite", str(tmp_path / "suite.yaml"), "--results-dir", str(results), "--no-progress",
                    "--no-preflight"], env={"FAULTLINE_STATE_DIR": str(tmp_path / "state")}, timeout=1500,
                   cwd=tmp_path)
    suite_dir = Path(p.stdout.strip().splitlines()[-1])
    # the control cannot lose without a fault: unexpected under both profiles, so exit 1
    assert p.returncode == 1, (p.stdout, p.stderr[-3000:])
    done = {r["cell"]: r for r in _log(suite_dir) if r.get("event") == "cell_finished"}
    assert set(done) == {f"calm/{c}[target.timing={t}]" for c in ("no-loss", "control")
                         for t in ("fast", "kafka-defaults")}, set(done)
    cols, rows = _matrix((suite_dir / "index.html").read_text())
    assert cols == ["target.timing=fast", "target.timing=kafka-defaults"]
    assert list(rows) == ["calm/no-loss", "calm/control"]       # the suite's order, one row per cell
    want = {"calm/no-loss": "as-expected", "calm/control": "unexpected"}
    for row, runs in rows.items():
        assert list(runs) == cols
        for col, shown in runs.items():
            timing = col.split("=", 1)[1]
            assert shown["cell"] == f"{row}[{col}]" and shown["outcome"] == want[row], (row, col, shown)
            rec = done[shown["cell"]]
            assert rec["outcome"] == want[row]
            # the run behind the column really ran with that profile, and the link opens it
            run_dir = Path(rec["run_dir"])
            assert shown["href"] == str((run_dir / "report.html").relative_to(suite_dir))
            run = json.loads((run_dir / "run.json").read_text())
            assert f"target.timing={timing}" in run["command"], run["command"]
            features = json.loads((run_dir / "cluster" / "features.json").read_text())
            assert features["timing"] == timing, features
