#!/usr/bin/env python3
"""Cut a stopped Kafka node's logs back to what a power loss would have left on disk.

Runs ON the Kafka host, stdlib only (shipped with ``python3 -`` through the transport),
against Kafka's real on-disk formats:

- ``<log.dir>/recovery-point-offset-checkpoint``: ``0`` (version), entry count, then
  ``<topic> <partition> <offset>`` lines: the offset below which each log was flushed when
  the file was last written.
- ``<log.dir>/<topic>-<partition>/<20-digit base offset>.log``: record batches, magic v2,
  each starting ``baseOffset int64, batchLength int32`` (the batch is 12 + batchLength
  bytes), ``lastOffsetDelta int32`` at byte 23.

Why this is a page-cache loss (docs/seeds.md#seed-000's opening paragraph; docs/seeds.md#seed-003's Last Replica
Standing): what the broker wrote but did not fsync lived only in the page cache; a crash
loses it. The cut must never remove what Kafka had fsynced, or a red run would blame Kafka
for a loss a real power cut could not cause. Where that point lies depends on who wrote the
log (``--flush-model``):

``checkpoint`` (kraftsim): kraftsim rewrites the checkpoint right after every flush and
truncation (kraftsim/storage/manager.py), so the checkpoint *is* the durable point: exact.

``kafka`` (Apache Kafka): the checkpoint is only a floor. Kafka writes it every
``log.flush.offset.checkpoint.interval.ms`` (60 s; LogManager ``kafka-recovery-point-checkpoint``
task → checkpointLogRecoveryOffsets) and after truncations, but fsyncs far more often:

- at every segment roll: ``UnifiedLog.roll`` schedules ``flush-log`` →
  ``flushUptoOffsetExclusive(newSegment.baseOffset)`` (3.4 ``scheduler.schedule``, 3.5+
  ``scheduleOnce``; 3.7+ also fsyncs the roll's producer snapshot there). So every segment
  but the newest is durable. The task is asynchronous: had the crash come right after the
  roll, the previous segment may still have been in the page cache (kept, reported uncertain);
- every ``log.flush.interval.messages`` offsets: ``UnifiedLog.append`` → ``flush(false)`` when
  ``localLog.unflushedMessages >= config.flushInterval`` (synchronously, leader and follower
  appends alike). A leader's append is one batch (ProduceRequest.validateRecords), a follower's
  every batch of one fetch (UnifiedLog.appendAsFollower), and which batches one append carried is
  not on disk: the cut keeps up to the highest point a flush may have reached (max_flush_point),
  the range from one interval below the log end is uncertain (kept);
- ``log.flush.interval.ms``: LogManager's ``kafka-log-flusher`` (``flushDirtyLogs``, first after
  ``log.initial.task.delay.ms``, then every ``log.flush.scheduler.interval.ms``) flushes a log
  last flushed that long ago. When it last ran is not on disk: every cut byte is uncertain;
- the KRaft metadata log (``__cluster_metadata-0``, not owned by LogManager, so never in the
  checkpoint; KafkaMetadataLog.apply opens it with ``recoveryPoint = 0``): a controller flushes
  it after every append (KafkaRaftClient.flushLeaderLog as leader; appendAsFollower as voter,
  and from 3.9 on every node with the controller role, KAFKA-17332). It is kept whole; the
  last batch (the append in flight) is reported uncertain. A broker (an observer) flushes it
  after every fetch in 3.4 only (3.5-3.8: voters only, KAFKA-13884): cut at its newest
  segment, the rest uncertain.

Where the durable point is not known exactly the report says so per partition: ``uncertain``
``cut`` = offsets cut that Kafka may have fsynced (a loss only there may be the cut's, not
Kafka's), ``kept`` = offsets kept that Kafka may not have fsynced.

With ``--cut durable`` (``recovery-point`` is its old name) every batch from the durable point
on is cut; with ``--cut random`` a seeded random byte between there and the log end (a torn
tail, which Kafka's recovery truncates at the first incomplete batch). Segments wholly past the
cut are deleted, index files (``.index``, ``.timeindex``, ``.txnindex``) of the partition are
removed so they are rebuilt, producer snapshots past the cut are deleted, and the clean-shutdown
marker is removed so the node runs recovery.

Checkpoint files written without fsync. Kafka 3.7.0-3.7.x writes a partition's
``leader-epoch-checkpoint`` on a truncation (LeaderEpochFileCache.truncateFromEnd /
truncateFromStart, ``writeToFile(false)``) as ``CheckpointFile.write(entries, false)`` does: a
temp file, no fsync, a rename, no directory fsync. A power loss before the kernel wrote the
dirty pages back (``vm.dirty_expire_centisecs``, 30 s by default) may leave any of:

- ``old``: the rename never reached the disk; the previous, durable file;
- ``new``: the kernel wrote everything back in time;
- ``empty``: the rename (and a zero size) reached the journal, the data was never allocated
  (delayed allocation); Kafka reads a zero-length checkpoint as empty, silently
  (CheckpointFile.CheckpointReadBuffer.read: ``readLine() == null``);
- ``torn``: the journal committed the rename and the new size, the data blocks were never
  written: the file has its new length and reads as zeros (what XFS shows for an extent
  allocated but never written). Kafka reads a malformed line, takes the log dir offline, and
  with no dir left the broker halts.

``--cut durable`` takes ``torn``: of the file's new version nothing but what the filesystem
journal commits on its own (the rename and the inode size) is taken as durable - no data byte
that was not fsynced survives, as for the segments - and it is the state Kafka can observe
that does the most at once (a whole log dir offline rather than a silently empty cache).
``--cut random`` picks one of the four, seeded (its own generator: the segments' random cut is
the same with or without checkpoints to revert). Which file was un-fsynced:

- ``checkpoint`` (kraftsim): exact. kraftsim stands in for the kernel's dirty-page state: before
  its first unsynced replace of a file it writes ``<file>.kraftsim-unsynced`` (JSON: the durable
  content, when it became unsynced) and removes it at the next synced write
  (kraftsim/storage/checkpoints.py atomic_write). The cut applies the state and removes the
  record (after the crash the disk holds what it holds).
- ``kafka`` (Apache Kafka): not knowable from the disk. A ``leader-epoch-checkpoint`` modified
  within the writeback window (``/proc/sys/vm/dirty_expire_centisecs`` on the host, else 30 s)
  before the cut, on a broker whose Kafka is 3.7.0 or 3.7.1 (``--kafka-version``), is reverted (``torn``
  or ``empty``; its old content is not on disk, so never ``old``) and reported uncertain: the
  write may have been an ``assign``, which fsyncs, and the kernel may have written it back
  sooner. With the version unknown (or a later 3.7 release, not checked) such a file is kept
  and reported uncertain. The KRaft
  metadata log's checkpoint is left alone.

Prints one JSON object: {"partitions": [...], "markers_removed": [...], "checkpoints": [...]};
exit 2 with one line on bad input (missing log dir, unreadable checkpoint, bad --config).
"""
import argparse
import heapq
import json
import os
import random
import re
import struct
import sys
import time

