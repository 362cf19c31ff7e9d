"""The account page in Chromium with 100 members over 12 weeks (some weeks idle): the
member x week heat map as the server draws it (axis titles, every week's tick, the colour
scale, top members and "others", each cell's colour and value against the clusters
written), selecting a cell and the listing that follows, the state in the URL through
reload and Back, search, sort and paging by real clicks and typing, and the keyboard
(the map's cells by arrows, Enter and Escape). The page loads no chart library.
Screenshots at 1440x900 and 390x844."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from browser import needs_chromium, screenshot
from daskscope import model
from daskscope.format import value_text
from daskscope.store import open_store, write_records
from factories import make_cluster
from webutil import GIB, monday, serving

pytestmark = needs_chromium
pytest.importorskip("fastapi")

from daskscope.web import create_app  # noqa: E402

MEMBERS = 100
WEEKS = 12
IDLE_WEEK = 5  # nobody ran anything in this week (counted back from last week)
WEEK = 7 * 86400
DASH = "\u2013"  # the pager writes "1\u201350 of 700"
SIZES = {"wide": (1440, 900), "narrow": (390, 844)}


def user_name(i: int) -> str:
    return f"user-{i:03d}"


def many_members(now: float) -> list[model.ClusterRecord]:
    """100 members over the last 12 weeks; member i runs (100 - i) x 6 minutes a week on
    the weeks where (i + w) % 3 != 0, so user-000 uses the most; one week is idle for
    all; every 7th cluster has errors; account "research" has no prices of its own."""
    rows = []
    this_monday = monday(now)
    for w in range(WEEKS):
        if w == IDLE_WEEK:
            continue
        week = this_monday - (w + 1) * WEEK
        for i in range(MEMBERS):
            if (i + w) % 3 == 0:
                continue
            start = week + 86400 + i * 600 + w
            seconds = (MEMBERS - i) * 360.0
            rows.append(
                make_cluster(
                    f"{'etl nightly' if i % 10 == 0 else 'analysis'} {user_name(i)} w{w}",
                    start=start,
                    id=model.stable_id("account-page", i, w),
                    account="research" if i % 2 else "default",
                    user=user_name(i),
                    stopped_at=start + seconds,
                    last_seen_at=start + seconds,
                    workers_peak=1 + i % 8,
                    threads_peak=4,
                    memory_limit_peak=8 * GIB,
                    core_seconds=4 * seconds,
                    memory_limit_byte_seconds=8 * GIB * seconds,
                    tasks_executed=1000 + 37 * i + w,
                    tasks_erred=1 if (i + w) % 7 == 0 else 0,
                    compute_seconds=2 * seconds,
                    bytes_processed=(i + 1) * 2**20,
                )
            )
    running = make_cluster(
        "still running", start=now - 600, id="running-cluster", account="default",
        user="user-000", stopped_at=None, last_seen_at=now,
    )  # fmt: skip
    return [*rows, running]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('account-page') / 'daskscope.db'}"
    now = time.time()
    rows = many_members(now)
    with open_store(url) as store:
        write_records(store, rows)
    app = create_app(url)
    with serving(app) as base:
        yield {"base": base, "rows": rows, "now": now}
    app.state.store.close()


@pytest.fixture
def page(open_page: Any) -> Any:
    return open_page(*SIZES["wide"])


def shot(page: Any, name: str) -> None:
    screenshot(page, name)


def state(page: Any) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def ready(page: Any) -> None:
    page.wait_for_selector("#usage-chart[data-ready='1']")
    page.wait_for_function(
        "() => document.getElementById('cluster-listing').getAttribute('aria-busy') !== 'true'"
    )


def pager_reads(page: Any, text: str, *, start: bool = False) -> None:
    """Wait until the pager says ``text`` (or starts with it)."""
    test = "startsWith" if start else "endsWith"
    if not start:
        page.wait_for_function(
            "(t) => document.getElementById('page-info').textContent === t", arg=text
        )
        return
    page.wait_for_function(
        f"(t) => document.getElementById('page-info').textContent.{test}(t)", arg=text
    )


def column(page: Any, n: int) -> list[str]:
    return page.locator(f"#cluster-listing tbody tr td:nth-child({n})").all_inner_texts()


def mondays(now: float, weeks: int = 26) -> list[str]:
    last = monday(now)
    return [
        time.strftime("%Y-%m-%d", time.gmtime(last - (weeks - 1 - i) * WEEK)) for i in range(weeks)
    ]


# Texts of the elements as a person reads them down the screen
TOP_TO_BOTTOM = """(selector) => [...document.querySelectorAll(selector)]
    .map((e) => [e.getBoundingClientRect().top, e.textContent])
    .sort((a, b) => a[0] - b[0]).map((p) => p[1])"""


def ranking(rows: list[model.ClusterRecord]) -> list[str]:
    """Members by cluster hours, most first (ties by name), as the heat map ranks them."""
    hours: dict[str, float] = {}
    for r in rows:
        hours[r.user] = hours.get(r.user, 0.0) + ((r.stopped_at or r.last_seen_at) - r.started_at)
    return sorted(hours, key=lambda u: (-hours[u], u))


def cell(page: Any, user_row: int, week_col: int) -> Any:
    """The heat map's button of a member's row and a week's column."""
    return page.locator(f"#usage-chart tbody tr:nth-child({user_row + 1}) button.cell").nth(
        week_col
    )


