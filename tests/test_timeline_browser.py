"""The task timeline page in Debian's Chromium, on a real recorded run: one row per worker
thread (the y tick labels against Dask's task stream), axis titles and legend, a zoom
that asks the server for a narrower window and draws its tasks, a hover naming the task,
the window and the selected task in the URL and Back restoring them, and the links from
the cluster page.
Screenshots at 1440x900 and 390x844 go to test-artifacts/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import pytest

from browser import needs_chromium, screenshot
from test_timeline_view import record_run
from webutil import serving

pytestmark = needs_chromium

from daskscope.web import create_app  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('timeline-page') / 'store.db'}"
    recorded = record_run(url)
    app = create_app(url)
    with serving(app) as base:
        yield {**recorded, "base": base}
    app.state.store.close()


def texts(page: Any, selector: str) -> list[str]:
    return list(page.locator(selector).evaluate_all("els => els.map((e) => e.textContent)"))


def query(page: Any) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(page.url).query))


def drawn(page: Any) -> None:
    page.wait_for_selector("#timeline .main-svg")
    page.wait_for_function(
        "() => document.body.dataset.window !== undefined && Number(timeline.dataset.paints) > 0"
    )


def lanes_of(site: dict[str, Any]) -> set[tuple[str, int]]:
    return {(t["worker"], t["thread"]) for t in site["stream"]}


def test_one_row_per_thread_with_titles_and_legend(site: dict[str, Any], open_page: Any) -> None:
    page = open_page()
    page.goto(f"{site['base']}/clusters/{site['cluster_id']}/timeline")
    drawn(page)
    labels = texts(page, "#timeline .yaxislayer-above .ytick text")
    # one row per worker thread Dask's task stream saw, labelled "host:port · n"
    truth = lanes_of(site)
    assert len(labels) == len(truth) == 4
    assert {label.split(" · ")[0] for label in labels} == {w.split("://")[1] for w, _ in truth}
    assert texts(page, "#timeline .g-xtitle text")[0].startswith("Time (s after ")
    assert "Worker thread" in texts(page, "#timeline .g-ytitle text")
    legend = texts(page, "#timeline-legend .legend-item")  # below the chart
    assert "slow" in legend and "no thread computing" in legend and "threads busy" in legend
    assert page.evaluate("document.body.dataset.mode") == "raw"
    stats = page.locator('[data-stat="tasks"]').inner_text()
    assert stats == f"{len(site['stream']):,}"
    # the slowest tasks are listed, the slowest first: the longest execution of the task
    # stream (last stop - first start; on a loaded machine an array task may outlast the
    # sleeping ones)
    first = page.locator("#slowest tbody tr").first.locator("button.key-link").inner_text()
    spans = {
        str(e["key"]): max(a["stop"] for a in e["startstops"])
        - min(a["start"] for a in e["startstops"])
        for e in site["stream"]
    }
    assert spans[first] == pytest.approx(max(spans.values()), abs=2e-6)  # µs kept
    screenshot(page, "timeline-1440")


def test_zoom_fetches_a_narrower_window_and_back_restores_it(
    site: dict[str, Any], open_page: Any
) -> None:
    page = open_page()
    # a window of more than 20 tasks comes as bins
    page.goto(f"{site['base']}/clusters/{site['cluster_id']}/timeline?max_tasks=20")
    drawn(page)
    assert page.evaluate("document.body.dataset.mode") == "binned"
    screenshot(page, "timeline-binned-1440")
    whole = page.evaluate("document.body.dataset.window")
    # the slowest of the sleeping tasks: few run beside it (an array task can be slower on
    # a loaded machine, among many others)
    slowest = page.evaluate("ds.data().slowest.find((t) => t.key.startsWith('slow-'))")
    origin = page.evaluate("ds.data().totals.first")
    a, b = slowest["start"] - origin - 0.01, slowest["stop"] - origin + 0.01
    with page.expect_response(lambda r: "/timeline?" in r.url and "/api/v1/" in r.url) as answer:
        page.evaluate(
            "([a, b]) => Plotly.relayout('timeline', {'xaxis.range[0]': a, 'xaxis.range[1]': b})",
            [a, b],
        )
    body = answer.value.json()
    assert body["raw"] is True
    assert body["start"] == pytest.approx(origin + a, abs=1e-5)
    assert body["stop"] == pytest.approx(origin + b, abs=1e-5)
    assert slowest["key"] in {t["key"] for t in body["tasks"]}
    page.wait_for_function("() => document.body.dataset.mode === 'raw'")
    # the window is in the URL
    asked = query(page)
    assert float(asked["start"]) == pytest.approx(origin + a, abs=1e-5)
    assert float(asked["stop"]) == pytest.approx(origin + b, abs=1e-5)
    # a hover over the slow task's bar (painted on the lanes' canvas) names it
    page.wait_for_function("(k) => timeline.dsLocate(k) !== null", arg=slowest["key"])
    point = page.evaluate("(k) => timeline.dsLocate(k)", slowest["key"])
    page.mouse.move(point["x"], point["y"])
    page.wait_for_selector("#timeline-tip:not([hidden])")
    hover = page.locator("#timeline-tip").inner_text()
    assert slowest["key"] in hover and "compute" in hover
    # a click shows every execution of the key, and puts it in the URL
    page.mouse.click(point["x"], point["y"])
    page.wait_for_selector("#task-executions")
    assert page.locator("#task-detail .task-key code").inner_text() == slowest["key"]
    assert query(page)["task"] == slowest["key"]
    # Back: the task unselected, then the whole run again, as bins
    page.go_back()
    page.wait_for_function("() => !document.getElementById('task-detail').dataset.key")
    page.go_back()
    page.wait_for_function("(w) => document.body.dataset.window === w", arg=whole)
    assert page.evaluate("document.body.dataset.mode") == "binned"
    assert "start" not in query(page)


def test_phone_screenshot(site: dict[str, Any], open_page: Any) -> None:
    page = open_page(390, 844)
    page.goto(f"{site['base']}/clusters/{site['cluster_id']}/timeline")
    drawn(page)
    assert len(texts(page, "#timeline .yaxislayer-above .ytick text")) == 4
    # nothing wider than the screen
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "timeline-390")


def test_a_group_link_from_the_cluster_page(site: dict[str, Any], open_page: Any) -> None:
    page = open_page()
    cluster_id = site["cluster_id"]
    page.goto(f"{site['base']}/clusters/{cluster_id}")
    link = page.locator("#top-task-groups a.timeline-link").first
    group = link.get_attribute("data-group")
    assert group
    link.click()
    page.wait_for_url(f"**/clusters/{cluster_id}/timeline?group={quote(group, safe='')}")
    drawn(page)
    assert page.locator('.filter[data-filter="group"] .filter-value').inner_text() == group
    keys = page.evaluate("ds.data().tasks.map((t) => t.group)")
    assert keys and set(keys) == {group}
    # the Timeline link of the cluster page, and the filter cleared
    page.locator(".clear-filter[data-filter='group']").click()
    page.wait_for_function("() => document.getElementById('filters').hidden")
    assert "group" not in query(page)
    assert page.evaluate("document.body.dataset.loads") == "1"
    page.goto(f"{site['base']}/clusters/{cluster_id}")
    page.locator("a#timeline-tab").click()
    page.wait_for_url(f"**/clusters/{cluster_id}/timeline")
    drawn(page)
    assert page.locator('[data-stat="tasks"]').inner_text() == f"{len(site['stream']):,}"
