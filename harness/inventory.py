"""Inventories: which hosts make up the target cluster and how faultline reaches them.

Why the Ansible shape: lab teams already describe their Kafka hosts as an Ansible
inventory (``all: vars / children: brokers|controllers: hosts: NAME: {ansible_host, ...}``);
faultline reads that file as is and needs only a few ``kafka_*``/``faultline_*`` vars
added (docs/inventory.md). Variables merge as Ansible does: ``all.vars`` < group ``vars`` <
host vars. Unknown ``ansible_*`` keys are accepted and ignored; unknown ``faultline_*``
and ``kafka_*`` keys are errors; other lab vars must be named in
``faultline_ignore_vars`` (strict by default, so a typo never passes silently).

The embedded targets (``faultline_embedded: kraftsim`` or ``apache-kafka``, local transport only)
have no hosts in the file: the run loop starts the cluster (targets/: ``python -m kraftsim
cluster``, or real ``kafka.Kafka`` JVMs of a cached release) and writes a concrete local
inventory of it into the run directory, which is what the ledger records and what `faultline
heal` later reloads.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.kafkalog.log4j import parse_zone
from groundwork.config import Validator, join, load_yaml
from harness.kafka_client import ClientConfig, parse as parse_kafka_client
from targets.kafka_security import ListenerSecurity, parse as parse_listener_security
from harness.versions import check_kafka_version, check_settings as check_version_settings

TRANSPORTS = ("local", "ssh", "docker")
GROUPS = ("controllers", "brokers")
ROLE_OF_GROUP = {"controllers": "controller", "brokers": "broker"}

#: variables valid at all.vars level only
GLOBAL_VARS = {
    "faultline_transport", "faultline_accept_new_host_keys", "faultline_embedded", "kraftsim", "apache_kafka",
    "faultline_harness_address", "kafka_client",
    "kafka_bootstrap", "kafka_cluster_id", "faultline_sudo", "faultline_sudo_password_env",
    "faultline_known_hosts", "faultline_ignore_vars", "faultline_ssh_config",
}
#: variables valid on a host, a group's vars or all.vars (inherited)
HOST_VARS = {
    "ansible_host", "ansible_port", "ansible_user", "ansible_ssh_private_key_file",
    "faultline_container", "faultline_netns", "kafka_node_id", "kafka_listeners",
    "kafka_data_dirs", "kafka_service", "kafka_event_log", "faultline_sudo",
    "kafka_log_dir", "kafka_log_files", "kafka_log_timezone",
    "kafka_metadata_log_dir", "kafka_config", "kafka_implementation", "kafka_version",
}
#: who wrote a host's logs (nemeses.hostinfo.IMPLEMENTATIONS): it decides how much a page-cache
#: loss cuts (kraftsim's recovery-point checkpoint is exact, Kafka's only a floor)
IMPLEMENTATIONS = ("apache-kafka", "kraftsim")
#: Kafka's log4j files faultline collects, and their names in ``kafka.logs.dir`` as Kafka's
#: config/log4j.properties (log4j2.yaml from 4.0) writes them
KAFKA_LOG_FILES = {"server": "server.log", "controller": "controller.log", "state_change": "state-change.log"}
KRAFTSIM_KEYS = ("brokers", "controllers", "settings")
#: the embedded Apache Kafka target's keys: the release, the cluster's shape, server.properties
APACHE_KAFKA_KEYS = ("version", "brokers", "controllers", "combined", "settings", "lossyfs", "security")
#: the embedded targets (targets/): the model, and real Kafka from the release cache
EMBEDDED = ("kraftsim", "apache-kafka")
#: the ssh config an ssh inventory reads unless ``faultline_ssh_config`` names another (or ``none``)
DEFAULT_SSH_CONFIG = "~/.ssh/config"


@dataclass
class Service:
    """How to start/stop Kafka on a host: a systemd unit, or a command with a pid file; ``format``
    is the operator's ``kafka-storage format ... --ignore-formatted`` for the node, which a disk
    wipe runs before the restart (the node comes back as a replaced disk is brought back)."""
    systemd: str | None = None
    command: str | None = None
    pidfile: str | None = None
    log: str | None = None
    format: str | None = None


@dataclass
class HostSpec:
    name: str
    group: str
    role: str
    node_id: int | None
    address: str
    port: int | None = None
    user: str | None = None
    key_file: str | None = None
    container: str | None = None
    netns: str | None = None
    listeners: str | None = None
    data_dirs: list[str] = field(default_factory=list)
    service: Service | None = None
    event_log: str | None = None
    sudo: bool = False
    log_dir: str | None = None                                  # kafka.logs.dir on the host
    log_files: dict[str, str] = field(default_factory=dict)     # kind -> path, overriding log_dir/<name>
    log_timezone: str | None = None                             # the zone log4j stamps in (default: the host's)
    metadata_log_dir: str | None = None                         # metadata.log.dir: the KRaft metadata log
    config: str | None = None                                   # server.properties on the host
    implementation: str = "apache-kafka"                        # who wrote the logs: apache-kafka | kraftsim
    kafka_version: str | None = None                            # the release the host runs (x.y.z), when known


@dataclass
class Inventory:
    path: Path
    transport: str
    hosts: dict[str, HostSpec]
    vars: dict[str, Any]
    #: the embedded target (EMBEDDED), None for a lab; its cluster's shape and settings below
    embedded: str | None = None
    embedded_brokers: int = 3
    embedded_controllers: int = 1  # > 1: a KRaft controller quorum
    embedded_settings: dict[str, Any] = field(default_factory=dict)
    embedded_version: str | None = None   # apache-kafka: the release (None: from the settings)
    embedded_combined: bool = False       # apache-kafka: nodes that are broker and controller
    #: apache-kafka: the nodes' disks on lossyfs (its writeback interval in ms, 0 = none), None: plain dirs
    embedded_lossyfs: int | None = 0
    #: apache-kafka: the brokers' secured listener (SASL_SSL or SSL, targets/kafka_security.py), None: PLAINTEXT
    embedded_security: ListenerSecurity | None = None
    #: this machine's address as the hosts see it (the embedded Apache Kafka cluster's bridge)
    harness_address: str | None = None
    #: how faultline's clients authenticate (``kafka_client``, harness/kafka_client.py); secrets unread
    client: ClientConfig = field(default_factory=ClientConfig)
    bootstrap: str | None = None
    cluster_id: str | None = None
    accept_new_host_keys: bool = False
    sudo: bool = False
    sudo_password_env: str | None = None
    known_hosts: str | None = None
    #: the OpenSSH client config the ssh transport reads (HostName, User, Port, IdentityFile,
    #: ProxyJump); None: none at all (``faultline_ssh_config: none``)
    ssh_config: str | None = DEFAULT_SSH_CONFIG

    @property
    def brokers(self) -> list[HostSpec]:
        return [h for h in self.hosts.values() if h.role == "broker"]

    @property
    def controllers(self) -> list[HostSpec]:
        return [h for h in self.hosts.values() if h.role == "controller"]

    def broker_count(self) -> int:
        return self.embedded_brokers if self.embedded else len(self.brokers)


def _listener_hostport(listeners: str) -> tuple[str, int] | None:
    """``PLAINTEXT://10.0.0.1:9092,CONTROLLER://...`` → the first listener's host and port."""
    first = listeners.split(",")[0].strip()
    hostport = first.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def load_inventory(file: str | os.PathLike[str]) -> Inventory:
    path = Path(file)
    doc = load_yaml(path, "inventory")
    c = Validator(path)
    if doc is None:
        raise c.fail("", "inventory is empty; expected a mapping with key 'all'")
    top = c.mapping(doc, "", allow_none=False)
    c.keys(top, "", ["all"], required=["all"])
    root = c.mapping(top["all"], "all", allow_none=False)
    c.keys(root, "all", ["vars", "children", "hosts"])
    if root.get("hosts"):
        raise c.fail("all.hosts", "put hosts under all.children.brokers or all.children.controllers")
    gvars = c.mapping(root.get("vars"), "all.vars")
    ignore = set(c.str_list(gvars.get("faultline_ignore_vars", []), "all.vars.faultline_ignore_vars"))
    _check_vars(c, gvars, "all.vars", GLOBAL_VARS | HOST_VARS, ignore)

    transport = c.string(gvars.get("faultline_transport", "local"), "all.vars.faultline_transport",
                         choices=TRANSPORTS)
    embedded = gvars.get("faultline_embedded")
    if embedded is not None:
        c.string(embedded, "all.vars.faultline_embedded", choices=list(EMBEDDED))
        if transport != "local":
            raise c.fail("all.vars.faultline_embedded", f"the embedded {embedded} cluster needs faultline_transport: local")
    # the embedded cluster's own section: kraftsim: {...} or apache_kafka: {...}, matching the kind
    section, keys = ("apache_kafka", APACHE_KAFKA_KEYS) if embedded == "apache-kafka" else ("kraftsim", KRAFTSIM_KEYS)
    other = "kraftsim" if section == "apache_kafka" else "apache_kafka"
    if gvars.get(other) is not None:
        raise c.fail(f"all.vars.{other}", f"only meaningful with faultline_embedded: {other.replace('_', '-')}")
    ks = c.mapping(gvars.get(section), f"all.vars.{section}")
    c.keys(ks, f"all.vars.{section}", keys)
    if ks and not embedded:
        raise c.fail(f"all.vars.{section}", f"only meaningful with faultline_embedded: {section.replace('_', '-')}")
    brokers_n = c.integer(ks.get("brokers", 3), f"all.vars.{section}.brokers", min=1, max=9)
    controllers_n = c.integer(ks.get("controllers", 1), f"all.vars.{section}.controllers", min=1, max=9)
    settings = c.mapping(ks.get("settings"), f"all.vars.{section}.settings")
    for k, v in settings.items():
        c.scalar(v, join(f"all.vars.{section}.settings", k))
    version = None
    if ks.get("version") is not None:
        version = c.string(ks["version"], "all.vars.apache_kafka.version")
        try:
            version = check_kafka_version(version)
        except ValueError as e:
            raise c.fail("all.vars.apache_kafka.version", str(e)) from None
    for k, why in check_version_settings(settings):
        raise c.fail(join(f"all.vars.{section}.settings", k), why)
    combined = c.boolean(ks.get("combined", False), "all.vars.apache_kafka.combined")
    lossyfs = _lossyfs(c, ks.get("lossyfs", True), "all.vars.apache_kafka.lossyfs")
    security = parse_listener_security(c, ks.get("security"), "all.vars.apache_kafka.security")

    inv = Inventory(
        path=path.resolve(), transport=transport, hosts={}, vars=gvars, embedded=embedded,
        embedded_brokers=brokers_n, embedded_controllers=controllers_n, embedded_settings=dict(settings),
        embedded_version=version, embedded_combined=combined, embedded_lossyfs=lossyfs, embedded_security=security,
        harness_address=c.string(gvars["faultline_harness_address"], "all.vars.faultline_harness_address")
        if gvars.get("faultline_harness_address") is not None else None,
        client=parse_kafka_client(c, gvars.get("kafka_client")),
        bootstrap=c.string(gvars["kafka_bootstrap"], "all.vars.kafka_bootstrap") if gvars.get("kafka_bootstrap") is not None else None,
        cluster_id=c.string(gvars["kafka_cluster_id"], "all.vars.kafka_cluster_id") if gvars.get("kafka_cluster_id") is not None else None,
        accept_new_host_keys=c.boolean(gvars.get("faultline_accept_new_host_keys", False), "all.vars.faultline_accept_new_host_keys"),
        sudo=c.boolean(gvars.get("faultline_sudo", False), "all.vars.faultline_sudo"),
        sudo_password_env=c.string(gvars["faultline_sudo_password_env"], "all.vars.faultline_sudo_password_env") if gvars.get("faultline_sudo_password_env") is not None else None,
        known_hosts=c.string(gvars["faultline_known_hosts"], "all.vars.faultline_known_hosts") if gvars.get("faultline_known_hosts") is not None else None,
        ssh_config=_ssh_config(c, gvars.get("faultline_ssh_config"), path),
    )

    children = c.mapping(root.get("children"), "all.children")
    c.keys(children, "all.children", GROUPS)
    if embedded and any(children.get(g) for g in GROUPS):
        raise c.fail("all.children", f"an embedded {embedded} inventory lists no hosts (faultline generates them); remove children")
    inherited = {k: v for k, v in gvars.items() if k in HOST_VARS}
    node_ids: dict[int, str] = {}
    for group in GROUPS:
        gpath = f"all.children.{group}"
        g = c.mapping(children.get(group), gpath)
        c.keys(g, gpath, ["hosts", "vars"])
        grp_vars = c.mapping(g.get("vars"), f"{gpath}.vars")
        _check_vars(c, grp_vars, f"{gpath}.vars", HOST_VARS, ignore)
        hosts = c.mapping(g.get("hosts"), f"{gpath}.hosts")
        for name, hv in hosts.items():
            hpath = f"{gpath}.hosts.{name}"
            hv = c.mapping(hv, hpath)
            _check_vars(c, hv, hpath, HOST_VARS, ignore)
            if name in inv.hosts:
                raise c.fail(hpath, f"host {name} is listed twice (a host is either a broker or a controller)")
            merged = {**inherited, **grp_vars, **hv}
            spec = _host(c, inv, name, group, merged, hpath)
            if spec.node_id is not None:
                if spec.node_id in node_ids:
                    raise c.fail(join(hpath, "kafka_node_id"), f"node id {spec.node_id} is already used by {node_ids[spec.node_id]}")
                node_ids[spec.node_id] = name
            inv.hosts[name] = spec

    if not embedded:
        if not inv.brokers:
            raise c.fail("all.children.brokers.hosts", "no brokers: list at least one broker host (or use faultline_embedded: kraftsim)")
        if inv.bootstrap is None:
            parts = []
            for b in inv.brokers:
                hp = _listener_hostport(b.listeners) if b.listeners else None
                if hp is None:
                    raise c.fail("all.vars.kafka_bootstrap", "missing: give kafka_bootstrap or kafka_listeners on every broker")
                parts.append(f"{hp[0]}:{hp[1]}")
            inv.bootstrap = ",".join(parts)
    return inv


