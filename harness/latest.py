"""``RESULTS/latest`` (the newest run) and ``RESULTS/latest-suite`` (the newest suite): symlinks a
person opens without reading timestamps, e.g. ``xdg-open results/latest/report.html``.

Why atomic: two runs sharing a results dir (two labs, a suite and a run) may start at the same
moment; the link is made under a temporary name and renamed over the old one (``rename(2)``
replaces it in one step), so a reader never finds it missing or half-made. The link is relative,
so a results dir moved or copied elsewhere keeps it. Listings of a results dir skip symlinks
(harness/prune.py, harness/report/index.py), so the newest run is never listed twice.
"""
from __future__ import annotations

import os
from pathlib import Path

RUN_LINK = "latest"
SUITE_LINK = "latest-suite"


def point_latest(results_dir: Path, target: Path, name: str = RUN_LINK) -> None:
    """Point ``results_dir/name`` at ``target`` (a directory inside it). Best effort: a results
    dir on a file system without symlinks loses only the convenience, never the run."""
    link = results_dir / name
    tmp = results_dir / f".{name}.{os.getpid()}.tmp"
    try:
        tmp.unlink(missing_ok=True)
        os.symlink(os.path.relpath(target, results_dir), tmp)
        os.replace(tmp, link)
    except OSError:
        tmp.unlink(missing_ok=True)
