"""Assemble verdict.json from the anomaly counts (format: docs/verdict-format.md).

Which anomalies make a run invalid, and why (docs/anomalies.md §validity): every anomaly that
shows Kafka broke a promise does; ``unseen_at_end`` (availability) and
``failed_write_visible_allowed`` (Kafka allows it, docs/seeds.md#seed-003-2-7) are only counted; a duplicate
only breaks a promise when the producer was idempotent (``enable.idempotence``, Kafka's default
since 3.0, is assumed on unless run.json's switches say false).

Whether the run met its expectation (no-loss, loss, loss-allowed, require_errors) is not decided
here: this module gathers the evidence (:class:`checkers.outcome.Evidence`: counts, validity,
loss stories, send errors, and :func:`thin_evidence` - a run that found nothing is only a pass
when it tested something: at least one acknowledged write, and a complete read of every partition
that had acknowledged writes) and writes what :func:`checkers.outcome.decide` decides
(docs/anomalies.md §outcome) into the verdict, once, for every reader.

Each anomaly family runs check-safe (checkers/families.py); the families' answers merge as
Jepsen's merge-valid (:func:`validity`), and a family that raised turns a run that found nothing
into an inconclusive one naming it (:func:`failure_reasons`): one more :attr:`Evidence.thin` reason.
So are too few faults applied (run.json ``faults`` below ``nemesis.min_applied``,
:meth:`checkers.outcome.FaultCount.shortfall`) and a node that stopped during the run on its own
(:mod:`checkers.halts`): both are in the verdict (``faults``, ``halts``) whatever the outcome.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from checkers import incidents
from checkers.analysis import Analysis
from checkers.halts import halt_reasons
from checkers.outcome import EXIT_INCONCLUSIVE, Evidence, Expectation, FaultCount, decide, exit_code  # noqa: F401 - exit codes: checkers/outcome.py
from checkers.stories import mechanism_counts
from workloads.history import send_errors

INFORMATIONAL = ("unseen_at_end", "failed_write_visible_allowed",
                 # the cluster's metadata and availability, not the history (docs/anomalies.md):
                 # a campaign requires or forbids them (require_anomalies, forbid_anomalies)
                 "controller_split_brain", "isr_change_stuck",
                 # a broker's own storage (checkers/effects.py): what it did to its log dirs, not a
                 # promise the history tests
                 "log_not_recovered", "log_dir_offline")
EXAMPLES = 10
ATTRIBUTIONS = 100
#: verdict.json's format version ("v", its first key, as the history's and the timeline's records
#: carry theirs): bump it on an incompatible change (docs/verdict-format.md); a verdict without
#: one was written before it existed and reads as version 1
VERDICT_VERSION = 1

#: partitions named in an inconclusive reason before "and N more"
_NAMED = 10


def _false(v: Any) -> bool:
    return v is False or (isinstance(v, str) and v.strip().lower() in ("false", "0", "no", "off"))


def pkey(topic: Any, partition: Any) -> str:
    """A partition's key in verdict.json: ``<topic>@<partition>``, as the ingest names its
    directories; ``@`` cannot occur in a Kafka topic name (letters, digits, ``.``, ``_``, ``-``),
    so the key splits back unambiguously at its last ``@``."""
    return f"{topic}@{partition}"


def invalidating(counts: dict[str, int], run: dict[str, Any]) -> list[str]:
    """The anomaly names with a nonzero count that make the run invalid."""
    idem_off = _false((run.get("switches") or {}).get("enable.idempotence"))
    bad = []
    for name, n in counts.items():
        if n == 0 or name in INFORMATIONAL or (name == "duplicate" and idem_off):
            continue
        bad.append(name)
    return bad


def thin_evidence(acked: int, stats: list[dict[str, Any]]) -> list[str]:
    """Why the run cannot show a pass: no acknowledged write, or partitions with acknowledged
    writes whose end nobody read completely (no ``drain-end``: a lost write there could hide
    as merely unseen)."""
    if acked == 0:
        return ["no acknowledged writes: nothing was tested"]
    unread = sorted(pkey(s["topic"], s["partition"]) for s in stats
                    if s.get("partition") is not None and int(s.get("acked") or 0) > 0 and s.get("drain_end") is None)
    if not unread:
        return []
    named = ", ".join(unread[:_NAMED]) + (f" and {len(unread) - _NAMED} more" if len(unread) > _NAMED else "")
    return [f"no complete read (final drain end) of {len(unread)} partition{'s' if len(unread) != 1 else ''} "
            f"with acknowledged writes: {named}"]


# -- family failures (checkers/families.py: each family runs check-safe) -----------------------

def validity(invalid_because: list[str], failures: list[dict[str, Any]]) -> str:
    """Jepsen's merge-valid over the families, false over unknown over true: ``invalid`` when
    any family found an anomaly that breaks a promise (a definite finding stands, whatever else
    failed), else ``unknown`` when a family raised, else ``valid``."""
    if invalid_because:
        return "invalid"
    return "unknown" if failures else "valid"


def failure_reasons(failures: list[dict[str, Any]], expected: str) -> list[str]:
    """The inconclusive reasons family failures give a run that found nothing: under ``loss``
    only a failure of the family that counts lost writes (the others cannot hide a loss);
    under ``no-loss`` every failure (any family could have found what breaks a promise)."""
    if expected != "no-loss":
        failures = [f for f in failures if "lost_write" in f.get("anomalies", [])]
    out = []
    for f in failures:
        parts = f["partitions"]
        named = ", ".join(parts[:_NAMED]) + (f" and {len(parts) - _NAMED} more" if len(parts) > _NAMED else "")
        out.append(f"anomaly family {f['family']} ({', '.join(f.get('anomalies') or [])}) failed on "
                   f"{len(parts)} partition{'s' if len(parts) != 1 else ''} ({named}): {f['error']}")
    return out


def build_verdict(an: Analysis, run: dict[str, Any], *, expect: str | None = None,
                  run_dir: Path | None = None) -> dict[str, Any]:
    """verdict.json from what the check found; ``expect`` overrides run.json's kind of
    expectation, ``run_dir`` is where the histories are (send errors, when required)."""
    counts = dict(an.counts)
    bad = invalidating(counts, run)
    valid = not bad
    exp = Expectation.from_run(run, expect=expect)
    stories = list(an.extra.get("stories") or [])
    errors = send_errors(run_dir) if exp.require_errors and run_dir is not None else {}
    # a family that raised leaves a run that found nothing without an answer (docs/verdict-format.md);
    # so do too few faults applied and a node that stopped on its own: the run tested less than meant
    faults = FaultCount.from_run(run)
    node_halts = list(an.extra.get("halts") or [])
    thin = thin_evidence(an.acked_writes, an.stats) + failure_reasons(an.family_failures, exp.expect) \
        + (faults.shortfall() if faults is not None else []) + halt_reasons(node_halts)
    decided = decide(exp, Evidence(lost=int(counts["lost_write"]), acked=an.acked_writes, valid=valid,
                                   invalid_because=bad, counts=counts, stories=stories, send_errors=errors,
                                   thin=thin)).to_verdict(exp)
    merged = validity(bad, an.family_failures)
    n_incidents, by_kind = incidents.headline(an.extra.get("incidents") or {}, counts, bad)
    by_part = {pkey(r["topic"], r["partition"]): int(r["lost"]) for r in an.stats if r.get("lost")}
    lost_rows = an.examples("lost_write", ATTRIBUTIONS)
    names = [c for c, _ in an.columns["lost_write"]]
    attribution_cols = [c for c in ("topic", "partition", "offset", "value", "process", "ack_t", "miss_t", "miss_by",
                                    "lost_because", "faults", "elections", "isr_changes", "alter_partition",
                                    "broker_events", "removed_by", "attribution") if c in names]
    return {
        "v": VERDICT_VERSION,
        "outcome": decided["outcome"],
        "outcome_reason": decided["outcome_reason"],
        "inconclusive_because": decided["inconclusive_because"],
        "valid": merged == "valid",
        "validity": merged,
        "family_failures": list(an.family_failures),
        "faults": faults.to_json() if faults is not None else None,
        "halts": node_halts,
        "incidents": n_incidents,
        "incidents_by_anomaly": by_kind,
        "counts": counts,
        "invalid_because": bad,
        "acked_writes": an.acked_writes,
        "history_records": an.history_records,
        "bad_lines": an.bad_lines,
        "torn_lines": an.torn_lines,
        "expected": decided["expected"],
        "expectation": decided["expectation"],
        "as_expected": decided["as_expected"],
        "expectations": decided["expectations"],
        "allowed_by": decided["allowed_by"],
        **({"send_errors": errors} if exp.require_errors else {}),
        "run_id": run.get("run_id"),
        # what the run ran against (run.json): kraftsim, real Apache Kafka of a release, or a lab
        "target": run.get("target"),
        "target_version": run.get("target_version"),
        "mechanisms": mechanism_counts(stories),
        "stories": stories,
        "examples": {name: an.examples(name, EXAMPLES) for name in an.counts if counts[name] > 0},
        "lost_writes_by_partition": dict(sorted(by_part.items())),
        "attribution": [{c: r.get(c) for c in attribution_cols} for r in lost_rows],
    }
