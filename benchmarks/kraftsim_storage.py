"""kraftsim storage figures: leader appends/s (records and batches), reads, recovery scan speed.

Why: the broker must sustain ≥ 20,000 acknowledged writes/s; storage is on that path three
times per write (leader append, follower read, follower append). Prints figures, asserts nothing.

    python benchmarks/kraftsim_storage.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from kraftsim.storage.log import PartitionLog
from kraftsim.storage.records import encode_batch, iter_batches


def bench_append(d: Path, records_per_batch: int, seconds: float) -> tuple[float, float, PartitionLog]:
    log = PartitionLog.open(d, "bench", 0, recovery_point=0, clean=True, segment_bytes=16 * 1024 * 1024)
    batch = encode_batch([(None, b"x" * 100, []) for _ in range(records_per_batch)], timestamp_ms=1)
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(100):
            log.append_as_leader(batch, 1)
        n += 100
    dt = time.perf_counter() - t0
    return n / dt, n * records_per_batch / dt, log


def bench_read(log: PartitionLog, seconds: float) -> float:
    """Follower-style sequential fetch: read 1 MiB from the fetch offset, advance past it."""
    total = 0
    off = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        if off >= log.log_end_offset:
            off = 0
        data = log.read(off, 1024 * 1024)
        total += len(data)
        last = off
        for h in iter_batches(data, check_crc=False):
            last = h.last_offset
        off = last + 1
    return total / (time.perf_counter() - t0) / 1e6


def bench_follower_append(src: PartitionLog, d: Path, seconds: float) -> float:
    dst = PartitionLog.open(d, "bench", 0, recovery_point=0, clean=True, segment_bytes=16 * 1024 * 1024)
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds and dst.log_end_offset < src.log_end_offset:
        data = src.read(dst.log_end_offset, 1024 * 1024)
        dst.append_as_follower(data)
        n = dst.log_end_offset
    return n / (time.perf_counter() - t0)


def bench_recovery(log: PartitionLog, d: Path) -> tuple[float, int]:
    log.close(clean=False)
    size = log.size_bytes
    t0 = time.perf_counter()
    again = PartitionLog.open(d, "bench", 0, recovery_point=0, clean=False, segment_bytes=16 * 1024 * 1024)
    dt = time.perf_counter() - t0
    again.close(clean=False)
    return size / dt / 1e6, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rpb in (1, 10, 100):
            bps, rps, log = bench_append(root / f"lead-{rpb}", rpb, a.seconds)
            print(f"leader append, {rpb:>3} x 100-byte records/batch: {bps:10,.0f} batches/s {rps:12,.0f} records/s")
            if rpb == 10:
                print(f"sequential read (1 MiB fetches):                {bench_read(log, a.seconds):10,.0f} MB/s")
                fps = bench_follower_append(log, root / "follow", a.seconds)
                print(f"follower fetch+append:                           {fps:10,.0f} records/s")
                mbps, size = bench_recovery(log, root / f"lead-{rpb}")
                print(f"unclean recovery scan (CRC32C) of {size / 1e6:.0f} MB:         {mbps:10,.0f} MB/s")
            log.close(clean=False)


if __name__ == "__main__":
    main()
