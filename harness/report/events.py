"""Cluster events → the report's per-partition views: elections, ISR changes, AlterPartition,
leader intervals and availability.

Why here and not in the checker: these are views for a person (what happened to each
partition, in order), not verdicts. The checker's attribution already says which of them
matter for each lost write; the report shows them all so the engineer can check it.

Kafka terms as in docs/seeds.md#seed-003: a partition with no leader (§2.8, "NoLeader" once the last ISR
member is fenced) is unavailable for writes; AlterPartition is the leader's ISR change
request (§2.9.2) which the controller may reject — with KIP-903 (docs/seeds.md#seed-000, "Proposed
Design") a stale broker epoch is rejected with INELIGIBLE_REPLICA (107). Leader choice per
election (docs/seeds.md#seed-004, "Leader Election Algorithm Changes"/"Eligibility Criteria") is shown
with the winner's and candidates' local log start and size when the event carries them.
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable

import pandas as pd

try:  # error names as Kafka spells them (shared contract: kio.schema.errors)
    from kio.schema.errors import ErrorCode as _ErrorCode
except ImportError:  # pragma: no cover - kio is a project dependency
    _ErrorCode = None  # type: ignore[assignment]


def error_name(code: Any, given: Any = None) -> str:
    """``INELIGIBLE_REPLICA`` for 107; the event's own name wins when it has one."""
    if isinstance(given, str) and given:
        return given
    if code is None or (isinstance(code, float) and math.isnan(code)):
        return ""
    try:
        icode = int(code)
    except (TypeError, ValueError):
        return str(code)
    if _ErrorCode is not None:
        try:
            return _ErrorCode(icode).name.upper()
        except ValueError:
            pass
    return f"error {icode}"


def pkey(topic: Any, partition: Any) -> str:
    """The ``topic@partition`` key the verdict uses for partitions (checkers/verdict.py pkey):
    ``@`` cannot occur in a Kafka topic name, so a topic with dashes and digits stays apart
    from its partition number."""
    try:
        return f"{topic}@{int(partition)}"
    except (TypeError, ValueError):
        return f"{topic}@{partition}"


def pkey_order(key: str) -> tuple[str, int, str]:
    """Sort ``topic@p`` keys naturally: faultline@2 before faultline@10."""
    topic, _, p = str(key).rpartition("@")
    return (topic, int(p), "") if p.isdigit() else (str(key), -1, "")


def _is_leader(v: Any) -> bool:
    if v is None or isinstance(v, bool):
        return False
    try:
        return not math.isnan(float(v)) and int(v) >= 0
    except (TypeError, ValueError):
        return False


def _fmt_list(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(str(x) for x in v) + "]"
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return str(v)


def clean(v: Any) -> Any:
    """A cell as JSON would have it: pandas fills absent fields with NaN and widens integer
    columns with gaps to float; show ``12`` not ``12.0`` and nothing instead of ``nan``."""
    if isinstance(v, float):
        if math.isnan(v):
            return None
        return int(v) if v.is_integer() else v
    if hasattr(v, "tolist") and getattr(v, "ndim", 0) > 0:  # a list cell from pyarrow
        return [clean(x) for x in v.tolist()]
    if hasattr(v, "item") and not isinstance(v, (list, tuple, dict, str)):
        try:
            return clean(v.item())
        except (TypeError, ValueError):
            return v
    return v


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: clean(v) for k, v in r.items()} for r in df.to_dict("records")]


def _of(events: pd.DataFrame, name: str) -> pd.DataFrame:
    if events.empty or "event" not in events.columns:
        return pd.DataFrame()
    df = events[events["event"] == name].copy()
    if not df.empty:
        df["key"] = [pkey(t, p) for t, p in zip(df["topic"], df["partition"])]
    return df


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    if name not in df.columns:
        return pd.Series([None] * len(df), index=df.index, dtype=object)
    return df[name].map(clean).astype(object)


# ---------------------------------------------------------------- docs/seeds.md#seed-004 log info

_BROKER_KEYS = ("broker", "broker_id", "id", "replica", "node")
_LOG_FIELDS = (  # (label, candidate keys) — docs/seeds.md#seed-004 LocalLogStartTimestamp / LocalLogSizeBytes
    ("log start", ("log_start_offset", "local_log_start_offset")),
    ("LEO", ("log_end_offset", "leo")),
    ("local log start ts", ("local_log_start_timestamp", "local_log_start_ts")),
    ("local log bytes", ("local_log_size_bytes", "log_size_bytes", "size_bytes")),
)