def _check_vars(c: Validator, m: dict[str, Any], path: str, allowed: set[str], ignore: set[str]) -> None:
    for k in m:
        if k in allowed or k in ignore:
            continue
        if k.startswith("ansible_"):
            continue  # a lab inventory's own Ansible settings: accepted, unused
        if k in GLOBAL_VARS:
            raise c.fail(join(path, k), "only valid in all.vars")
        if k.startswith(("faultline_", "kafka_")) or k == "kraftsim":
            raise c.fail(join(path, k), "unknown key; see docs/inventory.md for the kafka_*/faultline_* vars faultline knows")
        raise c.fail(join(path, k), "unknown var; if your lab needs it, list it in all.vars.faultline_ignore_vars")


def _opt_str(c: Validator, m: dict[str, Any], key: str, path: str) -> str | None:
    return c.string(m[key], join(path, key)) if m.get(key) is not None else None


def _host(c: Validator, inv: Inventory, name: str, group: str, v: dict[str, Any], path: str) -> HostSpec:
    def p(key: str) -> str:
        return join(path, key)

    node_id = c.integer(v["kafka_node_id"], p("kafka_node_id"), min=0) if v.get("kafka_node_id") is not None else None
    port = c.integer(v["ansible_port"], p("ansible_port"), min=1, max=65535) if v.get("ansible_port") is not None else None
    listeners = _opt_str(c, v, "kafka_listeners", path)
    if listeners is not None and _listener_hostport(listeners) is None:
        raise c.fail(p("kafka_listeners"), f"expected NAME://host:port[,...], got {listeners!r}")
    data_dirs = c.str_list(v.get("kafka_data_dirs", []), p("kafka_data_dirs"))
    service = None
    if v.get("kafka_service") is not None:
        s = c.mapping(v["kafka_service"], p("kafka_service"), allow_none=False)
        c.keys(s, p("kafka_service"), ["systemd", "command", "pidfile", "log", "format"])
        if ("systemd" in s) == ("command" in s):
            raise c.fail(p("kafka_service"), "give exactly one of systemd: UNIT or command: CMD (with pidfile:)")
        if "systemd" in s:
            if len(s) > 1:
                raise c.fail(p("kafka_service"), "systemd: UNIT takes no command/pidfile/log")
            service = Service(systemd=c.string(s["systemd"], p("kafka_service.systemd")))
        else:
            if "pidfile" not in s:
                raise c.fail(p("kafka_service.pidfile"), "missing required key (a command service needs a pid file)")
            service = Service(command=c.string(s["command"], p("kafka_service.command")),
                              pidfile=c.string(s["pidfile"], p("kafka_service.pidfile")),
                              log=_opt_str(c, s, "log", p("kafka_service")),
                              format=_opt_str(c, s, "format", p("kafka_service")))
    spec = HostSpec(
        name=name, group=group, role=ROLE_OF_GROUP[group], node_id=node_id,
        address=_opt_str(c, v, "ansible_host", path) or "", port=port,
        user=_opt_str(c, v, "ansible_user", path), key_file=_opt_str(c, v, "ansible_ssh_private_key_file", path),
        container=_opt_str(c, v, "faultline_container", path), netns=_opt_str(c, v, "faultline_netns", path),
        listeners=listeners, data_dirs=data_dirs, service=service,
        event_log=_opt_str(c, v, "kafka_event_log", path),
        sudo=c.boolean(v.get("faultline_sudo", inv.sudo), p("faultline_sudo")),
        log_dir=_opt_str(c, v, "kafka_log_dir", path),
        log_files=_log_files(c, v.get("kafka_log_files"), p("kafka_log_files")),
        log_timezone=_log_timezone(c, v.get("kafka_log_timezone"), p("kafka_log_timezone")),
        metadata_log_dir=_abs_path(c, v.get("kafka_metadata_log_dir"), p("kafka_metadata_log_dir")),
        config=_abs_path(c, v.get("kafka_config"), p("kafka_config")),
        implementation=c.string(v.get("kafka_implementation", "apache-kafka"), p("kafka_implementation"),
                                choices=list(IMPLEMENTATIONS)),
        kafka_version=_kafka_version(c, v.get("kafka_version"), p("kafka_version")),
    )
    # what each transport needs to reach the host
    if inv.transport == "ssh" and not spec.address:
        raise c.fail(p("ansible_host"), "missing required key (ssh transport)")
    if inv.transport == "docker" and not spec.container:
        raise c.fail(p("faultline_container"), "missing required key (docker transport)")
    if inv.transport != "local" and spec.netns:
        raise c.fail(p("faultline_netns"), "only valid with faultline_transport: local")
    if spec.node_id is None:
        raise c.fail(p("kafka_node_id"), "missing required key")
    if spec.service is None:
        raise c.fail(p("kafka_service"), "missing required key ({systemd: UNIT} or {command: CMD, pidfile: FILE})")
    if not spec.address:
        hp = _listener_hostport(listeners) if listeners else None
        spec.address = hp[0] if hp else ("127.0.0.1" if inv.transport == "local" else name)
    return spec


