"""How the suite runs on two pytest-xdist workers (``-n 2 --dist loadgroup``, README and .ci/run).

Why two workers: most of the suite's time is real clusters running real workloads for their
duration - waiting, not computing (an idle CI run used about a third of the machine's two cores).
Two workers overlap those waits.

What must not overlap, and so forms one group that a single worker runs in file order:
- tests that build hosts in network namespaces, bridges and veths (tests/support/netlab.py,
  tests/remote/sshlab.py): their labs reuse names and the host's neighbour tables;
- Docker containers, networks and volumes the tests create and sweep by label;
- traffic control and the host's whole iptables ruleset read back (tc qdiscs are compared
  before and after a crash; ``iptables-save`` is read whole).

Every other test keeps its module together (the group is its file), so a module-scoped
cluster or run fixture is built once, on one worker, as without xdist. The host group and
modules with tests marked ``slow`` are handed out first (``--no-loadscope-reorder`` keeps this
order instead of xdist's largest-count-first), so the longest groups do not start last.
"""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

#: test files (relative to tests/) or folders whose tests share host-wide state (docstring)
HOST_STATE = (
    "remote/",
    "nemeses/",
    "kraftsim/test_netns.py",
    "checkers/test_ack_control_runs.py",
    "harness/test_heal_after_sigkill.py",
)
HOST_GROUP = "host-network"


def group_of(item: pytest.Item) -> str:
    rel = Path(str(item.fspath)).resolve().relative_to(ROOT).as_posix()
    if any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in HOST_STATE):
        return HOST_GROUP
    return rel


@pytest.hookimpl(tryfirst=True)   # before xdist's own hook, which reads the marks into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {id(it): group_of(it) for it in items}
    slow = {groups[id(it)] for it in items if it.get_closest_marker("slow")}
    for it in items:
        it.add_marker(pytest.mark.xdist_group(groups[id(it)]))
    # stable: file order within a group; slow groups (and the host group, the longest) first
    items.sort(key=lambda it: (groups[id(it)] != HOST_GROUP, groups[id(it)] not in slow))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse to run when xdist's loadgroup did not take the groups (it writes them into the
    node ids): host-network tests would then run side by side and fail for no reason of theirs."""
    if getattr(session.config.option, "loadgroup", False) and any("@" not in it.nodeid for it in session.items):
        raise pytest.UsageError("--dist loadgroup: pytest-xdist did not group the tests (its xdist_group node-id "
                                "suffix is missing): install the test extra's pinned pytest (pyproject.toml)")


@pytest.fixture(scope="session")
def spark():
    """One SparkSession for every in-process check of a worker: Spark's start costs seconds.
    Code under test that finds it running shares it and leaves it running
    (checkers.session.session_running)."""
    from checkers.session import make_session

    s = make_session("local[2]", app_name="faultline-tests")
    try:
        yield s
    finally:
        s.stop()
