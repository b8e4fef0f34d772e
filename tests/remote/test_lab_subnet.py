"""A lab whose subnet another device already routes refuses to come up, naming that device.

Why: a Docker network left by a killed run once held the SSH nemesis lab's 10.250.6.0/24; the
host then sent the lab's traffic to Docker's empty bridge and the lab's sshd, listening fine in
its namespace, "did not listen" for 15 s with no clue why. Here a bridge of the test's own (as a
Docker network is) stands in for the leftover; any device routing the subnet does the same.
"""
from __future__ import annotations

import pytest

from tests.support.netlab import LABS, SUBNET_PREFIX, NetLab, cleanup_stale, sh

HOLDER = "fl-t-holder"


def test_a_lab_whose_subnet_is_routed_elsewhere_refuses_and_names_the_device():
    cleanup_stale("misc")
    sh("ip", "link", "del", HOLDER, check=False)
    lab = NetLab("misc", ["a"])
    subnet = f"{SUBNET_PREFIX}.{LABS['misc']}.0/24"
    try:
        sh("ip", "link", "add", HOLDER, "type", "bridge")
        sh("ip", "addr", "add", f"{lab.gateway}/24", "dev", HOLDER)
        sh("ip", "link", "set", HOLDER, "up")
        with pytest.raises(RuntimeError, match=rf"{subnet} is already routed via {HOLDER}"):
            lab.up()
        sh("ip", "link", "del", HOLDER)
        lab.up()                                         # the control: free again, it comes up
        assert lab.ns("a") in sh("ip", "netns", "list").stdout
    finally:
        sh("ip", "link", "del", HOLDER, check=False)
        lab.down()
