"""The task timeline's lanes in Debian's Chromium (issue 26, point 7), on a real recorded
cluster whose tasks form a known chain (``chain-0`` → ``chain-1`` → ``chain-2``, each
waiting for the one before, beside independent ``side-*`` tasks): the bars are painted on a
canvas, not one SVG shape a bar, in their prefix's colour (read back from the canvas's
pixels); a hover names the task and draws the arrows of the triggers the task log
recorded, back through the chain; a clicked task goes into the URL, and a reload, a
copied link and Back keep or restore the selection. Screenshots go to
test-artifacts/screenshots/."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import dask
import pytest
from distributed import Client, LocalCluster

import daskscope
from browser import needs_chromium, screenshot
from daskscope.views.timeline import prefix_colour
from webutil import serving

pytestmark = needs_chromium

from daskscope.web import create_app  # noqa: E402

CHAIN = ["chain-0", "chain-1", "chain-2"]


def _step(*args: Any) -> int:
    time.sleep(0.15)
    return len(args)


def _record(url: str) -> str:
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cid = daskscope.register(client, database=url, name="trigger chain")
        with dask.config.set({"optimization.fuse.active": False}):
            link = dask.delayed(_step)(dask_key_name=CHAIN[0])
            for name in CHAIN[1:]:
                link = dask.delayed(_step)(link, dask_key_name=name)
            side = [dask.delayed(_step)(i, dask_key_name=f"side-{i}") for i in range(6)]
            dask.compute(link, *side)
        assert daskscope.flush(client)["write_failures"] == 0
    return cid


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('timeline-draw') / 'store.db'}"
    cluster_id = _record(url)
    app = create_app(url)
    with serving(app) as base:
        yield {
            "base": base,
            "cluster_id": cluster_id,
            "page": f"{base}/clusters/{cluster_id}/timeline",
        }
    app.state.store.close()


def drawn(page: Any) -> None:
    page.wait_for_selector("#timeline .main-svg")
    page.wait_for_function(
        "() => document.body.dataset.window !== undefined && Number(timeline.dataset.paints) > 0"
    )


def query(page: Any) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(page.url).query))


def texts(page: Any, selector: str) -> list[str]:
    return list(page.locator(selector).evaluate_all("els => els.map((e) => e.textContent)"))


def locate(page: Any, key: str) -> dict[str, float]:
    found = page.evaluate("(k) => timeline.dsLocate(k)", key)
    assert found is not None, key
    return found


# The colour of the canvas pixel at client (x, y): [r, g, b, a]
_PIXEL = """([name, x, y]) => {
  const c = document.querySelector(`#timeline canvas.timeline-${name}`);
  const box = c.getBoundingClientRect();
  const r = c.width / box.width;
  return [...c.getContext('2d').getImageData(Math.floor((x - box.left) * r),
                                             Math.floor((y - box.top) * r), 1, 1).data];
}"""


def rgb(colour: str) -> list[int]:
    return [int(colour[i : i + 2], 16) for i in (1, 3, 5)]


def test_lanes_on_a_canvas_in_prefix_colours(site: dict[str, Any], open_page: Any) -> None:
    page = open_page()
    page.goto(site["page"])
    drawn(page)
    assert page.evaluate("document.body.dataset.mode") == "raw"
    # axes and their titles are plotly's; the bars are not SVG shapes
    assert texts(page, "#timeline .g-xtitle text")[0].startswith("Time (s after ")
    assert "Worker thread" in texts(page, "#timeline .g-ytitle text")
    assert "Busy %" in texts(page, "#timeline .g-y2title text")
    labels = texts(page, "#timeline .yaxislayer-above .ytick text")
    assert len(labels) == 4 and all(" · " in label for label in labels)
    assert page.locator("#timeline .barlayer .point").count() == 0
    assert page.locator("#timeline canvas.timeline-lanes").count() == 1
    # every task drawn, each in its prefix's colour, and the legend says which
    series = {s["name"]: s for s in page.evaluate("timeline.dsSeries")}
    assert series["chain"]["bars"] == 3 and series["side"]["bars"] == 6
    legend = texts(page, "#timeline-legend .legend-item")
    assert {"chain", "side", "threads busy"} <= set(legend)
    for key in (*CHAIN, "side-0"):
        at = locate(page, key)
        pixel = page.evaluate(_PIXEL, ["lanes", at["x"], at["y"]])
        assert pixel[:3] == rgb(prefix_colour(key.split("-")[0])) and pixel[3] == 255, key
    # a legend entry hides its bars from the canvas
    at = locate(page, "chain-1")
    page.locator("#timeline-legend .legend-item[data-name='chain']").click()
    assert page.evaluate(_PIXEL, ["lanes", at["x"], at["y"]])[3] == 0
    assert not next(s for s in page.evaluate("timeline.dsSeries") if s["name"] == "chain")[
        "visible"
    ]
    page.locator("#timeline-legend .legend-item[data-name='chain']").click()
    assert page.evaluate(_PIXEL, ["lanes", at["x"], at["y"]])[3] == 255
    screenshot(page, "timeline-canvas-1440")


def test_hover_draws_the_trigger_chain(site: dict[str, Any], open_page: Any) -> None:
    page = open_page()
    page.goto(site["page"])
    drawn(page)
    # what the task log recorded: each link of the chain waited for the one before
    tasks = {t["key"]: t for t in page.evaluate("ds.data().tasks")}
    assert [tasks[k]["trigger"] for k in CHAIN] == [None, "chain-0", "chain-1"]
    at = locate(page, "chain-2")
    page.mouse.move(at["x"], at["y"])
    page.wait_for_function("() => timeline.dataset.hovered === 'chain-2'")
    tip = page.locator("#timeline-tip")
    assert tip.is_visible()
    assert "chain-2" in tip.inner_text() and "started when chain-1 ended" in tip.inner_text()
    # arrows back through the chain: chain-1 → chain-2, chain-0 → chain-1
    arrows = page.evaluate("timeline.dsArrows")
    assert [(a["from"], a["to"], a["kind"]) for a in arrows] == [
        ("chain-1", "chain-2", "trigger"),
        ("chain-0", "chain-1", "trigger"),
    ]
    box = page.evaluate(
        "() => document.querySelector('#timeline canvas.timeline-marks').getBoundingClientRect()"
    )
    row = box["height"] / 4  # 4 threads
    for a in arrows:
        # each arrow starts at its trigger's end and ends at its task's start, on their
        # rows (on one row: an arc from the top of the one to the top of the other)
        start, end = locate(page, a["from"]), locate(page, a["to"])
        assert abs(a["y0"] - (start["y"] - box["y"])) < row / 2
        assert abs(a["y1"] - (end["y"] - box["y"])) < row / 2
        # the arrowhead is painted where the arrow ends
        pixel = page.evaluate(_PIXEL, ["marks", box["x"] + a["head"][0], box["y"] + a["head"][1]])
        assert pixel[3] > 0, a
    screenshot(page, "timeline-trigger-arrows-1440", full_page=False)
    # hovering the first link: the arrow to the task it made start
    at = locate(page, "chain-0")
    page.mouse.move(at["x"], at["y"])
    page.wait_for_function("() => timeline.dataset.hovered === 'chain-0'")
    arrows = page.evaluate("timeline.dsArrows")
    assert [(a["from"], a["to"], a["kind"]) for a in arrows] == [
        ("chain-0", "chain-1", "triggered")
    ]
    # an independent task waited for nothing: no arrow
    at = locate(page, "side-3")
    page.mouse.move(at["x"], at["y"])
    page.wait_for_function("() => timeline.dataset.hovered === 'side-3'")
    assert page.evaluate("timeline.dsArrows") == []
    page.mouse.move(2, 2)
    page.wait_for_function("() => timeline.dataset.hovered === ''")
    assert not tip.is_visible()


def test_the_selected_task_is_in_the_url(
    site: dict[str, Any], open_page: Any, browser: Any
) -> None:
    page = open_page()
    page.goto(site["page"])
    drawn(page)
    at = locate(page, "chain-1")
    page.mouse.click(at["x"], at["y"])
    page.wait_for_function("() => document.getElementById('task-detail').dataset.key === 'chain-1'")
    assert query(page)["task"] == "chain-1"
    assert "chain-0" in page.locator("#task-detail .task-trigger").inner_text()
    # selected, not hovered: its outline and its trigger's arrow stay
    page.mouse.move(2, 2)
    page.wait_for_function("() => timeline.dataset.hovered === ''")
    arrows = page.evaluate("timeline.dsArrows")
    assert ("chain-0", "chain-1") in [(a["from"], a["to"]) for a in arrows]
    link = page.url

    # a reload shows the same task selected
    page.reload()
    drawn(page)
    page.wait_for_function("() => document.getElementById('task-detail').dataset.key === 'chain-1'")
    assert page.locator("#task-detail .task-key code").inner_text() == "chain-1"
    page.wait_for_function("() => Number(timeline.dataset.arrows) > 0")
    screenshot(page, "timeline-selected-1440")

    # so does the link, opened in a fresh browser context
    other = open_page(390, 844)
    other.goto(link)
    drawn(other)
    other.wait_for_function(
        "() => document.getElementById('task-detail').dataset.key === 'chain-1'"
    )
    screenshot(other, "timeline-selected-390")

    # the trigger named in the detail is one click away, and Back returns to chain-1
    page.locator("#task-detail .task-trigger button.key-link").click()
    page.wait_for_function("() => document.getElementById('task-detail').dataset.key === 'chain-0'")
    assert query(page)["task"] == "chain-0"
    page.go_back()
    page.wait_for_function("() => document.getElementById('task-detail').dataset.key === 'chain-1'")
    assert query(page)["task"] == "chain-1"


def test_binned_lanes_hover_a_bin(site: dict[str, Any], open_page: Any) -> None:
    page = open_page(390, 844)
    page.goto(f"{site['page']}?max_tasks=2")
    drawn(page)
    assert page.evaluate("document.body.dataset.mode") == "binned"
    series = page.evaluate("timeline.dsSeries")
    assert sum(s["bars"] for s in series) > 0
    assert page.locator("#timeline .barlayer .point").count() == 0
    # the bin nearest the middle of the run: hovering it says what ran there
    data = page.evaluate("ds.data()")
    centre = (data["start"] + data["stop"]) / 2
    middle, lane = min(
        ((a + b) / 2, i)
        for i, lane in enumerate(data["lanes"])
        for a, b in zip(lane["bins"]["start"], lane["bins"]["stop"], strict=True)
        if abs((a + b) / 2 - centre) < (data["stop"] - data["start"]) / 4
    )
    point = page.evaluate(
        """([lane, t]) => {
          const gd = document.getElementById('timeline');
          const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
          const origin = ds.data().totals.first;
          const box = gd.getBoundingClientRect();
          const k = xa._length / (xa.range[1] - xa.range[0]);
          const x = xa._offset + (t - origin - xa.range[0]) * k;
          const y = ya._offset + (lane + 0.5) * ya._length / ds.data().lanes.length;
          return [box.left + x, box.top + y];
        }""",
        [lane, middle],
    )
    page.mouse.move(*point)
    page.wait_for_selector("#timeline-tip:not([hidden])")
    assert "tasks" in page.locator("#timeline-tip").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "timeline-binned-390")


def test_plotly_is_kept_without_asking_again(site: dict[str, Any], open_page: Any) -> None:
    """plotly.js comes from the URL of its hash, immutable: the next page that draws a
    chart takes it from the browser's cache without a request (no 304 round trip)."""
    page = open_page()
    page.goto(site["page"])
    drawn(page)
    entry = """() => performance.getEntriesByType('resource')
        .filter((e) => e.name.includes('/assets/plotly-'))
        .map((e) => ({ name: e.name, transferSize: e.transferSize, size: e.decodedBodySize }))"""
    first = page.evaluate(entry)
    assert len(first) == 1 and first[0]["transferSize"] > 1_000_000
    page.goto(f"{site['base']}/clusters/{site['cluster_id']}")
    page.wait_for_selector("#prefix-chart .main-svg")
    again = page.evaluate(entry)
    assert [e["name"] for e in again] == [e["name"] for e in first]
    assert again[0]["transferSize"] == 0 and again[0]["size"] > 4_000_000
