"""Kafka's own logs, as real brokers and controllers wrote them, read right (checkers/kafkalog).

The corpus (tests/checkers/kafka_logs_real/, table in docs/kafka-logs.md) holds excerpts of
server.log / controller.log / state-change.log that Kafka 3.2-4.3 brokers and controllers
wrote, found in public bug reports, pull requests, write-ups and a log directory committed
to a public repository. Every line is verbatim;
each source's PROVENANCE.md says where it came from, which Kafka version wrote it and how
that is known, and ``expected.json`` lists every event a correct reader makes of it,
derived by reading the lines (never by running the reader).

Two shapes: ``cluster-logs/<host>/<file>`` holds whole log4j records, read exactly as a
collected run is (log4j.py, statements.py, assemble.py); ``excerpt.txt`` holds messages a
write-up quoted without their timestamps, wrapped over several indented lines - those are
joined back (a line that starts with ``[`` or a level starts a message) and read in order.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from checkers import kafkalog
from checkers.kafkalog import statements
from checkers.kafkalog.assemble import Assembler

CORPUS = Path(__file__).parent / "kafka_logs_real"
SOURCES = sorted(p.parent.name for p in CORPUS.glob("*/expected.json"))
#: what the corpus must show between its sources (the reader's hard cases)
COVERAGE = {"unclean_election", "alter_partition_accepted", "alter_partition_rejected", "repeated_rejections",
            "committed_isr_reset", "isr_expansion", "isr_shrink", "diverging_epoch_truncation",
            "unclean_shutdown_recovery", "controller_active", "controller_restart_replay", "epoch_tie", "fence",
            "clean_reelection_after_fence", "strimzi_layout", "truncation_below_high_watermark", "empty_isr_rejected",
            "clean_load_after_failed_start_up", "raft_fatal_fault", "leader_isr_from_metadata",
            "fetch_answer_cut_by_truncation"}

_LEVEL = re.compile(r"^(?:TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (?=\[)")


def _expected(name: str) -> dict:
    return json.loads((CORPUS / name / "expected.json").read_text())


def bare_messages(text: str) -> list[str]:
    """A write-up's quoted messages: a line starting with ``[`` (after an optional level)
    starts one, indented lines continue it (joined by one space), blank lines end it."""
    out: list[list[str]] = []
    for line in text.splitlines():
        s = line.strip()
        if not s:
            out.append([])
            continue
        if (line.startswith("[") or _LEVEL.match(line)) or not out or not out[-1]:
            out.append([_LEVEL.sub("", s)])
        else:
            out[-1].append(s)
    return [" ".join(m) for m in out if m]


def read_source(name: str) -> tuple[list[dict], kafkalog.Stats, list[dict]]:
    """(events, stats, observations with their host) of one corpus source."""
    d = CORPUS / name
    if (d / "excerpt.txt").exists():
        st = kafkalog.Stats()
        msgs = bare_messages((d / "excerpt.txt").read_text())
        host_node = next((n for n in map(statements.node_of, msgs) if n is not None), None)
        asm = Assembler()
        obs = []
        for i, m in enumerate(msgs):
            got = statements.parse(m)
            if got is None:
                st.other += 1
                continue
            if got is False:
                st.not_understood += 1
                continue
            node = statements.node_of(m)
            got.update(wall=float(i), node=node if node is not None else host_node, role="broker",
                       host=name, source=f"{name}/excerpt.txt", line=i + 1)
            if "QuorumController" in m.split("]")[0]:
                got["role"] = "controller"
            obs.append(got)
            asm.add(got)
        return asm.events, st, obs
    st = kafkalog.Stats()
    events = kafkalog.read_cluster_logs(d / "cluster-logs", stats=st)
    obs = []
    for hd in kafkalog.host_dirs(d / "cluster-logs"):
        for f in kafkalog.log4j.log_files(hd):
            for r in kafkalog.log4j.read_records(f, kafkalog.log4j.parse_zone(None), kafkalog.log4j.ReadStats()):
                got = statements.parse(r.message, r.thrown)
                if isinstance(got, dict):
                    obs.append({**got, "host": hd.name})
    return events, st, obs


def _subset(want: dict, got: dict) -> bool:
    return all(got.get(k) == v for k, v in want.items())


def test_the_corpus_is_wide_enough():
    """At least 8 sources from at least 4 Kafka versions, covering every hard case together."""
    assert len(SOURCES) >= 8, SOURCES
    versions = {".".join(_expected(s)["version"].split(".")[:2]) for s in SOURCES}
    assert len(versions) >= 4, versions
    covered = set().union(*(_expected(s)["covers"] for s in SOURCES))
    assert COVERAGE <= covered, COVERAGE - covered
    for s in SOURCES:
        prov = (CORPUS / s / "PROVENANCE.md").read_text()
        for field in ("Where:", "Kafka version:", "Shows:"):
            assert field in prov, (s, field)


@pytest.mark.parametrize("name", SOURCES)
def test_real_kafka_lines_make_the_events_they_state(name):
    exp = _expected(name)
    events, st, obs = read_source(name)
    assert st.not_understood == 0 and st.problems == [], st
    got = [e for e in events]
    assert len(got) == len(exp["events"]), [(e["event"], e.get("topic"), e.get("broker")) for e in got]
    for i, (w, g) in enumerate(zip(exp["events"], got)):
        assert _subset(w, g), (i, w, {k: g.get(k) for k in w})
    for w in exp.get("observations", []):
        assert any(_subset(w, o) for o in obs), (w, obs)


def test_an_unclean_story_from_the_real_unclean_line(spark, tmp_path):
    """The checker, from Kafka's own words: a hand-built history that lost acknowledged writes of
    drill.m19.unclean-0, and as its cluster logs the m19 source's messages (verbatim, each joined
    back from the write-up's wrapping) placed in Kafka's log4j layout at run times - the write-up
    quoted them without timestamps, so the stamps and loggers here are ours, the messages are
    Kafka's. The story must be the unclean election the UNCLEAN line states, allowed by the
    topic's unclean.leader.election.enable=true."""
    from datetime import datetime, timezone

    from checkers.job import check_run
    from tests.checkers.builder import WALL0, HistoryBuilder

    t = "drill.m19.unclean"
    b = HistoryBuilder()
    for i in range(5):
        b.send("producer-0", t, 0, f"producer-0-{i}", i, 1.0 + 0.1 * i)
    b.send("producer-1", t, 0, "producer-1-0", 0, 6.0)
    b.drain(t, 0, [(0, "producer-1-0")], 1, 20.0, process=f"{t}.drain")
    rd = b.write(tmp_path / "run", expect="loss",
                 topic={"name": t, "min_insync_replicas": 1, "config": {"unclean.leader.election.enable": "true"}})
    msgs = bare_messages((CORPUS / "m19-drills-4.3.0-unclean-election" / "excerpt.txt").read_text())
    loggers = ["org.apache.kafka.controller.ReplicationControlManager", "state.change.logger",
               "kafka.server.ReplicaFetcherThread", "kafka.server.ReplicaFetcherThread"]
    levels = ["INFO", "INFO", "INFO", "WARN"]
    lines = []
    for k, (m, lg, lv) in enumerate(zip(msgs, loggers, levels)):
        d = datetime.fromtimestamp(WALL0 + 3.0 + 0.2 * k, timezone.utc)
        lines.append(f"[{d:%Y-%m-%d %H:%M:%S},{d.microsecond // 1000:03d}] {lv} {m} ({lg})\n")
    h = rd / "cluster-logs" / "psp-combined-1"
    h.mkdir(parents=True)
    (h / "kafka-logs.json").write_text(json.dumps({"node_id": 1, "timezone": "UTC"}))
    (h / "server.log").write_text("".join(lines))
    v = check_run(rd, spark=spark)
    assert v["counts"]["lost_write"] == 5, v["counts"]
    (s,) = [s for s in v["stories"] if s["topic"] == t]
    assert s["mechanism"] == "unclean_election" and s["allowed_by"] == "unclean.leader.election.enable=true", s
    el = next(x for x in s["steps"] if x["kind"] == "election")
    assert "elected broker 2" in el["text"] and "unclean" in el["text"], el
    assert el["event"] == {"source": "cluster-logs/psp-combined-1/server.log", "line": 1}


