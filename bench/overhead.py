"""What recording costs: the same Dask workload with and without daskscope, side by side.

Runs interleaved pairs (with/without, order alternating) of a graph of small tasks on a
fresh ``LocalCluster(processes=True)`` each time, recording everything (spans, worker
samples every 0.5 s, profiles every 2 s, writes every 1 s) into an SQLite store. Prints
per-pair timings, the median wall-time and scheduler-process CPU ratios, daskscope's own
work per task (hooks, periodic snapshots, writer thread: measured directly, since wall
times on a shared machine are noisier than the effect), the transition hook's cost, the
store's write throughput and the plugin's peak memory over a 100,000-task run, and ends
with one line of JSON holding these figures.

    python bench/overhead.py [--tasks 20000] [--pairs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import operator
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import dask
from distributed import Client, LocalCluster, SchedulerPlugin, span

import daskscope
from daskscope.collector.plugin import DaskscopePlugin
from daskscope.model import SpanMetricRecord, TaskGroupRecord, WorkerSampleRecord, stable_id
from daskscope.store import open_store, write_records

RECORD_EVERYTHING = dict(
    flush_interval=1.0, worker_sampling_interval=0.5, profile_interval=2.0, profile_enabled=True
)


def workload(n_tasks: int) -> tuple[dict[str, Any], str]:
    """A raw graph of about ``n_tasks`` tiny tasks: leaves and a 16-way tree sum.

    A raw graph keeps the client's own graph building out of the timing, so what is
    measured is the scheduler's work per task, which is what daskscope adds to.
    """
    leaves = n_tasks * 15 // 16
    graph: dict[str, Any] = {f"leaf-{i}": (operator.add, i, 1) for i in range(leaves)}
    layer = list(graph)
    level = 0
    while len(layer) > 1:
        parents = []
        for j in range(0, len(layer), 16):
            key = f"sum-{level}-{j // 16}"
            graph[key] = (sum, layer[j : j + 16])
            parents.append(key)
        layer, level = parents, level + 1
    return graph, layer[0]


#: Same for both arms: no root-task queuing, so that the scheduler's CPU, which is what
#: daskscope adds to, bounds the run rather than round trips to the workers.
DASK_CONFIG = {"distributed.scheduler.worker-saturation": float("inf")}


def one_run(n_tasks: int, url: str | None) -> dict[str, float]:
    graph, root = workload(n_tasks)
    with (
        dask.config.set(DASK_CONFIG),
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        if url:
            daskscope.register(client, database=url, **RECORD_EVERYTHING)
        client.run(lambda: None)  # workers warm
        wall0, cpu0 = time.perf_counter(), time.process_time()
        with span("bench"):
            result = client.get(graph, root)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        leaves = n_tasks * 15 // 16
        assert result == leaves * (leaves + 1) // 2
        info = daskscope.flush(client, wait_for_metrics=False) if url else {}
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "tasks": len(graph),
        "records_written": info.get("records_written", 0),
        "loop_s": info.get("loop_seconds", 0.0),
        "writer_cpu_s": info.get("writer_cpu_seconds", 0.0),
    }


class CountTransitions(SchedulerPlugin):
    """How many times a plugin's transition hook is called per task in this graph."""

    name = "count-transitions"

    def __init__(self) -> None:
        self.calls = 0

    def transition(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1


def deep_size(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes held by daskscope's own containers and records (Dask's objects excluded)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(v, seen) for v in obj.values())
        size += sum(deep_size(k, seen) for k in obj if isinstance(k, (str, tuple)))
    elif isinstance(obj, (list, tuple, set)):
        size += sum(deep_size(v, seen) for v in obj)
    elif hasattr(obj, "__slots__") and type(obj).__module__.startswith("daskscope"):
        size += sum(deep_size(getattr(obj, s, None), seen) for s in type(obj).__slots__)
    return size


