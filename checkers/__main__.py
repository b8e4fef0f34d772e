"""CLI: ``python -m checkers RUN_DIR [--spark-master URL] [--expect no-loss|loss|loss-allowed]``.

Also the ``spark-submit`` entry point (``spark-submit checkers/__main__.py RUN_DIR`` with the
repo on PYTHONPATH or shipped via ``--py-files``). Exit codes: 0 as expected, 1 not as expected,
2 unreadable input (one line on stderr, never a traceback), 4 inconclusive (no acknowledged
write, or a partition with acknowledged writes never read completely: nothing to judge by).
"""
from __future__ import annotations

import argparse
import sys

from checkers.outcome import EXPECTS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m checkers", description="Check a faultline run directory.")
    ap.add_argument("run_dir")
    ap.add_argument("--spark-master", default=None, help="e.g. spark://127.0.0.1:7077 (default local[2])")
    ap.add_argument("--expect", choices=EXPECTS, default=None,
                    help="override run.json's expect")
    args = ap.parse_args(argv)
    from checkers.job import check_run
    from checkers.load import CheckerInputError
    from checkers.outcome import EXIT_CONFIG, exit_code
    try:
        v = check_run(args.run_dir, spark_master=args.spark_master, expect=args.expect)
    except CheckerInputError as exc:
        print(f"checker: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    c = v["counts"]
    print(f"outcome={v['outcome']} valid={v['valid']} expected={v['expected']} as_expected={v['as_expected']} "
          f"acked_writes={v['acked_writes']} incidents={v['incidents']} lost_write={c.get('lost_write', '-')} "
          f"unseen_at_end={c.get('unseen_at_end', '-')} invalid_because={','.join(v['invalid_because']) or '-'}"
          + (f" mechanisms={','.join(v['mechanisms'])}" if v["mechanisms"] else "")
          + (f" mode={v['mode']}" if v.get("mode") else ""))
    for s in v.get("event_stories") or []:   # only the cluster's logs (checkers/events_only.py)
        print(s["label"])
    for why in v["inconclusive_because"]:
        print(f"inconclusive: {why}")
    return exit_code(v)


if __name__ == "__main__":
    sys.exit(main())
