"""``faultline campaign check`` / ``faultline suite check``: what ``run`` would refuse, refused
without starting anything, and the plan a run would follow, as lines to print.

Why a check apart from ``run``: a lab's first night should not start a cluster, take the lab's
lock and heal leftovers only to stop at a typo in step 7 or a metadata.version Kafka never had.
Loading a campaign already validates everything in the files (harness/campaign.py, one line per
error); the embedded cluster's own refusals (a kafka.version older than its metadata.version, an
unknown kraftsim key) are kraftsim's to decide, so the check asks kraftsim the way ``run`` would
start it, with ``--check`` (targets/kraftsim.py ``check_settings``), and starts no process but that
one; a real Apache Kafka target's settings are sorted as its launcher would (targets/kafka_settings.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from groundwork.config import ConfigError
from harness.campaign import Campaign, load_campaign
from targets.apache_kafka import planned_features
from targets.kraftsim import check_settings


def check_campaign(file: Path, overrides: list[str] | None = None, seed: int | None = None) -> tuple[Campaign, dict[str, Any] | None]:
    """Everything ``run`` would refuse before its first fault: the campaign (ConfigError, one line)
    and, on the embedded target, kraftsim's verdict on its settings (the features in force)."""
    camp = load_campaign(file, overrides=list(overrides or []), seed=seed)
    features = None
    if camp.inventory.embedded:
        try:
            features = embedded_features(camp)
        except ConfigError as e:
            raise ConfigError(camp.path, e.path, e.want) from None
    return camp, features


def embedded_features(camp: Campaign) -> dict[str, Any]:
    """What the campaign's embedded cluster would refuse, else run with (nothing started): kraftsim
    asked with ``--check``, or the release and gates a real Apache Kafka cluster would have."""
    inv = camp.inventory
    if inv.embedded == "apache-kafka":
        return planned_features(inv.embedded_version, camp.settings)
    return check_settings(inv.embedded_brokers, inv.embedded_controllers, camp.settings)


def _seed_fixed(camp: Campaign, seed: int | None) -> bool:
    rnd = camp.schedule.random
    return seed is not None or camp.raw.get("seed") is not None or (rnd is not None and rnd.seed is not None)


def _step(s: Any) -> str:
    if s.kind == "wait":
        return f"wait {s.arg:g}s"
    text = f"{s.kind} {s.arg}" if not isinstance(s.arg, dict) else f"{s.kind} {_mapping(s.arg)}"
    if s.target:
        text += f" target {', '.join(s.target)}"
    if s.name:
        text += f" as {s.name}"
    if s.duration is not None:
        text += f" for {s.duration:g}s"
    if s.params:
        text += f" params {_mapping(s.params)}"
    if s.kind == "until":
        text += f" (timeout {s.timeout:g}s, on timeout {s.on_timeout})"
    return text


