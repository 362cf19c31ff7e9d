"""Figures of a workflow run and its chunks (``workflow/metrics.py`` computes them;
``docs/workflow.md`` tells how each is measured, backend by backend)."""

# ruff: noqa: RUF001 (formulas use the typographic multiplication and minus signs of the docs)

from __future__ import annotations

from daskscope.catalogue.figure import Better, Figure

__all__ = ["FIGURES"]

_FINE = "fine metrics of the run's span"
_REPORT = "uproot's report (awkward path)"


def _w(
    key: str, label: str, unit: str, formula: str, source: str = "", better: Better = None
) -> Figure:
    return Figure("workflow", key, label, unit, formula, source or "the collector", better)


def _split(side: str, which: str) -> tuple[Figure, ...]:
    return (
        _w(f"{side}_seconds", f"{side}: task time", "seconds",
           f"Σ `(\"execute\", *, *, \"seconds\")` over {which}", _FINE),
        _w(f"{side}_cpu_seconds", f"{side}: CPU", "seconds",
           f"Σ `(\"execute\", *, \"thread-cpu\", \"seconds\")` over {which}", _FINE),
        _w(f"{side}_noncpu_seconds", f"{side}: non-CPU", "seconds",
           f"Σ `(\"execute\", *, \"thread-noncpu\", \"seconds\")` over {which}", _FINE),
    )  # fmt: skip


