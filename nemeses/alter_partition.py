"""Delayed AlterPartition: the nemesis that makes docs/seeds.md#seed-000's race happen on purpose.

docs/seeds.md#seed-000 (KIP-903) steps 1-6: leader A sends AlterPartition adding B; B hard-fails and
returns with an empty disk and a new broker epoch; *then* the AlterPartition lands. In a
real cluster that window is milliseconds; here the protocol-aware proxy
(:mod:`nemeses.proxy`) sits between brokers and the controller and either

- ``mode=delay``: delays every AlterPartition by ``delay_ms`` (heartbeats untouched), or
- ``mode=delay-all``: delays every frame of the broker-controller connections it carries, in
  both directions, by ``delay_ms`` - a slow controller link (heartbeats, registrations,
  AlterPartition alike) where the kernel has no ``netem`` (nemeses.link), or
- ``mode=hold``: holds the first AlterPartition that would *add* broker X to the ISR of a
  chosen partition until a condition - ``{"unfenced": X}`` (the default: X registered
  again through the proxy after the hold began, i.e. X was restarted - docs/seeds.md#seed-000 step 5 -
  and a heartbeat response then unfenced it, which Kafka >= 3.3 requires before a broker
  may join an ISR, KIP-841), ``{"registered": X}`` (registration alone),
  ``{"file": path}``, ``{"after_s": s}`` - or until the nemesis is stopped (heal = release).
  ``then_delay_ms`` keeps delaying the AlterPartitions that follow the released one (the
  leader's ISR shrink of the empty replica, docs/seeds.md#seed-003-2-9 "replica.lag.time.max.ms"), so
  the window in which the leader may die with the empty replica in the ISR stays open. The controller's answer is recorded, so INELIGIBLE_REPLICA (error code 107,
  the KIP-903 fix; docs/seeds.md#seed-003-2-9-2 "the broker epoch of any added replicas is correct")
  appears in ``proxy-events.jsonl``.

Placement: by configuration (brokers' ``controller.quorum.bootstrap.servers`` points at
the proxy; the harness does this for kraftsim and for lab clusters it deploys), or by DNAT in
front of a running cluster. With a controller quorum the proxy has one listener per
controller and one DNAT rule per controller, so it follows the active controller as the
brokers do (NOT_CONTROLLER, leader hints), and a held AlterPartition whose controller dies
is re-sent by the broker to the new one and stays held (nemeses.proxy.server). The proxy
is a process of its own started through a transport and registered in the heal ledger
(kind ``process``) so `faultline heal` stops it; holds never outlive it (it releases
everything it holds when stopped).
"""
from __future__ import annotations

import json
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundwork.config import ConfigError, Validator
from groundwork.ledger import Ledger, new_id
from groundwork.transport.base import Transport, TransportError
from groundwork.transport.local import LocalTransport
from nemeses.base import FaultRecord, FaultsView, Nemesis, register, register_condition
from nemeses.hostinfo import node_config
from nemeses.netfilter import add_raw, net_namespace, net_run, remove_rules

REPO_ROOT = str(Path(__file__).resolve().parent.parent)

#: the nemesis's modes; the delay modes and the proxy control key each sets
MODES = ("hold", "delay", "delay-all")
_DELAY_KEY = {"delay": "delay_ms", "delay-all": "delay_all_ms"}


@dataclass
class ProxyHandle:
    """A running proxy: where it listens and how to reach its control directory."""
    transport: Transport
    pid: int
    control_dir: str
    events: str
    listen: str
    ledger_id: str | None = None
    #: one listener per upstream controller, in the order of ``upstream``
    listens: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"host": self.transport.name, "pid": self.pid, "control_dir": self.control_dir,
                "events": self.events, "listen": self.listen, "what": "alter-partition proxy",
                "match": "nemeses.proxy"}


