"""Campaign files: what to run against which target, and what verdict to expect.

Why strict and resolved up front: a campaign is the replayable unit of evidence. Every
override (``--set``) and the seed are applied *before* validation, so a bad override is
caught the same way as a bad file (exit 2, one line), and the run directory gets the
resolved copy (``RUN/campaign.yaml``) that ``run.json.command`` re-runs. The schema is
documented in docs/campaigns.md; the step language lives in :mod:`nemeses.schedule`.
"""
from __future__ import annotations

import copy
import dataclasses
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from checkers.evidence import SCHEMAS as ANOMALY_SCHEMAS
from checkers.outcome import EXPECTS, LOSS_ALLOWED, Expectation
from groundwork.config import ConfigError, Validator, join, load_yaml, parse_override, resolve_path
from harness.inventory import Inventory, load_inventory
from harness.versions import check_settings as check_version_settings, is_version_key
from nemeses.schedule import Schedule, parse_schedule
from targets.apache_kafka import resolve_release
from targets.kafka_settings import sort as sort_kafka_settings

TOP_KEYS = ("name", "description", "target", "topic", "workload", "nemesis", "expect", "allowed_by",
            "require_errors", "require_anomalies", "forbid_anomalies", "seed")
TARGET_KEYS = ("inventory", "settings", "controllers", "embedded")
#: ``target.embedded`` (``--target``): the embedded cluster a campaign runs on, whatever its
#: inventory's kind - kraftsim, or real Apache Kafka of a release (``apache-kafka:4.1.0``; without a
#: release, the campaign's kafka.version or the release of its metadata.version)
EMBEDDED_RE = re.compile(r"^(kraftsim|apache-kafka)(?::(\d+\.\d+\.\d+))?$")
TOPIC_KEYS = ("name", "partitions", "replication_factor", "min_insync_replicas", "configs", "placement")
#: who places the topic's replicas: the controller (Kafka's StripedReplicaPlacer picks a random
#: start, so real Kafka places differently run to run and differently from kraftsim), or the
#: harness from the run's seed (the same assignment on every target: harness/placement.py)
PLACEMENTS = ("controller", "seeded")
WORKLOAD_KEYS = ("producers", "consumers", "rate", "duration", "idempotence", "drain_timeout",
                 "recovery_timeout", "value_bytes", "request_timeout", "message_timeout", "epochless_readers",
                 "reader_fetch_wait_ms")


@dataclass
class TopicSpec:
    name: str = "faultline"
    partitions: int = 3
    replication_factor: int = 3
    min_insync_replicas: int = 2
    #: further topic configs, Kafka's names (e.g. remote.storage.enable, local.retention.ms)
    configs: dict[str, str] = field(default_factory=dict)
    placement: str = "controller"      # PLACEMENTS


@dataclass
class WorkloadSpec:
    producers: int = 2
    consumers: int = 1
    rate: float = 100.0            # messages per second per producer
    duration: float = 30.0         # seconds of workload (the schedule may extend it)
    idempotence: bool = True
    drain_timeout: float = 30.0    # seconds the final drain may take
    recovery_timeout: float = 30.0 # seconds to wait for every partition to have a leader and min ISR
    value_bytes: int = 0           # pad values to this size (0: just the self-describing id)
    request_timeout: float = 10.0  # producer delivery timeout, seconds
    #: librdkafka's message.timeout.ms, seconds: how long a send may wait for its acknowledgement
    #: before it fails (info). Why 120 and not librdkafka's 300 or the 30 faultline used: when
    #: messages time out in flight the idempotent producer bumps its epoch and re-sends what it
    #: still holds, so writes a broker had already appended land twice (librdkafka issue 4953, its
    #: maintainers: "it can have duplications in case messages time out ... because the epoch needs
    #: to be bumped"), which the checker counts as `duplicate` - a client effect, not Kafka's. A
    #: real Kafka broker's JVM restart left partitions without a leader for 35-60 s on the 2-core
    #: test host (30 s gave 2,853 such duplicates in one run); 120 s outlasts that. A scenario that
    #: stalls longer raises it (campaigns/kip-903.yaml)
    message_timeout: float = 120.0
    #: readers sending Fetch v11 without a leader epoch, as clients before KIP-320 do
    #: (workloads/epochless_reader.py); they read from whichever replica their metadata names
    epochless_readers: int = 0
    reader_fetch_wait_ms: int = 100  # those readers' fetch.wait.max.ms


