"""What every ``faultline`` command shares: the typer app, the consoles, :class:`Exit`, the
one-line error form, the run-directory argument and the live progress display.

Why a module of its own: the command modules (``harness/cli/run.py``, ``shrink.py``,
``suite.py``, ...) import these, and ``harness/cli/__init__.py`` imports the command modules
to register them. With the shared bits in the top-level module the two imported each other,
and under ``python -m`` the top-level module ran a second time as ``__main__`` with its own
:class:`Exit` class, which ``main()`` then failed to catch. Here they exist once.
"""
from __future__ import annotations

import contextlib
import inspect
import threading
from pathlib import Path
from typing import Callable, Iterator

import typer
from rich.console import Console, RenderableType
from rich.live import Live

from checkers.outcome import EXIT_CONFIG, EXIT_INFRA, EXIT_INCONCLUSIVE, EXIT_OK, EXIT_UNEXPECTED  # noqa: F401 - the one owner
from groundwork.config import ConfigError

# add_completion: `faultline --install-completion` / `--show-completion` (bash, zsh, fish, PowerShell)
app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Jepsen-style fault injection for Kafka (KRaft): was any acknowledged acks=all write lost?")


def version_text() -> str:
    """``faultline --version``: the installed distribution's version (pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return f"faultline {version('faultline')}"
    except PackageNotFoundError:   # a source tree that was never installed
        return "faultline (not installed: no version metadata)"


def _show_version(value: bool) -> None:
    if value:
        out.print(version_text(), markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _faultline(version: bool = typer.Option(False, "--version", callback=_show_version, is_eager=True,
                                            help="Print faultline's version and exit.")) -> None:
    """Jepsen-style fault injection for Kafka (KRaft): was any acknowledged acks=all write lost?"""

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


class Exit(Exception):
    """Leave the command with ``code``; ``main()`` prints ``message`` (stderr, as an error,
    when the code is not 0) and exits with the code."""

    def __init__(self, code: int, message: str = ""):
        self.code, self.message = code, message
        super().__init__(message)


def help_text(doc: str | None) -> str | None:
    """A docstring as the terminal should show it: paragraphs kept, the line breaks inside a
    paragraph dropped, ``literals`` as `literals`. Why: typer's rich markup mode keeps a
    single line break it finds in help text (in the command list, and in every paragraph but
    the first of a command's own help), so a docstring wrapped at the source's 100 columns broke
    mid-sentence in an 80-column terminal; rich wraps the joined text to the terminal instead."""
    if not doc:
        return doc
    paragraphs = [" ".join(line.strip() for line in p.splitlines()) for p in inspect.cleandoc(doc).split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p).replace("``", "`")


def tidy_help(app: typer.Typer) -> None:
    """Give every command (and sub-app) of ``app`` its :func:`help_text`."""
    app.info.help = help_text(app.info.help) if isinstance(app.info.help, str) else app.info.help
    for info in app.registered_commands:
        info.help = help_text(info.help if isinstance(info.help, str) else getattr(info.callback, "__doc__", None))
    for group in app.registered_groups:
        if isinstance(group.help, str):
            group.help = help_text(group.help)
        if group.typer_instance is not None:
            tidy_help(group.typer_instance)


def target_overrides(target: str | None) -> list[str]:
    """``--target X`` as the override it stands for (``target.embedded=X``, harness/campaign.py),
    so a run's recorded command, a suite cell and a shrink replay all carry it the same way."""
    return [f"target.embedded={target}"] if target else []


def one_line(e: BaseException) -> str:
    """An exception as the one line the user sees (never a traceback)."""
    s = str(e).strip().replace("\n", " ")
    return s or type(e).__name__


def run_dir_arg(path: Path, *, logs_only: bool = False) -> Path:
    """A RUN argument: an existing run directory (run.json or history/), else exit 2.
    ``logs_only``: a directory holding only the cluster's logs (``cluster-logs/``) is accepted
    too (``faultline check``: checkers/events_only.py)."""
    if not path.is_dir():
        raise ConfigError(path, "", "run directory not found")
    if not (path / "run.json").exists() and not (path / "history").is_dir() \
            and not (logs_only and (path / "cluster-logs").is_dir()):
        raise ConfigError(path, "", "not a run directory (no run.json or history/"
                          + (", nor cluster-logs/ with Kafka's logs" if logs_only else "") + ")")
    return path


@contextlib.contextmanager
def live_progress(render: Callable[[], RenderableType], *, console: Console = err, enabled: bool = True,
                  refresh_per_second: float = 4, tick: Callable[[], None] | None = None) -> Iterator[None]:
    """A one-line live display of ``render()`` on ``console`` while the block runs (only when
    ``enabled`` and the console is a terminal: a pipe or a log file gets the final lines the
    command prints instead). ``tick``, if given, is called twice a second in a thread of its
    own either way (the run's counters are refreshed even without a display) and once more at
    the end."""
    stop = threading.Event()
    ticker = None
    if tick is not None:
        def loop() -> None:
            while not stop.wait(0.5):
                tick()
        ticker = threading.Thread(target=loop, name="cli-progress", daemon=True)
        ticker.start()
    try:
        if enabled and console.is_terminal:
            with Live(get_renderable=render, console=console, refresh_per_second=refresh_per_second, transient=True):
                yield
        else:
            yield
    finally:
        stop.set()
        if ticker is not None:
            ticker.join(timeout=2)
            with contextlib.suppress(Exception):   # a progress figure is not worth a crash
                tick()
