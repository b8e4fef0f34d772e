"""The floors of docs/architecture.md, asserted over the source: no arrow runs back up.

Every module's imports (module level, inside functions, under TYPE_CHECKING: all of them, and
``importlib.import_module("name")`` / ``__import__("name")`` with a literal name) are read with
:mod:`ast`, relative imports resolved, and held against the "Floors" table:

* ``groundwork/`` imports nothing of faultline;
* ``nemeses/``, ``workloads/``, ``checkers/`` import ``groundwork/`` only (``checkers/`` also the
  shared history format, ``workloads/history.py``), never each other otherwise, never ``harness/``;
* ``kraftsim/`` imports only the standard library, kio (with crc32c, kio's own dependency) and
  itself; nothing imports kraftsim (faultline starts it as a program);
* ``lossyfs/`` imports only the standard library, mfusepy and itself; nothing imports lossyfs
  (faultline starts it as a program, ``python -m lossyfs``);
* ``benchmarks/`` sit at the top: they may import anything, and nothing imports them;
* no import cycle among all of these modules (a name computed at run time, such as the
  nemesis catalog's ``import_module(f"nemeses.{name}")``, is no edge: only a literal is).

The rules are checked on a copy with violations planted in it, so a checker that never fires
cannot pass (test the test).
"""
from __future__ import annotations

import ast
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("groundwork", "nemeses", "workloads", "checkers", "targets", "harness", "kraftsim", "lossyfs")
#: scripts above every floor (run as ``python benchmarks/X.py``, so they import each other by
#: their bare file names): they may import anything, nothing may import them
BENCHMARKS = "benchmarks"
SCANNED = (*PACKAGES, BENCHMARKS)