@dataclass
class Campaign:
    path: Path
    name: str
    inventory_path: Path
    inventory: Inventory
    settings: dict[str, Any]
    topic: TopicSpec
    workload: WorkloadSpec
    schedule: Schedule
    expectation: Expectation
    seed: int
    raw: dict[str, Any] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)

    @property
    def expect(self) -> str:
        """The kind of expectation: no-loss | loss | loss-allowed."""
        return self.expectation.expect

    def resolved_yaml(self) -> str:
        """The campaign as run: overrides applied, seed fixed, inventory path absolute."""
        doc = copy.deepcopy(self.raw)
        doc["name"] = self.name
        doc["seed"] = self.seed
        doc.setdefault("target", {})["inventory"] = str(self.inventory_path)
        return yaml.safe_dump(doc, sort_keys=False)


def apply_overrides(doc: dict[str, Any], overrides: list[str]) -> None:
    """Apply ``--set dotted.key=value``. ``target.<kafka.key>`` sets a target setting (the
    remainder is a Kafka config key that itself contains dots, e.g. ``kip903.enabled``)."""
    for item in overrides:
        keys, value = parse_override(item)
        if keys[0] not in TOP_KEYS:
            raise ConfigError(None, "--set", f"{'.'.join(keys)}: unknown campaign key {keys[0]!r}; expected one of {', '.join(TOP_KEYS)}")
        if keys[0] == "target" and (len(keys) == 1 or (len(keys) == 2 and keys[1] in ("controllers", "embedded"))):
            # ``target=apache-kafka:4.1.0`` (a suite's ``target`` axis, ``--target``) is target.embedded
            tgt = doc.setdefault("target", {})
            if not isinstance(tgt, dict):
                raise ConfigError(None, "--set", "target: the campaign's target is not a mapping")
            tgt["embedded" if len(keys) == 1 else keys[1]] = value
            continue
        if keys[0] == "target" and len(keys) > 1 and keys[1] != "inventory":
            rest = keys[2:] if keys[1] == "settings" else keys[1:]
            if not rest:
                raise ConfigError(None, "--set", f"{'.'.join(keys)}: name a target setting, e.g. target.kip903.enabled=false")
            tgt = doc.setdefault("target", {})
            if not isinstance(tgt, dict):
                raise ConfigError(None, "--set", "target: the campaign's target is not a mapping")
            settings = tgt.setdefault("settings", {})
            if not isinstance(settings, dict):
                raise ConfigError(None, "--set", "target.settings: the campaign's settings is not a mapping")
            # a version keeps the text given: YAML would read 3.10 as the number 3.1
            settings[".".join(rest)] = item.partition("=")[2].strip().strip("'\"") if is_version_key(".".join(rest)) else value
            continue
        node: Any = doc
        for i, k in enumerate(keys[:-1]):
            nxt = node.get(k) if isinstance(node, dict) else None
            if nxt is None:
                nxt = node[k] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(None, "--set", f"{'.'.join(keys)}: {'.'.join(keys[:i + 1])} is not a mapping")
            node = nxt
        node[keys[-1]] = value


def _embedded_target(c: Validator, inventory: Inventory, value: Any) -> Inventory:
    """``target.embedded``: run the campaign's embedded cluster as kraftsim or as real Apache Kafka."""
    text = c.string(value, "target.embedded")
    m = EMBEDDED_RE.match(text.strip())
    if not m:
        raise c.fail("target.embedded", f"kraftsim, apache-kafka or apache-kafka:VERSION (e.g. apache-kafka:4.1.0) "
                     f"is wanted, got {text!r}")
    if not inventory.embedded:
        raise c.fail("target.embedded", f"picks an embedded cluster; the inventory {inventory.path.name} is a lab "
                     "(its hosts run what they run): remove --target or use an embedded inventory")
    kind, version = m.group(1), m.group(2)
    if kind == "kraftsim" and version:
        raise c.fail("target.embedded", "kraftsim takes no release (set target.kafka.version for the software it models)")
    return dataclasses.replace(inventory, embedded=kind, embedded_version=version if kind == "apache-kafka" else None)


