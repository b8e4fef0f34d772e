"""The run timeline as one inline SVG (matplotlib), readable at any run length.

Why one figure with a shared time axis: the question a reviewer asks of a loss is "what
happened just before it was acknowledged?" — faults, elections, ISR changes, AlterPartition
answers (seed 000's race: a delayed AlterPartition accepted after a wipe; seed 003 §2.9.2)
and the ack itself must line up vertically. Fault intervals are shaded across all panels.

Why the size stays bounded: throughput is re-binned to at most ``MAX_POINTS`` points,
markers are de-duplicated to one per partition per pixel-sized time bucket (with counts
for lost writes), and at most ``MAX_PARTITION_ROWS`` partitions are drawn (those with lost
writes first). Text stays text (``svg.fonttype = none``) so the page stays small and
searchable.
"""
from __future__ import annotations

import html
import io
import re
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display here; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from harness.report.controllers import Segment  # noqa: E402
from harness.report.controllers import name as controller_name  # noqa: E402
from harness.report.events import leader_intervals  # noqa: E402

MAX_POINTS = 1500
MAX_PARTITION_ROWS = 24
MAX_ANNOTATIONS = 12
BUCKETS = 1200  # marker de-duplication resolution across the run
#: above this many marks the dense layers are embedded as one bitmap inside the SVG: a
#: nightly run's thousands of markers would otherwise be megabytes of <use> elements
RASTER_ABOVE = 2500
RASTER_DPI = 130

FAULT_COLOURS = ["#f4a261", "#9ecae1", "#c7e9c0", "#dadaeb", "#fdd0a2", "#fcbba1", "#d9d9d9"]
LEADER_CMAP = plt.get_cmap("tab10")


def _svg(fig: plt.Figure, salt: str) -> str:
    """Serialise to an inline ``<svg>`` element: no XML prolog, ids salted per figure so two
    figures on one page never share a clip-path id."""
    buf = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", bbox_inches="tight", dpi=RASTER_DPI)
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    # let the page scale it: keep the viewBox, drop fixed pt sizes
    text = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 class="plot" role="img"', text, count=1)
    return text


