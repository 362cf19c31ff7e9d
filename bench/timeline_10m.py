"""The task timeline at ten million tasks (issue 13): the recorder's own cost per task,
its memory, the bytes a task takes on disk, and the timeline queries' latency.

Feeds ``--tasks`` executions through the recorder's real task path
(``collector.task_log.TaskLog.task_done``, and ``task_ready`` for the three tasks in four
that waited for the one before, as the transition hook calls them) from a
simulated scheduler: ``--workers`` x ``--threads`` worker threads each taking the next
task when it frees, a few hundred task groups (a few running at once, in nested spans),
log-normal durations, a transfer before one task in seven. Segments are encoded in the
recorder's writer thread and written through its store sink (a child process for SQLite)
into a real store. Then asks ``tasklog.window`` for windows at every zoom, at random
places, and for random keys, and prints p50/p95 beside the 200 ms target.

    .venv/bin/python bench/timeline_10m.py [--tasks 10000000] [--database URL]
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import psutil

from daskscope.collector.destination import sink_for
from daskscope.collector.writer import WriterThread
from daskscope.model import ClusterRecord, stable_id
from daskscope.store import open_store
from daskscope.tasklog.lookups import task_executions
from daskscope.tasklog.record import TaskLog
from daskscope.tasklog.window import timeline_window

T0 = 1_790_000_000.0
TARGET_MS = 200.0
PREFIXES = ["read-parquet", "getitem", "add", "mul", "sum-chunk", "sum-combine", "rechunk-split",
            "rechunk-merge", "astype", "store-map", "finalize", "from-array"]  # fmt: skip


class Scheduler:
    """What the hook reads of the scheduler: task states with a group (name, span)
    and a prefix, and the kwargs Dask hands a finished task."""

    def __init__(self, tasks: int, workers: int, threads: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.tasks = tasks
        self.workers = [f"tcp://10.0.{w // 250}.{w % 250 + 1}:40123" for w in range(workers)]
        self.lanes = [(w, 140_000_000_000 + t * 4096) for w in self.workers for t in range(threads)]
        # a group every ~30,000 tasks (a few hundred in all), three running at once; a
        # span a computation, each group's span one level below it
        self.group_tasks = 30_000
        n_groups = max(1, tasks // self.group_tasks + 3)
        self.groups = []
        self.prefixes = []
        for g in range(n_groups):
            prefix = PREFIXES[g % len(PREFIXES)]
            token = f"{(g * 2654435761) % 2**32:08x}{g:024x}"
            span = f"span-{g // 10}-{g % 3}"
            self.groups.append(SimpleNamespace(name=f"{prefix}-{token}", span_id=span))
            self.prefixes.append(SimpleNamespace(name=prefix))
        self.free = [(T0, lane) for lane in range(len(self.lanes))]
        heapq.heapify(self.free)
        self.sample: list[str] = []

    def chunks(self, size: int) -> Any:
        """Lists of (key, ts, kwargs, computation) in the order tasks start."""
        rng = self.rng
        for first in range(0, self.tasks, size):
            n = min(size, self.tasks - first)
            durations = rng.lognormal(np.log(0.02), 1.0, n)
            gaps = rng.exponential(0.0005, n)
            transfers = rng.random(n) < 1 / 7
            transfer_s = rng.lognormal(np.log(0.004), 0.8, n)
            lane_offset = rng.integers(1, len(self.workers), n)
            which = rng.integers(0, 3, n)
            nbytes = rng.integers(8, 8 << 20, n)
            batch = []
            for i in range(n):
                index = first + i
                free_at, lane = heapq.heappop(self.free)
                worker, thread = self.lanes[lane]
                start = free_at + float(gaps[i])
                startstops = []
                if transfers[i]:
                    took = float(transfer_s[i])
                    source = self.workers[
                        (self.workers.index(worker) + int(lane_offset[i])) % len(self.workers)
                    ]
                    startstops.append(
                        {"action": "transfer", "start": start, "stop": start + took,
                         "source": source}
                    )  # fmt: skip
                    start += took
                stop = start + float(durations[i])
                startstops.append({"action": "compute", "start": start, "stop": stop})
                heapq.heappush(self.free, (stop, lane))
                g = index // self.group_tasks + int(which[i])
                ts = SimpleNamespace(group=self.groups[g], prefix=self.prefixes[g])
                key = (self.groups[g].name, index)
                kwargs = {
                    "worker": worker, "thread": thread, "nbytes": int(nbytes[i]),
                    "startstops": startstops, "type": b"", "typename": "numpy.ndarray",
                    "metadata": {}, "stimulus_id": f"task-finished-{index}",
                }  # fmt: skip
                if index % 9973 == 0:
                    self.sample.append(str(key))
                batch.append((key, ts, kwargs, f"computation-{index // 500_000}"))
            yield batch


def cpu_of_children() -> float:
    seconds = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        seconds += times.user + times.system
    return seconds


def record(args: argparse.Namespace, url: str) -> tuple[str, float, float, list[str]]:
    n = args.tasks
    cluster = ClusterRecord(
        id=stable_id("bench-timeline-10m", n), name="timeline at ten million",
        account="bench", user="bench", scheduler_address="tcp://10.0.0.1:8786",
        dask_version="-", distributed_version="-", python_version=sys.version.split()[0],
        started_at=T0, last_seen_at=T0,
    )  # fmt: skip
    writer = WriterThread("bench-writer")
    sink = sink_for(database=url)
    writer.submit(sink.open).result()
    writer.submit(sink.write, [cluster]).result()
    log = TaskLog(cluster.id)
    log.attach(writer, lambda: sink)
    scheduler = Scheduler(n, args.workers, args.threads, seed=args.seed)
    hook = 0.0
    waited = 0
    child_cpu = 0.0
    rss_start = psutil.Process().memory_info().rss
    for number, batch in enumerate(scheduler.chunks(20_000)):
        started = time.perf_counter()
        for j, (key, ts, kwargs, computation) in enumerate(batch):
            log.task_done(key, ts, kwargs, computation, erred=False)
            if j % 4 and j + 1 < len(batch):
                # the next task waited for this one (three tasks in four have a
                # dependency in the log): Dask readies it in this end's transitions
                log.task_ready(batch[j + 1][0], kwargs["stimulus_id"])
        hook += time.perf_counter() - started
        # a real scheduler runs far slower than this loop: wait for the writer as it would
        while log.pending_segments >= log.max_pending_segments - 1:
            waited += 1
            time.sleep(0.02)
        if number % 50 == 49:  # a flush every million tasks, as the flusher's would come
            asyncio.run(log.flush())
            child_cpu = max(child_cpu, cpu_of_children())
    asyncio.run(log.flush())
    child_cpu = max(child_cpu, cpu_of_children())
    writer.submit(sink.close).result()
    writer.shutdown()
    stats = log.stats
    assert stats.executions == n and stats.executions_dropped == 0, stats
    own = hook + stats.encode_cpu_seconds + stats.write_cpu_seconds
    print(f"tasks fed:                          {n:,} ({args.workers} workers x {args.threads}"
          f" threads, {len(scheduler.groups)} groups)")  # fmt: skip
    print(f"hook (task_done) per task:          {hook / n * 1e6:.2f} µs")
    print(f"encode (writer thread CPU) per task:{stats.encode_cpu_seconds / n * 1e6:6.2f} µs")
    print(f"write (writer thread CPU) per task: {stats.write_cpu_seconds / n * 1e6:.2f} µs")
    print(f"own per task (hook+encode+write):   {own / n * 1e6:.2f} µs")
    print(f"store child process CPU per task:   {child_cpu / n * 1e6:.2f} µs (SQLite writes)")
    print(f"segments written:                   {stats.segments_written}")
    print(f"driver waited for the writer:       {waited} x 20 ms")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"peak RSS of the process:            {peak:.0f} MiB (at start "
        f"{rss_start / 2**20:.0f} MiB; the simulator's own objects included)"
    )
    return cluster.id, T0, max(t for t, _ in scheduler.free), scheduler.sample


def disk(url: str, folder: Path | None, n: int) -> None:
    store = open_store(url)
    with store.engine.connect() as conn:
        parts = conn.exec_driver_sql(
            "SELECT sum(length(payload)), sum(length(summary)), sum(length(key_filter)), "
            "count(*) FROM task_segments"
        ).one()
        if conn.dialect.name == "postgresql":
            table, database = conn.exec_driver_sql(
                "SELECT pg_total_relation_size('task_segments'), "
                "pg_database_size(current_database())"
            ).one()
            print(
                f"PostgreSQL task_segments per task:  {table / n:.2f} B (with TOAST and "
                f"indexes; {table / 2**20:.0f} MiB); whole database {database / n:.2f} B"
            )
    if folder is not None:
        size = sum(f.stat().st_size for f in folder.glob("store.db*"))
        print(f"SQLite file per task:               {size / n:.2f} B ({size / 2**20:.0f} MiB)")
    print(
        "payload / summary / key filter:     "
        + " / ".join(f"{v / n:.2f}" for v in parts[:3])
        + f" B per task ({parts[3]} segments)"
    )


def quantiles(values: list[float]) -> str:
    p50, p95 = np.percentile(values, 50) * 1e3, np.percentile(values, 95) * 1e3
    return (
        f"p50 {p50:8.1f} ms  p95 {p95:8.1f} ms  max {max(values) * 1e3:8.1f} ms  "
        f"p95/target {p95 / TARGET_MS:5.2f}"
    )


def queries(
    url: str, cluster_id: str, first: float, last: float, keys: list[str], args: Any
) -> None:
    store = open_store(url)
    rng = random.Random(args.seed)
    whole = last - first
    zooms = [
        ("whole run (None, None)", None),
        ("whole run", whole),
        ("10 %", whole * 0.1),
        ("1 %", whole * 0.01),
        ("1 s", 1.0),
        ("10 ms", 0.01),
    ]
    print(f"\nqueries (run {whole:.0f} s long; {args.repeat} windows a zoom at random places, "
          f"bins=1000, max_tasks=5000; first ask included)")  # fmt: skip
    for label, width in zooms:
        times = []
        shown = ""
        for _ in range(args.repeat):
            if width is None:
                a = b = None
            else:
                a = first + rng.uniform(0, whole - width)
                b = a + width
            started = time.perf_counter()
            window = timeline_window(store, cluster_id, a, b)
            times.append(time.perf_counter() - started)
            shown = f"{'raw' if window.raw else 'binned'}, {window.total_tasks:,} tasks"
        print(f"  window {label:<24} {quantiles(times)}  ({shown})")
    times = []
    found = 0
    for key in rng.sample(keys, min(args.repeat * 2, len(keys))):
        started = time.perf_counter()
        found += len(task_executions(store, cluster_id, key))
        times.append(time.perf_counter() - started)
    print(f"  key lookup {'':<22} {quantiles(times)}  ({found} executions of {len(times)} keys)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS after the queries:         {peak:.0f} MiB")


def recorded(url: str) -> tuple[str, float, float, list[str]]:
    """The cluster of a store recorded before, its first start and last stop, and keys
    of a few of its segments."""
    from daskscope.tasklog.segments import decode_segment

    with open_store(url).engine.connect() as conn:
        cluster_id, first, last = conn.exec_driver_sql(
            "SELECT cluster_id, min(first_start), max(last_stop) FROM task_segments "
            "GROUP BY cluster_id"
        ).one()
        payloads = conn.exec_driver_sql(
            "SELECT format, payload FROM task_segments ORDER BY segment LIMIT 40"
        ).all()
    keys = []
    for fmt, payload in payloads[::8]:
        seg = decode_segment(fmt, bytes(payload))
        keys += [seg.key(row) for row in range(0, len(seg), 997)]
    return cluster_id, first, last, keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000_000)
    parser.add_argument("--workers", type=int, default=50)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--database", help="a PostgreSQL URL (default: a new SQLite file)")
    parser.add_argument("--queries-only", metavar="URL", help="ask a store recorded before")
    args = parser.parse_args()
    print(f"load at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    if args.queries_only:
        queries(args.queries_only, *recorded(args.queries_only), args)
        print(f"load at end: {os.getloadavg()[0]:.1f}")
        return
    folder = None
    url = args.database
    if url is None:
        folder = Path(tempfile.mkdtemp(prefix="daskscope-timeline10m-"))
        url = f"sqlite:///{folder / 'store.db'}"
    started = time.perf_counter()
    cluster_id, first, last, keys = record(args, url)
    print(f"recording took {time.perf_counter() - started:.0f} s wall")
    disk(url, folder, args.tasks)
    queries(url, cluster_id, first, last, keys, args)
    print(f"load at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
