"""The workflow run pages in a real browser (Debian's Chromium through Playwright), read
as a person reads them: a real run over a Dask LocalCluster with ``track_time`` and
``track_memory`` sections (its sections, figures with units, rounded chunk times, the
chunk chart's titles, legend, ticks and hover, every label inside the chart's box), and a
store of 160 runs for the listing (search, status, dates, sort and pages, all in the
URL and back after a reload or Back). Screenshots at 1440x900 and 390x844 go to
$DASKSCOPE_SCREENSHOTS."""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from distributed import Client, LocalCluster

from browser import SIZES, needs_chromium, screenshot
from daskscope import MetricsCollector, track_memory, track_metrics, track_time
from daskscope.format import MISSING
from daskscope.store import open_store, write_records
from daskscope.workflow import current_chunk
from factories import T0, make_workflow_run
from webutil import serving

# what format.duration_text writes: "12 ms", "1.5 s", "2 min 5 s" (never "4.000123")
DURATION = re.compile(rf"^(0 s|\d+ (µs|ms)|\d+\.\d s|\d+ (min|h|d) \d+ (s|min|h)|{MISSING})$")
BYTES = re.compile(rf"^(-?\d+ B|-?\d+\.\d (KiB|MiB|GiB|TiB)|{MISSING})$")

pytestmark = needs_chromium
pytest.importorskip("fastapi")

from daskscope.web import create_app  # noqa: E402


