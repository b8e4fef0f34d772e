"""Ctrl-C and SIGTERM for the long-running commands (run, shrink, suite): one way for all.

Why: faults must heal when a person presses Ctrl-C or a scheduler sends SIGTERM. The first
signal becomes an exception in the main thread, so the command's ``except``/``finally`` heals
and stops what it started; a second signal while that happens is ignored, because an
impatient second Ctrl-C must not cut the heal short. The previous handlers come back when the
block ends.
"""
from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def signals_raise(exc: type[BaseException], stop: threading.Event | None = None) -> Iterator[None]:
    """Within the block, the first SIGINT/SIGTERM sets ``stop`` (for worker threads to see)
    and raises ``exc(signal name)``; later ones only set ``stop``."""
    fired = 0

    def on_signal(signum: int, _frame: Any) -> None:
        nonlocal fired
        if stop is not None:
            stop.set()
        fired += 1
        if fired == 1:
            raise exc(signal.Signals(signum).name)

    old = {s: signal.signal(s, on_signal) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
