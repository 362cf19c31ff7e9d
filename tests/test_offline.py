"""Issue 12, point 9 and the assets of point 10: the dashboard works with no network.

Chromium runs with every request that is not for 127.0.0.1 aborted and recorded: the
Swagger page draws the API, a Dask performance report saved in CDN mode by a real
LocalCluster draws its Bokeh document, and nothing left the machine. A report whose
Bokeh this server cannot serve says why; a file that is not a report is refused. The
assets are sent compressed, with an ETag, and revalidate with 304."""

from __future__ import annotations

import gzip
import hashlib
import logging
import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from browser import ACTION_TIMEOUT_MS, NAVIGATION_TIMEOUT_MS, SCREENSHOTS, needs_chromium
from daskscope.store.reports import list_reports, reports_dir
from webutil import serving

pytest.importorskip("fastapi")

from daskscope.web import create_app
from daskscope.web.routes.assets import plotly_url


def make_cdn_report(path: Path) -> bytes:
    """A real performance report of a small computation, saved in Bokeh's default CDN
    mode by ``distributed.performance_report`` on a LocalCluster."""
    import dask.array as da
    from distributed import Client, LocalCluster, performance_report

    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster),
        performance_report(filename=str(path)),
    ):
        da.ones((400, 400), chunks=100).sum().compute()
    content = path.read_bytes()
    assert b'<script src="https://cdn.bokeh.org/bokeh/release/bokeh-' in content  # CDN mode
    return content


@pytest.fixture(scope="module")
def cdn_report(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return make_cdn_report(tmp_path_factory.mktemp("report") / "dask-report.html")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('offline') / 'daskscope.db'}"
    app = create_app(url)
    with serving(app) as base:
        yield {"base": base, "app": app, "store": app.state.store}
    app.state.store.close()


@pytest.fixture
def offline_page(browser: Any) -> Iterator[Any]:
    """A page whose requests off 127.0.0.1 are aborted; ``page.left`` lists them."""
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    left: list[str] = []

    def only_loopback(route: Any) -> None:
        address = urlsplit(route.request.url)
        if address.scheme in ("http", "https") and address.hostname != "127.0.0.1":
            left.append(route.request.url)
            route.abort("internetdisconnected")
        else:
            route.continue_()

    context.route("**/*", only_loopback)
    opened = context.new_page()
    opened.set_default_timeout(ACTION_TIMEOUT_MS)
    opened.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    # a request refused by a page's policy (CSP) is an error in the console
    opened.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    opened.left = left
    opened.errors = errors
    yield opened
    context.close()


def upload(base: str, name: str, content: bytes) -> httpx.Response:
    return httpx.post(
        f"{base}/api/v1/reports", files={"file": (name, content, "text/html")}, timeout=60
    )


# -- the API's documentation ------------------------------------------------------------


@needs_chromium
def test_swagger_page_draws_the_api_offline(site: dict[str, Any], offline_page: Any) -> None:
    page = offline_page
    page.goto(site["base"] + "/api/docs")
    summary = page.locator(".opblock-summary-description", has_text="Upload a Dask performance")
    summary.first.wait_for()
    assert summary.first.inner_text() == "Upload a Dask performance report"
    assert page.locator(".info .title").inner_text().startswith("daskscope")
    # Opening an operation draws its description from the OpenAPI document
    page.locator(".opblock-summary", has=summary.first).first.click()
    page.get_by_text("422 for a file that is not a Dask performance report").first.wait_for()
    assert page.left == [] and page.errors == []


def test_swagger_assets_come_from_this_server(site: dict[str, Any]) -> None:
    html = httpx.get(site["base"] + "/api/docs", timeout=60).text
    scripts = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert "/assets/swagger-ui/swagger-ui-bundle.js" in scripts
    assert all(s.startswith(("/", "data:")) for s in scripts), scripts
    js = httpx.get(site["base"] + "/assets/swagger-ui/swagger-ui-bundle.js", timeout=60)
    assert js.status_code == 200 and "SwaggerUIBundle" in js.text


# -- performance reports -----------------------------------------------------------------


