#!/usr/bin/env python3
"""Cut a stopped Kafka broker's logs back to what a power loss would have left on disk.

Runs ON the Kafka host, stdlib only (shipped with ``python3 -`` through the transport),
against Kafka's real on-disk formats, so it does the same to Apache Kafka and to kraftsim:

- ``<log.dir>/recovery-point-offset-checkpoint``: ``0`` (version), entry count, then
  ``<topic> <partition> <offset>`` lines. The recovery point is the offset below which the
  log is known flushed (Kafka advances it only on flush; ``log.flush.interval.messages``).
- ``<log.dir>/<topic>-<partition>/<20-digit base offset>.log``: record batches, magic v2,
  each starting ``baseOffset int64, batchLength int32`` (the batch is 12 + batchLength
  bytes), ``lastOffsetDelta int32`` at byte 23.

Why this is a page-cache loss (seed 000's opening paragraph; seed 003's Last Replica
Standing): what the broker wrote but did not fsync lived only in the page cache; a crash
loses it. With ``--cut recovery-point`` every batch holding an offset >= the recovery point
is cut; with ``--cut random`` a seeded random byte between that position and the log end
(a torn tail, which Kafka's recovery then truncates at the first incomplete batch).
Segments wholly past the cut are deleted, index files (``.index``, ``.timeindex``,
``.txnindex``) of the partition are removed so they are rebuilt, producer snapshots past
the cut are deleted, and the clean-shutdown marker is removed so the broker runs recovery.

Prints one JSON object: {"partitions": [...], "markers_removed": [...]}; exit 2 with one
line on bad input (missing log dir, unreadable checkpoint).
"""
import argparse
import json
import os
import random
import re
import struct
import sys

SEGMENT = re.compile(r"^(\d{20})\.log$")
PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
CLEAN_MARKERS = (".kafka_cleanshutdown", "cleanshutdown", ".clean-shutdown")


def fail(msg):
    print(f"truncate-unflushed: {msg}", file=sys.stderr)
    sys.exit(2)


def read_checkpoint(path):
    """{(topic, partition): offset} from a Kafka offset checkpoint file."""
    if not os.path.exists(path):
        return {}
    with open(path) as fh:
        lines = [l.strip() for l in fh if l.strip()]
    try:
        version, count = int(lines[0]), int(lines[1])
        out = {}
        for l in lines[2:2 + count]:
            topic, part, off = l.rsplit(" ", 2)
            out[(topic, int(part))] = int(off)
    except (ValueError, IndexError):
        fail(f"{path}: not a Kafka offset checkpoint (want version, count, 'topic partition offset' lines)")
    if version != 0:
        fail(f"{path}: checkpoint version {version}, want 0")
    return out


def batches(path):
    """(start byte, end byte, base offset, last offset) of each complete batch in a segment."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        pos = 0
        while pos + 27 <= size:
            fh.seek(pos)
            head = fh.read(27)
            base, length = struct.unpack(">qi", head[:12])
            last_delta = struct.unpack(">i", head[23:27])[0]
            end = pos + 12 + length
            if length < 15 or end > size:
                break
            yield pos, end, base, base + last_delta
            pos = end


def plan_partition(pdir, recovery_point, cut_mode, rng):
    segs = sorted((int(m.group(1)), n) for n in os.listdir(pdir) if (m := SEGMENT.match(n)))
    # byte ranges that were not flushed: [(segment path, from byte, to byte)]
    unflushed, leo, keep_end = [], None, {}
    for base, name in segs:
        path = os.path.join(pdir, name)
        size = os.path.getsize(path)
        cut_at = size
        for start, end, b, last in batches(path):
            leo = last + 1
            if last >= recovery_point and cut_at == size:
                cut_at = start
        if base >= recovery_point:
            cut_at = 0
        keep_end[path] = cut_at
        if cut_at < size:
            unflushed.append((path, cut_at, size))
    if cut_mode == "random" and unflushed:
        # a torn tail: keep a seeded random number of the unflushed bytes, in log order
        pick = rng.randrange(sum(e - s for _, s, e in unflushed) + 1)
        for path, s, e in unflushed:
            if pick <= e - s:
                keep_end[path] = s + pick
                break
            keep_end[path] = e
            pick -= e - s
    return segs, keep_end, leo


def apply(pdir, topic, part, recovery_point, cut_mode, rng, dry_run):
    segs, keep_end, leo_before = plan_partition(pdir, recovery_point, cut_mode, rng)
    report = {"dir": pdir, "topic": topic, "partition": part, "recovery_point": recovery_point,
              "log_end_offset_before": leo_before, "truncated_bytes": 0, "deleted_segments": [],
              "truncated_segments": [], "deleted_files": []}
    first_lost, kept_leo = None, None
    for base, name in segs:
        path = os.path.join(pdir, name)
        size, end = os.path.getsize(path), keep_end[path]
        for start, bend, b, last in batches(path):
            if bend <= end:
                kept_leo = last + 1
            elif first_lost is None:
                first_lost = b
        if end >= size:
            continue
        report["truncated_bytes"] += size - end
        if end == 0 and base > 0:
            report["deleted_segments"].append(name)
            if not dry_run:
                os.remove(path)
        else:
            report["truncated_segments"].append({"segment": name, "from_bytes": size, "to_bytes": end})
            if not dry_run:
                with open(path, "r+b") as fh:
                    fh.truncate(end)
    cut_offset = kept_leo if kept_leo is not None else (segs[0][0] if segs else 0)
    for n in sorted(os.listdir(pdir)):
        stem, _, ext = n.rpartition(".")
        if ext in ("index", "timeindex", "txnindex") or \
                (ext == "snapshot" and stem.isdigit() and int(stem) > cut_offset):
            report["deleted_files"].append(n)
            if not dry_run:
                os.remove(os.path.join(pdir, n))
    report["first_lost_offset"] = first_lost
    report["expected_log_end_offset"] = cut_offset   # what Kafka's recovery will find
    return report


def main():
    ap = argparse.ArgumentParser(description="page-cache-loss cut of a stopped Kafka broker's logs")
    ap.add_argument("--log-dir", action="append", required=True, help="a log.dirs entry (repeatable)")
    ap.add_argument("--cut", choices=["recovery-point", "random"], default="recovery-point")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--clean-marker", action="append", default=[],
                    help="extra clean-shutdown marker file names to remove")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    out = {"partitions": [], "markers_removed": []}
    for d in a.log_dir:
        if not os.path.isdir(d):
            fail(f"log dir {d} does not exist (check log.dirs in the broker's config)")
        rp = read_checkpoint(os.path.join(d, "recovery-point-offset-checkpoint"))
        for n in sorted(os.listdir(d)):
            pdir = os.path.join(d, n)
            m = PARTITION_DIR.match(n)
            if not m or not os.path.isdir(pdir) or n.endswith("-delete"):
                continue
            topic, part = m.group(1), int(m.group(2))
            if not any(SEGMENT.match(f) for f in os.listdir(pdir)):
                continue
            # no checkpoint entry: nothing of this partition was ever known flushed
            out["partitions"].append(apply(pdir, topic, part, rp.get((topic, part), 0), a.cut, rng, a.dry_run))
        for marker in list(CLEAN_MARKERS) + a.clean_marker:
            p = os.path.join(d, marker)
            if os.path.exists(p):
                out["markers_removed"].append(p)
                if not a.dry_run:
                    os.remove(p)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
