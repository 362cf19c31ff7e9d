"""The cluster page's charts as a person reads them, in Chromium, on real recorded
clusters: one that spills (small memory target) with a worker metric shaped like
distributed's GPU one and nested spans; one whose worker is closed normally and one
killed. Read: axis titles, tick labels, legend entries and their colours, the limit
line, the departures' colours, the fine-metric bars and the URL after a switch.
Screenshots at 1440x900 and 390x844 go to $DASKSCOPE_SCREENSHOTS."""

from __future__ import annotations

import logging
import os
import re
import signal
import time
from collections.abc import Iterator
from typing import Any

import dask
import dask.array as da
import pytest
import sqlalchemy as sa
from distributed import Client, LocalCluster, span, wait

import daskscope
from browser import SCREENSHOTS, SIZES, needs_chromium
from daskscope.catalogue import SPAN_FIGURES_NOTE, activity
from daskscope.format import bytes_text
from daskscope.store import open_store, worker_samples, write_records
from daskscope.store import schema as s
from factories import make_cluster, make_worker_sample
from webutil import busy, call, serving

pytest.importorskip("fastapi")
from daskscope.web import create_app

MIB = 2**20
LIMIT = 1024 * MIB
LOST_RED = "rgb(198, 40, 40)"  # #c62828
browser_only = needs_chromium


def _add_fake_gpu(dask_worker: Any) -> None:
    # Shaped like distributed's NVML metric (Worker.metrics["gpu"])
    used = 100 * MIB + (sum(dask_worker.address.encode()) % 7) * MIB
    dask_worker.metrics["gpu"] = lambda w: {"utilization": 40.0, "memory-used": used}


def _spilled_everywhere(dask_scheduler: Any) -> bool:
    return all(ws.metrics["spilled_bytes"]["disk"] > 0 for ws in dask_scheduler.workers.values())


