"""The cluster page's first chart before plotly.js has loaded, in Debian's Chromium: the
server draws the task-prefix chart into the page (web/prefix_chart.py), plotly.js is
fetched after the first frame, and plotly's interactive chart then takes the drawn one's
place with the same axis titles, labels and ticks. Here plotly.js is held back (its
request not answered) while the server's drawing is read, then let through.

Ground truth: the prefixes written to the store (30 of them: the 20 with the most tasks
drawn, the other 10 summed). Screenshots go to $DASKSCOPE_SCREENSHOTS."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from browser import SCREENSHOTS, needs_chromium
from daskscope.store import open_store, write_records
from test_cluster_page_browser import PREFIXES, many_prefixes, new_page, texts
from webutil import serving

pytestmark = needs_chromium
pytest.importorskip("fastapi")
pytest.importorskip("playwright.sync_api")

from daskscope.web import create_app  # noqa: E402

CLUSTER = "c0ffee00-many-prefixes"
PLOTLY = "**/assets/plotly-*.min.js"
# What the server's drawing says: titles, the labels of each plot, ticks, bars
READ_SERVER = """(box) => {
  const panel = (key) => {
    const p = box.querySelector(`.sb-${key}`);
    const plot = p.querySelector('.sb-plot').getBoundingClientRect();
    return {
      title: p.querySelector('.sb-title').textContent,
      labels: [...p.querySelectorAll('.sb-labels li')].map((e) => e.textContent),
      ticks: [...p.querySelectorAll('.sb-ticks span')].map((e) => e.textContent),
      tickAt: [...p.querySelectorAll('.sb-ticks span')].map((e) => {
        const r = e.getBoundingClientRect();
        return r.x + r.width / 2 - plot.x;
      }),
      widths: [...p.querySelectorAll('.sb-bar')].map((e) => e.getBoundingClientRect().width),
      plot: { x: plot.x, y: plot.y, width: plot.width, height: plot.height },
      labelsShown: getComputedStyle(p.querySelector('.sb-labels')).display !== 'none',
    };
  };
  return { tasks: panel('tasks'), time: panel('time') };
}"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('first-chart') / 'daskscope.db'}"
    records = many_prefixes(time.time())
    with open_store(url) as store:
        write_records(store, records)
    app = create_app(url)
    with serving(app) as base:
        yield {"base": base, "records": records}
    app.state.store.close()


def expected(records: list[Any]) -> dict[str, Any]:
    """The chart the prefixes written make: labels from the top, tasks and seconds."""
    prefixes = sorted(
        (r for r in records if type(r).__name__ == "TaskPrefixRecord"),
        key=lambda p: (-p.tasks_executed, -p.duration_s, p.name),
    )
    assert len(prefixes) == PREFIXES
    shown, rest = prefixes[:20], prefixes[20:]
    return {
        "labels": [p.name for p in shown] + [f"{len(rest)} other prefixes"],
        "tasks": [p.tasks_executed for p in shown] + [sum(p.tasks_executed for p in rest)],
        "seconds": [p.duration_s for p in shown] + [sum(p.duration_s for p in rest)],
    }


def plotly_held(page: Any) -> list[Any]:
    """Holds plotly.js's request unanswered; returns the held requests' routes."""
    held: list[Any] = []

    def hold(route: Any) -> None:
        held.append(route)

    page.route(PLOTLY, hold)
    return held


def release(page: Any, held: list[Any]) -> None:
    deadline = time.monotonic() + 120
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(50)  # the route's handler runs while Playwright waits
    assert len(held) == 1, "the page asked for plotly.js once"
    held[0].continue_()


