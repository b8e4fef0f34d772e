"""The one error the report raises for bad input.

Why a type of its own: the CLI (``faultline report``) turns it into one line naming the
file, the field and what was wanted, exit code 2, never a traceback (shared rule: bad
input is one clear line). Anything else escaping the report is a bug in the report.
"""
from __future__ import annotations

from pathlib import Path


class ReportInputError(ValueError):
    """A run-directory file the report reads is malformed.

    ``str(err)`` is the whole user-facing message: ``<file>: <field>: <what is wanted>``.
    """

    def __init__(self, path: str | Path, field: str, wanted: str):
        self.path = Path(path)
        self.field = field
        self.wanted = wanted
        super().__init__(f"{self.path}: {field}: {wanted}")
