"""Effects of Kafka bugs that are not lost writes, named from the cluster's own records.

Why a module of its own: the anomaly families (checkers/families.py) judge one partition's
history; some known Kafka bugs do their damage elsewhere - a reader shown a record that was
never committed, a broker that loads a crashed log dir without recovering it, a log dir taken
offline by a garbled checkpoint. Each effect here is recognised from evidence only (events of
the brokers - kraftsim's ``events.jsonl`` or, through checkers/kafkalog, Kafka's own log lines -
the run's timeline, and the anomaly rows the families found), never from a campaign's name,
and is counted like an anomaly: each is a run-level family (checkers/families.py, its
evidence columns in checkers/evidence.py SCHEMAS), asked once per run on the driver. Each breaks
a Kafka promise, so it makes the history invalid (checkers/verdict.py); a campaign about the bug
requires it on the vulnerable side and forbids it on the fixed one (``require_anomalies`` /
``forbid_anomalies``, checkers/outcome.py).

- ``uncommitted_read``: an offset read holding a value the final log does not hold there
  (``inconsistent_offset``) lying in a replica's range ``[truncated to, high watermark)`` of a
  ``truncation`` to the leader's log - the replica had a high watermark above records it was
  about to cut, so they were visible as committed (KAFKA-14704, docs/anomalies.md). kraftsim
  records that high watermark in its truncation event; from Kafka's logs it is the "from" of
  UnifiedLog's "Non-monotonic update of high watermark" warning as truncateTo lowers it to the
  cut (checkers/kafkalog/assemble.py), or ReplicaFetcherThread's "below high watermark" warning.
- ``hwm_regression``: a ``truncation`` that cut a replica below its own high watermark - records
  it had shown as committed were removed - unless an unclean election of that partition came
  before it (``unclean.leader.election.enable`` permits exactly that). It is the state
  ``uncommitted_read`` needs, told by the broker itself, whether or not a reader met it: on real
  Kafka 3.4.0 a reader's fetch of such a tail often never arrives - the broker's network thread
  finds the file cut under the response it is sending (FileRecords.writeTo: "Size of FileRecords
  ... has been truncated during write") and closes the connection. On a clean election it is a
  removal of committed records (a loss when they were acknowledged: the lost-writes families
  count those).
- ``log_not_recovered``: a broker loaded a log dir as cleanly shut down (no recovery) although
  a page-cache-loss cut had hit that dir since the broker last loaded it: the clean-shutdown
  marker was written by a process that never loaded the logs (KAFKA-15375). The load is the
  broker's ``log_dir_loaded`` event (Kafka: LogManager.loadLogs "Skipping recovery of N logs
  from DIR since clean shutdown file was found"), the cut the reboot's timeline note.
- ``log_dir_offline``: a broker took a log dir offline (``log_dir_offline``: Kafka's
  LogDirFailureChannel, e.g. "Error while reading checkpoint file"); with none left it halts
  ("Shutdown broker because all log dirs in ... have failed", KAFKA-16541's garbled
  leader-epoch checkpoint).

Standard library only, like the stories: the report and the suite read the same rows.
"""
from __future__ import annotations

from typing import Any

from checkers.values import as_int, num, page_cache_cuts

#: the anomaly names (evidence.SCHEMAS holds their columns)
UNCOMMITTED_READ, LOG_NOT_RECOVERED, LOG_DIR_OFFLINE = "uncommitted_read", "log_not_recovered", "log_dir_offline"
HWM_REGRESSION = "hwm_regression"



def _ref(row: dict[str, Any]) -> dict[str, Any]:
    return {"source": row.get("source"), "line": row.get("line")}


