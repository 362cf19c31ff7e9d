"""A GPU worker's figures, in both of distributed's namings, through the recorder and the
store to the workers view and the page (issue 25, point 13).

distributed reports a worker's GPU two ways: its system monitor, on every worker of a
machine where NVML works, puts ``gpu_utilization``, ``gpu_memory_used`` and
``gpu-memory-total`` in the heartbeats (and the GPU's name in ``get_monitor_info``); a
worker built after NVML was initialised also has the ``gpu`` worker metric
(``gpu.utilization``, ``gpu.memory-used``) and ``gpu`` startup information (name,
memory-total). There is no GPU here, so each shape is put where distributed puts it, on
real in-process workers whose real heartbeats then carry it: worker A starts with the
``gpu`` startup information and gets the ``gpu`` metric; worker B's system monitor is
given a GPU (its name and total, and NVML's ``real_time`` and device count answered), so
it reports as it does on an H100. Ground truth: what Dask's scheduler holds of each
worker (``WorkerState.extra`` and ``.metrics``) and what worker B answers itself.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from distributed import Client, Scheduler, Worker
from distributed.diagnostics import nvml

import daskscope
from browser import SCREENSHOTS, needs_chromium
from daskscope.collector import dask_adapter
from daskscope.format import bytes_text
from daskscope.store import open_store, worker_samples
from daskscope.views.workers import GpuDevice, workers_view
from webutil import serving

GIB = 2**30
DEADLINE = 120.0

T4 = {"name": "Tesla T4", "memory-total": 15 * GIB}
T4_FIGURES = {"utilization": 37.0, "memory-used": 3 * GIB}
H100_NAME = "NVIDIA H100 80GB HBM3"
H100_TOTAL = 80 * GIB
H100_FIGURES = {"utilization": 99.0, "memory-used": 21_120_000_000}  # 19.67 GiB


def _monitor_a_gpu(worker: Worker) -> None:
    """What distributed's SystemMonitor sets up when NVML finds a device."""
    monitor = worker.monitor
    monitor.gpu_name = H100_NAME
    monitor.gpu_memory_total = H100_TOTAL
    monitor.quantities["gpu-memory-total"] = deque(maxlen=1)
    for name in ("gpu_utilization", "gpu_memory_used"):
        monitor.quantities[name] = deque(maxlen=monitor.maxlen)


async def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"waited {DEADLINE:.0f} s for {what}"
        await asyncio.sleep(0.05)


def record(url: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict[str, Any]]:
    """A cluster of worker A (``gpu`` metric and startup information) and worker B
    (system monitor) recorded into ``url``; returns its id and Dask's own record."""

    async def body() -> tuple[str, dict[str, Any]]:
        async with (
            Scheduler(dashboard_address=":0", port=0) as scheduler,
            Worker(
                scheduler.address, nthreads=1, startup_information={"gpu": lambda w: dict(T4)}
            ) as a,
            Worker(scheduler.address, nthreads=1) as b,
            Client(scheduler.address, asynchronous=True) as client,
        ):
            cluster_id = await daskscope.register(
                client, database=url, worker_sampling_interval=0.2
            )
            a.metrics["gpu"] = lambda w: dict(T4_FIGURES)
            # B's NVML, as distributed calls it (there is no GPU here): after the
            # workers started, so that no other part of Dask looks for one
            monkeypatch.setattr(nvml, "device_get_count", lambda: 1)
            monkeypatch.setattr(nvml, "real_time", lambda: dict(H100_FIGURES))
            _monitor_a_gpu(b)
            ws_a, ws_b = scheduler.workers[a.address], scheduler.workers[b.address]
            await _until(
                lambda: "gpu" in ws_a.metrics and "gpu_utilization" in ws_b.metrics,
                "heartbeats with both namings",
            )
            recorder = dask_adapter.find_recorder(scheduler)
            await _until(
                lambda: "gpu" in recorder.roster.arrivals[b.address].detail,
                "worker B's GPU asked",
            )
            assert await client.submit(sum, [1, 2]) == 3
            status = await daskscope.flush(client)
            assert status["write_failures"] == 0 and status["hook_failures"] == {}
            truth = {
                "a": a.address,
                "b": b.address,
                "a_extra": dict(ws_a.extra["gpu"]),
                "a_metrics": dict(ws_a.metrics["gpu"]),
                "b_metrics": {k: ws_b.metrics[k] for k in nvml_names()},
                "b_monitor": b.get_monitor_info(recent=True),
            }
        return cluster_id, truth

    return asyncio.run(body())


