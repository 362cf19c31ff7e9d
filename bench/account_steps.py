"""The account page's work step by step, on a seeded store (``bench/seed.py``), in this
process: the weekly usage query, pricing, the view, the heat map as drawn, the listing,
the statistics, the template and the JSON. Prints the median and the fastest of N runs
of each step, and the load average at the start (other work on the machine shows).

    python bench/account_steps.py sqlite:////tmp/dash.db [--runs 20]
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from daskscope.analysis.usage import member_usage
from daskscope.catalogue import figure
from daskscope.pricing import cost_rates
from daskscope.store import open_store
from daskscope.store.analytics import MONDAY, WEEK, weekly_usage
from daskscope.views import to_json
from daskscope.views.account import (
    account_view,
    statistics_view,
    time_range,
    usage_map,
    usage_view,
)
from daskscope.views.listing import ListingQuery, cluster_listing
from daskscope.web.render import environment
from daskscope.web.routes.common import label
from daskscope.web.usage_heat import heat_map


def timed(name: str, step: Callable[[], Any], runs: int) -> Any:
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        result = step()
        took.append((time.perf_counter() - started) * 1000)
    print(f"{name:<34} {statistics.median(took):8.1f} {min(took):8.1f}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    store = open_store(args.url)
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    print(f"{'step':<34} {'median':>8} {'fastest':>8}  (ms)")
    this_week = (time.time() - MONDAY) // WEEK
    since = MONDAY + (this_week - 25) * WEEK
    n = args.runs
    rows = timed("usage query (SQL, rows)", lambda: weekly_usage(store, since=since), n)
    timed(f"pricing {len(rows):,} member-weeks", lambda: member_usage(rows, cost_rates), n)
    usage = timed("usage view (the two above)", lambda: usage_view(store, 26), n)
    drawn = timed("heat map rows (top 15 + others)", lambda: usage_map(usage), n)
    fig = figure("member.cluster_hours")
    heat = timed("heat map cells (colours, text)", lambda: heat_map(drawn, fig, "USD"), n)
    timed("statistics (90 days)", lambda: statistics_view(store, time_range(90)), n)
    timed("listing (newest 50)", lambda: cluster_listing(store, ListingQuery(limit=50)), n)
    view = timed("account view (all of it)", lambda: account_view(store, time_range(90), 26), n)
    request = Request({"type": "http", "path": "/", "headers": [], "query_string": b""})
    template = environment().get_template("account.html")
    script_data = {"range": {"days": 90}, "listing": {"total": view.listing.total}, "usage": {}}

    def render() -> str:
        return template.render(
            request=request, nav="", viewer=None, title="Account", data=view, heat=heat,
            script_data=script_data, figures={}, label=label, page_size=50,
        )  # fmt: skip

    html = timed("page template", render, n).encode()
    timed(f"gzip the page ({len(html):,} B)", lambda: gzip.compress(html, 6), n)
    body = timed("account JSON", lambda: to_json(view), n)
    print(f"page {len(html):,} B ({len(gzip.compress(html, 6)):,} gzip'd); JSON {len(body):,} B")


if __name__ == "__main__":
    main()