FIGURES: tuple[Figure, ...] = (
    _w("wall_time_s", "wall time", "seconds",
       "exit − enter of the collector (its own set-up and exit work excluded)",
       "`time.perf_counter` in the client", "lower"),
    _w("total_events", "events", "count",
       "Σ chunk `events` of the chunks that succeeded, else coffea's report `entries`",
       "`len(events)` / `report_events` / coffea's report"),
    _w("bytes_read", "bytes read", "bytes",
       "Σ chunk `bytes_read` of the chunks that succeeded (absent if any lacks it), else "
       "the report's `bytesread`", "uproot `source.num_requested_bytes`"),
    _w("input_compressed_bytes", "input size (compressed)", "bytes",
       "Σ over the files processed (once each) of uproot's `TTree.compressed_bytes`: "
       "every basket of every branch, TKey headers included (`fZipBytes`)",
       "uproot: the tree's branch metadata, no basket read"),
    _w("input_uncompressed_bytes", "input size (uncompressed)", "bytes",
       "Σ over the files processed (once each) of uproot's `TTree.uncompressed_bytes` "
       "(`fTotBytes`)", "uproot: the tree's branch metadata, no basket read"),
    _w("compression_ratio", "compression ratio", "ratio",
       "`input_uncompressed_bytes / input_compressed_bytes` (uproot's own "
       "`compression_ratio` of one tree)", "the figures above"),
    _w("num_chunks", "chunks", "count",
       "chunks that succeeded, else the report's `chunks`", "chunk records / report"),
    _w("num_chunks_planned", "chunks planned", "count", "coffea's report `chunks`",
       "coffea's report"),
    _w("num_chunks_not_processed", "chunks not processed", "count",
       "`num_chunks_planned − num_chunks` (skipped, or lost before the collector)",
       "coffea's report, chunk records", "lower"),
    _w("report_events", "events (report)", "count", "coffea's report `entries`",
       "coffea's report"),
    _w("num_chunk_attempts", "chunk attempts", "count", "chunk records, failed included",
       "chunk records"),
    _w("num_failed_attempts", "failed attempts", "count", "chunk records with status failed",
       "chunk records", "lower"),
    _w("num_chunks_retried", "chunks retried", "count",
       "chunks with a failed attempt and a later success", "chunk records", "lower"),
    _w("num_chunks_failed", "chunks never done", "count",
       "chunks whose every attempt failed", "chunk records", "lower"),
    _w("processing_time_s", "processing time (Σ chunks)", "seconds",
       "Σ chunk `wall_s`, else the report's `processtime`", "`@track_metrics`", "lower"),
    _w("chunk_cpu_seconds", "chunk CPU time (Σ)", "seconds", "Σ chunk `cpu_s`",
       "thread CPU time in `@track_metrics`"),
    _w("chunk_memory_peak_bytes", "chunk memory peak", "bytes",
       "max chunk `memory_peak_bytes`", "`@track_metrics`", "lower"),
    _w("cores", "cores", "cores",
       "time-weighted mean of total worker threads; local: `cores=`, else the executor's "
       "`workers`, else 1 when every chunk ran in the collector's process",
       "tracking samples / executor"),
    _w("workers_avg", "workers (time-weighted mean)", "count",
       "time-weighted mean of the worker count (local: processes in the tree)",
       "tracking samples"),
    _w("workers_peak", "workers (peak)", "count", "max of the worker count",
       "tracking samples"),
    _w("memory_avg_bytes", "memory (time-weighted mean)", "bytes",
       "time-weighted mean of Σ worker RSS", "tracking samples"),
    _w("memory_peak_bytes", "memory (peak, all workers)", "bytes", "max of Σ worker RSS",
       "tracking samples", "lower"),
    _w("data_rate_gbps", "data rate", "Gbit/s", "`bytes_read × 8 / wall_time_s / 1e9`",
       "the figures above", "higher"),
    _w("event_rate_wall_khz", "event rate (wall)", "kHz",
       "`total_events / wall_time_s / 1e3`", "the figures above", "higher"),
    _w("event_rate_per_cpu_second_khz", "event rate (per CPU-second)", "kHz",
       "`total_events / cpu_seconds / 1e3`: events per thread-CPU second summed across "
       "workers (the spec's \"aggregated\" rate; stored runs' `event_rate_aggregated_khz`)",
       "fine metrics / psutil", "higher"),
    _w("event_rate_per_chunk_second_khz", "event rate (per chunk-second)", "kHz",
       "`total_events / processing_time_s / 1e3`: events per second of summed chunk wall "
       "time (roastcoffea's `event_rate_cpu_total_khz`; stored runs' "
       "`event_rate_per_busy_second_khz`)", "the figures above", "higher"),
    _w("data_rate_per_chunk_second_gbps", "data rate (per chunk-second)", "Gbit/s",
       "`bytes_read × 8 / processing_time_s / 1e9`: bytes per second of summed chunk wall "
       "time (stored runs' `data_rate_per_busy_second_gbps`)", "the figures above", "higher"),
    _w("event_rate_core_khz", "event rate (per core)", "kHz",
       "`total_events / (wall_time_s × cores) / 1e3`; absent when cores are unknown",
       "the figures above", "higher"),
    _w("speedup", "speedup", "ratio",
       "`processing_time_s / wall_time_s` (awkward path: `execute_seconds / wall_time_s`)",
       "the figures above", "higher"),
    _w("parallel_efficiency", "parallel efficiency", "fraction",
       "`processing_time_s / (wall_time_s × cores)`; 1 = every core busy all the time "
       "(awkward path: `execute_seconds / (wall_time_s × cores)`)",
       "the figures above", "higher"),
    _w("cpu_seconds", "CPU", "seconds",
       "Σ `(\"execute\", *, \"thread-cpu\", \"seconds\")`; local backend: CPU of the "
       "process tree (user + system, children included)", "fine metrics / psutil"),
    _w("noncpu_seconds", "non-CPU (I/O, GIL, contention, ...)", "seconds",
       "Σ `(\"execute\", *, \"thread-noncpu\", \"seconds\")`: I/O, GIL, GPU, CPU "
       "contention — not only I/O", _FINE),
    _w("cpu_percent", "CPU share of task time", "percent",
       "`100 × cpu_seconds / (cpu_seconds + noncpu_seconds)`", _FINE, "higher"),
    _w("execute_seconds", "task time", "seconds",
       "Σ every `execute` activity in seconds (idle excluded)", _FINE),
    *_split("processor", "the processor's task prefixes"),
    *_split("overhead", "every other prefix (accumulation, ...)"),
    *_split("read", "the read prefixes (awkward path)"),
    _w("spill_read_bytes", "spill read", "bytes",
       "Σ activity `disk-read` in bytes over all contexts", _FINE, "lower"),
    _w("spill_write_bytes", "spill write", "bytes",
       "Σ activity `disk-write` in bytes over all contexts", _FINE, "lower"),
    _w("spill_read_seconds", "spill read time", "seconds",
       "Σ activity `disk-read` in seconds over all contexts", _FINE, "lower"),
    _w("spill_write_seconds", "spill write time", "seconds",
       "Σ activity `disk-write` in seconds over all contexts", _FINE, "lower"),
    *(
        _w(f"{a}_seconds", a, "seconds", f"Σ activity `{a}` in seconds over all contexts",
           _FINE, "lower")
        for a in ("serialize", "deserialize", "compress", "decompress")
    ),
    _w("partitions", "partitions", "count",
       "rows of the report (one per partition, failed ones included)", _REPORT),
    _w("partitions_failed", "partitions failed", "count", "rows with an `exception`",
       _REPORT, "lower"),
    _w("read_time_s", "read time", "seconds",
       "Σ `duration` of the partitions read: wall seconds inside uproot's read", _REPORT),
    _w("read_requests", "read requests", "count",
       "Σ `performance_counters.num_requests`", _REPORT),
    # -- chunks (one record per chunk attempt, from @track_metrics)
    Figure("chunk", "wall_s", "wall", "seconds", "`perf_counter` around the call",
           "`@track_metrics`"),
    Figure("chunk", "cpu_s", "CPU", "seconds", "`thread_time` around the call",
           "`@track_metrics`"),
    Figure("chunk", "events", "events", "count",
           "`len(events)` for a coffea input, else what `report_events` said",
           "`@track_metrics`"),
    Figure("chunk", "bytes_read", "bytes read", "bytes",
           "uproot's `num_requested_bytes` of the chunk's own file handle at the end of "
           "the call", "`@track_metrics`"),
    Figure("chunk", "tree_compressed_bytes", "tree size (compressed)", "bytes",
           "uproot's `TTree.compressed_bytes` of the chunk's tree (the whole file's)",
           "`@track_metrics`"),
    Figure("chunk", "tree_uncompressed_bytes", "tree size (uncompressed)", "bytes",
           "uproot's `TTree.uncompressed_bytes` of the chunk's tree (the whole file's)",
           "`@track_metrics`"),
    Figure("chunk", "memory_peak_bytes", "memory peak", "bytes",
           "the process's high-water mark when it rose during the chunk, else the highest "
           "RSS seen at the chunk's start, end and `track_memory` boundaries",
           "`@track_metrics`", "lower"),
    Figure("chunk", "started_at", "started", "timestamp", "`time.time()` at start",
           "`@track_metrics`"),
    Figure("chunk", "stopped_at", "stopped", "timestamp", "start + measured wall",
           "`@track_metrics`"),
    # -- sections (track_time / track_memory), aggregated over a run's chunks
    Figure("section", "chunks", "chunks", "count", "chunks in which the section ran",
           "chunk records"),
    Figure("section", "count", "calls", "count", "Σ calls over the chunks (repeats add up)",
           "chunk records"),
    Figure("section", "wall_s", "wall Σ", "seconds", "Σ wall seconds of every call",
           "`perf_counter` in `track_time`"),
    Figure("section", "cpu_s", "CPU Σ", "seconds", "Σ thread CPU seconds of every call",
           "`thread_time` in `track_time`"),
    Figure("section", "mean_wall_s", "wall mean", "seconds", "`wall_s / count`",
           "the figures above"),
    Figure("section", "mean_cpu_s", "CPU mean", "seconds", "`cpu_s / count`",
           "the figures above"),
    Figure("section", "memory_delta_bytes", "memory Δ Σ", "bytes",
           "Σ change of process RSS across every call", "`track_memory`"),
    Figure("section", "mean_memory_delta_bytes", "memory Δ mean", "bytes",
           "`memory_delta_bytes / count`", "the figures above"),
    Figure("section", "bytes_read", "bytes read Σ", "bytes",
           "Σ change of uproot's `num_requested_bytes` of the events' file handle "
           "across every call", "`track_bytes`"),
    Figure("section", "memory_after_peak_bytes", "memory after (peak)", "bytes",
           "the highest RSS at a call's end", "`track_memory`", "lower"),
)  # fmt: skip
