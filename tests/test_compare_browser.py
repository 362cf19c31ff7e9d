"""The compare, history and regressions pages in a real browser (Debian's Chromium
through Playwright), read as a person reads them, over real runs of one in-process
cluster: the span "steady" 11 times at one speed, the span "load" 8 times at that speed
then 3 times slowed. Screenshots at 1440x900 and 390x844 go to $DASKSCOPE_SCREENSHOTS."""

# ruff: noqa: RUF001 (the page writes ratios with a multiplication sign)

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from distributed import Client, LocalCluster

import daskscope
from browser import SIZES, needs_chromium, screenshot
from daskscope.store import open_store
from daskscope.views.compare import compare_view
from daskscope.views.history import history_view
from test_regressions import FAST, RUNS, SLOW, SLOWED, heartbeat, run_in_span
from webutil import serving

pytestmark = needs_chromium

from daskscope.web import create_app  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('compare-browser') / 'store.db'}"
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as lc,
        Client(lc) as client,
    ):
        cluster_id = daskscope.register(client, database=url, name="browser-test")
        for run in range(RUNS):
            run_in_span(client, "steady", FAST)
            run_in_span(client, "load", SLOW if run >= RUNS - SLOWED else FAST)
        client.run(heartbeat)
        assert daskscope.flush(client)["write_failures"] == 0
        # Dask's own task time of each tag's spans: the ground truth of the ratio
        spans = lc.scheduler.extensions["spans"].spans.values()
        dask_seconds = {
            tag: sum(s.duration for s in spans if s.name == (tag,)) for tag in ("steady", "load")
        }
    app = create_app(url)
    with serving(app) as base:
        yield {"url": url, "base": base, "cluster_id": cluster_id, "dask_seconds": dask_seconds}
    app.state.store.close()


@pytest.fixture(params=list(SIZES))
def page(request: pytest.FixtureRequest, open_page: Any) -> Any:
    opened = open_page(*SIZES[request.param])
    opened.size_name = request.param
    return opened


def shot(page: Any, name: str) -> None:
    screenshot(page, f"{name}-{page.size_name}")


def texts(locator: Any) -> list[str]:
    return [t.strip() for t in locator.all_inner_texts()]


def drawn(locator: Any) -> list[str]:
    return [t.strip() for t in locator.all_text_contents()]


def no_page_overflow(page: Any) -> None:
    wide, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert wide <= inner, f"the page scrolls sideways: {wide} > {inner}"


def test_compare_page(served: dict[str, Any], page: Any) -> None:
    cid = served["cluster_id"]
    a, b = f"{cid[:8]}/span:steady", f"{cid}/span:load"
    page.goto(f"{served['base']}/compare?{urlencode({'a': a, 'b': b})}")
    with open_store(served["url"]) as store:
        view = compare_view(store, a, b)
    assert page.locator("h1").inner_text() == "Compare spans"
    table = page.locator("#compare-figures")
    assert texts(table.locator("thead th")) == ["Figure", "A", "B", "B − A", "B ÷ A"]
    rows = {r.id: r for r in view.figures}
    task_time = table.locator('tr[data-figure="span.duration_s"]')
    assert texts(task_time.locator("th")) == ["Task time"]
    cells = texts(task_time.locator("td"))
    row = rows["span.duration_s"]
    # task time has a direction: "load" (slowed) is worse than "steady"
    assert row.verdict == "worse"
    assert cells == [row.a_text, row.b_text, f"{row.difference_text} worse", row.ratio_text]
    # the ratio of task time, as Dask's scheduler summed it over each tag's spans (about
    # (8·FAST + 3·SLOW) / (11·FAST), unless the machine stalled a task)
    expected = served["dask_seconds"]["load"] / served["dask_seconds"]["steady"]
    assert float(cells[3].lstrip("×")) == pytest.approx(expected, abs=0.005)
    # wall time (the first start to the last stop of each tag's interleaved spans, the
    # same stretch give or take the slowed runs) reads as the view judged it
    wall = table.locator('tr[data-figure="span.wall_s"] td').nth(2)
    judged = rows["span.wall_s"].verdict
    assert judged in ("same", "worse") and judged in (wall.get_attribute("class") or "")
    assert ("worse" in wall.inner_text()) == (judged == "worse")
    assert "nap" in texts(page.locator("#compare-prefixes tbody th"))[0]
    # each prefix's compute seconds, judged as task time: "load" slowed, so worse
    fine = page.locator("#compare-fine-prefixes tbody tr").first
    assert texts(fine.locator("th")) == ["nap"]
    nap = next(r for r in view.prefixes if r.key == "nap")
    assert nap.verdict == "worse" and "worse" in (
        fine.locator("td").nth(2).get_attribute("class") or ""
    )
    assert page.locator("#compare-same").inner_text() == view.same[:1].upper() + view.same[1:] + "."
    assert texts(page.locator("#side-a a")) == [view.a.title]
    no_page_overflow(page)
    shot(page, "compare")


