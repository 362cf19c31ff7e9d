"""Figures of a workflow run (matplotlib, imported on first use):
``MetricsCollector.plot(kind)``. Each function returns the figure; where its data is
missing the figure says why instead of drawing nothing.

Presentation, beside :mod:`daskscope.cli` and :mod:`daskscope.web`: it reads a finished
run and nothing of the workflow's machinery imports it but the collector's ``plot``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daskscope.workflow.run import WorkflowRun

__all__ = [
    "PLOTS",
    "chunk_duration_distribution",
    "cpu_over_time",
    "cpu_vs_noncpu_by_prefix",
    "duration_vs_events",
    "memory_per_worker",
    "throughput_over_time",
    "workers_over_time",
]


def _figure(title: str) -> tuple[Any, Any]:
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.set_title(title)
    return fig, ax


def _missing(fig: Any, ax: Any, why: str) -> Any:
    ax.text(0.5, 0.5, f"not measured: {why}", ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    fig.daskscope_missing = why  # lets callers and tests tell an empty figure apart
    return fig


def _rel(run: WorkflowRun, times: list[float]) -> list[float]:
    return [t - run.started_at for t in times]


def _series(run: WorkflowRun, key: str) -> tuple[list[float], list[Any]] | None:
    times = run.tracking_data.get("time") or []
    values = run.tracking_data.get(key) or []
    if not times or not any(v is not None for v in values):
        return None
    return _rel(run, times), values


def workers_over_time(run: WorkflowRun) -> Any:
    fig, ax = _figure("Workers over time")
    data = _series(run, "workers")
    if data is None:
        return _missing(fig, ax, "no worker tracking (worker_tracking_interval=None?)")
    ax.step(*data, where="post")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("workers")
    return fig


def memory_per_worker(run: WorkflowRun) -> Any:
    fig, ax = _figure("Memory per worker")
    times = run.tracking_data.get("time") or []
    per = run.tracking_data.get("per_worker") or {}
    lines = [
        (w, v["memory_bytes"])
        for w, v in per.items()
        if any(x is not None for x in v.get("memory_bytes", []))
    ]
    if not times or not lines:
        return _missing(fig, ax, "no per-worker memory samples")
    for worker, values in lines:
        ax.plot(_rel(run, times), [None if v is None else v / 2**20 for v in values], label=worker)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("MiB")
    ax.legend(fontsize="small")
    return fig


def cpu_over_time(run: WorkflowRun) -> Any:
    fig, ax = _figure("CPU over time (mean over workers)")
    data = _series(run, "cpu_percent")
    if data is None:
        return _missing(fig, ax, "no CPU samples")
    ax.plot(*data)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("% of one core")
    return fig


def throughput_over_time(run: WorkflowRun, bins: int = 20) -> Any:
    fig, ax = _figure("Throughput over time")
    chunks = [c for c in run.chunks if c.events is not None and c.stopped_at]
    if not chunks:
        return _missing(fig, ax, "no chunk with events and an end time")
    ends = [c.stopped_at - run.started_at for c in chunks if c.stopped_at]
    width = max(max(ends), 1e-9) / bins
    counts = [0.0] * bins
    for end, c in zip(ends, chunks, strict=True):
        counts[min(bins - 1, int(end / width))] += c.events or 0
    ax.bar(
        [i * width for i in range(bins)],
        [n / width / 1e3 for n in counts],
        width=width,
        align="edge",
    )
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("kHz (events finished per second)")
    return fig


def chunk_duration_distribution(run: WorkflowRun) -> Any:
    fig, ax = _figure("Chunk durations")
    values = [c.wall_s for c in run.chunks if c.wall_s is not None]
    if not values:
        return _missing(fig, ax, "no chunk metrics (@track_metrics)")
    ax.hist(values, bins=min(30, max(5, len(values))))
    ax.set_xlabel("seconds")
    ax.set_ylabel("chunks")
    return fig


def duration_vs_events(run: WorkflowRun) -> Any:
    fig, ax = _figure("Chunk duration vs events")
    pairs = [(c.events, c.wall_s) for c in run.chunks if None not in (c.events, c.wall_s)]
    if not pairs:
        return _missing(fig, ax, "no chunk with both events and a duration")
    ax.scatter([p[0] for p in pairs], [p[1] for p in pairs], s=10)
    ax.set_xlabel("events")
    ax.set_ylabel("seconds")
    return fig


def cpu_vs_noncpu_by_prefix(run: WorkflowRun) -> Any:
    fig, ax = _figure("CPU vs non-CPU per task prefix")
    from daskscope.collector.snapshot import metric_parts

    per: dict[str, dict[str, float]] = {}
    for key, value in run.span_metrics.items():
        context, prefix, activity, unit = metric_parts(key)
        if (
            context == "execute"
            and unit == "seconds"
            and activity in ("thread-cpu", "thread-noncpu")
        ):
            per.setdefault(prefix, {"thread-cpu": 0.0, "thread-noncpu": 0.0})[activity] += value
    if not per:
        return _missing(fig, ax, f"no fine metrics ({run.backend} backend)")
    names = sorted(per)
    cpu = [per[n]["thread-cpu"] for n in names]
    ax.barh(names, cpu, label="CPU")
    ax.barh(names, [per[n]["thread-noncpu"] for n in names], left=cpu, label="non-CPU")
    ax.set_xlabel("seconds")
    ax.legend()
    return fig


PLOTS: dict[str, Callable[..., Any]] = {
    "workers": workers_over_time,
    "memory": memory_per_worker,
    "cpu": cpu_over_time,
    "throughput": throughput_over_time,
    "chunk_durations": chunk_duration_distribution,
    "duration_vs_events": duration_vs_events,
    "cpu_vs_noncpu": cpu_vs_noncpu_by_prefix,
}
