"""Create and remove the containers a Docker inventory describes (``faultline docker up|down``).

Why containers are "hosts", not services: the run loop, the nemeses and the heal ledger
treat every target the same way — a host reached through a transport, on which the
broker is started from the inventory's ``kafka_service.command`` and tracked by its pid
file. So a container here idles under an init (``sleep infinity`` under docker-init,
reaping like a real init) on a user-defined bridge network with the IP its
``kafka_listeners`` names, holds its data on a named volume (which survives a container
restart, like a disk survives a reboot), and gets its kraftsim ``server.properties``
written from the inventory's facts. Killing the container is a power cut; restarting it
is a reboot after which the run loop starts the broker again — as on a lab host.

The image decides what runs (its label ``org.faultline.image``): kraftsim, or real Apache Kafka
(harness/docker/kafka_image.py, ``faultline docker build-image --kafka VERSION``). For Kafka each
host gets Kafka's server.properties at ``kafka_config`` (harness/kafka_hosts.py: the embedded
target's, with the inventory's ids, addresses and dirs, plus ``docker_kafka_settings``), its
storage formatted with its own ``kafka_service.format`` (the command a disk wipe runs again),
and the wait lasts until every broker is registered, not only listening.

Containers get ``NET_ADMIN`` so the partition/link nemeses' ``iptables``/``tc`` commands,
run through ``docker exec``, act on the container's own network namespace (the
alternative, ``DockerTransport.net_exec`` via nsenter from the host, needs no capability;
see docs/targets.md).

Docker-only settings are plain inventory vars listed in ``faultline_ignore_vars`` (the
inventory loader's escape hatch for lab vars): ``docker_network``, ``docker_subnet``,
``docker_image``, ``docker_kraftsim_settings`` or ``docker_kafka_settings``, ``docker_data_mount``
(where each container's named data volume is mounted; its data dirs, event log or Kafka logs
belong under it).
"""
from __future__ import annotations

import ipaddress
import posixpath
import re
import shlex
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors
import docker.types

from checkers.outcome import EXIT_CONFIG, EXIT_INFRA
from groundwork.config import ConfigError
from harness import kafka_hosts
from harness.docker.image import IMAGE_TAG
from harness.inventory import HostSpec, Inventory
from targets.kafka_settings import KafkaSettings
from groundwork.transport.base import CommandFailed, TransportError
from groundwork.transport.docker import DockerTransport, engine

CLUSTER_LABEL = "org.faultline.cluster"
DEFAULT_NETWORK = "faultline"
DEFAULT_SUBNET = "10.250.3.0/24"
DEFAULT_CONFIG = "/etc/kraftsim/server.properties"


class DockerClusterError(RuntimeError):
    """One line saying which host/var is wrong or what the engine refused."""
    exit_code = EXIT_INFRA


class DockerInventoryError(DockerClusterError):
    """The inventory cannot describe a Docker cluster (a config error: exit code 2)."""
    exit_code = EXIT_CONFIG


@dataclass
class DockerPlan:
    network: str
    subnet: str
    image: str
    settings: dict[str, Any]
    data_mount: str = "/var/lib/kraftsim"
    labels: dict[str, str] = field(default_factory=dict)
    #: which var the settings came from (docker_kraftsim_settings | docker_kafka_settings)
    settings_var: str = "docker_kraftsim_settings"


def plan_of(inv: Inventory, extra_labels: dict[str, str] | None = None) -> DockerPlan:
    v = inv.vars
    subnet = str(v.get("docker_subnet", DEFAULT_SUBNET))
    net = ipaddress.ip_network(subnet, strict=False)
    if not net.subnet_of(ipaddress.ip_network("10.250.0.0/16")):
        raise DockerInventoryError(f"{inv.path}: all.vars.docker_subnet: {subnet} is outside 10.250.0.0/16; "
                                 f"faultline only creates networks there")
    if "docker_kraftsim_settings" in v and "docker_kafka_settings" in v:
        raise DockerInventoryError(f"{inv.path}: all.vars.docker_kafka_settings: give the settings of one software "
                                   "(docker_kraftsim_settings for the kraftsim image, docker_kafka_settings for Kafka's)")
    settings_var = "docker_kafka_settings" if "docker_kafka_settings" in v else "docker_kraftsim_settings"
    settings = v.get(settings_var) or {}
    if not isinstance(settings, dict):
        raise DockerInventoryError(f"{inv.path}: all.vars.{settings_var}: a mapping of settings is wanted")
    name = str(v.get("docker_network", DEFAULT_NETWORK))
    mount = str(v.get("docker_data_mount", "/var/lib/kraftsim"))
    if not mount.startswith("/") or mount.rstrip("/") == "":
        raise DockerInventoryError(f"{inv.path}: all.vars.docker_data_mount: an absolute directory is wanted, got {mount!r}")
    return DockerPlan(name, subnet, str(v.get("docker_image", IMAGE_TAG)), dict(settings), mount,
                      {CLUSTER_LABEL: name, **(extra_labels or {})}, settings_var)