@needs_chromium
def test_a_cdn_mode_report_renders_offline(
    site: dict[str, Any], offline_page: Any, cdn_report: bytes
) -> None:
    import bokeh

    base, page = site["base"], offline_page
    response = upload(base, "dask-report.html", cdn_report)
    assert response.status_code == 201, response.text
    report_id = response.json()["id"]
    # The stored file stays as uploaded; what is served loads Bokeh from this server
    stored = reports_dir(site["store"]) / f"{report_id}.html"
    assert stored.read_bytes() == cdn_report
    raw = httpx.get(f"{base}/reports/{report_id}/raw", timeout=60).text
    assert '<script src="https://cdn.bokeh.org' not in raw
    assert f'<script src="/assets/bokeh/{bokeh.__version__}/bokeh.min.js">' in raw

    page.goto(f"{base}/reports/{report_id}")
    note = page.locator("#report-offline").inner_text()
    assert "served by this dashboard" in note
    frame = page.frame_locator("#report-frame")
    # Text Bokeh draws: the report's tab titles, and the summary's figures
    frame.get_by_text("Task Stream", exact=True).first.wait_for()
    frame.get_by_text("Worker Profile (compute)", exact=True).first.wait_for()
    title = frame.get_by_text("Task Stream", exact=True).first.bounding_box()
    assert title is not None and title["width"] > 0 and title["height"] > 0
    assert page.left == [], page.left
    assert page.errors == [], page.errors


@needs_chromium
def test_a_report_for_another_bokeh_says_why_it_stays_blank(
    site: dict[str, Any], offline_page: Any, cdn_report: bytes
) -> None:
    import bokeh

    base, page = site["base"], offline_page
    other = cdn_report.replace(
        f"bokeh-{bokeh.__version__}.min.js".encode(), b"bokeh-2.4.3.min.js"
    ).replace(f"bokeh-widgets-{bokeh.__version__}.min.js".encode(), b"bokeh-widgets-2.4.3.min.js")
    response = upload(base, "old-report.html", other)
    assert response.status_code == 201
    page.goto(f"{base}/reports/{response.json()['id']}")
    notice = page.locator("#report-offline")
    assert notice.is_visible()
    text = notice.inner_text()
    assert "saved in CDN mode: it loads Bokeh 2.4.3 from cdn.bokeh.org" in text
    assert f"the installed bokeh is {bokeh.__version__}: install bokeh==2.4.3" in text
    assert "mode='inline'" in text
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "report-other-bokeh-1300x900.png"))
    raw = httpx.get(f"{base}/reports/{response.json()['id']}/raw", timeout=60).text
    assert "https://cdn.bokeh.org/bokeh/release/bokeh-2.4.3.min.js" in raw  # left as is
    assert all(urlsplit(u).hostname == "cdn.bokeh.org" for u in page.left), page.left


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("analysis.py", b"import dask\nprint('not a report')\n"),
        ("page.html", b"<!doctype html><html><head><title>Hi</title></head><body>x</body></html>"),
    ],
)
def test_a_file_that_is_not_a_report_is_refused_by_the_api(
    site: dict[str, Any], name: str, content: bytes
) -> None:
    before = sorted(p.name for p in reports_dir(site["store"]).glob("*"))
    response = upload(site["base"], name, content)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["title"] == "Not a performance report"
    assert f"'{name}' is not a Dask performance report" in error["message"]
    assert "distributed.performance_report" in error["message"]
    assert sorted(p.name for p in reports_dir(site["store"]).glob("*")) == before


@needs_chromium
def test_a_file_that_is_not_a_report_is_refused_by_the_page(
    site: dict[str, Any], offline_page: Any, tmp_path: Path
) -> None:
    base, page = site["base"], offline_page
    listed = [r["id"] for r in list_reports(site["store"])]
    script = tmp_path / "analysis.py"
    script.write_text("import dask\n")
    page.goto(base + "/reports")
    page.set_input_files("input[name=file]", str(script))
    with page.expect_response(lambda r: r.request.method == "POST") as sent:
        page.click("form.upload button[type=submit]")
    assert sent.value.status == 422
    assert page.locator("h1").inner_text() == "422 · Not a performance report"
    message = page.locator(".error-page .message").inner_text()
    assert "'analysis.py' is not a Dask performance report" in message
    assert "distributed.performance_report" in message
    assert [r["id"] for r in list_reports(site["store"])] == listed


# -- assets: compressed, cached, revalidated ----------------------------------------------


