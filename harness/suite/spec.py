"""Suite files: a matrix of campaign runs, each cell with the outcome it must have.

Why suites: a green nightly run is only believed by someone who has seen the same suite turn
red on a configuration known to lose data. So a suite pairs every *fixed* configuration with
its *vulnerable* control (docs/seeds.md#seed-000 KIP-903 at metadata.version 3.4, docs/seeds.md#seed-003-2-4 Last Replica
Standing before ELR, docs/seeds.md#seed-001 unclean election) and says what each cell must show:

- ``no-loss``: no acknowledged write lost and a valid history;
- ``loss``: the known-bad control lost acknowledged writes (it *must*: a control that stops
  losing means the fault no longer bites, and the fixed cells prove nothing);
- ``loss-allowed``: writes are lost and the configuration permits it (e.g.
  ``unclean.leader.election.enable=true``, KIP-704): every story in the verdict names the
  setting in ``allowed_by`` (the cell's ``allowed_by``, when given); a loss with a story whose
  ``allowed_by`` is null is unexpected.

A cell's expectation is a campaign's (``expect``, ``allowed_by``, ``require_errors``: the cell
passes them to its run as overrides), so the run's own verdict, report.html and junit.xml
judge it exactly as the suite does: the checker decides once (checkers/outcome.py) and the
suite only reads the verdict's ``outcome``.

Schema (docs/suites.md)::

    name: seeds                      # optional; default: file name
    description: text                # optional
    defaults: {inventory: ..., seeds: [...], set: {...}, timeout: S}   # optional, per cell
    axes: {target.timing: [fast, kafka-defaults]}   # optional: every cell once per value (per
                                     # combination of values), the index shows them side by side
    cells:
      - name: kip-903/vulnerable     # unique; letters, digits, . _ - / = @
        campaign: ../kip-903.yaml    # relative to the suite file
        set: {target.metadata.version: "3.4"}   # --set overrides (mapping, or list of k=v)
        seeds: [7]                   # int or list: one cell per seed (default: the campaign's)
        inventory: PATH | [PATH...]  # --set target.inventory=PATH: one cell per inventory
        expect: no-loss | loss | loss-allowed
        allowed_by: unclean.leader.election.enable=true   # loss-allowed: the setting every loss story must name
        require_errors: [NOT_ENOUGH_REPLICAS, ...]   # at least one send ended with one of these
        timeout: 900                 # seconds the run may take before it counts as infrastructure
        axes: {target: [kraftsim]}   # optional: only some of the suite's axis values (say why)

Axes: a suite's ``axes`` run every cell once per value of a campaign key (per combination, when
there are several), as seeds and inventories do: ``NAME[target.timing=kafka-defaults]``. Why:
the same pair must hold under another setting (Kafka's own default timeouts, not kraftsim's
short ones), and the index shows a cell's results for each value side by side, one row per cell.

A cell's own ``axes`` keeps some of a suite axis's values only (a kraftsim-only scenario on a
``target: [kraftsim, apache-kafka]`` axis). ``faultline suite --target X`` on a suite with a
target axis runs every cell on X alone, named without the axis tag, and leaves out the cells
whose own ``axes`` exclude X.

Every cell is validated up front by loading its campaign with its overrides, so a bad
override is a bad suite file (exit 2, one line) before anything runs.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from checkers.outcome import EXPECTS, LOSS_ALLOWED
from groundwork.config import ConfigError, Validator, load_yaml, parse_override, resolve_path
from harness.versions import is_version_key

SUITE_KEYS = ("name", "description", "defaults", "axes", "cells", "retention")
CELL_KEYS = ("name", "campaign", "set", "seeds", "inventory", "expect", "allowed_by", "timeout", "require_errors",
             "require_anomalies", "forbid_anomalies", "axes")
DEFAULT_KEYS = ("set", "seeds", "inventory", "timeout")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/=@+-]*$")
DEFAULT_TIMEOUT = 900.0

#: the cell's own expectation keys: never in its ``set:``
OWN_KEYS = {"expect": "expect", "allowed_by": "allowed_by", "require_errors": "require_errors",
            "require_anomalies": "require_anomalies", "forbid_anomalies": "forbid_anomalies",
            "target.inventory": "inventory"}


@dataclass
class Cell:
    """One run: a campaign with overrides, a seed, an inventory and an expectation."""
    id: str
    campaign: str                   # absolute path
    overrides: list[str]            # k=v, the suite's own, inventory and expectation included
    expect: str
    seed: int | None = None
    inventory: str | None = None    # absolute path, or None for the campaign's own
    allowed_by: str | None = None   # loss-allowed: the setting every loss story must name
    timeout: float = DEFAULT_TIMEOUT
    index: int = 0
    require_errors: list[str] = field(default_factory=list)
    #: the suite's axis values this cell runs with ({dotted.key: value}), in the suite's axis order
    axes: dict[str, str] = field(default_factory=dict)
    #: the cell's name with its seed and inventory tags, without its axis values: the cells that
    #: differ only by an axis value share it (one row of the index, one column per value)
    row: str = ""
    require_anomalies: list[str] = field(default_factory=list)
    forbid_anomalies: list[str] = field(default_factory=list)

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
    #: the suite's axes in file order: {dotted.key: [value, ...]} (values as --set text)
    axes: dict[str, list[str]] = field(default_factory=dict)
    #: ``retention.keep_last``: after the suite, keep the newest N run and suite directories of its
    #: results dir (``--keep-last`` wins); None: keep everything
    keep_last: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "name": self.name, "description": self.description,
                "axes": self.axes, "cells": [c.to_json() for c in self.cells], "keep_last": self.keep_last}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "SuiteSpec":
        return cls(path=Path(doc["path"]), name=doc["name"], description=doc.get("description", ""),
                   cells=[Cell(**c) for c in doc["cells"]], axes=doc.get("axes") or {},
                   keep_last=doc.get("keep_last"))


def axis_tag(key: str, value: str) -> str:
    """How an axis value names its cell: ``target.timing=kafka-defaults``."""
    return f"{key}={value}"


def _scalar(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _axes(c: Validator, v: Any) -> dict[str, list[str]]:
    """``axes: {dotted.key: [v1, v2, ...]}``: each a campaign key (as in ``set:``) and its distinct
    scalar values; every cell runs once per combination of values."""
    if v is None:
        return {}
    m = c.mapping(v, "axes", allow_none=False)
    if not m:
        raise c.fail("axes", "expected a mapping of dotted campaign keys to lists of values, e.g. "
                     "{target.timing: [fast, kafka-defaults]}")
    out: dict[str, list[str]] = {}
    for k, vals in m.items():
        if not isinstance(k, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", k):
            raise c.fail("axes", f"keys are dotted campaign keys like target.timing, got {k!r}")
        if k in OWN_KEYS:
            raise c.fail(f"axes.{k}", f"{k} is a cell's own key ({OWN_KEYS[k]}), not an axis")
        if not isinstance(vals, list) or not vals:
            raise c.fail(f"axes.{k}", "expected a non-empty list of values")
        texts = []
        for i, x in enumerate(vals):
            if isinstance(x, (dict, list)) or x is None:
                raise c.fail(f"axes.{k}[{i}]", "expected a scalar value (string, number or boolean)")
            t = _scalar(x)
            if not re.fullmatch(r"[A-Za-z0-9._/=@+:-]+", t):
                raise c.fail(f"axes.{k}[{i}]", f"letters, digits and . _ / = @ + : - (it names the cells), got {t!r}")
            if t in texts:
                raise c.fail(f"axes.{k}[{i}]", f"value {t!r} is listed twice")
            texts.append(t)
        out[k] = texts
    return out


def _kind(target: Any) -> str:
    """An embedded target's kind: ``apache-kafka:4.1.0`` -> ``apache-kafka``."""
    return str(target).split(":", 1)[0].strip()


