"""Every installed nemesis module, imported so that it registers its faults.

Why a module of its own, above the nemeses and below nothing else of the package: the loader
imports each nemesis module by a computed name, and a nemesis module imports ``nemeses.base``
(the registries) but never the loader, so the registries and the loader stay on opposite sides
of every nemesis module and no import cycle runs through ``importlib``. The step language
(``nemeses.schedule``) calls it to know the fault names, `faultline heal` and
`faultline nemeses` to find every fault a ledger or the user may name.
"""
from __future__ import annotations

import importlib
import pkgutil

import nemeses

#: modules of the package that register no fault: the registries, this loader and the schedule
#: machinery built on it (importing these from here would run the loader's import back up)
NOT_NEMESES = frozenset({"base", "catalog", "schedule", "schedule_runner", "active"})


def load_nemeses() -> dict[str, str]:
    """Import every module in the nemeses package so it registers; return import failures
    (module -> one-line reason) rather than raising, so one broken module does not stop a
    campaign that does not use it."""
    failures: dict[str, str] = {}
    for m in pkgutil.iter_modules(nemeses.__path__):
        if m.name in NOT_NEMESES or m.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"nemeses.{m.name}")
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            failures[m.name] = f"{type(e).__name__}: {e}".splitlines()[0]
    return failures
