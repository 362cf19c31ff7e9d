"""Fine metrics as time series (issue 30, point 2): what the spans' fine metrics gained
flush by flush, recorded from a real cluster and checked against Dask's own totals."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import defaultdict
from collections.abc import Hashable, Iterator
from typing import Any

import dask
import dask.array as da
import httpx
import pytest
import sqlalchemy as sa
from distributed import Client, LocalCluster, span

import daskscope
from browser import needs_chromium
from daskscope.catalogue import activity_colours
from daskscope.collector.snapshot import metric_parts
from daskscope.store import open_store
from daskscope.store import schema as store_schema
from daskscope.store.engine import as_engine
from webutil import call, serving

#: Dask's idle time of a span's threads: computed by Dask when asked, never a heartbeat's
IDLE = ("execute", "N/A", "idle or other spans", "seconds")
ROUNDS = 4
DEADLINE = 120.0


def by_activity(metrics: dict[tuple[Hashable, ...], float]) -> dict[tuple[str, str, str], float]:
    """Dask's per-key metrics summed over task prefixes, as the interval rows keep them."""
    out: dict[tuple[str, str, str], float] = defaultdict(float)
    for key, value in metrics.items():
        context, _prefix, activity, unit = metric_parts(key)
        out[(context, activity, unit)] += value
    return dict(out)


async def flushes_after(plugin: Any, count: int) -> None:
    """Wait (on the condition, with a generous deadline) for ``count`` more flushes."""
    target = plugin.flusher.stats.flushes + count
    deadline = time.monotonic() + DEADLINE
    while plugin.flusher.stats.flushes < target:
        assert time.monotonic() < deadline, "the recorder's periodic flushes stopped"
        await asyncio.sleep(0.05)


def rows_of(url: str, table: sa.Table, cluster_id: str) -> list[dict[str, Any]]:
    store = open_store(url)
    with as_engine(store).connect() as conn:
        rows = conn.execute(sa.select(table).where(table.c.cluster_id == cluster_id))
        return [dict(row._mapping) for row in rows]


