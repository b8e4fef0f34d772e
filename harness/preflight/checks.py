"""The checks ``faultline preflight`` runs on each host, over the inventory's own transport.

Each check is one column of the table and says ``ok``, ``warn`` or ``FAIL`` with one short cell
and, for every problem, one line with its fix (docs/targets.md, "Preflight"):

| column | what | FAIL when | warn when |
| --- | --- | --- | --- |
| reach | the host answers (ssh: host key verified against known_hosts, never added) | it does not | the inventory would accept unknown keys |
| sudo | fault commands run as root (``sudo -n``, never a prompt): ``iptables -S``, ``tc qdisc show`` | no root, a tool missing | |
| kafka | version; ``process.roles``, ``node.id`` from server.properties; the service runs | not KRaft, wrong group or node id, service stopped, kafka_config unreadable | version or config not found |
| dirs | each log dir and the metadata log dir exists, is writable by the fault user, is Kafka's | missing (or on a dead lossyfs mount), not writable, not in server.properties | no log dirs known |
| logs | where events come from: kraftsim's event log, or Kafka's log files and its log4j levels | a logger the reader needs above INFO | log files or log4j config not found |
| reboot | which reboot modes are real: SysRq (nemeses.reboot.sysrq_emulated), lossyfs or LazyFS under the log dirs | no python3 (the page-cache cut) | only emulated reboots |
| clock | the host's clock against the harness's, round-trip corrected | | off by more than 100 ms (or not measurable that well) |
| disk | free space where the log dirs are | under ``--min-free-gb`` | under five times that |

The fault user is the user the transport logs in as, with sudo where the inventory grants it.
When sudo is granted but refused, the checks that need root say "needs sudo" instead of
failing too: the sudo line is the one problem to fix, not five.
"""
from __future__ import annotations

import os
import re
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from groundwork.config import ConfigError
from groundwork.transport.base import Transport, TransportError
from harness.cluster import Cluster, ClusterNode
from harness.inventory import HostSpec, Inventory
from harness.lock import lab_lock
from harness.preflight import log4j
from harness.preflight.clock import measure as measure_clock
from harness.preflight.embedded import check_embedded
from workloads.kafka_wire import probe
from harness.preflight.model import (COLUMNS, FAIL, OK, WARN, Check, HostResult, Issue, Options, Report,
                                     gib, short_line, without_host)
from harness.probe import reach_error, sudo_error, transport_for
from nemeses.hostinfo import parse_properties
from nemeses.reboot import sysrq_emulated
from nemeses import lossyfs

#: the Kafka core jar in ``libs/`` (``kafka_2.13-3.7.0.jar``), not its -test/-sources/-javadoc jars
KAFKA_JAR_RE = re.compile(r"(?:^|/)kafka_\d+\.\d+-(\d+\.\d+\.\d+(?:[.-](?!test|sources|javadoc)[\w.]+)?)\.jar$")
SUDOERS_FIX = ("grant {user} NOPASSWD sudo for iptables, tc, kill, systemctl and sh on the host "
               "(docs/targets.md, 'What the hosts need'), or set faultline_sudo_password_env")
CLOCK_FIX = ("synchronise the host's and the harness machine's clocks (chrony/ntpd): the timeline "
             "maps the hosts' event times onto the run clock")


def login_user(t: Transport) -> str:
    """Who the fault commands run as before sudo: the ssh login, this process, or docker's exec."""
    user = getattr(t, "user", None)
    if user:
        return str(user)
    if type(t).__name__ == "DockerTransport":
        return "root (docker exec)"
    try:
        import pwd
        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return str(os.geteuid())


