"""Workflow metrics: pure functions from what was measured to the documented keys.

Every key is defined in ``docs/workflow.md`` (unit, formula, source). A key whose inputs
were not measured is left out: absent, never zero and never guessed.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from daskscope.collector.dask_adapter import IDLE_KEY
from daskscope.collector.snapshot import metric_parts
from daskscope.workflow.chunk import Chunk, plain

__all__ = [
    "aggregate_sections",
    "apply_derived",
    "chunk_attempts",
    "custom_dataset_metrics",
    "dataset_metrics",
    "derived_metrics",
    "input_sizes",
    "parse_fine_metrics",
    "register_derived_metric",
    "time_weighted",
    "with_custom_metrics",
    "workflow_metrics",
]

logger = logging.getLogger("daskscope")

#: ``fn(workflow_metrics, worker_metrics) -> {new key: value}``; ``worker_metrics`` holds
#: ``avg_workers``/``workers_avg``, ``peak_workers``/``workers_peak``, ``cores``,
#: ``memory_avg_bytes``, ``memory_peak_bytes`` (those measured) and ``tracking_data``
DerivedMetric = Callable[[Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]]
_DERIVED: list[DerivedMetric] = []

# activity -> metric key stem, summed over every context and prefix
_TRANSFER_ACTIVITIES = {
    "serialize": "serialize",
    "deserialize": "deserialize",
    "compress": "compress",
    "decompress": "decompress",
}


def register_derived_metric(fn: DerivedMetric) -> DerivedMetric:
    """Add ``fn`` to every collector's metrics; usable as a decorator."""
    if fn not in _DERIVED:
        _DERIVED.append(fn)
    return fn


def derived_metrics() -> list[DerivedMetric]:
    return list(_DERIVED)


def parse_fine_metrics(
    span_metrics: Mapping[tuple[Hashable, ...], float], processor_prefixes: Iterable[str] = ()
) -> dict[str, float]:
    """Dask's fine metrics of the run's span (whole subtree) as workflow keys.

    ``cpu_seconds``/``noncpu_seconds`` are the ``thread-cpu``/``thread-noncpu`` seconds
    of task execution; the ``processor_*``/``overhead_*`` split puts the task prefixes
    in ``processor_prefixes`` on one side and all others on the other.
    """
    processor = set(processor_prefixes)
    out: dict[str, float] = {
        "cpu_seconds": 0.0,
        "noncpu_seconds": 0.0,
        "execute_seconds": 0.0,
        "spill_read_bytes": 0.0,
        "spill_write_bytes": 0.0,
        "spill_read_seconds": 0.0,
        "spill_write_seconds": 0.0,
        **{f"{stem}_seconds": 0.0 for stem in _TRANSFER_ACTIVITIES.values()},
    }
    split = {f"{side}_{kind}": 0.0 for side in ("processor", "overhead")
             for kind in ("seconds", "cpu_seconds", "noncpu_seconds")}  # fmt: skip
    activities: dict[str, float] = {}
    for key, value in span_metrics.items():
        if tuple(key) == IDLE_KEY:
            continue
        context, prefix, activity, unit = metric_parts(tuple(key))
        # Every activity Dask reports, summed over contexts and prefixes: the set is open
        name = "activity_" + _slug(f"{activity}_{unit}")
        activities[name] = activities.get(name, 0.0) + value
        if activity in ("disk-read", "disk-write"):
            side = "read" if activity == "disk-read" else "write"
            if unit in ("bytes", "seconds"):
                out[f"spill_{side}_{unit}"] += value
            continue
        stem = _TRANSFER_ACTIVITIES.get(activity)
        if stem is not None and unit == "seconds":
            out[f"{stem}_seconds"] += value
        if context != "execute" or unit != "seconds":
            continue
        out["execute_seconds"] += value
        side = "processor" if prefix in processor else "overhead"
        split[f"{side}_seconds"] += value
        if activity == "thread-cpu":
            out["cpu_seconds"] += value
            split[f"{side}_cpu_seconds"] += value
        elif activity == "thread-noncpu":
            out["noncpu_seconds"] += value
            split[f"{side}_noncpu_seconds"] += value
    if processor:
        out.update(split)
    out.update(activities)
    busy = out["cpu_seconds"] + out["noncpu_seconds"]
    if busy > 0:
        out["cpu_percent"] = 100.0 * out["cpu_seconds"] / busy
    return out


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in str(text).lower())