def test_history_chart(served: dict[str, Any], page: Any) -> None:
    page.goto(f"{served['base']}/history?kind=span&name=load")
    with open_store(served["url"]) as store:
        view = history_view(store, "span", "load")
    assert "span.wall_s" in view.regressed
    wall = next(s for s in view.series if s.id == "span.wall_s")
    assert wall.check is not None
    chart = page.locator('figure[data-figure="span.wall_s"]')
    plot = chart.locator(".history-plot")
    plot.locator(".main-svg").first.wait_for()
    # functions, not expressions: Playwright evaluates an expression that is not true at
    # once with eval(), which the page's CSP refuses
    page.wait_for_function("() => document.querySelectorAll('.history-plot[data-ready]')"
                           f".length === {len(view.series)}")  # fmt: skip
    assert drawn(plot.locator(".g-xtitle")) == ["run start (UTC)"]
    assert drawn(plot.locator(".g-ytitle")) == ["wall time (s)"]
    legend = drawn(plot.locator(".legendtext"))
    assert legend == ["wall time", f"threshold {wall.check.threshold_text}", "regression"]
    # the flagged points: three red crosses, at the last three runs
    crosses = plot.locator(".scatterlayer .trace").nth(2).locator(".point")
    assert crosses.count() == SLOWED
    assert "Regressed:" in page.locator("#history-regressed").inner_text()
    assert wall.check.summary in chart.locator(".check").inner_text()
    # the runs table marks the same runs
    marked = page.locator("#history-runs td.worse")
    assert marked.count() >= SLOWED
    steady = chart.locator(".check.regressed")
    assert steady.count() == 1
    # the task time of the span's one prefix, charted and checked as well
    nap = page.locator('figure[data-figure="prefix.duration_s:nap"]')
    assert texts(nap.locator("h3")) == ["Task time of nap (lower is better)"]
    assert nap.locator(".check.regressed").count() == 1
    no_page_overflow(page)
    shot(page, "history")


#: What the slowed span "load" regressed in: its task time, its wall time and the task
#: time of its one prefix
LOAD_REGRESSED = ["task time", "wall time", "task time of nap"]


def test_regressions_page(served: dict[str, Any], page: Any) -> None:
    page.goto(f"{served['base']}/regressions")
    rows = page.locator("#regressions tbody tr")
    assert rows.count() == len(LOAD_REGRESSED)
    cells = [texts(rows.nth(i).locator("td"))[:3] for i in range(rows.count())]
    assert cells == [["span", "load", label] for label in LOAD_REGRESSED]
    assert texts(page.locator("#regressions thead th"))[-1] == "Before (median, σ)"
    assert "Regressions" in texts(page.locator("header nav a"))
    no_page_overflow(page)
    shot(page, "regressions")
    rows.first.locator("a").click()
    page.wait_for_url("**/history?kind=span&name=load")
    assert page.locator("h1").inner_text() == "History of span “load”"


def test_account_page_regressions_box(served: dict[str, Any], page: Any) -> None:
    page.goto(f"{served['base']}/")
    box = page.locator("#regressions-box")
    summary = box.locator("#regressions-summary")
    page.wait_for_function(
        "() => !document.getElementById('regressions-summary').textContent.startsWith('Checking')"
    )
    assert summary.inner_text().startswith(f"{len(LOAD_REGRESSED)} figures regressed (")
    found = box.locator("#regressions-found li")
    assert found.count() == len(LOAD_REGRESSED)
    for i, label in enumerate(LOAD_REGRESSED):
        assert found.nth(i).inner_text().startswith(f"span “load”: {label} ")
        assert "all above" in found.nth(i).inner_text()
    assert found.first.locator("a").get_attribute("href") == "/history?kind=span&name=load"
    box.scroll_into_view_if_needed()
    shot(page, "account-regressions")