def start_proxy(transport: Transport, *, listen: str, upstream: str, control_dir: str, events: str,
                ledger: Ledger | None = None, python: str = sys.executable, node: int = -1,
                timeout: float = 15.0, source: str | None = None) -> ProxyHandle:
    """Spawn ``python -m nemeses.proxy`` on the host and wait until it listens."""
    transport.run(["mkdir", "-p", control_dir], check=True)
    transport.run(["rm", "-f", f"{control_dir}/ready"])
    cmd = ["env", f"PYTHONPATH={REPO_ROOT}", python, "-m", "nemeses.proxy", "--listen", listen,
           "--upstream", upstream, "--control-dir", control_dir, "--events", events, "--node", str(node)] \
        + (["--source", source] if source else [])
    pid = transport.spawn(cmd, log_path=f"{control_dir}/proxy.log")
    handle = ProxyHandle(transport, pid, control_dir, events, listen)
    if ledger is not None:
        handle.ledger_id = new_id("p")
        ledger.apply(handle.ledger_id, "process", handle.to_json(), nemesis="alter-partition")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = transport.read_text(f"{control_dir}/ready")
        if ready and ready.strip():
            handle.listens = tuple(ready.split())
            handle.listen = handle.listens[0]
            return handle
        if not transport.pid_alive(pid):
            log = (transport.read_text(f"{control_dir}/proxy.log") or "").strip().splitlines()
            stop_proxy(handle, ledger)
            raise TransportError(f"{transport.name}: AlterPartition proxy exited: {log[-1] if log else 'no output'}")
        time.sleep(0.05)
    stop_proxy(handle, ledger)
    raise TransportError(f"{transport.name}: AlterPartition proxy did not listen within {timeout}s")


