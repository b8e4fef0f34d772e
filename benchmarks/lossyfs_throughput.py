"""lossyfs throughput: Kafka-like appends on lossyfs against a plain directory, in one run.

Why: a broker's log dirs on lossyfs must not slow Kafka so much that the cluster behaves
differently (timeouts, ISR shrinks) - the goal for real Kafka is at least half the plain
directory's append rate. Kafka appends record batches to the active segment and fsyncs on roll
and by ``log.flush.interval.*`` (UnifiedLog.append, LocalLog.flush); this writer appends
``--write-kib`` writes to segment files, fsyncs every ``--fsync-mb``, rolls a new segment every
``--segment-mb`` (with a directory fsync, as LocalLog.flush does for new segments), and also
times reading everything back. Plain and lossyfs alternate ``--rounds`` times; the best and the
median of each are printed, with the ratio. Figures only, never asserted.

    python benchmarks/lossyfs_throughput.py [--total-mb 256] [--write-kib 16] [--fsync-mb 4]
        [--segment-mb 64] [--rounds 3] [--dir /tmp]

Measured on the 2-core box while other work ran (load average 15-19, so the figures swing):

    256 MB in 16 KiB writes, fsync every 4 MB, segments of 64 MB, 3 rounds; load average 14.8
                 append MB/s (best, median)     read MB/s (best, median)
    plain                 184           156           2272          2088
    lossyfs               151            86            309           252
    lossyfs / plain, append (medians): 55%
    lossyfs / plain, read (medians): 12%

(64 MB x 3 in another run: 45 %. With libfuse's worker threads instead of lossyfs's one FUSE
thread, appends ran at 26 MB/s against 75: the threads only fought for the GIL.)
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def append_run(d: Path, total: int, write: int, fsync_every: int, segment: int) -> float:
    """Seconds to append ``total`` bytes as Kafka would; the files are left for the read."""
    buf = os.urandom(write)
    t0 = time.perf_counter()
    written, since_sync, seg_no, seg_fd, seg_bytes = 0, 0, 0, -1, segment
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while written < total:
            if seg_bytes >= segment:
                if seg_fd >= 0:
                    os.fsync(seg_fd)
                    os.close(seg_fd)
                seg_fd = os.open(d / f"{seg_no * segment:020d}.log", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
                os.fsync(dfd)
                seg_no, seg_bytes = seg_no + 1, 0
            os.write(seg_fd, buf)
            written += write
            seg_bytes += write
            since_sync += write
            if since_sync >= fsync_every:
                os.fsync(seg_fd)
                since_sync = 0
        os.fsync(seg_fd)
        os.close(seg_fd)
    finally:
        os.close(dfd)
    return time.perf_counter() - t0


def read_run(d: Path, chunk: int = 1 << 20) -> float:
    t0 = time.perf_counter()
    for p in sorted(d.iterdir()):
        with open(p, "rb", buffering=0) as fh:
            while fh.read(chunk):
                pass
    return time.perf_counter() - t0


def mount(tmp: Path) -> tuple[Path, int]:
    backing, mnt = tmp / "backing", tmp / "mnt"
    backing.mkdir()
    mnt.mkdir()
    r = subprocess.run([sys.executable, "-m", "lossyfs", "mount", str(backing), str(mnt), "--control",
                        str(tmp / "ctl.sock")], capture_output=True, text=True, cwd=REPO, timeout=60)
    if r.returncode:
        sys.exit(f"lossyfs mount failed: {r.stderr.strip()}")
    return mnt, int(r.stdout.strip())


def unmount(mnt: Path) -> None:
    subprocess.run([sys.executable, "-m", "lossyfs", "unmount", str(mnt)], capture_output=True, cwd=REPO, timeout=60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--total-mb", type=int, default=256)
    ap.add_argument("--write-kib", type=int, default=16)
    ap.add_argument("--fsync-mb", type=float, default=4)
    ap.add_argument("--segment-mb", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    a = ap.parse_args()
    total, write = a.total_mb << 20, a.write_kib << 10
    fsync_every, segment = int(a.fsync_mb * (1 << 20)), a.segment_mb << 20
    tmp = Path(tempfile.mkdtemp(prefix="lossyfs-bench-", dir=a.dir))
    mnt, _pid = mount(tmp)
    plain = tmp / "plain"
    res: dict[str, dict[str, list[float]]] = {k: {"append": [], "read": []} for k in ("plain", "lossyfs")}
    try:
        for _ in range(a.rounds):
            for name, root in (("plain", plain), ("lossyfs", mnt / "data")):
                root.mkdir()
                res[name]["append"].append(a.total_mb / append_run(root, total, write, fsync_every, segment))
                res[name]["read"].append(a.total_mb / read_run(root))
                shutil.rmtree(root)
    finally:
        unmount(mnt)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{a.total_mb} MB in {a.write_kib} KiB writes, fsync every {a.fsync_mb:g} MB, "
          f"segments of {a.segment_mb} MB, {a.rounds} rounds; load average {os.getloadavg()[0]:.1f}")
    print(f"{'':10} {'append MB/s (best, median)':>28} {'read MB/s (best, median)':>28}")
    for name in ("plain", "lossyfs"):
        ap_, rd = res[name]["append"], res[name]["read"]
        print(f"{name:10} {max(ap_):>14.0f} {statistics.median(ap_):>13.0f} "
              f"{max(rd):>14.0f} {statistics.median(rd):>13.0f}")
    for kind in ("append", "read"):
        ratio = statistics.median(res["lossyfs"][kind]) / statistics.median(res["plain"][kind])
        print(f"lossyfs / plain, {kind} (medians): {ratio:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
