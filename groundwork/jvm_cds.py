"""The key of a JDK class-data-sharing archive: what a JVM checks before it maps one.

Why one owner: the checker's Spark driver (checkers/session.py) and every real Kafka node
(targets/kafka_cds.py) map a dynamic archive (``-XX:SharedArchiveFile``) made once by an earlier
JVM. A JVM maps it only when it is the same JDK and every jar of the class path is the one the
archive was made from - same path, same size, same modification time ("A jar file is not the
one used while building the shared archive file"); otherwise it ignores the archive (``-Xshare:auto``,
the default: a silent slow start) or refuses to start (``-Xshare:on``). A virtual environment made
again installs the same jars with new times, a release installed again the same: the key has
to change with them, so a stale archive is never looked up and a fresh one is made.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path


def java_stamp(java: str) -> str:
    """The java binary's real path and modification time (a JDK upgraded in place changes it)."""
    real = os.path.realpath(java)
    try:
        return f"{real}\0{os.stat(real).st_mtime_ns}"
    except OSError:
        return f"{real}\0-"


def archive_key(java: str, jar_dirs: list[Path]) -> str:
    """Twelve hex digits over the java binary and each ``*.jar`` of ``jar_dirs`` (path, size,
    mtime): equal exactly when a JVM would accept an archive made with the other."""
    h = hashlib.sha1(java_stamp(java).encode())
    for d in jar_dirs:
        for jar in sorted(Path(d).resolve().glob("*.jar")):
            try:
                st = jar.stat()
            except OSError:
                continue
            h.update(f"\0{jar}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()[:12]


def place(tmp: Path, final: Path, java: str, jar_dirs: list[Path]) -> None:
    """Rename a whole archive into place, beside a record of what it was made from
    (``<archive>.json``: java, jar dirs), and remove the archives in the same directory that
    their own record shows no JVM would map any more - their jars installed again or gone.
    Why: each remade environment leaves an archive of 40-120 MB under another key; without this
    a machine whose venv or Kafka cache is rebuilt nightly fills its cache directory."""
    import json

    os.replace(tmp, final)
    final.with_suffix(".json").write_text(json.dumps({"java": java, "jar_dirs": [str(d) for d in jar_dirs]}))
    for rec in final.parent.glob("*.json"):
        jsa = rec.with_suffix(".jsa")
        if jsa == final:
            continue
        try:
            made = json.loads(rec.read_text())
            java_then, dirs = str(made["java"]), [Path(d) for d in made["jar_dirs"]]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not jsa.name.endswith(f"-{archive_key(java_then, dirs)}.jsa") or not all(d.is_dir() for d in dirs):
            jsa.unlink(missing_ok=True)
            rec.unlink(missing_ok=True)