def _cell_axes(c: Validator, v: Any, path: str, axes: dict[str, Any]) -> dict[str, list[str]]:
    """A cell's own ``axes: {key: [values]}``: some of the suite's axis values only, for a cell
    that cannot run under the others (a kraftsim-only scenario on a ``target`` axis; its comment
    says why). Each key is a suite axis, each value one of that axis's."""
    if v is None:
        return {}
    m = c.mapping(v, path, allow_none=False)
    out: dict[str, list[str]] = {}
    for k, vals in m.items():
        if k not in axes:
            raise c.fail(f"{path}.{k}", f"not an axis of this suite (axes: {', '.join(axes) or 'none'})")
        if not isinstance(vals, list) or not vals:
            raise c.fail(f"{path}.{k}", "expected a non-empty list of the suite axis's values")
        texts = [_scalar(x) for x in vals]
        for i, t in enumerate(texts):
            if t not in [_scalar(a) for a in axes[k]]:
                raise c.fail(f"{path}.{k}[{i}]", f"{t!r} is not a value of the suite's axis {k} "
                             f"({', '.join(_scalar(a) for a in axes[k])})")
        out[k] = texts
    return out


def _combinations(axes: dict[str, list[str]]) -> list[dict[str, str]]:
    """Every combination of the axes' values, the first axis varying slowest (file order)."""
    combos: list[dict[str, str]] = [{}]
    for k, vals in axes.items():
        combos = [{**cmb, k: v} for cmb in combos for v in vals]
    return combos


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
            if isinstance(val, float) and is_version_key(k):
                raise c.fail(f"{path}.{k}", f"{val!r} is a number, not a version: quote it "
                             "(YAML reads 3.10 as the number 3.1)")
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


