"""Fixtures for the remote-target tests: sshd-in-namespace lab hosts and a Docker engine.

Everything these fixtures create (namespaces, bridge, sshd processes, test users,
sudoers file, containers, networks, volumes) is removed in ``finally`` blocks, so a
failing test leaves nothing behind.
"""
from __future__ import annotations

import pytest

from tests.remote.sshlab import SshLab


@pytest.fixture(scope="module")
def ssh_lab():
    lab = SshLab(["h1", "h2"])
    try:
        yield lab.up()
    finally:
        lab.down()
