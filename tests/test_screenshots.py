"""Issue 12: every page as people see it, at 1440x900 and 390x844, on a store recorded
from a real small workload and on a seeded store of 10,000 clusters. Each screenshot is
kept in ``$DASKSCOPE_SCREENSHOTS`` (default ``test-artifacts/screenshots/``) to be looked
at; each page must not overflow sideways nor log a console error. The shared layout is
checked as read: the user's name legible on the dark header, a skip link and a focus
ring for the keyboard."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from distributed import Client, LocalCluster

from browser import SCREENSHOTS, needs_chromium, new_page
from daskscope import MetricsCollector, track_metrics, track_time
from daskscope.store import open_store, write_records
from daskscope.store.identity import add_user, create_account, create_token
from daskscope.workflow import current_chunk
from test_offline import make_cdn_report
from webutil import record_cluster, serving, synthetic_clusters

SIZES = {"1440x900": (1440, 900), "390x844": (390, 844)}
ROOT = Path(__file__).resolve().parents[1]
#: Clusters in the seeded store. Every one is listed; the detail tables (computations,
#: groups, samples, ...) are cut to their first rows, which belong to the oldest clusters,
#: to keep the seeding to seconds (bench/seed.py fills them all for the benchmark).
SEEDED_CLUSTERS = 10_000
SEEDED_DETAIL_ROWS = 2_000

pytestmark = needs_chromium
pytest.importorskip("fastapi")

from daskscope.web import create_app  # noqa: E402


@track_metrics
def analyse(start: int, stop: int) -> int:
    chunk = current_chunk()
    with track_time(None, "select"):
        total = sum(i * i for i in range(start, stop))
    if chunk is not None:
        chunk.report_events(stop - start)
    return total


def record_run(url: str) -> str:
    """A real workflow run of four chunks on a LocalCluster."""
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
        MetricsCollector(client, name="screenshot run", database=url) as collector,
    ):
        starts = [i * 20_000 for i in range(4)]
        client.gather(client.map(analyse, starts, [s + 10_000 for s in starts]))
    return collector.wait_stored()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("screens-demo")
    url = f"sqlite:///{folder / 'daskscope.db'}"
    cluster_id = record_cluster(url)
    run_id = record_run(url)
    with open_store(url) as store:
        write_records(store, synthetic_clusters(time.time()))
    report = make_cdn_report(folder / "dask-report.html")
    app = create_app(url)
    with serving(app) as base:
        sent = httpx.post(
            f"{base}/api/v1/reports",
            files={"file": ("dask-report.html", report, "text/html")},
            data={"cluster": cluster_id},
            timeout=60,
        )
        assert sent.status_code == 201, sent.text
        yield {
            "base": base,
            "cluster": cluster_id,
            "run": run_id,
            "report": sent.json()["id"],
        }
    app.state.store.close()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import seed
    finally:
        sys.path.remove(str(ROOT / "bench"))
    from daskscope.model import stable_id

    url = f"sqlite:///{tmp_path_factory.mktemp('screens-seeded') / 'daskscope.db'}"
    streams = seed.generate(SEEDED_CLUSTERS, 100, 26, 0)
    streams = {
        name: rows if name == "clusters" else itertools.islice(rows, SEEDED_DETAIL_ROWS)
        for name, rows in streams.items()
    }
    counts = seed.load(url, streams)
    assert counts["clusters"] == SEEDED_CLUSTERS
    app = create_app(url)
    with serving(app) as base:
        # the oldest cluster: its details are among the first rows of each table
        yield {"base": base, "cluster": stable_id("bench", 0), "run": None, "report": None}
    app.state.store.close()


@pytest.fixture(params=list(SIZES))
def page(request: pytest.FixtureRequest, browser: Any) -> Iterator[Any]:
    # page errors and console errors are kept per look (see look), not per test
    context, opened, _ = new_page(browser, *SIZES[request.param])
    problems: list[str] = []
    opened.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    opened.on(
        "console",
        lambda msg: problems.append(f"console: {msg.text}") if msg.type == "error" else None,
    )
    opened.size_name = request.param
    opened.problems = problems
    yield opened
    context.close()


def look(page: Any, url: str, name: str, *, status: int = 200) -> None:
    """Open ``url``, let it draw, check it, and keep its screenshot as ``name``."""
    page.problems.clear()
    response = page.goto(url)
    assert response is not None and response.status == status, url
    page.wait_for_load_state("networkidle")
    page.evaluate("document.fonts.ready")
    wide, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}-{page.size_name}.png"), full_page=True)
    assert wide <= inner, f"{url}: the page is {wide} px wide in a {inner} px window"
    # A 4xx page's own status is logged by Chromium as a failed resource: not a fault
    problems = [p for p in page.problems if not (status >= 400 and "status of" in p)]
    assert problems == [], f"{url}: {problems}"


def cluster_tabs(page: Any) -> list[str]:
    return page.eval_on_selector_all("#tabs [role=tab]", "tabs => tabs.map(t => t.dataset.tab)")


@pytest.mark.parametrize("which", ["demo", "seeded"])
def test_every_page(which: str, request: pytest.FixtureRequest, page: Any) -> None:
    store = request.getfixturevalue(which)
    base = store["base"]
    look(page, base + "/?days=0", f"{which}-account")
    cluster = f"{base}/clusters/{store['cluster']}"
    page.goto(cluster)
    tabs = cluster_tabs(page)  # each tab a URL, when the page has tabs
    if not tabs:
        look(page, cluster, f"{which}-cluster")
    for tab in tabs:
        look(page, f"{cluster}?tab={tab}", f"{which}-cluster-{tab}")
    look(page, base + "/runs", f"{which}-runs")
    if store["run"]:
        look(page, f"{base}/runs/{store['run']}", f"{which}-run")
    look(page, base + "/reports", f"{which}-reports")
    if store["report"]:
        look(page, f"{base}/reports/{store['report']}", f"{which}-report")
        frame = page.frame_locator("#report-frame")
        frame.get_by_text("Task Stream", exact=True).first.wait_for()
        page.screenshot(path=str(SCREENSHOTS / f"{which}-report-drawn-{page.size_name}.png"))
    look(page, base + "/login", f"{which}-login")
    look(page, base + "/api/docs", f"{which}-api-docs")
    assert page.locator(".opblock").count() > 10  # Swagger UI drew the operations
    look(page, base + "/clusters/0000000000", f"{which}-error", status=404)


# -- the shared layout, as read -----------------------------------------------------------


def _luminance(rgb: tuple[float, ...]) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(foreground: str, background: str) -> float:
    """WCAG contrast ratio of two computed CSS colours (``rgb(...)``)."""

    def parse(css: str) -> tuple[float, ...]:
        return tuple(float(x) for x in css[css.index("(") + 1 : -1].split(",")[:3])

    light, dark = sorted((_luminance(parse(foreground)), _luminance(parse(background))))
    return (dark + 0.05) / (light + 0.05)


@pytest.fixture(scope="module")
def members(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('screens-auth') / 'daskscope.db'}"
    with open_store(url) as store:
        create_account(store, "atlas")
        add_user(store, "ana", account="atlas")
        token = create_token(store, "ana")
        clusters = synthetic_clusters(time.time(), weeks=2)
        write_records(store, [dataclasses.replace(c, account="atlas") for c in clusters])
    app = create_app(url, auth=True)
    with serving(app) as base:
        yield {"base": base, "token": token}
    app.state.store.close()


def test_the_user_name_is_readable_on_the_dark_header(members: dict[str, Any], page: Any) -> None:
    page.goto(members["base"] + "/")
    assert page.url.startswith(members["base"] + "/login")
    page.fill("input[name=token]", members["token"])
    page.click(".login-page button[type=submit]")
    page.wait_for_url(members["base"] + "/")
    viewer = page.locator("header.top .whoami .viewer")
    assert viewer.inner_text() == "ana · atlas"
    box = viewer.bounding_box()
    assert box is not None and box["width"] > 20 and box["y"] < 200  # drawn in the header
    colour = viewer.evaluate("e => getComputedStyle(e).color")
    ground = page.locator("header.top").evaluate("e => getComputedStyle(e).backgroundColor")
    assert contrast(colour, ground) >= 7, (colour, ground)  # WCAG AAA for text
    button = page.locator("header.top .whoami button")
    colour = button.evaluate("e => getComputedStyle(e).color")
    assert contrast(colour, ground) >= 4.5, (colour, ground)
    for link in page.locator("header.top nav a").all():
        colour = link.evaluate("e => getComputedStyle(e).color")
        assert contrast(colour, ground) >= 4.5, (link.inner_text(), colour)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"logged-in-header-{page.size_name}.png"))
    wide, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert wide <= inner


def test_keyboard_skip_link_and_focus_ring(demo: dict[str, Any], page: Any) -> None:
    page.goto(demo["base"] + "/reports")
    skip = page.locator("a.skip-link")
    assert skip.inner_text() == "Skip to content"
    hidden = skip.bounding_box()
    assert hidden is not None and hidden["y"] + hidden["height"] <= 0  # out of sight at first
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    shown = skip.bounding_box()
    assert shown is not None and shown["y"] >= 0 and shown["height"] > 10  # now seen
    ring = skip.evaluate(
        "e => [getComputedStyle(e).outlineStyle, getComputedStyle(e).outlineWidth]"
    )
    assert ring[0] == "solid" and float(ring[1].removesuffix("px")) >= 2
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    # The next Tab lands inside the content, past the header's links, with a ring
    page.keyboard.press("Tab")
    focused = page.evaluate(
        """() => { const e = document.activeElement, s = getComputedStyle(e);
        return {inMain: !!e.closest('main'), style: s.outlineStyle, width: s.outlineWidth}; }"""
    )
    assert focused["inMain"] and focused["style"] == "solid", focused
    assert float(focused["width"].removesuffix("px")) >= 2
    page.screenshot(path=str(SCREENSHOTS / f"keyboard-focus-{page.size_name}.png"))


# -- private by default: nothing a page can do reaches another host ------------------


LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
#: pages the crawl opens at most: one of every kind of page is well within it
MAX_CRAWLED = 60
#: a path segment naming one record (a cluster, computation, run, report ...)
RECORD_ID = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}|[0-9a-f]{32}|[0-9]+")


def page_kind(url: str, recorded: set[str]) -> tuple[str, tuple[str, ...]]:
    """What a page shows, not which record: its route with each record's id as ``{id}``
    (``{recorded}`` for the demo's real cluster, run and report, whose pages draw charts
    the synthetic history's lack) and the names of its query parameters. Pages of one kind
    come from one template with the same controls: the crawl opens one of each."""
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(url)
    route = "/".join(
        ("{recorded}" if segment in recorded else "{id}")
        if RECORD_ID.fullmatch(segment)
        else segment
        for segment in parts.path.split("/")
    )
    return route, tuple(sorted(parse_qs(parts.query, keep_blank_values=True)))


def _local(url: str) -> bool:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.scheme in ("", "data", "blob", "about", "javascript") or (
        parts.hostname in LOCAL_HOSTS
    )


def test_no_control_on_any_page_reaches_another_host(demo: dict[str, Any], browser: Any) -> None:
    """Every kind of page reachable from the account page by its links (one page of
    each: see page_kind): every link, form, frame and resource points at this server, no
    chart offers plotly's "Share chart" (which opens plotly's cloud with the chart's
    data), and clicking every button of every chart's mode bar sends nothing and opens
    nothing elsewhere."""
    from urllib.parse import urljoin, urlsplit

    context, page, errors = new_page(browser, 1440, 900)
    away: list[str] = []

    def guard(route: Any) -> None:
        if _local(route.request.url):
            route.continue_()
        else:
            away.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    popups: list[str] = []
    context.on("page", lambda opened: popups.append(opened.url))
    base = demo["base"]
    recorded = {demo["cluster"], demo["run"], demo["report"]}
    queue, seen, charts = [base + "/?days=0"], set(), 0
    try:
        while queue and len(seen) < MAX_CRAWLED:
            url = queue.pop(0)
            key = page_kind(url, recorded)
            if key in seen:
                continue
            seen.add(key)
            response = page.goto(url)
            if response is None or response.status != 200:
                continue
            if "html" not in (response.headers.get("content-type") or ""):
                continue
            page.wait_for_load_state("networkidle")
            targets = page.eval_on_selector_all(
                "a[href], form[action], iframe[src], img[src], script[src], link[href]",
                "els => els.map(e => e.href || e.action || e.src || '')",
            )
            elsewhere = [t for t in targets if not _local(t)]
            assert elsewhere == [], f"{url} points elsewhere: {elsewhere}"
            # a link with `download` saves a file (a report file: opened offline with every
            # request refused by test_report_file_browser.py), it is no page to crawl
            pages = "a[href]:not([download])"
            for target in page.eval_on_selector_all(pages, "els => els.map(e => e.href)"):
                link = urljoin(url, target)
                path = urlsplit(link).path
                if path.startswith(("/api/", "/logout", "/assets/", "/static/")):
                    continue
                if path.endswith("/raw"):
                    continue
                queue.append(link)
            for chart in page.locator(".js-plotly-plot").all():
                charts += 1
                chart.scroll_into_view_if_needed()
                chart.hover()
                titles = chart.locator(".modebar-btn").evaluate_all(
                    "bs => bs.map(b => b.getAttribute('data-title') || '')"
                )
                assert not [t for t in titles if "share" in t.lower() or "cloud" in t.lower()], (
                    f"{url}: {titles}"
                )
                for title in titles:
                    if "download" in title.lower():
                        continue  # a file for the user, made in the page
                    # looked up again: a click may redraw the mode bar
                    button = chart.locator(f'.modebar-btn[data-title="{title}"]')
                    if button.count():
                        chart.hover()
                        button.first.click(force=True)
        assert away == [] and popups == [], (away, popups)
        assert errors == []
        assert len(seen) > 10 and charts > 5, (len(seen), charts)  # the crawl reached them
    finally:
        context.close()