SEGMENT = re.compile(r"^(\d{20})\.log$")
PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
CLEAN_MARKERS = (".kafka_cleanshutdown", "cleanshutdown", ".clean-shutdown")
METADATA_TOPIC = "__cluster_metadata"
NEVER = 2 ** 63 - 1  # Long.MaxValue: Kafka's default for the flush intervals (never)
FLUSH_KEYS = ("log.flush.interval.messages", "log.flush.interval.ms", "log.flush.scheduler.interval.ms")
EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNSYNCED_SUFFIX = ".kraftsim-unsynced"   # kraftsim/storage/checkpoints.py UNSYNCED_SUFFIX
CHECKPOINT_STATES = ("old", "empty", "torn", "new")
DIRTY_EXPIRE = "/proc/sys/vm/dirty_expire_centisecs"
DEFAULT_WRITEBACK_S = 30.0


def fail(msg):
    print(f"truncate-unflushed: {msg}", file=sys.stderr)
    sys.exit(2)


def read_checkpoint(path):
    """{(topic, partition): offset} from a Kafka offset checkpoint file."""
    if not os.path.exists(path):
        return {}
    with open(path) as fh:
        lines = [l.strip() for l in fh if l.strip()]
    if len(lines) < 2:
        # Kafka's CheckpointFile constructor creates the file empty (Files.createFile) and its
        # CheckpointReadBuffer.read takes no line, or a version alone, as no entries: a broker
        # killed before its first checkpoint write (log.initial.task.delay.ms) leaves it so
        if lines and lines[0] != "0":
            fail(f"{path}: not a Kafka offset checkpoint (version line {lines[0]!r}, want 0)")
        return {}
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


