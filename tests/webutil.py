"""Shared by the dashboard tests: a real recorded cluster, synthetic history, and a
uvicorn server in a background thread."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import dask
import dask.array as da
from distributed import Client, LocalCluster, span

import daskscope
from conftest import free_port
from daskscope import model
from factories import make_cluster

EXPLODE_MESSAGE = "daskscope web test: this block fails on purpose"
USERS = ("alice", "bob", "carol")
GIB = 2**30


def busy(i: int) -> int:
    # Spin (not sleep) so that the statistical profile sees frames of this function.
    end = time.perf_counter() + 0.3
    n = 0
    while time.perf_counter() < end:
        n += 1
    return i + n * 0


def explode(block: Any) -> Any:
    raise RuntimeError(EXPLODE_MESSAGE)


def record_cluster(url: str) -> str:
    """A small real workload on an in-process LocalCluster: nested spans, computations
    with code, a failing computation, worker samples and profiles."""
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,  # the failing task logs on purpose
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(
            client,
            database=url,
            name="web test cluster",
            profile_interval=0.5,
            worker_sampling_interval=0.2,
        )
        with dask.config.set({"optimization.fuse.active": False}):
            with span("data load"):
                x = da.ones((400, 400), chunks=100)
                with span("inner"):
                    (x + 1).sum().compute()
            with span("work"):
                dask.compute(*[dask.delayed(busy)(i) for i in range(4)])
                failing = (x * 2).map_blocks(explode, dtype=float).sum()
                with suppress(RuntimeError):
                    failing.compute()
        daskscope.flush(client)
    return cluster_id


def monday(t: float) -> float:
    """Start of the UTC week (Monday 00:00) holding ``t``, by calendar arithmetic."""
    day = dt.datetime.fromtimestamp(t, dt.UTC).date()
    start = day - dt.timedelta(days=day.weekday())
    return dt.datetime(start.year, start.month, start.day, tzinfo=dt.UTC).timestamp()


def synthetic_clusters(now: float, weeks: int = 4) -> list[model.ClusterRecord]:
    """Three members, a cluster each per week for ``weeks`` weeks (carol skips odd
    weeks), each one hour long on 4 threads with 8 GiB."""
    rows = []
    this_monday = monday(now)
    for w in range(weeks):
        week = this_monday - (w + 1) * 7 * 86400
        for u, user in enumerate(USERS):
            if user == "carol" and w % 2:
                continue
            start = week + 86400 + u * 3600 + w * 60
            rows.append(
                make_cluster(
                    f"{user} week {w}",
                    start=start,
                    id=model.stable_id("web-test", user, w),
                    account="default",
                    user=user,
                    scheduler_address="tcp://10.0.0.1:8786",
                    python_version="3.11",
                    stopped_at=start + 3600,
                    last_seen_at=start + 3600,
                    workers_peak=2,
                    threads_peak=4,
                    memory_limit_peak=8 * GIB,
                    core_seconds=4 * 3600.0,
                    memory_limit_byte_seconds=8 * GIB * 3600.0,
                    tasks_executed=100 * (u + 1),
                    tasks_erred=u,
                    compute_seconds=1800.0 * (u + 1),
                    bytes_processed=(u + 1) * 2**20,
                )
            )
    return rows


def call(app: Any, method: str, url: str, **kwargs: Any) -> Any:
    """One request through the in-process ASGI client."""
    import httpx

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.request(method, url, **kwargs)

    return asyncio.run(go())


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """The app on 127.0.0.1 at a free port, in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
