"""The run's summary as Rich tables. A number that was not measured says so."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.table import Table

from daskscope.workflow.run import WorkflowRun

__all__ = ["NOT_MEASURED", "print_summary", "summary_tables"]

NOT_MEASURED = "not measured"


def _num(fmt: str) -> Callable[[Any], str]:
    return lambda v: format(v, fmt)


def _bytes(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return str(value)


def _pct(value: float) -> str:
    return f"{100 * value:.1f} %"


# (label, key, formatter) per table
_SECTIONS: dict[str, list[tuple[str, str, Callable[[Any], str]]]] = {
    "Throughput": [
        ("data rate", "data_rate_gbps", lambda v: f"{v:.4f} Gbit/s"),
        ("event rate (wall)", "event_rate_wall_khz", lambda v: f"{v:.3f} kHz"),
        ("event rate (aggregated)", "event_rate_aggregated_khz", lambda v: f"{v:.3f} kHz"),
        ("event rate (per core)", "event_rate_core_khz", lambda v: f"{v:.3f} kHz"),
        ("speedup", "speedup", lambda v: f"{v:.2f}x"),
        ("parallel efficiency", "parallel_efficiency", _pct),
    ],
    "Events": [
        ("events", "total_events", _num(",")),
        ("bytes read", "bytes_read", _bytes),
        ("chunks", "num_chunks", _num(",")),
    ],
    "Resources": [
        ("cores", "cores", _num(".1f")),
        ("workers (time-weighted mean)", "workers_avg", _num(".2f")),
        ("workers (peak)", "workers_peak", _num("d")),
        ("memory (peak, all workers)", "memory_peak_bytes", _bytes),
        ("memory (time-weighted mean)", "memory_avg_bytes", _bytes),
        ("chunk memory peak", "chunk_memory_peak_bytes", _bytes),
    ],
    "Timing": [
        ("wall time", "wall_time_s", lambda v: f"{v:.3f} s"),
        ("processing time (Σ chunks)", "processing_time_s", lambda v: f"{v:.3f} s"),
        ("chunk CPU time (Σ)", "chunk_cpu_seconds", lambda v: f"{v:.3f} s"),
    ],
    "Fine metrics": [
        ("CPU", "cpu_seconds", lambda v: f"{v:.3f} s"),
        ("non-CPU (I/O, GIL, contention, ...)", "noncpu_seconds", lambda v: f"{v:.3f} s"),
        ("CPU share of task time", "cpu_percent", lambda v: f"{v:.1f} %"),
        ("processor: task time", "processor_seconds", lambda v: f"{v:.3f} s"),
        ("processor: CPU", "processor_cpu_seconds", lambda v: f"{v:.3f} s"),
        ("overhead: task time", "overhead_seconds", lambda v: f"{v:.3f} s"),
        ("overhead: CPU", "overhead_cpu_seconds", lambda v: f"{v:.3f} s"),
        ("spill read", "spill_read_bytes", _bytes),
        ("spill write", "spill_write_bytes", _bytes),
        ("serialize", "serialize_seconds", lambda v: f"{v:.3f} s"),
        ("deserialize", "deserialize_seconds", lambda v: f"{v:.3f} s"),
        ("compress", "compress_seconds", lambda v: f"{v:.3f} s"),
        ("decompress", "decompress_seconds", lambda v: f"{v:.3f} s"),
    ],
}


def _why_missing(run: WorkflowRun, key: str) -> str:
    caps = run.capabilities
    if key in ("cpu_seconds",) and "process_cpu" in caps:
        return NOT_MEASURED
    fine = {k for _, k, _ in _SECTIONS["Fine metrics"]}
    if key in fine and "fine_metrics" not in caps:
        return f"{NOT_MEASURED} ({run.backend} backend has no fine metrics)"
    if key.startswith(("processor_", "overhead_")) and not run.info.get("processor_prefixes"):
        return f"{NOT_MEASURED} (no processor task prefix known)"
    tracked = ("workers_avg", "workers_peak", "memory_peak_bytes", "memory_avg_bytes")
    if key in tracked and "tracking" not in caps:
        return f"{NOT_MEASURED} (worker tracking off)"
    return NOT_MEASURED


def summary_tables(run: WorkflowRun) -> list[Table]:
    tables = []
    for title, rows in _SECTIONS.items():
        table = Table(title=f"{title} — {run.name}", show_header=False, title_justify="left")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for label, key, fmt in rows:
            value = run.metrics.get(key)
            text = fmt(value) if value is not None else f"[dim]{_why_missing(run, key)}[/dim]"
            table.add_row(label, text)
        tables.append(table)
    known = {k for rows in _SECTIONS.values() for _, k, _ in rows}
    extra = {k: v for k, v in run.metrics.items() if k not in known}
    if extra:
        table = Table(title="Other metrics", show_header=False, title_justify="left")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for key, value in sorted(extra.items()):
            table.add_row(key, f"{value:.6g}" if isinstance(value, float) else str(value))
        tables.append(table)
    tables.append(_chunk_table(run))
    tables.append(_section_table(run))
    return tables


def _chunk_table(run: WorkflowRun) -> Table:
    table = Table(title="Chunks", title_justify="left")
    for col in ("", "n", "mean", "median", "min", "max"):
        table.add_column(col, justify="right" if col else "left")
    chunks = run.chunk_metrics
    if not chunks:
        table.add_row(f"[dim]{NOT_MEASURED} (no @track_metrics chunk reached the collector)[/dim]")
        return table
    for label, key, fmt in (
        ("wall", "wall_s", lambda v: f"{v:.4f} s"),
        ("CPU", "cpu_s", lambda v: f"{v:.4f} s"),
        ("events", "events", lambda v: f"{v:,.0f}"),
        ("bytes read", "bytes_read", _bytes),
        ("memory peak", "memory_peak_bytes", _bytes),
    ):
        values = [c[key] for c in chunks if c.get(key) is not None]
        if not values:
            table.add_row(label, "0", f"[dim]{NOT_MEASURED}[/dim]", "", "", "")
            continue
        table.add_row(
            label, str(len(values)), fmt(statistics.fmean(values)),
            fmt(statistics.median(values)), fmt(min(values)), fmt(max(values)),
        )  # fmt: skip
    return table


def _section_table(run: WorkflowRun) -> Table:
    table = Table(title="Sections", title_justify="left")
    for col in ("section", "kind", "chunks", "calls", "wall Σ", "wall mean", "CPU Σ", "memory Δ Σ"):
        table.add_column(col, justify="left" if col in ("section", "kind") else "right")
    if not run.sections:
        table.add_row(f"[dim]{NOT_MEASURED} (no track_time/track_memory section ran)[/dim]")
    for name, agg in run.sections.items():
        table.add_row(
            name, str(agg.get("kind")), str(agg["chunks"]), str(agg["count"]),
            f"{agg['wall_s']:.4f} s" if "wall_s" in agg else "—",
            f"{agg['mean_wall_s']:.4f} s" if "mean_wall_s" in agg else "—",
            f"{agg['cpu_s']:.4f} s" if "cpu_s" in agg else "—",
            _bytes(agg["memory_delta_bytes"]) if "memory_delta_bytes" in agg else "—",
        )  # fmt: skip
    return table


def print_summary(run: WorkflowRun, console: Console | None = None) -> None:
    (console or Console()).print(Group(*summary_tables(run)))
