"""A class-data-sharing archive for the checker's Spark driver JVM: its start without class loading.

Why: every `faultline run` and `faultline check` starts a Spark driver JVM, and most of that start
is loading, parsing and verifying Spark's classes - the same ones every time. Measured on this
2-core machine while the test suite ran (the JVM's own CPU time from /proc): a session's start
took 23 CPU-s without an archive and 13.5 with one. A verdict that waits for the driver waits
for that.

A JDK dynamic archive (``-XX:ArchiveClassesAtExit``, JDK 13+) holds the classes one JVM loaded;
a later JVM of the same JDK and class path maps them (``-XX:SharedArchiveFile``). The JVM checks
the archive against itself: one made by another JDK or for another class path is ignored under
``-Xshare:auto`` (the default) with a warning in the checker's log - slower, never a failure. So
the archive is keyed by what the JVM would refuse it for anyway (pyspark's version, its jars,
the java binary), only to keep one per installation instead of overwriting each other.

``python -m checkers.jvm_archive`` makes it (scripts/setup-test-host.sh and scripts/quickstart.sh
run it once): one real check of a small history with a lost write, so the classes of the
lost-write paths are in it too; the JVM stopped cleanly (the archive is written as it exits);
the file renamed into place only when whole. Without it everything works as before.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from checkers import session
from groundwork.jvm_cds import place

def _small_run(run_dir: Path) -> None:
    """A run directory the checker reads: one producer's 200 acknowledged sends on two
    partitions, a consumer, and a drain that misses one acknowledged write (a loss)."""
    hist = run_dir / "history"
    hist.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"run_id": run_dir.name, "expect": "no-loss", "wall_at_t0": 0.0,
                                                  "switches": {}}))

    def rec(t: float, process: str, op: int, typ: str, f: str, part: int, off: int | None, value: str | None) -> str:
        return json.dumps({"v": 1, "t": round(t, 6), "process": process, "op": op, "type": typ, "f": f,
                           "topic": "archive", "partition": part, "offset": off, "value": value,
                           "error": None, "error_code": None}) + "\n"
    sends, polls, drain, ends = [], [], [], [0, 0]
    for m in range(200):
        part, val, t = m % 2, f"producer-0-{m}", m * 0.01
        off, ends[part] = ends[part], ends[part] + 1
        sends += [rec(t, "producer-0", m + 1, "invoke", "send", part, None, val),
                  rec(t + 0.002, "producer-0", m + 1, "ok", "send", part, off, val)]
        polls.append(rec(t + 0.005, "consumer-0", m + 1, "ok", "poll", part, off, val))
        if m != 150:
            drain.append(rec(10 + part, "drain", len(drain) + 1, "ok", "drain", part, off, val))
    drain += [rec(12 + p, "drain", len(drain) + 1 + p, "ok", "drain-end", p, ends[p], None) for p in (0, 1)]
    (hist / "producer-0.jsonl").write_text("".join(sends))
    (hist / "consumer-0.jsonl").write_text("".join(polls))
    (hist / "drain.jsonl").write_text("".join(drain))


def _dump(dest: str) -> int:
    """In a child process: one check with ``-XX:ArchiveClassesAtExit=dest``, then the JVM's clean exit."""
    from pyspark import SparkContext

    from checkers.job import check_run
    session.archive_dump_to = dest
    with tempfile.TemporaryDirectory(prefix="faultline-cds-") as d:
        run = Path(d) / "archive-run"
        _small_run(run)
        spark, _ = session.start_session(app_name="faultline-cds", log=Path(d) / "jvm.log")
        verdict = check_run(run, spark=spark)
        if verdict["counts"]["lost_write"] != 1:
            print(f"the archive's check found {verdict['counts']['lost_write']} lost writes, not 1", file=sys.stderr)
            return 1
        spark.stop()
        proc = SparkContext._gateway.proc   # type: ignore[union-attr]
        proc.stdin.close()   # PythonGatewayServer exits on EOF: System.exit, and the archive is written
        return 0 if proc.wait(timeout=600) == 0 else 1


def make(quiet: bool = False) -> Path:
    """Make the archive for this installation (replacing one there); its path. Raises
    RuntimeError with one line when the JVM did not write it."""
    final = session.archive_file()
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        p = subprocess.run([sys.executable, "-m", "checkers.jvm_archive", "--dump-to", str(tmp)],
                           cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=1200)
        if p.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
            last = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
            raise RuntimeError(f"Spark's class archive was not written ({last})")
        import pyspark
        place(tmp, final, session.java_binary(), [Path(pyspark.__file__).parent / "jars"])
    finally:
        tmp.unlink(missing_ok=True)
    if not quiet:
        print(final)
    return final


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m checkers.jvm_archive",
                                 description="make the class-data-sharing archive of the checker's Spark driver JVM")
    ap.add_argument("--dump-to", help=argparse.SUPPRESS)
    ap.add_argument("--if-missing", action="store_true", help="do nothing when this installation has one")
    a = ap.parse_args(argv)
    if a.dump_to:
        return _dump(a.dump_to)
    if a.if_missing and session.archive_file().is_file():
        print(session.archive_file())
        return 0
    print("archiving Spark's classes for the checker's driver JVM (once per installation, about a minute) ...",
          file=sys.stderr, flush=True)
    try:
        make()
    except RuntimeError as e:
        print(f"python -m checkers.jvm_archive: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