def load_suite(file: str | Path, *, validate_campaigns: bool = True, target: str | None = None) -> SuiteSpec:
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
    axes = _axes(c, doc.get("axes"))
    target_axis = next((k for k in axes if k in ("target", "target.embedded")), None)
    all_axes = dict(axes)
    if target and target_axis:
        # `--target X` on a suite with a target axis: every cell on X alone, as without the axis
        # (cells named without the axis tag); X must be one of the axis's kinds
        if not any(_kind(v) == _kind(target) for v in axes[target_axis]):
            raise c.fail(f"axes.{target_axis}", f"--target {target} is not one of this suite's targets "
                         f"({', '.join(axes[target_axis])})")
        del axes[target_axis]
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
        if allowed_by and expect != LOSS_ALLOWED:
            raise c.fail(f"{p}.allowed_by", "only meaningful with expect: loss-allowed")
        sets = _overrides(c, defaults.get("set"), "defaults.set") + _overrides(c, m.get("set"), f"{p}.set")
        if target:   # `faultline suite --target X`: every cell on that embedded cluster, before its own sets
            # the file's own target would win over --target, silently: refuse, naming where it is set
            for where, raw_set in ((f"{p}.set", m.get("set")), ("defaults.set", defaults.get("set"))):
                other = next((v.strip() for k, v in (o.split("=", 1) for o in _overrides(c, raw_set, where))
                              if k.strip() in ("target", "target.embedded") and _kind(v.strip()) != _kind(target)), None)
                if other is not None:
                    raise c.fail(where, f"target {other} is this suite's own choice for the cell, so --target {target} "
                                 "cannot run it: give no --target, or --cell only cells that do not set a target")
            sets = [f"target.embedded={target}"] + sets
        for o in sets:
            key = o.split("=", 1)[0].strip()
            if key in OWN_KEYS:
                raise c.fail(f"{p}.set", f"{key} is the cell's own key: use {p}.{OWN_KEYS[key]}")
            if key in axes:
                raise c.fail(f"{p}.set", f"{key} is the suite's axis (axes.{key}): every cell runs once per value")
        seeds = _seeds(c, m["seeds"], f"{p}.seeds") if "seeds" in m else _seeds(c, defaults.get("seeds"), "defaults.seeds")
        invs = (_inventories(c, m["inventory"], f"{p}.inventory", base) if "inventory" in m
                else _inventories(c, defaults.get("inventory"), "defaults.inventory", base))
        timeout = c.number(m.get("timeout", defaults.get("timeout", DEFAULT_TIMEOUT)), f"{p}.timeout", positive=True)
        require = c.str_list(m["require_errors"], f"{p}.require_errors", min_len=1) if m.get("require_errors") is not None else []
        anomalies = {k: c.str_list(m[k], f"{p}.{k}", min_len=1) if m.get(k) is not None else []
                     for k in ("require_anomalies", "forbid_anomalies")}
        own_axes = _cell_axes(c, m.get("axes"), f"{p}.axes", all_axes)
        if target and target_axis and target_axis in own_axes and \
                not any(_kind(v) == _kind(target) for v in own_axes.pop(target_axis)):
            continue   # the cell runs only on other targets (its axes say why)
        cell_axes = {k: own_axes.get(k, vals) for k, vals in axes.items()}
        for seed in seeds:
            for inv in invs:
                tags = []
                if len(seeds) > 1:
                    tags.append(f"s{seed}")
                if len(invs) > 1:
                    tags.append(f"@{Path(inv).stem}" if inv else "@campaign")
                row = cname + (f"[{','.join(tags)}]" if tags else "")
                for combo in _combinations(cell_axes):
                    ctags = tags + [axis_tag(k, v) for k, v in combo.items()]
                    cid = cname + (f"[{','.join(ctags)}]" if ctags else "")
                    if cid in seen:
                        raise c.fail(f"{p}.name", f"cell {cid!r} is already defined by {seen[cid]}; give each cell its own name")
                    seen[cid] = p
                    # the cell's expectation travels with its run (run.json), for the checker to judge
                    ov = list(sets) + [f"{k}={v}" for k, v in combo.items()] + \
                        ([f"target.inventory={inv}"] if inv else []) + [f"expect={expect}"] + \
                        ([f"allowed_by={allowed_by}"] if allowed_by else []) + \
                        ([f"require_errors=[{', '.join(require)}]"] if require else []) + \
                        _anomaly_overrides(anomalies)
                    if validate_campaigns:
                        _validate_cell(c, p, camp, ov, seed)
                    cells.append(Cell(id=cid, campaign=str(camp), overrides=ov, expect=expect, seed=seed,
                                      inventory=inv, allowed_by=allowed_by, timeout=timeout, index=len(cells),
                                      require_errors=require, axes=dict(combo), row=row, **anomalies))
    keep_last = None
    if doc.get("retention") is not None:
        ret = c.mapping(doc["retention"], "retention", allow_none=False)
        c.keys(ret, "retention", ["keep_last"], required=["keep_last"])
        keep_last = c.integer(ret["keep_last"], "retention.keep_last", min=1)
    return SuiteSpec(path=path.resolve(), name=name, description=desc, cells=cells, axes=axes, keep_last=keep_last)