def plugin_memory(plugin: DaskscopePlugin) -> int:
    owned = [
        plugin._buffer,
        plugin._group_tracks,  # keys are Dask's TaskGroups: only the dict and tracks count
        plugin._computations_written,
        plugin._span_tracks,
        plugin._prefixes_written,
        plugin._retired,
        plugin._retired_by_prefix,
        plugin._name_occurrences,
        plugin._removals,
    ]
    return sum(deep_size(o) for o in owned) + sys.getsizeof(plugin._computations)


async def peak_memory_run(n_tasks: int, url: str) -> dict[str, Any]:
    """Run ``n_tasks`` with the plugin and sample its memory every 50 ms."""
    async with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            asynchronous=True,
        ) as cluster,
        Client(cluster, asynchronous=True) as client,
    ):
        await daskscope.register(client, database=url, **RECORD_EVERYTHING)
        plugin = cluster.scheduler.plugins["daskscope"]
        counter = CountTransitions()
        cluster.scheduler.add_plugin(counter)
        peak = 0
        done = False

        async def sample() -> None:
            nonlocal peak
            while not done:
                peak = max(peak, plugin_memory(plugin))
                await asyncio.sleep(0.05)

        sampler = asyncio.create_task(sample())
        graph, _ = workload(n_tasks)
        tasks = len(graph)
        # every key is wanted, so results stay and the hook can be timed on real keys below
        futures = client.get(graph, list(graph), sync=False)
        await client.gather(futures)
        done = True
        await sampler
        hook = time_transition_hook(plugin, cluster.scheduler)
        await daskscope.flush(client, wait_for_metrics=False)
    return {
        "tasks": tasks,
        "peak_bytes": peak,
        "transitions_per_task": counter.calls / tasks,
        **hook,
    }


def time_transition_hook(plugin: DaskscopePlugin, scheduler: Any, calls: int = 200_000) -> dict:
    """µs per call of the hook itself, on the filtered path and on the counting path."""
    key = next(iter(scheduler.tasks))
    track = plugin._group_track(scheduler.tasks[key].group)
    executed = track.executed
    t0 = time.perf_counter()
    for _ in range(calls):
        plugin.transition(key, "waiting", "processing", stimulus_id="bench")
    filtered = (time.perf_counter() - t0) / calls * 1e6
    t0 = time.perf_counter()
    for _ in range(calls):
        plugin.transition(key, "processing", "memory", stimulus_id="bench")
    counting = (time.perf_counter() - t0) / calls * 1e6
    track.executed = executed  # leave the stored numbers true
    return {"hook_filtered_us": filtered, "hook_counting_us": counting}


