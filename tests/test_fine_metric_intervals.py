"""Fine metrics as time series (issue 30, point 2): what the spans' fine metrics gained
flush by flush, recorded from a real cluster and checked against Dask's own totals."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import defaultdict
from collections.abc import Hashable
from typing import Any

import dask
import dask.array as da
import pytest
import sqlalchemy as sa
from distributed import Client, LocalCluster, span

import daskscope
from daskscope.collector.snapshot import metric_parts
from daskscope.store import open_store
from daskscope.store import schema as store_schema
from daskscope.store.engine import as_engine

#: Dask's idle time of a span's threads: computed by Dask when asked, never a heartbeat's
IDLE = ("execute", "N/A", "idle or other spans", "seconds")
ROUNDS = 4
DEADLINE = 120.0


def by_activity(metrics: dict[tuple[Hashable, ...], float]) -> dict[tuple[str, str, str], float]:
    """Dask's per-key metrics summed over task prefixes, as the interval rows keep them."""
    out: dict[tuple[str, str, str], float] = defaultdict(float)
    for key, value in metrics.items():
        context, _prefix, activity, unit = metric_parts(key)
        out[(context, activity, unit)] += value
    return dict(out)


async def flushes_after(plugin: Any, count: int) -> None:
    """Wait (on the condition, with a generous deadline) for ``count`` more flushes."""
    target = plugin.flusher.stats.flushes + count
    deadline = time.monotonic() + DEADLINE
    while plugin.flusher.stats.flushes < target:
        assert time.monotonic() < deadline, "the recorder's periodic flushes stopped"
        await asyncio.sleep(0.05)


def rows_of(url: str, table: sa.Table, cluster_id: str) -> list[dict[str, Any]]:
    store = open_store(url)
    with as_engine(store).connect() as conn:
        rows = conn.execute(sa.select(table).where(table.c.cluster_id == cluster_id))
        return [dict(row._mapping) for row in rows]


def test_intervals_add_up_to_dasks_totals(database_url: str) -> None:
    """On SQLite and PostgreSQL (``database_url`` is parametrized in conftest)."""

    async def body() -> tuple[str, dict[tuple[str, str, str], float]]:
        cluster = await LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=False,
            asynchronous=True,
            dashboard_address=":0",
        )
        client = await Client(cluster, asynchronous=True)
        cluster_id = await daskscope.register(client, database=database_url)
        scheduler = cluster.scheduler
        plugin = scheduler.plugins["daskscope"]
        async with cluster, client:
            with dask.config.set({"optimization.fuse.active": False}):
                for i in range(ROUNDS):
                    # each round's work lands in its own flush intervals
                    with span(f"round-{i}"):
                        x = da.random.random((300, 300), chunks=75)
                        assert await client.compute((x @ x.T).sum()) > 0
                    await flushes_after(plugin, 2)
            await daskscope.flush(client)
        # the cluster is closed: its spans hold every metric the workers ever sent
        extension = scheduler.extensions["spans"]
        truth: dict[tuple[str, str, str], float] = defaultdict(float)
        for root in extension.root_spans:
            metrics = dict(root.cumulative_worker_metrics)
            metrics.pop(IDLE, None)
            for name, value in by_activity(metrics).items():
                truth[name] += value
        return cluster_id, dict(truth)

    with dask.config.set({"daskscope.flush-interval": "300ms"}):
        cluster_id, truth = asyncio.run(body())

    rows = rows_of(database_url, store_schema.fine_metric_intervals, cluster_id)
    assert rows, "no fine-metric interval was recorded"
    assert truth, "Dask recorded no fine metrics"

    # every interval's value is a gain, never a drop
    assert all(row["value"] >= 0.0 for row in rows)

    # the intervals follow one another: each starts where the previous one stopped
    intervals = sorted({(row["started_at"], row["stopped_at"]) for row in rows})
    assert len(intervals) >= 3, intervals  # the rounds spread over several flushes
    for (start, stop), (next_start, _) in itertools.pairwise(intervals):
        assert start <= stop
        assert next_start == stop
    # one row per metric and interval
    assert len({(r["started_at"], r["context"], r["activity"], r["unit"]) for r in rows}) == len(
        rows
    )

    # summed over the intervals: Dask's totals, per (context, activity, unit). Each
    # interval value is a difference of two of Dask's running sums, so the sum over the
    # intervals telescopes back to the last one, up to a few rounding steps of the
    # largest value (a relative 1e-9 is 10⁷ times double precision)
    summed: dict[tuple[str, str, str], float] = defaultdict(float)
    for row in rows:
        summed[(row["context"], row["activity"], row["unit"])] += row["value"]
    assert set(summed) == {name for name, value in truth.items() if value}
    for name, value in truth.items():
        assert summed.get(name, 0.0) == pytest.approx(value, rel=1e-9, abs=1e-12), name

    # and the span totals already stored say the same
    totals: dict[tuple[str, str, str], float] = defaultdict(float)
    for row in rows_of(database_url, store_schema.span_metrics, cluster_id):
        totals[(row["context"], row["activity"], row["unit"])] += row["value"]
    for name, value in summed.items():
        assert totals[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name
