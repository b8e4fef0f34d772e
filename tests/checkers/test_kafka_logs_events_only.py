"""``faultline check`` on a directory that holds only Kafka's logs: what happened, told.

Real corpus sources (tests/checkers/kafka_logs_real/, docs/kafka-logs.md) are copied into a
directory with nothing but ``cluster-logs/<host>/``, as the harness collects Kafka's logs, and the
real command runs on it (``python -m harness.cli check DIR``, a subprocess, as a user runs it).
Without histories the outcome must be inconclusive (exit 4, checkers/outcome.py), and report.html
must tell, before it lists anything, the elections and the AlterPartition rejections those lines
state: each story's counts are compared with the events the source's ``expected.json`` lists -
derived by reading the lines, never by running the reader.
"""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from tests.checkers.test_kafka_logs_real import CORPUS, bare_messages

ROOT = Path(__file__).resolve().parents[2]


def faultline_check(d: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "check", str(d)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def _expected(name: str) -> list[dict]:
    return json.loads((CORPUS / name / "expected.json").read_text())["events"]


def _stories(page: str) -> dict[str, dict]:
    """The "What happened" stories of report.html: per data-partition, the heading, the sentences
    and the step rows (kind, count, text, where)."""
    section = page[page.index('<h2 id="what-happened">'):page.index('<h2 id="lost">')]
    out = {}
    for m in re.finditer(r'<article class="story event-story" data-partition="([^"]+)">(.*?)</article>', section, re.S):
        body = m.group(2)
        steps = [tuple(html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td>(.*?)</td>", row, re.S))
                 for row in re.findall(r"<tr>(<td>.*?)</tr>", body, re.S)]
        out[html.unescape(m.group(1))] = {
            "label": html.unescape(re.search(r"<h3>(.*?)</h3>", body, re.S).group(1)),
            "sentences": [html.unescape(x) for x in re.findall(r"<li>(.*?)</li>", body, re.S)],
            "steps": steps}     # each: t, kind, count, text, where
    return out


def _m19_as_log4j(dest: Path, start: float) -> None:
    """The m19 source's messages (verbatim, each joined back from the write-up's wrapping) in
    Kafka's log4j layout: the write-up quoted them without timestamps, so the stamps and loggers
    here are ours (as test_kafka_logs_real.test_an_unclean_story_from_the_real_unclean_line)."""
    msgs = bare_messages((CORPUS / "m19-drills-4.3.0-unclean-election" / "excerpt.txt").read_text())
    loggers = ["org.apache.kafka.controller.ReplicationControlManager", "state.change.logger",
               "kafka.server.ReplicaFetcherThread", "kafka.server.ReplicaFetcherThread"]
    levels = ["INFO", "INFO", "INFO", "WARN"]
    lines = []
    for k, (m, lg, lv) in enumerate(zip(msgs, loggers, levels)):
        d = datetime.fromtimestamp(start + 0.2 * k, timezone.utc)
        lines.append(f"[{d:%Y-%m-%d %H:%M:%S},{d.microsecond // 1000:03d}] {lv} {m} ({lg})\n")
    dest.mkdir(parents=True)
    (dest / "kafka-logs.json").write_text(json.dumps({"node_id": 1, "timezone": "UTC"}))
    (dest / "server.log").write_text("".join(lines))


def test_a_logs_only_directory_tells_the_rejections_and_the_unclean_election(tmp_path):
    d = tmp_path / "logs"
    shutil.copytree(CORPUS / "observer-patch-3.7.1-ineligible-replica" / "cluster-logs", d / "cluster-logs")
    # seconds after the observer source's last line (2026-07-20 15:07:06,378 UTC)
    _m19_as_log4j(d / "cluster-logs" / "psp-combined-1",
                  datetime(2026, 7, 20, 15, 7, 10, tzinfo=timezone.utc).timestamp())
    p = faultline_check(d)
    assert p.returncode == 4, (p.returncode, p.stdout, p.stderr)      # inconclusive: no histories
    assert "inconclusive: no histories: only Kafka's logs were read" in p.stdout, p.stdout
    v = json.loads((d / "verdict.json").read_text())
    assert v["mode"] == "events-only" and v["outcome"] == "inconclusive" and v["counts"] == {}
    page = (d / "report.html").read_text()
    assert page.index('id="what-happened"') < page.index('id="lost"') < page.index('id="elections"')
    stories = _stories(page)

    # every rejection the lines state, counted per partition, as expected.json lists them
    want: dict[str, int] = {}
    for e in _expected("observer-patch-3.7.1-ineligible-replica"):
        if e["event"] == "alter_partition" and e["accepted"] is False:
            want[f"{e['topic']}@{e['partition']}"] = want.get(f"{e['topic']}@{e['partition']}", 0) + 1
    assert want == {"smx@0": 5, "sm@0": 2}
    for key, n in want.items():
        st = stories[key]
        assert f"{n} AlterPartition rejections (INELIGIBLE_REPLICA ×{n})" in st["label"], st["label"]
        rej = [s for s in st["steps"] if s[1] == "alter_partition"]
        assert sum(int(s[2]) for s in rej) == n, rej
        assert any("INELIGIBLE_REPLICA" in s[3] and f"{n} times" in s[3] for s in rej), rej
    smx = stories["smx@0"]
    assert "leader 4's AlterPartition" in smx["sentences"][0] and "[4, 1, 2, 3]" in smx["sentences"][0]
    assert "committed ISR [4, 1, 2]" in smx["sentences"][0], smx["sentences"][0]
    assert smx["steps"][0][4] == "cluster-logs/broker-4/server.log:1"

    # the unclean election and the truncation the m19 lines state
    (el,) = [e for e in _expected("m19-drills-4.3.0-unclean-election") if e["event"] == "leader_elected"]
    (tr,) = [e for e in _expected("m19-drills-4.3.0-unclean-election") if e["event"] == "truncation"]
    st = stories[f"{el['topic']}@{el['partition']}"]
    assert "1 unclean election" in st["label"] and "1 truncation" in st["label"], st["label"]
    said = " ".join(st["sentences"])
    assert (f"elected broker {el['leader']} leader of {el['topic']}@{el['partition']} from outside the ISR "
            f"(the ISR before is not in the logs read) (leader epoch {el['leader_epoch']}, partition epoch "
            f"{el['partition_epoch']}, ISR {el['isr']}) in leader recovery state RECOVERING: an unclean election") in said
    assert (f"broker {tr['broker']} truncated {tr['topic']}@{tr['partition']} from offset {tr['from_offset']} to "
            f"{tr['to_offset']}, cutting {tr['from_offset'] - tr['to_offset']} records") in said, said
    election = next(s for s in st["steps"] if s[1] == "election")
    assert election[4] == "cluster-logs/psp-combined-1/server.log:1"
    # the gravest first: the unclean election, then the partitions by their rejections
    assert list(stories)[:3] == ["drill.m19.unclean@0", "smx@0", "sm@0"], list(stories)


def test_a_logs_only_directory_tells_a_fence_and_the_reelection(tmp_path):
    """The real 4.0.0 log dir (its rolled stage-change.log.<hour> included): a controller that
    restarts and becomes active, its broker fenced, both partitions left without a leader, the
    broker registered again and re-elected from the ISR."""
    name = "kafka2.13-4.0.0-repo-restart-fence-reelect"
    d = tmp_path / "logs"
    shutil.copytree(CORPUS / name / "cluster-logs", d / "cluster-logs")
    p = faultline_check(d)
    assert p.returncode == 4, (p.returncode, p.stdout, p.stderr)
    stories = _stories((d / "report.html").read_text())
    exp = _expected(name)
    (fence,) = [e for e in exp if e["event"] == "broker_fenced"]
    (active,) = [e for e in exp if e["event"] == "controller_activated"]
    elected = [e for e in exp if e["event"] == "leader_elected"]
    assert {f"{e['topic']}@{e['partition']}" for e in elected} | {"cluster"} == set(stories), list(stories)
    for e in elected:
        st = stories[f"{e['topic']}@{e['partition']}"]
        said = " ".join(st["sentences"])
        assert "1 election" in st["label"] and "1 fence of a replica" in st["label"], st["label"]
        assert (f"the controller fenced broker {fence['broker']} (broker epoch {fence['broker_epoch']}): its "
                "session timed out") in said
        assert f"{e['topic']}@{e['partition']} was left without a leader" in said
        assert (f"elected broker {e['leader']} leader of {e['topic']}@{e['partition']} (leader epoch "
                f"{e['leader_epoch']}, partition epoch {e['partition_epoch']}, ISR {e['isr']}): it had no leader "
                "and got one from its ISR") in said, said
        # the fence comes before the election it explains
        kinds = [s[1] for s in st["steps"]]
        assert kinds.index("broker_fenced") < kinds.index("election"), kinds
    cluster = " ".join(stories["cluster"]["sentences"])
    assert f"controller {active['node']} became the active controller (epoch {active['controller_epoch']})" in cluster


def test_logs_without_a_statement_are_exit_2_with_one_line(tmp_path):
    """Kafka's logs with nothing the reader knows are no events to tell: unreadable input, one line."""
    d = tmp_path / "logs"
    h = d / "cluster-logs" / "kafka-1"
    h.mkdir(parents=True)
    (h / "server.log").write_text("[2024-05-01 12:00:00,000] INFO [KafkaServer id=1] started (kafka.server.KafkaServer)\n")
    p = faultline_check(d)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"{d / 'cluster-logs'}: no cluster event read" in lines[0], p.stderr
    assert "Traceback" not in p.stderr and not (d / "verdict.json").exists()
