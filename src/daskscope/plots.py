"""Figures of a workflow run (matplotlib, imported on first use):
``MetricsCollector.plot(kind)``. Each function returns the figure; where its data is
missing the figure says why instead of drawing nothing.

Presentation, beside :mod:`daskscope.cli` and :mod:`daskscope.web`: it reads a finished
run and nothing of the workflow's machinery imports it but the collector's ``plot``."""

# ruff: noqa: RUF001 (labels use the typographic minus and multiplication signs)

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daskscope.workflow.run import WorkflowRun

__all__ = [
    "PLOTS",
    "active_tasks_over_time",
    "bytes_read_per_chunk",
    "chunk_cpu_vs_noncpu",
    "chunk_duration_distribution",
    "compression_by_file",
    "cpu_over_time",
    "cpu_per_worker",
    "cpu_vs_noncpu_by_prefix",
    "duration_vs_events",
    "efficiency_summary",
    "executing_tasks_per_worker",
    "memory_per_worker",
    "memory_share_per_worker",
    "occupancy_over_time",
    "overhead_by_prefix",
    "plot",
    "resource_summary",
    "save_plots",
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


def _per_worker(run: WorkflowRun, key: str) -> list[tuple[str, list[Any]]]:
    per = run.tracking_data.get("per_worker") or {}
    return [
        (worker, values[key])
        for worker, values in sorted(per.items())
        if any(v is not None for v in values.get(key) or [])
    ]


def occupancy_over_time(run: WorkflowRun) -> Any:
    fig, ax = _figure("Occupancy over time (Σ over workers)")
    data = _series(run, "occupancy_s")
    if data is None:
        return _missing(fig, ax, "no occupancy samples (Dask backend with worker tracking)")
    ax.step(*data, where="post")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("seconds of work queued (scheduler's estimate)")
    return fig


def active_tasks_over_time(run: WorkflowRun) -> Any:
    fig, ax = _figure("Tasks over time (Σ over workers)")
    executing = _series(run, "active_tasks")
    if executing is None:
        return _missing(fig, ax, "no task samples (Dask backend with worker tracking)")
    ax.step(*executing, where="post", label="executing")
    processing = _series(run, "processing_tasks")
    if processing is not None:
        ax.step(*processing, where="post", label="processing (executing + queued on workers)")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("tasks")
    ax.legend(fontsize="small")
    return fig


def executing_tasks_per_worker(run: WorkflowRun) -> Any:
    fig, ax = _figure("Executing tasks per worker")
    times = run.tracking_data.get("time") or []
    lines = _per_worker(run, "active_tasks")
    if not times or not lines:
        return _missing(fig, ax, "no per-worker task samples (Dask backend)")
    for worker, values in lines:
        ax.step(_rel(run, times), values, where="post", label=worker)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("tasks executing")
    ax.legend(fontsize="small")
    return fig


def cpu_per_worker(run: WorkflowRun) -> Any:
    fig, ax = _figure("CPU per worker")
    times = run.tracking_data.get("time") or []
    lines = _per_worker(run, "cpu_percent")
    if not times or not lines:
        return _missing(fig, ax, "no per-worker CPU samples")
    for worker, values in lines:
        ax.plot(_rel(run, times), values, label=worker)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("% of one core")
    ax.legend(fontsize="small")
    return fig


def memory_share_per_worker(run: WorkflowRun) -> Any:
    fig, ax = _figure("Memory as a share of each worker's limit")
    times = run.tracking_data.get("time") or []
    per = run.tracking_data.get("per_worker") or {}
    lines = []
    for worker, values in sorted(per.items()):
        shares = [
            None if m is None or not limit else 100.0 * m / limit
            for m, limit in zip(
                values.get("memory_bytes") or [],
                values.get("memory_limit_bytes") or [],
                strict=False,
            )
        ]
        if any(v is not None for v in shares):
            lines.append((worker, shares))
    if not times or not lines:
        return _missing(fig, ax, "no per-worker memory limit (Dask backend, limited workers)")
    for worker, shares in lines:
        ax.plot(_rel(run, times)[: len(shares)], shares, label=worker)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("% of the worker's memory limit")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="small")
    return fig


def _chunks_with(run: WorkflowRun, *fields: str) -> list[Any]:
    return [c for c in run.chunks if c.ok and all(getattr(c, f) is not None for f in fields)]


def chunk_cpu_vs_noncpu(run: WorkflowRun) -> Any:
    fig, ax = _figure("Per chunk: CPU vs the rest of its wall time (I/O, waiting)")
    chunks = _chunks_with(run, "wall_s", "cpu_s")
    if not chunks:
        return _missing(fig, ax, "no chunk metrics (@track_metrics)")
    index = list(range(len(chunks)))
    cpu = [c.cpu_s for c in chunks]
    ax.bar(index, cpu, label="CPU (thread time)")
    ax.bar(index, [max(0.0, c.wall_s - c.cpu_s) for c in chunks], bottom=cpu,
           label="wall − CPU")  # fmt: skip
    ax.set_xlabel("chunk (start order)")
    ax.set_ylabel("seconds")
    ax.legend(fontsize="small")
    return fig


def bytes_read_per_chunk(run: WorkflowRun) -> Any:
    fig, ax = _figure("Bytes read per chunk (uproot)")
    chunks = _chunks_with(run, "bytes_read")
    if not chunks:
        return _missing(fig, ax, "no bytes read reported (not an uproot input)")
    ax.bar(range(len(chunks)), [c.bytes_read / 2**20 for c in chunks])
    ax.set_xlabel("chunk (start order)")
    ax.set_ylabel("MiB requested")
    return fig