def nvml_names() -> tuple[str, ...]:
    return ("gpu_utilization", "gpu_memory_used", "gpu-memory-total")


def test_both_namings_reach_the_workers_view(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_id, truth = record(database_url, monkeypatch)
    a, b = truth["a"], truth["b"]
    # Dask itself carries what each worker told, each in its own naming
    assert truth["a_extra"] == T4 and truth["a_metrics"] == T4_FIGURES
    assert truth["b_metrics"] == {
        "gpu_utilization": 99.0,
        "gpu_memory_used": H100_FIGURES["memory-used"],
        "gpu-memory-total": H100_TOTAL,
    }
    assert (truth["b_monitor"]["gpu_name"], truth["b_monitor"]["gpu_memory_total"]) == (
        H100_NAME,
        H100_TOTAL,
    )

    with open_store(database_url) as store:
        samples = worker_samples(store, cluster_id)
        view = workers_view(store, cluster_id)
    # stored as the heartbeats carried them
    stored = {w: [r["metrics"] for r in samples if r["worker"] == w] for w in (a, b)}
    assert any(m.get("gpu.utilization") == 37.0 for m in stored[a])
    assert any(m.get("gpu_utilization") == 99.0 for m in stored[b])

    assert view.gpu_recorded
    for worker, figures in ((a, T4_FIGURES), (b, H100_FIGURES)):
        series = view.workers[worker]
        assert series.gpu_utilization is not None and series.gpu_memory_used is not None
        # each sample that carried the worker's GPU figures, whichever its naming
        drawn = [
            (u, m)
            for u, m in zip(series.gpu_utilization, series.gpu_memory_used, strict=True)
            if u is not None
        ]
        assert drawn and set(drawn) == {(figures["utilization"], figures["memory-used"])}
    assert view.gpus == {
        a: GpuDevice(T4["name"], T4["memory-total"]),
        b: GpuDevice(H100_NAME, H100_TOTAL),
    }


@needs_chromium
def test_the_gpu_chart_names_each_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_page: Any
) -> None:
    from daskscope.web import create_app

    url = f"sqlite:///{tmp_path / 'store.db'}"
    # in a thread of its own: the browser's driver holds this thread's event loop
    with ThreadPoolExecutor(1) as pool:
        cluster_id, truth = pool.submit(record, url, monkeypatch).result()
    short = {w: truth[w].split("://")[-1] for w in ("a", "b")}
    app = create_app(url)
    try:
        with serving(app) as base:
            page = open_page(1440, 900)
            page.goto(f"{base}/clusters/{cluster_id}?tab=workers")
            page.wait_for_selector("#workers-charts[data-ready='1']")
            chart = "#workers-charts [data-chart='gpu']"
            titles = page.locator(f"{chart} .infolayer [class^='g-y'][class$='title']")
            assert [t.strip() for t in titles.all_text_contents()] == [
                "GPU utilisation (%)",
                "GPU memory used (bytes)",
            ]
            legend = [t.strip() for t in page.locator(f"{chart} .legendtext").all_text_contents()]
            assert f"{short['a']} · Tesla T4" in legend
            assert f"{short['b']} · {H100_NAME}" in legend
            assert "GPU memory total" in legend
            # the T4's 15 GiB within the scale of the memory used; the H100's 80 GiB above
            annotations = page.locator(f"{chart} .annotation-text").all_text_contents()
            assert annotations == [f"GPU memory total {bytes_text(H100_TOTAL)} ↑ above the scale"]
            devices = page.locator("#gpu-devices li").all_text_contents()
            assert sorted(devices) == sorted(
                [
                    f"{short['a']}: Tesla T4, {bytes_text(T4['memory-total'])}",
                    f"{short['b']}: {H100_NAME}, {bytes_text(H100_TOTAL)}",
                ]
            )
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.locator("#panel-workers").screenshot(
                path=str(SCREENSHOTS / "cluster-workers-gpu.png")
            )
    finally:
        app.state.store.close()
