"""The Perfetto export of a large task log, three ways in one run, each in its own
process so that its peak memory is its own:

- **old**: the JSON as it was written before the column-wise reading: windows of the
  timeline read back as a ``TaskExecution`` object per execution (kept here, callable,
  for this comparison);
- **json**: ``daskscope export perfetto`` now: the segments decoded one at a time and
  the events built from their columns;
- **proto**: ``daskscope export perfetto --format proto``: the same reading, Perfetto's
  protobuf packets.

Builds a store of one cluster with ``--tasks`` executions (16 worker threads, tasks
1-100 ms back to back, a transfer before one task in ten) through the recorder's segment
encoding, then writes the trace each way and prints wall time, peak RSS, the output's
size and the ratios to the old way.

    .venv/bin/python bench/export_perfetto.py --tasks 1000000
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from daskscope import model
from daskscope.store import open_store, write_records
from daskscope.tasklog import segments

WORKERS, THREADS, PER_SEGMENT, T0 = 4, 4, 50_000, 1_790_000_000.0


def build(url: str, tasks: int) -> str:
    rng = random.Random(0)
    cluster_id = model.stable_id("bench-export", tasks)
    lanes = [(f"tcp://10.0.0.{w}:4000{w}", 140_000_000_000 + t * 4096) for w in range(WORKERS)
             for t in range(THREADS)]  # fmt: skip
    clock = [T0] * len(lanes)
    records: list[Any] = []
    buffered: list[Any] = []
    number, last = 0, T0
    for i in range(tasks):
        lane = i % len(lanes)
        worker, thread = lanes[lane]
        group = f"p{(i // 2000) % 10}-{(i // 2000) % 30:04x}"
        start = clock[lane] + rng.uniform(0, 0.002)
        stop = clock[lane] = start + rng.uniform(0.001, 0.1)
        last = max(last, stop)
        startstops = [{"action": "compute", "start": start, "stop": stop}]
        if i % 10 == 0:
            source = lanes[(lane + THREADS) % len(lanes)][0]
            startstops.insert(0, {"action": "transfer", "start": start - 0.01,
                                  "stop": start - 0.001, "source": source})  # fmt: skip
        buffered.append(segments.execution(
            (group, i), group, group.split("-")[0], worker, thread, startstops, erred=False,
            nbytes=8000, computation=f"comp-{i // 100_000}", span=None))  # fmt: skip
        if len(buffered) == PER_SEGMENT:
            sealed = segments.encode_segment(cluster_id, number, buffered)
            number += len(sealed)
            records += sealed
            buffered = []
    if buffered:
        records += segments.encode_segment(cluster_id, number, buffered)
    cluster = model.ClusterRecord(
        id=cluster_id, name=f"export bench {tasks:,}", account="default", user="bench",
        scheduler_address="tcp://10.0.0.1:8786", dask_version="2026.8.0",
        distributed_version="2026.8.0", python_version="3.11", started_at=T0 - 1,
        stopped_at=last + 1, last_seen_at=last + 1)  # fmt: skip
    with open_store(url) as store:
        write_records(store, [cluster])
        for at in range(0, len(records), 20):
            write_records(store, records[at : at + 20])
    return cluster_id


def old_chunks(store: Any, cluster_id: str) -> Iterator[str]:
    """The JSON export as it was: pages of ``PAGE_TASKS`` executions read back through
    ``timeline_window`` as objects (windows split until each holds at most a page)."""
    import math

    import msgspec

    from daskscope.export.perfetto import PAGE_TASKS, _Ids, perfetto_events
    from daskscope.tasklog.window import timeline_window
    from daskscope.views.export import export_view

    window = export_view(store, cluster_id).task_window()
    lo, hi, origin = window.lo, window.hi, window.origin

    def pages(start: float, stop: float, first: bool, last: bool) -> Iterator[list[Any]]:
        window = timeline_window(store, cluster_id, start, stop, max_tasks=PAGE_TASKS, bins=1)
        if not window.raw:
            parts = max(2, math.ceil(window.total_tasks / PAGE_TASKS) * 2)
            step = (stop - start) / parts
            for i in range(parts):
                a = start + i * step
                b = stop if i == parts - 1 else start + (i + 1) * step
                yield from pages(a, b, first and i == 0, last and i == parts - 1)
            return
        mine = [t for t in window.tasks if (first or start <= t.start) and (t.start < stop or last)]
        mine.sort(key=lambda t: (t.start, t.worker, t.thread, t.key))
        if mine:
            yield mine

    yield '{"traceEvents": ['
    ids = _Ids()
    sep = ""
    for executions in pages(lo, hi, True, True):
        events = [e for t in executions for e in perfetto_events(t, origin, ids)]
        yield sep + msgspec.json.encode(events).decode()[1:-1]
        sep = ","
    yield "]}\n"


def run(way: str, url: str, cluster_id: str, out: str) -> None:
    """One way of writing the trace, in this process; prints its figures as JSON."""
    from daskscope.export.perfetto import perfetto_chunks
    from daskscope.export.perfetto_proto import perfetto_proto_chunks

    store = open_store(url)
    started = time.perf_counter()
    cpu = time.process_time()
    chunks: Iterator[str | bytes]
    if way == "old":
        chunks = old_chunks(store, cluster_id)
    elif way == "json":
        chunks = perfetto_chunks(store, cluster_id)
    else:
        chunks = perfetto_proto_chunks(store, cluster_id)
    with open(out, "wb") as f:
        for chunk in chunks:
            f.write(chunk.encode() if isinstance(chunk, str) else chunk)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        json.dumps(
            {"wall_s": wall, "cpu_s": cpu, "peak_rss": peak, "bytes": Path(out).stat().st_size}
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--run", nargs=3, metavar=("WAY", "URL", "CLUSTER"), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--new-only", action="store_true", help="Leave the old way out.")
    args = parser.parse_args()
    if args.run:
        run(*args.run, args.out)
        return
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        started = time.perf_counter()
        cluster_id = build(url, args.tasks)
        print(f"store of {args.tasks:,} tasks built in {time.perf_counter() - started:.1f} s")
        results = {}
        ways = ("old", "json", "proto") if not args.new_only else ("json", "proto")
        for way in ways:
            answer = subprocess.run(
                [sys.executable, __file__, "--run", way, url, cluster_id, "--out",
                 f"{tmp}/{way}.trace"],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            results[way] = json.loads(answer.stdout.strip().splitlines()[-1])
        for way, r in results.items():
            print(f"{way:>6}: wall {r['wall_s']:6.1f} s  CPU {r['cpu_s']:6.1f} s "
                  f"({r['cpu_s'] / args.tasks * 1e6:5.1f} µs/task)  "
                  f"peak RSS {r['peak_rss'] / 2**20:7.0f} MiB  file {r['bytes'] / 2**20:6.1f} MiB "
                  f"({r['bytes'] / args.tasks:.0f} B/task)")  # fmt: skip
        if "old" in results:
            o = results["old"]
            for way in ("json", "proto"):
                r = results[way]
                print(
                    f"{way} / old: wall {r['wall_s'] / o['wall_s']:.3f}, "
                    f"CPU {r['cpu_s'] / o['cpu_s']:.3f}, "
                    f"peak RSS {r['peak_rss'] / o['peak_rss']:.2f}"
                )


if __name__ == "__main__":
    main()