def centre(locator: Any) -> dict[str, float]:
    box = locator.bounding_box()
    return {"x": box["x"] + box["width"] / 2, "y": box["y"] + box["height"] / 2}


def hours_by_week(rows: list[model.ClusterRecord], user: str) -> dict[str, float]:
    """A member's cluster hours per week (Monday as a date), from the records."""
    out: dict[str, float] = {}
    for r in rows:
        if r.user == user:
            week = time.strftime("%Y-%m-%d", time.gmtime(monday(r.started_at)))
            end = r.stopped_at or r.last_seen_at
            out[week] = out.get(week, 0.0) + (end - r.started_at) / 3600
    return out


def clusters_by_week(rows: list[model.ClusterRecord], user: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        if r.user == user:
            week = time.strftime("%Y-%m-%d", time.gmtime(monday(r.started_at)))
            out[week] = out.get(week, 0) + 1
    return out


SELECTED = "#usage-chart button.cell.sel"
IDLE_GREY = "rgb(236, 238, 242)"
RED = "rgb(214, 39, 40)"


def test_heat_map_reads_at_100_members(site: dict[str, Any], open_page: Any) -> None:
    weeks = mondays(site["now"])
    top = ranking(site["rows"])
    idle = time.strftime("%Y-%m-%d", time.gmtime(monday(site["now"]) - (IDLE_WEEK + 1) * WEEK))
    for size in SIZES:
        page = open_page(*SIZES[size])
        scripts: list[str] = []
        page.on(
            "request",
            lambda r, seen=scripts: seen.append(r.url) if r.resource_type == "script" else None,
        )
        page.goto(site["base"] + "/?days=0")
        ready(page)
        assert not any("plotly" in url for url in scripts), scripts
        assert page.locator(".heat-xtitle").inner_text() == "week (Monday, UTC)"
        assert page.locator(".heat-ytitle").inner_text() == "member"
        assert page.locator(".heat-scale-title").inner_text() == "cluster hours (h)"
        # every week of the 26 on the axis, idle ones too, as dates, each under its column
        ticks = page.locator("#usage-chart tfoot th.heat-xtick")
        assert ticks.all_text_contents() == weeks
        first_tick, first_cell = ticks.first.bounding_box(), cell(page, 0, 0).bounding_box()
        assert abs(first_tick["x"] - first_cell["x"]) < 2
        labels = page.evaluate(TOP_TO_BOTTOM, "#usage-chart tbody th.heat-ytick")
        assert labels == [*top[:15], "others (85 members)"]
        # each of the top member's cells reads its hours from the records; idle weeks grey
        hours = hours_by_week(site["rows"], top[0])
        clusters = clusters_by_week(site["rows"], top[0])
        for col, week in enumerate(weeks):
            button = cell(page, 0, col)
            n = clusters.get(week, 0)
            said = (
                f"{value_text(hours.get(week, 0.0), 'hours')}, {n} cluster{'' if n == 1 else 's'}"
            )
            assert button.get_attribute("aria-label") == f"{top[0]}, week of {week}: {said}"
            if week not in hours:
                assert button.evaluate("b => getComputedStyle(b).backgroundColor") == IDLE_GREY
        nth = weeks.index(idle) + 2  # after the member's header cell
        idle_col = page.locator(f"#usage-chart tbody td:nth-child({nth}) button.cell")
        assert idle_col.count() == 16
        colours = idle_col.evaluate_all("bs => bs.map(b => getComputedStyle(b).backgroundColor)")
        assert set(colours) == {IDLE_GREY}
        # the scale ends at the largest member cell, which takes the darkest blue
        largest = max(max(hours_by_week(site["rows"], u).values()) for u in top[:15])
        ends = [value_text(0.0, "hours"), value_text(largest, "hours")]
        assert page.locator(".heat-end").all_inner_texts() == ends
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        # the axis title stays in view whatever the box's sideways scroll
        title = page.locator(".heat-xtitle").bounding_box()
        assert title["x"] >= 0 and title["x"] + title["width"] <= SIZES[size][0]
        shot(page, f"account-{size}")
        # the cost figure: the server draws it, its unit in the scale's title
        with page.expect_navigation():
            page.select_option("#usage-metric", "cost")
        ready(page)
        assert state(page)["metric"] == "cost"
        assert page.locator(".heat-scale-title").inner_text() == "cost (USD)"
        assert page.locator("#usage-metric").input_value() == "cost"


def test_a_cell_filters_the_listing_and_the_url_keeps_it(site: dict[str, Any], page: Any) -> None:
    page.goto(site["base"] + "/?days=0")
    ready(page)
    weeks = mondays(site["now"])
    col = weeks.index(time.strftime("%Y-%m-%d", time.gmtime(monday(site["now"]) - 2 * WEEK)))
    # user-001 ran a cluster in the week w=1 (two weeks before this one)
    target = cell(page, ranking(site["rows"]).index("user-001"), col)
    at = centre(target)
    page.mouse.click(at["x"], at["y"])
    page.wait_for_function("() => new URL(location).searchParams.get('user') === 'user-001'")
    assert state(page)["week"] == weeks[col]
    ready(page)
    pager_reads(page, f"1{DASH}1 ", start=True)
    assert column(page, 1) == ["user-001"]
    assert column(page, 3)[0].startswith(
        time.strftime("%Y-%m-%d", time.gmtime(monday(site["now"]) - 2 * WEEK + 86400))
    )
    # the cell is outlined in red, the filter says what it keeps
    assert page.locator(SELECTED).count() == 1
    assert target.get_attribute("aria-pressed") == "true"
    assert target.evaluate("b => getComputedStyle(b).outlineColor") == RED
    assert page.locator("#listing-filter").inner_text() == f"user-001 · week of {weeks[col]}"
    shot(page, "account-selected-wide")

    page.reload()
    ready(page)
    assert column(page, 1) == ["user-001"]
    assert page.locator(SELECTED).count() == 1
    assert target.get_attribute("aria-pressed") == "true"
    assert page.locator("#filter-user").input_value() == "user-001"

    page.go_back()  # to the page as first loaded
    page.wait_for_function("() => !new URL(location).searchParams.has('user')")
    ready(page)
    pager_reads(page, f"1{DASH}50 of", start=True)
    page.wait_for_function(f"() => !document.querySelector('{SELECTED}')")
    page.go_forward()
    page.wait_for_function("() => new URL(location).searchParams.get('user') === 'user-001'")
    pager_reads(page, f"1{DASH}1 ", start=True)
    assert page.locator(SELECTED).count() == 1

    # a member typed in the filter, the week chip cleared: their whole row is outlined
    page.fill("#filter-user", "user-050")
    page.wait_for_function("() => new URL(location).searchParams.get('user') === 'user-050'")
    page.click("#filter-week")
    page.wait_for_function("() => !new URL(location).searchParams.has('week')")
    others = page.locator("#usage-chart tbody tr[data-others] button.cell.sel")
    assert others.count() == len(weeks)  # user-050 is among the others
    assert page.locator(SELECTED).count() == len(weeks)

    # double-click clears the selection
    page.goto(site["base"] + f"/?days=0&user=user-001&week={weeks[col]}")
    ready(page)
    assert page.locator(SELECTED).count() == 1
    at = centre(cell(page, ranking(site["rows"]).index("user-001"), col))
    page.mouse.dblclick(at["x"], at["y"])
    page.wait_for_function("() => !new URL(location).searchParams.has('user')")
    pager_reads(page, f"1{DASH}50 of", start=True)
    assert page.locator(SELECTED).count() == 0


def test_range_selector_agrees_with_the_numbers_after_back(site: dict[str, Any], page: Any) -> None:
    page.goto(site["base"] + "/?days=0")
    everything = page.locator('[data-stat="clusters"]').inner_text()
    assert everything == f"{len(site['rows']):,}"
    page.select_option("#range-days", "7")
    page.wait_for_url("**/?days=7")
    week = [r for r in site["rows"] if r.started_at >= site["now"] - 7 * 86400]
    assert page.locator('[data-stat="clusters"]').inner_text() == f"{len(week):,}" != everything
    page.go_back()
    page.wait_for_function("() => new URL(location).searchParams.get('days') === '0'")
    assert page.locator("#range-days").input_value() == "0"
    assert page.locator('[data-stat="clusters"]').inner_text() == everything
    # one basis for the two accounts priced by the same rates
    basis = page.locator("#cost-basis .rates").all_inner_texts()
    assert len(basis) == 1 and "default, research" in basis[0], basis


def test_search_sort_and_pages(site: dict[str, Any], page: Any) -> None:
    rows = site["rows"]
    page.goto(site["base"] + "/?days=0")
    ready(page)
    assert page.locator("#page-info").inner_text() == f"1{DASH}50 of {len(rows):,}"
    # the running cluster is first (newest) and says so
    assert (
        page.locator("#cluster-listing tbody tr").first.locator(".badge.running").inner_text()
        == "running"
    )

    page.click("#filter-q")
    page.keyboard.type("nightly")
    page.wait_for_function("() => new URL(location).searchParams.get('q') === 'nightly'")
    nightly = [r for r in rows if "nightly" in r.name]
    page.wait_for_function(
        "(t) => document.getElementById('page-info').textContent.endsWith(t)",
        arg=f"of {len(nightly)}",
    )
    assert all("nightly" in name for name in column(page, 2))

    page.click("#cluster-listing th[data-key='tasks'] button")
    page.wait_for_function("() => new URL(location).searchParams.get('sort') === 'tasks'")
    ready(page)
    page.wait_for_function(
        "() => [...document.querySelectorAll('#cluster-listing tbody tr td:nth-child(8)')]"
        ".map((td) => +td.textContent.replace(/,/g, '')).every((v, i, a) => !i || a[i - 1] >= v)"
    )
    tasks = [int(t.replace(",", "")) for t in column(page, 8)]
    assert tasks == sorted((r.tasks_executed for r in nightly), reverse=True)[:50]
    assert (
        page.locator("#cluster-listing th[data-key='tasks']").get_attribute("aria-sort")
        == "descending"
    )

    # the keyboard: a header sorts with Enter, a filter toggles with Space
    page.locator("#cluster-listing th[data-key='workers'] button").focus()
    page.keyboard.press("Enter")
    page.wait_for_function("() => new URL(location).searchParams.get('sort') === 'workers'")
    page.locator("#filter-errors").focus()
    page.keyboard.press("Space")
    page.wait_for_function("() => new URL(location).searchParams.get('errors') === '1'")
    erred = [r for r in nightly if r.tasks_erred]
    page.wait_for_function(
        "(t) => document.getElementById('page-info').textContent.endsWith(t)",
        arg=f"of {len(erred)}",
    )
    assert all(int(t) > 0 for t in column(page, 9))

    page.click("#filter-clear")
    page.wait_for_function("() => !new URL(location).searchParams.has('q')")
    page.click("#page-next")
    page.wait_for_function("() => new URL(location).searchParams.get('offset') === '50'")
    pager_reads(page, f"51{DASH}100 of {len(rows):,}")
    page.click("#page-next")
    pager_reads(page, f"101{DASH}150 of {len(rows):,}")
    workers = [int(t) for t in column(page, 6)]
    assert workers == sorted(workers, reverse=True)
    shot(page, "account-paged-wide")
    page.reload()
    ready(page)
    assert page.locator("#page-info").inner_text() == f"101{DASH}150 of {len(rows):,}"
    page.go_back()
    pager_reads(page, f"51{DASH}100 of {len(rows):,}")
    assert state(page)["offset"] == "50" and state(page)["sort"] == "workers"


def test_the_keyboard_reaches_every_cell(site: dict[str, Any], page: Any) -> None:
    page.goto(site["base"] + "/?days=0&metric=compute_hours")
    ready(page)
    assert page.locator("#usage-metric").input_value() == "compute_hours"
    assert page.locator(".heat-scale-title").inner_text() == "compute-hours (core-hours)"
    weeks = mondays(site["now"])
    top = ranking(site["rows"])[0]
    first = min(r.started_at for r in site["rows"] if r.user == top)
    week = time.strftime("%Y-%m-%d", time.gmtime(monday(first)))
    col = weeks.index(week)
    # Tab from the figure's selector lands on the map's first cell; arrows move
    page.locator("#usage-metric").focus()
    page.keyboard.press("Tab")
    focused = "() => document.activeElement.getAttribute('aria-label')"
    assert page.evaluate(focused).startswith(f"{top}, week of {weeks[0]}: ")
    for _ in range(col):
        page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    assert page.evaluate(focused).startswith(f"{top}, week of {week}: ")
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => new URL(location).searchParams.get('user') === '{top}'")
    assert state(page)["week"] == week
    button = cell(page, 0, col)
    assert button.get_attribute("aria-pressed") == "true"
    page.wait_for_function(
        f"() => document.getElementById('listing-filter').textContent.startsWith('{top}')"
    )
    ready(page)  # the filter's words come at once, its rows when the listing has loaded
    assert set(column(page, 1)) == {top}
    shot(page, "account-keyboard-wide")
    # Escape clears
    button.focus()
    page.keyboard.press("Escape")
    page.wait_for_function("() => !new URL(location).searchParams.has('user')")
    assert page.locator(SELECTED).count() == 0
