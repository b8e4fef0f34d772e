"""Kafka's on-disk text files: offset checkpoints, leader-epoch checkpoint, meta.properties,
and the clean-shutdown marker.

Why Kafka's exact formats: a fault tool (or a human) that reads or edits these files on a real
Kafka log dir must find the same thing on kraftsim. Offset checkpoints are
``"0\\n<count>\\n<topic> <partition> <offset>\\n..."`` (Kafka's ``CheckpointFile``, version 0),
written atomically: write ``<file>.tmp``, fsync, rename over the file, fsync the directory.

The clean-shutdown marker carries the broker epoch of the session that shut down cleanly, as
Kafka's ``CleanShutdownFileHandler`` does (``{"version":0,"brokerEpoch":N}``): on restart the
broker sends it as BrokerRegistration's PreviousBrokerEpoch, and a missing or stale value tells
the controller the restart was unclean (the KIP-966 fix for the Last Replica Standing issue of
docs/seeds.md#seed-003-2-4-1).
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
import uuid
from pathlib import Path

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CHECKPOINT_VERSION = 0


class CheckpointError(ValueError):
    """A checkpoint or properties file is malformed; the message is one line naming the file."""


def fsync_dir(path: Path) -> None:
    """Make a rename or file creation in ``path`` durable (Kafka's ``Utils.flushDir``)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: beside a file kraftsim replaced without fsync: what the disk durably holds for it (see
#: :func:`atomic_write`); the page-cache-loss cut (nemeses/scripts/truncate_unflushed.py) reads it
UNSYNCED_SUFFIX = ".kraftsim-unsynced"


def atomic_write(path: Path, text: str, *, sync: bool = True) -> None:
    """Write ``text`` to ``path`` via ``path.tmp`` + fsync + rename, like Kafka's CheckpointFile.
    ``sync`` False: neither the file nor the directory is fsynced (Kafka 3.7's
    ``CheckpointFile.write(entries, false)``: ``atomicMoveWithFallback(temp, path, false)``), so a
    page-cache loss may leave the old file, the new one, an empty one or one of the new size
    that reads as zeros.

    kraftsim stands in for the kernel's dirty-page state here: before the first unsynced
    replace of a file it writes ``<file>.kraftsim-unsynced`` (JSON: the durable content, the
    time), and the next synced write of the file removes it. A real kernel writes dirty pages
    back on its own (``vm.dirty_expire_centisecs``); the record, like the recovery-point
    checkpoint for the segments, says what Kafka itself made durable, which is what a
    page-cache-loss cut may take away (docs/nemeses.md, "Checkpoints written without fsync")."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    unsynced = path.with_name(path.name + UNSYNCED_SUFFIX)
    if not sync and not unsynced.exists():
        try:
            durable: str | None = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            durable = None
        with open(unsynced, "w", encoding="utf-8") as f:
            json.dump({"file": path.name, "durable": durable, "since": time.time()}, f)
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
        f.flush()
        if sync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)
        try:
            unsynced.unlink()
        except FileNotFoundError:
            pass
    else:
        with open(unsynced, "r+", encoding="utf-8") as f:   # the newest unsynced write's time
            rec = json.load(f)
            rec["written"] = time.time()
            f.seek(0)
            json.dump(rec, f)
            f.truncate()


def _read_lines(path: Path) -> list[str] | None:
    try:
        return Path(path).read_text(encoding="utf-8").split("\n")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: not UTF-8 text; want Kafka's checkpoint text format") from None


def _reader_lines(text: str) -> list[str]:
    """The lines ``BufferedReader.readLine`` returns: split at ``\n``, ``\r`` or ``\r\n``, the
    last one kept without its terminator; an empty file has none."""
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


_JAVA_INT = re.compile(r"[+-]?\d+")


def _parse_checkpoint(path: Path, fields: int) -> list[list[str]] | None:
    """Version, count and ``count`` lines of ``fields`` columns, read as Kafka's
    ``CheckpointFile.CheckpointReadBuffer.read`` does (server-common/src/main/java/org/apache/
    kafka/server/common/CheckpointFile.java, 3.7.0): no first line (a zero-length file) or no
    count line is an empty checkpoint, silently; a version or count that is not an integer, a
    line that is not ``fields`` columns ("Malformed line in checkpoint file") and a count that
    differs from the lines ("Expected [n] entries") are errors. None: no file."""
    lines = _read_lines(path)
    if lines is None:
        return None
    lines = _reader_lines("\n".join(lines))
    if not lines:
        return []   # readLine() == null: Collections.emptyList()
    if not _JAVA_INT.fullmatch(lines[0]):
        raise CheckpointError(f"{path}: line 1: malformed line {lines[0][:40]!r}, want the version {CHECKPOINT_VERSION}")
    if int(lines[0]) != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: line 1: version {lines[0].strip()!r}, want {CHECKPOINT_VERSION}")
    if len(lines) < 2:
        return []   # no count line: Collections.emptyList()
    if not _JAVA_INT.fullmatch(lines[1]):
        raise CheckpointError(f"{path}: line 2: count {lines[1][:40]!r} is not an integer")
    count = int(lines[1])
    body = lines[2:]
    rows = []
    for i, line in enumerate(body, start=3):
        cols = line.split()
        if len(cols) != fields:
            raise CheckpointError(f"{path}: line {i}: {line[:60]!r}, want {fields} space-separated fields")
        rows.append(cols)
    if len(body) != count:
        raise CheckpointError(f"{path}: line 2 says {count} entries, file has {len(body)}")
    return rows


def _int(path: Path, line_no: int, text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CheckpointError(f"{path}: line {line_no}: {what} {text!r} is not an integer") from None


def write_offset_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    """Write a recovery-point / replication / log-start-offset checkpoint (sorted, stable bytes)."""
    items = sorted(offsets.items())
    text = f"{CHECKPOINT_VERSION}\n{len(items)}\n" + "".join(f"{t} {p} {o}\n" for (t, p), o in items)
    atomic_write(path, text)


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Read an offset checkpoint; a missing file is an empty map (Kafka does the same)."""
    rows = _parse_checkpoint(path, 3)
    if rows is None:
        return {}
    out: dict[tuple[str, int], int] = {}
    for i, (topic, part, off) in enumerate(rows, start=3):
        out[(topic, _int(path, i, part, "partition"))] = _int(path, i, off, "offset")
    return out


def write_leader_epoch_checkpoint(path: Path, entries: list[tuple[int, int]], *, sync: bool = True) -> None:
    """Write ``<epoch> <startOffset>`` lines in cache order (Kafka's LeaderEpochCheckpointFile);
    ``sync``: see :func:`atomic_write`."""
    text = f"{CHECKPOINT_VERSION}\n{len(entries)}\n" + "".join(f"{e} {o}\n" for e, o in entries)
    atomic_write(path, text, sync=sync)


def read_leader_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    rows = _parse_checkpoint(path, 2)
    if rows is None:
        return []
    return [(_int(path, i, e, "epoch"), _int(path, i, o, "start offset")) for i, (e, o) in enumerate(rows, start=3)]


# --- meta.properties --------------------------------------------------------------------------


def new_directory_id() -> str:
    """A Kafka Uuid string: 16 random bytes, URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def directory_uuid(text: str) -> uuid.UUID:
    """A Kafka Uuid string (base64url, 22 chars) as the 16 bytes the wire carries."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def kafka_uuid_text(u: uuid.UUID) -> str:
    """The wire's Uuid as Kafka prints it (Uuid.toString: base64url without padding)."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def write_meta_properties(log_dir: Path, *, node_id: int, cluster_id: str, directory_id: str | None = None) -> dict[str, str]:
    """Write ``meta.properties`` v1 the way Java's ``Properties.store`` does (comment + date)."""
    props = {
        "node.id": str(node_id),
        "directory.id": directory_id or new_directory_id(),
        "version": "1",
        "cluster.id": cluster_id,
    }
    date = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    text = f"#\n#{date}\n" + "".join(f"{k}={v}\n" for k, v in props.items())
    atomic_write(Path(log_dir) / META_PROPERTIES, text)
    return props


def read_meta_properties(log_dir: Path) -> dict[str, str] | None:
    """Parse ``meta.properties`` (``key=value`` lines, ``#``/``!`` comments); None if absent."""
    path = Path(log_dir) / META_PROPERTIES
    lines = _read_lines(path)
    if lines is None:
        return None
    props: dict[str, str] = {}
    for i, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((p for p in (line.find("="), line.find(":")) if p >= 0), default=-1)
        if sep < 0:
            raise CheckpointError(f"{path}: line {i}: {raw!r}, want key=value")
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


# --- clean shutdown marker --------------------------------------------------------------------


def write_clean_shutdown(log_dir: Path, broker_epoch: int = -1) -> None:
    atomic_write(Path(log_dir) / CLEAN_SHUTDOWN_FILE, json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":")))


def read_clean_shutdown(log_dir: Path) -> int | None:
    """None if no marker (unclean shutdown); else the broker epoch it records (-1 if unknown).

    Kafka before 3.7 wrote an empty marker; that still means a clean shutdown, epoch unknown.
    """
    path = Path(log_dir) / CLEAN_SHUTDOWN_FILE
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return -1
    if not text:
        return -1
    try:
        epoch = json.loads(text).get("brokerEpoch", -1)
        return int(epoch)
    except (ValueError, AttributeError, TypeError):
        return -1


def remove_clean_shutdown(log_dir: Path) -> None:
    try:
        (Path(log_dir) / CLEAN_SHUTDOWN_FILE).unlink()
    except FileNotFoundError:
        return
    fsync_dir(Path(log_dir))
