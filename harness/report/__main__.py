"""``python -m harness.report RUN_DIR [...]``: report, junit and index for finished runs.

The user-facing command is ``faultline report RESULTS_DIR`` (harness CLI); this entry point
exists so the report can be re-rendered without the CLI, e.g. after a template change.
Exit 2 with one line on bad input, like the CLI.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from checkers.outcome import EXIT_CONFIG, EXIT_OK
from harness.report import ReportInputError, write_index, write_junit, write_report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.report", description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", nargs="+", type=Path, help="run directories (results/<run-id>)")
    ap.add_argument("--no-index", action="store_true", help="do not rewrite the parent's index.html")
    args = ap.parse_args(argv)
    try:
        for d in args.run_dirs:
            print(write_report(d, index=False))
            print(write_junit(d))
        if not args.no_index:
            for root in sorted({d.resolve().parent for d in args.run_dirs}):
                print(write_index(root))
    except ReportInputError as e:
        print(f"faultline report: {e}", file=sys.stderr)
        return EXIT_CONFIG
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
