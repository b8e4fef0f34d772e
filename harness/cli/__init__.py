"""The ``faultline`` command line (typer + rich): registers the commands and runs them.

Each command lives in its own module and only imports what every command shares
(:mod:`harness.cli.common`: the app, the consoles, :class:`~harness.cli.common.Exit`, the
progress display); this module imports the commands, never the other way round.

Exit codes: 0 the verdict was the expected one, 1 it was not (e.g. loss where none was
expected), 2 usage or configuration error, or a run directory the checker cannot read (one
line on stderr, never a traceback), 3 infrastructure failure (target unreachable, cluster did
not start, checker could not run, interrupted), 4 inconclusive (``check``/``run``: no
acknowledged write, or a partition never read completely - nothing was proven either way).
``run`` prints the run directory as its last line on stdout;
progress goes to stderr so scripts can take ``| tail -1``.
"""
from __future__ import annotations

import os
import sys

try:  # typer >= 0.26 vendors its own click
    from typer._click import exceptions as cexc
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as cexc

from groundwork.config import ConfigError
from groundwork.transport.local import with_admin_dirs
from harness.cli import campaign, check, heal, info, kafka, preflight, prune, run, shrink, suite
from harness.cli.common import EXIT_CONFIG, EXIT_INFRA, EXIT_OK, Exit, app, err, one_line, out, tidy_help

for _command in (run, check, campaign, heal, info, shrink, suite, preflight, prune, kafka):
    _command.register(app)


def _mount_docker() -> None:
    """`faultline docker ...` from the remote-targets part, if it is installed and imports."""
    try:
        from harness.cli import docker
    except Exception:  # noqa: BLE001 - the rest of the CLI works without it
        return
    docker.register(app)


_mount_docker()
tidy_help(app)


def main(argv: list[str] | None = None) -> None:
    # this process and every command it starts here (iptables, tc, ip netns exec ...) find the
    # administration tools even when started by cron or `env -i` (groundwork.transport.local)
    os.environ["PATH"] = with_admin_dirs(os.environ.get("PATH"))
    try:
        app(args=argv, prog_name="faultline", standalone_mode=False)
        code = EXIT_OK
    except Exit as e:
        if e.message:
            (err if e.code else out).print(("faultline: error: " if e.code else "") + e.message, markup=False)
        code = e.code
    except ConfigError as e:
        err.print(f"faultline: error: {e}", markup=False)
        code = EXIT_CONFIG
    except getattr(cexc, "NoArgsIsHelpError", ()) as e:  # help was printed
        code = EXIT_CONFIG
    except cexc.UsageError as e:
        where = getattr(getattr(e, "ctx", None), "command_path", "") or "faultline"
        err.print(f"faultline: usage error: {one_line(e)} (see `{where} --help`)", markup=False)
        code = EXIT_CONFIG
    except cexc.ClickException as e:
        err.print(f"faultline: error: {one_line(e)}", markup=False)
        code = EXIT_CONFIG
    except (EOFError,) as e:
        err.print(f"faultline: aborted: {one_line(e)}", markup=False)
        code = EXIT_INFRA
    except KeyboardInterrupt:
        err.print("faultline: interrupted")
        code = EXIT_INFRA
    except Exception as e:  # noqa: BLE001 - never a traceback for the user; keep the detail for us
        if os.environ.get("FAULTLINE_DEBUG"):
            raise
        err.print(f"faultline: internal error: {type(e).__name__}: {one_line(e)}", markup=False)
        code = EXIT_INFRA
    sys.stdout.flush()
    sys.exit(code)
