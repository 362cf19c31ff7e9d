"""The task log partitioned by month against one table, on PostgreSQL, side by side.

    python bench/retention.py [--rows-per-month 50000] [--payload 512]

A throwaway PostgreSQL server (``tests/pgserver.py``); one database migrated by
daskscope (``task_segments`` partitioned by month, migration 0018) and, beside it, a
plain table of the same columns, primary key and index: what the task log was before.
Both get the same simulated year: 12 months of segment rows (``--rows-per-month``, each
with a ``--payload``-byte payload), 100 clusters a month. Then, on each, alternately:

* insert: batches of 1,000 new segments into this month (``INSERT ... ON CONFLICT``, the
  writer's statement shape), µs a row;
* window: one cluster's segments in a one-hour window (the timeline's read), and every
  segment of one day across clusters, ms a query;
* expiry: removing the oldest month, ``DROP TABLE`` of its partition against
  ``DELETE`` of its rows.

Prints a table and the ratios (plain / partitioned); the load average at the start.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from daskscope.store import open_store
from daskscope.store.partitions import create_partition, month_partition
from pgserver import PostgresServer

COLUMNS = (
    "id, cluster_id, segment, first_start, last_stop, executions, format, payload, "
    "groups, summary, key_filter, revision"
)
CLUSTERS = 100


def months_back(n: int) -> list[tuple[int, int]]:
    now = dt.datetime.now(dt.UTC)
    out = []
    for back in range(n - 1, -1, -1):
        index = now.year * 12 + now.month - 1 - back
        out.append((index // 12, index % 12 + 1))
    return out


def rows(year: int, month: int, count: int, payload: bytes, tag: str) -> list[tuple[object, ...]]:
    part = month_partition(year, month)
    span = part.stop - part.start - 3600
    out = []
    for i in range(count):
        start = part.start + span * i / count
        cluster = f"c-{year}-{month}-{i % CLUSTERS}"
        out.append(
            (
                f"{tag}-{year}-{month}-{i}",
                cluster,
                i // CLUSTERS,
                start,
                start + 30.0,
                50,
                "v1",
                payload,
                '["inc"]',
                b"s" * 16,
                b"k" * 16,
                1,
            )
        )
    return out


def load(conn: object, table: str, data: list[tuple[object, ...]]) -> None:
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({COLUMNS}) FROM STDIN") as copy:  # type: ignore[attr-defined]
        for row in data:
            copy.write_row(row)


def timed(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows-per-month", type=int, default=50_000)
    parser.add_argument("--payload", type=int, default=512)
    args = parser.parse_args()
    import psycopg

    print(f"load average at start: {os.getloadavg()}")
    server = PostgresServer()
    server.start()
    try:
        with psycopg.connect(
            server.url.replace("+psycopg", "") + "/postgres", autocommit=True
        ) as a:
            a.execute("CREATE DATABASE bench")
        url = f"{server.url}/bench"
        with open_store(url) as store, store.engine.begin() as sa_conn:
            for year, month in months_back(12):
                create_partition(sa_conn, month_partition(year, month))
        pg = psycopg.connect(url.replace("+psycopg", ""), autocommit=True)
        pg.execute("CREATE TABLE plain (LIKE task_segments INCLUDING DEFAULTS)")
        pg.execute("ALTER TABLE plain ADD PRIMARY KEY (id)")
        pg.execute("CREATE INDEX ix_plain ON plain (cluster_id, first_start)")
        payload = os.urandom(args.payload)
        year_months = months_back(12)
        t0 = time.perf_counter()
        for year, month in year_months:
            data = rows(year, month, args.rows_per_month, payload, "base")
            load(pg, "task_segments", data)
            load(pg, "plain", data)
        pg.execute("ANALYZE task_segments")
        pg.execute("ANALYZE plain")
        print(f"loaded 2 x {12 * args.rows_per_month:,} rows in {time.perf_counter() - t0:.0f} s")
        total = args.rows_per_month * 12
        sizes = {
            t: pg.execute(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                "WHERE c.oid = %s::regclass OR c.oid IN "
                "(SELECT inhrelid FROM pg_inherits WHERE inhparent = %s::regclass)",
                (t, t),
            ).fetchone()[0]
            for t in ("task_segments", "plain")
        }
        for t, size in sizes.items():
            print(f"{t}: {size / total:.0f} B a row ({args.payload} B payload)")

        results: dict[str, dict[str, float]] = {"task_segments": {}, "plain": {}}
        this_year, this_month = year_months[-1]
        batch = 1000
        for rnd in range(3):  # alternate so that the load falls on both alike
            for table in ("task_segments", "plain"):
                data = rows(this_year, this_month, batch, payload, f"new{rnd}-{uuid.uuid4().hex}")
                placeholders = ", ".join(["%s"] * 12)
                sql = (
                    f"INSERT INTO {table} ({COLUMNS}) VALUES ({placeholders}) "
                    "ON CONFLICT (id"
                    + (", first_start" if table == "task_segments" else "")
                    + ") DO UPDATE SET executions = excluded.executions"
                )
                t0 = time.perf_counter()
                with pg.transaction(), pg.cursor() as cur:
                    cur.executemany(sql, data)
                per_row = (time.perf_counter() - t0) / batch * 1e6
                results[table].setdefault("insert", float("inf"))
                results[table]["insert"] = min(results[table]["insert"], per_row)
        mid_year, mid_month = year_months[6]
        mid = month_partition(mid_year, mid_month)
        cluster = f"c-{mid_year}-{mid_month}-7"
        day = mid.start + 10 * 86400
        queries = {
            "cluster window": (
                "SELECT id, first_start, last_stop FROM {} WHERE cluster_id = %s "
                "AND first_start >= %s AND first_start < %s",
                (cluster, day, day + 3600),
            ),
            "day, all clusters": (
                "SELECT count(*), sum(executions) FROM {} "
                "WHERE first_start >= %s AND first_start < %s",
                (day, day + 86400),
            ),
        }
        for name, (sql, params) in queries.items():
            plan = pg.execute("EXPLAIN " + sql.format("task_segments"), params).fetchall()
            scanned = sum("task_segments_" in line[0] for line in plan)
            print(f"{name}: the partitioned plan reads {scanned} partition(s)")
        for _ in range(3):  # alternate, the best of three medians: the load varies
            for table in ("task_segments", "plain"):
                for name, (sql, params) in queries.items():
                    text = sql.format(table)
                    pg.execute(text, params).fetchall()  # warm
                    ms = 1e3 * timed(lambda s=text, p=params: pg.execute(s, p).fetchall(), 10)
                    results[table][name] = min(results[table].get(name, float("inf")), ms)
        oldest = month_partition(*year_months[0])
        t0 = time.perf_counter()
        pg.execute(f"DROP TABLE {oldest.qualified}")
        results["task_segments"]["expire a month"] = 1e3 * (time.perf_counter() - t0)
        t0 = time.perf_counter()
        pg.execute(
            "DELETE FROM plain WHERE first_start >= %s AND first_start < %s",
            (oldest.start, oldest.stop),
        )
        results["plain"]["expire a month"] = 1e3 * (time.perf_counter() - t0)
        pg.close()
        print(f"load average at end: {os.getloadavg()}")
        units = {
            "insert": "µs a row",
            "cluster window": "ms",
            "day, all clusters": "ms",
            "expire a month": "ms",
        }
        print("| measure | partitioned (12 months) | one table | one table / partitioned |")
        print("|---|---:|---:|---:|")
        for name, unit in units.items():
            p, q = results["task_segments"][name], results["plain"][name]
            print(f"| {name} ({unit}) | {p:.2f} | {q:.2f} | {q / p:.2f} |")
    finally:
        server.remove()


if __name__ == "__main__":
    main()
