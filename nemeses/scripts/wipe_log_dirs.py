#!/usr/bin/env python3
"""Replace a stopped Kafka broker's disk: empty its log dirs, keep who it is.

Runs ON the Kafka host, stdlib only (``python3 -`` through the transport). docs/seeds.md#seed-000 step 4
("the disk has been replaced (all of the previous states have been lost)"): every file in
each log dir is removed, then ``meta.properties`` is written again with the same
``node.id`` and ``cluster.id`` (so the broker may rejoin its cluster, as after a real disk
replacement and ``kafka-storage format``) and a new ``directory.id`` (a fresh disk is a new
log directory, KIP-858). With ``--empty`` nothing is written back: the host's own
``kafka-storage format`` (the inventory's ``kafka_service.format``) formats the emptied dirs as
that release requires, as an operator brings a replaced disk back. Prints {"dirs": [{dir,
removed_entries, node_id, cluster_id, old_directory_id, new_directory_id}]}; exit 2 with one
line on bad input.
"""
import argparse
import base64
import json
import os
import shutil
import sys
import time


def fail(msg):
    print(f"disk-wipe: {msg}", file=sys.stderr)
    sys.exit(2)


def read_meta(path):
    props = {}
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                props[k.strip()] = v.strip()
    return props


def new_directory_id():
    while True:   # Kafka reserves a few all-zero-prefixed ids; a random one never collides
        raw = os.urandom(16)
        if raw[:15] != bytes(15):
            return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log-dir", action="append", required=True)
    ap.add_argument("--node-id", type=int, help="used when a log dir has no meta.properties")
    ap.add_argument("--cluster-id", help="used when a log dir has no meta.properties")
    ap.add_argument("--empty", action="store_true", help="leave the dirs empty (a format command follows)")
    a = ap.parse_args()
    out = []
    for d in a.log_dir:
        if not os.path.isdir(d):
            fail(f"log dir {d} does not exist (check log.dirs in the broker's config)")
        meta_path = os.path.join(d, "meta.properties")
        meta = read_meta(meta_path) if os.path.exists(meta_path) else {}
        node_id = meta.get("node.id") or meta.get("broker.id") or (str(a.node_id) if a.node_id is not None else None)
        cluster_id = meta.get("cluster.id") or a.cluster_id
        if (node_id is None or cluster_id is None) and not a.empty:
            fail(f"{meta_path}: no node.id/cluster.id to keep; pass --node-id and --cluster-id")
        removed = 0
        for n in os.listdir(d):
            p = os.path.join(d, n)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.remove(p)
            removed += 1
        if a.empty:
            out.append({"dir": d, "removed_entries": removed, "node_id": int(node_id) if node_id else None,
                        "cluster_id": cluster_id, "old_directory_id": meta.get("directory.id"),
                        "new_directory_id": None})
            continue
        new_id = new_directory_id()
        tmp = meta_path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(f"#\n#{time.strftime('%a %b %d %H:%M:%S UTC %Y', time.gmtime())}\n")
            fh.write(f"node.id={node_id}\ndirectory.id={new_id}\nversion={meta.get('version', '1')}\n"
                     f"cluster.id={cluster_id}\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, meta_path)
        out.append({"dir": d, "removed_entries": removed, "node_id": int(node_id), "cluster_id": cluster_id,
                    "old_directory_id": meta.get("directory.id"), "new_directory_id": new_id})
    print(json.dumps({"dirs": out}))


if __name__ == "__main__":
    main()
