"""Workers over time, as the cluster page draws them (``/api/v1/clusters/{id}/workers``):
per worker Dask's memory split against its limit, CPU, tasks, network and disk I/O and
GPU figures when recorded (in either of distributed's namings, with the GPU's name and
total memory); the cluster's memory summed; departures with their reason.

Labels and units come from the metric catalogue (``figures``), so the page's axes and
legends say what the CLI and the docs say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daskscope.analysis.workers import memory_over_time
from daskscope.catalogue import figure
from daskscope.store import Store

__all__ = [
    "GPU_METRICS",
    "MAX_POINTS_PER_WORKER",
    "Departure",
    "FigureLabel",
    "GpuDevice",
    "MemoryTotals",
    "WorkerEvent",
    "WorkerSeries",
    "WorkersView",
    "workers_view",
]

MAX_POINTS_PER_WORKER = 2000
#: GPU figures of the samples' ``metrics``: series -> the names distributed gives them,
#: the first found in a sample taken: its ``gpu`` worker metric (a worker built after
#: NVML was initialised), then its system monitor's (every worker where NVML works)
GPU_METRICS = {
    "gpu_utilization": ("gpu.utilization", "gpu_utilization"),
    "gpu_memory_used": ("gpu.memory-used", "gpu_memory_used"),
}
#: the system monitor's total memory of the GPU, in every heartbeat
_GPU_MEMORY_TOTAL = "gpu-memory-total"
#: Sample columns kept per worker: column -> series name
_COLUMNS = {
    "memory": "memory",
    "managed_bytes": "managed",
    "unmanaged_bytes": "unmanaged",
    "spilled_bytes": "spilled",
    "memory_limit": "memory_limit",
    "cpu_percent": "cpu_percent",
    "nthreads": "nthreads",
    "executing": "executing",
    "net_read_bps": "net_read_bps",
    "net_write_bps": "net_write_bps",
    "disk_read_bps": "disk_read_bps",
    "disk_write_bps": "disk_write_bps",
}
#: Figures whose label and unit the page shows (worker scope of the catalogue)
_FIGURES = (
    "managed_bytes",
    "unmanaged_bytes",
    "spilled_bytes",
    "memory_limit",
    "memory",
    "cpu_percent",
    "executing",
    "processing",
    "net_read_bps",
    "net_write_bps",
    "disk_read_bps",
    "disk_write_bps",
)


@dataclass(frozen=True)
class WorkerSeries:
    """One worker's samples in time order (thinned past :data:`MAX_POINTS_PER_WORKER`);
    ``tasks`` = executing + processing; a GPU series is None when never recorded."""

    t: list[float]
    memory: list[int | None]
    managed: list[int | None]
    unmanaged: list[int | None]
    spilled: list[int | None]
    memory_limit: list[int | None]
    cpu_percent: list[float | None]
    nthreads: list[int]
    executing: list[int]
    tasks: list[int]
    net_read_bps: list[float | None]
    net_write_bps: list[float | None]
    disk_read_bps: list[float | None]
    disk_write_bps: list[float | None]
    gpu_utilization: list[float | None] | None
    gpu_memory_used: list[float | None] | None


@dataclass(frozen=True)
class MemoryTotals:
    """Σ over workers per sampling round (None where a worker did not report it)."""

    t: list[float]
    managed_bytes: list[int | None]
    unmanaged_bytes: list[int | None]
    spilled_bytes: list[int | None]
    memory_limit: list[int | None]


@dataclass(frozen=True)
class WorkerEvent:
    at: float
    kind: str
    worker: str | None
    detail: dict[str, Any]


@dataclass(frozen=True)
class Departure:
    """A worker leaving; only ``reason == "lost"`` is a loss (closed, retired and
    restarted are a cluster doing what it was told)."""

    worker: str
    at: float
    reason: str
    lost: bool


@dataclass(frozen=True)
class FigureLabel:
    label: str
    unit: str


@dataclass(frozen=True)
class GpuDevice:
    """The GPU a worker has: its name and total memory, as the worker told at its start
    (distributed's ``gpu`` startup information) or its system monitor tells (asked once,
    and its heartbeats' total); None where not told."""

    name: str | None
    memory_total: int | None


#: GPU figures have no column (nor catalogue entry): labels of distributed's NVML names
_GPU_LABELS = {
    "gpu_utilization": FigureLabel("GPU utilisation", "percent"),
    "gpu_memory_used": FigureLabel("GPU memory used", "bytes"),
    "gpu_memory_total": FigureLabel("GPU memory total", "bytes"),
}


@dataclass(frozen=True)
class WorkersView:
    cluster_id: str
    #: by worker address, sorted
    workers: dict[str, WorkerSeries]
    memory: MemoryTotals
    events: list[WorkerEvent]
    departures: list[Departure]
    gpu_recorded: bool
    #: by worker address: the GPU of each worker that has one recorded
    gpus: dict[str, GpuDevice]
    #: catalogue labels and units by sample column
    figures: dict[str, FigureLabel]


def workers_view(store: Store, cluster_id: str) -> WorkersView:
    samples = store.worker_samples(cluster_id)
    by_worker: dict[str, list[Mapping[str, Any]]] = {}
    for row in samples:
        by_worker.setdefault(row["worker"], []).append(row)
    workers = {w: _series(by_worker[w]) for w in sorted(by_worker)}
    events = store.worker_events(cluster_id)
    departures = [
        Departure(e["worker"], e["at"], _reason(e["detail"]), _reason(e["detail"]) == "lost")
        for e in events
        if e["kind"] == "worker-removed" and e["worker"] is not None
    ]
    totals = _thin(memory_over_time(samples))
    gpus = _gpus(events, by_worker)
    return WorkersView(
        cluster_id=cluster_id,
        workers=workers,
        memory=MemoryTotals(**totals),
        events=[WorkerEvent(e["at"], e["kind"], e["worker"], e["detail"] or {}) for e in events],
        departures=departures,
        gpu_recorded=any(s.gpu_utilization or s.gpu_memory_used for s in workers.values()),
        gpus=gpus,
        figures={**{k: _label(k) for k in _FIGURES}, **_GPU_LABELS},
    )


def _label(key: str) -> FigureLabel:
    found = figure("worker", key)
    return FigureLabel(found.label, found.unit)


def _reason(detail: Mapping[str, Any] | None) -> str:
    return str((detail or {}).get("reason") or "removed")


def _series(rows: Sequence[Mapping[str, Any]]) -> WorkerSeries:
    out: dict[str, list[Any] | None] = {"t": [r["sampled_at"] for r in rows]}
    for column, name in _COLUMNS.items():
        out[name] = [r[column] for r in rows]
    out["tasks"] = [int(r["executing"]) + int(r["processing"]) for r in rows]
    for name, metrics in GPU_METRICS.items():
        values = [_first(r["metrics"], metrics) for r in rows]
        out[name] = values if any(v is not None for v in values) else None
    return WorkerSeries(**_thin(out))


def _first(metrics: Mapping[str, Any] | None, names: Sequence[str]) -> Any:
    for name in names:
        value = (metrics or {}).get(name)
        if value is not None:
            return value
    return None


def _gpus(
    events: Sequence[Mapping[str, Any]], by_worker: Mapping[str, Sequence[Mapping[str, Any]]]
) -> dict[str, GpuDevice]:
    """Each worker's GPU: its latest arrival's (the recorder writes what the worker
    told into it), else the total memory its system monitor reports."""
    told: dict[str, Mapping[str, Any]] = {}
    for event in events:  # in time order: a worker's latest arrival wins
        gpu = (event["detail"] or {}).get("gpu") if event["kind"] == "worker-added" else None
        if event["worker"] is not None and isinstance(gpu, Mapping):
            told[event["worker"]] = gpu
    out: dict[str, GpuDevice] = {}
    for worker in sorted(set(told) | set(by_worker)):
        gpu = told.get(worker, {})
        total = gpu.get("memory_total")
        if total is None:
            totals = [
                (r["metrics"] or {}).get(_GPU_MEMORY_TOTAL) for r in by_worker.get(worker, ())
            ]
            total = next((t for t in reversed(totals) if t is not None and t > 0), None)
        name = gpu.get("name")
        if name is not None or total is not None:
            out[worker] = GpuDevice(name, int(total) if total is not None else None)
    return out


def _thin(series: dict[str, Any]) -> dict[str, Any]:
    # Keep long recordings drawable: every n-th sample past the cap.
    step = -(-len(series["t"]) // MAX_POINTS_PER_WORKER)
    if step <= 1:
        return series
    return {k: (v[::step] if v is not None else None) for k, v in series.items()}