def _hostport(listeners: str | None) -> tuple[str, int]:
    first = (listeners or "").split(",")[0]
    host, _, port = first.split("://", 1)[-1].rpartition(":")
    return host, int(port)


def config_path(spec: HostSpec) -> str:
    cmd = spec.service.command if spec.service and spec.service.command else ""
    m = re.search(r"--config[= ](\S+)", cmd)
    return shlex.split(m.group(1))[0] if m else DEFAULT_CONFIG


def kraftsim_properties(inv: Inventory, spec: HostSpec, settings: dict[str, Any]) -> str:
    """kraftsim's server.properties for one host, from the inventory's Kafka facts."""
    ctl = inv.controllers[0] if inv.controllers else None
    props: dict[str, Any] = {"node.id": spec.node_id, "process.roles": spec.role, "listeners": spec.listeners}
    if spec.role == "broker":
        if ctl is None:
            raise DockerInventoryError(f"{inv.path}: all.children.controllers: a kraftsim cluster needs a controller host")
        h, p = _hostport(ctl.listeners)
        props["controller.quorum.bootstrap.servers"] = f"{h}:{p}"
        props["log.dirs"] = ",".join(spec.data_dirs) or "/var/lib/kraftsim/data"
    else:
        props["metadata.log.dir"] = spec.metadata_log_dir or (spec.data_dirs or ["/var/lib/kraftsim/metadata"])[0]
    if spec.event_log:
        props["event.log"] = spec.event_log
    if inv.cluster_id:
        props["cluster.id"] = inv.cluster_id
    for k, val in settings.items():
        props[k] = str(val).lower() if isinstance(val, bool) else val
    return "".join(f"{k}={val}\n" for k, val in props.items())


def start_services(inv: Inventory, transports: dict[str, DockerTransport], *, wait_s: float = 30.0,
                   what: str = "kraftsim") -> None:
    """Start ``what`` (kraftsim or Kafka) on every host with its ``kafka_service`` (controllers
    first), the way the run loop restarts it (harness.cluster.ClusterNode), and wait for each
    listener to accept TCP from this machine."""
    from harness.cluster import ClusterNode
    order = sorted(inv.hosts.values(), key=lambda s: s.role != "controller")
    for spec in order:
        node = ClusterNode(spec, transports[spec.name])
        if not node.service_pids():
            node.start_service()
    deadline = time.monotonic() + wait_s
    for spec in order:
        host, port = _hostport(spec.listeners)
        while True:
            try:
                socket.create_connection((host, port), timeout=1.0).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    log = transports[spec.name].read_text(spec.service.log) if spec.service and spec.service.log else None
                    tail = (log or "").strip().splitlines()[-1:] or ["no log"]
                    raise DockerClusterError(f"{spec.name}: {what} did not listen on {host}:{port} within "
                                             f"{wait_s:.0f}s ({tail[0][:160]})") from None
                time.sleep(0.2)


def up(inv: Inventory, *, client: docker.DockerClient | None = None,
       extra_labels: dict[str, str] | None = None, start: bool = True) -> dict[str, DockerTransport]:
    """Create the network, volumes and idle host containers; write each kraftsim config;
    with ``start`` (default) start kraftsim in them and wait for the listeners."""
    if inv.transport != "docker":
        raise DockerInventoryError(f"{inv.path}: all.vars.faultline_transport: docker is wanted for `faultline docker up`")
    c = engine(client)
    plan = plan_of(inv, extra_labels)
    try:
        labels = c.images.get(plan.image).labels or {}
    except docker.errors.ImageNotFound:
        hint = f" --kafka {plan.image.rpartition(':')[2]}" if plan.image.startswith("faultline/kafka:") else ""
        raise DockerClusterError(f"image {plan.image} not found: build it with `faultline docker build-image{hint}`") from None
    kafka = kafka_setup(inv, plan, labels)
    net = ipaddress.ip_network(plan.subnet, strict=False)
    for spec in inv.hosts.values():
        ip = _hostport(spec.listeners)[0]
        try:
            if ipaddress.ip_address(ip) not in net:
                raise DockerInventoryError(f"{spec.name}: kafka_listeners address {ip} is not in docker_subnet {plan.subnet}")
        except ValueError:
            raise DockerInventoryError(f"{spec.name}: kafka_listeners must name an IP address in {plan.subnet}, got {ip!r}") from None
    down(inv, client=c)
    gateway = str(next(net.hosts()))
    ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=plan.subnet, gateway=gateway)])
    try:
        # internal: no route off the test subnet, so nothing here can send traffic elsewhere
        c.networks.create(plan.network, driver="bridge", ipam=ipam, internal=True, labels=plan.labels)
    except docker.errors.APIError as e:
        raise DockerClusterError(f"cannot create network {plan.network} on {plan.subnet}: "
                                 f"{(e.explanation or str(e)).splitlines()[0]}") from None
    out: dict[str, DockerTransport] = {}
    try:
        for spec in inv.hosts.values():
            assert spec.container
            ip = _hostport(spec.listeners)[0]
            vol = f"{spec.container}-data"
            c.volumes.create(vol, labels=plan.labels)
            ct = c.containers.create(
                plan.image, name=spec.container, hostname=spec.name, init=True, detach=True,
                labels={**plan.labels, "org.faultline.host": spec.name},
                cap_add=["NET_ADMIN"], volumes={vol: {"bind": plan.data_mount, "mode": "rw"}},
                network=plan.network,
                networking_config={plan.network: c.api.create_endpoint_config(ipv4_address=ip)})
            ct.start()
            t = DockerTransport(spec.name, spec.container, docker_client=c)
            if kafka is None:
                cfg = config_path(spec)
                t.run(["mkdir", "-p", posixpath.dirname(cfg)], sudo=True, check=True)
                t.write_text(cfg, kraftsim_properties(inv, spec, plan.settings), sudo=True)
            out[spec.name] = t
        if kafka is not None:
            kafka_hosts.write_configs(inv, dict(out), kafka)
            kafka_hosts.format_storage(inv, dict(out))
    except (docker.errors.APIError, TransportError, CommandFailed, kafka_hosts.KafkaHostError) as e:
        down(inv, client=c)
        msg = e.explanation if isinstance(e, docker.errors.APIError) and e.explanation else str(e)
        raise DockerClusterError(f"docker up failed: {str(msg).splitlines()[0]}") from None
    if start:
        try:
            if kafka is None:
                start_services(inv, out)
            else:
                start_services(inv, out, wait_s=120.0, what="Kafka")
                kafka_hosts.wait_ready(inv, 120.0)
        except (DockerClusterError, TransportError, CommandFailed, kafka_hosts.KafkaHostError) as e:
            down(inv, client=c)
            raise DockerClusterError(f"docker up: {e}") from None
    return out