class HostChecks:
    """The checks of one host; each reads what the ones before it learned (root, config)."""

    def __init__(self, inv: Inventory, spec: HostSpec, t: Transport, opts: Options):
        self.inv, self.spec, self.t, self.opts = inv, spec, t, opts
        self.node = ClusterNode(spec, t)
        self.user = login_user(t)
        self.root = False                 # fault commands run as root
        self.sudo_refused = False         # sudo is granted by the inventory but refused by the host
        self.cmdline: list[str] = []      # the running service's command line
        self.config: str | None = None    # server.properties on the host
        self.config_from = ""
        self.props: dict[str, str] = {}
        self.existing_dirs: list[str] = []

    # -- plumbing -----------------------------------------------------------------------------
    def as_root(self) -> bool:
        """Whether to ask the transport for sudo (it applies it only where the inventory grants it)."""
        return self.root and self.spec.sudo

    def read(self, path: str) -> str | None:
        """A file on the host, as the login user, else as root (a config may be root's only)."""
        text = self.t.read_text(path)
        if text is None and self.as_root():
            r = self.t.run(["cat", "--", path], sudo=True)
            text = r.stdout if r.ok else None
        return text

    def run_all(self) -> dict[str, Check]:
        out: dict[str, Check] = {"reach": self.reach()}
        if out["reach"].status == FAIL:
            return {c: out.get(c) or Check("-", skipped=True) for c in COLUMNS}
        for col, fn in (("sudo", self.sudo), ("kafka", self.kafka), ("dirs", self.dirs), ("logs", self.logs),
                        ("reboot", self.reboot), ("clock", self.clock), ("disk", self.disk)):
            try:
                out[col] = fn()
            except TransportError as e:
                out[col] = Check("lost")
                out[col].add(FAIL, f"the host stopped answering: {without_host(self.spec.name, str(e))}",
                             "check the host and run preflight again")
            except Exception as e:  # noqa: BLE001 - one check's bug is one line, the others still run
                out[col] = Check("error")
                out[col].add(FAIL, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        return out

    # -- reach ----------------------------------------------------------------------------------
    def reach(self) -> Check:
        why = reach_error(self.inv, self.spec, self.t)
        how = {"ssh": "ssh, host key verified", "docker": "docker", "local": "local"}[self.inv.transport]
        if self.inv.transport == "local" and self.spec.netns:
            how = f"netns {self.spec.netns}"
        c = Check(how if why is None else "unreachable")
        if why is not None:
            msg = without_host(self.spec.name, why)
            fix = "" if ("ssh-keyscan" in msg or "ssh-keygen -R" in msg) else (
                "check that the host is up and answers over the inventory's transport "
                "(ansible_host/ansible_port/ansible_user, the key, faultline_container)")
            c.add(FAIL, msg, fix)
        elif self.inv.transport == "ssh" and self.inv.accept_new_host_keys:
            c.add(WARN, "the inventory accepts unknown host keys (faultline_accept_new_host_keys: true); "
                        "preflight verified them against known_hosts",
                  "set faultline_accept_new_host_keys: false now that known_hosts has the lab's keys")
        return c

    # -- sudo -------------------------------------------------------------------------------------
    def sudo(self) -> Check:
        spec = self.spec
        if spec.sudo:
            why = sudo_error(spec, self.t)
            if why is not None:
                self.sudo_refused = True
                c = Check("sudo -n refused")
                why = re.sub(r"\s*\(grant NOPASSWD[^)]*\)$", "", without_host(spec.name, why))
                c.add(FAIL, f"sudo -n refused for {self.user}: {why}", SUDOERS_FIX.format(user=self.user))
                return c
            self.root, how = True, "exec as root" if self.inv.transport == "docker" else "sudo -n"
        else:
            r = self.t.run(["id", "-u"])
            self.root = r.ok and r.stdout.strip() == "0"
            how = "root" if self.root else self.user
            if not self.root:
                c = Check(f"{self.user}, no sudo")
                c.add(FAIL, f"{self.user} is not root and the inventory grants no sudo: partitions (iptables), "
                            "delays (tc) and kills of Kafka need root",
                      f"set faultline_sudo: true and {SUDOERS_FIX.format(user=self.user)}; or log in as root")
                return c
        c = Check(how)
        tools = []
        for argv, tool, pkg in ((["iptables", "-S"], "iptables", "iptables"),
                                (["tc", "qdisc", "show"], "tc", "iproute2")):
            r = self.t.run(argv, sudo=True, timeout=30)
            if r.ok:
                tools.append(tool)
                continue
            err = short_line(r.stderr or r.stdout)
            if r.exit_code == 127 or "not found" in err:
                c.add(FAIL, f"{tool} is not installed (`{' '.join(argv)}`: {err})", f"install {pkg} on the host")
            elif self.inv.transport == "docker":
                c.add(FAIL, f"`{' '.join(argv)}` as root failed: {err}",
                      "give the container NET_ADMIN (cap_add: [NET_ADMIN]; `faultline docker up` does)")
            else:
                c.add(FAIL, f"`{' '.join(argv)}` as root failed: {err}",
                      f"let {self.user} run {tool} as root (sudoers) and check the kernel has netfilter/tc")
        c.summary = f"{how}: {', '.join(tools) or 'no tools'}"
        return c

    # -- kafka ------------------------------------------------------------------------------------
    def _find_config(self) -> tuple[str | None, str]:
        if self.spec.config:
            return self.spec.config, "kafka_config"
        svc = self.spec.service
        for argv, where in ((shlex.split(svc.command) if svc and svc.command else [], "the service command"),
                            (self.cmdline, "the running process")):
            if "--config" in argv[:-1]:                       # kraftsim: python -m kraftsim ROLE --config FILE
                return argv[argv.index("--config") + 1], where
            if "kafka.Kafka" in argv[:-1]:                    # the JVM: ... kafka.Kafka server.properties
                return argv[argv.index("kafka.Kafka") + 1], where
            props = [a for a in argv if a.endswith(".properties")]
            if props:                                          # kafka-server-start.sh .../server.properties
                return props[-1], where
        return None, ""

    def is_kraftsim(self) -> bool:
        svc = self.spec.service
        return self.spec.implementation == "kraftsim" or bool(
            svc and svc.command and re.search(r"(^|\s)-m\s+kraftsim(\s|$)", svc.command))

    def kafka(self) -> Check:
        spec = self.spec
        c = Check("")
        running = bool(self.node.service_pids())
        self.cmdline = self.node.cmdline() if running else []
        self.config, self.config_from = self._find_config()
        roles = None
        if self.config is None:
            c.add(WARN, "cannot find the host's server.properties (no kafka_config, and neither the service "
                        "command nor the running process names one): process.roles and node.id unchecked",
                  "set kafka_config: /path/to/server.properties")
        else:
            text = self.read(self.config)
            if text is None:
                c.add(FAIL if self.config_from == "kafka_config" else WARN,
                      f"cannot read {self.config} (from {self.config_from})",
                      "set kafka_config to the host's server.properties, readable by "
                      f"{self.user}{' or root' if spec.sudo else ''}")
            else:
                self.props = parse_properties(text)
                roles = self.props.get("process.roles")
                if not roles:
                    c.add(FAIL, f"{self.config} has no process.roles: a ZooKeeper-mode node; faultline targets KRaft",
                          "run the lab in KRaft mode (process.roles=broker / controller)")
                elif spec.role not in [r.strip() for r in roles.split(",")]:
                    right = "controllers" if "controller" in roles else "brokers"
                    c.add(FAIL, f"listed under {spec.group} but process.roles={roles} in {self.config}",
                          f"move the host to all.children.{right} in the inventory (or fix process.roles)")
                nid = self.props.get("node.id", self.props.get("broker.id"))
                if nid is not None and nid.strip() != str(spec.node_id):
                    c.add(FAIL, f"kafka_node_id is {spec.node_id} but node.id={nid.strip()} in {self.config}: "
                                "faults aimed at a node id would hit the wrong host",
                          f"set kafka_node_id: {nid.strip()} for {spec.name}")
        if not running:
            svc = spec.service
            what = f"systemd unit {svc.systemd}" if svc and svc.systemd else f"no live pid in {svc.pidfile if svc else '?'}"
            c.add(FAIL, f"Kafka is not running ({what}); a run needs it running",
                  "start it before the run (`faultline run` checks every host's service at setup)")
        version, why = self.version()
        if version is None and not self.sudo_refused:
            c.add(WARN, f"Kafka's version is unknown: {why}",
                  "give kafka_config (its install's libs/ has kafka_<scala>-<version>.jar) or start the service")
        c.summary = " ".join(x for x in (version or ("? (needs sudo)" if self.sudo_refused else "?"),
                                         roles or "", "" if running else "stopped") if x)
        return c

    def version(self) -> tuple[str | None, str]:
        """(version, "") or (None, why): kraftsim asks the service's own interpreter
        (``python -m kraftsim --version``); Apache Kafka's is the core jar's name
        (``libs/kafka_2.13-3.7.0.jar``) on the running JVM's classpath or in the install's libs/."""
        svc = self.spec.service
        if self.is_kraftsim():
            argv = shlex.split(svc.command) if svc and svc.command else []
            idx = next((i for i in range(len(argv) - 1) if argv[i] == "-m" and argv[i + 1] == "kraftsim"), None)
            if idx is None:
                return None, "the service command does not run `-m kraftsim`"
            cmd = argv[:idx + 2] + ["--version"]
            r = self.t.run(cmd, sudo=self.as_root(), timeout=60)
            if r.ok and r.stdout.strip():
                return r.stdout.strip().splitlines()[-1], ""
            return None, f"`{' '.join(cmd)}` failed: {short_line(r.stderr or r.stdout)}"
        libs = []
        for i, a in enumerate(self.cmdline[:-1]):
            if a in ("-cp", "-classpath", "--class-path"):
                for entry in self.cmdline[i + 1].split(":"):
                    m = KAFKA_JAR_RE.search(entry)
                    if m:
                        return m.group(1), ""
                    if entry.endswith("/*"):   # Java's wildcard: every jar of that dir (a JVM started without
                        libs.append(entry[:-2])  # kafka-run-class.sh, e.g. on the release cache's libs/)
        if svc and svc.command:
            libs += [str(Path(a).parent.parent / "libs") for a in shlex.split(svc.command) if a.endswith("kafka-server-start.sh")]
        if svc and svc.systemd:
            r = self.t.run(["systemctl", "show", "-p", "ExecStart", "--value", svc.systemd])
            libs += [str(Path(a).parent.parent / "libs") for a in re.findall(r"[\w./-]*kafka-server-start\.sh", r.stdout)]
        if self.config:
            libs.append(str(Path(self.config).parent.parent / "libs"))
        for d in dict.fromkeys(libs):
            r = self.t.run(["ls", "-1", "--", d])
            for name in r.stdout.split() if r.ok else []:
                m = KAFKA_JAR_RE.search(name)
                if m:
                    return m.group(1), ""
        where = ", ".join(dict.fromkeys(libs)) or "no install dir known"
        return None, f"no kafka_<scala>-<version>.jar on the running classpath or in {where}"

    # -- dirs --------------------------------------------------------------------------------------
    _DIR_STATE = ('for d in "$@"; do p=$(dirname -- "$d"); '
                  'if [ -d "$d" ]; then if [ -w "$d" ]; then echo ok; else echo ro; fi; '
                  'elif [ -e "$d" ]; then echo notdir; '
                  'elif [ -e "$p" ] && ! [ -x "$p" ]; then echo noaccess; else echo missing; fi; done')

    def dirs(self) -> Check:
        spec = self.spec
        cfg_log = [d.strip() for d in (self.props.get("log.dirs") or self.props.get("log.dir") or "").split(",")
                   if d.strip()]
        cfg_meta = (self.props.get("metadata.log.dir") or "").strip() or None
        kafka_dirs = set(cfg_log) | ({cfg_meta} if cfg_meta else set())
        c = Check("")
        wanted: list[tuple[str, str]] = [("log dir", d) for d in spec.data_dirs]
        # a controller-only node keeps no partition data: its metadata log dir is what reboot and
        # disk-wipe act on (docs/inventory.md), so only a broker, or a controller without that
        # key, is out of the faults' reach without kafka_data_dirs
        if not spec.data_dirs and (spec.role == "broker" or not spec.metadata_log_dir):
            c.add(WARN, "no kafka_data_dirs: the reboot and disk-wipe faults cannot act on this host",
                  f"set kafka_data_dirs: [{', '.join(cfg_log) or '<log.dirs>'}]"
                  + ("" if spec.role == "broker" else " or kafka_metadata_log_dir: <metadata.log.dir>"))
            wanted += [("log dir", d) for d in cfg_log]
        if spec.metadata_log_dir:
            wanted.append(("metadata log dir", spec.metadata_log_dir))
            if cfg_meta and cfg_meta != spec.metadata_log_dir:
                c.add(FAIL, f"kafka_metadata_log_dir is {spec.metadata_log_dir} but metadata.log.dir={cfg_meta} "
                            f"in {self.config}", f"set kafka_metadata_log_dir: {cfg_meta}")
        if not wanted:
            c.summary = "none known"
            return c
        as_root = self.as_root()
        r = self.t.run(["sh", "-c", self._DIR_STATE, "sh", *[d for _, d in wanted]], sudo=as_root, timeout=30)
        states = r.stdout.split()
        if len(states) != len(wanted):
            c.add(FAIL, f"could not inspect the dirs: {short_line(r.stderr or r.stdout)}")
            c.summary = "?"
            return c
        bad = 0
        who = f"{self.user}{' with sudo' if as_root else ''}"
        for (what, d), st in zip(wanted, states):
            theirs = what == "log dir" and spec.data_dirs and kafka_dirs and d not in kafka_dirs
            cfg_says = f"log.dirs={','.join(cfg_log)}" + (f", metadata.log.dir={cfg_meta}" if cfg_meta else "")
            if st in ("ok", "ro"):
                self.existing_dirs.append(d)
            if st == "missing":
                bad += 1
                dead = self._dead_lossyfs(d)
                if dead is not None:
                    c.add(FAIL, f"{what} {d} is on a dead lossyfs mount at {dead} (its daemon does not answer: "
                                "every access there fails with 'Transport endpoint is not connected')",
                          f"unmount it: faultline heal, if a run's ledger holds the mount; else on the host "
                          f"fusermount3 -u -z {shlex.quote(dead)}")
                elif theirs:
                    c.add(FAIL, f"{what} {d} does not exist ({self.config} says {cfg_says})",
                          f"set kafka_data_dirs to Kafka's log.dirs: [{', '.join(cfg_log)}]")
                else:
                    c.add(FAIL, f"{what} {d} does not exist",
                          f"create it (mkdir -p {shlex.quote(d)}, owned by the user Kafka runs as) or correct the inventory")
            elif st == "notdir":
                bad += 1
                c.add(FAIL, f"{what} {d} is not a directory", "correct the inventory")
            elif st == "noaccess":
                bad += 1
                c.add(FAIL, f"{who} cannot look into {str(Path(d).parent)} to find {what} {d}",
                      "grant sudo (faultline_sudo: true) or read access to that dir")
            elif st == "ro" and not self.sudo_refused:
                bad += 1
                c.add(FAIL, f"{who} cannot write {what} {d}: the disk wipe and the page-cache cut rewrite files there",
                      f"grant sudo (faultline_sudo: true) or make {self.user} its owner")
            elif theirs:
                bad += 1
                c.add(FAIL, f"{what} {d} is not one of Kafka's ({self.config} says {cfg_says}): "
                            "faults on it would miss Kafka's data", f"set kafka_data_dirs to [{', '.join(cfg_log)}]")
        ok = len(wanted) - bad
        c.summary = f"{ok}/{len(wanted)} ok" + (" (write: needs sudo)" if self.sudo_refused and ok else "")
        return c

    # -- logs: where the events come from ------------------------------------------------------------
    def logs(self) -> Check:
        spec = self.spec
        if spec.event_log:
            c = Check("event log")
            r = self.t.run(["test", "-d", str(Path(spec.event_log).parent)])
            if not r.ok:
                c.add(WARN, f"the event log's dir {Path(spec.event_log).parent} does not exist",
                      "correct kafka_event_log (kraftsim's event.log)")
            return c
        if self.is_kraftsim():
            c = Check("no event log")
            c.add(WARN, "a kraftsim host without kafka_event_log: no events from it (no attribution, no stories)",
                  "set kafka_event_log to its event.log")
            return c
        c = Check("")
        cluster = Cluster(self.inv, {spec.name: self.node}, self.inv.bootstrap or "", self.inv.path)
        paths, _zone = cluster.kafka_log_paths(self.node)
        found = []
        if not paths:
            c.add(WARN, "no Kafka log dir known (no kafka_log_dir, and the running broker names no "
                        "-Dkafka.logs.dir): no events from this host", "set kafka_log_dir (Kafka's kafka.logs.dir)")
        else:
            for kind, path in paths.items():
                if self.t.run(["test", "-r", path]).ok:
                    found.append(kind)
                else:
                    c.add(WARN, f"{path} is not there or not readable by {self.user} (faultline collects it as that user)",
                          "set kafka_log_dir / kafka_log_files, or add the user to the log dir's group")
        cfg, text = self._log4j_config()
        if cfg is None:
            c.add(WARN, "cannot find Kafka's log4j config (the running broker names none, and there is no "
                        "log4j2.yaml or log4j.properties beside server.properties): logger levels unchecked",
                      "start the service, or set kafka_config in the install's config/ dir")
            c.summary = f"{len(found)} files, log4j ?"
            return c
        if text is None:
            c.add(WARN, f"cannot read the log4j config {cfg}", f"make it readable by {self.user}")
            c.summary = f"{len(found)} files, log4j ?"
            return c
        try:
            configured = log4j.levels(text, cfg)
        except log4j.UnreadableConfig as e:
            c.add(WARN, f"{cfg}: {e}", "use Kafka's log4j.properties / log4j2.yaml format")
            c.summary = f"{len(found)} files, log4j ?"
            return c
        for logger, level, by, what in log4j.too_quiet(configured):
            c.add(FAIL, f"{cfg}: {by if by != 'root' else 'the root logger'} logs at {level}, so {logger} "
                        f"writes nothing at INFO: the event reader loses {what}",
                  log4j.fix_line(by, cfg.endswith((".yaml", ".yml"))))
        c.summary = f"{len(found)} files, log4j " + ("ok" if c.status == OK else "too quiet")
        return c

    def _log4j_config(self) -> tuple[str | None, str | None]:
        """(path, text) of the log4j config Kafka runs with: the JVM's ``-Dlog4j2.configurationFile``
        / ``-Dlog4j.configuration`` (kafka-run-class.sh sets them), else beside server.properties."""
        jvm = {a[2:].partition("=")[0]: a[2:].partition("=")[2] for a in self.cmdline if a.startswith("-D")}
        for key in ("log4j2.configurationFile", "log4j.configurationFile", "log4j.configuration"):
            if jvm.get(key):
                path = jvm[key].split(",")[0].strip().removeprefix("file:")
                return path, self.read(path)
        if self.config:
            for name in ("log4j2.yaml", "log4j2.yml", "log4j.properties"):
                path = str(Path(self.config).parent / name)
                text = self.read(path)
                if text is not None:
                    return path, text
        return None, None

    def _dead_lossyfs(self, d: str) -> str | None:
        """The mountpoint of the dead lossyfs mount ``d`` lies on, if it does: the dir looks
        missing, and the usual fix (mkdir) fails there. Asked only for a missing dir on a lossyfs
        mount (the daemons are asked through the control script, with python3 and sudo)."""
        m = lossyfs.covering(lossyfs.mounts(self.t), d)
        if m is None:
            return None
        try:
            dead = lossyfs.dead_mounts(self.t)
        except (TransportError, ValueError):
            return None
        return m.mountpoint if m.mountpoint in dead else None

    # -- reboot modes -----------------------------------------------------------------------------------
    _MOUNT_OF = ('for d in "$@"; do mp=$(df -P -- "$d" 2>/dev/null | awk \'NR==2 {print $6}\'); '
                 'awk -v m="$mp" \'$2==m {s=$1; t=$3} END {print (t ? t : "?") " " (s ? s : "?")}\' /proc/self/mounts; done')

    def reboot(self) -> Check:
        c = Check("")
        if not self.t.run(["sh", "-c", "command -v python3"]).ok:
            c.add(FAIL, "no python3 on the host: the page-cache cut (every reboot mode) and the disk wipe run as "
                        "python3 scripts there", "install python3 on the host")
        sysrq = "?"
        if self.sudo_refused:
            sysrq = "? (needs sudo)"
            why: str | None = "unknown"
        else:
            why = sysrq_emulated(self.node)
            sysrq = "real" if why is None else "emulated"
        lazy = []
        if self.existing_dirs:
            r = self.t.run(["sh", "-c", self._MOUNT_OF, "sh", *self.existing_dirs], timeout=30)
            for line in r.stdout.splitlines() if r.ok else []:
                fstype, _, source = line.partition(" ")
                lazy.append("lazyfs" in fstype or source == "lazyfs")
        on_lazyfs = bool(lazy) and all(lazy)
        # lossyfs (mode: lossyfs): every log dir on a mount found as the reboot finds it
        found = lossyfs.mounts(self.t) if self.existing_dirs else []
        on_lossyfs = bool(found) and all(lossyfs.covering(found, d) for d in self.existing_dirs)
        c.summary = f"sysrq {sysrq}" + (", lossyfs" if on_lossyfs else "") + (", lazyfs" if on_lazyfs else "")
        c.skipped = self.sudo_refused and not c.issues  # SysRq needs root to tell
        if why is not None and not on_lazyfs and not on_lossyfs and not self.sudo_refused:
            c.add(WARN, f"reboots here are emulated (SIGKILL + the page-cache cut): sysrq: {why}; "
                        "no log dir on lossyfs or LazyFS",
                  "for an exact power loss: the log dirs on lossyfs (mode: lossyfs, docs/nemeses.md), or a host "
                  "of its own with kernel.sysrq enabled")
        return c

    # -- clock ------------------------------------------------------------------------------------------
    def clock(self) -> Check:
        off = measure_clock(self.t, self.opts.clock_samples)
        if isinstance(off, str):
            c = Check("?")
            c.add(WARN, f"cannot read the host's clock: {off}", "install python3 or GNU date (coreutils) on the host")
            return c
        if off.uncertainty_ms == 0 and off.offset_ms == 0:
            return Check("same clock")
        lim, o, u = self.opts.clock_warn_ms, off.offset_ms, off.uncertainty_ms
        c = Check(f"{o:+.1f}ms ±{u:.1f}")
        if abs(o) - u > lim:
            c.add(WARN, f"clock is {o:+.0f} ms off the harness's (±{u:.0f} ms): over {lim:.0f} ms", CLOCK_FIX)
        elif abs(o) + u > lim:
            c.add(WARN, f"clock offset {o:+.0f} ms cannot be told within {lim:.0f} ms "
                        f"(shortest round trip {2 * u:.0f} ms, {off.how})", CLOCK_FIX)
        return c

    # -- disk --------------------------------------------------------------------------------------------
    def disk(self) -> Check:
        if not self.existing_dirs:
            return Check("-", skipped=True)
        r = self.t.run(["df", "-Pk", "--", *self.existing_dirs], timeout=30)
        rows = [ln.split() for ln in r.stdout.splitlines()[1:] if len(ln.split()) >= 6]
        if not rows:
            c = Check("?")
            c.add(WARN, f"df said nothing useful: {short_line(r.stderr or r.stdout)}")
            return c
        avail_kb, mount = min((int(x[3]), x[5]) for x in rows if x[3].isdigit())
        c = Check(f"{gib(avail_kb)} free")
        need_kb = self.opts.min_free_gb * 1024 * 1024
        if avail_kb < need_kb:
            c.add(FAIL, f"only {gib(avail_kb)} free on {mount} (the log dirs' filesystem); a run needs "
                        f"{self.opts.min_free_gb:g}G", f"free space on {mount} (or lower --min-free-gb)")
        elif avail_kb < self.opts.warn_free_gb * 1024 * 1024:
            c.add(WARN, f"only {gib(avail_kb)} free on {mount}", f"free space on {mount}")
        return c


# -- whole inventories -----------------------------------------------------------------------------

def check_host(inv: Inventory, spec: HostSpec, opts: Options) -> HostResult:
    t = transport_for(inv, spec)
    if hasattr(t, "accept_new_host_keys"):
        t.accept_new_host_keys = False  # preflight verifies host keys; it never adds one
    try:
        return HostResult(spec.name, spec.role, HostChecks(inv, spec, t, opts).run_all())
    finally:
        t.close()


def client_issues(inv: Inventory) -> list[Issue]:
    """Can a client with the inventory's ``kafka_client`` settings talk to the cluster (TLS, SASL)?
    One ApiVersions over a real connection to the bootstrap brokers: a refused password or
    certificate is a FAIL with its fix, as every other check; nothing of the secret is printed."""
    try:
        security = inv.client.resolve()
    except ConfigError as e:
        return [Issue(FAIL, str(e), "export the variable or fix the file the inventory names")]
    why = probe(inv.bootstrap or "", security)
    if why is None:
        return []
    fix = ("check kafka_client's user, password source and CA against the cluster's listener"
           if why.startswith("authentication failed") else "check kafka_bootstrap and that the brokers run")
    return [Issue(FAIL, f"kafka_client ({security.protocol}): {why}", fix)]


def preflight(inv: Inventory, opts: Options | None = None, *, workers: int = 8,
              on_host: Callable[[HostResult], Any] | None = None) -> Report:
    """Check every host of ``inv`` (in parallel, one connection each) and the lab lock."""
    opts = opts or Options()
    rep = Report(inv.path, inv.transport, bool(inv.embedded), [])
    if inv.embedded:
        rep.notes.append(f"embedded {inv.embedded}: the cluster is generated for each run on this machine "
                         "(RUN/cluster), so there are no lab hosts to reach and no lab lock; checked: "
                         + ("the release in the cache (or Maven), a JVM, root for the nodes' network namespaces"
                            if inv.embedded == "apache-kafka" else "kraftsim starts")
                         + ", the results and state dirs, free disk, root for network faults")
        rep.hosts.append(check_embedded(inv, opts))
        return rep
    specs = list(inv.hosts.values())
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(specs)))) as pool:
        for res in pool.map(lambda s: check_host(inv, s, opts), specs):
            rep.hosts.append(res)
            if on_host:
                on_host(res)
    if inv.client.protocol != "PLAINTEXT":
        rep.target_issues += client_issues(inv)
        rep.notes.append(f"clients: {inv.client.protocol}"
                         + (f" {inv.client.mechanism} as {inv.client.username}" if inv.client.mechanism else ""))
    lock = lab_lock(inv)
    holder = lock.holder() if lock else None
    if holder is not None:
        rep.target_issues.append(Issue(WARN, f"the lab is in use by {holder.describe()}",
                                       "a run now would be refused: wait for it, or run with --wait"))
    rep.notes.append("lab lock: " + ("in use" if holder else "free"))
    return rep
