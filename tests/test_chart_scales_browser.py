"""Scales a person can read (issue 26, points 5 and 9), in Chromium at 1440x900 and
390x844, read from what plotly drew on stored records: worker memory scaled to the
memory used with the limit as a line (or, far above it, written at the top); the
history of one run with its time axis in minutes, not microseconds, and no tick text
twice (0.00012 USD); the costs of 100 members in a chart of bounded height with its axis
above the bars and the rest summed; a history of 250 runs that says what it leaves out
and pages back. Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import dask
import pytest

from browser import SCREENSHOTS, SIZES, needs_chromium, screenshot
from daskscope.format import bytes_text
from daskscope.store import open_store, write_records
from factories import GIB, T0, make_cluster, make_span, make_worker_sample
from webutil import serving

pytestmark = needs_chromium

from daskscope.web import create_app  # noqa: E402

MIB = 2**20
#: one run of "solo" costs 16.0001 core-hours x this: 0.00012 USD
PRICES = {
    "default": None,
    "tiny": {"per-core-hour": 0.0000075, "per-gib-hour": 0.0},
    "acme": {"per-core-hour": 0.5, "per-gib-hour": 0.0},
}
MEMBERS = 100
NIGHTLY = 250


def _memory_cluster(name: str, start: float, limit: int, used: int) -> list[Any]:
    """Two workers sampled 20 times, ``used`` bytes at the peak, against ``limit``."""
    cluster = make_cluster(name, start=start, scheduler_address=f"tcp://10.1.0.{len(name)}:1")
    samples = [
        make_worker_sample(
            cluster,
            f"tcp://10.1.0.{w}:4000",
            start + 10 * i,
            memory_limit=limit,
            managed_bytes=(used - 50 * MIB) * (i + 1) // 20,
            unmanaged_bytes=50 * MIB,
            spilled_bytes=0,
        )
        for w in (1, 2)
        for i in range(20)
    ]
    return [cluster, *samples]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('chart-scales') / 'store.db'}"
    far = _memory_cluster("far below", T0, 23 * GIB, 250 * MIB)
    near = _memory_cluster("near the limit", T0 + 10, GIB, 800 * MIB)
    records: list[Any] = [*far, *near]
    records.append(make_cluster("solo", start=T0 - 86400, account="tiny"))  # its own id
    records += [make_cluster("nightly", start=T0 + 3600 * i) for i in range(NIGHTLY)]
    for i in range(MEMBERS):
        member = make_cluster(
            "team", start=T0 + 60 * i, user=f"member{i:03}", account="acme",
            scheduler_address="tcp://10.2.0.1:1",
        )  # fmt: skip
        records += [member, make_span(member, "root", name=["work"], duration_s=60.0 * (i + 1))]
    with open_store(url) as store:
        write_records(store, records)
    with dask.config.set({"daskscope.cost": PRICES}):
        app = create_app(url)
        with serving(app) as base:
            yield {"base": base, "far": far[0].id, "near": near[0].id}
        app.state.store.close()


@pytest.fixture(params=list(SIZES))
def page(request: pytest.FixtureRequest, open_page: Any) -> Any:
    opened = open_page(*SIZES[request.param])
    opened.size_name = request.param
    return opened


def _texts(page: Any, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_text_contents()]


_AXIS = """(sel) => { const gd = document.querySelector(sel);
  return {range: gd._fullLayout.yaxis.range,
          notes: (gd.layout.annotations || []).map((a) => a.text),
          stacked: gd.data.filter((t) => t.stackgroup).map((t) => t.y),
          limit: gd.data.find((t) => t.name === "memory limit").y}; }"""


#: the memory charts, all workers' first, each given an id to be read by
_NAMED = """() => [...document.querySelectorAll(
    "#workers-charts [data-chart='memory-total'], #workers-charts .dsw-small")]
  .map((gd, i) => (gd.id = gd.id || `memory-${i}`))"""


def _peak(stacked: list[list[float]]) -> float:
    return max(sum(v or 0 for v in values) for values in zip(*stacked, strict=True))


def test_memory_scaled_to_the_memory_used(site: dict[str, Any], page: Any) -> None:
    # 250 MiB used of 23 GiB: the axis reads MiB, the used memory fills the chart, the
    # limit is written at the top
    page.goto(f"{site['base']}/clusters/{site['far']}?tab=workers")
    page.wait_for_selector("#workers-charts[data-ready='1']")
    ids = page.evaluate(_NAMED)
    assert len(ids) == 3  # all workers, then each
    for n, chart in enumerate(ids):
        limit = 2 * 23 * GIB if n == 0 else 23 * GIB
        axis = page.evaluate(_AXIS, f"#{chart}")
        peak = _peak(axis["stacked"])
        assert peak <= axis["range"][1] <= 2 * peak  # the memory used fills the chart
        assert max(axis["limit"]) == limit  # the limit, as stored
        written = [f"memory limit {bytes_text(limit)} ↑ above the scale"]
        assert axis["notes"] == written and _texts(page, f"#{chart} .annotation-text") == written
    ticks = _texts(page, "#workers-charts [data-chart='memory-total'] .ytick text")
    assert ticks and all(t.endswith("MiB") or t == "0 B" for t in ticks), ticks
    page.locator("#panel-workers").screenshot(
        path=str(SCREENSHOTS / f"memory-scale-far-{page.size_name}.png")
    )

    # 800 MiB of 1 GiB: the limit is in the chart, drawn as its dashed line
    page.goto(f"{site['base']}/clusters/{site['near']}?tab=workers")
    page.wait_for_selector("#workers-charts[data-ready='1']")
    total, first, _ = page.evaluate(_NAMED)
    axis = page.evaluate(_AXIS, f"#{total}")
    assert axis["range"][1] >= max(axis["limit"]) == 2 * GIB and axis["notes"] == []
    worker = page.evaluate(_AXIS, f"#{first}")
    assert worker["range"][1] >= GIB and worker["notes"] == []
    assert "1 GiB" in _texts(page, f"#{first} .ytick text")
    assert not _texts(page, f"#{total} .annotation-text")
    page.locator("#panel-workers").screenshot(
        path=str(SCREENSHOTS / f"memory-scale-near-{page.size_name}.png")
    )


_SUBSECOND = re.compile(r"\d:\d\d:\d\d\.\d|\bms\b|µs")


def test_history_of_one_run(site: dict[str, Any], page: Any) -> None:
    page.goto(f"{site['base']}/history?kind=cluster&name=solo")
    plots = page.locator(".history-plot")
    assert plots.count() > 3
    page.wait_for_function(
        "() => [...document.querySelectorAll('.history-plot')].every((d) => d.dataset.ready)"
    )
    for i in range(plots.count()):
        plot = plots.nth(i)
        y = [t.strip() for t in plot.locator(".ytick text").all_text_contents()]
        assert len(y) >= 2 and len(set(y)) == len(y), y  # no tick text twice
        assert all(re.search("[1-9]", t) for t in y[1:]), y  # none but 0 reads as 0
        x = [t.strip() for t in plot.locator(".xtick text").all_text_contents()]
        assert x and not any(_SUBSECOND.search(t) for t in x), x
        span = plot.evaluate(
            "(gd) => { const r = gd._fullLayout.xaxis.range.map((v) => new Date(v).getTime());"
            " return r[1] - r[0]; }"
        )
        assert span >= 3600 * 1000  # hours around the run, not a millisecond
    cost = page.locator(".history-chart[data-figure='cluster.cost.total'] .ytick text")
    assert [t.strip() for t in cost.all_text_contents()].count("0.0001 USD") == 1
    screenshot(page, f"history-one-run-{page.size_name}")


def test_costs_of_a_hundred_members(site: dict[str, Any], page: Any) -> None:
    page.goto(f"{site['base']}/costs")
    plot = page.locator("#plot-member")
    page.wait_for_function("document.querySelector('#plot-member').dataset.ready === '1'")
    assert page.locator("#costs-member tbody tr").count() == MEMBERS  # the table: all
    members = page.request.get(f"{site['base']}/api/v1/costs").json()["members"]
    assert len(members) == MEMBERS
    drawn = plot.evaluate(
        "(gd) => ({height: gd.getBoundingClientRect().height,"
        " bars: gd.data.flatMap((t) => t.y.map((y, i) => [y, t.x[i]]))})"
    )
    assert drawn["height"] <= 700  # not 2,860 px
    bars = dict(drawn["bars"])
    assert len(bars) == 21
    top = sorted(members, key=lambda m: -m["cost"])
    for m in top[:20]:
        assert bars[m["name"]] == pytest.approx(m["cost"])
    assert bars["80 other members"] == pytest.approx(sum(m["cost"] for m in top[20:]))
    # read top to bottom: the largest first, the rest last
    labels = plot.evaluate(
        "(gd) => [...gd.querySelectorAll('.ytick text')].sort((a, b) =>"
        " a.getBoundingClientRect().y - b.getBoundingClientRect().y).map((t) => t.textContent)"
    )
    assert labels[0] == top[0]["name"] and labels[-1] == "80 other members"
    # the cost axis above the bars, where the reader starts
    ticks = plot.evaluate(
        "(gd) => Math.max(...[...gd.querySelectorAll('.xtick text')]"
        ".map((t) => t.getBoundingClientRect().bottom))"
    )
    first_bar = plot.evaluate(
        "(gd) => Math.min(...[...gd.querySelectorAll('.bars .point path')]"
        ".map((p) => p.getBoundingClientRect().top))"
    )
    assert ticks <= first_bar
    assert plot.locator(".g-xtitle").text_content() == "attributed cost (USD)"
    note = page.locator("#h-member ~ .costs-rest").inner_text()
    assert note == (
        "The 20 costliest of 100 members drawn, the other 80 summed in one bar; "
        "the table lists each."
    )
    plot.screenshot(path=str(SCREENSHOTS / f"costs-hundred-members-{page.size_name}.png"))


def test_a_long_history_says_what_it_leaves_out_and_pages_back(
    site: dict[str, Any], open_page: Any
) -> None:
    page = open_page()
    page.goto(f"{site['base']}/history?kind=cluster&name=nightly")
    count = page.locator("#history-count")
    assert count.inner_text().startswith(f"200 of {NIGHTLY} runs")
    assert "50 older runs not shown." in count.inner_text()
    assert (
        page.locator("#history-range").inner_text()
        == f"runs 51 to {NIGHTLY} of {NIGHTLY}, oldest first"
    )
    points = "() => document.querySelector('.history-plot').data[0].x.length"
    page.wait_for_function("() => document.querySelector('.history-plot').dataset.ready")
    assert page.evaluate(points) == 200
    screenshot(page, "history-paged-newest")
    page.locator("#history-older").click()
    page.wait_for_url("**offset=200")
    page.wait_for_function("() => document.querySelector('.history-plot').dataset.ready")
    assert page.locator("#history-count").inner_text().startswith(f"50 of {NIGHTLY} runs")
    assert "200 newer runs not shown." in page.locator("#history-count").inner_text()
    assert page.evaluate(points) == 50
    assert page.locator("#history-older").count() == 0  # the oldest are shown
    rows = page.locator("#history-runs tbody tr")
    assert rows.count() == 50
    screenshot(page, "history-paged-oldest")
    page.locator("#history-newer").click()
    page.wait_for_url(re.compile(r"name=nightly$"))
    assert page.locator("#history-count").inner_text().startswith(f"200 of {NIGHTLY} runs")
    page.go_back()
    page.wait_for_url("**offset=200")
    assert page.locator("#history-count").inner_text().startswith(f"50 of {NIGHTLY} runs")
