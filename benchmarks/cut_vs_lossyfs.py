"""The truncate-unflushed cut checked against the truth: real Kafka brokers crashed under load on
lossyfs, the cut's dry run against the same files just before each crash.

What it answers: whether ``reboot mode: truncate-unflushed`` - the page-cache loss faultline
reconstructs from Kafka's flush model (nemeses/scripts/truncate_unflushed.py) wherever the disk
cannot say what was fsynced - ever removes a byte Kafka had fsynced (it must not: the loss would
be blamed on Kafka), how much it leaves that a real power loss takes, and how much of each file
its uncertain ranges cover. The truth is lossyfs's: every node's disk of the embedded Apache
Kafka target is a lossyfs mount, and ``reboot mode: lossyfs, compare_cut: true`` SIGKILLs the
broker, runs the cut as a dry run (the broker's flush settings read from its command line before
the kill, as that mode does), then crashes the mount, which keeps exactly what Kafka fsynced
(nemeses.reboot.compare_cut sets the two side by side, segment file by segment file).

One cluster per phase (1 controller, 3 brokers; topic ``load``: 3 partitions, RF 3, min ISR 2,
``segment.ms`` 3 s so segments roll - each roll's asynchronous ``flush-log``, UnifiedLog.roll,
is the cut's main rule - and ``retention.ms`` a minute, so old ones are deleted as the crashes go): ``default`` (Kafka's flush settings: nothing but rolls and the metadata
log's own flushes) and ``flush-messages`` (broker ``log.flush.interval.messages``: UnifiedLog.append
flushes, on the leader after each produce's one batch, on followers after each fetch's batches).
A producer (acks=all) writes all along; the brokers are crashed in turn, each once every broker is
back in every ISR, after a seeded pause. Prints one line per crash and the totals; asserts nothing.

    python benchmarks/cut_vs_lossyfs.py [--crashes 12] [--release 4.1.0] [--flush-messages 50]
        [--phases default,flush-messages] [--seed 1]
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from groundwork.clock import RunClock  # noqa: E402
from groundwork.ledger import Ledger  # noqa: E402
from groundwork.timeline import Timeline  # noqa: E402
from harness.cluster import Cluster  # noqa: E402
from harness.inventory import load_inventory  # noqa: E402
from nemeses.base import NemesisContext  # noqa: E402
from nemeses.lossyfs import RunDisks  # noqa: E402
from nemeses.reboot import Reboot  # noqa: E402
from targets.apache_kafka import EmbeddedApacheKafka  # noqa: E402

TOPIC = "load"


class Load(threading.Thread):
    """acks=all writes at ``rate`` a second until stopped; counts what was acknowledged."""

    def __init__(self, bootstrap: str, rate: int):
        super().__init__(daemon=True)
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                           "enable.idempotence": True, "message.timeout.ms": 120000,
                           "log_level": 2})   # the crashes' refused connects are expected: not logged
        self.rate, self.acked, self.stop = rate, 0, threading.Event()

    def _done(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked += 1

    def run(self) -> None:
        value, n, t0 = b"x" * 200, 0, time.monotonic()
        while not self.stop.is_set():
            try:
                self.p.produce(TOPIC, value, on_delivery=self._done)
                n += 1
            except BufferError:
                pass
            self.p.poll(0)
            ahead = n / self.rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(min(ahead, 0.05))
        self.p.flush(30)


def full_isr(admin: AdminClient, replicas: int, timeout: float) -> bool:
    """Every broker registered and unfenced (the Metadata response lists it: a restarted broker
    only once it has loaded its logs) and in every ISR."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(TOPIC, timeout=5)
            t = md.topics[TOPIC]
            if len(md.brokers) == replicas and t.partitions and all(len(p.isrs) == replicas
                                                                    for p in t.partitions.values()):
                return True
        except Exception:  # noqa: BLE001 - a broker restarting
            pass
        time.sleep(1)
    return False