def kafka_setup(inv: Inventory, plan: DockerPlan, labels: dict[str, str]) -> KafkaSettings | None:
    """For an Apache Kafka image (label ``org.faultline.image=kafka``): the cluster's settings for
    server.properties, after checking the inventory describes Kafka hosts of the image's release;
    None for the kraftsim image."""
    kind = labels.get("org.faultline.image", "kraftsim")
    wrong = [s.name for s in inv.hosts.values() if (s.implementation == "kraftsim") != (kind == "kraftsim")]
    if wrong:
        raise DockerInventoryError(f"{inv.path}: {wrong[0]}.kafka_implementation: {plan.image} runs "
                                   f"{'kraftsim' if kind == 'kraftsim' else 'Apache Kafka'}; set kafka_implementation: "
                                   f"{'kraftsim' if kind == 'kraftsim' else 'apache-kafka'} (or pick the other image)")
    if kind == "kraftsim":
        if plan.settings_var != "docker_kraftsim_settings":
            raise DockerInventoryError(f"{inv.path}: all.vars.{plan.settings_var}: {plan.image} runs kraftsim; "
                                       "give docker_kraftsim_settings")
        return None
    if plan.settings_var != "docker_kafka_settings" and plan.settings:
        raise DockerInventoryError(f"{inv.path}: all.vars.{plan.settings_var}: {plan.image} runs Apache Kafka; "
                                   "give docker_kafka_settings (Kafka's keys)")
    if inv.client.protocol != "PLAINTEXT":
        raise DockerInventoryError(f"{inv.path}: all.vars.kafka_client: docker up writes PLAINTEXT listeners; "
                                   f"a {inv.client.protocol} cluster in containers is not something it makes (remove "
                                   "kafka_client, or secure the embedded target: --target apache-kafka)")
    release = labels.get("org.faultline.kafka-version")
    for s in inv.hosts.values():
        if s.kafka_version and release and s.kafka_version != release:
            raise DockerInventoryError(f"{inv.path}: {s.name}.kafka_version: {s.kafka_version}, but {plan.image} "
                                       f"holds Apache Kafka {release}")
    try:
        settings = kafka_hosts.sort_settings(plan.settings, "all.vars.docker_kafka_settings", inv.path)
        for s in inv.hosts.values():
            kafka_hosts.properties(inv, s, settings)    # every host's facts, before anything is created
            kafka_hosts.format_argv(inv, s)
            if not s.config:
                raise ConfigError(inv.path, f"{s.name}.kafka_config", "where docker up writes the host's "
                                  "server.properties is wanted (the service command's server.properties)")
    except ConfigError as e:
        raise DockerInventoryError(str(e)) from None
    return settings


def down(inv: Inventory, *, client: docker.DockerClient | None = None) -> int:
    """Remove the inventory's containers, their data volumes and the network; returns count."""
    c = engine(client)
    plan = plan_of(inv)
    n = 0
    names = {s.container for s in inv.hosts.values() if s.container}
    for ct in c.containers.list(all=True, filters={"label": f"{CLUSTER_LABEL}={plan.network}"}):
        names.add(ct.name)
    for name in names:
        try:
            c.containers.get(name).remove(force=True, v=True)
            n += 1
        except docker.errors.NotFound:
            pass
    for name in names:
        try:
            c.volumes.get(f"{name}-data").remove(force=True)
        except docker.errors.NotFound:
            pass
    for netw in c.networks.list(names=[plan.network]):
        if netw.name == plan.network:
            try:
                netw.remove()
            except docker.errors.APIError:
                pass
    return n