#: package -> the faultline packages (or exact modules) it may import besides itself
ALLOWED: dict[str, tuple[str, ...]] = {
    "groundwork": (),
    "nemeses": ("groundwork",),
    "workloads": ("groundwork",),
    "checkers": ("groundwork", "workloads.history"),
    "targets": ("groundwork",),
    "harness": ("groundwork", "nemeses", "workloads", "checkers", "targets"),
}
#: third-party roots kraftsim may import (besides the standard library and itself): kio, and
#: crc32c, which kio itself requires for the record batch checksum (Kafka's DefaultRecordBatch
#: CRC-32C) - kraftsim computes it with the same library rather than a second implementation
KRAFTSIM_THIRD_PARTY = ("kio", "crc32c")
#: packages that stand apart as programs: nothing of faultline imports them, and they import only
#: the standard library, themselves and these third-party roots
APART: dict[str, tuple[str, ...]] = {"kraftsim": KRAFTSIM_THIRD_PARTY, "lossyfs": ("mfusepy",)}


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(root: Path, name: str) -> bool:
    p = root / Path(*name.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def _literal_import(call: ast.Call) -> tuple[str, str | None] | None:
    """``(name, package)`` of ``importlib.import_module("name"[, "package"])``,
    ``import_module(...)`` or ``__import__("name")`` when the name is a literal, else None."""
    f = call.func
    fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if fname not in ("import_module", "__import__") or not call.args:
        return None
    if isinstance(f, ast.Attribute) and not (isinstance(f.value, ast.Name) and f.value.id == "importlib"):
        return None
    first = call.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    pkg_arg = call.args[1] if fname == "import_module" and len(call.args) > 1 else \
        next((k.value for k in call.keywords if k.arg == "package"), None)
    package = pkg_arg.value if isinstance(pkg_arg, ast.Constant) and isinstance(pkg_arg.value, str) else None
    return first.value, package


def imports_of(root: Path, path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in one file; ``from a import b`` yields
    ``a.b`` when ``a/b`` is a module of the tree, else ``a``. A benchmark's bare import of a
    sibling script (``from kraftsim_throughput import ...``) yields ``benchmarks.<name>``."""
    text = path.read_text(encoding="utf-8")
    key = (str(root), str(path), text)
    if key not in _IMPORTS:
        _IMPORTS[key] = _imports_of(root, path, text)
    return _IMPORTS[key]


#: parsed files by (tree, file, text): the planted tests re-read a copy that differs in one file
_IMPORTS: dict[tuple[str, str, str], list[tuple[int, str]]] = {}


def _imports_of(root: Path, path: Path, text: str) -> list[tuple[int, str]]:
    tree = ast.parse(text, filename=str(path))
    mod = module_name(root, path)
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    in_benchmarks = mod.split(".")[0] == BENCHMARKS

    def absolute(level: int, module: str | None) -> str:
        if not level:
            name = module or ""
            sibling = f"{BENCHMARKS}.{name}"
            return sibling if in_benchmarks and _is_module(root, sibling) else name
        base = pkg.split(".")
        base = base[:len(base) - (level - 1)] if level > 1 else base
        return ".".join([*base, *(module.split(".") if module else [])])

    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, absolute(0, a.name)) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = absolute(node.level, node.module)
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((node.lineno, sub if _is_module(root, sub) else target))
        elif isinstance(node, ast.Call) and (lit := _literal_import(node)) is not None:
            name, package = lit
            if name.startswith("."):
                if package is None:
                    continue
                level = len(name) - len(name.lstrip("."))
                name = ".".join(p for p in (package, name.lstrip(".")) if p) if level == 1 else \
                    ".".join([*package.split(".")[:-(level - 1)], name.lstrip(".")])
            out.append((node.lineno, absolute(0, name)))
    return out


def _known(root: Path, name: str) -> str | None:
    """The module of the tree an imported name loads (the name itself, or the nearest
    enclosing module), or None for a module outside faultline."""
    parts = name.split(".")
    while parts:
        if _is_module(root, ".".join(parts)):
            return ".".join(parts)
        parts.pop()
    return None


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _sources(root: Path, package: str) -> list[Path]:
    return sorted(p for p in (root / package).rglob("*.py") if "__pycache__" not in p.parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules of the tree it imports (literal importlib names included)."""
    graph: dict[str, set[str]] = {}
    for package in SCANNED:
        for path in _sources(root, package):
            mod = module_name(root, path)
            edges = graph.setdefault(mod, set())
            for _, name in imports_of(root, path):
                target = _known(root, name)
                if target is not None and target != mod:
                    edges.add(target)
    return graph


def floor_violations(root: Path) -> list[str]:
    """Every import that breaks a floor, as ``file:line: what``."""
    found: list[str] = []
    stdlib = set(sys.stdlib_module_names)
    for package in SCANNED:
        for path in _sources(root, package):
            rel = path.relative_to(root)
            for line, name in imports_of(root, path):
                top = name.split(".")[0]
                if package == BENCHMARKS:
                    continue
                if top == BENCHMARKS:
                    found.append(f"{rel}:{line}: {package} imports {name} (benchmarks sit at the top: nothing imports them)")
                    continue
                if package in APART:
                    if top not in stdlib and top != package and top not in APART[package] and top != "__future__":
                        found.append(f"{rel}:{line}: {package} imports {name} (only the standard library, "
                                     f"{', '.join(APART[package])} and itself)")
                    continue
                if top not in PACKAGES or top == package:
                    continue
                if top in APART:
                    found.append(f"{rel}:{line}: {package} imports {name} ({top} is a program, never imported)")
                elif not any(_under(name, ok) for ok in ALLOWED[package]):
                    found.append(f"{rel}:{line}: {package} imports {name} (its floor may import "
                                 f"{', '.join(ALLOWED[package]) or 'nothing of faultline'})")
    return found


def cycle_violations(root: Path) -> list[str]:
    """Every import cycle among all modules, as ``<package>: import cycle a -> b -> a`` (the
    package the cycle lies in, or ``faultline`` when it crosses packages)."""
    found = []
    for c in cycles(import_graph(root)):
        tops = {m.split(".")[0] for m in c}
        found.append(f"{tops.pop() if len(tops) == 1 else 'faultline'}: import cycle {' -> '.join(c)}")
    return found


def violations(root: Path) -> list[str]:
    """Every floor broken and every import cycle."""
    return floor_violations(root) + cycle_violations(root)


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
                loop = stack[stack.index(m):]
                key = frozenset(loop)
                if key not in seen_sets:
                    seen_sets.add(key)
                    first = loop.index(min(loop))       # the same cycle reads the same from any start
                    loop = loop[first:] + loop[:first]
                    out.append(loop + [loop[0]])
            elif state.get(m) is None:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if state.get(n) is None:
            visit(n)
    return out


def test_the_source_keeps_its_floors() -> None:
    found = floor_violations(REPO)
    assert found == [], "imports that break a floor of docs/architecture.md:\n" + "\n".join(found)


def test_no_module_import_cycle() -> None:
    found = cycle_violations(REPO)
    assert found == [], "modules that import each other (directly or round a loop):\n" + "\n".join(found)


def test_every_package_is_read() -> None:
    """The walk sees every package and resolves relative imports (a silent parser proves nothing)."""
    for package in SCANNED:
        assert _sources(REPO, package), package
    names = {n for _, n in imports_of(REPO, REPO / "checkers" / "load.py")}
    assert "workloads.history" in names and "checkers.ingest" in names
    graph = import_graph(REPO)
    bench = {m: e for m, e in graph.items() if m.startswith(f"{BENCHMARKS}.")}
    assert bench and any(e for e in bench.values()), "the benchmarks' imports of faultline are read"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the source packages and benchmarks (Python files only), before anything is
    planted: it reports exactly what the tree itself does."""
    root = tmp_path_factory.mktemp("src")

    def not_source(d: str, names: list[str]) -> list[str]:
        return [n for n in names if n == "__pycache__" or (not n.endswith(".py") and not (Path(d) / n).is_dir())]
    for package in SCANNED:
        shutil.copytree(REPO / package, root / package, ignore=not_source)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    assert sorted(violations(root)) == sorted(violations(REPO))
    return root


@pytest.fixture
def copy(pristine: Path) -> Iterator[Path]:
    """The pristine copy; whatever a test plants is taken out again afterwards."""
    before = {p: p.read_text(encoding="utf-8") for p in pristine.rglob("*.py")}
    yield pristine
    for p in pristine.rglob("*.py"):
        if p not in before:
            p.unlink()
    for p, text in before.items():
        p.write_text(text, encoding="utf-8")


def _plant(path: Path, line: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")


def _file_of(root: Path, module: str) -> Path:
    p = root / Path(*module.split("."))
    return p / "__init__.py" if (p / "__init__.py").is_file() else p.with_suffix(".py")


def _cycle_through(found: list[str], *modules: str) -> bool:
    """Whether one reported cycle passes through every one of ``modules``."""
    return any(" import cycle " in v and set(modules) <= set(v.split(" import cycle ", 1)[1].split(" -> "))
               for v in found)


@pytest.mark.parametrize("where, line, needle", [
    ("nemeses/base.py", "from harness import cli", "nemeses imports harness.cli"),
    ("workloads/history.py", "def _f():\n    import checkers.verdict", "workloads imports checkers.verdict"),
    ("checkers/lost.py", "from nemeses.base import Nemesis", "checkers imports nemeses.base"),
    ("checkers/attribution.py", "import workloads.observer", "checkers imports workloads.observer"),
    ("groundwork/config.py", "from workloads import history", "groundwork imports workloads.history"),
    ("harness/runner.py", "import kraftsim.cluster", "harness imports kraftsim.cluster"),
    ("kraftsim/config.py", "import yaml", "kraftsim imports yaml"),
    ("kraftsim/config.py", "from harness import cli", "kraftsim imports harness.cli"),
    ("lossyfs/fs.py", "import yaml", "lossyfs imports yaml"),
    ("lossyfs/daemon.py", "from nemeses import lossyfs", "lossyfs imports nemeses.lossyfs"),
    ("nemeses/lossyfs.py", "def _f():\n    import lossyfs.control", "nemeses imports lossyfs.control"),
    ("kraftsim/config.py", "import mfusepy", "kraftsim imports mfusepy"),
    ("checkers/evidence.py", "from . import verdict", "checkers: import cycle"),
    # an importlib call with a literal name is an import like any other
    ("nemeses/base.py", "def _f():\n    import importlib\n    return importlib.import_module('harness.runner')",
     "nemeses imports harness.runner"),
    ("nemeses/base.py", "def _f():\n    from importlib import import_module\n    return import_module('.runner', 'harness')",
     "nemeses imports harness.runner"),
    ("workloads/history.py", "__import__('nemeses.base')", "workloads imports nemeses.base"),
    # nothing imports a benchmark
    ("groundwork/config.py", "def _f():\n    import benchmarks.{bench}", "groundwork imports benchmarks.{bench}"),
    ("harness/runner.py", "from benchmarks import {bench}", "harness imports benchmarks.{bench}"),
])
def test_a_planted_violation_is_found(copy: Path, where: str, line: str, needle: str) -> None:
    bench = sorted(_sources(copy, BENCHMARKS))[0].stem
    _plant(copy / where, line.format(bench=bench))
    found = violations(copy)
    assert any(needle.format(bench=bench) in v for v in found), found


def test_a_benchmark_may_import_anything(copy: Path) -> None:
    before = sorted(violations(copy))
    bench = sorted(_sources(copy, BENCHMARKS))[0]
    _plant(bench, "import harness.runner, kraftsim.config, nemeses.base, checkers.job, groundwork.config")
    assert sorted(violations(copy)) == before


def test_a_cli_whose_subcommand_imports_the_app_back_is_a_cycle(copy: Path) -> None:
    """The shape of a typer app that registers a subcommand module which imports ``app`` (and
    ``err``, ``Exit``) back from it. Planted beside the console script's own module, read from
    pyproject.toml, whatever file or folder holds it."""
    scripts = tomllib.loads((copy / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    entry = scripts["faultline"].split(":")[0]
    pkg = entry.rpartition(".")[0]
    (copy / Path(*pkg.split(".")) / "planted_subcommand.py").write_text(
        f"from {entry} import app, err, Exit\n\n\n@app.command()\ndef planted() -> None:\n    raise Exit(0)\n",
        encoding="utf-8")
    _plant(_file_of(copy, entry), f"from {pkg} import planted_subcommand  # registers its command")
    assert _cycle_through(violations(copy), entry, f"{pkg}.planted_subcommand"), violations(copy)


def test_kraftsim_configs_importing_each_other_are_a_cycle(copy: Path) -> None:
    """The broker configuration and the quorum's configuration, each reaching for the other."""
    _plant(copy / "kraftsim/config.py", "def _planted():\n    import kraftsim.raft.config")
    _plant(copy / "kraftsim/raft/config.py", "def _planted():\n    from kraftsim.config import ConfigError")
    found = violations(copy)
    assert _cycle_through(found, "kraftsim.config", "kraftsim.raft.config"), found
    assert any(v.startswith("kraftsim: import cycle") for v in found), found


def test_a_schedule_loading_a_nemesis_through_importlib_that_imports_it_back_is_a_cycle(copy: Path) -> None:
    """The loader's edge is an ``importlib`` call: a nemesis module that imports the schedule
    back closes a cycle the ``import`` statements alone do not show."""
    _plant(copy / "nemeses/schedule.py",
           "def _planted():\n    import importlib\n    importlib.import_module('nemeses.alter_partition')")
    _plant(copy / "nemeses/alter_partition.py",
           "try:\n    from nemeses.schedule import Schedule\nexcept ImportError:\n    pass")
    found = violations(copy)
    assert _cycle_through(found, "nemeses.schedule", "nemeses.alter_partition"), found


def test_a_cycle_through_the_literal_importlib_edge_alone_is_found(copy: Path) -> None:
    """Without the importlib edge there would be no cycle: proof that the edge is counted."""
    _plant(copy / "nemeses/alter_partition.py", "def _planted():\n    from nemeses import schedule")
    assert not _cycle_through(violations(copy), "nemeses.schedule", "nemeses.alter_partition")
    _plant(copy / "nemeses/schedule.py", "def _planted():\n    from importlib import import_module\n"
                                         "    import_module('nemeses.alter_partition')")
    assert _cycle_through(violations(copy), "nemeses.schedule", "nemeses.alter_partition")
