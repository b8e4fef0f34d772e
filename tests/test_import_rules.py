"""The floors of docs/architecture.md, asserted over the source: no arrow runs back up.

Every module's imports (module level, inside functions, under TYPE_CHECKING: all of them) are
read with :mod:`ast`, relative imports resolved, and held against the "Floors" table:

* ``groundwork/`` imports nothing of faultline;
* ``nemeses/``, ``workloads/``, ``checkers/`` import ``groundwork/`` only (``checkers/`` also the
  shared history format, ``workloads/history.py``), never each other otherwise, never ``harness/``;
* ``kraftsim/`` imports only the standard library, kio (with crc32c, kio's own dependency) and
  itself; nothing imports kraftsim (faultline starts it as a program);
* the modules of ``checkers/``, and those of ``kraftsim/``, import each other without cycles.

The rules are checked on a copy with violations planted in it, so a checker that never fires
cannot pass (test the test).
"""
from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("groundwork", "nemeses", "workloads", "checkers", "harness", "kraftsim")

#: package -> the faultline packages (or exact modules) it may import besides itself
ALLOWED: dict[str, tuple[str, ...]] = {
    "groundwork": (),
    "nemeses": ("groundwork",),
    "workloads": ("groundwork",),
    "checkers": ("groundwork", "workloads.history"),
    "harness": ("groundwork", "nemeses", "workloads", "checkers"),
}
#: third-party roots kraftsim may import (besides the standard library and itself): kio, and
#: crc32c, which kio itself requires for the record batch checksum (Kafka's DefaultRecordBatch
#: CRC-32C) - kraftsim computes it with the same library rather than a second implementation
KRAFTSIM_THIRD_PARTY = ("kio", "crc32c")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(root: Path, path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in one file; ``from a import b`` yields
    ``a.b`` when ``a/b`` is a module of the tree, else ``a``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    mod = module_name(root, path)
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                is_mod = (root / Path(*sub.split("."))).with_suffix(".py").is_file() or \
                    (root / Path(*sub.split(".")) / "__init__.py").is_file()
                out.append((node.lineno, sub if is_mod else target))
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _sources(root: Path, package: str) -> list[Path]:
    return sorted(p for p in (root / package).rglob("*.py") if "__pycache__" not in p.parts)


def violations(root: Path) -> list[str]:
    """Every import that breaks a floor, as ``file:line: what``, and every cycle in checkers/ and kraftsim/."""
    found: list[str] = []
    stdlib = set(sys.stdlib_module_names)
    checker_graph: dict[str, set[str]] = {}
    kraftsim_graph: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in _sources(root, package):
            mod = module_name(root, path)
            rel = path.relative_to(root)
            for line, name in imports_of(root, path):
                top = name.split(".")[0]
                if package == "kraftsim":
                    if top not in stdlib and top != "kraftsim" and top not in KRAFTSIM_THIRD_PARTY and top != "__future__":
                        found.append(f"{rel}:{line}: kraftsim imports {name} (only the standard library, kio and itself)")
                    elif _under(name, "kraftsim"):
                        kraftsim_graph.setdefault(mod, set()).add(name)
                    continue
                if top not in PACKAGES or top == package:
                    if package == "checkers" and _under(name, "checkers"):
                        checker_graph.setdefault(mod, set()).add(name)
                    continue
                if top == "kraftsim":
                    found.append(f"{rel}:{line}: {package} imports {name} (kraftsim is a program, never imported)")
                elif not any(_under(name, ok) for ok in ALLOWED[package]):
                    found.append(f"{rel}:{line}: {package} imports {name} (its floor may import "
                                 f"{', '.join(ALLOWED[package]) or 'nothing of faultline'})")
    found += [f"checkers: import cycle {' -> '.join(c)}" for c in cycles(checker_graph)]
    found += [f"kraftsim: import cycle {' -> '.join(c)}" for c in cycles(kraftsim_graph)]
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary cycle found by a depth-first search (each reported once, by its nodes)."""
    out: list[list[str]] = []
    seen_sets: set[frozenset[str]] = set()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if m == n:
                continue
            if state.get(m) == 1:
                cyc = stack[stack.index(m):] + [m]
                key = frozenset(cyc)
                if key not in seen_sets:
                    seen_sets.add(key)
                    out.append(cyc)
            elif state.get(m) is None:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if state.get(n) is None:
            visit(n)
    return out


def test_the_source_keeps_its_floors() -> None:
    assert violations(REPO) == []


def test_every_package_is_read() -> None:
    """The walk sees every package and resolves relative imports (a silent parser proves nothing)."""
    for package in PACKAGES:
        assert _sources(REPO, package), package
    names = {n for _, n in imports_of(REPO, REPO / "checkers" / "load.py")}
    assert "workloads.history" in names and "checkers.ingest" in names


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the source packages (Python files only), clean before anything is planted."""
    root = tmp_path_factory.mktemp("src")

    def not_source(d: str, names: list[str]) -> list[str]:
        return [n for n in names if n == "__pycache__" or (not n.endswith(".py") and not (Path(d) / n).is_dir())]
    for package in PACKAGES:
        shutil.copytree(REPO / package, root / package, ignore=not_source)
    assert violations(root) == []
    return root


@pytest.fixture
def copy(pristine: Path) -> Iterator[Path]:
    """The pristine copy; whatever a test plants is taken out again afterwards."""
    before = {p: p.read_text(encoding="utf-8") for p in pristine.rglob("*.py")}
    yield pristine
    for p, text in before.items():
        p.write_text(text, encoding="utf-8")


def _plant(path: Path, line: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")


@pytest.mark.parametrize("where, line, needle", [
    ("nemeses/base.py", "from harness import cli", "nemeses imports harness.cli"),
    ("workloads/history.py", "def _f():\n    import checkers.verdict", "workloads imports checkers.verdict"),
    ("checkers/lost.py", "from nemeses.base import Nemesis", "checkers imports nemeses.base"),
    ("checkers/attribution.py", "import workloads.observer", "checkers imports workloads.observer"),
    ("groundwork/config.py", "from workloads import history", "groundwork imports workloads.history"),
    ("harness/runner.py", "import kraftsim.cluster", "harness imports kraftsim.cluster"),
    ("kraftsim/config.py", "import yaml", "kraftsim imports yaml"),
    ("kraftsim/config.py", "from harness import cli", "kraftsim imports harness.cli"),
    ("checkers/evidence.py", "from . import verdict", "checkers: import cycle"),
    ("kraftsim/raft/config.py", "def _f():\n    from kraftsim.config import load", "kraftsim: import cycle"),
])
def test_a_planted_violation_is_found(copy: Path, where: str, line: str, needle: str) -> None:
    _plant(copy / where, line)
    found = violations(copy)
    assert any(needle in v for v in found), found