def _lossyfs(c: Validator, v: Any, path: str) -> int | None:
    """``lossyfs: true`` (the default: every node's disk on lossyfs, exact page-cache loss),
    ``false`` (plain directories) or ``{writeback_ms: N}`` (lossyfs flushing unsynced data after N ms,
    as the kernel's writeback would)."""
    if isinstance(v, bool):
        return 0 if v else None
    m = c.mapping(v, path, allow_none=False)
    c.keys(m, path, ["writeback_ms"])
    return c.integer(m.get("writeback_ms", 0), join(path, "writeback_ms"), min=0)


def _kafka_version(c: Validator, v: Any, path: str) -> str | None:
    """The release a host runs (``kafka_version: 3.7.1``): where Kafka's behaviour differs by release
    (the checkpoint the page-cache cut leaves, nemeses/reboot.py), faultline knows instead of guessing."""
    if v is None:
        return None
    try:
        return check_kafka_version(c.string(v, path))
    except ValueError as e:
        raise c.fail(path, str(e)) from None


def _ssh_config(c: Validator, v: Any, inventory: Path) -> str | None:
    """``faultline_ssh_config``: the OpenSSH client config to read (relative to the inventory), ``none``
    for none; unset, ``~/.ssh/config`` when it exists. A file named here must exist."""
    if v is None:
        return DEFAULT_SSH_CONFIG
    text = c.string(v, "all.vars.faultline_ssh_config")
    if text.lower() == "none":
        return None
    p = Path(os.path.expanduser(text))
    p = p if p.is_absolute() else inventory.resolve().parent / p
    if not p.is_file():
        raise c.fail("all.vars.faultline_ssh_config", f"ssh config file {text} not found (or 'none' to read none)")
    return str(p)


def _abs_path(c: Validator, v: Any, path: str) -> str | None:
    """An absolute path on the host (it is read there, never relative to faultline's cwd)."""
    if v is None:
        return None
    text = c.string(v, path)
    if not text.startswith("/"):
        raise c.fail(path, f"an absolute path on the host is wanted, got {text!r}")
    return text


def _log_files(c: Validator, v: Any, path: str) -> dict[str, str]:
    """``kafka_log_files: {server: PATH, controller: PATH, state_change: PATH}`` (any subset)."""
    m = c.mapping(v, path)
    c.keys(m, path, list(KAFKA_LOG_FILES))
    return {k: c.string(x, join(path, k)) for k, x in m.items()}


def _log_timezone(c: Validator, v: Any, path: str) -> str | None:
    """The zone Kafka's log4j timestamps are in: +HHMM, +HH:MM, UTC or an IANA name."""
    if v is None:
        return None
    text = c.string(v, path)
    try:
        parse_zone(text)
    except ValueError as e:
        raise c.fail(path, str(e)) from None
    return text
