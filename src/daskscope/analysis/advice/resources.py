"""Advice rules: resources (issue 14) — memory, spilling, non-CPU time, lost workers,
failed tasks, and for Coffea runs the reads and the chunk size.

(Over 400 lines: the rules of one family, each with its evidence and remedy over the
shared window and activity helpers at the top; a rule is read on its own, and the family
in one place.)

Each rule reads only :class:`AdviceFacts`. For a computation the worker samples, events
and errors are those within its start and stop (errors also by its groups), and the fine
metrics those of its groups' prefixes; for a run, those within the run's start and stop,
and the fine metrics the run's own (its span's, in ``run.metrics``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from statistics import median
from typing import Any

from daskscope.analysis.advice.base import Advice, AdviceFacts, Evidence, rule

__all__ = [
    "CHUNK_MIN_COUNT",
    "CHUNK_MIN_SECONDS",
    "MEMORY_CRITICAL",
    "MEMORY_WARNING",
    "NONCPU_MIN_SECONDS",
    "NONCPU_SHARE",
    "READ_AMPLIFICATION",
    "SPILL_TIME_SHARE",
]

#: peak process memory ÷ memory limit from which a worker is "near its limit": Dask
#: pauses a worker at 0.8 (``distributed.worker.memory.pause``) ...
MEMORY_WARNING = 0.8
#: ... and its nanny restarts it at 0.95 (``distributed.worker.memory.terminate``)
MEMORY_CRITICAL = 0.95
#: share of task time spent reading and writing spilled data that makes spilling critical
SPILL_TIME_SHARE = 0.1
#: thread-noncpu ÷ (thread-cpu + thread-noncpu) from which non-CPU time dominates ...
NONCPU_SHARE = 0.5
#: ... once there is this much of it (less is too little to act on)
NONCPU_MIN_SECONDS = 1.0
#: Σ bytes the chunks of a file read ÷ the file's size beyond which reads are wasteful
READ_AMPLIFICATION = 1.5
#: a median chunk shorter than this (seconds) is too small ...
CHUNK_MIN_SECONDS = 1.0
#: ... when a run has at least this many chunks (fewer cannot be made longer usefully)
CHUNK_MIN_COUNT = 4

Row = Mapping[str, Any]
_IDLE = "idle or other spans"


# -- what a scope covers -------------------------------------------------------------


def _window(facts: AdviceFacts) -> tuple[float | None, float | None]:
    """The time span the advice is about: a computation's or a run's, else everything."""
    if facts.scope == "computation" and facts.computation_id is not None:
        for comp in facts.detail.get("computations", ()):
            if comp["id"] == facts.computation_id:
                return comp.get("started_at"), comp.get("stopped_at")
    if facts.scope == "run" and facts.run is not None:
        run = facts.run["run"]
        return run.get("started_at"), run.get("stopped_at")
    return None, None


def _within(at: float | None, window: tuple[float | None, float | None]) -> bool:
    start, stop = window
    if at is None:
        return start is None and stop is None
    return (start is None or at >= start) and (stop is None or at <= stop)


def _groups(facts: AdviceFacts) -> list[Row]:
    """The computation's task groups (whether ``detail`` holds only them or all)."""
    return [
        g
        for g in facts.detail.get("task_groups", ())
        if g.get("computation_id") == facts.computation_id
    ]


def _samples(facts: AdviceFacts) -> list[Row]:
    window = _window(facts)
    return [s for s in facts.worker_samples if _within(s.get("sampled_at"), window)]


def _activity_totals(facts: AdviceFacts) -> dict[tuple[str, str], float]:
    """Fine metrics summed by (activity, unit) over the scope, idle time left out."""
    if facts.scope == "run":
        return _run_activity_totals(facts.run["run"].get("metrics") or {} if facts.run else {})
    prefixes: set[str] | None = None
    if facts.scope == "computation":
        prefixes = {g["prefix"] for g in _groups(facts)}
    totals: dict[tuple[str, str], float] = {}
    for row in facts.detail.get("fine_metrics", ()):
        if row["activity"] == _IDLE or (prefixes is not None and row["prefix"] not in prefixes):
            continue
        key = (row["activity"], row["unit"])
        totals[key] = totals.get(key, 0.0) + float(row["value"] or 0.0)
    return totals