def compression_by_file(run: WorkflowRun) -> Any:
    fig, ax = _figure("Compression ratio per input file (uproot)")
    trees: dict[str, float] = {}
    for c in _chunks_with(run, "tree_compressed_bytes", "tree_uncompressed_bytes"):
        if c.tree_compressed_bytes:
            name = os.path.basename(str(c.filename))
            trees[name] = c.tree_uncompressed_bytes / c.tree_compressed_bytes
    if not trees:
        return _missing(fig, ax, "no uproot tree sizes")
    names = sorted(trees)
    ax.barh(names, [trees[n] for n in names])
    ax.set_xlabel("uncompressed ÷ compressed bytes")
    return fig


_OVERHEAD = ("serialize", "deserialize", "compress", "decompress")


def overhead_by_prefix(run: WorkflowRun) -> Any:
    fig, ax = _figure("(De)serialization and (de)compression per task prefix")
    from daskscope.collector.snapshot import metric_parts

    per: dict[str, dict[str, float]] = {}
    for key, value in run.span_metrics.items():
        _, prefix, activity, unit = metric_parts(key)
        if activity in _OVERHEAD and unit == "seconds":
            row = per.setdefault(prefix, dict.fromkeys(_OVERHEAD, 0.0))
            row[activity] += value
    if not per:
        why = f"no (de)serialization in the fine metrics ({run.backend} backend)"
        return _missing(fig, ax, why)
    names = sorted(per)
    left = [0.0] * len(names)
    for activity in _OVERHEAD:
        widths = [per[n][activity] for n in names]
        ax.barh(names, widths, left=left, label=activity)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_xlabel("seconds")
    ax.legend(fontsize="small")
    return fig


#: (metric key, bar label, scale) per panel of the two summaries: each panel one unit
EFFICIENCY = (
    (("speedup", "speedup (×)", 1.0), ("cores", "cores (ideal speedup)", 1.0)),
    (("parallel_efficiency", "parallel efficiency", 100.0),
     ("cpu_percent", "CPU share of task time", 1.0)),
)  # fmt: skip
RESOURCES = (
    (("cores", "cores", 1.0), ("workers_avg", "workers (mean)", 1.0),
     ("workers_peak", "workers (peak)", 1.0)),
    (("memory_avg_bytes", "mean", 2.0**-30), ("memory_peak_bytes", "peak", 2.0**-30)),
)  # fmt: skip
_PANEL_UNITS = {"Efficiency": ("×", "%"), "Resources": ("count", "memory, GiB (Σ workers)")}


def _summary(run: WorkflowRun, title: str, panels: tuple[tuple[Any, ...], ...]) -> Any:
    import matplotlib.pyplot as plt

    bars = [
        [(label, run.metrics[key] * scale) for key, label, scale in panel
         if isinstance(run.metrics.get(key), int | float)]
        for panel in panels
    ]  # fmt: skip
    if not any(bars):
        fig, ax = _figure(title)
        return _missing(fig, ax, "none of its figures was measured")
    _figure(title)  # the backend choice
    plt.close()
    fig, axes = plt.subplots(1, len(panels), figsize=(9, 4))
    fig.suptitle(title)
    for ax, panel, unit in zip(axes, bars, _PANEL_UNITS[title], strict=True):
        if not panel:
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
            continue
        drawn = ax.bar([b[0] for b in panel], [b[1] for b in panel])
        ax.bar_label(drawn, fmt="%.3g")
        ax.set_ylabel(unit)
        ax.tick_params(axis="x", labelrotation=15)
    fig.tight_layout()
    return fig


def efficiency_summary(run: WorkflowRun) -> Any:
    return _summary(run, "Efficiency", EFFICIENCY)


def resource_summary(run: WorkflowRun) -> Any:
    return _summary(run, "Resources", RESOURCES)


PLOTS: dict[str, Callable[..., Any]] = {
    "workers": workers_over_time,
    "memory": memory_per_worker,
    "cpu": cpu_over_time,
    "throughput": throughput_over_time,
    "chunk_durations": chunk_duration_distribution,
    "duration_vs_events": duration_vs_events,
    "cpu_vs_noncpu": cpu_vs_noncpu_by_prefix,
    "occupancy": occupancy_over_time,
    "active_tasks": active_tasks_over_time,
    "executing_per_worker": executing_tasks_per_worker,
    "cpu_per_worker": cpu_per_worker,
    "memory_share": memory_share_per_worker,
    "chunk_cpu_vs_noncpu": chunk_cpu_vs_noncpu,
    "bytes_per_chunk": bytes_read_per_chunk,
    "compression": compression_by_file,
    "overhead_by_prefix": overhead_by_prefix,
    "efficiency": efficiency_summary,
    "resources": resource_summary,
}


def plot(
    run: WorkflowRun, kind: str, output_path: str | os.PathLike[str] | None = None, **kwargs: Any
) -> Any:
    """The figure ``kind`` of :data:`PLOTS`; saved as PNG to ``output_path`` when given."""
    if kind not in PLOTS:
        raise KeyError(f"no plot {kind!r}; the plots are: {', '.join(PLOTS)}")
    fig = PLOTS[kind](run, **kwargs)
    if output_path is not None:
        target = Path(output_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target, dpi=100, bbox_inches="tight")
    return fig


def save_plots(run: WorkflowRun, output_path: str | os.PathLike[str]) -> dict[str, Path]:
    """Every figure of :data:`PLOTS` as ``<output_path>/<kind>.png`` (the folder is
    made); returns ``{kind: file}``. A figure without data is saved too, saying why."""
    import matplotlib.pyplot as plt

    folder = Path(output_path)
    folder.mkdir(parents=True, exist_ok=True)
    saved = {}
    for kind in PLOTS:
        fig = plot(run, kind, output_path=folder / f"{kind}.png")
        plt.close(fig)
        saved[kind] = folder / f"{kind}.png"
    return saved
