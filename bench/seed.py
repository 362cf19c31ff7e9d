"""Fill a store with synthetic history at dashboard scale, fast.

Default size: 10,000 clusters of 100 members over the last 26 weeks, each with 10
computations of 10 task groups (1,000,000 groups), 10 task prefixes, 5 spans with 20
fine metrics, 2 workers x 50 samples (1,000,000 samples), 4 events, 2 profile windows,
and an error in every tenth cluster. Rows go in with the driver's bulk path (SQLite:
``executemany`` in one transaction per table; PostgreSQL: ``COPY``), not through the
upserting writer.

    python bench/seed.py sqlite:////tmp/dash.db [--clusters 10000]

``--many-groups 40000`` adds one more cluster, named "many groups" (id
``stable_id("bench", "many-groups")``), with that many task groups over
``--many-groups-computations`` computations (layers of 100 groups, each depending on one
group of the layer before, durations spread over four orders of magnitude), as a graph
with one group per file and operation has.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Iterator
from itertools import chain
from typing import Any

from daskscope.model import stable_id
from daskscope.store import open_store
from daskscope.store import schema as s

GIB = 2**30
CHUNK = 50_000
PROFILE_TREE = {
    "identifier": "root", "count": 400, "description": {}, "children": {
        "run;worker.py;10": {"identifier": "run;worker.py;10", "count": 400,
            "description": {"filename": "worker.py", "name": "run", "line_number": 12,
                            "line": "result = func()"},
            "children": {
                "load;io.py;5": {"identifier": "load;io.py;5", "count": 250, "children": {},
                    "description": {"filename": "io.py", "name": "load", "line_number": 7,
                                    "line": "return read(path)"}},
                "mean;np.py;3": {"identifier": "mean;np.py;3", "count": 120, "children": {},
                    "description": {"filename": "np.py", "name": "mean", "line_number": 3,
                                    "line": "return a.sum() / n"}}}}},
}  # fmt: skip
PREFIXES = ["read", "getitem", "add", "mul", "sum", "mean", "concat", "shuffle", "merge", "store"]
ACTIVITIES = ["thread-cpu", "thread-noncpu", "executor", "other", "memory-read"]


def _j(value: Any) -> str:
    return json.dumps(value)


def generate(clusters: int, members: int, weeks: int, seed: int) -> dict[str, Iterator[Any]]:
    """One lazily generated stream of row tuples per table, in schema column order."""
    rng = random.Random(seed)
    now = time.time()
    starts = sorted(now - rng.random() * weeks * 7 * 86400 for _ in range(clusters))
    ids = [stable_id("bench", i) for i in range(clusters)]

    def cluster_rows() -> Iterator[tuple]:
        for i, (cid, start) in enumerate(zip(ids, starts, strict=True)):
            length = 600 + (i * 7919) % 7200
            threads = 4 + (i % 4) * 4
            yield (cid, f"cluster {i}", f"acct{i % 5}", f"user{i % members:03d}",
                   "tcp://10.0.0.1:8786", "2026.8.0", "2026.8.0", "3.11", start, start + length,
                   start + length, 2, threads, 16 * GIB, float(threads * length),
                   16.0 * GIB * length, 1000 + i % 500, int(i % 10 == 0), threads * length * 0.6,
                   (i % 100 + 1) * 2**24)  # fmt: skip

    def computation_rows() -> Iterator[tuple]:
        code = _j(["# analysis.py:42\nresult = frame.groupby('key').value.mean().compute()\n"])
        for cid, start in zip(ids, starts, strict=True):
            for c in range(10):
                yield (stable_id(cid, "comp", c), cid, start + c * 60, start + c * 60 + 50, code,
                       "{}", 100, 1 if c == 9 else 0, 10)  # fmt: skip

    def group_rows() -> Iterator[tuple]:
        for cid, start in zip(ids, starts, strict=True):
            for c in range(10):
                comp = stable_id(cid, "comp", c)
                for g in range(10):
                    name = f"{PREFIXES[g]}-{c:02d}{g:02d}"
                    deps = _j([f"{PREFIXES[g - 1]}-{c:02d}{g - 1:02d}"] if g else [])
                    erred = 1 if c == 9 and g == 9 else 0
                    yield (stable_id(cid, "tg", c, g), cid, name, PREFIXES[g], comp,
                           stable_id(cid, "span", g % 5), deps, '{"memory": 10}', 10, 10 - erred,
                           erred, 2**20 * (g + 1), 1.5 * (g + 1),
                           _j({"compute": 1.0 * (g + 1), "transfer": 0.5 * (g % 3)}),
                           '["numpy.ndarray"]', start + c * 60 + g,
                           start + c * 60 + g + 5)  # fmt: skip

    def prefix_rows() -> Iterator[tuple]:
        for cid in ids:
            for g, name in enumerate(PREFIXES):
                yield (stable_id(cid, "tp", g), cid, name, 10, 100, 0, 10 * 2**20 * (g + 1),
                       15.0 * (g + 1), _j({"compute": 10.0 * (g + 1)}))  # fmt: skip

    def span_rows() -> Iterator[tuple]:
        for cid, start in zip(ids, starts, strict=True):
            for k in range(5):
                parent = stable_id(cid, "span", 0) if k else None
                name = _j(["data load"] if k == 0 else ["data load", f"step {k}"])
                yield (stable_id(cid, "sprow", k), cid, stable_id(cid, "span", k), parent, name,
                       start + k, start + k, start + k + 100, True, '{"memory": 200}',
                       2**24, 100.0, '{"compute": 90.0}', 80.0, "[]", 2)  # fmt: skip

    def span_tag_rows() -> Iterator[tuple]:
        # The span-tag index (store/span_tags.py) the writer keeps beside the spans
        for cid, start in zip(ids, starts, strict=True):
            for k in range(5):
                yield (stable_id(cid, "sprow", k), cid, "data load" if k == 0 else f"step {k}",
                       True, start + k, k == 0, 100.0)  # fmt: skip

    def metric_rows() -> Iterator[tuple]:
        for cid in ids:
            for k in range(5):
                for a, activity in enumerate(ACTIVITIES[:4]):
                    yield (stable_id(cid, "m", k, a), cid, stable_id(cid, "span", k), "execute",
                           PREFIXES[k], activity, "seconds", 1.0 + a + k)  # fmt: skip

    def sample_rows() -> Iterator[dict[str, Any]]:
        # By column name: the samples' columns grow with what Dask reports.
        for cid, start in zip(ids, starts, strict=True):
            for w in range(2):
                worker = f"tcp://10.0.0.{w + 2}:4000"
                for n in range(50):
                    yield {"id": stable_id(cid, "ws", w, n), "cluster_id": cid, "worker": worker,
                           "sampled_at": start + n * 10, "nthreads": 4, "memory_limit": 8 * GIB,
                           "memory": GIB + n * 2**20, "managed_bytes": GIB, "spilled_bytes": 0,
                           "cpu_percent": 50.0 + n % 40, "executing": n % 4,
                           "processing": n % 6, "transfer_incoming_bytes": 0,
                           "transfer_outgoing_bytes": 0,
                           "net_read_bps": 0.0, "net_write_bps": 0.0, "disk_read_bps": 0.0,
                           "disk_write_bps": 0.0}  # fmt: skip

    def event_rows() -> Iterator[tuple]:
        for cid, start in zip(ids, starts, strict=True):
            yield (stable_id(cid, "ev", 0), cid, start, "cluster-started", None, "{}")
            for w in range(2):
                yield (stable_id(cid, "ev", w + 1), cid, start + 1, "worker-added",
                       f"tcp://10.0.0.{w + 2}:4000", "{}")  # fmt: skip
            yield (stable_id(cid, "ev", 9), cid, start + 500, "cluster-closed", None, "{}")

    def error_rows() -> Iterator[tuple]:
        for i, (cid, start) in enumerate(zip(ids, starts, strict=True)):
            if i % 10 == 0:
                yield (stable_id(cid, "err"), cid, "('store-0909', 3)", start + 550, "store-0909",
                       "store", stable_id(cid, "tg", 9, 9), "tcp://10.0.0.2:4000",
                       "OSError('disk full')", "Traceback ...\nOSError: disk full")  # fmt: skip

    def profile_rows() -> Iterator[tuple]:
        tree = _j(PROFILE_TREE)
        for cid, start in zip(ids, starts, strict=True):
            for p in range(2):
                yield (stable_id(cid, "prof", p), cid, start + p * 300, start + p * 300 + 300,
                       400, tree)  # fmt: skip

    return {
        "clusters": cluster_rows(), "computations": computation_rows(),
        "task_groups": group_rows(), "task_prefixes": prefix_rows(), "spans": span_rows(),
        "span_tags": span_tag_rows(),
        "span_metrics": metric_rows(), "worker_samples": sample_rows(), "events": event_rows(),
        "errors": error_rows(), "profiles": profile_rows(),
    }  # fmt: skip


MANY_GROUPS_ID = stable_id("bench", "many-groups")
LAYER = 100  # groups a layer of the many-groups graph


def many_groups_rows(groups: int, computations: int, seed: int) -> dict[str, list[dict[str, Any]]]:
    """Named rows of one cluster with ``groups`` task groups over ``computations``
    computations (10 tasks a group, all executed)."""
    rng = random.Random(seed)
    cid = MANY_GROUPS_ID
    start = time.time() - 3600
    per_comp = -(-groups // computations)
    comps, rows = [], []
    prefix_sums: dict[str, list[float]] = {}
    for c in range(computations):
        comp = stable_id(cid, "comp", c)
        names = [f"{PREFIXES[g % len(PREFIXES)]}-{c:02d}-{g:06d}" for g in range(per_comp)]
        names = names[: max(0, groups - c * per_comp)]
        for g, name in enumerate(names):
            seconds = 10 ** rng.uniform(-2, 2)
            prefix = PREFIXES[g % len(PREFIXES)]
            at = start + c * 600 + g * 0.01
            rows.append({
                "id": stable_id(cid, "tg", c, g), "cluster_id": cid, "name": name,
                "prefix": prefix, "computation_id": comp, "span_id": stable_id(cid, "span", 0),
                "dependencies": _j([names[g - LAYER - rng.randrange(min(g - LAYER + 1, LAYER))]]
                                   if g >= LAYER else []),
                "states": '{"memory": 10}', "tasks_total": 10, "tasks_executed": 10,
                "tasks_erred": 0, "nbytes_total": 2**16 * (1 + g % 97), "duration_s": seconds,
                "durations": _j({"compute": seconds}), "types": '["numpy.ndarray"]',
                "started_at": at, "stopped_at": at + seconds,
            })  # fmt: skip
            sums = prefix_sums.setdefault(prefix, [0, 0.0, 0])
            sums[0] += 1
            sums[1] += seconds
            sums[2] += 2**16 * (1 + g % 97)
        comps.append({
            "id": comp, "cluster_id": cid, "started_at": start + c * 600,
            "stopped_at": start + c * 600 + 500, "code": _j([f"# many.py:{c}\nx.compute()\n"]),
            "annotations": "{}", "tasks_executed": 10 * len(names), "tasks_erred": 0,
            "group_count": len(names),
        })  # fmt: skip
    end = start + computations * 600
    compute = sum(r["duration_s"] for r in rows)
    cluster = {
        "id": cid, "name": "many groups", "account": "acct0", "user": "user000",
        "scheduler_address": "tcp://10.0.0.1:8786", "dask_version": "2026.8.0",
        "distributed_version": "2026.8.0", "python_version": "3.11", "started_at": start,
        "stopped_at": end, "last_seen_at": end, "workers_peak": 2, "threads_peak": 8,
        "memory_limit_peak": 16 * GIB, "core_seconds": 8.0 * (end - start),
        "memory_limit_byte_seconds": 16.0 * GIB * (end - start), "tasks_executed": 10 * len(rows),
        "tasks_erred": 0, "compute_seconds": compute,
        "bytes_processed": sum(r["nbytes_total"] for r in rows),
    }  # fmt: skip
    prefixes = [
        {"id": stable_id(cid, "tp", name), "cluster_id": cid, "name": name, "group_count": n,
         "tasks_executed": 10 * n, "tasks_erred": 0, "nbytes_total": nbytes, "duration_s": secs,
         "durations": _j({"compute": secs})}
        for name, (n, secs, nbytes) in prefix_sums.items()
    ]  # fmt: skip
    events = [
        {"id": stable_id(cid, "ev", 0), "cluster_id": cid, "at": start, "kind": "cluster-started",
         "worker": None, "detail": "{}"},
        {"id": stable_id(cid, "ev", 9), "cluster_id": cid, "at": end, "kind": "cluster-closed",
         "worker": None, "detail": "{}"},
    ]  # fmt: skip
    return {
        "clusters": [cluster], "computations": comps, "task_groups": rows,
        "task_prefixes": prefixes, "events": events,
    }  # fmt: skip


def _chunks(rows: Iterator[tuple]) -> Iterator[list[tuple]]:
    chunk: list[tuple] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _as_tuples(rows: Iterator[tuple | dict[str, Any]], columns: list[str]) -> Iterator[tuple]:
    # Named rows leave out the columns they do not know: those are NULL; so do positional
    # rows for trailing columns added after them (e.g. ``revision``).
    width = len(columns)
    for row in rows:
        if isinstance(row, dict):
            yield tuple(row.get(c) for c in columns)
        else:
            yield row + (None,) * (width - len(row)) if len(row) < width else row


def load(url: str, streams: dict[str, Iterator[Any]]) -> dict[str, int]:
    store = open_store(url)
    counts = {}
    raw = store.engine.raw_connection()
    try:
        cursor = raw.cursor()
        for name, rows in streams.items():
            table = s.metadata.tables[name]
            columns = [c.name for c in table.columns]
            rows = _as_tuples(rows, columns)
            quoted = ", ".join(f'"{c}"' for c in columns)
            n = 0
            if store.dialect == "postgresql":
                with cursor.copy(f"COPY {name} ({quoted}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
                        n += 1
            else:
                cursor.execute("BEGIN")
                sql = f"INSERT INTO {name} ({quoted}) VALUES ({', '.join('?' * len(columns))})"
                for chunk in _chunks(rows):
                    cursor.executemany(sql, chunk)
                    n += len(chunk)
            raw.commit()
            counts[name] = n
        cursor.execute("ANALYZE")  # fresh statistics for the query planner
        raw.commit()
    finally:
        raw.close()
        store.close()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="an empty database: sqlite:///path or postgresql://...")
    parser.add_argument("--clusters", type=int, default=10_000)
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--weeks", type=int, default=26)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--many-groups", type=int, default=0, metavar="N",
        help="add one cluster with N task groups (id: stable_id('bench', 'many-groups'))",
    )  # fmt: skip
    parser.add_argument("--many-groups-computations", type=int, default=4, metavar="C")
    args = parser.parse_args()
    if args.many_groups < 0 or args.many_groups_computations < 1:
        parser.error("--many-groups needs N >= 0 and --many-groups-computations C >= 1")
    started = time.perf_counter()
    streams = generate(args.clusters, args.members, args.weeks, args.seed)
    if args.many_groups:
        extra = many_groups_rows(args.many_groups, args.many_groups_computations, args.seed)
        for name, rows in extra.items():
            streams[name] = chain(streams[name], rows)
        print(f"many groups: cluster {MANY_GROUPS_ID}", file=sys.stderr)
    counts = load(args.url, streams)
    took = time.perf_counter() - started
    for name, n in counts.items():
        print(f"{name:>15}: {n:>10,} rows")
    total = sum(counts.values())
    print(f"{total:,} rows in {took:.1f} s ({total / took:,.0f} rows/s)", file=sys.stderr)
    print(json.dumps({"rows": counts, "seconds": round(took, 2)}))


if __name__ == "__main__":
    main()
