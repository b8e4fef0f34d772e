"""What a nemesis needs to know about a broker host beyond the Node protocol: its log dirs.

Why: the page-cache-loss cut and the disk wipe act on ``log.dirs``. A node may carry them
(``node.log_dirs``), or point at its server.properties (``node.config_path``) which is read
through the transport, exactly as on a lab host; a campaign may also give them directly.
"""
from __future__ import annotations

from typing import Any

from nemeses.base import Node


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties, the subset Kafka configs use (``key=value``, ``#`` comments)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                k, v = line.split(sep, 1)
                out[k.strip()] = v.strip()
                break
    return out


def log_dirs(node: Node, params: dict[str, Any] | None = None) -> list[str]:
    params = params or {}
    dirs = params.get("log_dirs") or getattr(node, "log_dirs", None) \
        or getattr(getattr(node, "spec", None), "data_dirs", None)
    if dirs:
        return [dirs] if isinstance(dirs, str) else list(dirs)
    cfg = getattr(node, "config_path", None)
    if cfg:
        text = node.transport.read_text(cfg)
        if text is None:
            raise ValueError(f"{node.name}: cannot read broker config {cfg}")
        props = parse_properties(text)
        val = props.get("log.dirs") or props.get("log.dir")
        if val:
            return [d.strip() for d in val.split(",") if d.strip()]
        raise ValueError(f"{node.name}: {cfg} has no log.dirs (or log.dir)")
    raise ValueError(f"{node.name}: no log dirs known: give params.log_dirs, node.log_dirs or node.config_path")