def _value(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _mapping(m: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {_mapping(v) if isinstance(v, dict) else v}" for k, v in m.items()) + "}"


def campaign_plan(camp: Campaign, features: dict[str, Any] | None, *, seed: int | None = None) -> list[str]:
    """The resolved plan: target, topic, workload, nemesis steps, expectation (one item a line)."""
    inv, t, w = camp.inventory, camp.topic, camp.workload
    lines = [f"campaign  {camp.name} ({camp.path})",
             f"seed      {camp.seed}" + ("" if _seed_fixed(camp, seed) else " (drawn now; a run draws its own: "
                                                                             "pass --seed to fix it)")]
    if inv.embedded:
        lines.append(f"target    embedded {inv.embedded}: {inv.embedded_brokers} broker(s), "
                     f"{inv.embedded_controllers} controller(s) ({camp.inventory_path})")
    else:
        lines.append(f"target    {inv.transport}: {len(inv.brokers)} broker(s), {len(inv.controllers)} controller(s), "
                     f"bootstrap {inv.bootstrap} ({camp.inventory_path})")
        for h in inv.hosts.values():
            lines.append(f"            {h.role:<10} {h.name:<16} node {h.node_id} at {h.address}")
    if camp.settings:
        lines.append("settings  " + ", ".join(f"{k}={_value(v)}" for k, v in camp.settings.items()))
    if features is not None:
        on = sorted(g for g, x in features.get("gates", {}).items() if x.get("on"))
        lines.append(f"versions  kafka.version {features['kafka.version']}"
                     f"{' (default)' if features.get('kafka.version.default') else ''}, "
                     f"metadata.version {features['metadata.version']}, timing {features.get('timing')}")
        lines.append(f"gates on  {', '.join(on) or 'none'}")
    lines.append(f"topic     {t.name}: {t.partitions} partition(s), replication factor {t.replication_factor}, "
                 f"min ISR {t.min_insync_replicas}" + (f", {_mapping(t.configs)}" if t.configs else ""))
    lines.append(f"workload  {w.producers} producer(s) at {w.rate:g}/s, {w.consumers} consumer(s), {w.duration:g}s"
                 f" (idempotence {'on' if w.idempotence else 'off'}, drain {w.drain_timeout:g}s, "
                 f"recovery {w.recovery_timeout:g}s)")
    sch = camp.schedule
    if sch.kind == "targeted":
        lines.append(f"nemesis   targeted, {len(sch.steps)} step(s), at least {sch.min_applied} fault(s) applied:")
        lines += [f"            {i}. {_step(s)}" for i, s in enumerate(sch.steps, 1)]
    elif sch.kind == "random" and sch.random is not None:
        r = sch.random
        lines.append(f"nemesis   random: {', '.join(f for f, _ in r.faults)} every {r.interval:g}s for "
                     f"{r.duration:g}s on {', '.join(r.targets)}, concurrency {r.concurrency}, "
                     f"at least {sch.min_applied} fault(s) applied")
    else:
        lines.append("nemesis   none (a calm control run)")
    e = camp.expectation
    lines.append(f"expect    {e.expect}" + (f" (allowed by {e.allowed_by})" if e.allowed_by else "")
                 + (f", require errors {', '.join(e.require_errors)}" if e.require_errors else "")
                 + (f", require {', '.join(e.require_anomalies)}" if e.require_anomalies else "")
                 + (f", forbid {', '.join(e.forbid_anomalies)}" if e.forbid_anomalies else ""))
    return lines


def check_suite(file: Path) -> tuple[Any, list[str]]:
    """A suite's every cell as ``run`` would start it: the suite file (load_suite loads each cell's
    campaign with its overrides) and each embedded cell's settings asked of kraftsim; the plan,
    one line per cell."""
    from harness.suite.spec import load_suite

    spec = load_suite(file)
    lines = [f"suite     {spec.name} ({spec.path}): {len(spec.cells)} cell(s)"
             + (f", axes {', '.join(spec.axes)}" if spec.axes else "")]
    asked: dict[tuple[Any, ...], dict[str, Any] | None] = {}
    for cell in spec.cells:
        camp = load_campaign(cell.campaign, overrides=cell.overrides, seed=cell.seed)
        inv = camp.inventory
        key = (inv.embedded, inv.embedded_version, inv.embedded_brokers, inv.embedded_controllers,
               tuple(sorted((k, str(v)) for k, v in camp.settings.items())))
        if key not in asked:
            try:
                asked[key] = embedded_features(camp) if inv.embedded else None
            except ConfigError as e:
                raise ConfigError(spec.path, "cells", f"cell {cell.id}: {e}") from None
        f = asked[key]
        versions = f", kafka.version {f['kafka.version']}, metadata.version {f['metadata.version']}" if f else ""
        seed = camp.seed if _seed_fixed(camp, cell.seed) else "random"
        lines.append(f"  {cell.id}: {Path(cell.campaign).name}, seed {seed}, expect {cell.expect}{versions}"
                     + (f", set {' '.join(o for o in cell.overrides)}" if cell.overrides else ""))
    return spec, lines
