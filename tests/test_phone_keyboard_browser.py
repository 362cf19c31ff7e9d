"""Phone and keyboard (issue 26, point 6), in Chromium at 390x844 and 1440x900, read from
what is drawn: the timeline's legend (24 task prefixes of a real recorded cluster) sits
below the chart, covers none of it and meets neither plotly's mode bar nor the "Busy %"
panel; plotly's mode bar above the fine-metrics bars, not over the top one; the sort
headers of /runs and /runs/{id} show a focus ring when Tab reaches them (its pixels in
a screenshot). Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import dask
import pytest
from distributed import Client, LocalCluster, span
from PIL import Image

import daskscope
from browser import SCREENSHOTS, SIZES, needs_chromium, screenshot
from daskscope.store import open_store, write_records
from factories import T0, make_workflow_chunk, make_workflow_run
from webutil import serving

pytestmark = needs_chromium

from daskscope.web import create_app  # noqa: E402

PREFIXES = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
    "juliett", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
    "sierra", "tango", "uniform", "victor", "whiskey", "xray",
)  # fmt: skip
FOCUS = (47, 111, 209)  # style.css --focus, #2f6fd1


def _step(i: int) -> int:
    time.sleep(0.01)
    return i


def _record(url: str) -> str:
    """A real cluster that ran tasks of 24 prefixes (one span), two workers."""
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
        cid = daskscope.register(client, database=url, name="many prefixes")
        with dask.config.set({"optimization.fuse.active": False}), span("steps"):
            tasks = [
                dask.delayed(_step)(i, dask_key_name=f"{p}-{i}") for i, p in enumerate(PREFIXES * 2)
            ]
            dask.compute(*tasks)
        daskscope.flush(client)
    return cid


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('phone-keyboard') / 'store.db'}"
    cid = _record(url)
    run = make_workflow_run(None, name="skim", started_at=T0, stopped_at=T0 + 60)
    chunks = [
        make_workflow_chunk(run, i, started_at=T0 + i, wall_s=1.0 + i, events=1000 * (i + 1))
        for i in range(3)
    ]
    with open_store(url) as store:
        write_records(store, [run, *chunks])
    app = create_app(url)
    with serving(app) as base:
        yield {"cluster_id": cid, "run_id": run.id, "base": base}
    app.state.store.close()


@pytest.fixture(params=list(SIZES))
def page(request: pytest.FixtureRequest, open_page: Any) -> Any:
    opened = open_page(*SIZES[request.param])
    opened.size_name = request.param
    return opened


_GEOMETRY = """(sel) => {
  const gd = document.querySelector(sel);
  const box = (el) => {
    const r = el.getBoundingClientRect();
    return {l: r.left, t: r.top, r: r.right, b: r.bottom};
  };
  const chart = box(gd);
  const s = gd._fullLayout._size;
  // each subplot's area on the page, from its y axis's domain
  const axes = Object.entries(gd._fullLayout).filter(([k]) => /^yaxis\\d*$/.test(k));
  const areas = axes.map(([k, ax]) => ({
    name: k, l: chart.l + s.l, r: chart.l + s.l + s.w,
    t: chart.t + s.t + (1 - ax.domain[1]) * s.h, b: chart.t + s.t + (1 - ax.domain[0]) * s.h}));
  const modebar = gd.querySelector(".modebar");
  return {chart, areas, modebar: modebar ? box(modebar) : null};
}"""


def _meet(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["l"] < b["r"] and b["l"] < a["r"] and a["t"] < b["b"] and b["t"] < a["b"]


def test_timeline_legend_below_the_chart_covers_nothing(site: dict[str, Any], page: Any) -> None:
    page.goto(f"{site['base']}/clusters/{site['cluster_id']}/timeline")
    page.wait_for_selector("#timeline .main-svg")
    page.wait_for_function("() => document.body.dataset.window !== undefined")
    page.hover("#timeline .nsewdrag")  # plotly shows its mode bar
    geometry = page.evaluate(_GEOMETRY, "#timeline")
    lanes = next(a for a in geometry["areas"] if a["name"] == "yaxis")
    busy = next(a for a in geometry["areas"] if a["name"] == "yaxis2")
    modebar = geometry["modebar"]
    assert modebar is not None
    assert not _meet(modebar, busy) and not _meet(modebar, lanes)
    # the rows of threads keep the chart: 4 threads, each a readable row
    assert lanes["b"] - lanes["t"] >= 4 * 15
    legend = page.locator("#timeline-legend")
    box = legend.bounding_box()
    assert box["y"] >= geometry["chart"]["b"] - 1  # below the chart, not over it
    assert box["x"] + box["width"] <= SIZES[page.size_name][0]  # no wider than the page
    # one entry per thing drawn (the lanes' series on their canvas, then plotly's
    # "threads busy"), in its colour
    page.wait_for_function("() => Number(timeline.dataset.paints) > 0")
    drawn = page.evaluate(
        """() => [...timeline.dsSeries.map((s) => [s.name, s.colour]),
                  ...document.getElementById('timeline').data.filter((t) => t.name)
                    .map((t) => [t.name, t.line.color])]"""
    )
    entries = page.evaluate(
        """() => [...document.querySelectorAll('#timeline-legend .legend-item')].map((b) =>
             [b.dataset.name, getComputedStyle(b.querySelector('.swatch')).backgroundColor])"""
    )
    names = [n for n, _ in entries]
    assert set(PREFIXES) <= set(names) and "threads busy" in names
    assert names[: len(drawn)] == [n for n, _ in drawn]
    rgb = page.evaluate(
        """(cs) => cs.map((c) => {
             const e = document.createElement('i'); e.style.color = c; document.body.append(e);
             const v = getComputedStyle(e).color; e.remove(); return v; })""",
        [c for _, c in drawn],
    )
    assert [c for _, c in entries[: len(drawn)]] == rgb
    assert page.evaluate("document.documentElement.scrollWidth") <= SIZES[page.size_name][0]
    screenshot(page, f"timeline-legend-{page.size_name}")

    # an entry hides and shows what it names, by click or by keyboard
    alpha = page.locator("#timeline-legend .legend-item[data-name='alpha']")
    alpha.click()
    assert alpha.get_attribute("aria-pressed") == "false"
    visible = "() => timeline.dsSeries.find((s) => s.name === 'alpha').visible"
    assert page.evaluate(visible) is False
    alpha.focus()
    page.keyboard.press("Enter")
    assert alpha.get_attribute("aria-pressed") == "true"
    assert page.evaluate(visible) is True
    # and "threads busy", plotly's own trace
    busy = page.locator("#timeline-legend .legend-item[data-name='threads busy']")
    busy.click()
    assert (
        page.evaluate(
            "() => document.getElementById('timeline').data.find((t) => t.name === 'threads busy')"
            ".visible"
        )
        == "legendonly"
    )


def test_fine_metrics_mode_bar_above_the_bars(site: dict[str, Any], page: Any) -> None:
    page.goto(f"{site['base']}/clusters/{site['cluster_id']}?tab=spans")
    page.wait_for_selector("#fine-metrics[data-ready='1']")
    chart = "#fine-metrics [data-chart='fine-metrics']"
    page.hover(f"{chart} .nsewdrag")
    geometry = page.evaluate(_GEOMETRY, chart)
    (bars,) = geometry["areas"]
    modebar = geometry["modebar"]
    assert modebar is not None and modebar["b"] <= bars["t"] + 1
    top_bar = page.evaluate(
        """(sel) => Math.min(...[...document.querySelectorAll(sel + ' .barlayer .point path')]
             .map((p) => p.getBoundingClientRect().top))""",
        chart,
    )
    assert top_bar >= modebar["b"]
    page.locator("#fine-metrics").screenshot(
        path=str(SCREENSHOTS / f"fine-metrics-toolbar-{page.size_name}.png")
    )


def _tab_to(page: Any, selector: str) -> None:
    """Press Tab until the focus is on selector (as a keyboard user reaches it)."""
    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate("(s) => document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"Tab never reached {selector}")


def _ring_pixels(page: Any, selector: str, name: str) -> int:
    """Pixels of the focus colour around the element, in a screenshot."""
    page.locator(selector).first.scroll_into_view_if_needed()
    box = page.evaluate(
        "(s) => { const r = document.querySelector(s).getBoundingClientRect();"
        " return {x: r.left - 5, y: r.top - 5, width: r.width + 10, height: r.height + 10}; }",
        selector,
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), clip=box)
    image = Image.open(path).convert("RGB")
    pixels = [image.getpixel((x, y)) for x in range(image.width) for y in range(image.height)]
    return sum(all(abs(c - f) <= 30 for c, f in zip(p, FOCUS, strict=True)) for p in pixels)


@pytest.mark.parametrize(
    ("path", "header"),
    [("/runs", "th[data-sort] a[role=button]"), ("/runs/{run}", "th[data-key] button.sort")],
)
def test_sort_headers_show_a_focus_ring(
    site: dict[str, Any], page: Any, path: str, header: str
) -> None:
    page.goto(site["base"] + path.format(run=site["run_id"]))
    page.wait_for_selector(header)
    before = _ring_pixels(page, header, f"sort-header-unfocused-{page.size_name}")
    _tab_to(page, header)
    style = page.evaluate(
        "() => { const s = getComputedStyle(document.activeElement);"
        " return [s.outlineStyle, parseFloat(s.outlineWidth)]; }"
    )
    assert style[0] == "solid" and style[1] >= 2
    name = "runs" if path == "/runs" else "run"
    after = _ring_pixels(page, header, f"sort-header-focused-{name}-{page.size_name}")
    # the ring drawn around it: at least its perimeter's worth of focus-coloured pixels
    width, height = page.evaluate(
        "() => { const r = document.activeElement.getBoundingClientRect();"
        " return [r.width, r.height]; }"
    )
    assert after - before >= width + height, (before, after)