def _run_activity_totals(metrics: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    """A run's figures (``catalogue/workflow.py``) in the shape of fine-metric totals."""
    names = {
        ("thread-cpu", "seconds"): "cpu_seconds",
        ("thread-noncpu", "seconds"): "noncpu_seconds",
        ("disk-write", "bytes"): "spill_write_bytes",
        ("disk-write", "seconds"): "spill_write_seconds",
        ("disk-read", "bytes"): "spill_read_bytes",
        ("disk-read", "seconds"): "spill_read_seconds",
    }
    totals = {k: float(metrics[n]) for k, n in names.items() if metrics.get(n) is not None}
    if "noncpu_seconds" not in metrics:
        # the local backend's cpu_seconds is psutil's, not Dask's thread-cpu: no split
        totals.pop(("thread-cpu", "seconds"), None)
    if metrics.get("execute_seconds") is not None:
        totals[("*", "seconds")] = float(metrics["execute_seconds"])
    return totals


def _task_seconds(totals: Mapping[tuple[str, str], float]) -> float:
    if ("*", "seconds") in totals:
        return totals[("*", "seconds")]
    return sum(v for (_, unit), v in totals.items() if unit == "seconds")


# -- spilling ---------------------------------------------------------------------------


@rule(
    "spilling",
    title="Data spilled to disk",
    scopes=("cluster", "computation", "run"),
    explanation=(
        "Fires when workers wrote data to disk: Dask's fine metric `disk-write` in bytes "
        "is above 0, or a worker sample shows spilled bytes above 0. Dask spills once a "
        "worker's managed memory passes `distributed.worker.memory.target` (0.6 of the "
        "limit by default) or its process memory passes `...memory.spill` (0.7). Warning; "
        f"critical when reading and writing spilled data (`disk-read` + `disk-write` "
        f"seconds) takes at least {SPILL_TIME_SHARE:.0%} of task time."
    ),
)
def spilling(facts: AdviceFacts) -> Iterator[Advice]:
    totals = _activity_totals(facts)
    written = totals.get(("disk-write", "bytes"), 0.0)
    peak_by_worker: dict[str, int] = {}
    for s in _samples(facts):
        spilled = s.get("spilled_bytes") or 0
        if spilled > peak_by_worker.get(s["worker"], 0):
            peak_by_worker[s["worker"]] = spilled
    peak = max(peak_by_worker.values(), default=0)
    if written <= 0 and peak <= 0:
        return
    spill_seconds = totals.get(("disk-write", "seconds"), 0.0) + totals.get(
        ("disk-read", "seconds"), 0.0
    )
    task_seconds = _task_seconds(totals)
    share = spill_seconds / task_seconds if task_seconds > 0 else None
    worst = max(peak_by_worker, key=lambda w: peak_by_worker[w]) if peak > 0 else None
    yield Advice(
        rule="spilling",
        title="Data spilled to disk",
        severity="critical" if share is not None and share >= SPILL_TIME_SHARE else "warning",
        subject=worst,
        evidence=(
            Evidence("bytes written to disk (disk-write)", written, "bytes", 0),
            Evidence("most on disk at once, one worker", peak, "bytes", 0),
            Evidence("workers that spilled", len(peak_by_worker), "count"),
            Evidence("spill time ÷ task time", share, "fraction", SPILL_TIME_SHARE),
        ),
        action=(
            "Give each worker more memory (a larger memory_limit, or fewer threads per "
            "worker), use more workers, make chunks smaller, or persist less at once; "
            "spilled data costs a disk write and a read back each time."
        ),
    )


# -- memory near the limit --------------------------------------------------------------


@rule(
    "memory-near-limit",
    title="Worker memory near its limit",
    scopes=("cluster", "computation", "run"),
    explanation=(
        "For each worker, its peak process memory (RSS, from the worker samples) ÷ its "
        f"memory limit. Warning from {MEMORY_WARNING:.0%}, where Dask pauses the worker "
        "(`distributed.worker.memory.pause`); critical from "
        f"{MEMORY_CRITICAL:.0%}, where its nanny restarts it "
        "(`distributed.worker.memory.terminate`). Samples are taken every "
        "`daskscope.worker-sampling-interval`, so a shorter peak can be missed."
    ),
)
def memory_near_limit(facts: AdviceFacts) -> Iterator[Advice]:
    peaks: dict[str, tuple[float, int, int]] = {}  # worker: (share, memory, limit)
    for s in _samples(facts):
        memory, limit = s.get("memory"), s.get("memory_limit")
        if not memory or not limit:
            continue  # no limit: nothing to be near
        share = memory / limit
        if share > peaks.get(s["worker"], (-1.0, 0, 0))[0]:
            peaks[s["worker"]] = (share, memory, limit)
    near = {w: p for w, p in peaks.items() if p[0] >= MEMORY_WARNING}
    if not near:
        return
    worst = max(near, key=lambda w: near[w][0])
    share, memory, limit = near[worst]
    yield Advice(
        rule="memory-near-limit",
        title="Worker memory near its limit",
        severity="critical" if share >= MEMORY_CRITICAL else "warning",
        subject=worst,
        evidence=(
            Evidence("peak process memory ÷ limit", share, "fraction", MEMORY_WARNING),
            Evidence("peak process memory", memory, "bytes"),
            Evidence("memory limit", limit, "bytes"),
            Evidence("workers near their limit", len(near), "count"),
        ),
        action=(
            "Raise the workers' memory_limit or run fewer threads per worker, make chunks "
            "smaller, and release what tasks hold (unmanaged memory: globals, caches, "
            "leaks); Dask pauses a worker at 80% and restarts it at 95%."
        ),
    )


# -- non-CPU time -----------------------------------------------------------------------


@rule(
    "noncpu-time",
    title="Tasks mostly not on the CPU",
    scopes=("cluster", "computation", "run"),
    explanation=(
        "Dask's fine metrics split a task's time into `thread-cpu` and `thread-noncpu` "
        "(waiting: I/O, sleeping, the GIL held by another thread, CPU contention, GPU). "
        f"Fires when thread-noncpu ÷ (thread-cpu + thread-noncpu) ≥ {NONCPU_SHARE:.0%} and "
        f"thread-noncpu is at least {NONCPU_MIN_SECONDS:g} s; the subject is the task "
        "prefix with the most non-CPU time."
    ),
)
def noncpu_time(facts: AdviceFacts) -> Iterator[Advice]:
    totals = _activity_totals(facts)
    cpu = totals.get(("thread-cpu", "seconds"))
    noncpu = totals.get(("thread-noncpu", "seconds"))
    if cpu is None or noncpu is None or noncpu < NONCPU_MIN_SECONDS:
        return
    share = noncpu / (cpu + noncpu)
    if share < NONCPU_SHARE:
        return
    yield Advice(
        rule="noncpu-time",
        title="Tasks mostly not on the CPU",
        severity="warning",
        subject=_top_noncpu_prefix(facts),
        evidence=(
            Evidence("non-CPU share of thread time", share, "fraction", NONCPU_SHARE),
            Evidence("thread-noncpu", noncpu, "seconds", NONCPU_MIN_SECONDS),
            Evidence("thread-cpu", cpu, "seconds"),
        ),
        action=(
            "Find what the tasks wait for (the profile shows where): pure-Python code "
            "holding the GIL runs better on workers with one thread each and more "
            "processes; I/O waits allow more threads per worker; on a busy host, fewer "
            "threads than cores."
        ),
    )


def _top_noncpu_prefix(facts: AdviceFacts) -> str | None:
    if facts.scope == "run":
        return None
    by_prefix: dict[str, float] = {}
    for row in facts.detail.get("fine_metrics", ()):
        if row["activity"] == "thread-noncpu" and row["unit"] == "seconds":
            by_prefix[row["prefix"]] = by_prefix.get(row["prefix"], 0.0) + float(row["value"] or 0)
    if facts.scope == "computation":
        prefixes = {g["prefix"] for g in _groups(facts)}
        by_prefix = {p: v for p, v in by_prefix.items() if p in prefixes}
    return max(by_prefix, key=lambda p: by_prefix[p]) if by_prefix else None


# -- workers lost -----------------------------------------------------------------------


@rule(
    "workers-lost",
    title="Workers lost",
    scopes=("cluster", "computation", "run"),
    explanation=(
        "Counts `worker-removed` events whose reason is `lost` (the connection dropped or "
        "heartbeats stopped while the worker ran: a killed process, an out-of-memory "
        "kill, a lost host). A normal close, a scale-down, a retirement or a restart is "
        "not a loss (`collector/lifecycle.py` tells them apart). Critical when any was "
        "lost."
    ),
)
def workers_lost(facts: AdviceFacts) -> Iterator[Advice]:
    window = _window(facts)
    lost = [
        e
        for e in facts.detail.get("events", ())
        if e["kind"] == "worker-removed"
        and (e.get("detail") or {}).get("reason") == "lost"
        and _within(e["at"], window)
    ]
    if not lost:
        return
    recomputed = sum(int((e.get("detail") or {}).get("lost_computed_tasks", 0)) for e in lost)
    running = sum(int((e.get("detail") or {}).get("processing_tasks", 0)) for e in lost)
    yield Advice(
        rule="workers-lost",
        title="Workers lost",
        severity="critical",
        subject=lost[0]["worker"] if len(lost) == 1 else None,
        evidence=(
            Evidence("workers lost", len(lost), "count", 0),
            Evidence("results lost with them (recomputed)", recomputed, "count"),
            Evidence("tasks running on them", running, "count"),
        ),
        action=(
            "Look at the lost workers' logs: an out-of-memory kill (by the nanny at 95% "
            "of the limit, or by the system) needs more memory per worker or smaller "
            "chunks; preempted or spot machines need retries or a steadier pool."
        ),
    )


# -- errors -----------------------------------------------------------------------------


@rule(
    "errors",
    title="Tasks failed",
    scopes=("cluster", "computation", "run"),
    explanation=(
        "Failed tasks (processing→erred) from the errors table, one piece of advice per "
        "task prefix with its most frequent exception. Beside the failures recorded (the "
        "errors table keeps only `daskscope.max-errors`), the prefix's own `tasks_erred` "
        "in the scope: the cluster's (or the computation's) task prefix row, or the "
        "scope's `tasks_erred` when the failures are all of one prefix; for a run "
        "without computations of its own, not known. Warning."
    ),
)
def errors(facts: AdviceFacts) -> Iterator[Advice]:
    rows = _scoped_errors(facts)
    if not rows:
        return
    by_prefix: dict[str, list[Row]] = {}
    for e in rows:
        by_prefix.setdefault(e["prefix"], []).append(e)
    recorded_total = _recorded_erred(facts)
    by_prefix_erred = _erred_by_prefix(facts)
    for prefix, errs in sorted(by_prefix.items()):
        kinds = Counter(_exception_type(e.get("exception") or "") for e in errs)
        kind, seen = kinds.most_common(1)[0]
        first = next(e for e in errs if _exception_type(e.get("exception") or "") == kind)
        message = _first_line(first.get("exception") or "") or "no message"
        erred = by_prefix_erred.get(prefix)
        if erred is None and len(by_prefix) == 1 and recorded_total:
            erred = recorded_total
        yield Advice(
            rule="errors",
            title=f"Tasks failed: {kind}",
            severity="warning",
            subject=prefix,
            evidence=(
                Evidence("failed tasks recorded", len(errs), "count", 0),
                Evidence("failed tasks in all (tasks_erred)", erred, "count"),
                Evidence("with this exception type", seen, "count"),
                Evidence("exception types", len(kinds), "count"),
            ),
            action=(
                f"Fix the code of {prefix}: {message[:200]} (first at key "
                f"{first['key'][:80]}; the traceback is on the cluster page)."
            ),
        )


def _scoped_errors(facts: AdviceFacts) -> list[Row]:
    rows = list(facts.detail.get("errors", ()))
    if facts.scope == "computation":
        groups = {g["id"] for g in _groups(facts)}
        return [e for e in rows if e.get("group_id") in groups]
    window = _window(facts)
    return [e for e in rows if _within(e["at"], window)]


def _erred_by_prefix(facts: AdviceFacts) -> dict[str, int]:
    """Each task prefix's failed tasks in the scope, from its prefix row: the cluster's,
    or (for a computation, and a run with computations of its own) those of the scope's
    groups; none for a run without (the rows would be the whole cluster's)."""
    if facts.scope == "run":
        known = {c["id"] for c in facts.detail.get("computations", ())}
        ran = (facts.run or {}).get("run", {}).get("computation_ids") or ()
        if not known.intersection(ran):
            return {}
    return {
        p["name"]: int(p["tasks_erred"])
        for p in facts.detail.get("task_prefixes", ())
        if p.get("tasks_erred") is not None
    }


def _recorded_erred(facts: AdviceFacts) -> int:
    if facts.scope == "cluster":
        return int(facts.detail.get("cluster", {}).get("tasks_erred") or 0)
    if facts.scope == "computation":
        for comp in facts.detail.get("computations", ()):
            if comp["id"] == facts.computation_id:
                return int(comp.get("tasks_erred") or 0)
    return 0


def _exception_type(text: str) -> str:
    """``ValueError`` of Dask's ``"ValueError('bad row')"`` (or of ``"ValueError: ..."``)."""
    found = re.match(r"\s*([A-Za-z_][\w.]*)", text)
    return found.group(1) if found else "unknown exception"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


# -- Coffea runs ------------------------------------------------------------------------


def _done_chunks(facts: AdviceFacts) -> list[Row]:
    if facts.run is None:
        return []
    return [
        c
        for c in facts.run.get("chunks", ())
        if (c.get("detail") or {}).get("status") != "failed"  # as Chunk.ok
    ]


@rule(
    "read-amplification",
    title="Files read more than once over",
    scopes=("run",),
    explanation=(
        'For each input file whose size is known (`extra["file_sizes"]`: the file '
        "stat'ed where the advice is made), Σ uproot's requested bytes of the chunks "
        "that read it ÷ the file's size. Fires above "
        f"{READ_AMPLIFICATION:g}: chunks smaller than the file's baskets each read whole "
        "baskets, so the same bytes are read (and decompressed) again by the next chunk."
    ),
)
def read_amplification(facts: AdviceFacts) -> Iterator[Advice]:
    sizes: Mapping[str, int] = facts.extra.get("file_sizes") or {}
    read: dict[str, int] = {}
    chunks: Counter[str] = Counter()
    for c in _done_chunks(facts):
        name, got = c.get("filename"), c.get("bytes_read")
        if isinstance(name, str) and name in sizes and got is not None:
            read[name] = read.get(name, 0) + int(got)
            chunks[name] += 1
    ratios = {f: read[f] / sizes[f] for f in read if sizes[f] > 0}
    over = {f: r for f, r in ratios.items() if r > READ_AMPLIFICATION}
    if not over:
        return
    worst = max(over, key=lambda f: over[f])
    yield Advice(
        rule="read-amplification",
        title="Files read more than once over",
        severity="warning",
        subject=worst,
        evidence=(
            Evidence("bytes read ÷ file size", over[worst], "ratio", READ_AMPLIFICATION),
            Evidence("bytes read from it", read[worst], "bytes"),
            Evidence("file size", sizes[worst], "bytes"),
            Evidence("chunks that read it", chunks[worst], "count"),
            Evidence("files read more than once over", len(over), "count"),
        ),
        action=(
            "Use larger chunks (coffea's chunksize) so that each chunk covers whole "
            "baskets, or write the files with baskets no larger than a chunk."
        ),
    )


@rule(
    "chunks-too-small",
    title="Chunks too short",
    scopes=("run",),
    explanation=(
        f"Fires when a run has at least {CHUNK_MIN_COUNT} chunks that succeeded and their "
        f"median wall time is under {CHUNK_MIN_SECONDS:g} s: each chunk pays fixed costs "
        "(a task scheduled, the file opened, the columns' baskets found, the output "
        "merged) that short chunks do not amortise."
    ),
)
def chunks_too_small(facts: AdviceFacts) -> Iterator[Advice]:
    chunks = _done_chunks(facts)
    walls = [float(c["wall_s"]) for c in chunks if c.get("wall_s") is not None]
    if len(walls) < CHUNK_MIN_COUNT:
        return
    typical = median(walls)
    if typical >= CHUNK_MIN_SECONDS:
        return
    events = [int(c["events"]) for c in chunks if c.get("events") is not None]
    yield Advice(
        rule="chunks-too-small",
        title="Chunks too short",
        severity="warning",
        subject=None,
        evidence=(
            Evidence("median chunk wall time", typical, "seconds", CHUNK_MIN_SECONDS),
            Evidence("chunks", len(walls), "count", CHUNK_MIN_COUNT),
            Evidence("median events per chunk", median(events) if events else None, "count"),
        ),
        action=(
            "Raise coffea's chunksize so that a chunk runs for several seconds "
            f"(here about {_scale_hint(typical)} times the events per chunk)."
        ),
    )


def _scale_hint(typical: float) -> str:
    if typical <= 0:
        return "10"
    return f"{max(2, round(5 * CHUNK_MIN_SECONDS / typical)):,}"
