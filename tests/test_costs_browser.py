"""The costs page in a real browser (Debian's Chromium through Playwright), read as a
person reads it: the table per member and per tag, and each bar chart's axis titles and
bars, against costs worked out here by hand from the stored figures (core-hours and
GiB-hours at the configured prices, times each span's share of its cluster's core
time). Screenshots at 1440x900 and 390x844 go to test-artifacts/screenshots."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dask
import pytest

from browser import SIZES, needs_chromium, new_page, screenshot
from daskscope.format import duration_text, money_text
from daskscope.store import open_store, write_records
from factories import GIB, make_cluster, make_computation, make_group, make_span
from test_compare_browser import no_page_overflow, texts
from webutil import serving

pytestmark = needs_chromium

from daskscope.web import create_app  # noqa: E402

PRICES = {"default": None, "atlas": {"per-core-hour": 0.5, "per-gib-hour": 0.01}}
DAY = 86400.0
START = 1_793_491_200.0  # 2026-11-01 00:00 UTC
#: member, day of the month, seconds of "data-load" task time, of "train"
RUNS = [("alice", 2, 5400.0, 900.0), ("bob", 5, 1800.0, 3600.0), ("alice", 9, 3600.0, 0.0),
        ("carol", 20, 7200.0, 1200.0)]  # fmt: skip


def by_hand(cluster: Any, seconds: float) -> float:
    """A span's cost worked out from the cluster's figures and the prices."""
    prices = PRICES["atlas"]
    assert prices is not None
    whole = cluster.core_seconds / 3600 * prices["per-core-hour"] + (
        cluster.memory_limit_byte_seconds / GIB / 3600 * prices["per-gib-hour"]
    )
    return whole * seconds / cluster.core_seconds


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('costs-browser') / 'store.db'}"
    records: list[Any] = []
    expected: dict[str, dict[str, float]] = {"member": {}, "tag": {}}
    for i, (user, day, load, train) in enumerate(RUNS):
        start = START + (day - 1) * DAY
        cluster = make_cluster(f"nightly {i}", start=start, user=user)
        records.append(cluster)
        records.append(make_span(cluster, "load", name=["data-load"], duration_s=load))
        if train:
            records.append(make_span(cluster, "train", name=["train"], duration_s=train))
            expected["tag"]["train"] = expected["tag"].get("train", 0.0) + by_hand(cluster, train)
        cost = by_hand(cluster, load)
        expected["member"][user] = expected["member"].get(user, 0.0) + cost
        expected["tag"]["data-load"] = expected["tag"].get("data-load", 0.0) + cost
    # a cluster with two computations of known task time, for the cluster page's column
    mine = make_cluster("two computations", start=START, user="dora")
    comps = [make_computation(mine, i, started_at=START + 10 * i) for i in range(2)]
    records += [mine, *comps]
    for i, seconds in enumerate((3000.0, 600.0)):
        for g in range(2):  # two groups each, half the time each
            group = make_group(mine, f"work{i}-{g}", computation_id=comps[i].id,
                               duration_s=seconds / 2, started_at=START + 10 * i)  # fmt: skip
            records.append(group)
        expected[comps[i].id] = {"cost": by_hand(mine, seconds)}
    with open_store(url) as store:
        write_records(store, records)
    with dask.config.set({"daskscope.cost": PRICES}):
        app = create_app(url)
        with serving(app) as base:
            yield {"base": base, "expected": expected, "cluster": mine, "comps": comps}
        app.state.store.close()


@pytest.fixture(params=list(SIZES))
def page(request: pytest.FixtureRequest, browser: Any) -> Iterator[Any]:
    context, opened, errors = new_page(browser, *SIZES[request.param])
    opened.size_name = request.param
    yield opened
    context.close()
    assert not errors, errors


def test_cost_of_a_tag_this_month(served: dict[str, Any], page: Any) -> None:
    # the first ten days of November: alice twice, bob once; carol's run is after
    page.goto(f"{served['base']}/costs?tag=data-load&since=2026-11-01&until=2026-11-10")
    assert page.locator("h1").inner_text() == "Cost of span tag “data-load”"
    table = page.locator("#costs-member")
    assert texts(table.locator("thead th")) == ["Member", "Spans", "Clusters", "Task time", "Cost"]
    rows = [texts(r.locator("td")) for r in table.locator("tbody tr").all()]
    alice = served["expected"]["member"]["alice"]
    bob = served["expected"]["member"]["bob"]
    assert rows == [
        ["alice", "2", "2", duration_text(5400.0 + 3600.0), money_text(alice)],
        ["bob", "1", "1", duration_text(1800.0), money_text(bob)],
    ]
    total = page.locator("#costs-total").inner_text()
    assert money_text(alice + bob) in total and "3 spans" in total
    for by, y_title, names in (
        ("member", "member", ["alice", "bob"]),
        ("tag", "span tag", ["data-load"]),
    ):
        plot = page.locator(f"#plot-{by}")
        page.wait_for_function(f"document.querySelector('#plot-{by}').dataset.ready === '1'")
        assert plot.locator(".g-xtitle").text_content() == "attributed cost (USD)"
        assert plot.locator(".g-ytitle").text_content() == y_title
        ticks = [t.strip() for t in plot.locator(".ytick text").all_text_contents()]
        assert sorted(ticks) == names
        assert plot.locator(".bars .point").count() == len(names)
    assert page.locator("#costs-range").inner_text() == (
        "Spans enqueued on or after 2026-11-01 00:00:00 and before 2026-11-11 00:00:00 (UTC)."
    )
    member_table = page.locator("#costs-member")
    assert member_table.evaluate("t => t.scrollWidth <= t.parentElement.clientWidth"), "cut off"
    no_page_overflow(page)
    width = page.viewport_size["width"]
    screenshot(page, f"costs-{width}")


def test_every_tag_and_a_bad_day(served: dict[str, Any], page: Any) -> None:
    page.goto(f"{served['base']}/costs")
    rows = [texts(r.locator("td")) for r in page.locator("#costs-tag tbody tr").all()]
    tags = served["expected"]["tag"]
    assert [(r[0], r[4]) for r in rows] == [
        ("data-load", money_text(tags["data-load"])), ("train", money_text(tags["train"]))
    ]  # fmt: skip
    page.goto(f"{served['base']}/costs?since=yesterday")
    assert "not a date" in page.locator("main").inner_text()


def test_cluster_page_computation_costs(served: dict[str, Any], page: Any) -> None:
    page.goto(f"{served['base']}/clusters/{served['cluster'].id}")
    page.get_by_role("tab", name="Computations").click()
    head = texts(page.locator("#computations thead th"))
    assert head[head.index("Groups") + 1] == "Cost"
    for comp in served["comps"]:
        cell = page.locator(f'tr.computation[data-id="{comp.id}"] td[data-label="Cost"]')
        assert cell.inner_text() == money_text(served["expected"][comp.id]["cost"])
