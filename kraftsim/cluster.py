"""``python -m kraftsim cluster``: a whole cluster on loopback, in the foreground.

Why a launcher and not threads: faults act on processes (SIGKILL, SIGSTOP, restarts, page-cache
loss after a crash), so each node is a real process with its own pid file, config file, log dir
and event log. Layout under DIR:

- ``controller.properties``, ``controller.pid``, ``controller/metadata/``, ``controller/events.jsonl``
  (controller node id 1000, listening on HOST_PREFIX.1:BASE_PORT); with ``--controllers N`` > 1,
  ``controller-<k>.*`` and ``controller-<k>/`` for k = 1..N (node ids 1000..1000+N-1, listening on
  HOST_PREFIX.(240+k):BASE_PORT), a raft quorum (``controller.quorum.voters``);
- ``broker-<id>.properties``, ``broker-<id>.pid``, ``broker-<id>/data/``, ``broker-<id>/events.jsonl``
  (broker ids 1..N on HOST_PREFIX.(1+id):BASE_PORT+id);
- ``features.json``: the kafka.version and metadata.version, the timing profile, and every Kafka
  behaviour they gate (on/off and which version decided it, or the key that overrode it), as
  ``kraftsim.features.Features.describe()`` says.

It prints exactly one line ``bootstrap.servers=...`` once every broker is registered and
unfenced, and on SIGINT/SIGTERM stops every process it started and any broker restarted by
someone else from its pid file, brokers first (their controlled shutdown needs the controller).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kraftsim import features
from kraftsim.config import KEYS, apply_settings, defaults

CONTROLLER_ID = 1000
READY_TIMEOUT_S = 30.0


def _err(msg: str) -> int:
    print(f"kraftsim: cluster: {msg}", file=sys.stderr, flush=True)
    return 2


def _props(d: dict[str, object]) -> str:
    return "".join(f"{k}={v}\n" for k, v in d.items())


def controller_names(controllers: int) -> list[str]:
    """'controller' alone (the historical layout), else 'controller-1' .. 'controller-N'."""
    return ["controller"] if controllers == 1 else [f"controller-{k}" for k in range(1, controllers + 1)]


def controller_hosts(controllers: int, prefix: str) -> list[str]:
    """One address per controller: PREFIX.1 alone, else PREFIX.241, PREFIX.242, ... so that an
    iptables rule or a relay can single out one controller (brokers are PREFIX.2 .. PREFIX.201)."""
    return [f"{prefix}.1"] if controllers == 1 else [f"{prefix}.{240 + k}" for k in range(1, controllers + 1)]


def layout(n: int, root: Path, prefix: str, base: int, overrides: dict[str, str],
           controllers: int = 1) -> dict[str, dict]:
    """The config of every node, by name ('controller' or 'controller-1', ..., 'broker-1', ...).

    With several controllers they form a raft quorum (``controller.quorum.voters``, Kafka's
    ``id@host:port`` list; node ids 1000, 1001, ...); brokers get every controller in
    ``controller.quorum.bootstrap.servers`` and the voters, to map a leader id to its address.
    """
    names = controller_names(controllers)
    hosts = controller_hosts(controllers, prefix)
    ids = [CONTROLLER_ID + k for k in range(controllers)]
    voters = ",".join(f"{i}@{h}:{base}" for i, h in zip(ids, hosts))
    nodes: dict[str, dict] = {}
    for name, host, nid in zip(names, hosts, ids):
        nodes[name] = {
            "node.id": nid, "process.roles": "controller", "listeners": f"CONTROLLER://{host}:{base}",
            "metadata.log.dir": root / name / "metadata", "event.log": root / name / "events.jsonl",
            "pid.file": root / f"{name}.pid",
        }
        if controllers > 1:
            nodes[name]["controller.quorum.voters"] = voters
    bootstrap = ",".join(f"{h}:{base}" for h in hosts)
    for i in range(1, n + 1):
        nodes[f"broker-{i}"] = {
            "node.id": i, "process.roles": "broker", "listeners": f"PLAINTEXT://{prefix}.{1 + i}:{base + i}",
            "controller.quorum.bootstrap.servers": bootstrap, "log.dirs": root / f"broker-{i}" / "data",
            "event.log": root / f"broker-{i}" / "events.jsonl", "pid.file": root / f"broker-{i}.pid",
            # KIP-405's remote tier: one directory for every broker (object storage stand-in)
            "remote.log.storage.dir": root / "remote-storage",
        }
        if controllers > 1:
            nodes[f"broker-{i}"]["controller.quorum.voters"] = voters
    for cfg in nodes.values():
        cfg.update(overrides)
    return nodes


def features_in_force(overrides: dict[str, str]) -> dict[str, object]:
    """features.describe() for the cluster's settings (every node gets the same --set values): the
    brokers' record; with ``controller.kafka.version`` (controllers on other software, a rolling
    upgrade) also that version and the controllers' gates under ``controller``."""
    values = defaults()
    apply_settings(values, overrides)
    out = features.derive(values).describe()
    if values.get(features.CONTROLLER_KAFKA_VERSION) is not None:
        ctl = features.derive(values, role="controller").describe()
        out[features.CONTROLLER_KAFKA_VERSION] = ctl["kafka.version"]
        out["controller"] = {"kafka.version": ctl["kafka.version"], "gates": ctl["gates"]}
    return out