def rebin_throughput(tp: pd.DataFrame, max_points: int = MAX_POINTS) -> tuple[pd.DataFrame, int]:
    """Per-second rows → at most ``max_points`` bins: counts summed per second (kept as a
    rate), p50 averaged and p99 as the bin's worst, so a latency spike is never smoothed away."""
    if len(tp):
        # seconds with no completed send are absent from the aggregate: they are zero sends,
        # not a line drawn across the gap (latency stays unknown there)
        full = pd.RangeIndex(int(tp["second"].min()), int(tp["second"].max()) + 1, name="second")
        tp = tp.set_index(tp["second"].astype("int64")).drop(columns=["second"])
        tp = tp[~tp.index.duplicated()].reindex(full)
        tp[["ok", "fail", "info"]] = tp[["ok", "fail", "info"]].fillna(0)
        tp = tp.reset_index()
    if len(tp) <= max_points:
        return tp, 1
    width = int(-(-len(tp) // max_points))
    b = (tp["second"] // width) * width
    g = tp.groupby(b)
    out = pd.DataFrame({
        "second": g["second"].min(),
        "ok": g["ok"].sum() / width, "fail": g["fail"].sum() / width, "info": g["info"].sum() / width,
        "latency_p50_ms": g["latency_p50_ms"].mean(), "latency_p99_ms": g["latency_p99_ms"].max(),
    }).reset_index(drop=True)
    return out, width


def _shade(ax: plt.Axes, faults: pd.DataFrame, colours: dict[str, str]) -> None:
    for f in faults.itertuples():
        ax.axvspan(f.start, f.stop, color=colours[f.fault], alpha=0.2, lw=0, zorder=0)


MAX_FAULT_LANES = 12
#: failed faults drawn one patch each, with their reason on hover; more are one collection
MAX_FAILED_TITLES = 200


def fault_lanes(faults: pd.DataFrame) -> list[str]:
    """One lane per ``fault[targets]`` so overlapping faults stay apart; when there are more
    than ``MAX_FAULT_LANES`` combinations, one lane per fault kind."""
    if faults.empty:
        return []
    labels = list(dict.fromkeys(f"{f}[{t}]" for f, t in zip(faults["fault"], faults["targets"])))
    return labels if len(labels) <= MAX_FAULT_LANES else list(dict.fromkeys(faults["fault"]))


def fault_rows(faults: pd.DataFrame) -> tuple[list[str], list[int]]:
    """Lane labels, top to bottom, and each fault's lane (in ``faults``' order): the lanes of
    :func:`fault_lanes`, each split into as many rows as it has faults active at once, so
    overlapping faults of one lane (two kills of a random mix with ``concurrency``, one
    per-kind lane) are drawn one above the other instead of on top of each other."""
    keys = fault_lanes(faults)
    if not keys:
        return [], []
    by_kind = keys[0] in set(faults["fault"])
    ends: dict[str, list[float]] = {k: [] for k in keys}    # per lane: where each of its rows is free
    sub: list[tuple[str, int]] = [("", 0)] * len(faults)
    for pos in sorted(range(len(faults)), key=lambda n: (faults["start"].iat[n], n)):
        f = faults.iloc[pos]
        key = f["fault"] if by_kind else f"{f['fault']}[{f['targets']}]"
        rows = ends[key]
        i = next((j for j, e in enumerate(rows) if e <= f["start"]), len(rows))
        if i == len(rows):
            rows.append(0.0)
        rows[i] = max(f["stop"], f["start"])
        sub[pos] = (key, i)
    label = lambda k, i: k if i == 0 else f"{k} ({i + 1})"  # noqa: E731
    labels = [label(k, i) for k in keys for i in range(max(len(ends[k]), 1))]
    index = {lab: n for n, lab in enumerate(labels)}
    return labels, [index[label(k, i)] for k, i in sub]


def _dedupe(df: pd.DataFrame, end_t: float, by: str = "row") -> pd.DataFrame:
    if df.empty:
        return df.assign(n=pd.Series(dtype=int))
    width = max(end_t, 1.0) / BUCKETS
    b = (df["t"] // width).astype("int64")
    g = df.assign(_b=b).groupby([by, "_b"], sort=False)
    out = g.agg(t=("t", "min"), n=("t", "size")).reset_index()
    return out


CONTROLLER_CMAP = plt.get_cmap("Set2")
CONTROLLER_LANE = "active controller"


def _controller_lane(ax: plt.Axes, segments: list[Segment], end_t: float, names: dict[int, str],
                     elected: list[float]) -> None:
    """One lane: a bar per stretch of one controller's leadership, coloured by controller,
    labelled ``id · e<epoch>`` where wide enough; hatched where no controller was known to
    lead; a black tick at every change, so a re-election of the same controller in a new
    epoch is visible too; ▼ at each ``controller_elected`` event when the cluster logged them."""
    ids = sorted({s.leader for s in segments if s.leader is not None})
    colour = {c: CONTROLLER_CMAP(i % 8) for i, c in enumerate(ids)}
    bars, fcs, gaps = [], [], []
    for s in segments:
        b = s.start + max(s.stop - s.start, end_t / 800)
        box = [(s.start, -0.32), (b, -0.32), (b, 0.32), (s.start, 0.32)]
        if s.leader is None:
            gaps.append(box)
        else:
            bars.append(box)
            fcs.append(colour[s.leader])
    if bars:
        ax.add_collection(PolyCollection(bars, facecolors=fcs, edgecolors="none", zorder=2))
    if gaps:
        ax.add_collection(PolyCollection(gaps, facecolors="white", edgecolors="#555555", hatch="////",
                                         linewidths=0.4, zorder=2))
    changes = [s.start for s in segments[1:]]
    if changes:
        ax.vlines(changes, -0.42, 0.42, color="black", lw=0.9, zorder=3)
    labelled = 0
    for s in segments:
        if s.leader is None or s.stop - s.start < end_t / 30 or labelled >= 2 * MAX_ANNOTATIONS:
            continue
        ax.text((s.start + min(s.stop, end_t)) / 2, 0, f"{s.leader} · e{s.epoch}", ha="center", va="center",
                fontsize=7, color="#222222", zorder=4, clip_on=True)
        labelled += 1
    shown = [t for t in elected if 0 <= t <= end_t]
    if shown:
        ax.scatter(shown, [0.42] * len(shown), marker="v", s=18, color="black", zorder=5, clip_on=False)
    ax.set_yticks([0], [CONTROLLER_LANE], fontsize=7.5)
    ax.set_ylim(-0.6, 0.6)
    ax.tick_params(axis="y", length=0)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    handles: list[Any] = [Patch(facecolor=colour[c], label=f"controller {controller_name(c, names)}") for c in ids]
    if shown:
        handles.append(Line2D([], [], marker="v", ls="none", color="black", markersize=5, label="controller elected"))
    if gaps:
        handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="////", label="no active controller"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.1), fontsize=7, frameon=False,
              ncol=2 if len(handles) > 3 else 1)


def timeline_svg(*, end_t: float, throughput: pd.DataFrame | None, faults: pd.DataFrame,
                 phases: pd.DataFrame, rows: list[str], intervals: dict[str, list[tuple[float, Any]]],
                 elections: pd.DataFrame, isr: pd.DataFrame, alters: pd.DataFrame,
                 lost: pd.DataFrame, hidden_partitions: int, controllers: list[Segment] | None = None,
                 controller_names: dict[int, str] | None = None, controller_elected: list[float] | None = None) -> str:
    """The whole-run figure: throughput, ack latency, the active controller (when given:
    harness/report/controllers.py), fault lanes, then one row per partition with leader
    intervals, elections, ISR changes, AlterPartition answers and lost writes at ack time."""
    end_t = max(end_t, 1.0)
    # phases after the run (check, report) happen minutes later: drawing them would stretch
    # the axis (and a label outside it would stretch the whole SVG)
    phases = phases[phases["t"] <= end_t] if not phases.empty else phases
    n_rows = max(len(rows), 1)
    has_tp = throughput is not None and not throughput.empty
    lanes, lane_of = fault_rows(faults)
    titles: dict[str, str] = {}     # gid -> hover text (failed faults)
    heights = ([1.6, 1.2] if has_tp else []) + ([0.45] if controllers else []) \
        + ([0.22 * len(lanes) + 0.3] if lanes else []) + [0.42 * n_rows + 0.6]
    fig, axes = plt.subplots(len(heights), 1, sharex=True, figsize=(12, sum(heights) + 0.6),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    axes = list(axes[:, 0])
    fault_names = list(dict.fromkeys(faults["fault"])) if not faults.empty else []
    colours = {f: FAULT_COLOURS[i % len(FAULT_COLOURS)] for i, f in enumerate(fault_names)}
    for ax in axes:
        _shade(ax, faults, colours)
        for p in phases.itertuples():
            ax.axvline(p.t, color="#999999", lw=0.6, ls=":", zorder=1)
        ax.grid(axis="x", color="#e5e5e5", lw=0.5)

    if has_tp:
        tp, width = rebin_throughput(throughput)  # type: ignore[arg-type]
        ax = axes[0]
        unit = "sends/s" if width == 1 else f"sends/s ({width}s bins)"
        ax.plot(tp["second"], tp["ok"], color="#2a9d8f", lw=1, label="acked (ok)")
        ax.plot(tp["second"], tp["fail"], color="#d62828", lw=1, label="failed")
        ax.plot(tp["second"], tp["info"], color="#f77f00", lw=1, label="indeterminate (info)")
        ax.set_ylabel(unit)
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1), fontsize=8, frameon=False)
        lat = axes[1]
        lat.plot(tp["second"], tp["latency_p50_ms"], color="#457b9d", lw=1, label="ack latency p50")
        lat.plot(tp["second"], tp["latency_p99_ms"], color="#1d3557", lw=1, ls="--", label="ack latency p99")
        lat.set_ylabel("ms")
        hi = tp["latency_p99_ms"].max()
        lo = tp["latency_p50_ms"][tp["latency_p50_ms"] > 0].min()
        if pd.notna(hi) and pd.notna(lo) and lo > 0 and hi / lo > 50:
            lat.set_yscale("log")
        lat.legend(loc="upper left", bbox_to_anchor=(1.005, 1), fontsize=8, frameon=False)

    if controllers:
        _controller_lane(axes[2 if has_tp else 0], controllers, end_t, controller_names or {},
                         controller_elected or [])
    for i, p in enumerate(phases.itertuples()):
        # alternate heights so phases a second apart do not print over each other
        axes[0].text(p.t, 1.0 + 0.07 * (i % 3), f" {p.phase}", transform=axes[0].get_xaxis_transform(),
                     fontsize=7, color="#666666", va="bottom", ha="left")
    if lanes:
        fax = axes[-2]
        lane_y = {label: len(lanes) - 1 - i for i, label in enumerate(lanes)}
        boxes, fcs, ecs, lws = [], [], [], []
        failed_boxes: list[tuple[float, float, float, str]] = []
        has_failed = "failed" in faults.columns
        for f, lane in zip(faults.itertuples(), lane_of):  # one collection: a nightly run has hundreds of faults
            y = len(lanes) - 1 - lane
            b = f.start + max(f.stop - f.start, end_t / 500)
            if has_failed and isinstance(f.failed, str) and f.failed:
                failed_boxes.append((f.start, b, y, f"{f.fault}[{f.targets}] failed to start: {f.failed}"))
                continue
            boxes.append([(f.start, y - 0.35), (b, y - 0.35), (b, y + 0.35), (f.start, y + 0.35)])
            fcs.append(colours[f.fault])
            ecs.append("#555555" if f.healed else "#d00000")  # red outline: never healed
            lws.append(0.5 if f.healed else 1.2)
        fax.add_collection(PolyCollection(boxes, facecolors=fcs, edgecolors=ecs, linewidths=lws, zorder=3))
        # a fault whose start failed (healed at once): hatched red, its reason on hover (<title>)
        for n, (a, b, y, why) in enumerate(failed_boxes[:MAX_FAILED_TITLES]):
            r = Rectangle((a, y - 0.35), max(b - a, end_t / 250), 0.7, facecolor="#fcbba1", edgecolor="#d00000",
                          hatch="xxxx", linewidth=1.0, zorder=4)
            r.set_gid(f"failed-fault-{n}")
            fax.add_patch(r)
            titles[f"failed-fault-{n}"] = why
        if failed_boxes[MAX_FAILED_TITLES:]:
            rest = [[(a, y - 0.35), (max(b, a + end_t / 250), y - 0.35), (max(b, a + end_t / 250), y + 0.35), (a, y + 0.35)]
                    for a, b, y, _ in failed_boxes[MAX_FAILED_TITLES:]]
            fax.add_collection(PolyCollection(rest, facecolors="#fcbba1", edgecolors="#d00000", hatch="xxxx",
                                              linewidths=1.0, zorder=4))
        fax.set_yticks(list(lane_y.values()), list(lane_y.keys()), fontsize=7.5)
        fax.set_ylim(-0.6, len(lanes) - 0.4)
        fax.tick_params(axis="y", length=0)
    ax = axes[-1]
    ypos = {k: n_rows - 1 - i for i, k in enumerate(rows)}
    leaders_seen: set[int] = set()
    # one collection for all leader bars and one for all leaderless stretches: thousands of
    # intervals in a long run would otherwise be thousands of artists (seconds each to lay out)
    bars, colours_, gaps = [], [], []
    for key in rows:
        y = ypos[key]
        for a, b, leader in leader_intervals(intervals.get(key, []), end_t):
            box = [(a, y - 0.18), (b, y - 0.18), (b, y + 0.18), (a, y + 0.18)]
            if leader is None:
                gaps.append(box)
            else:
                leaders_seen.add(int(leader))
                bars.append(box)
                colours_.append(LEADER_CMAP(int(leader) % 10))

    def rows_of(df: pd.DataFrame) -> pd.DataFrame:
        if df.empty:
            return pd.DataFrame(columns=["t", "row"])
        d = df[df["partition"].isin(ypos)]
        return pd.DataFrame({"t": d["t"].astype(float), "row": d["partition"].map(ypos)}).dropna()

    el = _dedupe(rows_of(elections), end_t)
    ic = _dedupe(rows_of(isr), end_t)
    acc = alters[alters["accepted"].astype(bool)] if not alters.empty else alters
    rej = alters[~alters["accepted"].astype(bool)] if not alters.empty else alters
    a = _dedupe(rows_of(acc), end_t)
    rd = _dedupe(rows_of(rej), end_t)
    lw = _dedupe(rows_of(lost), end_t)
    raster = len(bars) + len(gaps) + len(el) + len(ic) + len(a) + len(rd) + len(lw) > RASTER_ABOVE

    if bars:
        ax.add_collection(PolyCollection(bars, facecolors=colours_, alpha=0.8, linewidths=0, zorder=2,
                                         rasterized=raster))
    if gaps:
        ax.add_collection(PolyCollection(gaps, facecolors="white", edgecolors="#555555", hatch="////",
                                         linewidths=0.4, zorder=2, rasterized=raster))

    if not el.empty:
        ax.scatter(el["t"], el["row"] + 0.3, marker="v", s=22, color="black", zorder=4, label="leader election",
                   rasterized=raster)
    if not ic.empty:
        ax.scatter(ic["t"], ic["row"], marker="|", s=60, color="#264653", zorder=4, label="ISR change",
                   rasterized=raster)
    if not a.empty:
        ax.scatter(a["t"], a["row"] - 0.3, marker="o", s=14, facecolors="none", edgecolors="#2a9d8f",
                   zorder=4, label="AlterPartition accepted", rasterized=raster)
    if not rd.empty:
        ax.scatter(rd["t"], rd["row"] - 0.3, marker="X", s=36, color="#d62828", zorder=5,
                   label="AlterPartition rejected", rasterized=raster)
        for rec in rej[rej["partition"].isin(ypos)].head(MAX_ANNOTATIONS).itertuples():
            ax.annotate(str(rec.error), (float(rec.t), ypos[rec.partition] - 0.3), fontsize=6.5,
                        color="#d62828", xytext=(3, -7), textcoords="offset points", zorder=6)
    if not lw.empty:
        sizes = 40 + 20 * (lw["n"].clip(upper=50) ** 0.5)
        ax.scatter(lw["t"], lw["row"], marker="*", s=sizes, color="#d00000", edgecolors="black",
                   linewidths=0.4, zorder=7, label="lost write (at ack time)", rasterized=raster)
        if has_tp:
            axes[0].scatter(lw["t"], [0] * len(lw), marker="*", s=40, color="#d00000", zorder=7,
                            clip_on=False, rasterized=raster)
    if ypos:
        ax.set_yticks(list(ypos.values()), list(ypos.keys()), fontsize=8)
    else:
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no partition events recorded", transform=ax.transAxes, ha="center",
                va="center", color="#666666", fontsize=9)
    ax.set_ylim(-0.7, n_rows - 0.3)
    ax.set_xlim(0, end_t)
    ax.set_xlabel("seconds since run start (run clock)"
                  + (f" — {hidden_partitions} more partitions not drawn" if hidden_partitions else ""))
    handles, labels = ax.get_legend_handles_labels()
    from matplotlib.patches import Patch
    handles += [Patch(facecolor=LEADER_CMAP(b % 10), alpha=0.8, label=f"leader broker {b}")
                for b in sorted(leaders_seen)]
    if gaps:
        handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="////", label="no leader"))
    handles += [Patch(facecolor=colours[f], alpha=0.45, label=f"fault: {f}") for f in fault_names]
    if titles or ("failed" in faults.columns and faults["failed"].notna().any()):
        handles.append(Patch(facecolor="#fcbba1", edgecolor="#d00000", hatch="xxxx", label="failed to start (healed)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1), fontsize=8, frameon=False)
    fig.subplots_adjust(hspace=0.08)
    return _with_titles(_svg(fig, "timeline"), titles)


def _with_titles(svg: str, titles: dict[str, str]) -> str:
    """Hover text for the elements drawn with a gid: an SVG ``<title>`` as their first child
    (browsers show it as a tooltip; the page stays script-free)."""
    for gid, text in titles.items():
        svg = svg.replace(f'<g id="{gid}">', f'<g id="{gid}"><title>{html.escape(text)}</title>', 1)
    return svg


def lost_by_partition_svg(counts: pd.Series) -> str:
    """A bar per partition with lost writes (the top 30), for runs where losses spread."""
    top = counts.sort_values(ascending=False).head(30)
    fig, ax = plt.subplots(figsize=(12, 0.25 * len(top) + 0.8))
    ax.barh(list(top.index)[::-1], list(top.values)[::-1], color="#d00000")
    ax.set_xlabel("lost acknowledged writes")
    ax.tick_params(axis="y", labelsize=8)
    return _svg(fig, "lostbars")
