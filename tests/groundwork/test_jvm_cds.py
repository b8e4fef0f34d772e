"""The class-archive key changes exactly when a JVM would refuse the archive.

The JVM compares each class-path jar's path, size and modification time with those recorded in
the archive (seen on this machine: a virtual environment made again, same pyspark, and a driver
started with ``-Xshare:on`` stopped with "A jar file is not the one used while building the
shared archive file"). So: the same jars give the same key; a jar touched, grown, added, or the
same jars elsewhere, or another java binary, gives another.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from groundwork.jvm_cds import archive_key


def _jars(d: Path) -> Path:
    d.mkdir()
    for name in ("a.jar", "b.jar"):
        (d / name).write_bytes(b"PK" + name.encode())
    (d / "notes.txt").write_text("not on the class path")
    return d


def test_same_jars_same_key_and_every_change_a_jvm_checks_another(tmp_path: Path) -> None:
    java = shutil.which("java") or "/usr/bin/java"
    jars = _jars(tmp_path / "jars")
    key = archive_key(java, [jars])
    assert archive_key(java, [jars]) == key and len(key) == 12
    (jars / "notes.txt").write_text("changed, but not a jar")
    assert archive_key(java, [jars]) == key

    st = (jars / "a.jar").stat()
    os.utime(jars / "a.jar", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))   # installed again
    touched = archive_key(java, [jars])
    assert touched != key
    (jars / "b.jar").write_bytes(b"PK-longer")
    grown = archive_key(java, [jars])
    assert grown not in (key, touched)
    (jars / "c.jar").write_bytes(b"PK")
    assert archive_key(java, [jars]) not in (key, touched, grown)

    # the same jars copied elsewhere (another venv, mtimes kept): another path, another key
    other = tmp_path / "venv2-jars"
    shutil.copytree(jars, other)
    assert archive_key(java, [other]) != archive_key(java, [jars])
    fake_java = tmp_path / "java"
    fake_java.write_text("")
    assert archive_key(str(fake_java), [jars]) != archive_key(java, [jars])


def test_placing_an_archive_removes_the_ones_no_jvm_would_map_any_more(tmp_path: Path) -> None:
    """Three environments: one remade (its jars touched), one deleted, one untouched. Placing a
    new archive removes the first two's archives and records, keeps the third's and its own."""
    from groundwork.jvm_cds import place

    java = shutil.which("java") or "/usr/bin/java"
    cache = tmp_path / "cds"
    cache.mkdir()
    envs = {name: _jars(tmp_path / name) for name in ("remade", "deleted", "kept", "new")}

    def make(name: str) -> Path:
        final = cache / f"4.3.0-{archive_key(java, [envs[name]])}.jsa"
        tmp = cache / f".{name}.tmp"
        tmp.write_bytes(b"archive of " + name.encode())
        place(tmp, final, java, [envs[name]])
        assert final.is_file() and final.with_suffix(".json").is_file() and not tmp.exists()
        return final

    remade, deleted, kept = make("remade"), make("deleted"), make("kept")
    st = (envs["remade"] / "a.jar").stat()
    os.utime(envs["remade"] / "a.jar", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    shutil.rmtree(envs["deleted"])
    (cache / "unrelated.json").write_text("not a record")        # left alone
    new = make("new")
    assert sorted(p.name for p in cache.glob("*.jsa")) == sorted([kept.name, new.name])
    assert not remade.with_suffix(".json").exists() and not deleted.with_suffix(".json").exists()
    assert (cache / "unrelated.json").exists()
