"""The workflow run's pages in a real browser (Debian's Chromium through Playwright):
the listing and the run's page render its view, the chunk chart draws, and a figure that
was not measured says why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daskscope import MetricsCollector, track_metrics
from daskscope.format import MISSING
from daskscope.workflow import current_chunk
from webutil import serving

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is not installed (./dev test installs it)"
)
pytest.importorskip("fastapi")
sync_api = pytest.importorskip("playwright.sync_api")

from daskscope.web import create_app  # noqa: E402


@track_metrics
def chunk(start: int, stop: int) -> int:
    current = current_chunk()
    if current is not None:
        current.report_events(stop - start)
    return sum(range(start, stop))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('run-page') / 'store.db'}"
    with MetricsCollector(name="page <run>", database=url, worker_tracking_interval=None) as c:
        for start in (0, 10, 30, 60):
            chunk(start, start + 10 + start)
    run_id = c.wait_stored()
    app = create_app(url)
    with serving(app) as base:
        yield {"base": base, "run_id": run_id}
    app.state.store.close()


@pytest.fixture
def page() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        context = browser.new_context(reduced_motion="reduce")
        opened = context.new_page()
        errors: list[str] = []
        opened.on("pageerror", lambda exc: errors.append(str(exc)))
        opened.set_default_timeout(20_000)
        yield opened
        browser.close()
        assert not errors, errors


def test_the_run_pages_render_the_view(served: dict[str, Any], page: Any) -> None:
    page.goto(served["base"] + "/runs")
    row = page.locator("#run-listing tbody tr")
    assert row.count() == 1 and "page <run>" in row.inner_text()  # text, never markup
    row.locator("a").click()
    page.wait_for_selector("#chunk-chart[data-ready='1']")
    assert page.locator("#run-chunks tbody tr").count() == 4
    events = page.locator('.run-figures tr[data-key="total_events"] td.num').inner_text()
    assert events == "140"  # 10 + 20 + 40 + 70
    # local backend: no fine metrics, and the page says why
    cpu_share = page.locator('.run-figures tr[data-key="cpu_percent"] td.num').inner_text()
    assert cpu_share.startswith(MISSING) and "local backend has no fine metrics" in cpu_share
    assert page.locator("#run-workers tbody tr").count() == 1
