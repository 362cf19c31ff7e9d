"""Ingest under load: simulated clusters post batches to a real server while a reader
loads dashboard pages.

For each database (SQLite, a throwaway PostgreSQL), starts ``daskscope serve --auth`` in
its own process (a team server: every request carries a member's token, and ingest
checks which account each cluster belongs to); ``--clusters`` simulated collectors post
batches back to back for
``--seconds``; one reader loads the account and cluster pages' JSON at the same time.
Then it counts what the store holds against what was acknowledged. Prints accepted
records/s, p95 ingest and page latency, errors, lost and duplicated records, and ends
with one line of JSON. Also how much CPU the server, PostgreSQL and this load generator
each spent per accepted record: they share the machine. ``--workers 1,2`` measures
``daskscope serve --workers N`` for each N (several server processes on one port and one
database), with the CPU of each server process.

    python bench/ingest_load.py [--seconds 60] [--clusters 20] [--databases sqlite,postgres]
                                [--batch-records 501] [--no-reader] [--workers 1,2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from daskscope.store import open_store, table_counts
from daskscope.store.identity import add_user, create_account, create_token
from daskscope.wire import encode_batch
from factories import make_cluster, make_group, make_span_metric, make_worker_sample
from pgserver import PostgresServer, free_port

STAGGER_S = 0.05  # between the first connections of successive clusters
SEQ = "SEQ0000000"  # replaced in the encoded batch: fresh ids without re-encoding
#: the records' revision in the template (19 digits), replaced by a higher one each
#: batch as a recorder's sink numbers them: every cluster-row upsert is a versioned one
REVISION = 1_000_000_000_000_000_000


@dataclass(frozen=True)
class Load:
    clusters: int = 20
    seconds: float = 60
    #: records a batch: the cluster row, then 2/5 task groups, 2/5 fine metrics and
    #: 1/5 worker samples (501: 200, 200, 100 - what a busy collector sends a flush)
    batch_records: int = 501
    reader: bool = True

    @property
    def mix(self) -> tuple[int, int, int]:
        rest = self.batch_records - 1
        groups = metrics = 2 * rest // 5
        return groups, metrics, rest - groups - metrics


def batch_template(cluster: int, load: Load) -> bytes:
    """One batch as a real collector sends it: the cluster row, task groups, fine metrics
    and worker samples; ``SEQ`` in the ids becomes the batch number."""
    groups, metrics, samples = load.mix
    cid = f"load-cluster-{cluster:03d}"
    now = time.time()
    records: list[Any] = [
        make_cluster(
            f"load {cluster}",
            start=now,
            id=cid,
            account="default",
            user=f"user{cluster % 5}",
            scheduler_address=f"tcp://10.0.0.{cluster}:8786",
            python_version="3.11.7",
            stopped_at=None,
            last_seen_at=now,
            core_seconds=1000.0,
            tasks_executed=100_000,
        )
    ]
    records += [
        make_group(
            cid,
            f"inc-{i}-{SEQ}",
            id=f"{cid}-tg-{i}-{SEQ}",
            prefix=f"inc{i % 20}",
            dependencies=[f"ones-{i}-{SEQ}"],
            states={"memory": 10},
            tasks_total=10,
            tasks_executed=10,
            nbytes_total=80_000,
            duration_s=0.05,
            durations={"compute": 0.04, "transfer": 0.01},
            types=["numpy.ndarray"],
            started_at=now,
            stopped_at=now + 1,
        )
        for i in range(groups)
    ]
    records += [
        make_span_metric(
            cid,
            f"span-{SEQ}",
            f"inc{i % 20}",
            f"activity-{i}",
            "seconds",
            0.5,
            id=f"{cid}-m-{i}-{SEQ}",
        )
        for i in range(metrics)
    ]
    records += [
        make_worker_sample(
            cid, f"tcp://10.0.1.{i % 4}:40000", now + i, id=f"{cid}-w-{i}-{SEQ}",
            memory=2**30, cpu_percent=95.0, executing=4, processing=8,
        )
        for i in range(samples)
    ]  # fmt: skip
    for record in records:
        if hasattr(record, "revision"):  # a tree from before revisions has none
            record.revision = REVISION
    return encode_batch(records)


def start_server(database: str, port: int, log: Path, workers: int = 1) -> subprocess.Popen:
    command = [sys.executable, "-m", "daskscope.cli.main", "--database", database]
    command += ["serve", "--host", "127.0.0.1", "--port", str(port), "--auth"]
    command += ["--workers", str(workers)]
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120  # a start took 16 s on the shared machine under load
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"the server did not start: {log.read_text()[-2000:]}")


async def run_load(base: str, token: str, load: Load) -> dict[str, Any]:
    clusters = load.clusters
    templates = [batch_template(i, load) for i in range(clusters)]
    ingest_latencies: list[float] = []
    page_latencies: dict[str, list[float]] = {}
    errors: list[str] = []
    acknowledged = 0
    deadline = time.monotonic() + load.seconds
    limits = httpx.Limits(max_connections=clusters + 4)

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(
        base_url=base, timeout=60, limits=limits, headers=headers
    ) as client:

        async def collector(i: int) -> None:
            nonlocal acknowledged
            # Clusters connect one after another, not in the same millisecond: with
            # serve --workers N, a burst of connections is taken by whichever process
            # wakes first, and kept-alive connections stay with it.
            await asyncio.sleep(i * STAGGER_S)
            seq = 0
            while time.monotonic() < deadline:
                body = templates[i].replace(SEQ.encode(), f"{seq:010d}".encode())
                body = body.replace(str(REVISION).encode(), str(REVISION + 1 + seq).encode())
                seq += 1
                t0 = time.perf_counter()
                try:
                    response = await client.post(
                        "/api/v1/ingest",
                        content=body,
                        headers={"content-type": "application/json"},
                    )
                except httpx.HTTPError as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                ingest_latencies.append(time.perf_counter() - t0)
                if response.status_code == 200:
                    acknowledged += response.json()["records"]
                else:
                    errors.append(f"{response.status_code} {response.text[:200]}")

        async def reader() -> None:
            routes = ["/api/v1/account", "/api/v1/statistics", "/api/v1/usage", "/api/v1/clusters"]
            routes += [f"/api/v1/clusters/load-cluster-{i:03d}" for i in range(3)]
            while time.monotonic() < deadline:
                for route in routes:
                    t0 = time.perf_counter()
                    try:
                        response = await client.get(route)
                    except httpx.HTTPError as exc:
                        errors.append(f"{route}: {type(exc).__name__}: {exc}")
                        continue
                    page_latencies.setdefault(route, []).append(time.perf_counter() - t0)
                    if response.status_code >= 500:
                        errors.append(f"{route}: {response.status_code}")

        started = time.perf_counter()
        readers = [reader()] if load.reader else []
        await asyncio.gather(*readers, *(collector(i) for i in range(clusters)))
        elapsed = time.perf_counter() - started
    return {
        "elapsed_s": elapsed,
        "acknowledged": acknowledged,
        "ingest_latencies": ingest_latencies,
        "page_latencies": page_latencies,
        "errors": errors,
    }


def cpu_seconds(pid: int, *, children: bool = True) -> float:
    """CPU time of a process, with its live children and those it has reaped."""
    process = psutil.Process(pid)
    if not children:
        return sum(process.cpu_times()[:2])
    total = sum(process.cpu_times()[:4])  # user, system, children_user, children_system
    for child in process.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += sum(child.cpu_times()[:2])
    return total


def cpu_by_part(server_pid: int, db_pid: int | None) -> dict[str, float]:
    """Who spends the machine's CPU: the server, the database server, this load generator
    (which is also the server's parent: its own time only)."""
    parts = {"server": cpu_seconds(server_pid), "load": cpu_seconds(os.getpid(), children=False)}
    if db_pid is not None:
        parts["database"] = cpu_seconds(db_pid)
    return parts


def cpu_by_server_process(server_pid: int) -> dict[int, float]:
    """CPU time of each server process: with ``--workers N`` the supervisor (pid
    ``server_pid``) and its worker processes, each on its own."""
    process = psutil.Process(server_pid)
    times = {server_pid: cpu_seconds(server_pid, children=False)}
    for child in process.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            times[child.pid] = sum(child.cpu_times()[:2])
    return times


def p95_ms(values: list[float]) -> float | None:
    if not values:
        return None  # no pages were loaded (--no-reader)
    seconds = statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else values[0]
    return round(seconds * 1000, 1)


def measure(
    database: str, label: str, load: Load, tmp: Path, db_pid: int | None, workers: int = 1
) -> dict:
    with open_store(database) as store:
        create_account(store, "default")
        add_user(store, "loadtest", account="default")
        token = create_token(store, "loadtest")
    port = free_port()
    server = start_server(database, port, tmp / f"server-{label}.log", workers)
    try:
        before = cpu_by_part(server.pid, db_pid)
        before_each = cpu_by_server_process(server.pid)
        result = asyncio.run(run_load(f"http://127.0.0.1:{port}", token, load))
        after = cpu_by_part(server.pid, db_pid)
        after_each = cpu_by_server_process(server.pid)
    finally:
        died = server.poll()  # the server must still be up: anything else is a failure
        server.terminate()
        server.wait(30)
    if died is not None:
        log = (tmp / f"server-{label}.log").read_text()[-3000:]
        raise SystemExit(f"the {label} server died during the load (exit {died}):\n{log}")
    counts = table_counts(open_store(database))
    # Each batch's rows have fresh ids but the cluster row, which is updated in place.
    batches = result["acknowledged"] // load.batch_records
    expected_rows = batches * (load.batch_records - 1) + min(batches, load.clusters)
    stored_rows = sum(
        counts[t] for t in ("clusters", "task_groups", "span_metrics", "worker_samples")
    )
    pages = [v for values in result["page_latencies"].values() for v in values]
    accepted = max(1, result["acknowledged"])
    us_per_record = {
        part: round((after[part] - before[part]) * 1e6 / accepted, 1) for part in before
    }
    # one figure a server process, busiest first (with workers: the supervisor is last)
    per_process = sorted(
        (
            round((after_each[pid] - before_each.get(pid, 0.0)) * 1e6 / accepted, 1)
            for pid in after_each
        ),
        reverse=True,
    )
    return {
        "database": label,
        "workers": workers,
        "cpu_us_per_record": us_per_record,
        "server_process_us_per_record": per_process,
        "clusters": load.clusters,
        "batch_records": load.batch_records,
        "reader": load.reader,
        "seconds": round(result["elapsed_s"], 1),
        "records_per_s": round(result["acknowledged"] / result["elapsed_s"]),
        "batches": batches,
        "p95_ingest_ms": p95_ms(result["ingest_latencies"]),
        "p95_page_ms": p95_ms(pages),
        "page_requests": len(pages),
        "errors": len(result["errors"]),
        "first_errors": result["errors"][:3],
        "lost": max(0, expected_rows - stored_rows),
        "duplicates": max(0, stored_rows - expected_rows),
    }


def measure_on(label: str, load: Load, tmp: Path, workers: int) -> dict:
    tmp.mkdir()
    if label == "sqlite":
        return measure(f"sqlite:///{tmp / 'load.db'}", label, load, tmp, None, workers)
    if label != "postgres":
        raise SystemExit(f"unknown database {label!r}: use sqlite and/or postgres")
    pg = PostgresServer()
    pg.start()
    try:
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{pg.port}/postgres",
                             autocommit=True) as conn:  # fmt: skip
            conn.execute("CREATE DATABASE load")
        return measure(f"{pg.url}/load", label, load, tmp, pg.postmaster_pid(), workers)
    finally:
        pg.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--batch-records", type=int, default=501)
    parser.add_argument(
        "--no-reader", action="store_true", help="no page loads (to see ingest's own costs)"
    )
    parser.add_argument(
        "--workers", default="1", help="server processes (serve --workers N), e.g. 1,2"
    )
    args = parser.parse_args()
    worker_counts = [int(n) for n in args.workers.split(",")]
    if args.batch_records < 6:
        raise SystemExit("--batch-records: at least 6 (the cluster row and one of each kind)")
    load = Load(args.clusters, args.seconds, args.batch_records, not args.no_reader)
    results = []
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        for label in args.databases.split(","):
            for workers in worker_counts:  # a fresh database for each
                results.append(measure_on(label, load, tmp / f"{label}-{workers}", workers))
    for r in results:
        print(
            f"{r['database']:>8} x{r['workers']}: {r['records_per_s']:>8,} records/s accepted"
            f" over {r['seconds']} s"
            f" from {r['clusters']} clusters ({r['batch_records']} a batch)"
            f" | p95 ingest {r['p95_ingest_ms']} ms"
            + (
                f" | p95 page {r['p95_page_ms']} ms ({r['page_requests']} pages)"
                if r["reader"]
                else " | no reader"
            )
            + f" | errors {r['errors']} lost {r['lost']} duplicates {r['duplicates']}"
        )
        cpu = ", ".join(f"{part} {us}" for part, us in r["cpu_us_per_record"].items())
        print(f"          CPU µs per accepted record: {cpu}")
        each = ", ".join(str(us) for us in r["server_process_us_per_record"])
        print(f"          each server process: {each}")
        for error in r["first_errors"]:
            print(f"          {error}")
    load_average = [round(x, 2) for x in os.getloadavg()]
    print(f"load average at the end: {load_average} on {os.cpu_count()} cores")
    print(
        json.dumps({"cpu_count": os.cpu_count(), "load_average": load_average, "results": results})
    )


if __name__ == "__main__":
    main()
