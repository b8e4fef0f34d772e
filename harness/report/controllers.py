"""The active controller over the run: which controller led the KRaft quorum in which epoch.

Why in the report: metadata decisions (leader elections, ISR changes, fencing) are made by
the active controller, the leader of the ``__cluster_metadata`` Raft quorum (KIP-595). A
reviewer reading a loss needs to see, on the same time axis as the faults, whether the
controller moved — and when no controller led at all.

Two sources, the first that has data wins:

1. ``controller-quorum.jsonl``: the observer's DescribeQuorum answers
   (workloads/controller_quorum.py), on kraftsim and real Kafka alike. A line holds until the
   next; a line with an error and no leader is a stretch with no known active controller;
2. kraftsim's ``controller_elected`` / ``controller_resigned`` events (kraftsim/raft/client.py)
   in ``cluster-logs/*/events.jsonl``: elected starts a leadership, the same leader's resign
   of that epoch ends it. Epochs never go back (KafkaRaftClient: a lower epoch is stale), so
   an event of an older epoch than the current one is ignored.

When is there a lane? When the quorum is more than one controller, or leadership changed or
lapsed during the run. A single controller leading one epoch throughout says nothing the
reader needs on the timeline: no lane then (the table still names it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class Segment:
    start: float
    stop: float
    leader: int | None   # None: no active controller known (error or between resign and election)
    epoch: int | None
    error: str | None
    source: str          # "DescribeQuorum" or "controller events"


def _int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, float):
        return None if math.isnan(v) else int(v)
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _merge(points: list[tuple[float, int | None, int | None, str | None]], end_t: float,
           source: str) -> list[Segment]:
    """State changes (t, leader, epoch, error) → segments; each holds until the next change."""
    out: list[Segment] = []
    cur: tuple[float, int | None, int | None, str | None] | None = None
    for p in sorted(points, key=lambda x: x[0]):
        if cur is not None and p[1:] == cur[1:]:
            continue
        if cur is not None:
            out.append(Segment(cur[0], p[0], cur[1], cur[2], cur[3], source))
        cur = p
    if cur is not None:
        out.append(Segment(cur[0], max(end_t, cur[0]), cur[1], cur[2], cur[3], source))
    return out


def from_quorum(quorum: pd.DataFrame | None, end_t: float) -> tuple[list[Segment], int]:
    """Segments from the observer's DescribeQuorum lines, and the largest voter count seen."""
    if quorum is None or quorum.empty:
        return [], 0
    points = []
    for r in quorum.itertuples():
        leader, epoch = _int(r.leader_id), _int(r.leader_epoch)
        err = r.error if isinstance(r.error, str) and r.error else None
        if leader is None:
            points.append((float(r.t), None, None, err or "NO_LEADER"))
        else:
            points.append((float(r.t), leader, epoch, None))
    voters = quorum["voters"].dropna()
    return _merge(points, end_t, "DescribeQuorum"), int(voters.max()) if len(voters) else 0


def from_events(events: pd.DataFrame, end_t: float) -> tuple[list[Segment], int]:
    """Segments from kraftsim's controller_elected / controller_resigned events."""
    if events is None or events.empty or "event" not in events.columns:
        return [], 0
    ev = events[events["event"].isin(["controller_elected", "controller_resigned"])]
    ev = ev[ev["t"].notna()] if "t" in ev.columns else ev.iloc[0:0]
    if ev.empty:
        return [], 0
    points: list[tuple[float, int | None, int | None, str | None]] = []
    leader: int | None = None
    epoch = -1
    voters = 0
    for r in ev.sort_values("t", kind="stable").to_dict("records"):
        e, who = _int(r.get("epoch")), _int(r.get("leader", r.get("node")))
        if e is None or e < epoch:
            continue
        if r["event"] == "controller_elected":
            leader, epoch = who, e
            points.append((float(r["t"]), who, e, None))
            v = r.get("voters")
            if isinstance(v, (list, tuple)):
                voters = max(voters, len(v))
        elif leader is not None and who == leader and e == epoch:
            leader = None
            points.append((float(r["t"]), None, None, f"resigned ({r.get('reason') or '?'})"))
    return _merge(points, end_t, "controller events"), voters


def elected_times(events: pd.DataFrame) -> list[float]:
    """Run-clock times of kraftsim's ``controller_elected`` events: the lane marks them, since
    a DescribeQuorum line is only written when an answer arrives (after the election)."""
    if events is None or events.empty or "event" not in events.columns or "t" not in events.columns:
        return []
    t = events.loc[events["event"] == "controller_elected", "t"]
    return sorted(float(x) for x in t.dropna())


def active_controller(quorum: pd.DataFrame | None, events: pd.DataFrame, end_t: float) -> tuple[list[Segment], int]:
    """(segments, voter count) from the first source with data (see the module docstring)."""
    segs, voters = from_quorum(quorum, end_t)
    if segs:
        return segs, voters
    return from_events(events, end_t)


def hosts(events: pd.DataFrame) -> dict[int, str]:
    """Controller node id -> the host name the run knows it by (``cluster-logs/<host>/``), so the
    lane's ``controller 1001`` can be matched with a fault's ``kill[controller-2]``."""
    if events is None or events.empty or not {"node", "host", "role"} <= set(events.columns):
        return {}
    c = events[(events["role"] == "controller") & events["node"].notna() & events["host"].notna()]
    out: dict[int, str] = {}
    for node, host in c[["node", "host"]].drop_duplicates().itertuples(index=False):
        n = _int(node)
        if n is not None and isinstance(host, str) and host != "proxy":
            out.setdefault(n, host)
    return out


def name(leader: int, names: dict[int, str]) -> str:
    host = names.get(leader)
    return f"{leader} ({host})" if host and host != str(leader) else str(leader)


def show_lane(segments: list[Segment], voters: int) -> bool:
    if not segments:
        return False
    led = {(s.leader, s.epoch) for s in segments if s.leader is not None}
    return voters > 1 or len(led) > 1 or any(s.leader is None for s in segments)


def table(segments: list[Segment], names: dict[int, str] | None = None) -> pd.DataFrame:
    """Active controller by epoch: one row per stretch, in time order."""
    rows = [{"epoch": s.epoch if s.leader is not None else "—",
             "active controller": name(s.leader, names or {}) if s.leader is not None else f"none ({s.error})",
             "from (s)": round(s.start, 3), "to (s)": round(s.stop, 3), "held (s)": round(s.stop - s.start, 3),
             "source": s.source} for s in segments]
    return pd.DataFrame(rows, columns=["epoch", "active controller", "from (s)", "to (s)", "held (s)", "source"])
