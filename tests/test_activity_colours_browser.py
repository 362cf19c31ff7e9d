"""One colour per activity, the metric catalogue's, on every page that draws activities
(issue 26, point 4), read in Chromium from what plotly drew on a real recorded cluster:
a P2P rechunk (Dask's p2p labels, inside tasks and in the shuffle's own context), tasks
metering two labels the catalogue does not know, and a task whose input is fetched from
the other worker (a transfer). Read: the fine-metrics legend and bars in each unit and
the list of what they mean, the timeline's action bars and legend, the task-group
graph's legend and nodes. Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
import sqlalchemy as sa
from distributed import Client, LocalCluster, span
from distributed.metrics import context_meter

import daskscope
from browser import SCREENSHOTS, SIZES, needs_chromium
from daskscope.catalogue import (
    ACTIVITY_COLOURS,
    NO_ACTIVITY_COLOUR,
    RESERVE,
    TASK_ACTIONS,
    activity_colours,
)
from daskscope.store import open_store
from daskscope.store import schema as s
from webutil import serving

pytestmark = needs_chromium

from daskscope.web import create_app  # noqa: E402

CUSTOM = ("my-label", "zz-label")  # not in the catalogue: reserve colours, in this order


def _metered(i: int) -> int:
    for label in CUSTOM:
        with context_meter.meter(label):
            time.sleep(0.002)
    return i


def _record(url: str) -> str:
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cid = daskscope.register(client, database=url, name="activity colours")
        with dask.config.set({"optimization.fuse.active": False}):
            with span("shuffle"):
                x = da.random.random((400, 400), chunks=(10, 400))
                x.rechunk((400, 10), method="p2p").sum().compute()
            with span("custom"):
                dask.compute(*[dask.delayed(_metered)(i) for i in range(4)])
        first, second = sorted(client.scheduler_info()["workers"])
        made = client.submit(np.ones, 2**18, workers=[first], pure=False)
        client.submit(np.sum, made, workers=[second], pure=False).result()  # a transfer
        daskscope.flush(client)
    return cid


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('activity-colours') / 'store.db'}"
    cid = _record(url)
    app = create_app(url)
    with serving(app) as base:
        yield {"url": url, "cluster_id": cid, "base": base}
    app.state.store.close()


def _rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def _stored_activities(url: str, cluster_id: str) -> dict[str, set[str]]:
    """Per unit, the activities stored for the cluster."""
    m = s.span_metrics.c
    with open_store(url).engine.connect() as conn:
        rows = conn.execute(sa.select(m.unit, m.activity).where(m.cluster_id == cluster_id))
        out: dict[str, set[str]] = {}
        for unit, activity in rows:
            out.setdefault(unit, set()).add(activity)
    return out


_DRAWN = """(sel) => {
  const gd = document.querySelector(sel);
  const legend = [...gd.querySelectorAll(".legend .traces")].map((t) =>
    [t.querySelector(".legendtext").textContent,
     (t.querySelector(".legendpoints path") || { style: { fill: null } }).style.fill]);
  const bars = [...gd.querySelectorAll(".barlayer .trace")].map((t, i) =>
    [gd.data[i].name,
     [...new Set([...t.querySelectorAll(".point path")].map((p) => p.style.fill))]]);
  return {legend, bars};
}"""


# The colour at the middle of the longest transfer bar on the timeline's lanes canvas
# (the page's own data: the window's tasks, the axis plotly laid out)
_TRANSFER_PIXEL = """() => {
  const gd = document.getElementById('timeline');
  const data = ds.data();
  const transfers = data.tasks.flatMap((t) => t.actions.filter((a) => a.action === 'transfer')
    .map((a) => ({ lane: t.lane, start: a.start, stop: a.stop })));
  const a = transfers.reduce((m, x) => (x.stop - x.start > m.stop - m.start ? x : m));
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  const origin = data.totals.first;
  const middle = (a.start + a.stop) / 2 - origin;
  const x = (middle - xa.range[0]) / (xa.range[1] - xa.range[0]) * xa._length;
  const y = (a.lane + 0.5) * ya._length / data.lanes.length;
  const c = gd.querySelector('canvas.timeline-lanes');
  const r = c.width / c.getBoundingClientRect().width;
  const at = c.getContext('2d').getImageData(Math.floor(x * r), Math.floor(y * r), 1, 1);
  return [...at.data].slice(0, 3);
}"""


@pytest.mark.parametrize("size", list(SIZES))
def test_fine_metrics_one_colour_per_activity_in_every_unit(
    site: dict[str, Any], open_page: Any, size: str
) -> None:
    stored = _stored_activities(site["url"], site["cluster_id"])
    every = set().union(*stored.values())
    # Dask's own labels are all catalogued; the two custom ones are not
    assert every - set(ACTIVITY_COLOURS) == set(CUSTOM)
    assert {"p2p-get-output-cpu", "get-output-noncpu", "send", "idle", "shards"} <= every
    expected = activity_colours(every)
    assert [expected[n] for n in CUSTOM] == list(RESERVE[:2])

    page = open_page(*SIZES[size])
    page.goto(f"{site['base']}/clusters/{site['cluster_id']}?tab=spans")
    page.wait_for_selector("#fine-metrics[data-ready='1']")
    chart = "#fine-metrics [data-chart='fine-metrics']"
    seen: dict[str, str] = {}
    for unit in ("seconds", "bytes", "count"):
        page.locator(f"#fine-metrics button[data-unit='{unit}']").click()
        page.wait_for_selector(f"#fine-metrics[data-unit='{unit}'][data-ready='1']")
        drawn = page.evaluate(_DRAWN, chart)
        legend = dict(drawn["legend"])
        assert set(legend) == stored[unit]  # every activity of the unit, once
        # one colour each, none shared, the catalogue's (a custom one: the reserve's)
        assert len(set(legend.values())) == len(legend)
        assert legend == {n: _rgb(expected[n]) for n in legend}
        for name, fills in drawn["bars"]:  # each bar segment in its legend colour
            assert fills == [legend[name]], name
        for name, colour in legend.items():  # the same colour in every unit
            assert seen.setdefault(name, colour) == colour
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("#fine-metrics").screenshot(
            path=str(SCREENSHOTS / f"activity-colours-{unit}-{size}.png")
        )
    assert {"send", "idle", "get-output-noncpu", "p2p-get-output-cpu", "shards"} <= set(seen)

    # the list of what they mean: the same swatches
    page.locator("#fine-metrics .dsm-activities summary").click()
    swatches = page.evaluate(
        """() => [...document.querySelectorAll('#fine-metrics .dsm-activities li')].map((li) =>
            [li.querySelector('b').textContent,
             getComputedStyle(li.querySelector('i')).backgroundColor])"""
    )
    assert dict(swatches) == {n: _rgb(expected[n]) for n in every}


def test_timeline_and_graph_draw_actions_in_the_catalogue_colours(
    site: dict[str, Any], open_page: Any
) -> None:
    actions = {a.name: a.colour for a in TASK_ACTIONS}
    page = open_page()
    page.goto(f"{site['base']}/clusters/{site['cluster_id']}/timeline")
    page.wait_for_selector("#timeline .main-svg")
    page.wait_for_function("() => document.body.dataset.window !== undefined")
    assert page.evaluate("ds.data().raw") is True  # every task: actions as bars
    page.wait_for_function("() => Number(timeline.dataset.paints) > 0")
    # the lanes are painted on a canvas: what it draws for each legend entry, and the
    # pixels of a transfer's bar
    series = {s["name"]: s for s in page.evaluate("timeline.dsSeries")}
    assert series["transfer"]["colour"] == actions["transfer"] and series["transfer"]["bars"]
    pixel = page.evaluate(_TRANSFER_PIXEL)
    assert pixel == [int(actions["transfer"][i : i + 2], 16) for i in (1, 3, 5)]
    swatch = page.evaluate(
        """() => getComputedStyle(document.querySelector(
             "#timeline-legend .legend-item[data-name='transfer'] .swatch")).backgroundColor"""
    )
    assert swatch == _rgb(actions["transfer"])  # its legend entry, below the chart
    # compute is drawn by prefix: never in an action's or activity's colour
    prefixes = {p["colour"] for p in page.evaluate("ds.data().prefixes")}
    assert not prefixes & {*ACTIVITY_COLOURS.values(), *RESERVE}

    page.goto(f"{site['base']}/clusters/{site['cluster_id']}?tab=computations")
    row = page.locator("tr.computation").first
    row.click()
    cid = row.get_attribute("data-id")
    detail = page.locator(f"tr.computation-detail[data-id='{cid}']")
    page.wait_for_selector(f"#graph-{cid}[data-ready='1']")
    legend = detail.locator(".legend span").evaluate_all(
        "els => els.filter((e) => !e.querySelector('i.failed')).map((e) =>"
        " [e.textContent, getComputedStyle(e.querySelector('i')).backgroundColor])"
    )
    assert dict(legend) == {n: _rgb(c) for n, c in actions.items()}
    nodes = page.evaluate(
        f"""() => document.getElementById('graph-{cid}').data
            .flatMap((t) => (t.mode || '').includes('markers') ? [].concat(t.marker.color) : [])"""
    )
    assert nodes and set(nodes) <= {*actions.values(), NO_ACTIVITY_COLOUR}