@track_metrics
def analyse(start: int, stop: int) -> int:
    chunk = current_chunk()
    with track_time(None, "select"):
        total = sum(i * i for i in range(start, stop))
    with track_memory(None, "histogram"):
        data = bytearray(1 << 20)
    with track_time(None, "fill"):
        total += sum(range(start, stop, 7))
    if chunk is not None:
        chunk.report_events(stop - start)
    return total + len(data) * 0


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A real run of 8 chunks on a LocalCluster, served."""
    url = f"sqlite:///{tmp_path_factory.mktemp('run-page') / 'store.db'}"
    starts = [i * 20_000 for i in range(8)]
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
        MetricsCollector(
            client, name="page <run>", database=url, worker_tracking_interval=0.05
        ) as collector,
    ):
        client.gather(client.map(analyse, starts, [s + 5_000 + s // 4 for s in starts]))
    run_id = collector.wait_stored()
    app = create_app(url)
    with serving(app) as base:
        yield {"base": base, "run_id": run_id, "run": collector.run}
    app.state.store.close()


KINDS = ("alpha", "beta", "gamma", "delta")
USERS = ("ana", "ben", "cleo")
RUNS = 160


def _day(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).date().isoformat()


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """160 runs six hours apart from 2026-01-01: four names, three users, every
    seventh failed."""
    url = f"sqlite:///{tmp_path_factory.mktemp('run-listing') / 'store.db'}"
    runs = [
        make_workflow_run(
            None,
            id=f"run-{i:04d}",
            name=f"{KINDS[i % 4]} {i:03d}",
            user=USERS[i % 3],
            started_at=T0 + i * 6 * 3600,
            stopped_at=T0 + i * 6 * 3600 + 10 + i % 13,
            wall_time_s=float(10 + i % 13),
            chunk_count=i % 9,
            info={"status": "failed", "error": "boom"} if i % 7 == 0 else {},
        )
        for i in range(RUNS)
    ]
    with open_store(url) as store:
        write_records(store, runs)
    app = create_app(url)
    with serving(app) as base:
        yield {"base": base, "runs": runs}
    app.state.store.close()


def _page(open_page: Any, size: str) -> Any:
    opened = open_page(*SIZES[size])
    opened.size_name = size
    return opened


@pytest.fixture(params=list(SIZES))
def page(request: pytest.FixtureRequest, open_page: Any) -> Any:
    return _page(open_page, request.param)


@pytest.fixture
def desktop(open_page: Any) -> Any:
    return _page(open_page, "desktop")


def shot(page: Any, name: str) -> None:
    screenshot(page, f"run-{name}-{page.size_name}")


def texts(locator: Any) -> list[str]:
    return [t.strip() for t in locator.all_inner_texts()]


def drawn(locator: Any) -> list[str]:
    """The texts of SVG elements (plotly's), as drawn."""
    return [t.strip() for t in locator.all_text_contents()]


def no_page_overflow(page: Any) -> None:
    wide, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert wide <= inner, f"the page is {wide} px wide in a {inner} px window"


def row(page: Any, selector: str) -> list[str]:
    """The header and cells of the row ``selector``."""
    return texts(page.locator(f"{selector} th, {selector} td"))


def sorted_by(page: Any, header: str) -> str | None:
    return page.locator(header).get_attribute("aria-sort")


def query(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


# -- one run


def test_run_page_shows_sections_figures_and_chunks_readably(
    recorded: dict[str, Any], page: Any
) -> None:
    page.goto(f"{recorded['base']}/runs/{recorded['run_id']}")
    page.wait_for_selector("#chunk-chart[data-ready='1']")
    assert page.locator("h1").inner_text().startswith("page <run>")  # text, never markup
    assert page.locator("#run-status").inner_text() == "ok"

    # sections: each track_time/track_memory block, named by the catalogue's labels
    heads = texts(page.locator("#run-sections thead th"))
    assert heads[:5] == ["Section", "Kind", "chunks", "calls", "wall Σ"]
    assert "memory Δ Σ" in heads and "CPU mean" in heads
    rows = {r.locator("th").inner_text(): r for r in page.locator("#run-sections tbody tr").all()}
    assert set(rows) == {"fill", "histogram", "select"}
    column = {h: i for i, h in enumerate(heads)}
    for name, kind in (("select", "time"), ("fill", "time"), ("histogram", "memory")):
        cells = texts(rows[name].locator("th, td"))
        assert cells[column["Kind"]] == kind
        assert cells[column["chunks"]] == "8" and cells[column["calls"]] == "8"
        assert DURATION.match(cells[column["wall Σ"]]), cells
        assert DURATION.match(cells[column["wall mean"]]), cells
        assert BYTES.match(cells[column["memory Δ Σ"]]), cells
    assert texts(rows["select"].locator("td"))[column["memory Δ Σ"] - 1] == MISSING

    # figures: label, value in its unit, the unit; a figure not measured says why
    events = f"{recorded['run'].metrics['total_events']:,}"
    assert row(page, '.run-figures tr[data-key="total_events"]') == ["events", events, "count"]
    rate = row(page, '.run-figures tr[data-key="event_rate_wall_khz"]')
    assert rate[0] == "event rate (wall)" and rate[1].endswith(" kHz") and rate[2] == "kHz"
    read = page.locator('.run-figures tr[data-key="bytes_read"] td.num').inner_text()
    assert read.startswith(MISSING) and "not measured: no bytes read reported" in read

    # the chunk table: rounded durations, start times with milliseconds, formatted bytes
    heads = texts(page.locator("#run-chunks thead th"))
    col = {h: i for i, h in enumerate(heads)}
    chunk_rows = page.locator("#run-chunks tbody tr")
    assert chunk_rows.count() == 8
    for tr in chunk_rows.all():
        cells = texts(tr.locator("td"))
        assert DURATION.match(cells[col["Wall"]]) and DURATION.match(cells[col["CPU"]]), cells
        assert BYTES.match(cells[col["Memory peak"]]), cells
        assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$", cells[col["Started (UTC)"]])
    stat = row(page, '#run-chunk-stats tr[data-key="wall_s"]')
    assert stat[0] == "wall" and stat[1] == "8" and all(DURATION.match(t) for t in stat[2:]), stat

    # the chart: titles and legend as drawn, ticks in durations, every label in its box
    chart = page.locator("#chunk-chart")
    assert drawn(chart.locator(".xtitle")) == ["chunk (#)"]
    assert drawn(chart.locator(".ytitle")) == ["wall time"]
    assert drawn(chart.locator(".y2title")) == ["events"]
    assert drawn(chart.locator(".legendtext")) == ["wall time", "events"]
    y_ticks = drawn(chart.locator(".ytick text"))
    assert len(y_ticks) >= 3 and all(DURATION.match(t) for t in y_ticks), y_ticks
    assert drawn(chart.locator(".xtick text"))[:3] == ["0", "1", "2"]
    box = chart.locator(".main-svg").first.bounding_box()
    labels = chart.locator(".xtitle, .ytitle, .y2title, .xtick text, .ytick text, .y2tick text")
    assert labels.count() > 10
    for label in labels.all():
        b = label.bounding_box()
        inside = (
            b["x"] >= box["x"] - 0.5 and b["y"] >= box["y"] - 0.5
            and b["x"] + b["width"] <= box["x"] + box["width"] + 0.5
            and b["y"] + b["height"] <= box["y"] + box["height"] + 0.5
        )  # fmt: skip
        assert inside, (label.text_content(), b, box)
    # hover reads formatted figures
    chart.locator(".barlayer .point path").first.hover(force=True)
    hover = " ".join(drawn(page.locator(".hoverlayer .hovertext text")))
    assert hover.startswith("chunk 0") and re.search(r"wall \d+(\.\d)? (µs|ms|s)", hover), hover
    no_page_overflow(page)
    shot(page, "page")


def test_chunk_table_sorts_from_the_keyboard_and_keeps_its_order_in_the_url(
    recorded: dict[str, Any], desktop: Any
) -> None:
    page = desktop
    walls = {i: c.wall_s for i, c in enumerate(recorded["run"].chunks)}  # as the view numbers them
    page.goto(f"{recorded['base']}/runs/{recorded['run_id']}")
    page.wait_for_selector("#chunk-chart[data-ready='1']")
    order = lambda: [int(i) for i in texts(page.locator("#run-chunks tbody tr td:first-child"))]  # noqa: E731
    assert order() == list(range(8))
    # Tab reaches the headers' buttons; Enter sorts by wall time, longest first
    page.locator('#run-chunks th[data-key="dataset"] button').focus()
    for _ in range(5):  # dataset -> file, entries, events, bytes read, wall
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.closest('th').dataset.key") == "wall_s"
    page.keyboard.press("Enter")
    longest = sorted(walls, key=lambda i: -walls[i])
    assert order() == longest
    assert query(page) == {"chunks_by": ["wall_s"], "chunks_order": ["desc"]}
    assert (
        page.locator('#run-chunks th[data-key="wall_s"]').get_attribute("aria-sort") == "descending"
    )
    page.keyboard.press(" ")  # Space: the other way
    assert order() == longest[::-1] and query(page)["chunks_order"] == ["asc"]
    page.reload()
    page.wait_for_selector("#chunk-chart[data-ready='1']")
    assert order() == longest[::-1]
    page.go_back()
    assert order() == longest and query(page)["chunks_order"] == ["desc"]
    page.go_back()
    assert order() == list(range(8)) and query(page) == {}
    # the tables scroll in their own box, which the keyboard reaches
    assert page.locator("#run-chunks").evaluate("t => t.parentElement.tabIndex") == 0


# -- the listing


def _listed(page: Any) -> list[str]:
    return texts(page.locator("#run-listing tbody tr td:first-child"))


def test_listing_pages_searches_filters_and_sorts_with_state_in_the_url(
    many: dict[str, Any], desktop: Any
) -> None:
    page, runs = desktop, many["runs"]
    newest = [r.name for r in sorted(runs, key=lambda r: -r.started_at)]
    page.goto(f"{many['base']}/runs")
    assert _listed(page) == newest[:100]
    assert page.locator("#run-count").inner_text() == "Runs 1\N{EN DASH}100 of 160"
    page.locator("#run-next").click()
    page.wait_for_url("**/runs?offset=100")
    assert _listed(page) == newest[100:]
    assert page.locator("#run-count").inner_text() == "Runs 101\N{EN DASH}160 of 160"
    page.go_back()
    assert _listed(page) == newest[:100]

    # search by name, on Enter
    page.locator('#run-filters input[name="q"]').fill("gamma")
    page.keyboard.press("Enter")
    page.wait_for_url("**/runs?q=gamma")
    assert _listed(page) == [n for n in newest if n.startswith("gamma")]
    assert page.locator("#run-count").inner_text() == "40 runs"
    # and a user, a status and a date range (keyboard: Tab to Apply, Enter)
    page.locator('#run-filters input[name="user"]').fill("ben")
    page.locator('#run-filters select[name="status"]').select_option("failed")
    since, until = _day(T0 + 10 * 86400), _day(T0 + 30 * 86400)
    page.locator('#run-filters input[name="since"]').fill(since)
    page.locator('#run-filters input[name="until"]').fill(until)
    page.locator("#run-filters button[type=submit]").focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**/runs?q=gamma&user=ben&status=failed*")
    start, stop = T0 + 10 * 86400 - 0.123456, T0 + 31 * 86400 - 0.123456  # whole UTC days
    wanted = [
        r.name for r in sorted(runs, key=lambda r: -r.started_at)
        if r.name.startswith("gamma") and r.user == "ben" and r.info.get("status") == "failed"
        and start <= r.started_at < stop
    ]  # fmt: skip
    assert wanted and _listed(page) == wanted
    assert query(page) == {
        "q": ["gamma"], "user": ["ben"], "status": ["failed"], "since": [since], "until": [until]
    }  # fmt: skip
    assert set(texts(page.locator("#run-listing tbody tr td:nth-child(4)"))) == {"failed"}
    page.reload()
    assert _listed(page) == wanted
    assert page.locator('#run-filters input[name="user"]').input_value() == "ben"
    assert page.locator('#run-filters select[name="status"]').input_value() == "failed"
    page.go_back()
    assert _listed(page) == [n for n in newest if n.startswith("gamma")]
    assert page.locator('#run-filters input[name="q"]').input_value() == "gamma"

    # sort by name from the keyboard: Space, then Enter the other way
    page.goto(f"{many['base']}/runs")
    page.locator('#run-listing th[data-sort="name"] a').focus()
    page.keyboard.press(" ")
    page.wait_for_url("**/runs?sort=name&order=asc")
    by_name = sorted(r.name for r in runs)
    assert _listed(page) == by_name[:100]
    assert (
        page.locator('#run-listing th[data-sort="name"]').get_attribute("aria-sort") == "ascending"
    )
    page.locator('#run-listing th[data-sort="name"] a').focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**/runs?sort=name")
    assert _listed(page) == by_name[::-1][:100]
    # the next page keeps the order
    page.locator("#run-next").click()
    page.wait_for_url("**/runs?sort=name&offset=100")
    assert _listed(page) == by_name[::-1][100:]
    page.reload()
    assert _listed(page) == by_name[::-1][100:]
    page.go_back()
    page.go_back()
    assert _listed(page) == by_name[:100]
    # by wall time, longest first (ties newest first)
    page.locator('#run-listing th[data-sort="wall"] a').click()
    page.wait_for_url("**/runs?sort=wall")
    walls = [
        float(t.removesuffix(" s"))
        for t in texts(page.locator("#run-listing tbody td:nth-child(6)"))
    ]
    assert walls == sorted(walls, reverse=True) and walls[0] == 22.0
    shot(page, "listing")


def test_listing_says_when_nothing_matches(many: dict[str, Any], desktop: Any) -> None:
    page = desktop
    page.goto(f"{many['base']}/runs?q=zeta")
    assert page.locator("#no-runs").inner_text() == "No workflow run matches these filters."
    page.locator("#run-clear").click()
    page.wait_for_url("**/runs")
    assert len(_listed(page)) == 100


def test_pages_fit_a_phone(recorded: dict[str, Any], many: dict[str, Any], open_page: Any) -> None:
    page = _page(open_page, "phone")
    page.goto(f"{many['base']}/runs")
    no_page_overflow(page)
    scroller = page.locator("#run-listing").evaluate(
        "t => [t.parentElement.scrollWidth, t.parentElement.clientWidth]"
    )
    assert scroller[0] > scroller[1]  # the table scrolls in its own box
    shot(page, "listing")
    page.goto(f"{recorded['base']}/runs/{recorded['run_id']}")
    page.wait_for_selector("#chunk-chart[data-ready='1']")
    no_page_overflow(page)


def test_a_failed_run_and_its_failed_chunk_read_as_failed(tmp_path: Path, desktop: Any) -> None:
    from factories import make_workflow_chunk

    url = f"sqlite:///{tmp_path / 'failed.db'}"
    run = make_workflow_run(
        None, id="run-failed", name="broken", chunk_count=3,
        info={"status": "failed", "error": "ValueError: no such branch 'Jet_pt'"},
    )  # fmt: skip
    chunks = [
        make_workflow_chunk(
            run, i, cluster_id=None, started_at=T0 + i, wall_s=[0.25, 1.5, 75.0][i],
            events=[1000, 2000, None][i],
            detail={"status": "failed", "error": "OSError: file gone"} if i == 1 else {},
        )
        for i in range(3)
    ]  # fmt: skip
    with open_store(url) as store:
        write_records(store, [run, *chunks])
    app = create_app(url)
    try:
        with serving(app) as base:
            page = desktop
            page.goto(f"{base}/runs/run-failed")
            page.wait_for_selector("#chunk-chart[data-ready='1']")
            assert page.locator("#run-status").inner_text() == "failed"
            assert "no such branch 'Jet_pt'" in page.locator("#run-error").inner_text()
            badges = page.locator("#run-chunks tbody .run-badge")
            assert texts(badges) == ["ok", "failed", "ok"]
            assert badges.nth(1).get_attribute("title") == "OSError: file gone"
            walls = texts(page.locator("#run-chunks tbody td:nth-child(9)"))
            assert walls == ["250 ms", "1.5 s", "1 min 15 s"]
            # the failed attempt's bar is drawn red, the others blue
            fills = page.locator("#chunk-chart .barlayer .point path").evaluate_all(
                "paths => paths.map((p) => getComputedStyle(p).fill)"
            )
            assert fills[1] == "rgb(198, 40, 40)" and fills[0] == fills[2] != fills[1]
            ticks = drawn(page.locator("#chunk-chart .ytick text"))
            assert ticks[0] == "0 s" and "1 min 0 s" in ticks, ticks
    finally:
        app.state.store.close()
