"""Suite files: a matrix of campaign runs, each cell with the outcome it must have.

Why suites: a green nightly run is only believed by someone who has seen the same suite turn
red on a configuration known to lose data. So a suite pairs every *fixed* configuration with
its *vulnerable* control (seed 000 KIP-903 at metadata.version 3.4, seed 003 §2.4 Last Replica
Standing before ELR, seed 001 unclean election) and says what each cell must show:

- ``no-loss``: no acknowledged write lost and a valid history (the checker's ``as_expected``);
- ``loss``: the known-bad control lost acknowledged writes (it *must*: a control that stops
  losing means the fault no longer bites, and the fixed cells prove nothing);
- ``loss-allowed``: writes are lost and the configuration permits it (e.g.
  ``unclean.leader.election.enable=true``, KIP-704): every story in the verdict names the
  setting in ``allowed_by``; a loss with a story whose ``allowed_by`` is null is unexpected.

Schema (docs/suites.md)::

    name: seeds                      # optional; default: file name
    description: text                # optional
    defaults: {inventory: ..., seeds: [...], set: {...}, timeout: S}   # optional, per cell
    cells:
      - name: kip-903/vulnerable     # unique; letters, digits, . _ - / = @
        campaign: ../kip-903.yaml    # relative to the suite file
        set: {target.metadata.version: "3.4"}   # --set overrides (mapping, or list of k=v)
        seeds: [7]                   # int or list: one cell per seed (default: the campaign's)
        inventory: PATH | [PATH...]  # --set target.inventory=PATH: one cell per inventory
        expect: no-loss | loss | loss-allowed
        allowed_by: unclean.leader.election.enable=true   # loss-allowed: the label's fallback
        require_errors: [NOT_ENOUGH_REPLICAS, ...]   # at least one send ended with one of these
        timeout: 900                 # seconds the run may take before it counts as infrastructure

Every cell is validated up front by loading its campaign with its overrides, so a bad
override is a bad suite file (exit 2, one line) before anything runs.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from groundwork.config import ConfigError, Validator, load_yaml, parse_override, resolve_path

SUITE_KEYS = ("name", "description", "defaults", "cells")
CELL_KEYS = ("name", "campaign", "set", "seeds", "inventory", "expect", "allowed_by", "timeout", "require_errors")
DEFAULT_KEYS = ("set", "seeds", "inventory", "timeout")
EXPECTS = ("no-loss", "loss", "loss-allowed")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/=@+-]*$")
DEFAULT_TIMEOUT = 900.0

#: cell outcomes; only ``as-expected`` is a pass
AS_EXPECTED, UNEXPECTED, INCONCLUSIVE, ERROR = "as-expected", "unexpected", "inconclusive", "error"


@dataclass
class Cell:
    """One run: a campaign with overrides, a seed, an inventory and an expectation."""
    id: str
    campaign: str                   # absolute path
    overrides: list[str]            # k=v, the suite's own, inventory and expect included
    expect: str
    seed: int | None = None
    inventory: str | None = None    # absolute path, or None for the campaign's own
    allowed_by: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    index: int = 0
    require_errors: list[str] = field(default_factory=list)

    def command(self, python: str, results_dir: str) -> list[str]:
        """`faultline run --no-check` for this cell (the suite checks every run in one session)."""
        cmd = [python, "-m", "harness.cli", "run", self.campaign, "--no-check", "--no-progress",
               "--results-dir", results_dir]
        if self.seed is not None:
            cmd += ["--seed", str(self.seed)]
        for o in self.overrides:
            cmd += ["--set", o]
        return cmd

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SuiteSpec:
    path: Path
    name: str
    description: str
    cells: list[Cell] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "name": self.name, "description": self.description,
                "cells": [c.to_json() for c in self.cells]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "SuiteSpec":
        return cls(path=Path(doc["path"]), name=doc["name"], description=doc.get("description", ""),
                   cells=[Cell(**c) for c in doc["cells"]])


def _overrides(c: Validator, v: Any, path: str) -> list[str]:
    """``set:`` as a mapping ``{dotted.key: value}`` or a list of ``dotted.key=value``."""
    if v is None:
        return []
    if isinstance(v, dict):
        out = []
        for k, val in v.items():
            if not isinstance(k, str) or not k:
                raise c.fail(path, f"keys are dotted campaign keys like workload.duration, got {k!r}")
            if isinstance(val, (dict, list)) or val is None:
                raise c.fail(f"{path}.{k}", "expected a scalar value (string, number or boolean)")
            out.append(f"{k}={str(val).lower() if isinstance(val, bool) else val}")
        return out
    items = c.str_list(v, path)
    for i, s in enumerate(items):
        try:
            parse_override(s)
        except ConfigError as e:
            raise c.fail(f"{path}[{i}]", f"expected dotted.key=value ({e.want})") from None
    return items


def _seeds(c: Validator, v: Any, path: str) -> list[int | None]:
    if v is None:
        return [None]
    vals = v if isinstance(v, list) else [v]
    if not vals:
        raise c.fail(path, "expected a seed or a non-empty list of seeds")
    return [c.integer(s, f"{path}[{i}]" if isinstance(v, list) else path, min=0) for i, s in enumerate(vals)]


def _inventories(c: Validator, v: Any, path: str, base: Path) -> list[str | None]:
    if v is None:
        return [None]
    vals = c.str_list(v, path, min_len=1)
    out: list[str | None] = []
    for i, s in enumerate(vals):
        p = resolve_path(s, relative_to=base)
        if not p.is_file():
            raise c.fail(f"{path}[{i}]" if isinstance(v, list) else path,
                         f"inventory file {s} not found (looked beside the suite file and in the current folder)")
        out.append(str(p))
    return out


def load_suite(file: str | Path, *, validate_campaigns: bool = True) -> SuiteSpec:
    """Parse and validate a suite file; raise ConfigError (one line: file, field, want)."""
    path = Path(file)
    doc = load_yaml(path, "suite file")
    c = Validator(path)
    if doc is None:
        raise c.fail("", "suite file is empty; expected a mapping with cells (see docs/suites.md)")
    doc = c.mapping(doc, "", allow_none=False)
    c.keys(doc, "", SUITE_KEYS, required=["cells"])
    name = c.string(doc.get("name", path.stem), "name")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise c.fail("name", f"letters, digits, '.', '_', '-' (it names the suite's folder), got {name!r}")
    desc = c.string(doc["description"], "description") if doc.get("description") is not None else ""
    defaults = c.mapping(doc.get("defaults"), "defaults")
    c.keys(defaults, "defaults", DEFAULT_KEYS)
    base = path.resolve().parent
    raw_cells = doc["cells"]
    if not isinstance(raw_cells, list) or not raw_cells:
        raise c.fail("cells", "expected a non-empty list of cells (campaign, expect, ...)")
    cells: list[Cell] = []
    seen: dict[str, str] = {}
    for i, raw in enumerate(raw_cells):
        p = f"cells[{i}]"
        m = c.mapping(raw, p, allow_none=False)
        c.keys(m, p, CELL_KEYS, required=["campaign", "expect"])
        camp_raw = c.string(m["campaign"], f"{p}.campaign")
        camp = resolve_path(camp_raw, relative_to=base)
        if not camp.is_file():
            raise c.fail(f"{p}.campaign", f"campaign file {camp_raw} not found (looked beside the suite file and in the current folder)")
        cname = c.string(m.get("name", camp.stem), f"{p}.name")
        if not NAME_RE.match(cname):
            raise c.fail(f"{p}.name", f"letters, digits and . _ / = @ + - (it names the cell in reports), got {cname!r}")
        expect = c.string(m["expect"], f"{p}.expect", choices=EXPECTS)
        allowed_by = c.string(m["allowed_by"], f"{p}.allowed_by") if m.get("allowed_by") is not None else None
        if allowed_by and expect != "loss-allowed":
            raise c.fail(f"{p}.allowed_by", "only meaningful with expect: loss-allowed")
        sets = _overrides(c, defaults.get("set"), "defaults.set") + _overrides(c, m.get("set"), f"{p}.set")
        for o in sets:
            if o.split("=", 1)[0].strip() in ("expect", "target.inventory"):
                raise c.fail(f"{p}.set", f"{o.split('=', 1)[0]} is the cell's own key: use {p}."
                             f"{'expect' if o.startswith('expect') else 'inventory'}")
        seeds = _seeds(c, m["seeds"], f"{p}.seeds") if "seeds" in m else _seeds(c, defaults.get("seeds"), "defaults.seeds")
        invs = (_inventories(c, m["inventory"], f"{p}.inventory", base) if "inventory" in m
                else _inventories(c, defaults.get("inventory"), "defaults.inventory", base))
        timeout = c.number(m.get("timeout", defaults.get("timeout", DEFAULT_TIMEOUT)), f"{p}.timeout", positive=True)
        require = c.str_list(m["require_errors"], f"{p}.require_errors", min_len=1) if m.get("require_errors") is not None else []
        for seed in seeds:
            for inv in invs:
                tags = []
                if len(seeds) > 1:
                    tags.append(f"s{seed}")
                if len(invs) > 1:
                    tags.append(f"@{Path(inv).stem}" if inv else "@campaign")
                cid = cname + (f"[{','.join(tags)}]" if tags else "")
                if cid in seen:
                    raise c.fail(f"{p}.name", f"cell {cid!r} is already defined by {seen[cid]}; give each cell its own name")
                seen[cid] = p
                ov = list(sets) + ([f"target.inventory={inv}"] if inv else []) + \
                    [f"expect={'no-loss' if expect == 'no-loss' else 'loss'}"]
                if validate_campaigns:
                    _validate_cell(c, p, camp, ov, seed)
                cells.append(Cell(id=cid, campaign=str(camp), overrides=ov, expect=expect, seed=seed,
                                  inventory=inv, allowed_by=allowed_by, timeout=timeout, index=len(cells),
                                  require_errors=require))
    return SuiteSpec(path=path.resolve(), name=name, description=desc, cells=cells)


def _validate_cell(c: Validator, p: str, camp: Path, overrides: list[str], seed: int | None) -> None:
    from harness.campaign import load_campaign

    try:
        load_campaign(camp, overrides=overrides, seed=seed)
    except ConfigError as e:
        raise c.fail(p, f"campaign {camp.name} with this cell's settings is invalid: {e}") from None


# --- judging a cell ----------------------------------------------------------------------------

@dataclass
class Judgement:
    outcome: str          # as-expected | unexpected | inconclusive | error
    reason: str           # one line
    lost: int | None = None
    acked: int | None = None
    label: str = ""       # e.g. "allowed by configuration (unclean.leader.election.enable=true)"
    mechanisms: dict[str, int] = field(default_factory=dict)


def _inconclusive(v: dict[str, Any]) -> str | None:
    """The checker's own "could not decide" (verdict ``outcome: inconclusive``), with its reason."""
    if v.get("outcome") == "inconclusive" or v.get("inconclusive") is True:
        why = v.get("inconclusive_because") or v.get("reason") or "the checker could not decide"
        return why if isinstance(why, str) else "; ".join(map(str, why))
    return None