WINDOW = 1 << 20


def batches(path):
    """(start byte, end byte, base offset, last offset) of each complete batch in a segment.

    Headers are read from a window of the file (1 MiB) rather than one read each: small batches
    are thousands to a megabyte, and on a FUSE mount (lossyfs) every read is a round trip."""
    size = os.path.getsize(path)
    with open(path, "rb", buffering=0) as fh:
        pos, win_at, win = 0, 0, b""
        while pos + 27 <= size:
            if pos < win_at or pos + 27 > win_at + len(win):
                fh.seek(pos)
                win_at, win = pos, fh.read(WINDOW)
            head = win[pos - win_at:pos - win_at + 27]
            if len(head) < 27:
                break
            base, length = struct.unpack(">qi", head[:12])
            last_delta = struct.unpack(">i", head[23:27])[0]
            end = pos + 12 + length
            if length < 15 or end > size:
                break
            yield pos, end, base, base + last_delta
            pos = end


def flush_settings(pairs):
    """The broker's flush settings (Kafka's keys and defaults); KafkaConfig.logFlushIntervalMs
    falls back to log.flush.scheduler.interval.ms when log.flush.interval.ms is unset."""
    raw = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or k.strip() not in FLUSH_KEYS:
            fail(f"--config {p!r}: KEY=VALUE with KEY one of {', '.join(FLUSH_KEYS)} is wanted")
        try:
            raw[k.strip()] = int(v.strip())
        except ValueError:
            fail(f"--config {p!r}: an integer value is wanted")
    sched = raw.get("log.flush.scheduler.interval.ms", NEVER)
    return {"messages": raw.get("log.flush.interval.messages", NEVER),
            "ms": raw.get("log.flush.interval.ms", sched), "scheduler_ms": sched}


