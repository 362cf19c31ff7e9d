"""Latency of the compare, history and regressions routes against a seeded store
(``bench/seed.py``: every cluster has a span "data load" with children "step 1" to
"step 4"), through the in-process ASGI client, side by side with the cluster listing's
JSON as a reference measured in the same run.

Prints p50/p95 per route in milliseconds, each p95 as a ratio of the 100 ms target and
of the reference's p95; then the store's queries for a span tag's runs and the
recurring tags timed both ways in the same run, by text match over the spans' JSON
names (as before migration 0009) and through the span-tag index, each p95 as a ratio of
the text match's; and ends with one JSON line of the figures.

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
import sqlalchemy as sa

from daskscope.analysis import regression
from daskscope.store import list_clusters
from daskscope.store import schema as s
from daskscope.store.history import (
    HISTORY_LIMIT,
    outermost,
    own_tag_filter,
    recurring_names,
    span_runs,
)
from daskscope.web import create_app

TARGET_MS = 100.0
#: Runs a name needs to be checked for regressions (views.history.regressions_view)
MIN_RUNS = regression.MIN_BASELINE + regression.RECENT
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


def text_match_span_runs(store: Any, tag: str, limit: int = HISTORY_LIMIT) -> list[str]:
    """How ``store.history.span_runs`` found a tag's spans before the span-tag index
    (migration 0009): a text match on every span's JSON name, the matches sorted by time,
    their names decoded to keep the outermost. Ids of the chosen spans."""
    sp = s.spans.c
    query = sa.select(sp.id, sp.name).where(own_tag_filter(tag))
    query = query.order_by(sp.enqueued_at.desc(), sp.span_id)
    chosen: list[str] = []
    with store.engine.connect() as conn:
        for row in conn.execute(query.execution_options(yield_per=limit)):
            if outermost(row.name, tag):
                chosen.append(row.id)
                if len(chosen) == limit:
                    break
    return chosen


def text_match_tags(store: Any, min_runs: int) -> list[str]:
    """How ``recurring_names`` counted span tags before the index: every distinct JSON
    name grouped in the database, then decoded."""
    sp = s.spans.c
    with store.engine.connect() as conn:
        names = conn.execute(
            sa.select(sa.cast(sp.name, sa.Text), sa.func.count()).group_by(
                sa.cast(sp.name, sa.Text)
            )
        ).all()
    tags: dict[str, int] = {}
    for text, count in names:
        name = [str(t) for t in json.loads(text)]
        if name and outermost(name, name[-1]):
            tags[name[-1]] = tags.get(name[-1], 0) + int(count)
    return sorted(t for t, n in tags.items() if n >= min_runs)


def side_by_side(store: Any, repeat: int) -> dict[str, dict[str, float]]:
    """The store's queries for a span tag's runs and the recurring tags, by text match
    (before the index) and through the span-tag index, timed in turn in this run."""
    tag = "data load"
    index_ids = {r["id"] for r in span_runs(store, tag)}
    assert set(text_match_span_runs(store, tag)) == index_ids, "the two ways disagree"
    assert text_match_tags(store, MIN_RUNS) == recurring_names(store, min_runs=MIN_RUNS)["span"]
    calls = {
        "span runs: text match (before 0009)": lambda: text_match_span_runs(store, tag),
        "span runs: span-tag index": lambda: span_runs(store, tag),
        "recurring tags: JSON names (before 0009)": lambda: text_match_tags(store, MIN_RUNS),
        "recurring names: span-tag index (+ clusters, runs)": lambda: recurring_names(
            store, min_runs=MIN_RUNS
        ),
    }
    out = {}
    for name, call in calls.items():
        call()
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            call()
            times.append((time.perf_counter() - started) * 1000)
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
        queries = side_by_side(app.state.store, args.repeat)
    finally:
        app.state.store.close()
    reference = found[REFERENCE]["p95_ms"]
    print(f"{'route':<52} {'p50 ms':>8} {'p95 ms':>8} {'÷ target':>9} {'÷ ref':>7}")
    for name, f in found.items():
        print(f"{name:<52} {f['p50_ms']:8.1f} {f['p95_ms']:8.1f} "
              f"{f['p95_ms'] / TARGET_MS:9.2f} {f['p95_ms'] / reference:7.2f}")  # fmt: skip
    before = [queries[k]["p95_ms"] for k in queries]
    print(f"\n{'store query':<52} {'p50 ms':>8} {'p95 ms':>8} {'÷ before':>9}")
    for i, (name, f) in enumerate(queries.items()):
        ratio = f["p95_ms"] / before[i - i % 2]
        print(f"{name:<52} {f['p50_ms']:8.1f} {f['p95_ms']:8.1f} {ratio:9.3f}")
    print(json.dumps({**found, **queries}))


if __name__ == "__main__":
    main()
