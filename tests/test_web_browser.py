"""The dashboard in a real browser: Playwright driving Debian's Chromium against
uvicorn on 127.0.0.1. Screenshots go to test-artifacts/."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser import needs_chromium
from daskscope.format import duration_text
from daskscope.store import list_clusters, open_store, write_records
from webutil import record_cluster, serving, synthetic_clusters

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"

pytestmark = needs_chromium
pytest.importorskip("fastapi")

from daskscope.web import create_app  # noqa: E402

# A report whose script tries to reach the dashboard and says what it managed to do.
HOSTILE_REPORT = """<!doctype html><html><head><title>Dask Performance Report</title>
<script type="application/json">{}</script></head>
<body><h1>performance report</h1><pre id="out"></pre>
<script>
const result = {};
function attempt(name, fn) {
  try { result[name] = String(fn()); } catch (e) { result[name] = "blocked: " + e.name; }
}
attempt("parentDom", () => window.parent.document.body.innerHTML.length);
attempt("parentWrite", () => {
  window.parent.document.body.dataset.pwned = "1"; return "written";
});
attempt("topWrite", () => { window.top.document.title = "pwned"; return "written"; });
attempt("cookie", () => document.cookie);
attempt("localStorage", () => window.localStorage.getItem("dashboard-secret"));
attempt("origin", () => window.origin);
document.getElementById("out").textContent = JSON.stringify(result);
document.body.dataset.done = "1";
</script></body></html>"""


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    path = tmp_path_factory.mktemp("web-browser") / "daskscope.db"
    url = f"sqlite:///{path}"
    cluster_id = record_cluster(url)
    with open_store(url) as store:
        write_records(store, synthetic_clusters(time.time()))
    app = create_app(url)
    with serving(app) as base:
        yield {"base": base, "app": app, "cluster_id": cluster_id}
    app.state.store.close()


@pytest.fixture
def page(open_page: Any) -> Any:
    return open_page(1300, 900)


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_account_statistics_and_weekly_bin_filter(filled: dict[str, Any], page: Any) -> None:
    rows = list_clusters(filled["app"].state.store, limit=None)
    page.goto(filled["base"] + "/?days=0")
    stat = lambda key: page.locator(f'[data-stat="{key}"]').inner_text()  # noqa: E731
    assert stat("clusters") == f"{len(rows):,}"
    assert stat("tasks_executed") == f"{sum(r['tasks_executed'] for r in rows):,}"
    assert stat("tasks_erred") == f"{sum(r['tasks_erred'] for r in rows):,}"
    assert stat("core_hours") == duration_text(sum(r["core_seconds"] for r in rows))
    page.wait_for_selector("#usage-chart[data-ready='1']")
    assert page.locator("#cluster-listing tbody tr").count() == len(rows)
    shot(page, "account")

    # the heat map, its selection and the URL: tests/test_account_page_browser.py


def test_listing_sorts(filled: dict[str, Any], page: Any) -> None:
    page.goto(filled["base"] + "/?days=0")
    page.click("#cluster-listing th[data-key='tasks'] button")  # descending
    page.wait_for_function("() => new URL(location).searchParams.get('sort') === 'tasks'")
    page.wait_for_selector("#cluster-listing[aria-busy='false']")
    tasks = page.locator("#cluster-listing tbody tr td:nth-child(8)").all_inner_texts()
    numbers = [int(t.replace(",", "")) for t in tasks]
    assert numbers == sorted(numbers, reverse=True)


def test_computation_code_and_graph(filled: dict[str, Any], page: Any) -> None:
    cid = filled["cluster_id"]
    detail = json.loads(page.request.get(f"{filled['base']}/api/v1/clusters/{cid}").text())
    failing = next(c for c in detail["computations"] if c["tasks_erred"])
    page.goto(f"{filled['base']}/clusters/{cid}?tab=computations")
    page.click(f"button.expand[data-id='{failing['id']}']")
    detail_row = page.locator(f"tr.computation-detail[data-id='{failing['id']}']")
    assert detail_row.locator(".code").first.is_visible()
    code = "\n".join(detail_row.locator(".code").all_inner_texts())
    assert "map_blocks(explode" in code  # the calling line, among the captured frames
    graph = page.locator(f"#graph-{failing['id']}")
    page.wait_for_selector(f"#graph-{failing['id']}[data-ready='1']")
    points = graph.locator(".scatterlayer .point")
    assert points.count() == len(failing["task_groups"])
    strokes = [points.nth(i).evaluate("p => p.style.stroke") for i in range(points.count())]
    assert strokes.count("rgb(213, 0, 0)") == 1  # the failing group's red border
    graph.scroll_into_view_if_needed()
    shot(page, "cluster")


def test_flame_graph_zooms_and_resets(filled: dict[str, Any], page: Any) -> None:
    page.goto(f"{filled['base']}/clusters/{filled['cluster_id']}?tab=profile")
    page.wait_for_selector("#flamegraph[data-ready='1']")
    flame = page.locator("#flamegraph")
    flame.scroll_into_view_if_needed()
    slices = flame.locator("g.slice")
    before = slices.count()
    assert before >= 3
    # Click the biggest frame below the root: the graph zooms into it.
    label = page.evaluate(
        """() => { const t = document.getElementById('flamegraph').data[0];
        let best = 1;
        for (let i = 2; i < t.values.length; i++) if (t.values[i] > t.values[best]) best = i;
        return t.labels[best]; }"""
    )
    target = flame.locator("g.slice", has_text=label).first
    target.click()
    page.wait_for_function("() => document.getElementById('flamegraph').dataset.zoom !== ''")
    page.wait_for_function(
        f"() => document.getElementById('flamegraph').querySelectorAll('g.slice').length < {before}"
    )
    shot(page, "flamegraph-zoomed")
    page.click("#reset-zoom")
    page.wait_for_function("() => document.getElementById('flamegraph').dataset.zoom === ''")
    page.wait_for_function(
        "() => document.getElementById('flamegraph')"
        f".querySelectorAll('g.slice').length === {before}"
    )


def test_uploaded_report_cannot_touch_the_dashboard(
    filled: dict[str, Any], page: Any, tmp_path: Path
) -> None:
    base = filled["base"]
    page.goto(base + "/reports")
    page.evaluate(
        "() => { document.cookie = 'dashboard-secret=s3cret; path=/';"
        " localStorage.setItem('dashboard-secret', 's3cret'); }"
    )
    report = tmp_path / "hostile-report.html"
    report.write_text(HOSTILE_REPORT)
    page.set_input_files("input[name=file]", str(report))
    page.click("form.upload button[type=submit]")
    page.wait_for_url(f"{base}/reports/*")
    frame = page.frame_locator("#report-frame")
    frame.locator("body[data-done='1']").wait_for()
    result = json.loads(frame.locator("#out").inner_text())
    assert result["parentDom"].startswith("blocked")
    assert result["parentWrite"].startswith("blocked")
    assert result["topWrite"].startswith("blocked")
    assert "s3cret" not in result["cookie"] and "s3cret" not in result["localStorage"]
    assert result["origin"] == "null"  # an opaque origin
    assert page.evaluate("document.body.dataset.pwned") is None
    assert page.title() != "pwned"
    shot(page, "report")
    # Opened directly as a tab, the raw URL sends the browser to the sandboxed viewer (a
    # sandboxed page at the top could still navigate its tab); it stays opaque there.
    viewer = page.url
    page.goto(viewer + "/raw")
    assert page.url == viewer
    frame = page.frame_locator("#report-frame")
    frame.locator("body[data-done='1']").wait_for()
    direct = json.loads(frame.locator("#out").inner_text())
    assert direct["origin"] == "null" and "s3cret" not in direct["cookie"]
    assert direct["localStorage"].startswith("blocked")


def test_empty_states_and_404_pages(page: Any, tmp_path: Path) -> None:
    app = create_app(f"sqlite:///{tmp_path / 'empty.db'}")
    with serving(app) as base:
        page.goto(base + "/")
        assert "No clusters recorded yet" in page.locator("#no-clusters").inner_text()
        assert page.locator('[data-stat="clusters"]').inner_text() == "0"
        shot(page, "empty-account")
        page.goto(base + "/runs")
        assert "No workflow runs recorded yet" in page.locator("#no-runs").inner_text()
        page.goto(base + "/reports")
        assert page.locator("#no-reports").is_visible()
        response = page.goto(base + "/clusters/0f0f0f0f-unknown")
        assert response.status == 404
        assert page.locator(".error-page").get_attribute("data-status") == "404"
        assert "no cluster with id" in page.locator(".error-page .message").inner_text()
        shot(page, "not-found")
    app.state.store.close()
