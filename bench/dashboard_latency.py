"""Latency of every dashboard page's API calls (and the pages themselves) against a
seeded store (``bench/seed.py``), through the in-process ASGI client.

Prints p50/p95 per route in milliseconds and ends with one JSON line of the figures.

    python bench/dashboard_latency.py sqlite:////tmp/dash.db [--repeat 40] [--only account]

``--only TEXT`` keeps the routes whose name holds TEXT (``account`` is the account page's
routes: ``/``, ``/api/v1/account``, ``/api/v1/statistics``, ``/api/v1/usage``). On
PostgreSQL: ``python bench/postgres.py start`` gives a throwaway server's URL.

With ``--many-groups`` it measures instead the routes of the cluster that
``bench/seed.py --many-groups N`` added (its page and JSON, each computation's graph, the
paged task groups, and ``daskscope show --json``), with each response's size; and a
computation of 10,000 groups (issue 26): its page (searched and paged too), its
critical-path JSON and its graph (folded, opened, with the path), warm (each computation
asked for once before: views are kept while their data is unchanged) and " (cold)" (the
kept views emptied before each request), beside what the critical-path route did before
(the whole view worked out and encoded).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import json
import os
import random
import statistics
import time
from typing import Any

import httpx

from daskscope.model import stable_id
from daskscope.store import list_clusters
from daskscope.store.analytics import MONDAY, WEEK
from daskscope.views import memo
from daskscope.web import create_app


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def routes(app: Any, rng: random.Random, repeat: int) -> dict[str, list[str]]:
    """Route name -> concrete URLs, one per repetition (random clusters and weeks)."""
    store = app.state.store
    clusters = list_clusters(store, limit=None)
    picks = [rng.choice(clusters) for _ in range(repeat)]
    comps = []
    from daskscope.views import cluster_view

    for c in picks:
        view = cluster_view(store, c["id"])
        comps.append(rng.choice(view.computations).id if view.computations else "x")

    def week(c: dict[str, Any]) -> float:
        return MONDAY + int((c["started_at"] - MONDAY) // WEEK) * WEEK

    def day(c: dict[str, Any], days: int = 0) -> str:
        moment = dt.datetime.fromtimestamp(c["started_at"], dt.UTC) + dt.timedelta(days=days)
        return moment.date().isoformat()

    pairs = [rng.sample(clusters, 2) for _ in range(repeat)]

    return {
        "GET / (account page)": ["/?days=90"] * repeat,
        "GET /?metric=cost (account page)": ["/?days=90&metric=cost"] * repeat,
        "GET /api/v1/account": ["/api/v1/account?days=90"] * repeat,
        "GET /api/v1/statistics (account, all time)": ["/api/v1/statistics?days=0"] * repeat,
        "GET /api/v1/usage (account, 26 weeks)": ["/api/v1/usage?weeks=26"] * repeat,
        "GET /api/v1/clusters": ["/api/v1/clusters"] * repeat,
        "GET /api/v1/clusters?user&week_start": [
            f"/api/v1/clusters?user={c['user']}&week_start={week(c)}" for c in picks
        ],
        "GET /clusters/{id} (page)": [f"/clusters/{c['id']}" for c in picks],
        "GET /api/v1/clusters/{id}": [f"/api/v1/clusters/{c['id']}" for c in picks],
        "GET /api/v1/clusters/{id}/workers": [f"/api/v1/clusters/{c['id']}/workers" for c in picks],
        "GET .../computations/{c}/graph": [
            f"/api/v1/clusters/{c['id']}/computations/{k}/graph"
            for c, k in zip(picks, comps, strict=True)
        ],
        "GET /api/v1/clusters/{id}/profile": [f"/api/v1/clusters/{c['id']}/profile" for c in picks],
        "GET .../computations/{c}/critical-path": [
            f"/api/v1/clusters/{c['id']}/computations/{k}/critical-path"
            for c, k in zip(picks, comps, strict=True)
        ],
        "GET /clusters/{id}/computations/{c} (page)": [
            f"/clusters/{c['id']}/computations/{k}" for c, k in zip(picks, comps, strict=True)
        ],
        "GET /api/v1/clusters/{id}/advice": [f"/api/v1/clusters/{c['id']}/advice" for c in picks],
        "GET /api/v1/clusters/{id}/advice?computation": [
            f"/api/v1/clusters/{c['id']}/advice?computation={k}"
            for c, k in zip(picks, comps, strict=True)
        ],
        "GET /api/v1/clusters/{id}/metrics?tag": [
            f"/api/v1/clusters/{c['id']}/metrics?tag=data%20load" for c in picks
        ],
        "GET /api/v1/clusters/{id}/metrics?span": [
            # span 0 is the parent of the seeded cluster's other four
            f"/api/v1/clusters/{c['id']}/metrics?span={stable_id(c['id'], 'span', 0)}"
            for c in picks
        ],
        "GET /api/v1/clusters?q&sort=duration": [
            f"/api/v1/clusters?q={c['user']}&sort=duration&order=asc" for c in picks
        ],
        "GET /api/v1/clusters?errors&offset=5000": ["/api/v1/clusters?errors=true&offset=5000"]
        * repeat,
        "GET /api/v1/clusters?running": ["/api/v1/clusters?running=true"] * repeat,
        "GET /api/v1/reports": ["/api/v1/reports"] * repeat,
        "GET /api/v1/runs": ["/api/v1/runs"] * repeat,
        "GET /api/v1/runs?q&sort": ["/api/v1/runs?q=analysis&sort=wall&order=desc"] * repeat,
        "GET /api/docs": ["/api/docs"] * repeat,
        # Issue 14: compare, history, regressions, costs (span tags from the span-tag
        # index), and the timeline's JSON (the seeded clusters hold no task log:
        # bench/timeline_latency.py measures one that does)
        "GET /api/v1/compare (two clusters)": [
            f"/api/v1/compare?a={a['id']}&b={b['id']}" for a, b in pairs
        ],
        "GET /compare (page, span tag of two clusters)": [
            f"/compare?a={a['id']}/span:data%20load&b={b['id']}/span:data%20load" for a, b in pairs
        ],
        "GET /api/v1/history (span tag in every cluster)": [
            "/api/v1/history?kind=span&name=data%20load"
        ]
        * repeat,
        "GET /history (page, span tag)": ["/history?kind=span&name=data%20load"] * repeat,
        "GET /api/v1/regressions": ["/api/v1/regressions"] * repeat,
        "GET /regressions (page)": ["/regressions"] * repeat,
        "GET /api/v1/costs?tag (a month)": [
            f"/api/v1/costs?tag=data%20load&since={day(c)}&until={day(c, 30)}" for c in picks
        ],
        "GET /costs?tag (page, a month)": [
            f"/costs?tag=data%20load&since={day(c)}&until={day(c, 30)}" for c in picks
        ],
        "GET /api/v1/costs (every tag, all time)": ["/api/v1/costs"] * repeat,
        "GET /api/v1/clusters/{id}/costs": [f"/api/v1/clusters/{c['id']}/costs" for c in picks],
        "GET /api/v1/clusters/{id}/timeline": [
            f"/api/v1/clusters/{c['id']}/timeline" for c in picks
        ],
    }


MANY_GROUPS_ID = stable_id("bench", "many-groups")


def many_groups_routes(app: Any, repeat: int) -> dict[str, list[str]]:
    """The many-groups cluster's routes; the computations' graphs in turn."""
    from daskscope.views import cluster_view

    view = cluster_view(app.state.store, MANY_GROUPS_ID)
    comps = [c.id for c in view.computations]
    base = f"/api/v1/clusters/{MANY_GROUPS_ID}"
    last = max(0, sum(c.group_count for c in view.computations) - 1000)
    plan = {
        "GET /clusters/{id} (page)": [f"/clusters/{MANY_GROUPS_ID}"] * repeat,
        "GET /api/v1/clusters/{id}": [base] * repeat,
        "GET .../computations/{c}/graph": [
            f"{base}/computations/{comps[i % len(comps)]}/graph" for i in range(repeat)
        ],
        "GET .../task-groups (first page)": [f"{base}/task-groups"] * repeat,
        "GET /api/v1/clusters/{id}/advice": [f"{base}/advice"] * repeat,
        "GET .../task-groups?offset=last": [f"{base}/task-groups?offset={last}"] * repeat,
        "GET .../task-groups?computation": [
            f"{base}/task-groups?computation={comps[i % len(comps)]}" for i in range(repeat)
        ],
        # issue 26: a computation of 10,000 groups: its page, its JSON, its graph; the
        # computations in turn, each asked for once before (kept views: views/memo.py),
        # and "(cold)": with nothing kept, built anew at each request
        **{
            f"{name}{suffix}": [url.format(c=comps[i % len(comps)]) for i in range(repeat)]
            for name, url in (
                ("GET /clusters/{id}/computations/{c} (page)",
                 f"/clusters/{MANY_GROUPS_ID}/computations/{{c}}"),
                ("GET .../computations/{c}/critical-path",
                 f"{base}/computations/{{c}}/critical-path"),
                ("GET .../computations/{c}/graph?path=1 (its page's graph)",
                 f"{base}/computations/{{c}}/graph?path=1"),
            )
            for suffix in ("", COLD)
        },
        "GET /clusters/{id}/computations/{c}?q=mul&sort=longest&offset=500 (page)": [
            f"/clusters/{MANY_GROUPS_ID}/computations/{comps[i % len(comps)]}"
            "?q=mul&sort=longest&offset=500" for i in range(repeat)
        ],
        "GET .../computations/{c}/graph?open=prefix:mul": [
            f"{base}/computations/{comps[i % len(comps)]}/graph?open=prefix:mul"
            for i in range(repeat)
        ],
        f"GET .../computations/{{c}}/graph{COLD}": [
            f"{base}/computations/{comps[i % len(comps)]}/graph" for i in range(repeat)
        ],
    }  # fmt: skip
    KEPT.update(name for name in plan if "computations/{c}" in name and not name.endswith(COLD))
    return plan


#: Routes measured with nothing kept (views/memo.py emptied before each request)
COLD = " (cold)"
#: Routes whose every URL is asked for once before they are timed (their views kept)
KEPT: set[str] = set()


def whole_view(app: Any, repeat: int) -> dict[str, float]:
    """What the critical-path route did before issue 26, in this process: the whole view
    of a 10,000-group computation worked out and encoded (every group, every edge)."""
    from daskscope.views import cluster_view, to_json
    from daskscope.views.critical_path import critical_path_view

    store = app.state.store
    comps = [c.id for c in cluster_view(store, MANY_GROUPS_ID).computations]
    timings, size = [], 0
    for i in range(repeat):
        started = time.perf_counter()
        size = len(to_json(critical_path_view(store, MANY_GROUPS_ID, comps[i % len(comps)])))
        timings.append((time.perf_counter() - started) * 1000)
    return {
        "p50_ms": round(statistics.median(timings), 1),
        "p95_ms": round(percentile(timings, 0.95), 1),
        "max_ms": round(max(timings), 1),
        "bytes": size,
    }


def measure_show(url: str, repeat: int, *extra: str) -> dict[str, float]:
    """``daskscope show ID --json`` in this process, as the command line runs it."""
    from click.testing import CliRunner

    from daskscope.cli.main import cli

    runner = CliRunner()
    timings, size = [], 0
    for _ in range(repeat + 1):  # the first one warms up
        started = time.perf_counter()
        result = runner.invoke(cli, ["--database", url, "show", MANY_GROUPS_ID, "--json", *extra])
        timings.append((time.perf_counter() - started) * 1000)
        if result.exit_code != 0:
            raise SystemExit(
                f"show {' '.join(extra)}: exit {result.exit_code} {result.output[:200]}"
            )
        size = len(result.output.encode())
    timings = timings[1:]
    return {
        "p50_ms": round(statistics.median(timings), 1),
        "p95_ms": round(percentile(timings, 0.95), 1),
        "max_ms": round(max(timings), 1),
        "bytes": size,
    }


async def measure(app: Any, plan: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    transport = httpx.ASGITransport(app=app)
    results = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for name, urls in plan.items():
            # warm caches (templates, statements); a computation's kept views: each
            for url in dict.fromkeys(urls) if name in KEPT else urls[:1]:
                await client.get(url)
            timings = []
            for url in urls:
                if name.endswith(COLD):
                    memo.clear(app.state.store)
                started = time.perf_counter()
                response = await client.get(url)
                timings.append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    raise SystemExit(f"{url}: HTTP {response.status_code} {response.text[:200]}")
            results[name] = {
                "p50_ms": round(statistics.median(timings), 1),
                "p95_ms": round(percentile(timings, 0.95), 1),
                "max_ms": round(max(timings), 1),
                "bytes": len(response.content),  # of the last response
            }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--many-groups", action="store_true",
        help="measure the cluster bench/seed.py --many-groups added",
    )  # fmt: skip
    parser.add_argument("--show-repeat", type=int, default=5, help="runs of show --json")
    parser.add_argument("--only", help="only the routes whose name holds this text")
    args = parser.parse_args()
    # other work on the machine shows in the figures: say how loaded it was
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    app = create_app(args.url)
    # as `daskscope serve` does before it serves: what exists now stays out of the garbage
    # collector's full passes (without it, a full pass over the modules and the app lands
    # on some request every few dozen and shows as its latency)
    gc.freeze()
    if args.many_groups:
        plan = many_groups_routes(app, args.repeat)
    else:
        plan = routes(app, random.Random(args.seed), args.repeat)
    if args.only:
        plan = {name: urls for name, urls in plan.items() if args.only in name}
    results = asyncio.run(measure(app, plan))
    whole = "before: .../computations/{c}/critical-path's whole view, worked out and encoded"
    if args.many_groups and (not args.only or args.only in whole):
        results[whole] = whole_view(app, min(args.repeat, 8))
    if args.many_groups and not args.only:
        results["daskscope show --json"] = measure_show(args.url, args.show_repeat)
        results["daskscope show --json --all-groups"] = measure_show(
            args.url, args.show_repeat, "--all-groups"
        )
    width = max(len(n) for n in results)
    print(f"{'route':<{width}}  {'p50 ms':>8}  {'p95 ms':>8}  {'max ms':>8}  {'bytes':>10}")
    for name, r in results.items():
        print(
            f"{name:<{width}}  {r['p50_ms']:>8}  {r['p95_ms']:>8}  {r['max_ms']:>8}  "
            f"{r['bytes']:>10,}"
        )
    dialect = app.state.store.dialect
    worst = max(r["p95_ms"] for r in results.values())
    print(json.dumps({"dialect": dialect, "repeat": args.repeat, "worst_p95_ms": worst,
                      "routes": results}))  # fmt: skip


if __name__ == "__main__":
    main()
