"""Run one workload client in its own process (spawn) or thread, with live shared counters.

Why a process by default: a confluent-kafka producer spends most of its Python time in the
delivery callback and in encoding history lines; several of them plus a consumer in the
harness's own interpreter would share one GIL while the harness also drives nemeses. A
spawned process per client uses both cores and keeps a client crash (or a SIGKILL aimed at
it in tests) from taking the harness down. Thread mode exists for callers whose ``now``
cannot be pickled and for debugging.

Counters live in a ``multiprocessing`` shared array (no lock: one writer, readers only want
a progress figure), so :meth:`Worker.counters` is live without any message passing.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import pickle
import threading
import time
from typing import Any, Callable, Protocol

_SPAWN = mp.get_context("spawn")
ERROR_BYTES = 2048


class StopSignal(Protocol):
    def is_set(self) -> bool: ...
    def set(self) -> None: ...
    def wait(self, timeout: float | None = None) -> bool: ...


class SharedFlag:
    """A one-way flag between the harness and a spawned client, in shared memory, without a lock.

    Why not ``multiprocessing.Event``: it is a condition variable over semaphores, and a process
    SIGKILLed inside its ``wait`` leaves itself counted as a sleeper that never wakes, so the other
    side's ``set`` (``notify_all``) waits for that dead sleeper forever. A harness SIGKILLed while
    it waited for a client to be ready left the client hung in ``ready.set()``, never reaching its
    check for a dead parent: a producer still alive 40 minutes after its harness was killed. A
    byte nobody locks cannot be left held by the dead; its waiters poll (every 10 ms).
    """

    def __init__(self) -> None:
        self._v = _SPAWN.RawValue("b", 0)

    def is_set(self) -> bool:
        return bool(self._v.value)

    def set(self) -> None:
        self._v.value = 1

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._v.value:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            time.sleep(0.01 if left is None else min(0.01, left))
        return True


class Control:
    """What the client body gets: stop request, counters, readiness, error slot, deadline."""

    def __init__(self, ncounters: int, use_process: bool):
        ev = SharedFlag if use_process else threading.Event
        self.stop: StopSignal = ev()
        self.ready: StopSignal = ev()
        self.counters = _SPAWN.Array("q", ncounters, lock=False)
        self.error = _SPAWN.Array("c", ERROR_BYTES, lock=False)
        #: seconds the body may spend finishing (flush) after stop was requested
        self.finish_timeout = _SPAWN.Value("d", 10.0, lock=False)
        #: the harness's pid, watched from a child process (None in thread mode)
        self.parent_pid: int | None = os.getpid() if use_process else None
        self._checked_parent = 0.0

    def should_stop(self) -> bool:
        """Stop requested, or the parent (the harness) is gone.

        Why the parent check: a harness killed with SIGKILL cannot ask its spawned clients
        to stop, and an orphaned producer would keep writing to the cluster and to a history
        nobody will check. It notices within ~0.2 s, finishes its history and exits.
        """
        if self.stop.is_set():
            return True
        now = time.monotonic()
        if self.parent_pid is not None and now - self._checked_parent >= 0.2:
            self._checked_parent = now
            if os.getppid() != self.parent_pid:
                self.stop.set()
                self.finish_timeout.value = min(self.finish_timeout.value, 2.0)
                return True
        return False

    def set_error(self, message: str) -> None:
        raw = message.encode("utf-8", "replace")[: ERROR_BYTES - 1]
        self.error.value = raw

    def get_error(self) -> str | None:
        raw = bytes(self.error.value)
        return raw.decode("utf-8", "replace") if raw else None


def _run_body(body: Callable[..., None], control: Control, spec: Any) -> None:
    try:
        body(spec, control)
    except BaseException as exc:  # report any crash to the parent as one line, then end
        detail = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
        control.set_error(f"{type(exc).__name__}: {detail}")
        control.ready.set()


class Worker:
    """Start ``body(spec, control)`` in a spawned process (default) or a thread."""

    def __init__(self, name: str, body: Callable[..., None], spec: Any, ncounters: int,
                 mode: str = "process"):
        if mode not in ("process", "thread"):
            raise ValueError(f"{name}: mode must be 'process' or 'thread', got {mode!r}")
        if mode == "process":
            try:
                pickle.dumps(spec)
            except Exception as exc:
                raise TypeError(
                    f"{name}: its settings (e.g. the `now` clock) cannot be sent to a child process "
                    f"({exc}); pass a picklable clock such as RunClock().now, or mode='thread'"
                ) from None
        self.name = name
        self.mode = mode
        self.control = Control(ncounters, mode == "process")
        self._body, self._spec = body, spec
        self._proc: Any = None

    def start(self, ready_timeout: float = 120.0, on_spawn: Callable[[int], None] | None = None) -> None:
        """Start the child and wait until its client is ready. Why 120 s: a spawned interpreter
        importing confluent_kafka and its first metadata took over 30 s on a 2-core machine at
        load 40 (six Kafka JVMs starting beside other jobs); a client that cannot start in two
        minutes is an infrastructure failure.

        ``on_spawn(pid)``: called as soon as the child process exists, before the wait (the
        harness writes its ledger entry there, so a harness killed while a client starts leaves
        a process ``faultline heal`` knows)."""
        args = (self._body, self.control, self._spec)
        if self.mode == "process":
            self._proc = _SPAWN.Process(target=_run_body, args=args, name=self.name, daemon=True)
        else:
            self._proc = threading.Thread(target=_run_body, args=args, name=self.name, daemon=True)
        self._proc.start()
        if on_spawn is not None and self.mode == "process":
            on_spawn(self._proc.pid)
        deadline = time.monotonic() + ready_timeout
        while not self.control.ready.wait(0.05):
            if not self._proc.is_alive():
                raise RuntimeError(f"{self.name}: client exited before it was ready "
                                   f"({self.control.get_error() or 'no error reported'})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: client did not start within {ready_timeout:.0f}s")
        err = self.control.get_error()
        if err:
            self._proc.join(5.0)
            raise RuntimeError(f"{self.name}: {err}")

    @property
    def pid(self) -> int | None:
        return getattr(self._proc, "pid", None)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def stop(self, timeout: float) -> None:
        """Ask the body to finish within ``timeout`` s; kill a child that does not."""
        if self._proc is None:
            return
        self.control.finish_timeout.value = max(0.0, timeout)
        self.control.stop.set()
        self._proc.join(timeout + 5.0)
        if self._proc.is_alive() and self.mode == "process":
            self._proc.kill()
            self._proc.join(5.0)
            self.control.set_error(self.control.get_error() or
                                   f"did not finish within {timeout + 5.0:.0f}s; killed")

    def error(self) -> str | None:
        return self.control.get_error()


class WorkerBacked:
    """What every workload exposes about its worker (pid for the ledger, start, liveness);
    subclasses set ``self._worker`` in their constructor."""

    _worker: Worker

    @property
    def pid(self) -> int | None:
        return self._worker.pid

    def start(self, on_spawn: Callable[[int], None] | None = None) -> None:
        self._worker.start(on_spawn=on_spawn)

    def alive(self) -> bool:
        return self._worker.alive()


#: a reader's two counters (its worker's ``Control.counters``): records read, errors
READ, ERRORS = range(2)


class ReaderBacked(WorkerBacked):
    """A workload that reads (the consumer, the epochless reader): its counters are READ and
    ERRORS, reported as the history's ``ok`` / ``info`` counts."""

    def stats(self) -> dict[str, int]:
        c = self._worker.control.counters
        return {"ok": c[READ], "info": c[ERRORS]}

    def error(self) -> str | None:
        return self._worker.error()

    def stop(self, timeout: float = 10.0) -> dict[str, int]:
        self._worker.stop(timeout)
        return self.stats()


def client_logger(name: str, path: str) -> logging.Logger:
    """A logger for librdkafka's own log lines, into a file beside the history.

    Why: librdkafka otherwise writes connection errors to the harness's stderr, in the
    middle of its progress line; in a file next to the history they are evidence.
    """
    logger = logging.getLogger(f"faultline.client.{name}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    if not logger.handlers:
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(created).3f %(levelname)s %(message)s"))
        logger.addHandler(handler)
    return logger