def shot(locator: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    locator.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def plotly_chart(page: Any) -> dict[str, Any]:
    chart = page.locator("#prefix-chart")
    return {
        "titles": texts(chart.locator(".g-xtitle, .g-x2title")),
        "labels": texts(chart.locator(".yaxislayer-above .ytick text")),
        "labels2": texts(chart.locator(".yaxislayer-above .y2tick text")),
        "tasks ticks": texts(chart.locator(".xaxislayer-above .xtick text")),
        "time ticks": texts(chart.locator(".xaxislayer-above .x2tick text")),
    }


def test_first_chart_drawn_before_plotly_then_replaced_by_the_interactive_one(
    site: dict[str, Any], browser: Any
) -> None:
    truth = expected(site["records"])
    context, page, errors = new_page(browser)
    try:
        held = plotly_held(page)
        page.goto(f"{site['base']}/clusters/{CLUSTER}", wait_until="domcontentloaded")
        box = page.locator("#prefix-chart .sb-box")
        box.wait_for()
        # plotly.js is asked for (after the first frame) and not there yet
        page.wait_for_function("() => document.querySelector('script[src*=\"/assets/plotly-\"]')")
        assert page.evaluate("typeof window.Plotly") == "undefined"
        assert box.is_visible()
        server = box.evaluate(READ_SERVER)
        shot(page.locator("#prefix-chart"), "firstload-server-1440")
        tasks, seconds = server["tasks"], server["time"]
        assert [tasks["title"], seconds["title"]] == ["Tasks executed", "Task time (s)"]
        assert tasks["labels"] == truth["labels"] and tasks["labelsShown"]
        assert not seconds["labelsShown"]  # side by side: one column of labels
        assert tasks["plot"]["y"] == seconds["plot"]["y"]
        # Each bar's length is its value on the axis's scale: the same ratios as the data
        largest = max(truth["tasks"])
        for width, value in zip(tasks["widths"], truth["tasks"], strict=True):
            assert width / max(tasks["widths"]) == pytest.approx(value / largest, abs=0.01)
        longest = max(truth["seconds"])
        for width, value in zip(seconds["widths"], truth["seconds"], strict=True):
            assert width / max(seconds["widths"]) == pytest.approx(value / longest, abs=0.01)
        # The ticks from 0 up, placed on the bars' scale: the longest bar ends where its
        # value falls between them
        for panel, values in ((tasks, truth["tasks"]), (seconds, truth["seconds"])):
            numbers = [float(t.replace(",", "")) for t in panel["ticks"]]
            assert numbers[0] == 0 and numbers == sorted(numbers) and len(numbers) >= 3
            assert panel["tickAt"][0] == pytest.approx(0, abs=1)
            px_per_unit = panel["tickAt"][-1] / numbers[-1]
            assert max(panel["widths"]) / px_per_unit == pytest.approx(max(values), rel=0.01)
        # A bar's tooltip: its prefix and its value as format.py writes it
        other = box.locator(".sb-tasks .sb-bar").last.get_attribute("title")
        assert other == f"10 other prefixes: {truth['tasks'][-1]:,} tasks"

        release(page, held)
        page.wait_for_selector("#prefix-chart[data-ready='1']")
        assert page.locator("#prefix-chart .sb-box").count() == 0  # replaced, not doubled
        drawn = plotly_chart(page)
        shot(page.locator("#prefix-chart"), "firstload-plotly-1440")
        assert drawn["titles"] == [tasks["title"], seconds["title"]]
        # plotly lists the categories from the bottom up
        assert drawn["labels"][::-1] == tasks["labels"]
        assert drawn["tasks ticks"] == tasks["ticks"]
        assert drawn["time ticks"] == seconds["ticks"]

        # The interactive chart: hover on the longest bar (the other prefixes), mode bar
        # without plotly's cloud button
        # (plotly's first bar is the bottom one: the other prefixes)
        bar = page.locator("#prefix-chart .barlayer .trace").first.locator("path").first
        where = bar.bounding_box()
        page.mouse.move(where["x"] + where["width"] / 2, where["y"] + where["height"] / 2)
        hover = page.locator("#prefix-chart .hoverlayer .hovertext")
        hover.wait_for()
        assert texts(hover.locator("text")) == [f"10 other prefixes{truth['tasks'][-1]:,} tasks"]
        page.locator("#prefix-chart").hover()
        buttons = page.locator("#prefix-chart .modebar-btn").evaluate_all(
            "bs => bs.map((b) => b.getAttribute('data-title') || '')"
        )
        assert "Zoom" in buttons and "Download plot as a PNG" in buttons, buttons
        assert not [t for t in buttons if "cloud" in t.lower() or "share" in t.lower()], buttons
    finally:
        context.close()
    assert not errors, errors


def test_first_chart_on_a_phone_one_plot_above_the_other(
    site: dict[str, Any], browser: Any
) -> None:
    truth = expected(site["records"])
    context, page, errors = new_page(browser, 390, 844)
    try:
        held = plotly_held(page)
        page.goto(f"{site['base']}/clusters/{CLUSTER}", wait_until="domcontentloaded")
        box = page.locator("#prefix-chart .sb-box")
        box.wait_for()
        server = box.evaluate(READ_SERVER)
        shot(page.locator("#prefix-chart"), "firstload-server-390")
        tasks, seconds = server["tasks"], server["time"]
        # each plot with its labels, the time plot below the tasks plot's title
        assert tasks["labelsShown"] and seconds["labelsShown"]
        assert seconds["labels"] == truth["labels"]
        assert seconds["plot"]["y"] > tasks["plot"]["y"] + tasks["plot"]["height"]
        assert tasks["plot"]["x"] + tasks["plot"]["width"] <= 390
        height = page.locator("#prefix-chart").bounding_box()["height"]

        release(page, held)
        page.wait_for_selector("#prefix-chart[data-ready='1']")
        shot(page.locator("#prefix-chart"), "firstload-plotly-390")
        drawn = plotly_chart(page)
        assert drawn["titles"] == [tasks["title"], seconds["title"]]
        # each plot its labels, from the bottom up
        assert drawn["labels"] == drawn["labels2"] == truth["labels"][::-1]
        # plotly's chart takes the height the server's drawing took: nothing below moves
        assert page.locator("#prefix-chart").bounding_box()["height"] == pytest.approx(
            height, abs=1
        )
    finally:
        context.close()
    assert not errors, errors
