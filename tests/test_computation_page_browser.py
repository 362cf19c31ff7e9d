"""The computation page in Debian's Chromium, on a real recorded run whose critical path
is known by construction (test_critical_path.STAGES): the path's groups highlighted in
the graph and the table, the what-if chart's axis titles, legend and measured point
(against Dask's task stream), durations written as format.py writes them, the launching
line marked in the code, and the way there from the cluster page. Screenshots at
1440x900 and 390x844 go to test-artifacts/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from browser import needs_chromium, screenshot
from daskscope.format import duration_text
from daskscope.store import open_store
from daskscope.views.critical_path import critical_path_view
from test_critical_path import PATH, record, wall
from webutil import serving

pytestmark = needs_chromium

from daskscope.web import create_app  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('computation-page') / 'store.db'}"
    recorded = record(url, 4)
    with open_store(url) as store:
        view = critical_path_view(store, recorded["cluster_id"], recorded["computation_id"])
    app = create_app(url)
    with serving(app) as base:
        page_url = (
            f"{base}/clusters/{recorded['cluster_id']}/computations/{recorded['computation_id']}"
        )
        yield {**recorded, "base": base, "view": view, "page_url": page_url}
    app.state.store.close()


def texts(page: Any, selector: str) -> list[str]:
    return list(page.locator(selector).evaluate_all("els => els.map((e) => e.textContent)"))


def opened(page: Any, url: str) -> Any:
    page.goto(url)
    page.wait_for_function("() => document.getElementById('path-graph').dataset.ready === '1'")
    page.wait_for_function("() => document.getElementById('whatif').dataset.ready === '1'")
    return page


def test_path_is_highlighted(site: dict[str, Any], open_page: Any) -> None:
    page = opened(open_page(), site["page_url"])
    view = site["view"]
    # the graph: the path's groups in their own trace, in the path's colour, labelled
    assert page.evaluate("() => document.getElementById('path-graph').dataset.onPath") == "4"
    highlighted = page.evaluate(
        "() => { const t = document.getElementById('path-graph').data[1];"
        " return {name: t.name, colour: t.marker.color, labels: t.text}; }"
    )
    assert highlighted["name"] == "on the critical path"
    assert highlighted["colour"] == "#d84315"
    assert sorted(highlighted["labels"]) == PATH
    shown = texts(page, "#path-graph .textpoint text")
    assert set(PATH) | {"stage_e"} <= set(shown)
    # thick arrows along the path only: one between each pair of its groups
    thick = page.evaluate(
        "() => document.getElementById('path-graph').layout.annotations"
        ".filter((a) => a.arrowwidth === 3).length"
    )
    assert thick == len(PATH) - 1
    assert texts(page, "#graph-legend span") == ["on the critical path", "other task groups"]
    # the list and the table say the same path
    assert texts(page, "#path-list li") == PATH
    assert texts(page, "#path-groups tr.on-path td:first-child code") == PATH
    assert texts(page, "#path-groups tr:not(.on-path) td:first-child code") == ["stage_e"]
    # its length against the measured wall time, as format.py writes durations
    critical = page.locator("[data-stat=critical]").text_content()
    assert critical == duration_text(view.critical_path_s)
    summary = page.locator("#path-summary").text_content()
    assert duration_text(view.critical_path_s) in summary
    assert duration_text(view.measured_wall_s) in summary
    # the code: the launching line is the marked one
    marked = page.locator(".frame.innermost .hll").first.text_content()
    assert marked.strip().startswith("dask.compute(")
    link = page.locator("#timeline-link").get_attribute("href")
    assert link == f"/clusters/{site['cluster_id']}/timeline?computation={site['computation_id']}"
    assert page.locator(".advice-box").count() == 1
    # the path through the tasks: visible, the view's chain row by row, formatted
    assert page.locator("#task-path").is_visible()
    assert page.locator("#h-task-path").text_content() == "Through the tasks"
    chain = view.task_path
    assert chain, view.task_path_note
    assert texts(page, "#task-path tbody td:first-child code") == [t.key for t in chain]
    assert texts(page, "#task-path tbody td:nth-child(5)") == [
        duration_text(t.duration_s) for t in chain
    ]
    assert page.locator("[data-stat=task-path-length]").text_content() == (
        f"{len(chain)} tasks over {duration_text(view.task_path_s)}"
    )
    screenshot(page, "computation-1440")


def test_what_if_chart(site: dict[str, Any], open_page: Any) -> None:
    page = opened(open_page(), site["page_url"])
    view = site["view"]
    assert texts(page, "#whatif .xtitle") == ["worker threads (log scale)"]
    assert texts(page, "#whatif .ytitle") == ["wall time"]
    assert texts(page, "#whatif .legendtext") == [
        "estimated wall time",
        "infinite workers (critical path)",
        "measured (4 threads)",
    ]
    # the measured point: 4 threads, the task stream's first start to last stop
    point = page.evaluate(
        "() => { const t = document.getElementById('whatif').data[2];"
        " return {x: t.x[0], y: t.y[0]}; }"
    )
    assert point["x"] == 4
    assert point["y"] == pytest.approx(wall(site["stream"]), abs=1e-5)
    estimates = page.evaluate("() => document.getElementById('whatif').data[0]")
    assert estimates["x"] == [e.threads for e in view.estimates]
    assert estimates["y"] == pytest.approx([e.wall_s for e in view.estimates])
    # the y ticks in format.py's words
    ticks = page.evaluate(
        "() => { const y = document.getElementById('whatif').layout.yaxis;"
        " return {vals: y.tickvals, text: y.ticktext}; }"
    )
    assert ticks["text"] == [duration_text(v) for v in ticks["vals"]]
    shown_ticks = texts(page, "#whatif .ytick text")
    assert shown_ticks and set(shown_ticks) <= set(ticks["text"])
    # the table: one row a count, the measured one marked, then infinity
    rows = texts(page, "#whatif-table tbody tr td:first-child")
    assert rows[-1] == "∞"
    assert "4 (as measured)" in rows
    first = page.locator("#whatif-table tbody tr").first.locator("td").nth(1).text_content()
    assert first == duration_text(view.estimates[0].wall_s)


def test_from_the_cluster_page(site: dict[str, Any], open_page: Any) -> None:
    page = open_page()
    page.goto(f"{site['base']}/clusters/{site['cluster_id']}")
    page.click("#tab-computations")
    row = page.locator(f"tr.computation[data-id='{site['computation_id']}']")
    row.click()
    page.locator(
        f"tr.computation-detail[data-id='{site['computation_id']}'] a.computation-link"
    ).click()
    page.wait_for_url(f"**/computations/{site['computation_id']}")
    page.wait_for_function("() => document.getElementById('whatif').dataset.ready === '1'")
    assert page.locator("h1").text_content().startswith("Computation")


def test_phone_screenshot(site: dict[str, Any], open_page: Any) -> None:
    page = opened(open_page(390, 844), site["page_url"])
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    assert texts(page, "#whatif .xtitle") == ["worker threads (log scale)"]
    screenshot(page, "computation-390")
