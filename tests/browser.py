"""The one set-up every browser test shares: Debian's Chromium driven by Playwright.

tests/conftest.py imports the ``browser`` and ``open_page`` fixtures from here, so a test
file only asks for them; ``needs_chromium`` skips a test (or, as ``pytestmark``, a file)
where /usr/bin/chromium is absent. Playwright is imported inside the fixture so tests
that never open a page never import it."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(
    os.environ.get(
        "DASKSCOPE_SCREENSHOTS",
        Path(__file__).resolve().parents[1] / "test-artifacts" / "screenshots",
    )
)
# headless, and nothing that reaches out to the network behind the test's back
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip

#: the mark of a browser test (or, as ``pytestmark``, of a file of them): skipped where
#: Chromium or Playwright is absent, so that no test file checks for them itself
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists() or importlib.util.find_spec("playwright") is None,
    reason="Debian's chromium or Playwright is not installed (./dev test installs them)",
)

# the two widths every page is looked at: a laptop and a phone
SIZES = {"desktop": (1440, 900), "phone": (390, 844)}

# an action waits up to 30 s; a page load up to 60 s, as plotly.js is 3.5 MB and the
# machine's 2 cores may be serving several suites at once
ACTION_TIMEOUT_MS = 30_000
NAVIGATION_TIMEOUT_MS = 60_000
NO_ANIMATIONS = "window.daskscopeAnimations = false;"


def new_page(
    browser: Any,
    width: int = 1440,
    height: int = 900,
    *,
    init_script: str = NO_ANIMATIONS,
    **context_options: Any,
) -> tuple[Any, Any, list[str]]:
    """A page in a fresh context at width x height with reduced motion and no chart
    animations (context_options go to Playwright's new_context); returns (context, page,
    errors), errors filling with uncaught page errors. The caller closes the context."""
    context = browser.new_context(
        viewport={"width": width, "height": height}, reduced_motion="reduce", **context_options
    )
    context.add_init_script(init_script)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(ACTION_TIMEOUT_MS)
    page.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
    return context, page, errors


def screenshot(page: Any, name: str, *, full_page: bool = True) -> Path:
    """Saves the page as SCREENSHOTS/<name>.png to be looked at; returns the path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


@contextmanager
def launch_chromium(*extra_flags: str) -> Iterator[Any]:
    """Debian's Chromium with FLAGS and extra_flags, closed on leaving; skips the test
    where it (or Playwright) is absent."""
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (./dev test installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=[*FLAGS, *extra_flags])
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launch_chromium() as launched:
        yield launched


@pytest.fixture
def open_page(browser: Any) -> Iterator[Callable[..., Any]]:
    """Opens pages with new_page's options; at teardown closes them and fails the test if
    any page raised an uncaught error."""
    contexts: list[Any] = []
    errors_of_pages: list[list[str]] = []

    def opener(width: int = 1440, height: int = 900, **options: Any) -> Any:
        context, page, page_errors = new_page(browser, width, height, **options)
        contexts.append(context)
        errors_of_pages.append(page_errors)
        return page

    yield opener
    for context in contexts:
        context.close()
    errors = [error for page_errors in errors_of_pages for error in page_errors]
    assert not errors, errors
