"""pandas tables for the report: evidence heads, lost writes with attribution, HTML.

Why pandas and not hand-built rows: the checker's evidence is already tabular (CSV/Parquet
with its own columns, which may grow); ``DataFrame.to_html`` escapes every cell and keeps
whatever columns the checker adds. Lost-write columns are looked up by their contract names
with a few aliases, so a renamed column degrades to an empty cell rather than a crash.
"""
from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from harness.report.events import pkey, pkey_order

#: column we show → names the checker may use for it
LOST_ALIASES: dict[str, tuple[str, ...]] = {
    "topic": ("topic",),
    "partition": ("partition",),
    "offset": ("offset", "acked_offset"),
    "value": ("value",),
    "ack t (s)": ("ack_t", "t_ack", "acked_t", "ack_time", "ok_t", "t"),
    "producer": ("producer", "process"),
    "attribution": ("attribution", "attribution_summary", "cause"),
}

#: shown only when the checker's CSV has them (docs/verdict-format.md, lost_write.csv)
LOST_OPTIONAL: dict[str, tuple[str, ...]] = {
    "missed t (s)": ("miss_t",),
    "missed by": ("miss_by",),
    "lost because": ("lost_because",),
}

#: identity keys of an attribution summary; everything else is shown as its explanation
_ID_KEYS = {"topic", "partition", "offset", "value", "process", "producer", "t", "ack_t"}


def to_html(df: pd.DataFrame, table_id: str | None = None, cls: str = "data",
            breaks: tuple[str, ...] = (), html_cols: tuple[str, ...] = ()) -> str:
    """A DataFrame as an HTML table, every cell escaped. Columns in ``breaks`` show the
    checker's ``" | "``-joined categories one per line (pandas would print a newline as
    ``\\n``, so those cells are escaped here and joined with ``<br>``). Columns in
    ``html_cols`` hold HTML this module built from escaped parts (:func:`evidence_cell`)."""
    if df is None or df.empty:
        return '<p class="empty">none</p>'
    if breaks or html_cols:
        df = df.copy()
        for c in df.columns:
            if df[c].dtype == object and c not in html_cols:
                df[c] = [html.escape(str(v)) if v is not None and v == v else "" for v in df[c]]
                if c in breaks:
                    df[c] = df[c].str.replace(" | ", "<br>", regex=False)
        return df.to_html(index=False, border=0, classes=cls, table_id=table_id, na_rep="", escape=False,
                          float_format=lambda x: f"{x:.3f}".rstrip("0").rstrip("."))
    return df.to_html(index=False, border=0, classes=cls, table_id=table_id, na_rep="", escape=True,
                      float_format=lambda x: f"{x:.3f}".rstrip("0").rstrip("."))


def evidence_cell(mechanism: str | None, label: str | None, evidence: Any) -> str:
    """A lost write's attribution cell: its partition's loss mechanism (checkers/stories.py) as a
    label, the raw evidence (the checker's one-line attribution, a category per line) folded in
    a ``<details>`` - a reader scans labels and opens the evidence of the row in doubt."""
    if mechanism is None:     # a verdict without loss stories: the evidence as it is, a category per line
        return "<br>".join(html.escape(part) for part in str(evidence or "").split(" | "))
    mech = mechanism
    head = (f'<span class="mech mech-{html.escape(mech)}" title="{html.escape(label or "")}">'
            f'{html.escape(mech)}</span>')
    if not evidence:
        return head
    body = "<br>".join(html.escape(part) for part in str(evidence).split(" | "))
    opened = " open" if mech == "unexplained" else ""   # nothing to summarise it by: show it
    return f'{head}<details class="evidence"{opened}><summary>raw evidence</summary>{body}</details>'


