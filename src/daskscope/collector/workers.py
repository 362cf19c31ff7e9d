"""A worker's resources at one moment, as Dask's scheduler knows them.

Runs on the scheduler's event loop every sampling interval, once per worker: it only
reads ``WorkerState`` attributes and walks the heartbeat's ``metrics`` dict (a few dozen
leaves), no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real
from typing import TYPE_CHECKING, Any

from daskscope.collector.dask_adapter import heartbeat_value, memory_split
from daskscope.model import WorkerSampleRecord, stable_id

if TYPE_CHECKING:
    from distributed.scheduler import WorkerState

__all__ = [
    "MONITOR_GPU_METRICS",
    "SKIPPED_METRICS",
    "flatten_metrics",
    "gpu_info",
    "monitors_gpu",
    "startup_gpu",
    "worker_sample",
]

#: Heartbeat entries not copied into ``metrics``, with why: their keys are data, not
#: metric names, so they grow with the work or the cluster.
SKIPPED_METRICS: dict[str, str] = {
    # the fine performance metrics since the last heartbeat: kept whole as span metrics
    "digests_total_since_heartbeat": "kept as fine performance metrics of the spans",
    # one entry per peer worker and per data type: O(workers²) per sampling round
    "bandwidth.workers": "one entry per peer worker",
    "bandwidth.types": "one entry per data type",
}


#: distributed's two shapes of a worker's GPU (NVML) figures. Its system monitor, on
#: every worker of a machine where NVML works, puts these in the heartbeat metrics (the
#: GPU's name only in ``get_monitor_info``); a worker built after NVML was initialised
#: also has the ``gpu`` worker metric (``gpu.utilization``, ``gpu.memory-used``) and
#: ``gpu`` startup information (``WorkerState.extra["gpu"]``: name, memory-total)
MONITOR_GPU_METRICS = ("gpu_utilization", "gpu_memory_used", "gpu-memory-total")


def gpu_info(name: Any, memory_total: Any) -> dict[str, Any] | None:
    """A GPU's name and total memory in bytes as stored (None where not told; None
    when neither is: distributed says -1 for an unknown total)."""
    name = name if isinstance(name, str) and name else None
    total: int | None = None
    if isinstance(memory_total, Real) and not isinstance(memory_total, bool):
        number = float(memory_total)
        total = int(number) if math.isfinite(number) and number > 0 else None
    return {"name": name, "memory_total": total} if name or total else None


def startup_gpu(ws: WorkerState) -> dict[str, Any] | None:
    """The GPU a worker told at its start (distributed's ``gpu`` startup information),
    or None."""
    found = (getattr(ws, "extra", None) or {}).get("gpu")
    if not isinstance(found, Mapping):
        return None
    return gpu_info(found.get("name"), found.get("memory-total"))


def monitors_gpu(ws: WorkerState) -> bool:
    """The worker's system monitor reports a GPU in its heartbeats."""
    metrics = ws.metrics
    return any(name in metrics for name in MONITOR_GPU_METRICS)


def flatten_metrics(metrics: Mapping[Any, Any], prefix: str = "") -> dict[str, float]:
    """Every finite numeric leaf of ``metrics`` under its dotted path.

    ``{"gpu": {"utilization": 37}}`` becomes ``{"gpu.utilization": 37.0}``. Booleans,
    strings and non-finite numbers (NaN: not measured) are left out, as are the
    entries of :data:`SKIPPED_METRICS`.
    """
    out: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if name in SKIPPED_METRICS:
            continue
        if isinstance(value, Mapping):
            out.update(flatten_metrics(value, f"{name}."))
        elif isinstance(value, Real) and not isinstance(value, bool):
            number = float(value)
            if math.isfinite(number):
                out[name] = number
    return out


def worker_sample(ws: WorkerState, *, cluster_id: str, at: float) -> WorkerSampleRecord:
    metrics = ws.metrics
    process, managed, unmanaged, unmanaged_old, unmanaged_recent, spilled = memory_split(ws)
    return WorkerSampleRecord(
        id=stable_id(cluster_id, "worker-sample", ws.address, at),
        cluster_id=cluster_id,
        worker=ws.address,
        sampled_at=at,
        nthreads=ws.nthreads,
        memory_limit=ws.memory_limit or None,
        memory=process,
        managed_bytes=managed,
        unmanaged_bytes=unmanaged,
        unmanaged_old_bytes=unmanaged_old,
        unmanaged_recent_bytes=unmanaged_recent,
        spilled_bytes=spilled,
        cpu_percent=heartbeat_value(metrics, "cpu_percent"),
        executing=len(ws.executing),
        processing=len(ws.processing),
        transfer_incoming_bytes=heartbeat_value(metrics, "transfer_incoming_bytes"),
        transfer_outgoing_bytes=heartbeat_value(metrics, "transfer_outgoing_bytes"),
        net_read_bps=heartbeat_value(metrics, "net_read_bps"),
        net_write_bps=heartbeat_value(metrics, "net_write_bps"),
        disk_read_bps=heartbeat_value(metrics, "disk_read_bps"),
        disk_write_bps=heartbeat_value(metrics, "disk_write_bps"),
        metrics=flatten_metrics(metrics),
    )