def load_campaign(file: str | os.PathLike[str], *, overrides: list[str] | None = None,
                  seed: int | None = None) -> Campaign:
    path = Path(file)
    doc = load_yaml(path, "campaign")
    c = Validator(path)
    if doc is None:
        raise c.fail("", "campaign is empty; expected a mapping (see docs/campaigns.md)")
    doc = c.mapping(doc, "", allow_none=False)
    overrides = list(overrides or [])
    apply_overrides(doc, overrides)
    c.keys(doc, "", TOP_KEYS, required=["target"])

    name = c.string(doc.get("name", path.stem), "name")
    if any(ch in name for ch in "/\\ \t") or name.startswith("."):
        raise c.fail("name", f"must be usable as a folder name (no slashes or spaces), got {name!r}")
    if doc.get("description") is not None:
        c.string(doc["description"], "description")
    target = c.mapping(doc["target"], "target", allow_none=False)
    c.keys(target, "target", TARGET_KEYS, required=["inventory"])
    inv_raw = c.string(target["inventory"], "target.inventory")
    inv_path = resolve_path(inv_raw, relative_to=path.resolve().parent)
    if not inv_path.exists():
        raise c.fail("target.inventory", f"inventory file {inv_raw} not found (looked beside the campaign and in the current folder)")
    inventory = load_inventory(inv_path)
    settings = c.mapping(target.get("settings"), "target.settings")
    for k, v in settings.items():
        c.scalar(v, join("target.settings", k))
    for k, why in check_version_settings(settings):
        raise c.fail(join("target.settings", k), why)
    if settings and not inventory.embedded:
        raise c.fail("target.settings", "target settings are passed to the embedded cluster; "
                     "a remote cluster's configuration is its own (remove target.settings)")
    if target.get("controllers") is not None:
        # the embedded cluster's controller count, for this campaign: a quorum of 3 where a
        # scenario should meet Raft failover, 1 where start-up speed matters more
        if not inventory.embedded:
            raise c.fail("target.controllers", "sets the embedded kraftsim cluster's controller count; "
                         "a remote cluster has the controllers its inventory lists (remove target.controllers)")
        inventory = dataclasses.replace(inventory, embedded_controllers=c.integer(
            target["controllers"], "target.controllers", min=1, max=9))
    if target.get("embedded") is not None:
        inventory = _embedded_target(c, inventory, target["embedded"])
    if inventory.embedded == "apache-kafka":
        # what real Kafka cannot take is refused now, before a cluster starts (exit 2, one line)
        try:
            resolve_release(inventory.embedded_version, sort_kafka_settings({**inventory.embedded_settings, **settings}))
        except ConfigError as e:
            raise c.fail(e.path, e.want) from None

    t = c.mapping(doc.get("topic"), "topic")
    c.keys(t, "topic", TOPIC_KEYS)
    d = TopicSpec()
    topic = TopicSpec(
        name=c.string(t.get("name", d.name), "topic.name"),
        partitions=c.integer(t.get("partitions", d.partitions), "topic.partitions", min=1, max=1000),
        replication_factor=c.integer(t.get("replication_factor", d.replication_factor), "topic.replication_factor", min=1),
        min_insync_replicas=c.integer(t.get("min_insync_replicas", d.min_insync_replicas), "topic.min_insync_replicas", min=1),
        placement=c.string(t.get("placement", d.placement), "topic.placement", choices=PLACEMENTS),
    )
    tconf = c.mapping(t.get("configs"), "topic.configs")
    for k, v in tconf.items():
        c.scalar(v, join("topic.configs", k))
        if k == "min.insync.replicas":
            raise c.fail(join("topic.configs", k), "set topic.min_insync_replicas instead")
    topic.configs = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in tconf.items()}
    if not all(ch.isalnum() or ch in "._-" for ch in topic.name) or len(topic.name) > 249:
        raise c.fail("topic.name", f"a Kafka topic name uses only letters, digits, '.', '_' and '-', got {topic.name!r}")
    if topic.min_insync_replicas > topic.replication_factor:
        raise c.fail("topic.min_insync_replicas", f"{topic.min_insync_replicas} is above replication_factor "
                     f"{topic.replication_factor}: no acks=all write could ever succeed")
    brokers = inventory.broker_count()
    if topic.replication_factor > brokers:
        raise c.fail("topic.replication_factor", f"{topic.replication_factor} is more than the target's {brokers} broker(s)")

    w = c.mapping(doc.get("workload"), "workload")
    c.keys(w, "workload", WORKLOAD_KEYS)
    dw = WorkloadSpec()
    workload = WorkloadSpec(
        producers=c.integer(w.get("producers", dw.producers), "workload.producers", min=1, max=64),
        consumers=c.integer(w.get("consumers", dw.consumers), "workload.consumers", min=0, max=64),
        rate=c.number(w.get("rate", dw.rate), "workload.rate", positive=True),
        duration=c.number(w.get("duration", dw.duration), "workload.duration", positive=True),
        idempotence=c.boolean(w.get("idempotence", dw.idempotence), "workload.idempotence"),
        drain_timeout=c.number(w.get("drain_timeout", dw.drain_timeout), "workload.drain_timeout", positive=True),
        recovery_timeout=c.number(w.get("recovery_timeout", dw.recovery_timeout), "workload.recovery_timeout", min=0),
        value_bytes=c.integer(w.get("value_bytes", dw.value_bytes), "workload.value_bytes", min=0, max=1 << 20),
        request_timeout=c.number(w.get("request_timeout", dw.request_timeout), "workload.request_timeout", positive=True),
        message_timeout=c.number(w.get("message_timeout", dw.message_timeout), "workload.message_timeout", positive=True),
        epochless_readers=c.integer(w.get("epochless_readers", dw.epochless_readers), "workload.epochless_readers",
                                    min=0, max=16),
        reader_fetch_wait_ms=c.integer(w.get("reader_fetch_wait_ms", dw.reader_fetch_wait_ms),
                                       "workload.reader_fetch_wait_ms", min=0, max=30000),
    )

    expect = c.string(doc.get("expect", "no-loss"), "expect", choices=EXPECTS)
    # allowed_by is read only with loss-allowed, so `--set expect=no-loss` needs nothing else
    allowed_by = c.string(doc["allowed_by"], "allowed_by") if doc.get("allowed_by") is not None else None
    require = c.str_list(doc["require_errors"], "require_errors", min_len=1) if doc.get("require_errors") is not None else []
    anomalies = {}
    for key in ("require_anomalies", "forbid_anomalies"):
        names = c.str_list(doc[key], key, min_len=1) if doc.get(key) is not None else []
        for n in names:
            if n not in ANOMALY_SCHEMAS:
                raise c.fail(key, f"unknown anomaly {n!r}; want one of {', '.join(ANOMALY_SCHEMAS)}")
        anomalies[key] = tuple(names)
    both = sorted(set(anomalies["require_anomalies"]) & set(anomalies["forbid_anomalies"]))
    if both:
        raise c.fail("forbid_anomalies", f"{', '.join(both)} is also in require_anomalies; want each in one of them")
    expectation = Expectation(expect, allowed_by if expect == LOSS_ALLOWED else None, tuple(require), **anomalies)
    host_names = None if inventory.embedded else set(inventory.hosts)
    schedule = parse_schedule(c, doc.get("nemesis"), "nemesis", partitions=topic.partitions,
                              host_names=host_names, embedded_brokers=brokers if inventory.embedded else None)
    # precedence: --seed, then nemesis.random.seed, then the campaign's seed, then a fresh one
    if seed is None and schedule.random is not None and schedule.random.seed is not None:
        seed = schedule.random.seed
    if seed is None:
        seed = c.integer(doc["seed"], "seed", min=0) if doc.get("seed") is not None else random.SystemRandom().randrange(1, 2**31)
    return Campaign(path=path.resolve(), name=name, inventory_path=inv_path, inventory=inventory,
                    settings={**inventory.embedded_settings, **settings}, topic=topic, workload=workload,
                    schedule=schedule, expectation=expectation, seed=seed, raw=doc, overrides=overrides)