def store_throughput(url: str, n: int = 60_000) -> float:
    """records/s written by write_records: a realistic mix of kinds, in batches of 5,000."""
    store = open_store(url)
    cluster = "bench-cluster"
    records: list[Any] = []
    for i in range(n // 3):
        records.append(
            TaskGroupRecord(
                id=stable_id(cluster, "tg", i),
                cluster_id=cluster,
                name=f"inc-{i}",
                prefix="inc",
                dependencies=[f"ones-{i}"],
                states={"memory": 10},
                tasks_total=10,
                tasks_executed=10,
                nbytes_total=80_000,
                duration_s=0.01,
                durations={"compute": 0.008, "transfer": 0.002},
                types=["numpy.ndarray"],
                started_at=1.8e9,
                stopped_at=1.8e9 + 1,
            )
        )
        records.append(
            SpanMetricRecord(
                id=stable_id(cluster, "m", i),
                cluster_id=cluster,
                span_id="s",
                context="execute",
                prefix=f"inc-{i % 50}",
                activity=f"a{i}",
                unit="seconds",
                value=0.5,
            )
        )
        records.append(
            WorkerSampleRecord(
                id=stable_id(cluster, "w", i),
                cluster_id=cluster,
                worker="tcp://127.0.0.1:1",
                sampled_at=1.8e9 + i,
                nthreads=1,
                memory=10**8,
                cpu_percent=50.0,
            )
        )
    t0 = time.perf_counter()
    for start in range(0, len(records), 5000):
        write_records(store, records[start : start + 5000])
    elapsed = time.perf_counter() - t0
    store.close()
    return len(records) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--memory-tasks", type=int, default=100_000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        open_store(url).close()  # schema created outside the timed runs
        one_run(2000, None)  # warm imports and caches
        rows = []
        for pair in range(args.pairs):
            order = [None, url] if pair % 2 == 0 else [url, None]
            result = {}
            for target in order:
                result["with" if target else "without"] = one_run(args.tasks, target)
            rows.append(result)
            w, wo = result["with"], result["without"]
            print(
                f"pair {pair + 1}: {w['tasks']} tasks  without {wo['wall_s']:.2f} s"
                f" / {wo['cpu_s']:.2f} s CPU   with {w['wall_s']:.2f} s / {w['cpu_s']:.2f} s CPU"
                f"   ratio {w['wall_s'] / wo['wall_s']:.3f}",
                flush=True,
            )
        wall_ratio = statistics.median(r["with"]["wall_s"] / r["without"]["wall_s"] for r in rows)
        cpu_ratio = statistics.median(r["with"]["cpu_s"] / r["without"]["cpu_s"] for r in rows)
        tasks = rows[0]["with"]["tasks"]
        added_us = statistics.median(
            (r["with"]["wall_s"] - r["without"]["wall_s"]) / tasks * 1e6 for r in rows
        )
        per_task_us = statistics.median(r["without"]["wall_s"] / tasks * 1e6 for r in rows)

        # daskscope's own work per task, measured rather than inferred from wall times
        loop_us = statistics.median(r["with"]["loop_s"] / tasks * 1e6 for r in rows)
        writer_us = statistics.median(r["with"]["writer_cpu_s"] / tasks * 1e6 for r in rows)
        memory = asyncio.run(peak_memory_run(args.memory_tasks, url))
        # every call pays the filter; one call per task (processing→memory) also counts
        hook_us = (memory["transitions_per_task"] - 1) * memory["hook_filtered_us"] + memory[
            "hook_counting_us"
        ]
        throughput = store_throughput(f"sqlite:///{Path(tmp) / 'throughput.db'}")

    print(f"median wall ratio (with/without):      {wall_ratio:.3f}")
    print(f"median scheduler-process CPU ratio:    {cpu_ratio:.3f}")
    print(f"Dask's own wall time per task:         {per_task_us:.0f} µs")
    print(f"wall time added per task (median):     {added_us:.1f} µs")
    print(
        f"transition hook, filtered / counting:  {memory['hook_filtered_us']:.2f} / "
        f"{memory['hook_counting_us']:.2f} µs per call"
    )
    print(f"transition hook calls per task:        {memory['transitions_per_task']:.2f}")
    print(
        f"daskscope's own work per task:         {hook_us:.2f} µs hooks + {loop_us:.2f} µs "
        f"periodic snapshots on the event loop + {writer_us:.2f} µs writer-thread CPU "
        f"= {hook_us + loop_us + writer_us:.2f} µs"
    )
    print(f"store write throughput (SQLite):       {throughput:,.0f} records/s")
    print(
        f"plugin peak memory at {memory['tasks']:,} tasks:  {memory['peak_bytes'] / 1024:,.0f} KiB"
    )
    print(
        json.dumps(
            {
                "tasks": tasks,
                "pairs": args.pairs,
                "wall_ratio": round(wall_ratio, 4),
                "scheduler_cpu_ratio": round(cpu_ratio, 4),
                "dask_us_per_task": round(per_task_us, 1),
                "added_us_per_task": round(added_us, 2),
                "hook_filtered_us": round(memory["hook_filtered_us"], 3),
                "hook_counting_us": round(memory["hook_counting_us"], 3),
                "transitions_per_task": round(memory["transitions_per_task"], 2),
                "own_hook_us_per_task": round(hook_us, 3),
                "own_loop_us_per_task": round(loop_us, 3),
                "own_writer_cpu_us_per_task": round(writer_us, 3),
                "store_records_per_s": round(throughput),
                "memory_tasks": memory["tasks"],
                "plugin_peak_bytes": memory["peak_bytes"],
            }
        )
    )


if __name__ == "__main__":
    main()
