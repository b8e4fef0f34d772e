"""A real broker's produce throughput on lossyfs against a plain directory, in one run.

What it answers: what putting every node's disk on lossyfs (the embedded Apache Kafka target's
default, targets/apache_kafka.py) costs Kafka itself: acks=all writes to an RF 3 topic (min ISR
2), so every byte goes through the leader's and both followers' lossyfs mounts (one FUSE daemon
per node, each one Python thread). The goal: at least half the plain directories' rate
(``apache_kafka.lossyfs: false``). Both clusters (1 controller, 3 brokers, the same release and
settings) run side by side; the rounds alternate plain and lossyfs, so drift in the machine's
load hits both. One round: ``--messages`` values of ``--value-bytes`` bytes produced as fast as
the producer goes (idempotent, acks=all, batches of up to 256 KiB, linger 10 ms), timed from the
first produce to the last acknowledgement. Prints every round, the medians and the ratio;
asserts nothing.

    python benchmarks/real_kafka_lossyfs_throughput.py [--rounds 3] [--messages 200000]
        [--value-bytes 512] [--release 4.1.0]

Measured on the 2-core box while other work ran (load average 17-26), Apache Kafka 4.1.0:

    --messages 100000 --value-bytes 512:  plain 8.9 MB/s (17435 msg/s), lossyfs 7.1 MB/s (13961
        msg/s), medians of 3: 80 % (best 12.9 and 8.8); clusters up in 72 and 50 s
    --messages 20000 --value-bytes 8192:  plain 11.1 MB/s, lossyfs 6.2 MB/s, medians of 3: 56 %
        (best 11.9 and 7.0)
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from groundwork.ledger import Ledger  # noqa: E402
from nemeses.lossyfs import RunDisks  # noqa: E402
from targets.apache_kafka import EmbeddedApacheKafka  # noqa: E402

TOPIC = "throughput"


def produce(bootstrap: str, topic: str, messages: int, value_bytes: int) -> tuple[float, int]:
    """(seconds, acknowledged) for ``messages`` acks=all writes as fast as they go."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 10,
                  "batch.size": 262144, "queue.buffering.max.kbytes": 65536, "message.timeout.ms": 300000})
    acked = [0]

    def done(err, msg):  # noqa: ANN001
        if err is None:
            acked[0] += 1
    value = b"v" * value_bytes
    t0 = time.monotonic()
    for _ in range(messages):
        while True:
            try:
                p.produce(topic, value, on_delivery=done)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(600)
    return time.monotonic() - t0, acked[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--messages", type=int, default=200000)
    ap.add_argument("--value-bytes", type=int, default=512)
    ap.add_argument("--release", default="4.1.0")
    a = ap.parse_args()
    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}", flush=True)
    clusters: dict[str, EmbeddedApacheKafka] = {}
    with tempfile.TemporaryDirectory(prefix="lossyfs-kafka-throughput-") as d:
        try:
            for kind in ("plain", "lossyfs"):
                run = Path(d) / kind
                run.mkdir()
                ledger = Ledger(run / "ledger.jsonl")
                k = EmbeddedApacheKafka(run, version=a.release, brokers=3, controllers=1, settings={}, ledger=ledger,
                                        disks=RunDisks(ledger) if kind == "lossyfs" else None)
                clusters[kind] = k
                t0 = time.monotonic()
                k.start(timeout=600)
                print(f"{kind}: cluster up in {time.monotonic() - t0:.0f} s", flush=True)
                admin = AdminClient({"bootstrap.servers": k.bootstrap})
                admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(60)
                produce(k.bootstrap, TOPIC, 2000, a.value_bytes)   # warm-up: leaders known, JIT past its start
            rates: dict[str, list[float]] = {"plain": [], "lossyfs": []}
            for r in range(a.rounds):
                for kind in ("plain", "lossyfs"):
                    secs, acked = produce(clusters[kind].bootstrap, TOPIC, a.messages, a.value_bytes)
                    mb = acked * a.value_bytes / 1e6 / secs
                    rates[kind].append(mb)
                    print(f"round {r + 1} {kind:7s}: {acked} of {a.messages} acknowledged in {secs:.1f} s: "
                          f"{acked / secs:.0f} msg/s, {mb:.1f} MB/s of values", flush=True)
        finally:
            for k in clusters.values():
                k.stop()
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"median MB/s: plain {med['plain']:.1f}, lossyfs {med['lossyfs']:.1f}; lossyfs / plain "
          f"{100 * med['lossyfs'] / med['plain']:.0f} % (best {max(rates['plain']):.1f} and {max(rates['lossyfs']):.1f})")
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
