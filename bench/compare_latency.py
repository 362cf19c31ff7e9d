"""Latency of the compare, history and regressions routes against a seeded store
(``bench/seed.py``: every cluster has a span "data load" with children "step 1" to
"step 4"), through the in-process ASGI client, side by side with the cluster listing's
JSON as a reference measured in the same run.

Prints p50/p95 per route in milliseconds, each p95 as a ratio of the 100 ms target and
of the reference's p95, and ends with one JSON line of the figures.

    python bench/compare_latency.py sqlite:////tmp/dash.db [--repeat 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from typing import Any
from urllib.parse import urlencode

import httpx

from daskscope.store import list_clusters
from daskscope.web import create_app

TARGET_MS = 100.0
REFERENCE = "GET /api/v1/clusters (reference)"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def plan(app: Any, rng: random.Random, repeat: int) -> dict[str, list[str]]:
    clusters = list_clusters(app.state.store, limit=None)
    pairs = [rng.sample(clusters, 2) for _ in range(repeat)]

    def compare(a: str, b: str) -> str:
        return "?" + urlencode({"a": a, "b": b})

    names = [c["name"] for c in clusters]
    recurring = max(set(names), key=names.count)
    return {
        REFERENCE: ["/api/v1/clusters"] * repeat,
        "GET /api/v1/compare (two clusters)": [
            "/api/v1/compare" + compare(a["id"], b["id"]) for a, b in pairs
        ],
        "GET /api/v1/compare (span tag of two clusters)": [
            "/api/v1/compare" + compare(f"{a['id']}/span:data load", f"{b['id']}/span:data load")
            for a, b in pairs
        ],
        "GET /compare (page)": ["/compare" + compare(a["id"], b["id"]) for a, b in pairs],
        "GET /api/v1/history (span tag in every cluster)": [
            "/api/v1/history?kind=span&name=data%20load"
        ]
        * repeat,
        "GET /api/v1/history (cluster name)": [
            "/api/v1/history?" + urlencode({"kind": "cluster", "name": recurring})
        ]
        * repeat,
        "GET /history (page)": ["/history?kind=span&name=data%20load"] * repeat,
        "GET /api/v1/regressions": ["/api/v1/regressions"] * repeat,
    }


async def measure(app: Any, routes: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    transport = httpx.ASGITransport(app=app)
    out: dict[str, dict[str, float]] = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for name, urls in routes.items():
            await client.get(urls[0])  # warm: imports, template compilation
            times = []
            for url in urls:
                started = time.perf_counter()
                response = await client.get(url)
                times.append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    raise SystemExit(f"{url}: HTTP {response.status_code}: {response.text[:300]}")
            out[name] = {"p50_ms": percentile(times, 0.5), "p95_ms": percentile(times, 0.95)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    app = create_app(args.url)
    try:
        found = asyncio.run(measure(app, plan(app, random.Random(14), args.repeat)))
    finally:
        app.state.store.close()
    reference = found[REFERENCE]["p95_ms"]
    print(f"{'route':<52} {'p50 ms':>8} {'p95 ms':>8} {'÷ target':>9} {'÷ ref':>7}")
    for name, f in found.items():
        print(f"{name:<52} {f['p50_ms']:8.1f} {f['p95_ms']:8.1f} "
              f"{f['p95_ms'] / TARGET_MS:9.2f} {f['p95_ms'] / reference:7.2f}")  # fmt: skip
    print(json.dumps(found))


if __name__ == "__main__":
    main()
