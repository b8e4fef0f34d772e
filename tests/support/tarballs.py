"""Unpack a recorded run (a fixture ``.tar.gz``) safely on every Python 3.11.

Why not ``extractall(filter="data")`` alone: the ``filter`` argument (PEP 706) arrived in a
3.11 point release (3.11.4); Debian 12's python3 is 3.11.2, and the README's test command
runs there. On such a Python the same rule is applied by hand: regular files and
directories only, every path inside ``dest``.
"""
from __future__ import annotations

import tarfile
from pathlib import Path


def unpack(archive: Path, dest: Path) -> Path:
    """Extract ``archive`` into ``dest`` (which must exist); return ``dest``."""
    with tarfile.open(archive) as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(dest, filter="data")
            return dest
        root = dest.resolve()
        members = tf.getmembers()
        for m in members:
            target = (root / m.name).resolve()
            if not (m.isfile() or m.isdir()) or not target.is_relative_to(root):
                raise ValueError(f"{archive}: member {m.name!r} is not a plain file or directory inside the archive")
        tf.extractall(dest, members=members)
    return dest