def _identity(chunk: Chunk) -> Any:
    # The same piece of input: a retry of a coffea chunk reads the same entry range;
    # a retried Dask task keeps its key
    if chunk.filename is not None and chunk.entry_start is not None:
        return ("range", chunk.dataset, chunk.filename, chunk.entry_start, chunk.entry_stop)
    if chunk.task_key is not None:
        return ("task", chunk.task_key)
    return ("chunk", chunk.chunk_id)


def chunk_attempts(chunks: list[Chunk]) -> dict[str, int]:
    """Numbers each chunk's attempts in time order (``attempt``, from 1) and counts them:
    chunks processed, attempts, failed attempts, chunks retried, chunks never done."""
    groups: dict[Any, list[Chunk]] = {}
    for chunk in sorted(chunks, key=lambda c: c.started_at or 0):
        groups.setdefault(_identity(chunk), []).append(chunk)
    failed_attempts = retried = never = 0
    for attempts in groups.values():
        for number, chunk in enumerate(attempts, 1):
            chunk.attempt = number
        failures = sum(1 for c in attempts if not c.ok)
        failed_attempts += failures
        if any(c.ok for c in attempts):
            retried += failures > 0
        else:
            never += 1
    return {
        "num_chunk_attempts": len(chunks),
        "num_failed_attempts": failed_attempts,
        "num_chunks_retried": retried,
        "num_chunks_failed": never,
    }


def time_weighted(times: list[float], values: list[Any]) -> tuple[float, float] | None:
    """(time-weighted mean, peak) of a step series; None without any value."""
    pairs = [(t, v) for t, v in zip(times, values, strict=False) if v is not None]
    if not pairs:
        return None
    peak = max(v for _, v in pairs)
    if len(pairs) == 1 or pairs[-1][0] <= pairs[0][0]:
        return float(pairs[0][1]), float(peak)
    area = sum(v * (t1 - t0) for (t0, v), (t1, _) in itertools.pairwise(pairs))
    return area / (pairs[-1][0] - pairs[0][0]), float(peak)


def _sum(chunks: list[Chunk], key: str) -> float | None:
    values = [getattr(c, key) for c in chunks]
    if not values or any(v is None for v in values):
        return None  # one chunk without the number: the total is unknown
    total: float = sum(values)
    return total


def workflow_metrics(
    *,
    wall_time_s: float,
    chunks: list[Chunk],
    report: Mapping[str, Any] | None = None,
    span_metrics: Mapping[tuple[Hashable, ...], float] | None = None,
    parser: Callable[..., dict[str, float]] | None = None,
    tracking: Mapping[str, Any] | None = None,
    info: Mapping[str, Any] | None = None,
    processor_prefixes: Iterable[str] = (),
    derived: Iterable[DerivedMetric] = (),
) -> dict[str, Any]:
    """The workflow-level metrics (see ``docs/workflow.md`` for each key)."""
    info = info or {}
    tracking = tracking or {}
    out: dict[str, Any] = {"wall_time_s": wall_time_s}

    def put(key: str, value: Any) -> None:
        if value is not None:
            out[key] = value

    report = report or {}
    attempts = chunk_attempts(chunks) if chunks else {}
    done = [c for c in chunks if c.ok]
    # What was actually processed comes from the chunks; coffea's report counts the
    # chunks it planned (skipped files included), so it is used only without chunks
    if done:
        put("total_events", _sum(done, "events"))
        put("bytes_read", _sum(done, "bytes_read"))
        out["num_chunks"] = len(done)
    elif not chunks:
        put("total_events", report.get("entries"))
        put("bytes_read", report.get("bytesread"))
        put("num_chunks", report.get("chunks"))
    else:  # every attempt failed: nothing was processed
        out["total_events"], out["num_chunks"] = 0, 0
    if chunks:
        out.update(attempts)
    if report.get("chunks") is not None:
        out["num_chunks_planned"] = report["chunks"]
        if done:
            # skipped (skipbadfiles) or lost before they reached the collector
            out["num_chunks_not_processed"] = max(0, report["chunks"] - len(done))
    if report.get("entries") is not None:
        out["report_events"] = report["entries"]
    processing = _sum(done, "wall_s") if done else report.get("processtime")
    put("processing_time_s", processing)
    if done:
        out.update(input_sizes(done))
        put("chunk_cpu_seconds", _sum(done, "cpu_s"))
        peaks = [c.memory_peak_bytes for c in done if c.memory_peak_bytes is not None]
        put("chunk_memory_peak_bytes", max(peaks) if peaks else None)

    times = tracking.get("time") or []
    threads = time_weighted(times, tracking.get("threads") or [])
    cores = threads[0] if threads else info.get("cores")
    put("cores", cores)
    workers = time_weighted(times, tracking.get("workers") or [])
    if workers:
        out["workers_avg"], out["workers_peak"] = workers[0], int(workers[1])
    memory = time_weighted(times, tracking.get("memory_bytes") or [])
    if memory:
        out["memory_avg_bytes"], out["memory_peak_bytes"] = memory[0], int(memory[1])

    wall = wall_time_s if wall_time_s > 0 else None
    events, nbytes = out.get("total_events"), out.get("bytes_read")
    if wall:
        if nbytes is not None:
            out["data_rate_gbps"] = nbytes * 8 / wall / 1e9
        if events is not None:
            out["event_rate_wall_khz"] = events / wall / 1e3
            if cores:
                out["event_rate_core_khz"] = events / (wall * cores) / 1e3
        if processing is not None:
            out["speedup"] = processing / wall
            if cores:
                out["parallel_efficiency"] = processing / (wall * cores)
    if processing:
        out.update(_busy_rates(events, nbytes, processing))

    if span_metrics and parser is not None:
        out.update(parser(span_metrics, set(processor_prefixes)))
    elif info.get("process_cpu_seconds") is not None:
        out["cpu_seconds"] = info["process_cpu_seconds"]
    cpu = out.get("cpu_seconds")
    if events is not None and cpu:
        # the spec's "events per total CPU-second", CPU summed across workers
        out["event_rate_per_cpu_second_khz"] = events / cpu / 1e3

    if info.get("status"):
        out["status"] = info["status"]
        if info.get("error"):
            out["error"] = info["error"]

    apply_derived(out, tracking, derived)
    return out


