"""One monotonic clock for a whole run.

Why: histories, nemesis events, the observer and the cluster's own event logs must be
joined on time. Every faultline process measures ``t`` as seconds on ``time.monotonic()``
minus the run's origin; the origin's wall-clock time is recorded in ``run.json``
(``wall_at_t0``) so event logs that only carry wall time (kraftsim, remote brokers) can be
mapped onto the same axis: ``t = wall - wall_at_t0``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class RunClock:
    """Seconds since the run started, monotonic; ``wall_at_t0`` anchors it to wall time."""
    mono_at_t0: float = field(default_factory=time.monotonic)
    wall_at_t0: float = field(default_factory=time.time)

    def now(self) -> float:
        return time.monotonic() - self.mono_at_t0

    def from_wall(self, wall: float) -> float:
        """Map a wall-clock timestamp (e.g. from a broker's event log) onto the run clock."""
        return wall - self.wall_at_t0
