"""What the garbage collector walks in the scheduler's process, with or without daskscope:
the many-groups graph on 2 worker processes (the scheduler in this process), a census of
the objects the collector tracks, by type, halfway through the run (less the census
before it), and the collector's passes and their CPU by generation over the run.

    python bench/gc_census.py with|without [--tasks 100000] [--groups 20000] [--top 15]
                              [--no-task-log]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import dask
from distributed import Client

import daskscope

sys.path.insert(0, str(Path(__file__).parent))
from overhead import DASK_CONFIG, RECORD_EVERYTHING, bench_cluster, many_groups_workload


def type_name(obj: object) -> str:
    kind = type(obj)
    return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', kind.__name__)}"


def census() -> collections.Counter[str]:
    return collections.Counter(type_name(obj) for obj in gc.get_objects())


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arm", choices=["with", "without"])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=20_000)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--no-task-log", action="store_true", help="with: keep no task log")
    args = parser.parse_args()
    graph, root, expected = many_groups_workload(args.tasks, args.groups)
    passes: collections.Counter[int] = collections.Counter()
    cpu: collections.Counter[int] = collections.Counter()
    began: dict[int, float] = {}

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        generation = info["generation"]
        if phase == "start":
            began[generation] = time.thread_time()
        else:
            passes[generation] += 1
            cpu[generation] += time.thread_time() - began[generation]

    with tempfile.TemporaryDirectory() as tmp, dask.config.set(DASK_CONFIG):
        async with (
            bench_cluster(asynchronous=True) as cluster,
            Client(cluster, asynchronous=True) as client,
        ):
            if args.arm == "with":
                url = f"sqlite:///{tmp}/store.db"
                await daskscope.register(
                    client,
                    database=url,
                    **RECORD_EVERYTHING,
                    task_log_enabled=not args.no_task_log,
                )
            groups = cluster.scheduler.task_groups
            gc.collect()
            before = census()
            gc.callbacks.append(on_gc)
            result = client.get(graph, root, sync=False)
            while True:  # halfway: half the tasks ran (in memory, released or forgotten)
                await asyncio.sleep(0.5)
                ran = sum(
                    tg.states["memory"] + tg.states["released"] + tg.states["forgotten"]
                    for tg in groups.values()
                )
                if ran > len(graph) / 2:
                    break
            now = census()
            halfway = now - before
            shares = list(_span_shares(cluster.scheduler))  # [] without daskscope
            tracked_shares = sum(gc.is_tracked(share) for share in shares)
            assert await result == expected
            gc.callbacks.remove(on_gc)
    gc_cpu = {generation: round(seconds, 2) for generation, seconds in sorted(cpu.items())}
    print(
        f"{args.arm} daskscope, {len(graph):,} tasks: {sum(now.values()):,} tracked objects "
        f"halfway, {sum(halfway.values()):,} more than before the graph; collector passes by "
        "generation "
        f"{dict(sorted(passes.items()))}, CPU {gc_cpu} s"
    )
    for name, count in halfway.most_common(args.top):
        print(f"  {count:>10,}  {name}")
    ours = {name: n for name, n in halfway.items() if name.startswith("daskscope.")}
    print("daskscope's own classes:", ours)
    if args.arm == "with":
        print(
            f"span shares of live groups still tracked halfway: {tracked_shares:,} "
            f"of {len(shares):,}"
        )


def _span_shares(scheduler: Any) -> Any:
    """The recorder's span share of each live group (tuples, untracked once met by a
    collection or three)."""
    for plugin in scheduler.plugins.values():
        spans = getattr(plugin, "spans", None)
        if spans is not None and hasattr(spans, "shares"):
            yield from spans.shares.values()


if __name__ == "__main__":
    asyncio.run(main())
