"""Where the recorder's time goes on a many-groups graph: cProfile of the scheduler's
event loop (the scheduler runs in this process), the writer thread's and the store
child's CPU, and how often each task group's row was written. The batches the store
child received are then written again, in this process under cProfile, into a new
SQLite store, the child's own code path: where the child's CPU goes.

    python bench/profile_recorder.py [--tasks 100000] [--groups 20000] [--top 30]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import gc
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import dask
import psutil
from distributed import Client, span
from msgspec.json import encode

import daskscope
from daskscope.collector.store_process import StoreProcess
from daskscope.model import TaskGroupRecord
from daskscope.store import open_store, write_rows
from daskscope.store.batches import wire_rows
from daskscope.store.writer import prepare_writes

sys.path.insert(0, str(Path(__file__).parent))
from overhead import DASK_CONFIG, RECORD_EVERYTHING, bench_cluster, many_groups_workload


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=20_000)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    graph, root, expected = many_groups_workload(args.tasks, args.groups)
    with tempfile.TemporaryDirectory() as tmp, dask.config.set(DASK_CONFIG):
        url = f"sqlite:///{tmp}/p.sqlite"
        async with (
            bench_cluster(asynchronous=True) as cluster,
            Client(cluster, asynchronous=True) as client,
        ):
            await daskscope.register(client, database=url, **RECORD_EVERYTHING)
            plugin = cluster.scheduler.plugins["daskscope"]
            while getattr(plugin._sink, "_process", None) is None:
                await asyncio.sleep(0.01)
            child = psutil.Process(plugin._sink._process.pid)
            child0 = sum(child.cpu_times()[:2])
            writes: collections.Counter[str] = collections.Counter()
            kinds: collections.Counter[str] = collections.Counter()
            sink_write = plugin._sink.write

            def counting_write(records: Any) -> None:
                for r in records:
                    kinds[type(r).__name__] += 1
                    if isinstance(r, TaskGroupRecord):
                        writes[r.id] += 1
                sink_write(records)

            plugin._sink.write = counting_write
            payloads: list[bytes] = []
            child_write = StoreProcess.write

            def keeping_write(process: StoreProcess, payload: bytes) -> dict[str, Any]:
                payloads.append(payload)
                return child_write(process, payload)

            StoreProcess.write = keeping_write  # type: ignore[method-assign]
            profiler = cProfile.Profile()
            wall0 = time.perf_counter()
            if not args.no_profile:
                profiler.enable()
            with span("bench"):
                result = await client.get(graph, root, sync=False)
                result = await result if asyncio.isfuture(result) else result
            info = await daskscope.flush(client, wait_for_metrics=False)
            profiler.disable()
            wall = time.perf_counter() - wall0
            assert result == expected
            child_cpu = sum(child.cpu_times()[:2]) - child0
    tasks = len(graph)
    print(f"{tasks} tasks, {args.groups} groups, wall {wall:.1f} s")
    print(
        f"loop_seconds {info['loop_seconds']:.2f} s, longest block "
        f"{info['longest_flush_block_seconds'] * 1e3:.1f} ms, writer CPU "
        f"{info['writer_cpu_seconds']:.2f} s, store child CPU {child_cpu:.2f} s "
        f"({child_cpu / tasks * 1e6:.1f} µs a task), flushes {info['flushes']}"
    )
    print(
        f"groups snapshotted {info['groups_snapshotted']}, of which unchanged since their "
        f"last write (not sent) {info.get('groups_unchanged', 0)}; rows written by table "
        f"{info.get('rows_written_by_table')}"
    )
    per_group = collections.Counter(writes.values())
    print("records by kind:", dict(kinds))
    print("group rows written n times:", dict(sorted(per_group.items())))
    if not args.no_profile:
        stats = pstats.Stats(profiler)
        stats.sort_stats("cumulative").print_stats("daskscope", args.top)
        stats.sort_stats("tottime").print_stats(args.top)
        replay_child(payloads, args.top)


def replay_child(payloads: list[bytes], top: int) -> None:
    """The child's batches written again into a new store, in this process: decoding
    and writing each batch's rows, as the child does, under cProfile. This process's
    objects (the graph, the closed cluster's state) are frozen first: the garbage
    collector passes over them here would not happen in the child."""
    gc.collect()
    gc.freeze()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/replay.sqlite")
        prepare_writes(store)
        profiler = cProfile.Profile()
        decode_cpu = write_cpu = 0.0
        rows_by_table: collections.Counter[str] = collections.Counter()
        bytes_by_table: collections.Counter[str] = collections.Counter()
        profiler.enable()
        for payload in payloads:
            t0 = time.process_time()
            rows = wire_rows(payload)
            t1 = time.process_time()
            write_rows(store, rows)
            write_cpu += time.process_time() - t1
            decode_cpu += t1 - t0
            for table, table_rows in rows.items():
                rows_by_table[table.name] += len(table_rows)
        profiler.disable()
        store.close()
    for payload in payloads:  # outside the profile: what each table's rows weigh
        for table, table_rows in wire_rows(payload).items():
            bytes_by_table[table.name] += sum(len(encode(row)) for row in table_rows)
    print(
        f"store child replayed: {len(payloads)} batches, {sum(map(len, payloads)) / 1e6:.1f} MB,"
        f" decode CPU {decode_cpu:.2f} s, write CPU {write_cpu:.2f} s (under cProfile)"
    )
    print("rows by table:", dict(rows_by_table.most_common()))
    print(
        "JSON bytes a row by table:",
        {name: round(bytes_by_table[name] / n) for name, n in rows_by_table.most_common()},
    )
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    asyncio.run(main())
