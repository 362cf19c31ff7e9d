"""What one task-group row costs the store: task-group records like the many-groups
graph's, written by ``write_records`` in this process (the store child does the same
after decoding a batch), in batches of a flush's size and of 5,000, first as inserts and
then again as upserts of the same ids; and what encoding a batch for the child costs.
Prints CPU microseconds a row.

    python bench/group_row_cost.py [--rows 40000] [--batches 600,5000]
"""

from __future__ import annotations

import argparse
import functools
import tempfile
import time
from collections.abc import Callable

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
    args = parser.parse_args()
    records = group_records(args.rows)
    for batch in (int(b) for b in args.batches.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(f"sqlite:///{tmp}/store.db")
            write = functools.partial(write_records, store)
            insert = cpu_per_row(records, batch, write)
            again = cpu_per_row(records, batch, write)
            store.close()
        encode = cpu_per_row(records, batch, encode_batch)
        print(
            f"batches of {batch:,}: insert {insert:.1f} µs a row, upsert again {again:.1f} µs, "
            f"encode for the child {encode:.2f} µs (CPU, {args.rows:,} rows)"
        )


if __name__ == "__main__":
    main()