def _below_hwm(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The truncations that cut a replica below the high watermark it had then."""
    return [e for e in events if e.get("event") == "truncation" and as_int(e.get("high_watermark")) is not None
            and as_int(e.get("to_offset")) is not None and as_int(e["high_watermark"]) > as_int(e["to_offset"])]


def _broker(e: dict[str, Any]) -> int | None:
    return as_int(e.get("broker")) if as_int(e.get("broker")) is not None else as_int(e.get("node"))


def uncommitted_reads(inconsistent: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per inconsistent offset that a truncation below a replica's HWM explains."""
    cuts = _below_hwm(events)
    out = []
    for row in inconsistent:
        off, topic, part = as_int(row.get("offset")), row.get("topic"), as_int(row.get("partition"))
        if off is None:
            continue
        for e in cuts:
            if e.get("topic") != topic or as_int(e.get("partition")) != part:
                continue
            lo, hwm = as_int(e["to_offset"]), as_int(e["high_watermark"])
            if lo <= off < hwm:
                broker = _broker(e)
                out.append({"topic": topic, "partition": part, "offset": off, "broker": broker,
                            "t": num(e.get("t")), "to_offset": lo, "high_watermark": hwm,
                            "values": row.get("values"), "observed_by": row.get("observed_by"),
                            "text": f"broker {broker} held {topic}@{part} offset {off} below its high watermark "
                                    f"{hwm}, then truncated to {lo} to match the leader, its high watermark down "
                                    f"from {hwm} to {lo}: a reader saw a record that was never committed; values "
                                    f"at that offset: {row.get('values')}",
                            **_ref(e)})
                break
    return out


def hwm_regressions(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per truncation below the replica's own high watermark that no earlier unclean
    election of its partition permits (an unclean election may remove committed records: KIP-704's
    setting says so, and the loss stories name it)."""
    unclean: dict[tuple[Any, int | None], float] = {}
    for e in events:
        t = num(e.get("t"))
        if e.get("event") == "leader_elected" and e.get("reason") == "unclean" and t is not None:
            key = (e.get("topic"), as_int(e.get("partition")))
            unclean[key] = min(unclean.get(key, t), t)
    out = []
    for e in _below_hwm(events):
        topic, part, t = e.get("topic"), as_int(e.get("partition")), num(e.get("t"))
        since = unclean.get((topic, part))
        if since is not None and t is not None and since <= t:
            continue
        lo, hwm, broker = as_int(e["to_offset"]), as_int(e["high_watermark"]), _broker(e)
        out.append({"host": e.get("host"), "broker": broker, "topic": topic, "partition": part, "t": t,
                    "to_offset": lo, "high_watermark": hwm, "reason": e.get("reason"),
                    "text": f"broker {broker} truncated {topic}@{part} to offset {lo} below its own high watermark "
                            f"{hwm} ({e.get('reason')}): offsets {lo}-{hwm - 1} had been shown as committed to any "
                            "reader of that replica, and no unclean election permitted removing them",
                    **_ref(e)})
    return out


def _cuts(timeline: list[dict[str, Any]]) -> list[tuple[float, str]]:
    """(t, host) of every page-cache-loss cut the reboot nemesis recorded (its timeline note)."""
    return [(float(r["t"]), host) for r, host, _ in page_cache_cuts(timeline)]


def logs_not_recovered(events: list[dict[str, Any]], timeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ``log_dir_loaded`` with ``clean_shutdown`` true as the first load of that dir by that
    host after a page-cache cut of the host."""
    loads = sorted((e for e in events if e.get("event") == "log_dir_loaded" and num(e.get("t")) is not None),
                   key=lambda e: e["t"])
    out = []
    for t_cut, host in _cuts(timeline):
        seen: set[str] = set()
        for e in loads:
            if e.get("host") != host or e["t"] < t_cut:
                continue
            d = str(e.get("log_dir"))
            if d in seen:
                continue
            seen.add(d)
            if e.get("clean_shutdown") is True:
                out.append({"host": host, "broker": as_int(e.get("node")),
                            "log_dir": d, "t": num(e.get("t")), "t_cut": t_cut,
                            "text": f"{host} loaded {d} as cleanly shut down at t={e['t']:.3f}s although a "
                                    f"page-cache-loss cut hit it at t={t_cut:.3f}s and no process loaded it in "
                                    "between: the clean-shutdown marker came from a process that never recovered "
                                    "the log, so its torn tail was trusted", **_ref(e)})
    return out


def logs_offline(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"host": e.get("host"), "broker": as_int(e.get("node")),
             "log_dir": e.get("log_dir"), "t": num(e.get("t")), "error": e.get("error"),
             "text": f"{e.get('host')} took {e.get('log_dir')} offline: {e.get('error')}", **_ref(e)}
            for e in events if e.get("event") == "log_dir_offline"]
