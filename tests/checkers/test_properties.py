"""Generated valid histories with injected faults; the checker reports exactly those.

Spark's cost is per job, not per row, so Hypothesis generates the histories first (an inner
``@given`` loop, 15 examples, each example several partitions' worth of history) and ONE
Spark check then judges all of them; each example lives in its own topic. The price is that
Hypothesis cannot shrink a failing example; the assertion prints the whole spec instead.

The model: producers' acknowledged sends form one gapless log per partition, acknowledged in
log order; consumers read the log in contiguous polls; the final drain reads all of it. Then:
* ``lost``: values removed from every read  -> exactly those are lost_write;
* ``dups``: values the drain also reads at extra offsets past the end -> exactly duplicate;
* ``diverge``: offsets where one consumer reads a foreign value -> exactly inconsistent_offset.
A spec with no injection must come out with no invalidating anomaly at all.
"""
from __future__ import annotations

import random
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.job import analyze
from checkers.load import load_run
from tests.checkers.builder import HistoryBuilder
from tests.checkers.cases import INVALIDATING


@st.composite
def specs(draw):
    producers = draw(st.integers(1, 3))
    sends = draw(st.lists(st.integers(1, 12), min_size=producers, max_size=producers))
    n = sum(sends)
    seed = draw(st.integers(0, 2**32 - 1))
    consumers = draw(st.integers(1, 2))
    idx = list(range(n))
    lost = draw(st.sets(st.sampled_from(idx), max_size=min(3, n)))
    rest = [i for i in idx if i not in lost]
    dups = draw(st.sets(st.sampled_from(rest), max_size=min(2, len(rest)))) if rest else set()
    rest2 = [i for i in rest if i not in dups]
    diverge = draw(st.sets(st.sampled_from(rest2), max_size=min(2, len(rest2)))) if rest2 else set()
    return {"sends": sends, "seed": seed, "consumers": consumers,
            "lost": sorted(lost), "dups": sorted(dups), "diverge": sorted(diverge)}


def build(b: HistoryBuilder, topic: str, spec: dict) -> dict:
    """Write one spec into ``topic``; return the expected evidence keys."""
    rnd = random.Random(spec["seed"])
    queue = [p for p, k in enumerate(spec["sends"]) for _ in range(k)]
    rnd.shuffle(queue)                      # the interleaving of producers in the log
    seq = defaultdict(int)
    log: list[str] = []
    for off, p in enumerate(queue):
        proc = f"{topic}.producer-{p}"
        value = f"{proc}-{seq[p]}"
        seq[p] += 1
        b.send(proc, topic, 0, value, off, 1.0 + off, 1.0 + off + 0.5)
        log.append(value)
    n = len(log)
    lost = set(spec["lost"])
    readable = [(o, v) for o, v in enumerate(log) if o not in lost]
    for c in range(spec["consumers"]):
        msgs = list(readable)
        if c == 0:
            msgs = [(o, f"{topic}.foreign-{o}" if o in spec["diverge"] else v) for o, v in msgs]
        pos, t = 0, float(n + 2)
        while pos < len(msgs):
            k = rnd.randint(1, 4)
            b.poll(f"{topic}.consumer-{c}", topic, 0, msgs[pos:pos + k], t)
            pos, t = pos + k, t + 1.0
    extra = [(n + i, log[o]) for i, o in enumerate(spec["dups"])]
    b.drain(topic, 0, readable + extra, n + len(extra), float(3 * n + 20), process=f"{topic}.drain")
    return {"lost_write": {log[o] for o in lost},
            "duplicate": {log[o] for o in spec["dups"]},
            "inconsistent_offset": set(spec["diverge"])}


def test_injected_anomalies_are_reported_exactly(spark, tmp_path):
    collected: list[dict] = []

    @settings(max_examples=15, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(specs())
    def collect(spec):
        collected.append(spec)

    collect()
    assert len(collected) >= 10
    b = HistoryBuilder()
    expected = {f"prop-{i}": build(b, f"prop-{i}", s) for i, s in enumerate(collected)}
    rd = b.write(tmp_path / "props")
    an = analyze(spark, load_run(spark, rd))
    assert set(an.rows) == set(an.counts) and not an.frames   # all evidence small enough to collect
    got: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for name, rows in an.rows.items():
        for r in rows:
            key = r.get("offset") if name == "inconsistent_offset" else r.get("value")
            got[r["topic"]][name].add(key)
    for i, spec in enumerate(collected):
        topic = f"prop-{i}"
        for name, want in expected[topic].items():
            assert got[topic][name] == want, f"{topic} {name}: got {got[topic][name]} want {want}; spec={spec}"
        if not (spec["lost"] or spec["dups"] or spec["diverge"]):
            flagged = {a: got[topic][a] for a in INVALIDATING if got[topic][a]}
            assert not flagged, f"{topic}: clean history flagged {flagged}; spec={spec}"
    # the injected totals add up in the global counts too
    assert an.counts["lost_write"] == sum(len(e["lost_write"]) for e in expected.values())