def judge(expect: str, verdict: dict[str, Any] | None, *, allowed_by: str | None = None,
          error: str | None = None, require_errors: list[str] | None = None,
          errors_seen: dict[str, int] | None = None) -> Judgement:
    """Whether a cell met its expectation. An inconclusive verdict is its own outcome: never a
    pass, and never hidden as a failure of the system under test either. ``require_errors``:
    the cell also needs at least one send that ended with one of these Kafka errors
    (``errors_seen`` counts them from the producers' histories) - the proof that the campaign
    reached the state it tests (e.g. NOT_ENOUGH_REPLICAS below min ISR, seed 003 §2.6)."""
    if error is not None or verdict is None:
        return Judgement(ERROR, error or "no verdict")
    j = _judge(expect, verdict, allowed_by)
    if require_errors and j.outcome == AS_EXPECTED:
        seen = {e: n for e, n in (errors_seen or {}).items() if e in require_errors and n}
        if not seen:
            return Judgement(UNEXPECTED, f"NO SEND ENDED WITH {' OR '.join(require_errors)}: the campaign did not "
                             f"reach the state it tests; {j.reason}", j.lost, j.acked, j.label, j.mechanisms)
        j.reason += "; " + ", ".join(f"{e}={n}" for e, n in sorted(seen.items()))
    return j