@pytest.mark.parametrize(
    "path", ["/assets/plotly.min.js", "/static/style.css", "/static/common.js"]
)
def test_assets_are_compressed_and_revalidate(site: dict[str, Any], path: str) -> None:
    url = site["base"] + path
    with httpx.Client() as client:
        plain = client.get(url, headers={"accept-encoding": "identity"})
        # httpx decodes gzip; read what travelled with the raw stream
        with client.stream("GET", url, headers={"accept-encoding": "gzip"}) as packed:
            sent = b"".join(packed.iter_raw())
            headers = packed.headers
    assert plain.status_code == 200 and "content-encoding" not in plain.headers
    assert headers["content-encoding"] == "gzip"
    assert gzip.decompress(sent) == plain.content
    assert len(sent) < 0.45 * len(plain.content), (len(sent), len(plain.content))
    assert "no-cache" in headers["cache-control"] and "public" in headers["cache-control"]
    etag = headers["etag"]
    assert etag.strip('W/"')
    again = httpx.get(url, headers={"accept-encoding": "gzip", "if-none-match": etag}, timeout=60)
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == etag
    changed = httpx.get(
        url, headers={"accept-encoding": "gzip", "if-none-match": '"old"'}, timeout=60
    )
    assert changed.status_code == 200 and changed.content == plain.content


def test_plotly_at_the_url_of_its_hash_is_immutable(site: dict[str, Any]) -> None:
    # what the pages load: plotly.js at a URL naming its hash, kept for good
    versioned = plotly_url()
    assert versioned.startswith("/assets/plotly-") and versioned.endswith(".min.js")
    with httpx.Client(base_url=site["base"]) as client:
        kept = client.get(versioned, headers={"accept-encoding": "gzip"})
        plain = client.get("/assets/plotly.min.js")
        # a page from before an upgrade names an old hash: the current file, revalidated
        old = client.get("/assets/plotly-0123456789abcdef01234567.min.js")
    assert kept.status_code == 200 and kept.headers["content-encoding"] == "gzip"
    assert kept.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert kept.content == plain.content == old.content
    assert all("no-cache" in r.headers["cache-control"] for r in (plain, old))
    # V8's compile hint first, then the packaged plotly.js itself
    packaged = (resources.files("plotly") / "package_data" / "plotly.min.js").read_bytes()
    assert kept.content == b"//# allFunctionsCalledOnLoad\n" + packaged
    # the hash is the file's: a new plotly is a new URL
    assert versioned == f"/assets/plotly-{hashlib.sha256(kept.content).hexdigest()[:24]}.min.js"


def test_plotly_is_compressed_once_not_per_request(site: dict[str, Any]) -> None:
    url = site["base"] + "/assets/plotly.min.js"
    sizes = set()
    for _ in range(3):
        with httpx.stream("GET", url, headers={"accept-encoding": "gzip"}) as response:
            sizes.add(int(response.headers["content-length"]))
    # 4.8 MB of plotly.js travels as about a third of it, the same bytes each time
    assert len(sizes) == 1 and sizes.pop() < 2_000_000


@needs_chromium
def test_the_browser_keeps_assets_and_revalidates_them(site: dict[str, Any], browser: Any) -> None:
    # A context of its own: routing requests (as offline_page does) turns the cache off
    context = browser.new_context()
    page = context.new_page()
    seen: list[tuple[str, int, str | None]] = []

    def note(response: Any) -> None:
        name = urlsplit(response.url).path
        if name in ("/static/account.js", "/static/style.css", "/static/common.js"):
            seen.append((name, response.status, response.headers.get("content-encoding")))

    page.on("response", note)
    page.goto(site["base"] + "/")
    page.wait_for_load_state("networkidle")
    first = sorted(seen)
    assert first == [
        ("/static/account.js", 200, "gzip"),
        ("/static/common.js", 200, "gzip"),
        ("/static/style.css", 200, "gzip"),
    ]
    page.goto(site["base"] + "/runs")
    page.wait_for_load_state("networkidle")
    seen.clear()
    page.goto(site["base"] + "/")  # the next visit asks whether they changed: 304
    page.wait_for_load_state("networkidle")
    assert sorted(seen) == [
        ("/static/account.js", 304, None),
        ("/static/common.js", 304, None),
        ("/static/style.css", 304, None),
    ]
    context.close()