def _anomaly_overrides(anomalies: dict[str, list[str]]) -> list[str]:
    """A cell that names anomalies states its whole anomaly expectation: the key it leaves out is
    cleared (``KEY=null``). Why: a bug's campaign forbids the anomaly on its fixed side as written,
    and the vulnerable cell must be able to require that same anomaly instead (a campaign may not
    both require and forbid one). A cell naming none keeps its campaign's."""
    if not any(anomalies.values()):
        return []
    return [f"{k}=[{', '.join(v)}]" if v else f"{k}=null" for k, v in anomalies.items()]


def _validate_cell(c: Validator, p: str, camp: Path, overrides: list[str], seed: int | None) -> None:
    from harness.campaign import load_campaign

    try:
        load_campaign(camp, overrides=overrides, seed=seed)
    except ConfigError as e:
        raise c.fail(p, f"campaign {camp.name} with this cell's settings is invalid: {e}") from None


def select_cells(spec: SuiteSpec, globs: list[str]) -> SuiteSpec:
    """The suite with only the cells whose name matches one of ``globs`` (fnmatch), in file
    order: ``faultline suite --cell``, to run part of a matrix (the rest of the file is still
    validated). No match is a usage error naming the globs."""
    keep = [c for c in spec.cells if any(fnmatch.fnmatchcase(c.id, g) for g in globs)]
    if not keep:
        raise ConfigError(spec.path, "--cell", f"no cell matches {', '.join(globs)}; the cells are "
                          + ", ".join(c.id for c in spec.cells[:12]) + (", ..." if len(spec.cells) > 12 else ""))
    cells = [replace(c, index=i) for i, c in enumerate(keep)]
    return replace(spec, cells=cells, axes={k: v for k, v in spec.axes.items() if any(k in c.axes for c in cells)})
