"""Facts with one owner, read from the source with :mod:`ast`:

* exit codes: checkers/outcome.py; any assignment of an integer literal to an ``EXIT_*`` name
  elsewhere is a second definition that can drift (there were five);
* checking a run and writing its report: harness/check.py (``check_and_report``); run, check,
  suite and shrink each had their own copy of calling the checker.
"""
from __future__ import annotations

import ast
from pathlib import Path

from checkers import outcome

REPO = Path(__file__).resolve().parents[2]
OWNER = REPO / "checkers" / "outcome.py"


def _literal_exit_bindings(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t for tgt in targets for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])]
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        for name, value in zip(names, values):
            if isinstance(name, ast.Name) and name.id.startswith("EXIT_") and isinstance(value, ast.Constant) \
                    and isinstance(value.value, int):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {name.id} = {value.value}")
    return found


def test_exit_codes_are_defined_only_in_checkers_outcome() -> None:
    sources = [p for pkg in ("groundwork", "nemeses", "workloads", "checkers", "harness")
               for p in sorted((REPO / pkg).rglob("*.py")) if p != OWNER and "__pycache__" not in p.parts]
    assert sources
    assert [b for p in sources for b in _literal_exit_bindings(p)] == []
    # the owner itself has the table of docs/architecture.md
    assert (outcome.EXIT_OK, outcome.EXIT_UNEXPECTED, outcome.EXIT_CONFIG, outcome.EXIT_INFRA,
            outcome.EXIT_INCONCLUSIVE) == (0, 1, 2, 3, 4)
    assert len(_literal_exit_bindings(OWNER)) == 5


def test_only_harness_check_calls_the_checker() -> None:
    from tests.test_import_rules import imports_of

    callers = sorted(str(p.relative_to(REPO)) for p in (REPO / "harness").rglob("*.py") if "__pycache__" not in p.parts
                     for _, name in imports_of(REPO, p) if name == "checkers.job")
    assert callers == ["harness/check.py"]