def release(version):
    """(major, minor) of a Kafka release string, or None."""
    m = re.match(r"^(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def durable_point(segs, floor, topic, role, model, flush, config_known, kafka_version=None):
    """Where the power loss cuts this partition, and what is uncertain about it.

    ``segs``: [(base offset, [(start, end, base, last), ...])] in offset order. Returns
    {cut, by, lo, hi, why}: cut there; Kafka certainly fsynced below ``lo`` and may have
    fsynced up to ``hi`` (lo <= cut <= hi)."""
    all_b = [b for _, bs in segs for b in bs]
    leo = all_b[-1][3] + 1 if all_b else (segs[-1][0] if segs else floor)
    if model == "checkpoint":
        return {"cut": floor, "by": "checkpoint", "lo": floor, "hi": floor, "why": []}
    newest = segs[-1][0] if segs else floor
    older = segs[-2][0] if len(segs) > 1 else None
    why = []
    if topic == METADATA_TOPIC:
        if role == "controller":
            last_base = all_b[-1][2] if all_b else leo
            return {"cut": leo, "by": "raft-flush", "lo": min(last_base, leo), "hi": leo,
                    "why": ["KafkaRaftClient flushes the metadata log after every append; the append in "
                            "flight at the crash may not have reached the disk (kept)"]}
        rel = release(kafka_version)
        if rel is not None and rel < (3, 5):
            # KafkaRaftClient.appendAsFollower (3.4): log.flush(false) after every fetch, observer or voter
            last_base = all_b[-1][2] if all_b else leo
            return {"cut": leo, "by": "raft-flush", "lo": min(last_base, leo), "hi": leo,
                    "why": [f"Kafka {kafka_version} flushes an observer's metadata log after every fetch "
                            "(KafkaRaftClient.appendAsFollower); the append in flight may not have reached the disk (kept)"]}
        cut = newest
        lo = older if older is not None and newest > 0 else newest
        if lo < cut:
            why.append("the last roll's flush (UnifiedLog.roll -> scheduleOnce flush-log) is "
                       "asynchronous; it may not have run before the crash (kept)")
        if rel is None and leo > cut:
            why.append("an observer's metadata log is flushed after every fetch by Kafka 3.4 "
                       "(KafkaRaftClient.appendAsFollower), only at segment rolls by 3.5+ (KAFKA-13884); "
                       "the broker's release is not known")
        # 3.5+: appendAsFollower flushes only where quorum.isVoter(); a broker is an observer
        return {"cut": cut, "by": "segment-roll", "lo": min(lo, cut), "hi": leo if rel is None else cut, "why": why}
    cut, by = floor, "checkpoint"
    lo = floor
    if newest > cut:
        cut, by = newest, "segment-roll"
        # the newest roll's flush-log task may not have run yet: its segment is kept, uncertain
        lo = max(floor, older if older is not None else floor)
        if lo < cut:
            why.append("the last roll's flush (UnifiedLog.roll -> scheduleOnce flush-log) is "
                       "asynchronous; it may not have run before the crash (kept)")
    hi = cut
    n = flush["messages"]
    if n < NEVER and all_b:
        # a leader appends one batch per produce request (ProduceRequest.validateRecords: v3+
        # carries exactly one batch per partition), so batch by batch is how it flushed
        rp = floor
        for seg_base, bs in segs:
            if seg_base > rp:
                rp = seg_base       # the roll flushed everything below the new segment
            for _, _, b, last in bs:
                if last < floor:
                    continue
                if last + 1 - rp >= n:
                    rp = last + 1   # UnifiedLog.append: unflushedMessages >= flushInterval -> flush
        # a follower appends a fetch's batches at once (UnifiedLog.appendAsFollower), so it may
        # have flushed past that point: the cut keeps all it may have flushed, never more
        top = max_flush_point(segs, floor, n)
        if top > cut:
            cut, by = top, "log.flush.interval.messages"
        # RP > (end of the last completed append) - n: certain only from one interval below the
        # last batch
        last_base = all_b[-1][2]
        ends = [b[3] + 1 for b in all_b if b[3] + 1 >= last_base - n + 1]
        lo_msgs = max(floor, min(ends) if ends else leo)
        lo = max(lo, min(lo_msgs, cut))
        why.append(f"log.flush.interval.messages={n}: a leader (one batch an append) flushed last at {max(rp, floor)}, "
                   f"a follower (a fetch's batches an append) may have flushed up to {top}; kept up to {cut}")
    if flush["ms"] < NEVER:
        hi = leo
        why.append(f"log.flush.interval.ms={flush['ms']} (flusher every {flush['scheduler_ms']} ms): "
                   "when LogManager.flushDirtyLogs last flushed this log is not on disk")
    if not config_known:
        hi = leo
        why.append("the broker's flush settings were not known (no config read)")
    return {"cut": cut, "by": by, "lo": min(lo, cut), "hi": max(hi, cut), "why": why}


def max_flush_point(segs, floor, n):
    """The highest offset ``log.flush.interval.messages`` = ``n`` may have made Kafka flush to.

    UnifiedLog.append flushes when, after an append, ``logEndOffset - recoveryPoint >= n``; an
    append lies in one segment (maybeRoll comes first) and ends at a batch end, and a follower's
    append holds every batch of one fetch, so any batch end past the first that crosses the
    threshold, up to the end of that batch's segment, may be where one ended and flushed. The
    recovery point starts at the checkpoint's ``floor`` and also moves to each new segment's base
    when its roll's ``flush-log`` runs. Every point reachable so is a possible recovery point; the
    highest of them (``floor`` if none) bounds what Kafka may have fsynced."""
    ends, seg_of = [], []
    for si, (_, bs) in enumerate(segs):
        for _, _, _, last in bs:
            if last + 1 > floor:
                ends.append(last + 1)
                seg_of.append(si)
    seg_last = {}
    for i, si in enumerate(seg_of):
        seg_last[si] = i
    points = [floor] + [base for base, _ in segs if base > floor]
    heapq.heapify(points)
    reach_from, seen, hi, j = {}, set(), floor, 0
    while points:
        r = heapq.heappop(points)       # in increasing order, so the crossing below only moves on
        if r in seen:
            continue
        seen.add(r)
        hi = max(hi, r)
        while j < len(ends) and ends[j] - r < n:
            j += 1
        if j == len(ends):
            continue
        m = reach_from.get(seg_of[j])
        if m is None or j < m:
            for k in range(j, (seg_last[seg_of[j]] if m is None else m - 1) + 1):
                heapq.heappush(points, ends[k])
            reach_from[seg_of[j]] = j
    return hi


def bytes_in(segs, a, b):
    """Bytes of the batches lying in offsets [a, b)."""
    return sum(e - s for _, bs in segs for s, e, base, last in bs if base >= a and last < b)


def plan_partition(pdir, floor, cut_mode, rng, topic, role, model, flush, config_known, kafka_version=None):
    names = sorted((int(m.group(1)), n) for n in os.listdir(pdir) if (m := SEGMENT.match(n)))
    # a segment whose successor starts at or below the floor lies wholly below it: kept whole, its
    # batches never read (a log of a thousand segments is read in its last few), but for the last
    # such one, which says where the kept log ends
    segs = [(base, [] if i + 2 < len(names) and names[i + 2][0] <= floor else list(batches(os.path.join(pdir, name))))
            for i, (base, name) in enumerate(names)]
    point = durable_point(segs, floor, topic, role, model, flush, config_known, kafka_version)
    durable = point["cut"]
    # byte ranges past the durable point: [(segment path, from byte, to byte)]
    unflushed, leo, keep_end = [], None, {}
    for (base, name), (_, bs) in zip(names, segs):
        path = os.path.join(pdir, name)
        size = os.path.getsize(path)
        cut_at = size
        for start, end, b, last in bs:
            leo = last + 1
            if last >= durable and cut_at == size:
                cut_at = start
        if base >= durable:
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
    return names, segs, keep_end, leo, point


def apply(pdir, topic, part, floor, cut_mode, rng, dry_run, role, model, flush, config_known, kafka_version=None):
    names, segs, keep_end, leo_before, point = plan_partition(pdir, floor, cut_mode, rng, topic, role, model,
                                                              flush, config_known, kafka_version)
    report = {"dir": pdir, "topic": topic, "partition": part, "recovery_point": floor,
              "log_end_offset_before": leo_before, "truncated_bytes": 0, "deleted_segments": [],
              "truncated_segments": [], "deleted_files": [], "durable_offset": point["cut"],
              "durable_by": point["by"]}
    sizes_before = {name: os.path.getsize(os.path.join(pdir, name)) for _, name in names}
    first_lost, kept_leo = None, None
    for (base, name), (_, bs) in zip(names, segs):
        path = os.path.join(pdir, name)
        size, end = os.path.getsize(path), keep_end[path]
        for start, bend, b, last in bs:
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
    cut_offset = kept_leo if kept_leo is not None else (names[0][0] if names else 0)
    for n in sorted(os.listdir(pdir)):
        stem, _, ext = n.rpartition(".")
        if ext in ("index", "timeindex", "txnindex") or \
                (ext == "snapshot" and stem.isdigit() and int(stem) > cut_offset):
            report["deleted_files"].append(n)
            if not dry_run:
                os.remove(os.path.join(pdir, n))
    report["first_lost_offset"] = first_lost
    report["expected_log_end_offset"] = cut_offset   # what Kafka's recovery will find
    # what the power loss may have kept that the cut removed, and the reverse
    unc = {}
    if point["hi"] > cut_offset and leo_before is not None and cut_offset < leo_before:
        hi = min(point["hi"], leo_before)
        unc["cut"] = [cut_offset, hi]
        unc["cut_bytes"] = bytes_in(segs, cut_offset, hi)
    if point["lo"] < min(point["cut"], cut_offset):
        top = min(point["cut"], cut_offset)
        unc["kept"] = [point["lo"], top]
        unc["kept_bytes"] = bytes_in(segs, point["lo"], top)
    report["uncertain"] = {**unc, "why": point["why"]} if unc else None
    # per segment file: its size, and the bytes of it in the uncertain ranges (a comparison with
    # what the disk really kept - reboot compare_cut - is made file by file)
    report["segment_sizes"] = sizes_before
    ranges = [tuple(unc[k]) for k in ("cut", "kept") if k in unc]
    by_seg = {}
    for (_, name), (_, bs) in zip(names, segs):
        n = sum(e - s for s, e, base, last in bs for a, b in ranges if base >= a and last < b)
        if n:
            by_seg[name] = n
    report["uncertain_bytes_by_segment"] = by_seg
    return report


def writeback_window():
    """(seconds, source): how long a dirty page may stay unwritten on this host."""
    try:
        with open(DIRTY_EXPIRE) as fh:
            return int(fh.read().strip()) / 100.0, DIRTY_EXPIRE
    except (OSError, ValueError):
        return DEFAULT_WRITEBACK_S, "default (30 s): " + DIRTY_EXPIRE + " not readable"


def unsynced_37(version):
    """True/False: whether this Kafka writes the truncation's checkpoint without fsync; None: not
    known. 3.7.0 and 3.7.1 do (checked in their source); 3.7.2 and later 3.7 releases are not in
    the Kafka mirror this was checked against, so whether they carry the fix is not known."""
    m = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    if not m:
        return None
    if (int(m.group(1)), int(m.group(2))) != (3, 7):
        return False
    return True if int(m.group(3) or 0) <= 1 else None


def set_state(path, state, durable, dry_run):
    """Leave ``path`` as the crash ``state`` left it (same inode where the file stays)."""
    if dry_run or state == "new":
        return
    if state == "old" and durable is None:
        os.remove(path)
        return
    size = os.path.getsize(path)
    data = {"old": (durable or "").encode("utf-8"), "empty": b"", "torn": b"\0" * size}[state]
    with open(path, "r+b") as fh:
        fh.write(data)
        fh.truncate(len(data))


def revert_checkpoints(pdir, topic, part, cut_mode, rng, model, kafka_version, window, now, dry_run):
    """The un-fsynced checkpoint files of one partition dir, put in their post-crash state."""
    out = []
    if model == "checkpoint":
        for n in sorted(os.listdir(pdir)):
            if not n.endswith(UNSYNCED_SUFFIX):
                continue
            rec_path = os.path.join(pdir, n)
            try:
                with open(rec_path) as fh:
                    rec = json.load(fh)
                durable = rec["durable"]
            except (OSError, ValueError, KeyError, TypeError):
                fail(f"{rec_path}: not kraftsim's record of an unsynced write (want JSON with 'durable')")
            path = os.path.join(pdir, n[:-len(UNSYNCED_SUFFIX)])
            if os.path.exists(path):
                state = "torn" if cut_mode == "durable" else rng.choice(CHECKPOINT_STATES)
                size = os.path.getsize(path)
                set_state(path, state, durable, dry_run)
                out.append({"file": path, "topic": topic, "partition": part, "state": state, "bytes_before": size,
                            "bytes_after": 0 if state == "old" and durable is None else
                            {"old": len((durable or "").encode("utf-8")), "empty": 0, "torn": size, "new": size}[state],
                            "durable_existed": durable is not None,
                            "unsynced_for_s": round(now - float(rec.get("since", now)), 3),
                            "last_written_s_ago": round(now - float(rec.get("written", now)), 3),
                            "exact": True})
            if not dry_run:
                os.remove(rec_path)
        return out
    if topic == METADATA_TOPIC:
        return out
    path = os.path.join(pdir, EPOCH_CHECKPOINT)
    if not os.path.isfile(path):
        return out
    age = now - os.path.getmtime(path)
    if age > window[0]:
        return out
    size = os.path.getsize(path)
    entry = {"file": path, "topic": topic, "partition": part, "bytes_before": size,
             "last_written_s_ago": round(age, 3), "writeback_window_s": window[0], "window_from": window[1],
             "exact": False}
    vuln = unsynced_37(kafka_version)
    if vuln is None:
        out.append({**entry, "state": "kept", "bytes_after": size,
                    "uncertain": f"written {age:.1f} s before the crash, within the writeback window; the broker's "
                                 "Kafka version is not known to write it with or without fsync on truncation "
                                 f"({kafka_version or 'no version given'}; 3.7.0-3.7.1 do not fsync): kept"})
    elif vuln:
        state = "torn" if cut_mode == "durable" else rng.choice(("empty", "torn", "new"))
        set_state(path, state, None, dry_run)
        out.append({**entry, "state": state, "bytes_after": 0 if state == "empty" else size,
                    "uncertain": f"written {age:.1f} s before the crash by Kafka {kafka_version}: unsynced if a "
                                 "truncation wrote it (LeaderEpochFileCache.truncateFromEnd/Start), fsynced if an "
                                 "assign did; the kernel may have written it back before the window ran out"})
    return out


def main():
    ap = argparse.ArgumentParser(description="page-cache-loss cut of a stopped Kafka node's logs")
    ap.add_argument("--log-dir", action="append", required=True, help="a log.dirs / metadata.log.dir entry (repeatable)")
    ap.add_argument("--cut", choices=["durable", "recovery-point", "random"], default="durable")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flush-model", choices=["checkpoint", "kafka"], default="kafka",
                    help="checkpoint: the checkpoint is current (kraftsim); kafka: Apache Kafka's flush paths")
    ap.add_argument("--role", choices=["broker", "controller"], default="broker")
    ap.add_argument("--config", action="append", default=[], help="the broker's flush settings, KEY=VALUE")
    ap.add_argument("--config-unknown", action="store_true",
                    help="the broker's flush settings could not be read: every cut byte is uncertain")
    ap.add_argument("--clean-marker", action="append", default=[],
                    help="extra clean-shutdown marker file names to remove")
    ap.add_argument("--kafka-version", default=None,
                    help="the broker's Kafka version (kafka flush model): 3.7.0-3.7.1 write truncations' "
                         "leader-epoch checkpoints without fsync; unknown: such files are kept, uncertain")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    ckpt_rng = random.Random(f"{a.seed}:checkpoints")
    window = writeback_window()
    now = time.time()
    cut_mode = "random" if a.cut == "random" else "durable"
    flush = flush_settings(a.config)
    known = a.flush_model == "checkpoint" or not a.config_unknown
    out = {"partitions": [], "markers_removed": [], "flush_model": a.flush_model, "role": a.role,
           "flush": {k: (None if v >= NEVER else v) for k, v in flush.items()}, "config_known": known,
           "checkpoints": [], "kafka_version": a.kafka_version}
    for d in a.log_dir:
        if not os.path.isdir(d):
            fail(f"log dir {d} does not exist (check log.dirs / metadata.log.dir in the node's config)")
        rp = read_checkpoint(os.path.join(d, "recovery-point-offset-checkpoint"))
        for n in sorted(os.listdir(d)):
            pdir = os.path.join(d, n)
            m = PARTITION_DIR.match(n)
            if not m or not os.path.isdir(pdir) or n.endswith("-delete"):
                continue
            topic, part = m.group(1), int(m.group(2))
            out["checkpoints"] += revert_checkpoints(pdir, topic, part, cut_mode, ckpt_rng, a.flush_model,
                                                     a.kafka_version, window, now, a.dry_run)
            if not any(SEGMENT.match(f) for f in os.listdir(pdir)):
                continue
            # no checkpoint entry: nothing of this partition was known flushed when it was written
            out["partitions"].append(apply(pdir, topic, part, rp.get((topic, part), 0), cut_mode, rng, a.dry_run,
                                           a.role, a.flush_model, flush, known, a.kafka_version))
        for marker in list(CLEAN_MARKERS) + a.clean_marker:
            p = os.path.join(d, marker)
            if os.path.exists(p):
                out["markers_removed"].append(p)
                if not a.dry_run:
                    os.remove(p)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
