"""Convert a run's history while it is written, so the check after the run finds only the tail.

Why: the history files are flushed and append-only for the whole run (docs/history-format.md),
and converting them to the columnar form the checker reads (checkers/ingest.py) was most of a
large run's first check (11 of 16 s at 10M records). :class:`HistoryFollower` runs ingest
rounds in a background thread while the workload writes: every :data:`TICK_S` seconds it
converts the whole lines of each file that is *due* - at least :data:`ROUND_BYTES` new, or
quiet for :data:`QUIET_S` seconds (its writer finished: the producers before the drain), or not
converted for :data:`MAX_AGE_S` seconds (a slow writer). Larger rounds mean fewer, larger part files for the
kernel to open; the tail left for the check is at most about one round per file.

Its threads run at a lower CPU priority (nice :data:`NICE`): the run it follows must keep the
cores it had. It never makes a run fail: a round that raises ends the following (``error``
says why), and the check's final round converts whatever the manifest does not cover - after
a crash too, since a round's files are trusted only once its manifest is written.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from checkers.ingest import SPLIT_BYTES, Converter, IngestResult
from workloads import history as H

#: seconds between rounds
TICK_S = 1.0
#: new whole-line bytes that make a growing file due: half a split (about 90k records)
ROUND_BYTES = SPLIT_BYTES // 2
#: seconds without growth after which a file's new lines are due (its writer is done or idle)
QUIET_S = 3.0
#: seconds after which a file with any new whole line is due (bounds the tail of a slow writer)
MAX_AGE_S = 30.0
#: CPU niceness of the converting threads
NICE = 10


class HistoryFollower:
    """Ingest rounds over ``RUN/history/*.jsonl`` in a background thread until :meth:`stop`."""

    def __init__(self, run_dir: str | Path, *, tick: float = TICK_S, round_bytes: int = ROUND_BYTES,
                 quiet: float = QUIET_S, max_age: float = MAX_AGE_S, threads: int | None = None, nice: int = NICE,
                 split_bytes: int = SPLIT_BYTES):
        self.run_dir = Path(run_dir)
        self.tick, self.round_bytes, self.threads, self.nice = tick, round_bytes, threads, nice
        self.quiet, self.max_age = quiet, max_age
        self.rounds = 0
        self.converted_bytes = 0
        self.final_bytes: int | None = None   # what the final round converted (None: none ran)
        self.error = ""
        self.last: IngestResult | None = None
        self._converter = Converter(self.run_dir, split_bytes)
        self._sizes: dict[str, int] = {}
        self._grown: dict[str, float] = {}     # file -> when its size last changed
        self._since: dict[str, float] = {}     # file -> when it was last due
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._final = False
        self._thread = threading.Thread(target=self._run, name="faultline-history-follower", daemon=True)

    def start(self) -> "HistoryFollower":
        self._thread.start()
        return self

    def _due(self, f: str, start: int, end: int) -> bool:
        """Whether file ``f`` (converted up to ``start``, whole lines up to ``end``) converts now."""
        now = time.monotonic()
        size = Path(f).stat().st_size
        if size != self._sizes.get(f):
            self._sizes[f], self._grown[f] = size, now
        since = self._since.setdefault(f, now)
        due = end - start >= self.round_bytes or now - self._grown[f] >= self.quiet or now - since >= self.max_age
        if due:
            self._since[f] = now
        return due

    def round(self) -> IngestResult:
        """One round now (the thread's, or a caller's between ticks)."""
        res = self._converter.round([str(p) for p in H.history_files(self.run_dir)], final=False, due=self._due,
                                    threads=self.threads, nice=self.nice)
        self.rounds += 1
        self.converted_bytes += res.bytes
        self.last = res
        return res

    def _run(self) -> None:
        while True:
            self._wake.wait(self.tick)
            self._wake.clear()
            try:
                if self._final:      # the writers are done: everything, at full speed, then stop
                    self.last = self._converter.round([str(p) for p in H.history_files(self.run_dir)], final=True)
                    self.converted_bytes += self.last.bytes
                    self.final_bytes = self.last.bytes
                    return
                if self._stop.is_set():
                    return
                self.round()
            except Exception as e:  # noqa: BLE001 - the check converts what is left; never fail the run
                self.error = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
                return

    def finish(self) -> None:
        """Every writer has closed its file: the next round, at once, is the final one (the
        check's ingest then finds the dataset complete), and the last."""
        self._final = True
        self._wake.set()

    def stop(self) -> None:
        """Stop after the round in progress (its manifest written or not - both are safe);
        after :meth:`finish`, wait for the final round."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
