"""Fixtures for the report tests: a real headless Chromium driven by Playwright for Python.

Why the system Chromium: this machine has no network, so Playwright's own browser download
cannot work; ``/usr/bin/chromium`` (Debian package) is launched with the flags that stop it
reaching for one, and a fresh user-data-dir per session so no profile state leaks in.
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic"]


@dataclass
class Loaded:
    """A page loaded from disk with everything it tried to do on the way."""
    page: Page
    url: str
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    @property
    def foreign_requests(self) -> list[str]:
        """Requests other than the page itself and inline data: URLs — any is a network fetch."""
        return [u for u in self.requests if u != self.url and not u.startswith("data:")]


@pytest.fixture(scope="session")
def browser() -> Iterator[BrowserContext]:
    profile = tempfile.mkdtemp(prefix="fl-report-chromium-")
    pw = sync_playwright().start()
    ctx = None
    try:
        ctx = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                    args=CHROMIUM_ARGS, viewport={"width": 1300, "height": 900},
                                                    timeout=120_000)
        yield ctx
    finally:
        if ctx is not None:
            ctx.close()
        pw.stop()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def open_page(browser: BrowserContext) -> Iterator:
    pages: list[Page] = []

    def _open(path: Path) -> Loaded:
        page = browser.new_page()
        page.set_default_timeout(15_000)  # the page is loaded: a missing element fails without a long wait
        page.set_default_navigation_timeout(90_000)  # but loading may be slow on a busy 2-core machine
        pages.append(page)
        loaded = Loaded(page, path.resolve().as_uri())
        page.on("console", lambda m: loaded.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: loaded.page_errors.append(str(e)))
        page.on("request", lambda r: loaded.requests.append(r.url))
        page.goto(loaded.url, wait_until="load")
        page.wait_for_load_state("networkidle")
        return loaded

    yield _open
    for p in pages:
        p.close()
