"""What one task-group row costs the store: task-group records like the many-groups
graph's, written by ``write_records`` in this process (the store child does the same
after decoding a batch), in batches of a flush's size and of 5,000, first as inserts and
then again as upserts of the same ids; and what encoding a batch for the child costs.
Prints CPU microseconds a row.

Then the least a group can cost the recorder whatever the design, as long as each group
is a row: its stable id, its record read from a real Dask ``TaskGroup`` of 5 tasks
(:func:`daskscope.collector.snapshot.task_group_record`, nothing else the recorder
does), encoding it for the child and inserting it; and from that, with the per-task cost
of a graph of few groups (``--per-task-us``, measured by ``bench/overhead.py --variants
small``), the least own work a task the many-groups graph (5.08 tasks a group) can cost.

    python bench/group_row_cost.py [--rows 40000] [--batches 600,5000] [--per-task-us 4.93]
"""

from __future__ import annotations

import argparse
import functools
import tempfile
import time
from collections.abc import Callable

from distributed.scheduler import TaskGroup, TaskPrefix, TaskState

from daskscope.collector.snapshot import task_group_record
from daskscope.collector.tracking import ComputationTrack, WorkTracker
from daskscope.model import TaskGroupRecord, stable_id
from daskscope.store import open_store, write_records
from daskscope.wire import encode_batch


def group_records(n: int, cluster: str = "bench-cluster") -> list[TaskGroupRecord]:
    """Groups of 5 finished tasks with one dependency each, as in the many-groups graph."""
    return [
        TaskGroupRecord(
            id=stable_id(cluster, "task-group", i),
            cluster_id=cluster,
            name=f"add-{i:032x}",
            prefix="add",
            computation_id="computation",
            span_id="span",
            dependencies=[f"read-{i:032x}"],
            states={"memory": 5},
            tasks_total=5,
            tasks_executed=5,
            nbytes_total=140,
            duration_s=0.01,
            durations={"compute": 0.008, "transfer": 0.002},
            types=["builtins.int"],
            started_at=1.8e9 + i * 0.001,
            stopped_at=1.8e9 + i * 0.001 + 1,
        )
        for i in range(n)
    ]


def dask_groups(n: int, tasks: int = 5) -> list[TaskGroup]:
    """Real Dask task groups of ``tasks`` finished tasks each, one dependency each."""
    prefixes = {name: TaskPrefix(name) for name in ("read", "add")}
    groups: list[TaskGroup] = []
    for i in range(n):
        tg = TaskGroup(f"add-{i:032x}", prefixes["add"])
        for j in range(tasks):
            tg.add(TaskState((tg.name, j), None, "memory", tg, False))
            tg.add_duration("compute", 1.8e9 + i, 1.8e9 + i + 0.0016)
        tg.nbytes_total = 28 * tasks
        tg.add_type("builtins.int")
        if groups:
            tg.dependencies.add(groups[-1])
        groups.append(tg)
    return groups


def cpu_per_row(records: list[TaskGroupRecord], batch: int, step: Callable[..., object]) -> float:
    """CPU microseconds a row for ``step`` over the records in batches of ``batch``."""
    started = time.process_time()
    for first in range(0, len(records), batch):
        step(records[first : first + batch])
    return (time.process_time() - started) / len(records) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--batches", default="600,5000")
    parser.add_argument("--per-task-us", type=float, default=4.93)
    args = parser.parse_args()
    records = group_records(args.rows)
    inserts = []
    for batch in (int(b) for b in args.batches.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(f"sqlite:///{tmp}/store.db")
            write = functools.partial(write_records, store)
            insert = cpu_per_row(records, batch, write)
            again = cpu_per_row(records, batch, write)
            store.close()
        encode = cpu_per_row(records, batch, encode_batch)
        inserts.append((insert, encode))
        print(
            f"batches of {batch:,}: insert {insert:.1f} µs a row, upsert again {again:.1f} µs, "
            f"encode for the child {encode:.2f} µs (CPU, {args.rows:,} rows)"
        )
    groups = dask_groups(args.rows)
    uuid5_ids = cpu_per_row(
        records,
        len(records),
        lambda part: [stable_id("bench-cluster", "task-group", r.name, 1, "c") for r in part],
    )
    # the key the recorder makes since issue 28: its parts joined, no hash
    tracker = WorkTracker("bench-cluster", max_code_chars=0)
    owner = ComputationTrack(stable_id("bench-cluster", "computation", "c"), None)  # type: ignore[arg-type]
    ids = cpu_per_row(
        records, len(records), lambda part: [tracker._use_id(r.name, 1, owner) for r in part]
    )
    print(f"a group's row key: {ids:.2f} µs (a uuid5 of its parts, as before: {uuid5_ids:.2f})")

    def read(part: list[TaskGroup]) -> None:
        for tg in part:
            task_group_record(
                tg, record_id="id", cluster_id="c", computation_id="c", executed=5, erred=0
            )

    reads = cpu_per_row(groups, 600, read)  # type: ignore[arg-type]
    insert, encode = min(inserts)
    group = ids + reads + encode + insert
    tasks_a_group = 203_335 / 40_001
    least = args.per_task_us + group / tasks_a_group
    least_in_process = args.per_task_us + (ids + reads + encode) / tasks_a_group
    print(
        f"a group, the least: row key {ids:.2f} + record read from Dask's TaskGroup "
        f"{reads:.2f} + encoding {encode:.2f} + insert {insert:.1f} = {group:.1f} µs; "
        f"with {args.per_task_us} µs a task of a few-groups graph, at "
        f"{tasks_a_group:.2f} tasks a group: at least {least:.2f} µs of own work a task "
        f"({least_in_process:.2f} without the store's insert)"
    )


if __name__ == "__main__":
    main()
