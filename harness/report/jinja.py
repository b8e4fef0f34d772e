"""The one Jinja2 environment for the report's templates (``*.j2`` beside this module).

Why beside the module and not in a ``templates/`` folder: the project's package-data rule
ships ``*.j2`` files of each package directory, so the templates travel with a normal
(non-editable) install. Autoescaping is on for every template: run ids, values and event
fields come from files and are shown as text, never as markup.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2


def _num(n: Any) -> str:
    if isinstance(n, bool):
        return str(n).lower()
    if isinstance(n, int):
        return f"{n:,}"
    return "—" if n is None else str(n)


def env() -> jinja2.Environment:
    e = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent),
                           autoescape=jinja2.select_autoescape(["j2", "html"], default=True),
                           undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    e.filters["num"] = _num
    return e
