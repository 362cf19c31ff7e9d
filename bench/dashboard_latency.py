"""Latency of every dashboard page's API calls (and the pages themselves) against a
seeded store (``bench/seed.py``), through the in-process ASGI client.

Prints p50/p95 per route in milliseconds and ends with one JSON line of the figures.

    python bench/dashboard_latency.py sqlite:////tmp/dash.db [--repeat 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from typing import Any

import httpx

from daskscope.store import list_clusters
from daskscope.store.analytics import MONDAY, WEEK
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
    from daskscope.store import cluster_detail

    for c in picks:
        detail = cluster_detail(store, c["id"])
        comps.append(rng.choice(detail["computations"])["id"] if detail["computations"] else "x")

    def week(c: dict[str, Any]) -> float:
        return MONDAY + int((c["started_at"] - MONDAY) // WEEK) * WEEK

    return {
        "GET / (page)": ["/?days=90"] * repeat,
        "GET /api/v1/account": ["/api/v1/account?days=90"] * repeat,
        "GET /api/v1/statistics (all time)": ["/api/v1/statistics?days=0"] * repeat,
        "GET /api/v1/usage (26 weeks)": ["/api/v1/usage?weeks=26"] * repeat,
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
        "GET /api/v1/clusters/{id}/metrics?tag": [
            f"/api/v1/clusters/{c['id']}/metrics?tag=data%20load" for c in picks
        ],
        "GET /api/v1/reports": ["/api/v1/reports"] * repeat,
        "GET /api/v1/runs": ["/api/v1/runs"] * repeat,
    }


async def measure(app: Any, plan: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    transport = httpx.ASGITransport(app=app)
    results = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for name, urls in plan.items():
            await client.get(urls[0])  # warm caches (templates, statements)
            timings = []
            for url in urls:
                started = time.perf_counter()
                response = await client.get(url)
                timings.append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    raise SystemExit(f"{url}: HTTP {response.status_code} {response.text[:200]}")
            results[name] = {
                "p50_ms": round(statistics.median(timings), 1),
                "p95_ms": round(percentile(timings, 0.95), 1),
                "max_ms": round(max(timings), 1),
            }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    app = create_app(args.url)
    plan = routes(app, random.Random(args.seed), args.repeat)
    results = asyncio.run(measure(app, plan))
    width = max(len(n) for n in results)
    print(f"{'route':<{width}}  {'p50 ms':>8}  {'p95 ms':>8}  {'max ms':>8}")
    for name, r in results.items():
        print(f"{name:<{width}}  {r['p50_ms']:>8}  {r['p95_ms']:>8}  {r['max_ms']:>8}")
    dialect = app.state.store.dialect
    worst = max(r["p95_ms"] for r in results.values())
    print(json.dumps({"dialect": dialect, "repeat": args.repeat, "worst_p95_ms": worst,
                      "routes": results}))  # fmt: skip


if __name__ == "__main__":
    main()