def input_sizes(chunks: list[Chunk]) -> dict[str, Any]:
    """The compressed and uncompressed bytes of the input trees, once per file (a file's
    chunks all carry its tree's figures), and their ratio; absent when any chunk lacks
    them (not an uproot input)."""
    trees: dict[tuple[Any, Any], tuple[int, int]] = {}
    for chunk in chunks:
        if chunk.tree_compressed_bytes is None or chunk.tree_uncompressed_bytes is None:
            return {}
        key = (chunk.filename, chunk.treename)
        trees[key] = (chunk.tree_compressed_bytes, chunk.tree_uncompressed_bytes)
    if not trees:
        return {}
    compressed = sum(c for c, _ in trees.values())
    uncompressed = sum(u for _, u in trees.values())
    out: dict[str, Any] = {
        "input_compressed_bytes": compressed,
        "input_uncompressed_bytes": uncompressed,
    }
    if compressed > 0:
        out["compression_ratio"] = uncompressed / compressed
    return out


def _busy_rates(events: Any, nbytes: Any, processing: float) -> dict[str, float]:
    # per second a chunk was running (Σ chunk wall), not per second of the run
    out = {}
    if events is not None:
        out["event_rate_per_chunk_second_khz"] = events / processing / 1e3
    if nbytes is not None:
        out["data_rate_per_chunk_second_gbps"] = nbytes * 8 / processing / 1e9
    return out


#: per dataset: (figure, the chunk field summed over its chunks)
_DATASET_SUMS = (
    ("total_events", "events"),
    ("bytes_read", "bytes_read"),
    ("processing_time_s", "wall_s"),
    ("chunk_cpu_seconds", "cpu_s"),
)


def dataset_metrics(chunks: list[Chunk]) -> dict[str, dict[str, Any]]:
    """Per dataset named by the chunks (coffea's ``events.metadata["dataset"]``), the
    workflow figures of its chunks: chunks done and failed attempts, events and bytes
    read (Σ over the chunks that succeeded; absent when one lacks it), processing and CPU
    seconds (Σ chunk ``wall_s``/``cpu_s``) and the per-busy-second rates made of them.
    Datasets processed side by side share the run's wall time, so no wall-time rate."""
    by: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        if chunk.dataset is not None:
            by.setdefault(str(chunk.dataset), []).append(chunk)
    out: dict[str, dict[str, Any]] = {}
    for name, attempts in sorted(by.items()):
        done = [c for c in attempts if c.ok]
        figures: dict[str, Any] = {
            "num_chunks": len(done),
            "num_failed_attempts": len(attempts) - len(done),
        }
        if not done:  # every attempt failed: nothing of it was processed
            figures["total_events"] = 0
            out[name] = figures
            continue
        for key, field in _DATASET_SUMS:
            total = _sum(done, field)
            if total is not None:
                figures[key] = total
        figures.update(input_sizes(done))
        processing = figures.get("processing_time_s")
        if processing:
            events, nbytes = figures.get("total_events"), figures.get("bytes_read")
            figures.update(_busy_rates(events, nbytes, processing))
        out[name] = figures
    return out


