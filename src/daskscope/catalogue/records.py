"""Figures of what the recorder stores about a Dask cluster and what the analyses derive
from it: clusters, computations, task groups and prefixes, spans, worker samples, and
account and member usage."""

# ruff: noqa: RUF001 (formulas use the typographic multiplication and minus signs of the docs)

from __future__ import annotations

from daskscope.catalogue.figure import Figure

__all__ = ["FIGURES"]

_TRANSITION = "`SchedulerPlugin.transition`"
_COST_SOURCE = (
    "config `daskscope.cost.<account>` (else `default`), passed in by the caller; "
    "absent without a core-hour price"
)

FIGURES: tuple[Figure, ...] = (
    # -- cluster: the stored record
    Figure("cluster", "started_at", "started", "timestamp",
           "when the scheduler started", "`Scheduler.time_started`"),
    Figure("cluster", "stopped_at", "stopped", "timestamp",
           "when the scheduler closed; absent while running or after an abrupt death",
           "`before_close` hook"),
    Figure("cluster", "last_seen_at", "last seen", "timestamp",
           "the last flush that reached the store", "the recorder's flushes"),
    Figure("cluster", "duration_s", "cluster time", "seconds",
           "`stopped_at − started_at`; while running (or after an abrupt death), "
           "`last_seen_at − started_at`",
           "`Scheduler.time_started`; `before_close` hook; the last flush"),
    Figure("cluster", "core_seconds", "core time", "seconds",
           "∫ total worker threads dt over the cluster's life (thread-seconds)",
           "`Scheduler.total_nthreads_history` up to the moment daskscope attaches, "
           "then the add/remove-worker hooks"),
    Figure("cluster", "memory_limit_byte_seconds", "memory reserved", "byte-seconds",
           "∫ Σ worker `memory_limit` dt over the same window as core time: a worker present "
           "when daskscope attaches counts from its arrival (Dask keeps no history of limits: "
           "a worker that came and went before is in core time, not here)",
           "`WorkerState.memory_limit`; each worker's last \"add-worker\" in Dask's event log "
           "(`Scheduler.get_events`), then the add/remove-worker hooks"),
    Figure("cluster", "compute_seconds", "compute time", "seconds",
           "Σ over tasks of their `compute` durations (thread-seconds), every attempt of a "
           "retried task included",
           "`TaskGroup.all_durations[\"compute\"]`, summed over every group the cluster ran, "
           "and each retried attempt's from the worker's task-erred message (Dask drops it)",
           "lower"),
    Figure("cluster", "bytes_processed", "memory processed", "bytes",
           "Σ of task output sizes (a recomputed task is not counted twice)",
           "`TaskGroup.nbytes_total`"),
    Figure("cluster", "tasks_executed", "tasks executed", "count",
           "count of `processing → memory` transitions (a task recomputed after a worker "
           "loss counts again; so does, as in Dask's own counts, a result a worker still "
           "held when its key was submitted again, which the task log keeps once)",
           _TRANSITION),
    Figure("cluster", "tasks_erred", "tasks errored", "count",
           "count of `processing → erred` transitions (tasks that failed themselves, not "
           "dependents that erred because of them)", _TRANSITION, "lower"),
    Figure("cluster", "workers_peak", "workers (peak)", "count",
           "the most workers connected at once", "add-worker hook"),
    Figure("cluster", "threads_peak", "threads (peak)", "count",
           "the most worker threads at once", "add-worker hook"),
    Figure("cluster", "memory_limit_peak", "memory limit (peak)", "bytes",
           "the highest Σ worker `memory_limit` at once", "add-worker hook"),
    # -- cluster: derived by analysis.cluster_statistics
    Figure("cluster", "core_hours", "core-hours", "core-hours",
           "`core_seconds / 3600`", "core time above"),
    Figure("cluster", "compute_hours", "compute-hours", "core-hours",
           "`compute_seconds / 3600`", "compute time above"),
    Figure("cluster", "memory_gib_hours", "memory GiB-hours", "GiB-hours",
           "`memory_limit_byte_seconds / 2^30 / 3600`", "memory reserved above"),
    Figure("cluster", "utilisation", "utilisation", "fraction",
           "compute time ÷ core time; absent without core time; no direction: slower "
           "tasks on the same workers raise it (compute time and cost say which way)",
           "the two above"),
    Figure("cluster", "cost.total", "cost", "currency",
           "core-hours × `per-core-hour` + GiB-hours of memory limit × `per-gib-hour`, "
           "with the rates shown as its basis", _COST_SOURCE, "lower"),
    Figure("cluster", "cost.cores", "cost of cores", "currency",
           "core-hours × `per-core-hour`", _COST_SOURCE, "lower"),
    Figure("cluster", "cost.memory", "cost of memory", "currency",
           "GiB-hours × `per-gib-hour` (0 when memory is not priced)", _COST_SOURCE, "lower"),
    Figure("cluster", "cost.per_core_hour", "price per core-hour", "currency",
           "as configured", "config `daskscope.cost.<account>.per-core-hour`"),
    Figure("cluster", "cost.per_gib_hour", "price per GiB-hour", "currency",
           "as configured; absent when memory is not priced",
           "config `daskscope.cost.<account>.per-gib-hour`"),
    # -- computation
    Figure("computation", "started_at", "started", "timestamp",
           "when Dask created the computation", "`Computation.start`"),
    Figure("computation", "stopped_at", "stopped", "timestamp",
           "the latest stop of its group records once it is done (a newer computation "
           "began, or every group it touched is done); a computation that ran nothing "
           "stops when it started", "its group records"),
    Figure("computation", "duration_s", "duration", "seconds",
           "`stopped_at − started_at`; absent until it stops", "the two above"),
    Figure("computation", "tasks_executed", "tasks executed", "count",
           "Σ over its group records", "its group records"),
    Figure("computation", "tasks_erred", "tasks errored", "count",
           "Σ over its group records", "its group records", "lower"),
    Figure("computation", "group_count", "task groups", "count",
           "how many groups ran or failed tasks for it", "its group records"),
    Figure("computation", "task_seconds", "task time", "seconds",
           "Σ task time of its group records", "its group records", "lower"),
    Figure("computation", "cost.share", "share of core time", "fraction",
           "`task_seconds ÷ core_seconds` of its cluster, at most 1", "its group records, "
           "the cluster record"),
    Figure("computation", "cost.total", "cost", "currency",
           "the cluster's `cost.total` × `cost.share`; what no task used is the cluster's "
           "idle cost, not attributed (`analysis/span_cost.py`); no direction of its own: "
           "it follows task time, which has one", _COST_SOURCE),
    # -- task group (one record per group lifetime and computation)
    Figure("group", "tasks_total", "tasks", "count",
           "the group's tasks when last written", "`TaskGroup.states`"),
    Figure("group", "tasks_executed", "tasks executed", "count",
           "transitions of the group's tasks to memory counted for the computation that "
           "owned the group at the time", "`transition` hook"),
    Figure("group", "tasks_erred", "tasks errored", "count",
           "transitions of the group's tasks to erred, counted as above",
           "`transition` hook", "lower"),
    Figure("group", "nbytes_total", "output bytes", "bytes",
           "the group's growth of output bytes while the computation owned it",
           "`TaskGroup.nbytes_total` minus its value when the computation took the group over"),
    Figure("group", "duration_s", "task time", "seconds",
           "Σ of `durations` over activities: summed task time, not wall time",
           "`TaskGroup.all_durations` minus their values when the computation took the group "
           "over and the earlier executions' entries a worker re-sent, and its tasks' "
           "retried attempts"),
    Figure("group", "started_at", "started", "timestamp",
           "the earliest compute start of the tasks counted for this computation, each its "
           "own execution: the last `compute` entry (a worker that kept the task from an "
           "earlier computation sends that one's entries too; not Dask's `TaskGroup.start`, "
           "which takes them in)", "the transition's `startstops`"),
    Figure("group", "stopped_at", "stopped", "timestamp",
           "the latest compute stop of the tasks counted for this computation, each its own "
           "execution as for the start, or of its last failure (not Dask's `TaskGroup.stop`, "
           "which takes in later computations' tasks of a group taken over and earlier "
           "executions' entries)", "the transition's `startstops`"),
    # -- task prefix (daskscope's sums: Dask's TaskPrefix forgets groups)
    Figure("prefix", "group_count", "group lifetimes", "count",
           "how many group lifetimes had this prefix (not records)", "group records"),
    Figure("prefix", "tasks_executed", "tasks executed", "count",
           "Σ over every group record with that prefix across the cluster's life",
           "group records"),
    Figure("prefix", "tasks_erred", "tasks errored", "count",
           "Σ over every group record with that prefix", "group records", "lower"),
    Figure("prefix", "nbytes_total", "output bytes", "bytes",
           "Σ over every group record with that prefix", "group records"),
    Figure("prefix", "duration_s", "task time", "seconds",
           "Σ over every group record with that prefix", "group records", "lower"),
    # -- span (Dask's view: its whole subtree)
    Figure("span", "enqueued_at", "enqueued", "timestamp",
           "when the span's first graph reached the scheduler", "`Span.enqueued`"),
    Figure("span", "started_at", "started", "timestamp",
           "the first task of the subtree to start", "`Span.start`"),
    Figure("span", "stopped_at", "stopped", "timestamp",
           "the last task of the subtree to stop; only once the span is done", "`Span.stop`"),
    Figure("span", "duration_s", "task time", "seconds",
           "Σ of the subtree's task durations over activities: summed task time, not wall "
           "time", "`Span.duration`", "lower"),
    Figure("span", "active_cpu_seconds", "active CPU", "seconds",
           "thread time made available to the subtree while it had tasks (threads × "
           "active time, shared between the spans active at once), not CPU used",
           "`Span.active_cpu_seconds`"),
    Figure("span", "nbytes_total", "output bytes", "bytes",
           "Σ output bytes of the subtree's tasks", "`Span.nbytes_total`"),
    Figure("span", "group_count", "task groups", "count",
           "task groups of the subtree", "`Span.groups`"),
    Figure("span", "wall_s", "wall time", "seconds",
           "`stopped_at − started_at` (for spans matched by a tag, the latest stop − the "
           "earliest start); absent until done", "`Span.start`, `Span.stop`", "lower"),
    Figure("span", "cost.share", "share of core time", "fraction",
           "`duration_s ÷ core_seconds` of its cluster (the subtree's task time), at most 1",
           "`Span.duration`, the cluster record"),
    Figure("span", "cost.total", "cost", "currency",
           "the cluster's `cost.total` × `cost.share`; the cluster's cost − Σ over its "
           "root spans is idle, not attributed (`analysis/span_cost.py`); no direction of "
           "its own: it follows task time, which has one", _COST_SOURCE),
    # -- worker sample (one worker at one instant)
    Figure("worker", "sampled_at", "sampled", "timestamp",
           "the round's instant; every worker is sampled at the same instant of a round "
           "(every `worker-sampling-interval`)", "the recorder's clock"),
    Figure("worker", "nthreads", "threads", "count", "the worker's threads",
           "`WorkerState.nthreads`"),
    Figure("worker", "memory", "process memory", "bytes",
           "process RSS", "`ws.memory.process` (`metrics[\"memory\"]`)"),
    Figure("worker", "managed_bytes", "managed", "bytes",
           "bytes of the keys held in RAM = `ws.nbytes` − `metrics[\"spilled_bytes\"]"
           "[\"memory\"]`, at most `memory`", "`ws.memory.managed`"),
    Figure("worker", "unmanaged_bytes", "unmanaged", "bytes",
           "`memory` − `managed_bytes` (interpreter, running tasks' temporaries, "
           "fragmentation, leaks, garbage)", "`ws.memory.unmanaged`"),
    Figure("worker", "unmanaged_old_bytes", "unmanaged (old)", "bytes",
           "the least unmanaged memory over the last "
           "`distributed.memory.recent-to-old-time` (30 s)", "`ws.memory.unmanaged_old`"),
    Figure("worker", "unmanaged_recent_bytes", "unmanaged (recent)", "bytes",
           "`unmanaged_bytes` − `unmanaged_old_bytes` (hopefully a temporary spike)",
           "`ws.memory.unmanaged_recent`"),
    Figure("worker", "spilled_bytes", "spilled", "bytes",
           "size on disk of the keys spilled, outside `memory`",
           "`ws.memory.spilled` (`metrics[\"spilled_bytes\"][\"disk\"]`)"),
    Figure("worker", "memory_limit", "memory limit", "bytes",
           "the worker's limit; absent when it has none", "`ws.memory_limit`"),
    Figure("worker", "cpu_percent", "CPU", "percent",
           "CPU of the worker process, % of one core", "`metrics[\"cpu\"]`"),
    Figure("worker", "executing", "executing", "count", "tasks running now",
           "`len(ws.executing)`"),
    Figure("worker", "processing", "processing", "count",
           "tasks assigned to the worker, running or queued on it", "`len(ws.processing)`"),
    Figure("worker", "transfer_incoming_bytes", "incoming transfers", "bytes",
           "bytes in flight to the worker", "`metrics[\"transfer\"][\"incoming_bytes\"]`"),
    Figure("worker", "transfer_outgoing_bytes", "outgoing transfers", "bytes",
           "bytes in flight from the worker", "`metrics[\"transfer\"][\"outgoing_bytes\"]`"),
    Figure("worker", "net_read_bps", "network read", "bytes/s",
           "the host's network receive rate", "`metrics[\"host_net_io\"][\"read_bps\"]`"),
    Figure("worker", "net_write_bps", "network write", "bytes/s",
           "the host's network send rate", "`metrics[\"host_net_io\"][\"write_bps\"]`"),
    Figure("worker", "disk_read_bps", "disk read", "bytes/s",
           "the host's disk read rate", "`metrics[\"host_disk_io\"][\"read_bps\"]`"),
    Figure("worker", "disk_write_bps", "disk write", "bytes/s",
           "the host's disk write rate", "`metrics[\"host_disk_io\"][\"write_bps\"]`"),
    # -- account totals (analysis.usage.account_statistics)
    Figure("account", "clusters", "clusters", "count",
           "clusters started in the period", "cluster records"),
    Figure("account", "cluster_seconds", "cluster time", "seconds",
           "Σ cluster time (`duration_s`)", "cluster records"),
    Figure("account", "core_seconds", "core time", "seconds",
           "Σ `core_seconds`", "cluster records"),
    Figure("account", "compute_seconds", "compute time", "seconds",
           "Σ `compute_seconds`", "cluster records"),
    Figure("account", "memory_limit_byte_seconds", "memory reserved", "byte-seconds",
           "Σ `memory_limit_byte_seconds`", "cluster records"),
    Figure("account", "bytes_processed", "memory processed", "bytes",
           "Σ `bytes_processed`", "cluster records"),
    Figure("account", "tasks_executed", "tasks executed", "count",
           "Σ `tasks_executed`", "cluster records"),
    Figure("account", "tasks_erred", "tasks errored", "count",
           "Σ `tasks_erred`", "cluster records", "lower"),
    Figure("account", "cost", "cost", "currency",
           "Σ over accounts of each account's cost (as a cluster's); absent when an "
           "account has no core-hour price or the currencies differ",
           _COST_SOURCE, "lower"),
    # -- member usage per week (analysis.usage.member_usage)
    Figure("member", "clusters", "clusters", "count",
           "clusters the member started that week", "cluster records"),
    Figure("member", "cluster_hours", "cluster hours", "hours",
           "Σ cluster time / 3600", "cluster records"),
    Figure("member", "compute_hours", "compute-hours", "core-hours",
           "Σ `compute_seconds` / 3600", "cluster records"),
    Figure("member", "cost", "cost", "currency",
           "Σ each cluster's cost at its account's rates (0 where unpriced)",
           _COST_SOURCE, "lower"),
)  # fmt: skip
