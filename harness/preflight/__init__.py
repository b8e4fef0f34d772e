"""``faultline preflight INVENTORY``: before a nightly run, can a run on this lab work?

Why a command of its own (and not the run loop's set-up): a run finds a lab problem only when
it reaches it - sudo that wants a password at the first partition, a log dir that is not there
at the first disk wipe, a clock 3 s off when the report lines events up - and a suite finds
it once per cell. Preflight connects to every host once, checks what a run needs, and prints
one table (host x check: ok / warn / FAIL) and one line per problem with its fix. FAIL is what
stops a run from injecting or reading (unreachable, no root for iptables/tc, a missing log dir,
a stopped Kafka, a logger the event reader needs raised above INFO); warn is what degrades it
(reboots emulated, clocks apart, little disk, an unknown version). The suite runs it first.

Modules: :mod:`harness.preflight.checks` (the checks of one host, over the inventory's
transport - :mod:`harness.probe`'s reachability is the first of them), :mod:`.model` (what
they find), :mod:`.log4j` (the levels of Kafka's loggers from its log4j config), :mod:`.clock`
(a host's clock offset), :mod:`.embedded` (the embedded target: this machine), :mod:`.render`
(the table and the problem lines). Reachability keeps its own small command,
``python -m harness.probe`` (docs/targets.md).
"""
from __future__ import annotations

from harness.preflight.checks import preflight
from harness.preflight.model import COLUMNS, FAIL, OK, SKIP, WARN, Check, HostResult, Issue, Options, Report

__all__ = ["COLUMNS", "FAIL", "OK", "SKIP", "WARN", "Check", "HostResult", "Issue", "Options", "Report", "preflight"]