def phase(name: str, release: str, crashes: int, settings: dict[str, Any], seed: int, rate: int) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix=f"cut-vs-lossyfs-{name}-") as d:
        ledger = Ledger(Path(d) / "ledger.jsonl")
        k = EmbeddedApacheKafka(Path(d), version=release, brokers=3, controllers=1, settings=settings, ledger=ledger,
                                disks=RunDisks(ledger), say=lambda s: print(f"  {s}", flush=True))
        load = None
        try:
            k.start(timeout=600)
            inv = k.write_inventory()
            cluster = Cluster.from_inventory(load_inventory(inv))
            admin = AdminClient({"bootstrap.servers": k.bootstrap})
            # segments roll every 3 s and go after a minute: the log stays a few dozen segments long
            fut = admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2", "segment.ms": "3000",
                                                                     "retention.ms": "60000"})])
            fut[TOPIC].result(60)
            load = Load(k.bootstrap, rate)
            load.start()
            ctx = NemesisContext(nodes=dict(cluster.nodes), timeline=Timeline(Path(d) / "timeline.jsonl", RunClock()),
                                 ledger=ledger, rng=random.Random(seed), inventory_path=str(inv), settings={})
            nem = Reboot()
            nem.setup(ctx)
            rng = random.Random(seed)
            brokers = sorted(n for n in cluster.nodes if n.startswith("broker-"))
            for i in range(crashes):
                if not full_isr(admin, 3, 300):
                    print(f"  {name}: the ISRs did not fill within 300 s; crashing anyway", flush=True)
                time.sleep(rng.uniform(2, 8))
                target = brokers[i % len(brokers)]
                acked = load.acked
                rec = nem.start([target], mode="lossyfs", compare_cut=True, seed=rng.randrange(2**31))
                nem.stop(rec)
                cmp = rec.undo["detail"][target]["cut_compared"]
                rows.append({"phase": name, "n": i + 1, "broker": target, "acked": acked, **cmp})
                print(f"  {name} crash {i + 1:2d} {target}: {cmp['segments']} segments; cut removes {cmp['cut_removed']} B, "
                      f"lossyfs drops {cmp['lossyfs_dropped']} B; cut removed what lossyfs kept: "
                      f"{cmp['cut_removed_kept']} B; cut kept what lossyfs dropped: {cmp['cut_kept_dropped']} B", flush=True)
                for r in cmp["touched"]:
                    if r["cut_keeps"] != r["lossyfs_keeps"]:
                        print(f"      {r['topic']}-{r['partition']}/{r['segment']}: size {r['size']}, cut keeps "
                              f"{r['cut_keeps']}, lossyfs keeps {r['lossyfs_keeps']}"
                              + (f", uncertain {r['uncertain_bytes']}" if "uncertain_bytes" in r else ""), flush=True)
        finally:
            if load is not None:
                load.stop.set()
                load.join(60)
            k.stop()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crashes", type=int, default=12, help="crashes per phase")
    ap.add_argument("--release", default="4.1.0")
    ap.add_argument("--flush-messages", type=int, default=50)
    ap.add_argument("--phases", default="default,flush-messages")
    ap.add_argument("--rate", type=int, default=300, help="acks=all writes a second")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}", flush=True)
    t0 = time.monotonic()
    rows: list[dict[str, Any]] = []
    for name in a.phases.split(","):
        settings: dict[str, Any] = {"log.retention.check.interval.ms": 10000}
        if name == "flush-messages":
            settings["log.flush.interval.messages"] = a.flush_messages
        print(f"phase {name} (Apache Kafka {a.release}, {settings}):", flush=True)
        rows += phase(name, a.release, a.crashes, settings, a.seed, a.rate)
    shares = [s for r in rows for s in r["uncertain_share"]]
    print(f"crashes: {len(rows)} in {time.monotonic() - t0:.0f} s; segment files compared: "
          f"{sum(r['segments'] for r in rows)}")
    print(f"bytes the cut removed that lossyfs kept: {sum(r['cut_removed_kept'] for r in rows)} "
          f"(crashes with any: {sum(1 for r in rows if r['cut_removed_kept'])})")
    print(f"bytes the cut kept that lossyfs dropped: {sum(r['cut_kept_dropped'] for r in rows)} "
          f"(crashes with any: {sum(1 for r in rows if r['cut_kept_dropped'])}; outside the cut's uncertain ranges: "
          f"{sum(r['cut_kept_dropped_unflagged'] for r in rows)}); cut removed "
          f"{sum(r['cut_removed'] for r in rows)} B in all, lossyfs dropped {sum(r['lossyfs_dropped'] for r in rows)} B")
    if shares:
        print(f"files with an uncertain range: {len(shares)}; share of the file it covered: median "
              f"{statistics.median(shares):.3f}, min {min(shares):.3f}, max {max(shares):.3f}")
    for name in a.phases.split(","):
        ph = [r for r in rows if r["phase"] == name]
        s = [x for r in ph for x in r["uncertain_share"]]
        print(f"  {name}: {len(ph)} crashes, removed-kept {sum(r['cut_removed_kept'] for r in ph)} B, kept-dropped "
              f"{sum(r['cut_kept_dropped'] for r in ph)} B, uncertain share median "
              f"{statistics.median(s) if s else 0:.3f} over {len(s)} files")
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
