"""A heartbeat that arrives late: ``MetricsCollector`` waits for the fine metrics the
workers measured, not for a quiet moment.

A worker hands its fine metrics to the scheduler in a heartbeat. One that took them a
moment ago may still be on its way (a loaded host, a new connection) while the
collector's own heartbeats, asked for later, come back first and empty: twice in a row
nothing changes, though the metrics have not arrived. The ground truth is what the
worker itself measured in the run's spans (``Worker.digests_total``, cumulative).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from distributed import Client, LocalCluster

from daskscope import MetricsCollector

LATE_S = 3.0  # how long the one late heartbeat is held back


def busy(n: int) -> int:
    return sum(i * i for i in range(n))


def stop_heartbeats(dask_worker: Any) -> None:
    # no periodic heartbeat takes the task's metrics before the late one does
    dask_worker.periodic_callbacks["heartbeat"].stop()


class _LateScheduler:
    """The worker's connection to the scheduler, with its next heartbeat held back."""

    def __init__(self, scheduler: Any) -> None:
        self._scheduler = scheduler
        self.armed = True

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._scheduler, name)
        if name != "heartbeat_worker" or not self.armed:
            return call
        self.armed = False

        async def late(**kwargs: Any) -> Any:
            await asyncio.sleep(LATE_S)
            return await call(**kwargs)

        return late


def _pending_in_spans(dask_worker: Any) -> int:
    return sum(
        1 for k in dask_worker.digests_total_since_heartbeat if isinstance(k, tuple) and len(k) == 5
    )


async def send_a_late_heartbeat(dask_worker: Any) -> int:
    """Start a heartbeat that takes the metrics now and delivers them ``LATE_S`` later;
    returns how many span metrics it took."""
    pending = _pending_in_spans(dask_worker)
    dask_worker.scheduler = _LateScheduler(dask_worker.scheduler)
    dask_worker._daskscope_late = asyncio.ensure_future(dask_worker.heartbeat())
    while _pending_in_spans(dask_worker):
        await asyncio.sleep(0.01)
    return pending


def measured_in(span_ids: list[str], dask_worker: Any) -> dict[str, float]:
    """What the worker measured in these spans since it started, by activity and unit."""
    out: dict[str, float] = {}
    for key, value in dask_worker.digests_total.items():
        if isinstance(key, tuple) and len(key) == 5 and key[1] in span_ids:
            name = f"{key[0]}/{key[3]}/{key[4]}"
            out[name] = out.get(name, 0.0) + value
    return out


def span_ids_below(span_id: str, dask_scheduler: Any) -> list[str]:
    span = dask_scheduler.extensions["spans"].spans[span_id]
    return [s.id for s in span.traverse_spans()]


def test_a_late_heartbeat_is_waited_for(caplog: pytest.LogCaptureFixture) -> None:
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        client.run(stop_heartbeats)
        with MetricsCollector(client, store=False, worker_tracking_interval=None) as collector:
            assert client.submit(busy, 300_000).result() == busy(300_000)
            (taken,) = client.run(send_a_late_heartbeat).values()
            assert taken > 0  # the late heartbeat holds the task's metrics
        ids = client.run_on_scheduler(span_ids_below, collector.run.info["span_id"])
        (truth,) = client.run(measured_in, ids).values()
    assert "may read short" not in caplog.text  # it arrived within the wait
    cpu = truth["execute/thread-cpu/seconds"]
    assert cpu > 0
    assert collector.metrics["cpu_seconds"] == pytest.approx(cpu)
    assert collector.metrics["execute_seconds"] == pytest.approx(
        sum(v for k, v in truth.items() if k.startswith("execute/") and k.endswith("/seconds"))
    )