def test_an_isr_change_stuck_from_the_real_controllers_rejection():
    """KAFKA-15353 on real Kafka: the leaders state no pending proposal at INFO, so the 3.4.1
    controller's rejection of the re-sent empty ISR (INVALID_REQUEST, after which
    Partition.handleAlterPartitionError keeps the change pending) starts the stuck period; it
    ends with the partition's next metadata change. Control: an ISR change 5 s after the
    rejection ends it in time."""
    from checkers import isr_changes
    events, _, _ = read_source("faultline-3.4.1-controller-kafka-15353-empty-isr")
    t0 = min(e["wall"] for e in events) - 17.0
    timed = [{**e, "t": e["wall"] - t0} for e in events]
    rows = isr_changes.stuck(timed, [], end_t=47.1)
    assert [(r["topic"], r["leader"], r["proposed_isr"], r["ended_by"]) for r in rows] == [
        ("__consumer_offsets", 2, "[]", "still pending when the records end"),
        ("faultline", 3, "[]", "still pending when the records end")], rows
    assert rows[1]["seconds"] > 29 and rows[1]["answers"] == "INVALID_REQUEST (new_isr []) x1"
    later = {"event": "isr_changed", "topic": "faultline", "partition": 0, "leader": 3, "isr": [3, 1],
             "t": timed[1]["t"] + 5.0, "role": "broker", "host": "broker-3"}
    rows = isr_changes.stuck([*timed, later], [], end_t=47.1)
    assert [r["topic"] for r in rows] == ["__consumer_offsets"]
