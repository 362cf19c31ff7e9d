"""The store child's CPU for one short run's flushes, side by side: each table's upsert
compiled at the first write that needs it (before) or at the child's start
(``prepare_writes``, now: outside the timed writes, as in the child). In-process, the
child's own code path (a wire batch decoded and upserted), alternating the two, in CPU
time of this process.

    python bench/store_child_writes.py [--flushes 15] [--rounds 10]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from daskscope.store import open_store, write_rows
from daskscope.store.batches import wire_rows as _rows_by_table
from daskscope.store.writer import _sqlite_upsert_sql, prepare_writes
from daskscope.wire import encode_batch
from factories import (
    T0,
    make_cluster,
    make_computation,
    make_group,
    make_prefix,
    make_span,
    make_span_metric,
    make_worker_sample,
)


def flush_batches(n: int) -> list[bytes]:
    """What the small graph's flushes send (about 26 records each): the cluster, two
    groups, their prefixes, the computation, the span and its metrics, worker samples."""
    cluster = make_cluster()
    batches = []
    for i in range(n):
        records = [
            cluster,
            make_group(cluster, "leaf", tasks_executed=1000 * i),
            make_group(cluster, "sum", tasks_executed=10 * i),
            make_prefix(cluster, "leaf"),
            make_prefix(cluster, "sum"),
            make_computation(cluster),
            make_span(cluster),
            *(make_span_metric(cluster, activity=f"a{k}", value=float(i)) for k in range(8)),
            *(make_worker_sample(cluster, worker=f"w{k}", sampled_at=T0 + i + k) for k in range(4)),
        ]
        batches.append(encode_batch(records))
    return batches


def one_run(batches: list[bytes], prepared: bool) -> float:
    """CPU seconds of a fresh store's writes of ``batches`` (after its opening)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/s.db")
        _sqlite_upsert_sql.cache_clear()
        gc.collect()
        if prepared:  # at the child's start, before it says ready: not in the run
            prepare_writes(store)
        started = time.process_time()
        for payload in batches:
            write_rows(store, _rows_by_table(payload))
        took = time.process_time() - started
        store.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flushes", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    batches = flush_batches(args.flushes)
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for prepared in (False, True):
            times[prepared].append(one_run(batches, prepared))
    compile_cpu = []
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/s.db")
        for _ in range(args.rounds):
            _sqlite_upsert_sql.cache_clear()
            started = time.process_time()
            prepare_writes(store)
            compile_cpu.append(time.process_time() - started)
        store.close()
    before, now = statistics.median(times[False]), statistics.median(times[True])
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print(f"{args.flushes} flushes' writes, compiled at first use: {before * 1e3:.1f} ms CPU")
    print(f"{args.flushes} flushes' writes, compiled at the start: {now * 1e3:.1f} ms CPU")
    print(f"ratio (before / now, medians of {args.rounds}):        {before / now:.2f}")
    start = statistics.median(compile_cpu) * 1e3
    print(f"compiling every table's upsert at the start: {start:.1f} ms CPU, once a cluster")


if __name__ == "__main__":
    main()
