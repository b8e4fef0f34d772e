"""The shrink page (``RUN/shrink/shrink.html``): the source run's schedule and the minimal one
on one time axis, and every candidate the search tried.

Why one axis: the reader's question is "which of those faults are these?". Drawing the
minimal steps under the original ones, at their times, answers it at a glance; the steps the
shrink moved earlier or shortened show as bars that no longer line up. Self-contained HTML
(inline SVG and CSS), like report.html, so it can be attached to a bug report.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.report.jinja import env

COLOURS = {"kill": "#c0392b", "pause": "#8e44ad", "restart": "#2980b9", "reboot": "#d35400",
           "partition": "#16a085", "disk-wipe": "#7f8c8d", "alter-partition": "#2c3e50", "link": "#27ae60"}
LANE_H, BAR_H, LEFT, WIDTH = 26, 16, 90, 1100


def _bars(steps: list[Any], y0: float, scale: float, kept: set[str] | None = None) -> list[dict[str, Any]]:
    """One bar per step, stacked in sub-lanes so overlapping faults stay readable."""
    ends: list[float] = []
    bars = []
    for s in sorted(steps, key=lambda s: s.at):
        lane = next((i for i, e in enumerate(ends) if e <= s.at), None)
        if lane is None:
            ends.append(0.0)
            lane = len(ends) - 1
        ends[lane] = s.end
        bars.append({"x": LEFT + s.at * scale, "w": max(2.0, s.duration * scale), "y": y0 + lane * (BAR_H + 3),
                     "colour": COLOURS.get(s.fault, "#555"), "label": f"{s.fault} {'+'.join(s.target)}",
                     "title": s.label(), "hosts": ", ".join(s.hosts),
                     "kept": kept is None or s.source_id in kept})
    return bars


def layout(original: list[Any], minimal: list[Any]) -> dict[str, Any]:
    span = max([s.end for s in [*original, *minimal]] + [1.0])
    scale = (WIDTH - LEFT - 20) / span
    # the original steps the minimal schedule kept (moved or shortened, still the same fault)
    orig = _bars(original, 30, scale, {s.source_id for s in minimal if s.source_id})
    lanes_o = 1 + max((int((b["y"] - 30) // (BAR_H + 3)) for b in orig), default=0)
    y_min = 30 + lanes_o * (BAR_H + 3) + 24
    mini = _bars(minimal, y_min, scale)
    lanes_m = 1 + max((int((b["y"] - y_min) // (BAR_H + 3)) for b in mini), default=0)
    height = y_min + lanes_m * (BAR_H + 3) + 30
    step = 5 if span <= 60 else 10 if span <= 150 else 30
    ticks = [{"x": LEFT + t * scale, "t": t} for t in range(0, int(span) + 1, step)]
    return {"width": WIDTH, "height": height, "orig": orig, "mini": mini, "y_orig": 30, "y_min": y_min,
            "ticks": ticks, "left": LEFT, "bar_h": BAR_H, "axis_y": height - 18}


def write_shrink_page(path: Path, *, run_dir: Path, original: list[Any], minimal: list[Any], mechanism: str,
                      matches: int, replays: int, log_rows: list[dict[str, Any]], campaign: Path) -> Path:
    cands = [r for r in log_rows if r.get("type") == "candidate"]
    seen: dict[str, dict[str, Any]] = {}
    for r in cands:  # a resumed shrink logs a candidate again when it completes its replays
        seen[r["key"]] = r
    rows = [{"n": i + 1, "phase": r.get("phase"), "size": r.get("size"), "outcome": r.get("outcome"),
             "k": r.get("matches"), "of": r.get("replays_done"), "wall": r.get("wall_s"),
             "steps": "; ".join(f"{s['fault']}→{'+'.join(s['target'])}@{s['at']:g}s/{s['duration']:g}s"
                                for s in r.get("steps") or [])}
            for i, r in enumerate(seen.values())]
    html = env().get_template("shrink.html.j2").render(
        run_dir=str(run_dir), run_id=run_dir.name, mechanism=mechanism, matches=matches, replays=replays,
        original=original, minimal=minimal, svg=layout(original, minimal), candidates=rows,
        campaign=str(campaign), campaign_text=campaign.read_text(encoding="utf-8") if campaign.exists() else "")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path