def _record_spilling(url: str) -> str:
    """Two in-process workers that spill past 0.3 % of a 1 GiB limit, nested spans."""
    # 3 MiB: a worker holding one 4 MiB chunk spills. At 2 % (20 MiB, 5 chunks) a worker
    # that got few of the 24 chunks never spilled (one CI run under load, 2026-11-26)
    memory = {"target": 0.003, "spill": False, "pause": False, "terminate": False}
    with (
        dask.config.set({f"distributed.worker.memory.{k}": v for k, v in memory.items()}),
        dask.config.set({"optimization.fuse.active": False}),
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            memory_limit=LIMIT,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cid = daskscope.register(
            client, database=url, name="spilling cluster", worker_sampling_interval=0.2
        )
        client.run(_add_fake_gpu)
        with span("load"):
            x = da.random.random(96 * MIB // 8, chunks=4 * MIB // 8).persist()
            wait(x)
            with span("inner"):
                (x + 1).sum().compute()
        with span("work"):
            dask.compute(*[dask.delayed(busy)(i) for i in range(3)])
        deadline = time.monotonic() + 30
        while not client.run_on_scheduler(_spilled_everywhere):
            assert time.monotonic() < deadline, "the workers never spilled"
            time.sleep(0.1)
        time.sleep(0.8)  # a few samples of the spilled state
        daskscope.flush(client)
    return cid


def _record_departures(url: str) -> str:
    """Worker processes: one closed by a scale-down, one killed (lost)."""
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cid = daskscope.register(
            client, database=url, name="departures cluster", worker_sampling_interval=0.2
        )
        client.gather(client.map(busy, range(2)))
        cluster.scale(1)
        while len(client.scheduler_info()["workers"]) > 1:
            time.sleep(0.05)
        time.sleep(0.6)
        (victim,) = client.scheduler_info()["workers"]
        os.kill(client.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
        deadline = time.monotonic() + 120  # a minute or more at load 50
        while victim in client.scheduler_info()["workers"]:
            assert time.monotonic() < deadline, "the killed worker was never removed"
            time.sleep(0.05)
        client.wait_for_workers(1, timeout=60)  # the nanny starts another
        time.sleep(0.6)
        daskscope.flush(client)
    return cid


MANY = 12


def _many_workers(url: str) -> str:
    """A stored cluster of 12 workers (past the small multiples): a selector instead."""
    cluster = make_cluster("twelve workers", start=time.time() - 600)
    samples = [
        make_worker_sample(
            cluster,
            f"tcp://10.0.0.{w}:4000",
            cluster.started_at + 10 * i,
            memory_limit=4 * 2**30,
            managed_bytes=(w + 1) * 100 * MIB,
            unmanaged_bytes=200 * MIB,
            spilled_bytes=i * MIB,
            cpu_percent=10.0 * (w % 5),
            executing=w % 3,
        )
        for w in range(MANY)
        for i in range(20)
    ]
    with open_store(url) as store:
        write_records(store, [cluster, *samples])
    return cluster.id


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('cluster-charts') / 'daskscope.db'}"
    spilling = _record_spilling(url)
    departures = _record_departures(url)
    many = _many_workers(url)
    app = create_app(url)
    try:
        yield {
            "url": url,
            "app": app,
            "spilling": spilling,
            "departures": departures,
            "many": many,
        }
    finally:
        app.state.store.close()


def _stored(url: str, table: sa.Table, cluster_id: str) -> list[dict[str, Any]]:
    with open_store(url).engine.connect() as conn:
        rows = conn.execute(sa.select(table).where(table.c.cluster_id == cluster_id))
        return [dict(r._mapping) for r in rows]


def _subtree_seconds(
    url: str, cluster_id: str, span_id: str | None
) -> dict[tuple[str, str], float]:
    """Σ of the stored (exclusive) span metrics of span_id's subtree, by hand."""
    spans = _stored(url, s.spans, cluster_id)
    below: set[str] = {sp["span_id"] for sp in spans} if span_id is None else {span_id}
    grew = True
    while grew:
        more = {sp["span_id"] for sp in spans if sp["parent_span_id"] in below} - below
        below |= more
        grew = bool(more)
    sums: dict[tuple[str, str], float] = {}
    for m in _stored(url, s.span_metrics, cluster_id):
        if m["span_id"] in below and m["unit"] == "seconds":
            key = (m["prefix"], m["activity"])
            sums[key] = sums.get(key, 0.0) + m["value"]
    return sums


def _span_named(url: str, cluster_id: str, tag: str) -> dict[str, Any]:
    return next(sp for sp in _stored(url, s.spans, cluster_id) if sp["name"][-1:] == [tag])


def test_metrics_route_sums_a_span_subtree(recorded: dict[str, Any]) -> None:
    cid, url = recorded["spilling"], recorded["url"]
    load = _span_named(url, cid, "load")
    inner = _span_named(url, cid, "inner")
    assert inner["parent_span_id"] == load["span_id"]
    for span_id in (None, load["span_id"], inner["span_id"]):
        query = f"?span={span_id}" if span_id else ""
        body = call(recorded["app"], "GET", f"/api/v1/clusters/{cid}/metrics{query}").json()
        got = {(m["prefix"], m["activity"]): m["value"] for m in body["metrics"]}
        expected = _subtree_seconds(url, cid, span_id)
        assert expected and {k: got[k] for k in expected} == pytest.approx(expected)
        assert body["span_id"] == span_id and body["note"] == SPAN_FIGURES_NOTE
        assert body["units"][0] == "seconds"
    # the subtree holds more than the span alone: "inner" is below "load"
    assert _subtree_seconds(url, cid, load["span_id"]) != _subtree_seconds(
        url, cid, inner["span_id"]
    )
    missing = call(recorded["app"], "GET", f"/api/v1/clusters/{cid}/metrics?span=nope")
    assert missing.status_code == 404


def test_workers_route_marks_only_the_killed_worker_lost(recorded: dict[str, Any]) -> None:
    cid = recorded["departures"]
    body = call(recorded["app"], "GET", f"/api/v1/clusters/{cid}/workers").json()
    reasons = sorted(d["reason"] for d in body["departures"])
    assert reasons.count("lost") == 1 and "closed" in reasons
    assert all(d["lost"] == (d["reason"] == "lost") for d in body["departures"])
    assert not body["gpu_recorded"]


# -- in the browser


@pytest.fixture(scope="module")
def base(recorded: dict[str, Any]) -> Iterator[str]:
    with serving(recorded["app"]) as url:
        yield url


@pytest.fixture(params=list(SIZES))
def page(request: pytest.FixtureRequest, open_page: Any) -> Any:
    opened = open_page(*SIZES[request.param])
    opened.size_name = request.param
    return opened


def shot(page: Any, name: str, selector: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"cluster-{name}-{page.size_name}.png"
    page.locator(selector).screenshot(path=str(path))


def open_tab(page: Any, base: str, cluster_id: str, tab: str, query: str = "") -> None:
    """The cluster page on a tab; cluster.js draws our charts when the tab shows."""
    page.goto(f"{base}/clusters/{cluster_id}?tab={tab}{query}")
    ready = {"workers": "#workers-charts", "spans": "#fine-metrics"}[tab]
    page.wait_for_selector(f"{ready}[data-ready='1']")


def render_metrics(page: Any, cluster_id: str, span_id: str | None = None) -> None:
    """What cluster.js does when the span filter changes."""
    page.evaluate(
        """([id, spanId]) => dsMetrics.render(document.getElementById('fine-metrics'), id,
            ds.data(), {spanId})""",
        [cluster_id, span_id],
    )
    page.wait_for_selector("#fine-metrics[data-ready='1']")


def texts(page: Any, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_text_contents()]


_CHART = "#workers-charts [data-chart='{}']"
#: every y axis title of a chart, in axis order (plotly: g-ytitle, g-y2title, ...)
_Y_TITLES = " .infolayer [class^='g-y'][class$='title']"
_BINARY_TICK = re.compile(r"^\d+(\.\d+)? (B|KiB|MiB|GiB|TiB)(/s)?$")


@browser_only
def test_memory_split_per_worker_against_its_limit(
    recorded: dict[str, Any], base: str, page: Any
) -> None:
    cid = recorded["spilling"]
    open_tab(page, base, cid, "workers")
    rows = worker_samples(open_store(recorded["url"]), cid)
    workers = sorted({r["worker"] for r in rows})

    # Axis titles that plotly draws, legend entries and ticks in binary units
    total = _CHART.format("memory-total")
    assert texts(page, f"{total} .g-ytitle") == ["memory (bytes)"]
    assert texts(page, f"{total} .g-xtitle") == ["time (UTC)"]
    # then what its departure marks mean, for the kinds of departure recorded
    departures = page.request.get(f"{base}/api/v1/clusters/{cid}/workers").json()["departures"]
    kinds = [
        name
        for name, lost in (
            ("worker lost", True),
            ("worker left (closed, retired, restarted)", False),
        )
        if any(d["lost"] == lost for d in departures)
    ]
    assert texts(page, f"{total} .legendtext") == [
        "managed",
        "unmanaged",
        "spilled",
        "memory limit",
        *kinds,
    ]
    ticks = texts(page, f"{total} .ytick text")
    assert len(ticks) >= 3 and all(_BINARY_TICK.match(t) for t in ticks), ticks
    assert ticks[0].startswith("0 ")  # from 0

    # One small chart per worker: its split as stored, its limit, spilled where stored
    cards = page.locator("#workers-charts .dsw-worker")
    assert cards.count() == len(workers)

    # in the page's order: addresses compared with their numbers as numbers (…/98 before
    # …/100), as cluster_workers.js sorts them
    def natural(text: str) -> list[Any]:
        return [(0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", text)]

    assert texts(page, "#workers-charts .dsw-worker figcaption") == sorted(
        (w.replace("tcp://", "").replace("inproc://", "") for w in workers), key=natural
    )
    for worker in workers:
        drawn = page.evaluate(
            """(w) => Object.fromEntries(document.querySelector(`[data-worker="${w}"]`).data
                 .map((t) => [t.name, {y: t.y, hover: t.customdata, dash: t.line.dash}]))""",
            worker,
        )
        mine = [r for r in rows if r["worker"] == worker]
        assert drawn["spilled"]["y"] == [r["spilled_bytes"] for r in mine]
        assert max(drawn["spilled"]["y"]) > 0
        assert drawn["managed"]["y"] == [r["managed_bytes"] for r in mine]
        assert drawn["memory limit"]["y"] == [LIMIT] * len(mine)
        assert drawn["memory limit"]["dash"] == "dash"
        assert drawn["managed"]["hover"] == [bytes_text(r["managed_bytes"]) for r in mine]
        ticks = texts(page, f'[data-worker="{worker}"] .ytick text')
        assert all(_BINARY_TICK.match(t) for t in ticks), ticks
        # scaled to the memory used (in-process workers: the test process's), the 1 GiB
        # limit in the chart only within 2.5 times the peak, else written at the top
        top = page.evaluate(
            "(w) => document.querySelector(`[data-worker='${w}']`)._fullLayout.yaxis.range[1]",
            worker,
        )
        peak = max(
            (r["managed_bytes"] or 0) + (r["unmanaged_bytes"] or 0) + (r["spilled_bytes"] or 0)
            for r in rows
        )  # the one scale of every worker's chart: the largest
        above = texts(page, f'[data-worker="{worker}"] .annotation-text')
        if 2.5 * peak >= LIMIT:
            assert top >= LIMIT and "1 GiB" in ticks and above == []
        else:
            assert peak <= top < LIMIT and above == ["memory limit 1.0 GiB ↑ above the scale"]

    # CPU, tasks, network and disk: titled axes, one legend entry per worker whose colour
    # is its swatch in the memory panel and its line in every panel
    timeline = _CHART.format("timeline")
    titles = texts(page, timeline + _Y_TITLES)
    assert titles[:2] == ["CPU (% of a core)", "executing (tasks)"]
    assert all(t.isdigit() for t in texts(page, f"{timeline} .y2tick text"))  # whole tasks
    assert titles[2:] == ["network (bytes/s)", "disk (bytes/s)"]
    assert all(_BINARY_TICK.match(t) for t in texts(page, f"{timeline} .y3tick text"))
    # in the page's natural order, as the cards: ".../98" before ".../100"
    short = sorted((w.split("://")[-1] for w in workers), key=natural)
    legend = texts(page, f"{timeline} .legendtext")
    # the workers, then what the departure marks mean (they closed with the cluster)
    assert legend == [*short, "read", "write", "worker left (closed, retired, restarted)"]
    colours = page.evaluate(
        """() => {
        const swatch = [...document.querySelectorAll("#workers-charts .dsw-worker")].map((f) =>
          [f.querySelector(".dsw-chart").dataset.worker,
           getComputedStyle(f.querySelector("i")).backgroundColor]);
        const gd = document.querySelector("#workers-charts [data-chart='timeline']");
        const legend = [...gd.querySelectorAll(".legend .traces")].map((t) =>
          [t.querySelector(".legendtext").textContent,
           (t.querySelector(".legendlines path") || {style: {}}).style.stroke]);
        const lines = gd.data.filter((t) => t.legendgroup && t.legendgroup.includes("://"))
          .map((t) => [t.legendgroup, t.line.color]);
        return {swatch, legend, lines};
    }"""
    )
    swatch = dict(colours["swatch"])
    assert len(set(swatch.values())) == len(workers)
    entries = colours["legend"][: len(workers)]
    for (worker, colour), (name, stroke) in zip(colours["swatch"], entries, strict=True):
        assert name == worker.split("://")[-1] and stroke == colour
    hex_of = {w: c for w, c in colours["lines"]}
    for worker, colour in colours["lines"]:
        assert colour == hex_of[worker]  # every panel draws the worker in one colour
    assert {_rgb(hex_of[w]) for w in workers} == set(swatch.values())

    # GPU: drawn from the samples' metrics
    gpu = _CHART.format("gpu")
    assert texts(page, gpu + _Y_TITLES) == ["GPU utilisation (%)", "GPU memory used (bytes)"]
    assert all(_BINARY_TICK.match(t) for t in texts(page, f"{gpu} .y2tick text"))
    shot(page, "workers-memory", "#panel-workers")


def _rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


@browser_only
def test_a_closed_worker_is_not_drawn_as_lost(
    recorded: dict[str, Any], base: str, page: Any
) -> None:
    cid = recorded["departures"]
    open_tab(page, base, cid, "workers")
    timeline = _CHART.format("timeline")
    drawn = page.evaluate(
        """() => {
        const gd = document.querySelector("#workers-charts [data-chart='timeline']");
        return {
          shapes: gd.layout.shapes.map((s) => [s.name.split(" ")[0], s.line.color]),
          markers: gd.data.filter((t) => t.mode.startsWith("markers"))
            .map((t) => [t.name, t.marker.color, t.x.length]),
        };
    }"""
    )
    # The all-workers memory chart marks each departure where it happened: departures
    # at one moment share a marker ("x2"), whose hover names each of them
    body = page.request.get(f"{base}/api/v1/clusters/{cid}/workers").json()
    total = page.evaluate(
        """() => document.querySelector("#workers-charts [data-chart='memory-total']").data
        .filter((t) => t.mode === "markers+text")
        .flatMap((t) => t.customdata.map((c, i) => [c, t.text[i]]))"""
    )
    named = [line for hover, _ in total for line in hover.split("<br>")]
    assert len(named) == len(body["departures"])
    for d in body["departures"]:
        assert sum(line.startswith(d["worker"].split("://")[-1]) for line in named) >= 1
    for hover, text in total:
        n = hover.count("<br>") + 1
        assert text == ("" if n == 1 else f"\u00d7{n}")
    by_reason: dict[str, set[str]] = {}
    for reason, colour in drawn["shapes"]:
        by_reason.setdefault(reason, set()).add(_rgb(colour))
    assert by_reason["lost"] == {LOST_RED}
    assert LOST_RED not in by_reason["closed"]
    markers = {name: (colour, n) for name, colour, n in drawn["markers"]}
    assert _rgb(markers["worker lost"][0]) == LOST_RED and markers["worker lost"][1] == 1
    left = markers["worker left (closed, retired, restarted)"]
    assert _rgb(left[0]) != LOST_RED and left[1] >= 1
    legend = texts(page, f"{timeline} .legendtext")
    assert "worker lost" in legend and "worker left (closed, retired, restarted)" in legend
    assert page.locator("#workers-charts #no-gpu").inner_text() == "No GPU metrics recorded."
    lost_items = page.locator("#workers-charts .dsw-departures li.bad")
    assert lost_items.count() == 1 and lost_items.get_attribute("data-reason") == "lost"
    page.locator("#workers-charts .dsw-departures summary").click()
    shot(page, "workers-departures", "#panel-workers")


@browser_only
def test_fine_metrics_as_stacked_bars(recorded: dict[str, Any], base: str, page: Any) -> None:
    cid, url = recorded["spilling"], recorded["url"]
    open_tab(page, base, cid, "spans")
    chart = "#fine-metrics [data-chart='fine-metrics']"

    def bars() -> dict[str, Any]:
        return page.evaluate(
            """() => {
              const gd = document.querySelector("#fine-metrics [data-chart='fine-metrics']");
              const traces = gd.data.map((t) => [t.name, t.x, t.marker.color]);
              return {prefixes: gd.data[0].y, traces}; }"""
        )

    expected = _subtree_seconds(url, cid, None)
    prefixes = sorted(
        {p for p, _ in expected}, key=lambda p: -sum(v for (q, _), v in expected.items() if q == p)
    )
    drawn = bars()
    assert drawn["prefixes"] == prefixes[: len(drawn["prefixes"])]
    # the bar labels a person reads, top to bottom: the largest prefix first (a long one
    # cut on a phone)
    read = page.evaluate(
        """(sel) => [...document.querySelectorAll(sel)]
        .sort((a, b) => a.getBoundingClientRect().y - b.getBoundingClientRect().y)
        .map((t) => t.textContent)""",
        f"{chart} .ytick text",
    )
    assert len(read) == len(drawn["prefixes"])
    for label, prefix in zip(read, drawn["prefixes"], strict=True):
        assert label == prefix or (label.endswith("…") and prefix.startswith(label[:-1]))
    activities = {a for _, a in expected}
    assert set(texts(page, f"{chart} .legendtext")) == activities
    assert texts(page, f"{chart} .g-xtitle") == ["task time by activity (seconds)"]
    for name, values, _ in drawn["traces"]:
        assert values == pytest.approx(
            [expected.get((p, name), 0.0) for p in drawn["prefixes"]], rel=1e-9
        )
    # what "duration" and "active CPU" mean, and each activity, from the catalogue
    assert SPAN_FIGURES_NOTE in page.locator("#fine-metrics .dsm-note").inner_text()
    page.locator("#fine-metrics .dsm-activities summary").click()
    meaning = activity("thread-cpu")
    assert meaning is not None
    assert meaning.meaning in page.locator("#fine-metrics .dsm-activities").inner_text()
    colours = {n: c for n, _, c in drawn["traces"]}
    shot(page, "fine-metrics-seconds", "#fine-metrics")

    # bytes: the axis says so, ticks in binary units, the URL keeps it across a reload
    page.locator("#fine-metrics button[data-unit='bytes']").click()
    page.wait_for_selector("#fine-metrics[data-unit='bytes'][data-ready='1']")
    assert "metrics_unit=bytes" in page.url
    assert texts(page, f"{chart} .g-xtitle") == ["data by activity (bytes)"]
    assert all(_BINARY_TICK.match(t) for t in texts(page, f"{chart} .xtick text"))
    assert "disk-write" in texts(page, f"{chart} .legendtext")  # it spilled
    for name, _, colour in bars()["traces"]:
        assert colours.get(name, colour) == colour  # one colour per activity
    shot(page, "fine-metrics-bytes", "#fine-metrics")
    open_tab(page, base, cid, "spans", "&metrics_unit=bytes")
    assert texts(page, f"{chart} .g-xtitle") == ["data by activity (bytes)"]

    # a span's subtree: the bars hold that subtree's sums
    page.locator("#fine-metrics button[data-unit='seconds']").click()
    page.wait_for_selector("#fine-metrics[data-unit='seconds'][data-ready='1']")
    assert "metrics_unit" not in page.url
    load = _span_named(url, cid, "load")
    render_metrics(page, cid, load["span_id"])
    assert page.locator("#fine-metrics").get_attribute("data-span") == load["span_id"]
    assert (
        "span load and the spans below it" in page.locator("#fine-metrics .dsm-scope").inner_text()
    )
    subtree = _subtree_seconds(url, cid, load["span_id"])
    drawn = bars()
    assert set(drawn["prefixes"]) == {p for p, _ in subtree}
    for name, values, _ in drawn["traces"]:
        assert values == pytest.approx([subtree.get((p, name), 0.0) for p in drawn["prefixes"]])

    # as a table: every prefix, values formatted in their unit
    page.locator("#fine-metrics-as-table").check()
    page.wait_for_selector("#fine-metrics-table")
    assert "metrics_table=1" in page.url
    cells = texts(page, "#fine-metrics-table tbody td.num")
    assert cells and all(c == "" or re.search(r"\d (ms|s|µs|min|h)", c) for c in cells), cells
    shot(page, "fine-metrics-table", "#fine-metrics")


@browser_only
def test_many_workers_get_a_selector_kept_in_the_url(
    recorded: dict[str, Any], base: str, page: Any
) -> None:
    cid = recorded["many"]
    open_tab(page, base, cid, "workers")
    options = page.locator("#worker-select option").all_inner_texts()
    assert len(options) == MANY and options[0] == "10.0.0.0:4000"
    assert page.locator("#workers-charts .dsw-worker").count() == 1  # one at a time
    timeline = _CHART.format("timeline")
    legend = texts(page, f"{timeline} .legendtext")
    assert legend[:MANY] == [f"10.0.0.{w}:4000" for w in range(MANY)]  # 2 before 10
    colours = page.evaluate(
        """() => document.querySelector("#workers-charts [data-chart='timeline']").data
            .filter((t) => t.yaxis === "y" && t.legendgroup.includes("://"))
            .map((t) => t.line.color)"""
    )
    assert len(set(colours)) == MANY  # one colour each, none recycled
    # these samples hold no I/O: the panels say so
    assert texts(page, f"{timeline} .annotation-text") == ["not recorded", "not recorded"]
    page.select_option("#worker-select", "tcp://10.0.0.7:4000")
    page.wait_for_selector("#workers-charts [data-worker='tcp://10.0.0.7:4000']")
    assert "worker=tcp" in page.url and "10.0.0.7" in page.url
    managed = page.evaluate(
        """() => document.querySelector("[data-worker='tcp://10.0.0.7:4000']").data
            .find((t) => t.name === "managed").y"""
    )
    assert managed == [800 * MIB] * 20
    shot(page, "workers-selector", "#panel-workers")
    page.reload()
    page.wait_for_selector("#workers-charts[data-ready='1']")
    assert page.locator("#worker-select").input_value() == "tcp://10.0.0.7:4000"
