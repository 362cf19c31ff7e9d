"""The task log at scale: a simulated scheduler drives the recorder's task path, then
timeline queries run over the store it wrote; and the storage formats side by side.

``record``: ``--executions`` executions (8 workers x 4 threads, 12 task groups in turn
over computations of 100,000 tasks, 1-100 ms each, a transfer before every 7th) are fed
to :class:`daskscope.tasklog.record.TaskLog` exactly as the transition hook feeds it,
with its real writer thread and a real store sink (SQLite, through the store's child
process), then copied to PostgreSQL. It prints the hook's time per task (the feeding
loop's time less the same loop without the call), the writer thread's CPU per task
(encoding), peak RSS, bytes per task on disk, and each query's p50/p95 over repeated
calls at random places (a fresh process: the first calls read and decode; later ones
may hit the decoded-segment cache, as a server's would).

``formats``: the same executions (``--format-executions``) stored as Arrow IPC + zstd
(what daskscope keeps), Parquet + zstd (sorted by start, dictionary-encoded) and one
SQLite row per execution; bytes per task, encode time per task, and the time of one
binned window over all of them (numpy over the decoded Arrow arrays vs DuckDB SQL over
the Arrow table, when DuckDB is installed: it is not a dependency, having lost).

    python bench/task_log.py record [--executions 10000000] [--postgres]
    python bench/task_log.py formats [--format-executions 1000000]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import random
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from daskscope.collector.destination import sink_for
from daskscope.collector.writer import WriterThread
from daskscope.model import ClusterRecord, stable_id
from daskscope.store import open_store, write_records
from daskscope.tasklog.lookups import slowest_tasks, task_executions, timeline_extent
from daskscope.tasklog.record import TaskLog
from daskscope.tasklog.segments import decode_segment, encode_segment, execution
from daskscope.tasklog.window import timeline_window

WORKERS = [f"tcp://10.0.0.{i}:40{i}1" for i in range(1, 9)]
THREADS = [139_700_000_000 + i for i in range(4)]
GROUPS = [f"{name}-{i:x}{i * 7919 % 65536:04x}" for i, name in enumerate(
    ["read-parquet", "getitem", "add", "mul", "sum-chunk", "sum-combine", "sum-aggregate",
     "rechunk-split", "rechunk-merge", "astype", "finalize", "store-map"])]  # fmt: skip
T0 = 1.8e9


def simulated(n: int, seed: int = 1) -> Any:
    """``n`` executions as (key, ts, kwargs, computation): lanes run back to back."""
    rnd = random.Random(seed)
    lanes = [(w, t) for w in WORKERS for t in THREADS]
    clock = dict.fromkeys(lanes, T0)
    groups = [SimpleNamespace(name=g, span_id="span-" + g[-4:]) for g in GROUPS]
    prefixes = [SimpleNamespace(name=g.rsplit("-", 1)[0]) for g in GROUPS]
    for i in range(n):
        lane = lanes[i % len(lanes)]
        g = (i // 1000) % len(GROUPS)
        start = clock[lane] + rnd.random() * 0.002
        startstops = []
        if i % 7 == 0:
            took = rnd.uniform(0.001, 0.02)
            source = WORKERS[(WORKERS.index(lane[0]) + 1) % len(WORKERS)]
            startstops.append(
                {"action": "transfer", "start": start, "stop": start + took, "source": source}
            )
            start += took
        stop = start + rnd.uniform(0.001, 0.1)
        startstops.append({"action": "compute", "start": start, "stop": stop})
        clock[lane] = stop
        kwargs = {
            "worker": lane[0], "thread": lane[1], "nbytes": 8 * rnd.randrange(1, 1 << 20),
            "startstops": startstops, "type": b"", "typename": "numpy.ndarray",
            "metadata": {}, "stimulus_id": "task-finished",
        }  # fmt: skip
        ts = SimpleNamespace(group=groups[g], prefix=prefixes[g])
        yield (GROUPS[g], i), ts, kwargs, f"computation-{i // 100_000}"


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1e3


def record(args: argparse.Namespace) -> None:
    n = args.executions
    folder = Path(tempfile.mkdtemp(prefix="daskscope-tasklog-"))
    url = f"sqlite:///{folder / 'store.db'}"
    cluster = ClusterRecord(
        id=stable_id("bench-task-log", n), name="task log bench", account="bench", user="bench",
        scheduler_address="tcp://10.0.0.1:8786", dask_version="-", distributed_version="-",
        python_version=sys.version.split()[0], started_at=T0, last_seen_at=T0,
    )  # fmt: skip
    writer = WriterThread("bench-writer")
    sink = sink_for(database=url)
    writer.submit(sink.open).result()
    writer.submit(sink.write, [cluster]).result()
    log = TaskLog(cluster.id)
    log.attach(writer, lambda: sink)
    rss_before = rss_mib()
    hook = baseline = 0.0
    waited = 0
    chunk = 20_000
    made = simulated(n)
    for first in range(0, n, chunk):
        batch = [next(made) for _ in range(min(chunk, n - first))]
        started = time.perf_counter()
        for _key, _ts, _kwargs, _comp in batch:
            pass
        baseline += time.perf_counter() - started
        started = time.perf_counter()
        for key, ts, kwargs, comp in batch:
            log.task_done(key, ts, kwargs, comp, erred=False)
        hook += time.perf_counter() - started
        # a real scheduler is far slower than this loop: wait for the writer as it would
        while log.pending_segments >= log.max_pending_segments - 1:
            waited += 1
            time.sleep(0.05)
        if first // chunk % 50 == 49:
            asyncio.run(log.flush())  # a flush every million, as flushes would come
    asyncio.run(log.flush())
    writer.submit(sink.close).result()
    writer.shutdown()
    stats = log.stats
    assert stats.executions == n and stats.executions_dropped == 0, stats
    print(f"executions fed:                 {n:,}")
    print(f"hook (task_done) per task:      {(hook - baseline) / n * 1e6:.2f} µs")
    print(f"writer CPU (encode) per task:   {stats.encode_cpu_seconds / n * 1e6:.2f} µs")
    print(f"writer CPU (sink write) / task: {stats.write_cpu_seconds / n * 1e6:.2f} µs")
    print(f"segments:                       {stats.segments_written}")
    print(f"driver waits for the writer:    {waited} x 50 ms (fed faster than encoded)")
    print(f"peak RSS of the driver:         {rss_mib():.0f} MiB (before feeding {rss_before:.0f})")
    size = sum(f.stat().st_size for f in folder.glob("store.db*"))
    print(f"SQLite bytes per task:          {size / n:.2f} B (file {size / 2**20:.0f} MiB)")
    store = open_store(url)
    with store.engine.connect() as conn:
        parts = conn.exec_driver_sql(
            "SELECT sum(length(payload)), sum(length(summary)), sum(length(key_filter)) "
            "FROM task_segments"
        ).one()
    print("  of which payload / summary / key filter per task: "
          + " / ".join(f"{v / n:.2f}" for v in parts) + " B")  # fmt: skip
    stores = [("SQLite", store)]
    if args.postgres:
        stores.append(("PostgreSQL", copy_to_postgres(store, cluster.id, n)))
    for label, target in stores:
        queries(label, target, cluster.id, n)


def copy_to_postgres(store: Any, cluster_id: str, n: int) -> Any:
    sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
    from pgserver import PostgresServer  # the tests' throwaway server

    server = PostgresServer()
    server.start()
    pg = open_store(f"{server.url}/postgres")
    from daskscope.model import TaskSegmentRecord
    from daskscope.store import schema as s

    with store.engine.connect() as conn:
        cluster = conn.execute(s.clusters.select()).mappings().one()
        write_records(pg, [ClusterRecord(**cluster)])
        query = s.task_segments.select().where(s.task_segments.c.cluster_id == cluster_id)
        for row in conn.execute(query).mappings():
            values = dict(row)
            for name in ("payload", "summary", "key_filter"):
                values[name] = bytes(values[name])
            write_records(pg, [TaskSegmentRecord(**values)])
    with pg.engine.connect() as conn:
        size = conn.exec_driver_sql("SELECT pg_total_relation_size('task_segments')").scalar()
    print(f"PostgreSQL bytes per task:      {size / n:.2f} B (table with TOAST and indexes)")
    return pg


def queries(label: str, store: Any, cluster_id: str, n: int, repeat: int = 20) -> None:
    rnd = random.Random(3)
    extent = timeline_extent(store, cluster_id)
    first, last = extent.first or T0, extent.last or T0
    timed: dict[str, list[float]] = {}

    def run(name: str, fn: Any) -> None:
        started = time.perf_counter()
        fn()
        timed.setdefault(name, []).append(time.perf_counter() - started)

    for _ in range(repeat):
        at = rnd.uniform(first, last - 1.0)
        run("window, full zoom", lambda: timeline_window(store, cluster_id))
        run("window 1 s", lambda at=at: timeline_window(store, cluster_id, at, at + 1.0))
        run("window 10 ms", lambda at=at: timeline_window(store, cluster_id, at, at + 0.01))
        key = str((GROUPS[rnd.randrange(len(GROUPS))], rnd.randrange(n)))
        run("key lookup", lambda key=key: task_executions(store, cluster_id, key))
        group = GROUPS[rnd.randrange(len(GROUPS))]
        run("slowest of a group", lambda group=group: slowest_tasks(store, cluster_id, group=group))
    print(f"{label} queries over {n:,} executions ({repeat} each; ms):")
    for name, values in timed.items():
        print(f"  {name:22s} first {values[0] * 1e3:7.1f}  p50 {p(values, 50):7.1f}"
              f"  p95 {p(values, 95):7.1f}")  # fmt: skip


def formats(args: argparse.Namespace) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = args.format_executions
    rows = [
        execution(key, ts.group.name, ts.prefix.name, kw["worker"], kw["thread"],
                  kw["startstops"], erred=False, nbytes=kw["nbytes"], computation=comp,
                  span=ts.group.span_id)
        for key, ts, kw, comp in simulated(n)
    ]  # fmt: skip
    per = 50_000
    started = time.perf_counter()
    records = [r for i in range(0, n, per) for r in encode_segment("c", i, rows[i : i + per])]
    ipc_s = time.perf_counter() - started
    ipc_bytes = sum(len(r.payload) for r in records)
    decoded = [decode_segment(r.format, r.payload) for r in records]
    # the same columns as Parquet (zstd, dictionary, sorted by start)
    tables = []
    for seg in decoded:
        tables.append(pa.table({
            "key_form": seg.key_form, "key_rest": seg.key_rest,
            "group": pa.DictionaryArray.from_arrays(seg.group, pa.array(seg.names)),
            "worker": pa.DictionaryArray.from_arrays(seg.worker, pa.array(seg.names)),
            "thread": seg.thread, "start": seg.start, "stop": seg.stop, "state": seg.state,
            "nbytes": seg.nbytes,
            "computation": pa.DictionaryArray.from_arrays(seg.computation, pa.array(seg.names)),
        }))  # fmt: skip
    started = time.perf_counter()
    parquet_bytes = 0
    for table in tables:
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd", use_dictionary=True)
        parquet_bytes += buffer.tell()
    parquet_s = time.perf_counter() - started
    # one SQLite row per execution (actions in a second table)
    folder = Path(tempfile.mkdtemp(prefix="daskscope-formats-"))
    db = sqlite3.connect(folder / "rows.db")
    db.execute("CREATE TABLE executions (id INTEGER PRIMARY KEY, cluster_id TEXT, key TEXT, "
               "grp TEXT, worker TEXT, thread INTEGER, start REAL, stop REAL, state INTEGER, "
               "nbytes INTEGER, computation TEXT)")  # fmt: skip
    db.execute("CREATE INDEX ix_start ON executions (cluster_id, start)")
    db.execute("CREATE TABLE actions (execution INTEGER, action TEXT, start REAL, stop REAL, "
               "source TEXT)")  # fmt: skip
    started = time.perf_counter()
    for r in rows:
        db.execute("INSERT INTO executions (cluster_id, key, grp, worker, thread, start, stop, "
                   "state, nbytes, computation) VALUES (?,?,?,?,?,?,?,?,?,?)",
                   ("c", str(r[0]), r[1], r[3], r[4], r[5] or 0.0, r[6] or 0.0, 0, r[9],
                    r[10]))  # fmt: skip
        if r[7] is not None:
            ss = r[7][0]
            db.execute("INSERT INTO actions VALUES (last_insert_rowid(), ?, ?, ?, ?)",
                       (ss["action"], ss["start"], ss["stop"], ss.get("source")))  # fmt: skip
    db.commit()
    rows_s = time.perf_counter() - started
    db.execute("VACUUM")
    db.close()
    rows_bytes = (folder / "rows.db").stat().st_size
    print(f"{n:,} executions in {len(records)} segments of {per:,}:")
    print(f"  {'format':28s} {'B/task':>8s} {'encode µs/task':>15s}")
    print(f"  {'Arrow IPC + zstd (kept)':28s} {ipc_bytes / n:8.2f} {ipc_s / n * 1e6:15.2f}")
    print(f"  {'Parquet + zstd':28s} {parquet_bytes / n:8.2f} {parquet_s / n * 1e6:15.2f}"
          "  (from decoded columns)")  # fmt: skip
    print(f"  {'SQLite rows':28s} {rows_bytes / n:8.2f} {rows_s / n * 1e6:15.2f}")
    # one binned window (1000 bins per worker thread) over everything
    from daskscope.tasklog.summaries import busy_per_bin

    first = min(float(seg.start.min()) for seg in decoded)
    last = max(float(seg.stop.max()) for seg in decoded)
    edges = np.linspace(first, last, 1001)
    started = time.perf_counter()
    start = np.concatenate([seg.start for seg in decoded])
    stop = np.concatenate([seg.stop for seg in decoded])
    lane = np.concatenate([seg.worker.astype(np.int64) * 8 + seg.thread % 8 for seg in decoded])
    numpy_sums = {int(ln): busy_per_bin(start[lane == ln], stop[lane == ln], edges).sum()
                  for ln in np.unique(lane)}  # fmt: skip
    numpy_s = time.perf_counter() - started
    try:
        import duckdb  # not a dependency: measured slower than numpy for this
    except ImportError:
        print(f"  binned window over all: numpy {numpy_s * 1e3:.0f} ms (DuckDB not installed)")
        return
    db = duckdb.connect()
    db.register("intervals", pa.table({"lane": lane, "start": start, "stop": stop}))
    width = (last - first) / 1000
    started = time.perf_counter()
    # each execution's seconds by bin: DuckDB spreads an interval over its bins
    duck = db.sql(
        f"""
        WITH spread AS (
          SELECT lane, start, stop,
                 unnest(range(CAST(floor((start - {first}) / {width}) AS BIGINT),
                              CAST(floor((stop - {first}) / {width}) AS BIGINT) + 1)) AS b
          FROM intervals)
        SELECT lane, b, sum(least(stop, {first} + (b + 1) * {width})
                            - greatest(start, {first} + b * {width})) AS busy
        FROM spread GROUP BY lane, b
        """
    ).fetchnumpy()
    duck_s = time.perf_counter() - started
    duck_total = float(duck["busy"].sum())
    assert abs(duck_total - sum(numpy_sums.values())) < 1e-3 * duck_total
    print(
        f"  binned window over all ({len(np.unique(lane))} lanes x 1000 bins): "
        f"numpy {numpy_s * 1e3:.0f} ms, DuckDB {duck_s * 1e3:.0f} ms "
        f"(ratio DuckDB/numpy {duck_s / numpy_s:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["record", "formats"])
    parser.add_argument("--executions", type=int, default=10_000_000)
    parser.add_argument("--format-executions", type=int, default=1_000_000)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    record(args) if args.what == "record" else formats(args)


if __name__ == "__main__":
    main()