def _candidate_id(c: Any) -> Any:
    if isinstance(c, dict):
        for k in _BROKER_KEYS:
            if k in c:
                return c[k]
        return None
    return c


def _log_info(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for label, keys in _LOG_FIELDS:
        for k in keys:
            if prefix + k in d and d[prefix + k] is not None:
                out[label] = d[prefix + k]
                break
    return out


def _human_bytes(n: Any) -> str:
    try:
        x = float(n)
    except (TypeError, ValueError):
        return str(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(x) < 1024 or unit == "GiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return str(n)


def _fmt_info(info: dict[str, Any]) -> str:
    parts = []
    for label, v in info.items():
        parts.append(f"{label} {_human_bytes(v) if label == 'local log bytes' else v}")
    return ", ".join(parts)


def _fmt_candidates(cands: Any) -> str:
    if not isinstance(cands, (list, tuple)):
        return _fmt_list(cands)
    out = []
    for c in cands:
        cid = _candidate_id(c)
        info = _log_info(c) if isinstance(c, dict) else {}
        out.append(f"{cid} ({_fmt_info(info)})" if info else str(cid))
    return "; ".join(out)


def _winner_info(row: dict[str, Any]) -> str:
    """The elected leader's local log (docs/seeds.md#seed-004): from ``leader_*`` fields or its candidate entry."""
    info = _log_info(row, prefix="leader_")
    if not info and isinstance(row.get("candidates"), (list, tuple)):
        for c in row["candidates"]:
            if isinstance(c, dict) and str(_candidate_id(c)) == str(row.get("leader")):
                info = _log_info(c)
                break
    return _fmt_info(info)


def _broker_log_history(events: pd.DataFrame) -> dict[tuple[str, int], list[tuple[float, str]]]:
    """Per (partition, broker): what its own log said at each recovery or truncation, in time
    order — the fallback for "the winner's log" when the election event does not carry it."""
    out: dict[tuple[str, int], list[tuple[float, str]]] = {}
    for name in ("recovery", "truncation"):
        df = _of(events, name)
        if df.empty or "node" not in df.columns:
            continue
        for r in records(df):
            if not _is_leader(r.get("node")):
                continue
            if name == "recovery":
                text = f"LEO {r.get('log_end_offset')} after recovery ({r.get('reason') or 'restart'})"
            else:
                text = f"truncated {r.get('from_offset')}→{r.get('to_offset')} ({r.get('reason') or ''})"
            out.setdefault((r["key"], int(r["node"])), []).append((float(r["t"]), text))
    for v in out.values():
        v.sort(key=lambda x: x[0])
    return out


def _took_over_logs(events: pd.DataFrame) -> dict[tuple[str, int, int], str]:
    """(partition, broker, leader epoch) -> the log a winner held as it took over: kraftsim's
    broker-side ``became_leader`` (log start, LEO, local log size and start time, docs/seeds.md#seed-004)."""
    out: dict[tuple[str, int, int], str] = {}
    df = _of(events, "became_leader")
    for r in records(df) if not df.empty else []:
        broker, epoch = r.get("broker", r.get("node")), r.get("leader_epoch")
        if _is_leader(broker) and _is_leader(epoch):
            out[(r["key"], int(broker), int(epoch))] = _fmt_info(_log_info(r))
    return out


def _last_known_log(hist: dict[tuple[str, int], list[tuple[float, str]]], key: str, broker: int,
                    t: float) -> str:
    known = [x for x in hist.get((key, broker), []) if x[0] <= t]
    if not known:
        return ""
    at, text = known[-1]
    return f"{text} at t={at:.3f}"


# ---------------------------------------------------------------- tables

def elections(events: pd.DataFrame) -> pd.DataFrame:
    """One row per ``leader_elected`` event: who won, why, from which candidates."""
    df = _of(events, "leader_elected")
    cols = ["t", "partition", "reason", "leader", "leader_epoch", "partition_epoch", "isr", "elr",
            "recovery state", "winner local log", "candidates"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    last_log = _broker_log_history(events)
    took = _took_over_logs(events)
    rows = []
    for r in records(df):
        leader = r.get("leader")
        # the winner's log: as the election event carries it, else as the winner reported it on
        # taking over (same leader epoch), else its last recovery or truncation before the election
        winner = _winner_info(r)
        if not winner and _is_leader(leader) and _is_leader(r.get("leader_epoch")):
            winner = took.get((r["key"], int(leader), int(r["leader_epoch"])), "")
        if not winner and _is_leader(leader):
            winner = _last_known_log(last_log, r["key"], int(leader), float(r["t"]))
        rows.append({
            "t": round(float(r["t"]), 3), "partition": r["key"], "reason": r.get("reason") or "",
            "leader": int(leader) if _is_leader(leader) else "none",
            "leader_epoch": r.get("leader_epoch"), "partition_epoch": r.get("partition_epoch"),
            "isr": _fmt_list(r.get("isr")), "elr": _fmt_list(r.get("elr")),
            "recovery state": _fmt_list(r.get("leader_recovery_state")),
            "winner local log": winner, "candidates": _fmt_candidates(r.get("candidates")),
        })
    return pd.DataFrame(rows, columns=cols)


def isr_changes(events: pd.DataFrame) -> pd.DataFrame:
    df = _of(events, "isr_changed")
    cols = ["t", "partition", "leader", "leader_epoch", "partition_epoch", "isr", "elr", "reason"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame({
        "t": df["t"].astype(float).round(3), "partition": df["key"], "leader": _col(df, "leader"),
        "leader_epoch": _col(df, "leader_epoch"), "partition_epoch": _col(df, "partition_epoch"),
        "isr": _col(df, "isr").map(_fmt_list), "elr": _col(df, "elr").map(_fmt_list),
        "reason": _col(df, "reason").fillna(""),
    })
    return out.reset_index(drop=True)


def alter_partitions(events: pd.DataFrame) -> pd.DataFrame:
    """AlterPartition requests as the controller answered them (accepted or the error)."""
    df = _of(events, "alter_partition")
    cols = ["t", "source", "partition", "leader", "new_isr", "broker_epochs", "partition_epoch", "version",
            "accepted", "error"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    acc = _col(df, "accepted").map(lambda v: bool(v) if v is not None and v == v else False)
    err = [error_name(c, e) if not a else "" for c, e, a in
           zip(_col(df, "error_code"), _col(df, "error"), acc)]
    codes = _col(df, "error_code")
    err = [f"{e} ({int(c)})" if e and c is not None and c == c else e for e, c in zip(err, codes)]
    out = pd.DataFrame({
        "t": df["t"].astype(float).round(3), "source": _col(df, "host"), "partition": df["key"],
        "leader": _col(df, "leader"), "new_isr": _col(df, "new_isr").map(_fmt_list),
        "broker_epochs": _col(df, "broker_epochs").map(
            lambda v: json.dumps(v, separators=(",", ":")) if isinstance(v, (dict, list)) else _fmt_list(v)),
        "partition_epoch": _col(df, "partition_epoch"), "version": _col(df, "version"),
        "accepted": acc.values, "error": err,
    })
    return out.reset_index(drop=True)


def broker_events(events: pd.DataFrame) -> pd.DataFrame:
    """Registration, fencing and unfencing (docs/seeds.md#seed-002/003 §1.2.2): context for elections."""
    names = ("broker_registered", "broker_fenced", "broker_unfenced", "self_fenced")
    if events.empty:
        return pd.DataFrame(columns=["t", "event", "broker", "broker_epoch", "detail"])
    df = events[events["event"].isin(names)]
    rows = []
    for r in records(df):
        detail = []
        if r.get("event") == "broker_registered":
            detail.append(f"previous epoch {r.get('previous_broker_epoch')}")
            detail.append("clean shutdown" if r.get("clean_shutdown") else "unclean shutdown")
        if r.get("reason"):
            detail.append(str(r["reason"]))
        rows.append({"t": round(float(r["t"]), 3), "event": r["event"],
                     "broker": r.get("broker", r.get("node")), "broker_epoch": r.get("broker_epoch"),
                     "detail": ", ".join(detail)})
    return pd.DataFrame(rows, columns=["t", "event", "broker", "broker_epoch", "detail"])


# ---------------------------------------------------------------- leader intervals

def leader_series(events: pd.DataFrame, observer: pd.DataFrame | None) -> dict[str, list[tuple[float, Any]]]:
    """Per partition, the (t, leader) changes in time order.

    Cluster events are exact, so a partition with leader events uses them; the observer's
    samples (which lag by up to a sampling interval) fill in partitions with none.
    """
    series: dict[str, list[tuple[float, Any]]] = {}
    for name in ("leader_elected", "isr_changed"):
        df = _of(events, name)
        if df.empty or "leader" not in df.columns:
            continue
        for key, t, leader in zip(df["key"], df["t"], df["leader"]):
            if t == t:
                series.setdefault(key, []).append((float(t), leader if _is_leader(leader) else None))
    if observer is not None and not observer.empty:
        sampled: dict[str, list[tuple[float, Any]]] = {}
        # samples without a partition are cluster-wide failures (no broker answered): they say
        # nothing about any one partition's leader
        per_part = observer[observer["partition"].notna()]
        keys = [pkey(t, p) for t, p in zip(per_part["topic"], per_part["partition"])]
        for key, t, leader in zip(keys, per_part["t"], per_part["leader"]):
            if key not in series:
                sampled.setdefault(key, []).append((float(t), leader if _is_leader(leader) else None))
        series.update(sampled)
    out: dict[str, list[tuple[float, Any]]] = {}
    for key, pts in series.items():
        pts.sort(key=lambda x: x[0])
        compact: list[tuple[float, Any]] = []
        for t, leader in pts:
            lv = int(leader) if leader is not None else None
            if not compact or compact[-1][1] != lv:
                compact.append((t, lv))
        out[key] = compact
    return out


def leader_intervals(series: list[tuple[float, Any]], end_t: float) -> list[tuple[float, float, Any]]:
    """(start, stop, leader) from a change series; the last one lasts until ``end_t``."""
    out = []
    for i, (t, leader) in enumerate(series):
        stop = series[i + 1][0] if i + 1 < len(series) else max(end_t, t)
        if stop > t:
            out.append((t, stop, leader))
    return out


def availability(series: dict[str, list[tuple[float, Any]]], end_t: float,
                 observer: pd.DataFrame | None, alters: pd.DataFrame,
                 partitions: Iterable[str] = ()) -> pd.DataFrame:
    """Per partition: seconds with no leader, leaderless stretches, observer errors and
    rejected AlterPartitions. Time before a partition's first known leader is not counted."""
    keys = set(series) | set(partitions)
    obs_err: dict[str, int] = {}
    if observer is not None and not observer.empty and "error" in observer.columns:
        bad = observer[observer["error"].notna() & (observer["error"].astype(str) != "")]
        for k in (pkey(t, p) if p == p and p is not None else f"{t} (whole topic)"
                  for t, p in zip(bad["topic"], bad["partition"])):
            obs_err[k] = obs_err.get(k, 0) + 1
        keys |= set(obs_err)
    rejected: dict[str, int] = {}
    if not alters.empty:
        for k in alters.loc[~alters["accepted"].astype(bool), "partition"]:
            rejected[k] = rejected.get(k, 0) + 1
        keys |= set(rejected)
    rows = []
    for key in sorted(keys, key=pkey_order):
        ivs = leader_intervals(series.get(key, []), end_t)
        down = [(a, b) for a, b, leader in ivs if leader is None]
        rows.append({
            "partition": key,
            "no leader (s)": round(sum(b - a for a, b in down), 3),
            "leaderless stretches": len(down),
            "longest (s)": round(max((b - a for a, b in down), default=0.0), 3),
            "leader changes": max(0, sum(1 for _ in ivs) - 1),
            "observer errors": obs_err.get(key, 0),
            "rejected AlterPartition": rejected.get(key, 0),
        })
    cols = ["partition", "no leader (s)", "leaderless stretches", "longest (s)", "leader changes",
            "observer errors", "rejected AlterPartition"]
    return pd.DataFrame(rows, columns=cols)


def write_unavailability(throughput: pd.DataFrame | None) -> dict[str, Any]:
    """Run-wide write availability from the checker's per-second aggregate: seconds in which
    sends failed, and the longest stretch without any acknowledged send between the first
    and the last second that completed a send (seconds absent from the aggregate count as
    zero sends)."""
    if throughput is None or throughput.empty:
        return {}
    tp = throughput.fillna(0)
    secs = tp["second"].astype("int64")
    acked = set(secs[tp["ok"] > 0])
    longest = cur = 0
    start_of_longest = None
    for s_ in range(int(secs.min()), int(secs.max()) + 1):
        cur = 0 if s_ in acked else cur + 1
        if cur > longest:
            longest, start_of_longest = cur, s_ - cur + 1
    failing = tp[(tp["fail"] + tp["info"]) > 0]
    out: dict[str, Any] = {
        "acknowledged sends": int(tp["ok"].sum()), "failed sends": int(tp["fail"].sum()),
        "indeterminate sends (info)": int(tp["info"].sum()),
        "seconds with failed or indeterminate sends": int(len(failing)),
        "longest stretch without an acknowledged send (s)": int(longest),
    }
    if longest:
        out["longest stretch without an acknowledged send (s)"] = f"{longest} (from t={start_of_longest})"
    return out