def _pid_of(path: Path, root: Path) -> int | None:
    """The pid in a pid file, only if that process is a kraftsim process of this cluster."""
    try:
        pid = int(path.read_text().strip())
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, ValueError):
        return None
    if "kraftsim" not in cmd:
        return None
    try:  # pids are reused: it must be a process of THIS cluster (config path or working dir)
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        cwd = None
    if str(root) not in cmd and cwd != root:
        return None
    return pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie child counts as gone
        st = Path(f"/proc/{pid}/stat").read_text()
        return st.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _stop(pids: list[int], children: dict[int, subprocess.Popen], grace: float) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    end = time.monotonic() + grace
    while time.monotonic() < end:
        for p in children.values():
            p.poll()
        if not any(_alive(p) for p in pids):
            break
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    for pid in pids:  # reap only the processes stopped here: the controllers still run while
        p = children.get(pid)  # the brokers stop, and waiting on them cost 2 s each
        if p is None:
            continue
        try:
            p.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass


def run_cluster(args) -> int:  # noqa: ANN001 - argparse namespace
    n = int(args.brokers)
    if not 1 <= n <= 200:
        return _err("--brokers: a number from 1 to 200 is wanted")
    nc = int(getattr(args, "controllers", 1))
    if not 1 <= nc <= 9:
        return _err("--controllers: a number from 1 to 9 is wanted")
    parts = args.host_prefix.split(".")
    if len(parts) != 3 or not all(p.isdigit() and int(p) < 256 for p in parts):
        return _err("--host-prefix: three octets like 127.0.0 are wanted")
    if not 1024 <= args.base_port <= 65535 - n:
        return _err("--base-port: a port from 1024 to 65535-brokers is wanted")
    overrides: dict[str, str] = {}
    for s in args.set:
        key, sep, value = s.partition("=")
        if not sep or key not in KEYS:
            return _err(f"--set {s!r}: key=value with a known kraftsim key is wanted")
        try:
            KEYS[key][0](value)
        except ValueError as e:
            return _err(f"--set: key '{key}': {e}")
        overrides[key] = value
    try:  # the timing profile and kafka.version against metadata.version: one line, exit 2
        features_in_force(overrides)
    except ValueError as e:
        return _err(f"--set: key '{e.args[1] if len(e.args) > 1 else 'kafka.version'}': {e.args[0]}")
    if getattr(args, "check", False):  # `faultline campaign check`: everything a start refuses, nothing started
        print(json.dumps(features_in_force(overrides), separators=(",", ":")), flush=True)
        return 0
    root = Path(args.dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    nodes = layout(n, root, args.host_prefix, args.base_port, overrides, controllers=nc)
    ctl_names = controller_names(nc)
    for name, cfg in nodes.items():
        (root / f"{name}.properties").write_text(_props(cfg))
        (root / name).mkdir(parents=True, exist_ok=True)
    # what was in force (metadata.version gates and overrides): a run's verdict must not depend on
    # a guess about the target; the controller also emits it as its first ``features`` event
    (root / "features.json").write_text(json.dumps(features_in_force(overrides), indent=2) + "\n")

    env = dict(os.environ)
    pkg_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    children: dict[int, subprocess.Popen] = {}
    stop_flag = {"stop": False}

    def on_signal(signum, frame):  # noqa: ANN001
        stop_flag["stop"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def start(name: str) -> subprocess.Popen:
        role = "controller" if name.startswith("controller") else "broker"
        out = open(root / name / "process.log", "ab")
        p = subprocess.Popen([sys.executable, "-m", "kraftsim", role, "--config", str(root / f"{name}.properties")],
                             stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                             start_new_session=True, cwd=str(root))
        out.close()
        children[p.pid] = p
        return p

    # brokers are unfenced by whichever controller is active: follow every controller's events
    ctl_events = {name: root / name / "events.jsonl" for name in ctl_names}
    pos = {name: (f.stat().st_size if f.exists() else 0) for name, f in ctl_events.items()}
    bufs = {name: b"" for name in ctl_names}
    ctls = {name: start(name) for name in ctl_names}
    brokers = {i: start(f"broker-{i}") for i in range(1, n + 1)}
    unfenced: set[int] = set()
    deadline = time.monotonic() + READY_TIMEOUT_S
    failure = None
    while len(unfenced) < n:
        if stop_flag["stop"]:
            failure = "interrupted before the cluster was ready"
            break
        if time.monotonic() > deadline:
            failure = f"not ready after {READY_TIMEOUT_S:.0f}s (unfenced brokers: {sorted(unfenced)}); see {root}/*/process.log"
            break
        for name, p in [*ctls.items(), *[(f"broker-{i}", b) for i, b in brokers.items()]]:
            if p.poll() is not None:
                tail = (root / name / "process.log").read_text(errors="replace").strip().splitlines()[-1:] or ["?"]
                failure = f"{name} exited with code {p.returncode}: {tail[0]}"
        if failure:
            break
        for name, f in ctl_events.items():
            if not f.exists():
                continue
            with open(f, "rb") as fh:
                fh.seek(pos[name])
                chunk = fh.read()
            pos[name] += len(chunk)
            *lines, bufs[name] = (bufs[name] + chunk).split(b"\n")
            for line in lines:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("event") == "broker_unfenced":
                    unfenced.add(int(e["broker"]))
        time.sleep(0.05)
    if failure is None:
        servers = ",".join(f"{args.host_prefix}.{1 + i}:{args.base_port + i}" for i in range(1, n + 1))
        print(f"bootstrap.servers={servers}", flush=True)
        while not stop_flag["stop"]:
            time.sleep(0.1)
            for p in list(children.values()):
                p.poll()
    # stop brokers first (controlled shutdown needs the controller), then the controller
    bpids = set(p.pid for p in brokers.values())
    for i in range(1, n + 1):
        pid = _pid_of(root / f"broker-{i}.pid", root)
        if pid:
            bpids.add(pid)
    _stop([p for p in bpids if _alive(p)], children, grace=8.0)
    cpids = {p.pid for p in ctls.values()}
    for name in ctl_names:
        pid = _pid_of(root / f"{name}.pid", root)
        if pid:
            cpids.add(pid)
    _stop([p for p in cpids if _alive(p)], children, grace=5.0)
    if failure:
        return _err(failure) if "exited" not in failure else (print(f"kraftsim: cluster: {failure}", file=sys.stderr, flush=True) or 1)
    return 0