def stop_proxy(handle: ProxyHandle, ledger: Ledger | None = None, timeout: float = 5.0) -> None:
    """SIGTERM (the proxy releases its holds and exits), SIGKILL if it lingers. Idempotent."""
    t = handle.transport
    if t.signal(handle.pid, signal.SIGTERM):
        deadline = time.monotonic() + timeout
        while t.pid_alive(handle.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if t.pid_alive(handle.pid):
            t.signal(handle.pid, signal.SIGKILL)
    if ledger is not None and handle.ledger_id:
        ledger.healed(handle.ledger_id)


def write_control(transport: Transport, control_dir: str, control: dict[str, Any]) -> None:
    """Atomic replace, so the proxy never reads half a file."""
    tmp = f"{control_dir}/control.json.{uuid.uuid4().hex[:6]}"
    transport.write_text(tmp, json.dumps(control))
    transport.run(["mv", "-f", tmp, f"{control_dir}/control.json"], check=True)


def read_status(transport: Transport, control_dir: str) -> dict[str, Any]:
    text = transport.read_text(f"{control_dir}/status.json")
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return {}


def resolve_topic_ids(bootstrap: str, topics: list[str], timeout: float = 10.0,
                      client: dict[str, Any] | None = None) -> dict[str, str]:
    """topic id (UUID string) -> name via the admin client: AlterPartition v2+ names topics by id.
    ``client``: the run's librdkafka security settings (a secured cluster's listener)."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client or {})})
    out: dict[str, str] = {}
    for name, fut in admin.describe_topics(TopicCollection(topics), request_timeout=timeout).items():
        d = fut.result(timeout=timeout)
        tid = d.topic_id
        u = uuid.UUID(int=((tid.get_most_significant_bits() & (2**64 - 1)) << 64)
                      | (tid.get_least_significant_bits() & (2**64 - 1)))
        out[str(u)] = name
    return out


def controller_addresses(ctx: Any) -> str:
    """HOST:PORT of every controller's listener, comma-separated, from the inventory
    (``upstream: auto``): with a quorum the proxy stands in front of each voter."""
    out: list[str] = []
    for n in ctx.nodes.values():
        if n.role != "controller":
            continue
        hostport = _listener_hostport(n)
        if hostport:
            out.append(hostport)
    if not out:
        raise ValueError("alter-partition: upstream: auto needs a controller host with kafka_listeners in the inventory")
    return ",".join(out)


def _listener_hostport(n: Any) -> str | None:
    listeners = getattr(getattr(n, "spec", None), "listeners", None) or getattr(n, "listeners", None) or ""
    for item in str(listeners).split(","):
        hostport = item.split("://", 1)[-1]
        host, _, port = hostport.rpartition(":")
        if port.isdigit():
            return f"{host or n.address}:{port}"
    return None


def refuse_tls_controllers(ctx: Any) -> None:
    """The proxy reads AlterPartition out of the brokers' connections to the controllers, so it
    cannot stand in front of a controller listener that is TLS (SSL or SASL_SSL: the bytes are
    encrypted end to end between broker and controller). Such a lab is refused in one line before
    anything is started, rather than a proxy that would hold nothing."""
    for n in ctx.nodes.values():
        if n.role != "controller":
            continue
        try:
            props, _ = node_config(n)
        except Exception:  # noqa: BLE001 - a config we cannot read says nothing about TLS
            continue
        names = [x.strip() for x in props.get("controller.listener.names", "").split(",") if x.strip()]
        pmap = dict(item.split(":", 1) for item in props.get("listener.security.protocol.map", "").split(",")
                    if ":" in item)
        for name in names:
            proto = pmap.get(name, name if name in ("SSL", "SASL_SSL") else "PLAINTEXT").strip().upper()
            if proto in ("SSL", "SASL_SSL"):
                raise ConfigError(None, "nemesis.settings.proxy", f"the AlterPartition proxy cannot read the "
                                  f"controllers' {name} listener on {n.name}: it is {proto}, encrypted from broker to "
                                  "controller; run this campaign on a lab whose controller listener is PLAINTEXT or "
                                  "SASL_PLAINTEXT")


def is_placement(fault: str, params: dict[str, Any]) -> bool:
    """Whether a recorded fault is the proxy's DNAT placement (``place_dnat``), which the
    nemesis's setup records as a fault of its own so `faultline heal` removes the rules, and
    not a fault a schedule applied: a replay of the run's faults must leave it to setup."""
    return fault == AlterPartitionDelay.name and params.get("placement") == "dnat"


@register
class AlterPartitionDelay(Nemesis):
    name = "alter-partition"
    description = "delay AlterPartition, or hold the one adding broker X to an ISR until a condition"

    def setup(self, ctx) -> None:
        """``ctx.settings["proxy"]``: {control_dir, [host], [listen, upstream, events]}.
        With listen/upstream and no running proxy, one is started (and stopped at teardown)."""
        super().setup(ctx)
        self.handle: ProxyHandle | None = None
        conf = dict(ctx.settings.get("proxy") or {})
        if not conf:
            return   # `faultline heal`: stop() finds the proxy from the fault record alone
        if "control_dir" not in conf:
            raise ValueError("alter-partition: settings.proxy.control_dir is required (where the proxy is controlled)")
        host = conf.get("host")
        self.transport = ctx.nodes[host].transport if host in ctx.nodes else LocalTransport(host or "proxy")
        self.control_dir = conf["control_dir"]
        self.control: dict[str, Any] = {"generation": 0, "topic_names": {}}
        st = read_status(self.transport, self.control_dir)
        if st.get("pid") and self.transport.pid_alive(int(st["pid"])):
            return
        if not (conf.get("listen") and conf.get("upstream")):
            raise ValueError(f"alter-partition: no proxy running with control dir {self.control_dir}; "
                             "give settings.proxy.listen and .upstream to start one")
        refuse_tls_controllers(ctx)
        upstream = conf["upstream"] if conf["upstream"] != "auto" else controller_addresses(ctx)
        placement = conf.get("placement", "config")
        if placement not in ("config", "dnat"):
            raise ValueError(f"alter-partition: settings.proxy.placement must be config or dnat, got {placement!r}")
        source = conf.get("source") or ("127.0.0.254" if placement == "dnat" and upstream.startswith("127.") else None)
        self.handle = start_proxy(self.transport, listen=conf["listen"], upstream=upstream,
                                  control_dir=self.control_dir,
                                  events=conf.get("events") or f"{self.control_dir}/proxy-events.jsonl",
                                  ledger=ctx.ledger, source=source)
        self.placement: FaultRecord | None = None
        if placement == "dnat":
            try:
                self.placement = self.place_dnat(upstream, self.handle.listens or (self.handle.listen,), source)
            except Exception:
                self.teardown()
                raise

    def place_dnat(self, upstream: str, listens: tuple[str, ...], source: str | None) -> FaultRecord:
        """Put the proxy in front of a running cluster: on every broker host, new connections
        to each controller are DNATed to that controller's proxy listener, and existing ones
        are reset (``ss -K``, plus a REJECT for any direct flow left) so the brokers reconnect
        through it. Where a host also runs a controller (the embedded cluster: one network
        namespace), the rules match the brokers' own addresses, so Raft traffic between
        controllers stays direct. Recorded in the ledger as a fault of its own, so
        `faultline heal` removes the rules."""
        pairs = list(zip(upstream.split(","), listens))
        if len(pairs) != len(upstream.split(",")):
            raise TransportError(f"alter-partition: the proxy listens {len(listens)} times for "
                                 f"{len(upstream.split(','))} controllers")
        hosts: dict[Any, list[Any]] = {}
        for n in self.ctx.nodes.values():
            hosts.setdefault(net_namespace(n), []).append(n)
        targets = {key: nodes for key, nodes in hosts.items() if any(n.role == "broker" for n in nodes)}
        names = sorted(nodes[0].name for nodes in targets.values())
        record = FaultRecord(fault=self.name, targets=names,
                             params={"placement": "dnat", "upstream": upstream, "proxy": ",".join(listens)},
                             undo={"hosts": names, "placement": True})
        self.begin(record)
        try:
            self._dnat(targets, pairs, source, record)
        except Exception:
            self.stop(record)   # rules already placed go again (tagged with this record's id)
            raise
        return record

    def _dnat(self, targets: dict[Any, list[Any]], pairs: list[tuple[str, str]], source: str | None,
              record: FaultRecord) -> None:
        """The DNAT and REJECT rules of :meth:`place_dnat`, host by host."""
        for nodes in targets.values():
            t = nodes[0].transport
            shared = any(n.role == "controller" for n in nodes)
            sources: list[str | None] = sorted(
                {(_listener_hostport(n) or "").rpartition(":")[0] or str(getattr(n, "address", "") or "")
                 for n in nodes if n.role == "broker"} - {""}) if shared else []
            sources = sources or [None]
            for ctl, listen in pairs:
                cip, _, cport = ctl.strip().rpartition(":")
                pip, _, pport = listen.rpartition(":")
                for src in sources:
                    match = ["-p", "tcp", "-d", cip, "--dport", cport] \
                        + (["-s", src] if src else ["!", "-s", source] if source else [])
                    add_raw(t, "nat", "OUTPUT", match + ["-j", "DNAT", "--to-destination", f"{pip}:{pport}"], record.id)
                    add_raw(t, "filter", "OUTPUT", match + ["-j", "REJECT", "--reject-with", "tcp-reset"], record.id)
                    kill = ["ss", "-K", "dst", cip, "dport", "=", f":{cport}"] \
                        + (["and", "src", src] if src else ["and", "not", "src", source] if source else [])
                    net_run(t, kill)

    def teardown(self) -> None:
        if getattr(self, "placement", None) is not None:
            self.stop(self.placement)      # rules first: brokers go back to the controller directly
            self.placement = None
        if getattr(self, "handle", None) is not None:
            stop_proxy(self.handle, self.ctx.ledger)
            self.handle = None

    def _push(self, timeout: float = 5.0) -> None:
        """Write the control file and wait until the proxy has read it (status echoes the
        generation), so a fault is in force when ``start`` returns."""
        gen = max(int(self.control.get("generation", 0)),
                  int(read_status(self.transport, self.control_dir).get("generation") or 0)) + 1
        self.control["generation"] = gen
        write_control(self.transport, self.control_dir, self.control)
        if not self.wait(lambda: read_status(self.transport, self.control_dir).get("generation") == gen,
                         timeout=timeout, poll=0.02):
            raise TransportError(f"{self.transport.name}: AlterPartition proxy at {self.control_dir} "
                                 f"did not take control generation {gen} within {timeout}s")

    def _broker_id(self, name_or_id: Any) -> int:
        if isinstance(name_or_id, int) or str(name_or_id).lstrip("-").isdigit():
            return int(name_or_id)
        if name_or_id not in self.ctx.nodes:
            raise ValueError(f"alter-partition: unknown broker {name_or_id!r}; known: {', '.join(self.ctx.nodes)}")
        return int(self.ctx.nodes[name_or_id].node_id)

    def exclusive(self, targets: list[str], params: dict[str, Any]) -> set[str]:
        """The proxy has one hold and one delay per mode: a second hold would replace the
        first's spec, and healing one of two delays would drop the other's."""
        return {f"alter-partition:{params.get('mode', 'hold')}"}

    def start(self, targets: list[str], **params: Any) -> FaultRecord:
        if not hasattr(self, "control_dir"):
            raise ValueError("alter-partition: no proxy configured: set nemesis.settings.proxy "
                             "{listen, upstream} (brokers' controller.quorum.bootstrap.servers must point at listen)")
        mode = params.get("mode", "hold")
        if mode not in MODES:
            raise ValueError(f"alter-partition: mode must be one of {', '.join(MODES)}, got {mode!r}")
        record = FaultRecord(fault=self.name, targets=list(targets), params=dict(params),
                             undo={"control_dir": self.control_dir, "host": self.transport.name})
        self.control.pop("clear_delay", None)
        if mode == "hold":
            if len(targets) != 1:
                raise ValueError("alter-partition hold: give exactly one target, the broker X being added to the ISR")
            x = self._broker_id(targets[0])
            until = params.get("until") or {"unfenced": x}
            if not isinstance(until, dict) or len(until) != 1 or \
                    next(iter(until)) not in ("registered", "unfenced", "file", "after_s"):
                raise ValueError("alter-partition hold: params.until must be one of {registered: BROKER}, "
                                 "{unfenced: BROKER}, {file: PATH}, {after_s: SECONDS}")
            for k in ("registered", "unfenced"):
                if k in until:
                    until = {k: self._broker_id(until[k])}
            spec = {"id": record.id, "broker": x, "partition": params.get("partition"),
                    "until": until, "max_hold_s": float(params.get("max_hold_s", 120)),
                    "then_delay_ms": float(params.get("then_delay_ms", 0))}
            # the campaign's topic unless the step names another: on real Kafka other topics have a
            # partition 0 too (__consumer_offsets), and a hold must not catch theirs
            topic = params.get("topic") or self.ctx.settings.get("topic")
            if topic:
                # AlterPartition v2+ names topics by id: match on the name only when we can map it
                bootstrap = self.ctx.settings.get("bootstrap.servers")
                try:
                    ids = resolve_topic_ids(bootstrap, [topic], client=self.ctx.settings.get("kafka_client")) \
                        if bootstrap else {}
                except Exception as e:  # noqa: BLE001 - fall back to matching the partition alone
                    ids, record.params["topic_note"] = {}, f"topic id not resolved: {str(e).splitlines()[0][:120]}"
                if ids:
                    self.control["topic_names"].update(ids)
                    spec["topic"] = topic
                else:
                    record.params.setdefault("topic_note", "topic id unknown: holding on the partition index alone")
            record.undo["hold_id"] = record.id
            self.begin(record)
            self.control["hold"] = spec
        else:
            self.begin(record)
            self.control[_DELAY_KEY[mode]] = float(params.get("delay_ms", 1000))
        self._push()
        return record

    def status(self) -> dict[str, Any]:
        return read_status(self.transport, self.control_dir)

    def is_held(self, record: FaultRecord) -> bool:
        return any(h.get("hold_id") == record.id for h in self.status().get("held", []))

    def release_info(self, record: FaultRecord) -> dict[str, Any] | None:
        return next((r for r in self.status().get("released", []) if r.get("hold_id") == record.id), None)

    def wait(self, predicate, timeout: float, poll: float = 0.1) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(poll)
        return bool(predicate())

    def stop(self, record: FaultRecord) -> None:
        """Release the hold (if still held) and/or drop the delay. Works from a fresh process."""
        if record.undo.get("placement"):
            removed = 0
            for name in record.undo.get("hosts", []):
                node = self.ctx.nodes.get(name)
                t = node.transport if node is not None else LocalTransport(name)
                removed += remove_rules(t, record.id, ("nat", "filter"))
            self.end(record, rules_removed=removed)
            return
        if not hasattr(self, "control_dir"):   # `faultline heal` without setup of a running proxy
            self.control_dir = record.undo["control_dir"]
            self.transport = LocalTransport(record.undo.get("host") or "proxy")
            self.control = {"generation": 0, "topic_names": {}}
        if record.params.get("mode", "hold") == "hold":
            self.control["clear_delay"] = True
            if (self.control.get("hold") or {}).get("id") == record.id:
                self.control["hold"] = None
            self.control["release"] = sorted(set(self.control.get("release", [])) | {record.id})
        else:
            self.control[_DELAY_KEY[record.params.get("mode")]] = 0
        try:
            self._push()
        except Exception as e:  # the proxy host may be gone; a dead proxy holds nothing
            self.end(record, error=str(e).splitlines()[0])
            return
        released = None
        if record.params.get("mode", "hold") == "hold":
            self.wait(lambda: not self.is_held(record), timeout=2.0, poll=0.05)
            released = self.release_info(record)
        self.end(record, released=released)


# ---- schedule conditions: `until: {alter-partition-held: NAME}` / `{alter-partition-released: NAME}`
def _check_name(validator: Validator, value: Any, path: str) -> None:
    validator.string(value, path)


def _held(faults: FaultsView, name: Any) -> bool:
    got = faults.active_fault(str(name))
    return bool(got and isinstance(got[0], AlterPartitionDelay) and got[0].is_held(got[1]))


def _released(faults: FaultsView, name: Any) -> bool:
    got = faults.active_fault(str(name))
    return bool(got and isinstance(got[0], AlterPartitionDelay) and got[0].release_info(got[1]))


register_condition("alter-partition-held", _check_name, _held)
register_condition("alter-partition-released", _check_name, _released)
