"""The cluster page as people use it, in Debian's Chromium: tabs (click, keyboard,
Back/Forward), the view state in the URL, the task-prefix chart at 30 prefixes, the span
filter, the launching line of a computation, the profile's selector, and the live mode
of a running cluster. Screenshots of every tab at 1440x900 and 390x844 go to
$DASKSCOPE_SCREENSHOTS (default test-artifacts/screenshots/)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from browser import NO_ANIMATIONS, needs_chromium, screenshot
from browser import new_page as browser_page
from daskscope.store import open_store, write_records
from factories import make_cluster, make_computation, make_group, make_prefix, make_span
from webutil import record_cluster, serving

TABS = ["overview", "computations", "spans", "workers", "profile", "errors", "reports"]
PREFIXES = 30

pytestmark = needs_chromium
pytest.importorskip("fastapi")

from daskscope.web import create_app  # noqa: E402


def many_prefixes(now: float) -> list[Any]:
    """A stopped cluster with 30 prefixes (one group each) in two computations and two
    spans: prefixes p00-p14 ran in span "load", p15-p29 in span "fit"."""
    cluster = make_cluster("thirty prefixes", start=now - 7200, id="c0ffee00-many-prefixes")
    comps = [
        make_computation(cluster, i, started_at=cluster.started_at + 10 + i * 0.25, code=[])
        for i in range(2)
    ]
    spans = [
        make_span(cluster, f"span-{name}", name=[name], started_at=cluster.started_at + 5)
        for name in ("load", "fit")
    ]
    records: list[Any] = [cluster, *comps, *spans]
    for i in range(PREFIXES):
        name = f"p{i:02d}-with-a-longer-prefix-name"
        half = i // 15
        records.append(make_prefix(cluster, name, tasks_executed=1000 - i * 10, duration_s=i + 1.0))
        records.append(
            make_group(
                cluster,
                f"{name}-{i}",
                prefix=name,
                computation_id=comps[half].id,
                span_id=spans[half].span_id,
                tasks_total=1000 - i * 10,
                tasks_executed=1000 - i * 10,
                duration_s=i + 1.0,
                started_at=cluster.started_at + 10 + i,
            )
        )
    return records


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    path = tmp_path_factory.mktemp("cluster-page") / "daskscope.db"
    url = f"sqlite:///{path}"
    cluster_id = record_cluster(url)
    with open_store(url) as store:
        write_records(store, many_prefixes(time.time()))
    app = create_app(url)
    with serving(app) as base:
        yield {"base": base, "app": app, "url": url, "cluster_id": cluster_id}
    app.state.store.close()


def new_page(browser: Any, width: int = 1440, height: int = 900) -> tuple[Any, Any, list[str]]:
    # Live pages poll every half second here (5 s on a real page)
    return browser_page(
        browser, width, height, init_script=NO_ANIMATIONS + " window.daskscopeLiveSeconds = 0.5"
    )


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context, opened, errors = new_page(browser)
    yield opened
    context.close()
    assert not errors, errors


def shot(page: Any, name: str) -> None:
    screenshot(page, name)


def query(page: Any) -> dict[str, str]:
    from urllib.parse import parse_qsl, urlsplit

    return dict(parse_qsl(urlsplit(page.url).query))


def visible_panel(page: Any) -> str:
    panels = page.locator("[role=tabpanel]:visible")
    assert panels.count() == 1
    return str(panels.first.get_attribute("data-tab"))


def texts(locator: Any) -> list[str]:
    """What SVG text elements read (innerText is for HTML)."""
    return list(locator.evaluate_all("els => els.map((e) => e.textContent)"))


def api(page: Any, site: dict[str, Any], path: str) -> Any:
    return page.request.get(f"{site['base']}/api/v1/clusters/{site['cluster_id']}{path}").json()


def test_tabs_by_click_and_keyboard_each_a_url_with_back_and_forward(
    site: dict[str, Any], page: Any
) -> None:
    page.goto(f"{site['base']}/clusters/{site['cluster_id']}")
    assert visible_panel(page) == "overview" and "tab" not in query(page)
    page.click("#tab-computations")
    assert query(page)["tab"] == "computations" and visible_panel(page) == "computations"
    assert page.get_attribute("#tab-computations", "aria-selected") == "true"
    # Keyboard: the arrow moves along the tablist, Enter opens the tab
    page.focus("#tab-computations")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.id") == "tab-spans"
    page.keyboard.press("Enter")
    assert query(page)["tab"] == "spans" and visible_panel(page) == "spans"
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    assert query(page)["tab"] == "reports" and visible_panel(page) == "reports"
    page.go_back()
    page.wait_for_function("() => document.body.dataset.tab === 'spans'")
    assert visible_panel(page) == "spans"
    page.go_back()
    page.wait_for_function("() => document.body.dataset.tab === 'computations'")
    page.go_forward()
    page.wait_for_function("() => document.body.dataset.tab === 'spans'")
    page.reload()
    assert visible_panel(page) == "spans"
    assert page.get_attribute("#tab-spans", "tabindex") == "0"


def test_prefix_chart_fits_its_box_with_thirty_prefixes(site: dict[str, Any], page: Any) -> None:
    page.goto(f"{site['base']}/clusters/c0ffee00-many-prefixes")
    page.wait_for_selector("#prefix-chart[data-ready='1']")
    chart = page.locator("#prefix-chart")
    ticks = texts(chart.locator(".yaxislayer-above .ytick text"))
    assert "10 other prefixes" in ticks  # the top 20 drawn, the rest summed
    assert "p00-with-a-longer-prefix-name" in ticks and len(set(ticks)) == 21
    titles = texts(chart.locator(".g-xtitle, .g-x2title"))
    assert titles == ["Tasks executed", "Task time (s)"]
    # The drawing stays in its box, and its box above what follows
    svg = chart.locator("svg.main-svg").first.bounding_box()
    box = chart.bounding_box()
    below = page.locator("#task-groups").bounding_box()
    assert svg["y"] + svg["height"] <= box["y"] + box["height"] + 1
    assert box["y"] + box["height"] <= below["y"]
    # The computations below it answer a real click
    page.click("#tab-computations")
    first = page.locator("tr.computation").first
    first.click()
    cid = first.get_attribute("data-id")
    assert page.locator(f"tr.computation-detail[data-id='{cid}']").is_visible()
    assert query(page)["computation"] == cid
    assert first.locator("button.expand").get_attribute("aria-expanded") == "true"


def test_state_restored_on_reload_and_back(site: dict[str, Any], page: Any) -> None:
    detail = api(page, site, "")
    failing = next(c for c in detail["computations"] if c["tasks_erred"])
    work = next(s for s in detail["spans"] if s["name"] == ["work"])
    page.goto(f"{site['base']}/clusters/{site['cluster_id']}?tab=computations")
    page.click(f"tr.computation[data-id='{failing['id']}'] td.start")
    page.click("#tab-spans")
    page.click(f"button.span-link[data-span='{work['span_id']}']")
    page.wait_for_function(f"() => document.body.dataset.spanApplied === '{work['span_id']}'")
    page.click("#tab-profile")
    page.wait_for_selector("#flamegraph[data-ready='1']")
    frame = page.evaluate(
        """() => { const t = document.getElementById('flamegraph').data[0];
        let best = 1;
        for (let i = 2; i < t.values.length; i++) if (t.values[i] > t.values[best]) best = i;
        return {id: t.ids[best], label: t.labels[best]}; }"""
    )
    page.locator("#flamegraph g.slice", has_text=frame["label"]).first.click()
    page.wait_for_function(f"() => new URL(location).searchParams.get('flame') === '{frame['id']}'")
    state = query(page)
    assert state == {
        "tab": "profile",
        "computation": failing["id"],
        "span": work["span_id"],
        "flame": frame["id"],
    }
    shot(page, "cluster-profile-zoomed")

    page.reload()
    page.wait_for_selector("#flamegraph[data-ready='1']")
    assert visible_panel(page) == "profile"
    zoom = "() => document.getElementById('flamegraph').data[0].level"
    assert page.evaluate(zoom) == frame["id"]
    assert page.locator("#span-filter").is_visible()
    assert page.locator("#span-filter-name").inner_text() == "work"
    page.click("#tab-computations")
    assert page.locator(f"tr.computation-detail[data-id='{failing['id']}']").is_visible()

    # Back: the computations tab click, then the zoom
    page.go_back()
    page.wait_for_function("() => document.body.dataset.tab === 'profile'")
    page.go_back()
    page.wait_for_function(f"{zoom} === ''")
    assert "flame" not in query(page)
    page.go_back()  # the profile tab
    page.go_back()  # the span click
    page.wait_for_function("() => document.body.dataset.spanApplied === ''")
    assert not page.locator("#span-filter").is_visible()
    page.go_back()  # the spans tab
    page.go_back()  # the computation
    page.wait_for_function("() => document.body.dataset.tab === 'computations'")
    assert not page.locator(f"tr.computation-detail[data-id='{failing['id']}']").is_visible()


def test_span_click_filters_prefixes_and_computations(site: dict[str, Any], page: Any) -> None:
    detail = api(page, site, "")
    groups = api(page, site, "/task-groups?limit=10000")["groups"]
    load = next(s for s in detail["spans"] if s["name"] == ["data load"])
    subtree = {s["span_id"] for s in detail["spans"] if s["name"][0] == "data load"}
    prefixes = {g["prefix"] for g in groups if g["span_id"] in subtree}
    comps = {g["computation_id"] for g in groups if g["span_id"] in subtree}
    assert prefixes and 0 < len(comps) < len(detail["computations"])

    page.goto(f"{site['base']}/clusters/{site['cluster_id']}?tab=spans")
    before = page.locator("#fine-metrics").inner_text()
    page.click(f"button.span-link[data-span='{load['span_id']}']")
    page.wait_for_function(f"() => document.body.dataset.spanApplied === '{load['span_id']}'")
    assert query(page)["span"] == load["span_id"]
    assert page.locator("#span-filter-name").inner_text() == "data load"
    # The inner span is part of it: both rows marked
    assert page.locator("#spans tr.selected").count() == len(subtree)
    # The fine metrics are drawn again for the span (by cluster_metrics.js)
    page.wait_for_selector(f"#fine-metrics[data-span='{load['span_id']}'][data-ready='1']")
    metrics = page.locator("#fine-metrics").inner_text()
    assert metrics != before and "span data load and the spans below it" in metrics
    page.click("#tab-overview")
    page.wait_for_selector("#prefix-chart[data-ready='1']")
    ticks = texts(page.locator("#prefix-chart .yaxislayer-above .ytick text"))
    assert set(ticks) == prefixes
    page.click("#tab-computations")
    rows = page.locator("tr.computation:visible")
    assert {rows.nth(i).get_attribute("data-id") for i in range(rows.count())} == comps
    assert "ran tasks in span data load" in page.locator("#computations-note").inner_text()
    shot(page, "cluster-span-filtered")

    page.click("#span-filter-clear")
    page.wait_for_function("() => document.body.dataset.spanApplied === ''")
    assert "span" not in query(page)
    assert page.locator("tr.computation:visible").count() == len(detail["computations"])
    assert not page.locator("#span-filter").is_visible()
    page.click("#tab-overview")
    ticks = texts(page.locator("#prefix-chart .yaxislayer-above .ytick text"))
    assert set(ticks) == {p["name"] for p in detail["task_prefixes"]}

    # A tag picked from the selector filters the same way, and is in the URL too
    page.click("#tab-spans")
    page.select_option("#span-tag", "work")
    page.wait_for_function("() => document.body.dataset.spanApplied === 'work'")
    assert query(page)["span"] == "work"
    assert page.locator("#span-filter-name").inner_text() == "tagged “work”"
    page.wait_for_function(
        "() => document.getElementById('fine-metrics').innerText.includes('spans tagged work')"
    )


def test_launching_line_marked_innermost_frame_first(site: dict[str, Any], page: Any) -> None:
    detail = api(page, site, "")
    failing = next(c for c in detail["computations"] if c["tasks_erred"])
    page.goto(f"{site['base']}/clusters/{site['cluster_id']}?tab=computations")
    row = page.locator(f"tr.computation[data-id='{failing['id']}']")
    assert row.locator("td.code-summary code").inner_text() == "failing.compute()"
    codes = page.locator("tr.computation td.code-summary code").all_inner_texts()
    assert "(x + 1).sum().compute()" in codes  # code, not group names
    starts = page.locator("tr.computation td.start").all_inner_texts()
    assert len(set(starts)) == len(starts)  # to the millisecond: told apart
    row.locator("button.expand").focus()  # by keyboard
    page.keyboard.press("Enter")
    assert query(page)["computation"] == failing["id"]
    frames = page.locator(f"tr.computation-detail[data-id='{failing['id']}'] .frame")
    assert frames.count() >= 1
    first = frames.first
    assert "innermost" in first.locator(".frame-title").inner_text()
    assert "webutil.py" in first.locator(".frame-title").inner_text()
    marked = first.locator(".hll")
    assert marked.count() == 1 and marked.inner_text().strip() == "failing.compute()"
    colour = marked.evaluate("e => getComputedStyle(e).backgroundColor")
    assert colour not in ("rgba(0, 0, 0, 0)", "transparent")
    shot(page, "cluster-code-marked")


def test_profile_selector_tells_computations_apart(site: dict[str, Any], page: Any) -> None:
    page.goto(f"{site['base']}/clusters/{site['cluster_id']}?tab=profile")
    page.wait_for_selector("#flamegraph[data-ready='1']")
    options = page.locator("#profile-scope option").all_inner_texts()[1:]
    assert len(options) == len(api(page, site, "")["computations"]) == len(set(options))
    for text in options:
        assert re.search(r"\d{2}:\d{2}:\d{2}\.\d{3} · [\d,]+ tasks", text), text
    # Picking one is in the URL, and a reload keeps it
    value = page.locator("#profile-scope option").nth(2).get_attribute("value")
    page.select_option("#profile-scope", value)
    scoped = f"() => document.getElementById('flamegraph').dataset.scope === '{value}'"
    page.wait_for_function(scoped)
    assert query(page)["profile"] == value
    page.reload()
    page.wait_for_function(scoped)
    assert page.locator("#profile-scope").input_value() == value


def test_running_cluster_badge_and_live_updates(site: dict[str, Any], page: Any) -> None:
    now = time.time()
    cluster = make_cluster(
        "still running", start=now - 60, id="feed0000-running", stopped_at=None,
        last_seen_at=now, tasks_executed=10, tasks_erred=0,
    )  # fmt: skip
    first = make_computation(cluster, 0, code=["# job.py:2 (from line 2)\nimport x\nx.compute()"])
    with open_store(site["url"]) as store:
        write_records(store, [cluster, first, make_prefix(cluster, "inc", tasks_executed=10)])
    page.goto(f"{site['base']}/clusters/{cluster.id}?tab=computations")
    assert page.locator("#running-badge").is_visible()
    assert page.locator("tr.computation").count() == 1
    # The recorder writes more while the page is open
    later = time.time()
    grown = make_cluster(
        "still running", start=now - 60, id=cluster.id, stopped_at=None,
        last_seen_at=later, tasks_executed=12_345, tasks_erred=0,
    )  # fmt: skip
    second = make_computation(
        cluster, 1, started_at=now - 5, code=["# job.py:2 (from line 2)\ny = 1\ny.persist()"]
    )
    with open_store(site["url"]) as store:
        write_records(store, [grown, second, make_prefix(cluster, "dec", tasks_executed=5)])
    page.wait_for_function(
        "() => document.querySelector('[data-stat=tasks_executed]').textContent === '12,345'"
    )
    page.wait_for_function("() => document.querySelectorAll('tr.computation').length === 2")
    assert page.locator("tr.computation td.code-summary code").all_inner_texts() == [
        "x.compute()",
        "y.persist()",
    ]
    page.click("#tab-overview")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#prefix-chart .ytick text')]"
        ".map((t) => t.textContent).includes('dec')"
    )
    shot(page, "cluster-running")
    # It stops: the badge goes and the polling ends
    stopped = make_cluster(
        "still running", start=now - 60, id=cluster.id, stopped_at=time.time(),
        last_seen_at=time.time(), tasks_executed=12_345, tasks_erred=0,
    )  # fmt: skip
    with open_store(site["url"]) as store:
        write_records(store, [stopped])
    page.wait_for_function("() => document.body.dataset.live === 'stopped'")
    assert not page.locator("#running-badge").is_visible()


@pytest.mark.parametrize("size", [(1440, 900), (390, 844)], ids=["1440", "390"])
def test_screenshots_of_every_tab(
    site: dict[str, Any], browser: Any, size: tuple[int, int]
) -> None:
    context, page, errors = new_page(browser, *size)
    try:
        for cluster in (site["cluster_id"], "c0ffee00-many-prefixes"):
            for tab in TABS:
                page.goto(f"{site['base']}/clusters/{cluster}?tab={tab}")
                if tab == "overview":
                    page.wait_for_selector("#prefix-chart[data-ready='1']")
                    chart = page.locator("#prefix-chart").bounding_box()
                    below = page.locator("#task-groups").bounding_box()
                    assert chart["y"] + chart["height"] <= below["y"], (cluster, size)
                if tab == "profile" and page.locator("#flamegraph").count():
                    page.wait_for_selector("#flamegraph[data-ready='1']")
                if tab == "reports":
                    page.wait_for_selector("#cluster-reports .empty, #report-listing")
                page.wait_for_load_state("networkidle")
                overflow = page.evaluate(
                    "() => document.documentElement.scrollWidth - window.innerWidth"
                )
                assert overflow <= 0, (cluster, tab, overflow)
                name = "real" if cluster == site["cluster_id"] else "30-prefixes"
                shot(page, f"cluster-{name}-{tab}-{size[0]}")
    finally:
        context.close()
    assert not errors, errors


def test_reports_tab_lists_this_clusters_reports(site: dict[str, Any], page: Any) -> None:
    from daskscope.store.reports import save_report

    report = (
        b"<html><head><title>Dask Performance Report</title></head><body>"
        b'<script type="application/json">{}</script></body></html>'
    )
    store = site["app"].state.store
    mine = save_report(store, report, name="mine.html", cluster_id="c0ffee00-many-prefixes")
    save_report(store, report, name="another cluster's.html", cluster_id=site["cluster_id"])
    page.goto(f"{site['base']}/clusters/c0ffee00-many-prefixes")
    page.click("#tab-reports")
    page.wait_for_selector("#report-listing")
    assert page.locator("#report-listing tbody tr td:first-child").all_inner_texts() == [
        "mine.html"
    ]
    page.click("#report-listing a")
    page.wait_for_url(f"{site['base']}/reports/{mine['id']}")