def test_intervals_add_up_to_dasks_totals(database_url: str) -> None:
    """On SQLite and PostgreSQL (``database_url`` is parametrized in conftest)."""

    async def body() -> tuple[str, dict[tuple[str, str, str], float]]:
        cluster = await LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=False,
            asynchronous=True,
            dashboard_address=":0",
        )
        client = await Client(cluster, asynchronous=True)
        cluster_id = await daskscope.register(client, database=database_url)
        scheduler = cluster.scheduler
        plugin = scheduler.plugins["daskscope"]
        async with cluster, client:
            with dask.config.set({"optimization.fuse.active": False}):
                for i in range(ROUNDS):
                    # each round's work lands in its own flush intervals
                    with span(f"round-{i}"):
                        x = da.random.random((300, 300), chunks=75)
                        assert await client.compute((x @ x.T).sum()) > 0
                    await flushes_after(plugin, 2)
            await daskscope.flush(client)
        # the cluster is closed: its spans hold every metric the workers ever sent
        extension = scheduler.extensions["spans"]
        truth: dict[tuple[str, str, str], float] = defaultdict(float)
        for root in extension.root_spans:
            metrics = dict(root.cumulative_worker_metrics)
            metrics.pop(IDLE, None)
            for name, value in by_activity(metrics).items():
                truth[name] += value
        return cluster_id, dict(truth)

    with dask.config.set({"daskscope.flush-interval": "300ms"}):
        cluster_id, truth = asyncio.run(body())

    rows = rows_of(database_url, store_schema.fine_metric_intervals, cluster_id)
    assert rows, "no fine-metric interval was recorded"
    assert truth, "Dask recorded no fine metrics"

    # every interval's value is a gain, never a drop
    assert all(row["value"] >= 0.0 for row in rows)

    # the intervals follow one another: each starts where the previous one stopped
    intervals = sorted({(row["started_at"], row["stopped_at"]) for row in rows})
    assert len(intervals) >= 3, intervals  # the rounds spread over several flushes
    for (start, stop), (next_start, _) in itertools.pairwise(intervals):
        assert start <= stop
        assert next_start == stop
    # one row per metric and interval
    assert len({(r["started_at"], r["context"], r["activity"], r["unit"]) for r in rows}) == len(
        rows
    )

    # summed over the intervals: Dask's totals, per (context, activity, unit). Each
    # interval value is a difference of two of Dask's running sums, so the sum over the
    # intervals telescopes back to the last one, up to a few rounding steps of the
    # largest value (a relative 1e-9 is 10⁷ times double precision)
    summed: dict[tuple[str, str, str], float] = defaultdict(float)
    for row in rows:
        summed[(row["context"], row["activity"], row["unit"])] += row["value"]
    assert set(summed) == {name for name, value in truth.items() if value}
    for name, value in truth.items():
        assert summed.get(name, 0.0) == pytest.approx(value, rel=1e-9, abs=1e-12), name

    # and the span totals already stored say the same
    totals: dict[tuple[str, str, str], float] = defaultdict(float)
    for row in rows_of(database_url, store_schema.span_metrics, cluster_id):
        totals[(row["context"], row["activity"], row["unit"])] += row["value"]
    for name, value in summed.items():
        assert totals[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name


# -- the read, the route and the chart, on one recorded cluster


def _record_rounds(url: str) -> str:
    """A threaded in-process cluster, flushing every 300 ms, working in three rounds
    that each span a few flushes."""
    with (
        dask.config.set({"daskscope.flush-interval": "300ms", "optimization.fuse.active": False}),
        LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cid = daskscope.register(client, database=url, name="intervals cluster")
        plugin = cluster.scheduler.plugins["daskscope"]
        for i in range(3):
            with span(f"round-{i}"):
                x = da.random.random((300, 300), chunks=75)
                (x @ x.T).sum().compute()
            target = plugin.flusher.stats.flushes + 2
            deadline = time.monotonic() + DEADLINE
            while plugin.flusher.stats.flushes < target:
                assert time.monotonic() < deadline, "the recorder's periodic flushes stopped"
                time.sleep(0.05)
        daskscope.flush(client)
    return cid


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    pytest.importorskip("fastapi")
    from daskscope.web import create_app

    url = f"sqlite:///{tmp_path_factory.mktemp('fine-intervals') / 'daskscope.db'}"
    cid = _record_rounds(url)
    app = create_app(url)
    try:
        yield {"url": url, "app": app, "cid": cid}
    finally:
        app.state.store.close()


def _seconds_by_interval(url: str, cid: str) -> dict[str, dict[tuple[float, float], float]]:
    """Per activity, the stored seconds of each interval, summed over contexts by hand."""
    out: dict[str, dict[tuple[float, float], float]] = defaultdict(lambda: defaultdict(float))
    for row in rows_of(url, store_schema.fine_metric_intervals, cid):
        if row["unit"] == "seconds":
            out[row["activity"]][(row["started_at"], row["stopped_at"])] += row["value"]
    return out


def test_the_route_gives_each_activity_its_seconds_per_interval(recorded: dict[str, Any]) -> None:
    cid, url = recorded["cid"], recorded["url"]
    body = call(recorded["app"], "GET", f"/api/v1/clusters/{cid}/metrics/intervals").json()
    expected = _seconds_by_interval(url, cid)
    assert expected and body["unit"] == "seconds"
    bounds = list(zip(body["starts"], body["stops"], strict=True))
    assert bounds == sorted({b for per in expected.values() for b in per})
    names = [a["name"] for a in body["activities"]]
    assert set(names) == set(expected)
    for a in body["activities"]:
        assert a["colour"] == activity_colours(names)[a["name"]]
        got = dict(zip(bounds, body["values"][a["name"]], strict=True))
        want = {b: expected[a["name"]].get(b, 0.0) for b in bounds}
        assert got == pytest.approx(want)
    wrong = call(recorded["app"], "GET", f"/api/v1/clusters/{cid}/metrics/intervals?unit=hours")
    assert wrong.status_code == 400 and "seconds" in wrong.text


@needs_chromium
def test_the_chart_says_where_the_time_went(recorded: dict[str, Any], open_page: Any) -> None:
    cid = recorded["cid"]
    expected = _seconds_by_interval(recorded["url"], cid)
    with serving(recorded["app"]) as base:
        page = open_page(1440, 900)
        page.goto(f"{base}/clusters/{cid}?tab=spans")
        page.wait_for_selector("#fine-metric-intervals[data-ready='1']")
        chart = "#fine-metric-intervals [data-chart='fine-metric-intervals']"
        texts = lambda sel: [t.strip() for t in page.locator(sel).all_text_contents()]  # noqa: E731
        assert texts(f"{chart} .g-xtitle") == ["time (UTC)"]
        assert texts(f"{chart} .g-ytitle") == ["task time per interval (seconds)"]
        legend = texts(f"{chart} .legendtext")
        assert sorted(legend) == sorted(expected)
        # each activity in its catalogue colour, in the legend as in the bars
        drawn = page.evaluate(
            """(sel) => [...document.querySelector(sel).querySelectorAll('.legend .traces')]
                .map((t) => [t.querySelector('.legendtext').textContent,
                             t.querySelector('.legendpoints path').style.fill])""",
            chart,
        )
        colours = activity_colours(legend)
        assert {name: fill for name, fill in drawn} == {n: _rgb(colours[n]) for n in legend}
        # as many bars per activity as intervals, stacked
        bars = page.evaluate(
            "(sel) => document.querySelector(sel).data.map((t) => t.x.length)", chart
        )
        n_intervals = len({b for per in expected.values() for b in per})
        assert bars == [n_intervals] * len(legend) and n_intervals >= 3
        page.locator("#fine-metric-intervals").screenshot(path="/tmp/finetime-intervals.png")
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{base}/clusters/{cid}?tab=spans")
        page.wait_for_selector("#fine-metric-intervals[data-ready='1']")
        page.locator("#fine-metric-intervals").screenshot(path="/tmp/finetime-intervals-phone.png")


def _rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


# -- /metrics: counters that only grow


def _counters(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every counter sample of an exposition, read by prometheus_client's parser."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        if family.type == "counter":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_counters_never_decrease(tmp_path: Any) -> None:
    pytest.importorskip("prometheus_client")
    pytest.importorskip("fastapi")
    from daskscope.web import create_app

    url = f"sqlite:///{tmp_path / 'daskscope.db'}"
    name = "daskscope_fine_metric_activity_seconds_total"
    with (
        dask.config.set({"daskscope.flush-interval": "300ms", "optimization.fuse.active": False}),
        LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cid = daskscope.register(client, database=url, account="physics")
        app = create_app(url)
        # over real HTTP: a browser test of the same session may hold an event loop in
        # this thread, where the in-process client's asyncio.run cannot start
        try:
            with serving(app) as base:
                scrapes = []
                for i in range(3):  # a scrape after each round of work
                    with span(f"round-{i}"):
                        x = da.random.random((300, 300), chunks=75)
                        (x @ x.T).sum().compute()
                    daskscope.flush(client)
                    response = httpx.get(f"{base}/metrics", timeout=DEADLINE)
                    assert response.status_code == 200, response.text
                    scrapes.append(_counters(response.text))
                # the last scrape: per activity the store's interval rows summed by hand
                expected: dict[str, float] = defaultdict(float)
                for row in rows_of(url, store_schema.fine_metric_intervals, cid):
                    if row["unit"] == "seconds":
                        expected[row["activity"]] += row["value"]
        finally:
            app.state.store.close()

    last = {dict(k[1])["activity"]: v for k, v in scrapes[-1].items() if k[0] == name}
    assert last and last == pytest.approx(dict(expected))
    assert all(dict(k[1])["account"] == "physics" for k in scrapes[-1] if k[0] == name)
    for before, after in itertools.pairwise(scrapes):
        # no fine-metric counter went down (by activity, from the intervals; by prefix,
        # from the spans' totals), and the work showed in them
        fine = [k for k in after if k[0].startswith("daskscope_fine_metric")]
        assert {k[0] for k in fine} == {name, "daskscope_fine_metric_seconds_total"}
        for key, value in before.items():
            if key[0].startswith("daskscope_fine_metric"):
                assert after.get(key, 0.0) >= value, key
        fine = [k for k in after if k[0] == name]
        assert any(after[k] > before.get(k, 0.0) for k in fine)
