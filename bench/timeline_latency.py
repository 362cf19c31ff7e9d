"""Latency of the task timeline's API route over a large task log, beside the store query
it wraps (``tasklog.window.timeline_window``), measured in one run.

Builds a store holding one cluster of ``--tasks`` executions (16 worker threads, tasks
1-100 ms back to back, 30 groups of 10 prefixes, a transfer before one task in ten),
encoded into segments by the recorder's own path (``segments.ExecutionColumns``,
``encode_segment``), then asks the route (in-process ASGI, JSON included) for windows at
several zooms and for key lookups, and prints p50/p95 and the route/query ratio.

    .venv/bin/python bench/timeline_latency.py --tasks 1000000 [--database URL]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from daskscope import model
from daskscope.store import open_store, write_records
from daskscope.tasklog import segments
from daskscope.tasklog.lookups import task_executions
from daskscope.tasklog.window import timeline_window
from daskscope.web import create_app

WORKERS = 4
THREADS = 4
PER_SEGMENT = 50_000
T0 = 1_790_000_000.0


class _Buffer:
    """The recorder's buffer of one segment, whichever form tasklog/segments.py gives it (a
    list of ``execution(...)`` tuples, or column-wise ``ExecutionColumns``)."""

    def __init__(self) -> None:
        columns = getattr(segments, "ExecutionColumns", None)
        self.columns = columns() if columns is not None else None
        self.rows: list[Any] = []

    def append(self, *args: Any, **kwargs: Any) -> None:
        if self.columns is not None:
            self.columns.append(*args, **kwargs)
        else:
            self.rows.append(segments.execution(*args, **kwargs))  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return len(self.columns) if self.columns is not None else len(self.rows)

    def sealed(self) -> Any:
        return self.columns if self.columns is not None else self.rows


def build(url: str, tasks: int, seed: int = 0) -> tuple[str, float, float, list[str]]:
    """The store with one cluster of ``tasks`` executions; its id, first start, last stop
    and a few keys to look up."""
    rng = random.Random(seed)
    cluster_id = model.stable_id("bench-timeline", tasks)
    lanes = [
        (f"tcp://10.0.0.{w}:4000{w}", 140_000_000_000 + t * 4096)
        for w in range(WORKERS)
        for t in range(THREADS)
    ]
    clock = [T0] * len(lanes)
    groups = [(f"p{g % 10}-{g:04x}{'a' * 28}", f"p{g % 10}") for g in range(30)]
    records: list[Any] = []
    columns = _Buffer()
    number = 0
    keys: list[str] = []
    last = T0
    for i in range(tasks):
        lane = i % len(lanes)
        worker, thread = lanes[lane]
        group, prefix = groups[(i // 2000) % len(groups)]
        start = clock[lane] + rng.uniform(0, 0.002)
        stop = start + rng.uniform(0.001, 0.1)
        clock[lane] = stop
        last = max(last, stop)
        startstops = [{"action": "compute", "start": start, "stop": stop}]
        if i % 10 == 0:
            source = lanes[(lane + THREADS) % len(lanes)][0]
            startstops.insert(
                0,
                {
                    "action": "transfer",
                    "start": start - 0.01,
                    "stop": start - 0.001,
                    "source": source,
                },
            )
        key = (group, i)
        if i % (tasks // 20 or 1) == 0:
            keys.append(str(key))
        columns.append(
            key, group, prefix, worker, thread, startstops, erred=False, nbytes=8000,
            computation=f"comp-{i // 100_000}", span=None,
        )  # fmt: skip
        if len(columns) == PER_SEGMENT:
            sealed = segments.encode_segment(cluster_id, number, columns.sealed())
            number += len(sealed)
            records += sealed
            columns = _Buffer()
    if len(columns):
        records += segments.encode_segment(cluster_id, number, columns.sealed())
    cluster = model.ClusterRecord(
        id=cluster_id, name=f"timeline bench {tasks:,}", account="default", user="bench",
        scheduler_address="tcp://10.0.0.1:8786", dask_version="2026.8.0",
        distributed_version="2026.8.0", python_version="3.11", started_at=T0 - 1,
        stopped_at=last + 1, last_seen_at=last + 1,
    )  # fmt: skip
    with open_store(url) as store:
        write_records(store, [cluster])
        for at in range(0, len(records), 20):
            write_records(store, records[at : at + 20])
    return cluster_id, T0, last, keys


def timed(fn: Any, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--database", help="store URL (default: a new SQLite file)")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    url = args.database or f"sqlite:///{Path(tempfile.mkdtemp()) / 'timeline.db'}"
    started = time.perf_counter()
    cluster_id, first, last, keys = build(url, args.tasks)
    print(f"built {args.tasks:,} executions in {time.perf_counter() - started:.1f} s ({url})")
    store = open_store(url)
    app = create_app(store)
    span = last - first
    windows = {
        "whole": (None, None),
        "whole/700": (None, None),  # the page's first drawing: 700 bins a thread
        "10 %": (first + 0.45 * span, first + 0.55 * span),
        "1 s": (first + span / 2, first + span / 2 + 1.0),
        "10 ms": (first + span / 2, first + span / 2 + 0.01),
    }

    async def measure() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:

            async def get(path: str) -> float:
                t = time.perf_counter()
                response = await client.get(path)
                assert response.status_code == 200, response.text[:300]
                return (time.perf_counter() - t) * 1000

            base = f"/api/v1/clusters/{cluster_id}"
            await get(f"{base}/timeline")  # first: segments decoded into the cache
            print(
                f"{'window':<8} {'route p50':>10} {'route p95':>10} {'query p50':>10} "
                f"{'query p95':>10} {'ratio p50':>10}  mode"
            )
            for name, (a, b) in windows.items():
                bins = 700 if name.endswith("/700") else 1000
                query = f"?bins={bins}" + ("" if a is None else f"&start={a:.6f}&stop={b:.6f}")
                route = [await get(f"{base}/timeline{query}") for _ in range(args.repeat)]
                bare = timed(
                    lambda a=a, b=b, n=bins: timeline_window(store, cluster_id, a, b, bins=n),
                    args.repeat,
                )
                mode = "raw" if timeline_window(store, cluster_id, a, b).raw else "binned"
                print(
                    f"{name:<8} {statistics.median(route):>10.1f} {p95(route):>10.1f} "
                    f"{statistics.median(bare):>10.1f} {p95(bare):>10.1f} "
                    f"{statistics.median(route) / statistics.median(bare):>10.2f}  {mode}"
                )
            from urllib.parse import quote

            looked = [
                await get(f"{base}/tasks/{quote(k, safe='')}") for k in keys for _ in range(2)
            ]
            bare = timed(
                lambda: [task_executions(store, cluster_id, k) for k in keys[:1]], len(keys)
            )
            print(
                f"{'key':<8} {statistics.median(looked):>10.1f} {p95(looked):>10.1f} "
                f"{statistics.median(bare):>10.1f} {p95(bare):>10.1f} "
                f"{statistics.median(looked) / statistics.median(bare):>10.2f}  lookup"
            )

    asyncio.run(measure())
    store.close()


if __name__ == "__main__":
    main()