def story_index(verdict: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """verdict.stories by partition key (``topic@partition``)."""
    out = {}
    for st in (verdict or {}).get("stories") or []:
        if isinstance(st, dict) and st.get("topic") is not None:
            out[pkey(st.get("topic"), st.get("partition"))] = st
    return out


def pick(df: pd.DataFrame, names: tuple[str, ...]) -> str | None:
    return next((n for n in names if n in df.columns), None)


def _summary_text(s: Any) -> str:
    """One readable line from an attribution summary, whatever shape the checker chose."""
    if s is None:
        return ""
    if isinstance(s, float) and math.isnan(s):
        return ""
    if isinstance(s, str):
        return s
    if isinstance(s, dict):
        for key in ("attribution", "summary"):  # the checker's own one-line summary
            if isinstance(s.get(key), str) and s[key]:
                return s[key]
        parts = []
        for k, v in s.items():
            if k in _ID_KEYS or v in (None, [], {}, ""):
                continue
            if isinstance(v, list):
                v = "; ".join(_summary_text(x) if isinstance(x, dict) else str(x) for x in v)
            elif isinstance(v, dict):
                v = json.dumps(v, separators=(",", ":"), default=str)
            parts.append(f"{k}: {v}")
        return " | ".join(parts)
    if isinstance(s, list):
        return "; ".join(_summary_text(x) for x in s)
    return str(s)


def attribution_index(verdict: dict[str, Any] | None) -> dict[Any, str]:
    """verdict.attribution → lookup by (topic, partition, offset) and by value."""
    idx: dict[Any, str] = {}
    for a in (verdict or {}).get("attribution") or []:
        if not isinstance(a, dict):
            continue
        text = _summary_text(a)
        if a.get("value") is not None:
            idx[("v", str(a["value"]))] = text
        if a.get("offset") is not None and a.get("partition") is not None:
            try:
                idx[("o", str(a.get("topic")), int(a["partition"]), int(a["offset"]))] = text
            except (TypeError, ValueError):
                pass
    return idx


def lost_writes_table(raw: pd.DataFrame, verdict: dict[str, Any] | None) -> pd.DataFrame:
    """Normalise the head of ``anomalies/lost_write.csv`` (or the verdict's examples) to
    partition, offset, value, ack time, producer, attribution."""
    out = pd.DataFrame(index=raw.index)
    for col, names in LOST_ALIASES.items():
        src = pick(raw, names)
        out[col] = raw[src] if src else None
    out["partition"] = [pkey(t, p) for t, p in zip(out["topic"], out["partition"])]
    idx = attribution_index(verdict)
    if idx:
        texts = []
        for topic, key, off, val, have in zip(raw.get("topic", out["topic"]), out["partition"], out["offset"],
                                              out["value"], out["attribution"]):
            t = _summary_text(have)
            if not t:
                t = idx.get(("v", str(val)), "")
            if not t:
                try:
                    part = int(str(key).rsplit("@", 1)[1])
                    t = idx.get(("o", str(topic), part, int(off)), "")
                except (ValueError, IndexError, TypeError):
                    t = ""
            texts.append(t)
        out["attribution"] = texts
    else:
        out["attribution"] = out["attribution"].map(_summary_text)
    out = out.drop(columns=["topic"])
    for col, names in LOST_OPTIONAL.items():
        src = pick(raw, names)
        if src:
            out[col] = raw[src].values
    for col in ("ack t (s)", "missed t (s)"):
        if col in out.columns and out[col].notna().any():
            out[col] = pd.to_numeric(out[col], errors="coerce").round(3)
    # attribution last: it is the long, wrapping column
    out = out[[c for c in out.columns if c != "attribution"] + ["attribution"]]
    return out.sort_values(["partition", "offset"], kind="stable").reset_index(drop=True)


def lost_summary(by_partition: dict[str, int], lost: pd.DataFrame,
                 per_partition: pd.DataFrame | None = None,
                 stories: dict[str, dict[str, Any]] | None = None) -> pd.DataFrame:
    """Per partition: how many lost, and the offset and ack-time range - of all its lost writes
    when the verdict's loss story has them (``stories[key].lost``), else of the rows shown;
    with the checker's ``aggregates/lost_by_partition.csv``, also how many were acknowledged
    and how many were still unseen at the end."""
    rows = []
    for key, n in sorted(by_partition.items(), key=lambda kv: (-kv[1], pkey_order(kv[0]))):
        part = lost[lost["partition"] == key] if not lost.empty else lost
        offs = pd.to_numeric(part["offset"], errors="coerce") if len(part) else pd.Series(dtype=float)
        ts = pd.to_numeric(part["ack t (s)"], errors="coerce") if len(part) else pd.Series(dtype=float)
        row = {"partition": key, "lost writes": int(n),
               "lowest offset": int(offs.min()) if offs.notna().any() else None,
               "highest offset": int(offs.max()) if offs.notna().any() else None,
               "first ack t (s)": round(float(ts.min()), 3) if ts.notna().any() else None,
               "last ack t (s)": round(float(ts.max()), 3) if ts.notna().any() else None}
        whole = ((stories or {}).get(key) or {}).get("lost")
        if isinstance(whole, dict):
            for col, k in (("lowest offset", "first_offset"), ("highest offset", "last_offset"),
                           ("first ack t (s)", "first_ack_t"), ("last ack t (s)", "last_ack_t")):
                if whole.get(k) is not None:
                    row[col] = whole[k]
        rows.append(row)
    cols = ["partition", "lost writes", "lowest offset", "highest offset", "first ack t (s)", "last ack t (s)"]
    df = pd.DataFrame(rows, columns=cols)
    for c in ("lowest offset", "highest offset"):
        df[c] = df[c].astype("Int64")
    if per_partition is not None and not df.empty and {"topic", "partition"} <= set(per_partition.columns):
        extra = pd.DataFrame({"partition": [pkey(t, p) for t, p in zip(per_partition["topic"], per_partition["partition"])]})
        for src, name in (("acked", "acked writes"), ("unseen_at_end", "unseen at end")):
            if src in per_partition.columns:
                extra[name] = pd.to_numeric(per_partition[src], errors="coerce").astype("Int64").values
        if len(extra.columns) > 1:
            df = df.merge(extra, on="partition", how="left")
    return df


def examples_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    flat = []
    for r in rows:
        flat.append({k: (json.dumps(v, separators=(",", ":"), default=str) if isinstance(v, (dict, list)) else v)
                     for k, v in r.items()})
    return pd.DataFrame(flat)


def rel(path: Path | None, base: Path) -> str | None:
    if path is None:
        return None
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()
