"""vulnerable-x10.yaml runs every vulnerable cell of seeds.yaml and kafka-bugs.yaml that runs on
kraftsim, exactly as those suites run it (same campaign, same settings, same expectation).

Why: the ten-times suite is the check that no pair wins by luck; a vulnerable cell added to one
of the two suites and forgotten here would never be repeated, and a cell here whose settings
drifted from its suite's would repeat another race than the one the suite reports.
"""
from __future__ import annotations

from harness.suite.spec import Cell, load_suite
from tests.harness.clirun import REPO

SUITES = REPO / "campaigns" / "suites"


def _vulnerable(c: Cell) -> bool:
    return c.expect in ("loss", "loss-allowed") or bool(c.require_anomalies)


def _key(c: Cell) -> tuple:
    # the seed is the ten-times suite's own axis; the target is kraftsim in both (named two ways)
    return (c.campaign, tuple(sorted(o for o in c.overrides if not o.startswith(("target=", "target.embedded=")))), c.expect,
            tuple(sorted(c.require_anomalies)), c.allowed_by)


def test_every_vulnerable_kraftsim_cell_is_repeated_ten_times_as_its_suite_runs_it() -> None:
    wanted = {_key(c): c.id for name in ("seeds.yaml", "kafka-bugs.yaml")
              for c in load_suite(SUITES / name, validate_campaigns=False, target="kraftsim").cells
              if _vulnerable(c)}
    x10 = load_suite(SUITES / "vulnerable-x10.yaml", validate_campaigns=False)
    seeds: dict[tuple, set[int | None]] = {}
    for c in x10.cells:
        seeds.setdefault(_key(c), set()).add(c.seed)
    missing = [cid for k, cid in wanted.items() if k not in seeds]
    assert not missing, f"vulnerable cells not in vulnerable-x10.yaml (or with other settings): {missing}"
    assert set(seeds) == set(wanted), "vulnerable-x10.yaml has cells no suite runs"
    assert all(s == set(range(1, 11)) for s in seeds.values()), seeds