#: the figures measured per dataset: a custom metric may not take one of these names
DATASET_KEYS = frozenset({
    "num_chunks", "num_failed_attempts", *(key for key, _ in _DATASET_SUMS),
    "event_rate_per_chunk_second_khz", "data_rate_per_chunk_second_gbps",
    "input_compressed_bytes", "input_uncompressed_bytes", "compression_ratio",
})  # fmt: skip


def custom_dataset_metrics(custom: Any) -> dict[str, dict[str, Any]]:
    """The user's per-dataset figures ``{dataset: {name: value}}`` made plain: a nested
    mapping becomes dotted names (``performance_counters.num_requested_bytes``); a name
    the collector measures itself is refused (ValueError saying to rename it)."""
    if not isinstance(custom, Mapping) or not all(isinstance(v, Mapping) for v in custom.values()):
        raise TypeError(
            "custom_metrics must map each dataset name to a dict of its figures, e.g. "
            "{'ttbar': {'cutflow_passed': 812}}"
        )
    out: dict[str, dict[str, Any]] = {}
    for dataset, figures in custom.items():
        flat = _flatten(figures)
        clash = sorted(set(flat) & DATASET_KEYS)
        if clash:
            raise ValueError(
                f"custom_metrics of dataset {dataset!r} use names daskscope measures itself "
                f"({', '.join(clash)}): rename them, e.g. 'my_{clash[0]}'"
            )
        out[str(dataset)] = {k: plain(v) for k, v in flat.items()}
    return out


def _flatten(figures: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in figures.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def with_custom_metrics(
    datasets: Mapping[str, Mapping[str, Any]], custom: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The measured per-dataset figures with the user's beside them (a dataset only the
    user names gets only the user's figures)."""
    out = {name: dict(figures) for name, figures in datasets.items()}
    for name, figures in custom.items():
        out.setdefault(name, {}).update(figures)
    return out


def apply_derived(
    metrics: dict[str, Any], tracking: Mapping[str, Any], derived: Iterable[DerivedMetric]
) -> None:
    """Add each derived metric's keys to ``metrics``; one that raises is skipped."""
    workers_view = worker_metrics(metrics, tracking)
    for fn in derived:
        try:
            extra = fn(dict(metrics), workers_view)
        except Exception:
            logger.warning("daskscope: derived metric %r failed; skipped", fn, exc_info=True)
            continue
        # plain values (a tuple is a list, numpy's numbers are Python's) so that the run
        # reads back alike from a saved file or the store; NaN is not a number: absent
        values = {str(k): plain(v) for k, v in (extra or {}).items()}
        metrics.update({k: v for k, v in values.items() if v is not None})


def worker_metrics(metrics: Mapping[str, Any], tracking: Mapping[str, Any]) -> dict[str, Any]:
    """The worker-level figures a derived metric reads (seed names and ours)."""
    view: dict[str, Any] = {"tracking_data": dict(tracking)}
    for ours, seed in (("workers_avg", "avg_workers"), ("workers_peak", "peak_workers")):
        if ours in metrics:
            view[ours] = view[seed] = metrics[ours]
    for key in ("cores", "memory_avg_bytes", "memory_peak_bytes"):
        if key in metrics:
            view[key] = metrics[key]
    return view


def aggregate_sections(chunks: list[Chunk]) -> dict[str, dict[str, Any]]:
    """Per section over all chunks: calls, chunks, Σ and mean of each measured value."""
    out: dict[str, dict[str, Any]] = {}
    for chunk in chunks:
        for name, section in chunk.sections.items():
            agg = out.setdefault(name, {"kind": section.get("kind"), "chunks": 0, "count": 0})
            agg["chunks"] += 1
            for key, value in section.items():
                if key == "kind":
                    continue
                if key == "memory_after_bytes":
                    agg["memory_after_peak_bytes"] = max(
                        agg.get("memory_after_peak_bytes", 0), value
                    )
                    continue
                agg[key] = agg.get(key, 0) + value
    for agg in out.values():
        for key in ("wall_s", "cpu_s", "memory_delta_bytes"):
            if key in agg and agg["count"]:
                agg[f"mean_{key}"] = agg[key] / agg["count"]
    return out
