"""acks=all racing an ISR shrink below min.insync.replicas, on a real kraftsim cluster.

Kafka: ``Partition.checkEnoughReplicasReachOffset`` answers success only while effective min
ISR ≤ |maximal ISR| (else NOT_ENOUGH_REPLICAS_AFTER_APPEND), and from 3.7 (KAFKA-15583)
``Partition.maybeIncrementLeaderHW`` does not advance the HWM while the committed ISR is below
min ISR. So no acks=all write is ever acknowledged with fewer than min ISR copies.

The reported fault: RF 2, min ISR 2, ELR off, the follower SIGSTOPped while a producer writes;
hundreds of writes were acknowledged with one copy right after the controller accepted the
shrink to the leader alone.
"""
from __future__ import annotations

import signal
import struct
import time
from pathlib import Path

import pytest

from tests.kraftsim.clients import TrackingProducer, create_topic


def _log_end_offset(pdir: Path) -> int:
    """The follower's LEO from its segment files (batch headers only)."""
    end = 0
    for seg in sorted(pdir.glob("*.log"), key=lambda f: int(f.stem)):
        data = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack(">qi", data[pos:pos + 12])
            last_delta = struct.unpack(">i", data[pos + 23:pos + 27])[0]
            if pos + 12 + length > len(data):
                break
            end = base + last_delta + 1
            pos += 12 + length
    return end


@pytest.mark.slow
@pytest.mark.parametrize("mv", ["3.9", "3.6"])
def test_no_ack_with_fewer_than_min_isr_copies(kraftsim_cluster, mv):
    """RF 2, min ISR 2, metadata.version 3.9 (HWM rule in force, ELR off) and 3.6 (before
    KAFKA-15583: the HWM jumps, the completion check answers NOT_ENOUGH_REPLICAS_AFTER_APPEND):
    follower 2 SIGSTOPped while writes flow; every acknowledged offset is below follower 2's log
    end offset, i.e. held by both replicas."""
    c = kraftsim_cluster(brokers=2, settings={"metadata.version": mv})
    create_topic(c.bootstrap, "m", assignment=[[1, 2]], min_isr=2)
    prod = TrackingProducer(f"{c.addr(1)[0]}:{c.addr(1)[1]}",
                            **{"request.timeout.ms": 2500, "message.timeout.ms": 4000, "retries": 0})
    try:
        i = 0
        while len(prod.acked) < 200 and i < 5000:
            prod.send("m", f"a{i}".encode(), partition=0)
            i += 1
            prod.p.poll(0.001)
        prod.flush(10)
        t0 = time.time()
        c.signal("broker-2", signal.SIGSTOP)
        shrink = None
        while time.time() - t0 < 12:
            prod.send("m", f"b{i}".encode(), partition=0)
            i += 1
            prod.p.poll(0.002)
            if shrink is None:
                shrink = next((e for e in c.events() if e["event"] == "isr_changed" and e["topic"] == "m"
                               and e["isr"] == [1] and e["wall"] >= t0), None)
            elif time.time() - shrink["wall"] > 1.5:
                break
        assert shrink is not None, "the leader never shrank the ISR"
        prod.flush(10)
    finally:
        c.kill("broker-2")
    follower_leo = _log_end_offset(c.data_dir(2) / "m-0")
    one_copy = sorted(off for _, off in prod.acked.values() if off >= follower_leo)
    assert not one_copy, f"{len(one_copy)} writes acknowledged with one copy (follower LEO {follower_leo})"