def _judge(expect: str, verdict: dict[str, Any], allowed_by: str | None) -> Judgement:
    counts = verdict.get("counts") or {}
    lost = int(counts.get("lost_write") or 0)
    acked = verdict.get("acked_writes")
    mech = {str(k): int(n) for k, n in (verdict.get("mechanisms") or {}).items()}
    base = dict(lost=lost, acked=acked, mechanisms=mech)
    why = _inconclusive(verdict)
    if why is not None:
        return Judgement(INCONCLUSIVE, f"inconclusive: {why}", **base)
    found = f"{lost} of {acked if acked is not None else '?'} acknowledged writes lost"
    if expect == "no-loss":
        if lost == 0 and verdict.get("valid", True):
            return Judgement(AS_EXPECTED, f"no loss: {found}", **base)
        if lost:
            return Judgement(UNEXPECTED, f"UNEXPECTED LOSS: {found}", **base)
        bad = ", ".join(f"{a}={counts.get(a, '?')}" for a in verdict.get("invalid_because") or []) or "invalid history"
        return Judgement(UNEXPECTED, f"UNEXPECTED ANOMALIES: {bad}", **base)
    if lost == 0:
        return Judgement(UNEXPECTED, f"EXPECTED LOSS NOT REPRODUCED: {found}", **base)
    if expect == "loss":
        return Judgement(AS_EXPECTED, f"loss reproduced: {found}", **base)
    # loss-allowed: the stories (checkers/stories.py) say which setting permits each loss
    stories = verdict.get("stories")
    if isinstance(stories, list) and stories:
        not_allowed = [s for s in stories if isinstance(s, dict) and not s.get("allowed_by")]
        if not_allowed:
            s = not_allowed[0]
            return Judgement(UNEXPECTED, f"LOSS NOT ALLOWED BY CONFIGURATION: {found}; "
                             f"{s.get('topic')}-{s.get('partition')}: {s.get('label') or s.get('mechanism')}", **base)
        settings = sorted({str(s["allowed_by"]) for s in stories})
        label = f"allowed by configuration ({', '.join(settings)})"
        return Judgement(AS_EXPECTED, f"{label}: {found}", label=label, **base)
    label = f"allowed by configuration ({allowed_by})" if allowed_by else "allowed by configuration"
    return Judgement(AS_EXPECTED, f"{label}: {found} (the verdict has no stories; label from the suite)",
                     label=label, **base)
