"""The collector against ground truth from Dask itself, on real clusters and a real store."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import pytest
import sqlalchemy as sa
from distributed import Client, LocalCluster, span

import daskscope
from daskscope.collector.memory_sink import MemorySink
from daskscope.collector.plugin import DaskscopePlugin
from daskscope.store import cluster_detail, open_store, table_counts
from daskscope.store import schema as store_schema
from daskscope.store.engine import as_engine

IDLE = ("execute", "N/A", "idle or other spans", "seconds")


def run(body: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    return asyncio.run(body(*args))


async def in_process_cluster(url: str, **register_kwargs: Any):
    cluster = await LocalCluster(
        n_workers=2,
        threads_per_worker=2,
        processes=False,
        asynchronous=True,
        dashboard_address=":0",
    )
    client = await Client(cluster, asynchronous=True)
    cluster_id = await daskscope.register(client, database=url, **register_kwargs)
    return cluster, client, cluster_id


def fail(x: int) -> int:
    raise ValueError(f"failing on purpose with {x}")


def inc(x: int) -> int:
    return x + 1


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


def span_metric_rows(store: Any, cluster_id: str) -> list[dict[str, Any]]:
    """Every stored fine-metric row of the cluster, read from its table (the cluster
    detail sums them)."""
    table = store_schema.span_metrics
    with as_engine(store).connect() as conn:
        rows = conn.execute(sa.select(table).where(table.c.cluster_id == cluster_id))
        return [dict(row._mapping) for row in rows]


def metric_key(row: dict[str, Any]) -> tuple[str, ...]:
    return (row["context"], row["prefix"], row["activity"], row["unit"])


def test_records_match_dask_ground_truth(database_url: str) -> None:
    """On SQLite and PostgreSQL alike (``database_url`` is parametrized in conftest)."""
    db_url = database_url

    async def body() -> None:
        cluster, client, cluster_id = await in_process_cluster(db_url)
        scheduler = cluster.scheduler
        async with cluster, client:
            # Without fusion, array tasks keep their span annotations
            with dask.config.set({"optimization.fuse.active": False}):
                with span("analysis"):
                    with span("load"):
                        x = da.random.random((400, 400), chunks=100)
                    with span("reduce"):
                        total = await client.compute((x @ x.T).sum())  # the calling line
            assert total > 0
            futures = client.map(fail, range(3))
            for future in futures:
                with pytest.raises(ValueError):
                    await future
            ok = await client.submit(inc, 41)
            assert ok == 42
            status = await daskscope.flush(client)
            assert status["write_failures"] == 0 and status["hook_failures"] == {}

            extension = scheduler.extensions["spans"]
            groups = {tg for sp in extension.spans.values() for tg in sp.groups}
            truth_groups = {tg.name: tg for tg in groups}
            truth_spans = dict(extension.spans)
            truth_own = {
                sid: dict(sp._cumulative_worker_metrics) for sid, sp in truth_spans.items()
            }
            truth_cumulative = {
                sid: dict(sp.cumulative_worker_metrics) for sid, sp in truth_spans.items()
            }
            erred_truth = scheduler.task_prefixes["fail"].state_counts["erred"]

        store = open_store(db_url)
        detail = cluster_detail(store, cluster_id)
        stored_groups = {g["name"]: g for g in detail["task_groups"]}

        # every group Dask ran, with its task count, edges and bytes
        assert set(stored_groups) == set(truth_groups)
        for name, tg in truth_groups.items():
            stored = stored_groups[name]
            if name.startswith("fail"):
                assert stored["tasks_erred"] == len(tg) and stored["tasks_executed"] == 0
            else:
                assert stored["tasks_executed"] == len(tg), name
            assert stored["dependencies"] == sorted(d.name for d in tg.dependencies)
            assert stored["nbytes_total"] == tg.nbytes_total
            assert stored["durations"] == pytest.approx(dict(tg.all_durations))
            assert stored["span_id"] == tg.span_id
        cluster_row = detail["cluster"]
        executed_truth = sum(len(tg) for tg in groups if not tg.name.startswith("fail"))
        assert cluster_row["tasks_executed"] == executed_truth
        assert cluster_row["tasks_erred"] == erred_truth == 3
        assert cluster_row["bytes_processed"] == sum(tg.nbytes_total for tg in groups)
        assert cluster_row["stopped_at"] is not None
        assert cluster_row["stopped_at"] >= cluster_row["started_at"]
        assert cluster_row["core_seconds"] > 0
        assert cluster_row["threads_peak"] == 4 and cluster_row["workers_peak"] == 2
        assert cluster_row["name"] == f"LocalCluster {cluster.name}"

        # errors, with the exception text and the worker
        assert len(detail["errors"]) == 3
        assert all("failing on purpose" in e["exception"] for e in detail["errors"])
        assert all(e["worker"] for e in detail["errors"])
        assert all("raise ValueError" in e["traceback"] for e in detail["errors"])

        # the span tree and every fine metric, exclusive per span
        stored_spans = {s["span_id"]: s for s in detail["spans"]}
        assert set(stored_spans) == set(truth_spans)
        for sid, sp in truth_spans.items():
            assert stored_spans[sid]["name"] == list(sp.name)
            parent = sp.parent.id if sp.parent else None
            assert stored_spans[sid]["parent_span_id"] == parent
        stored_metrics: dict[str, dict[tuple[str, ...], float]] = {}
        for row in span_metric_rows(store, cluster_id):
            stored_metrics.setdefault(row["span_id"], {})[metric_key(row)] = row["value"]
        for sid, own in truth_own.items():
            expected = {tuple(map(str, k)): v for k, v in own.items()}
            assert stored_metrics.get(sid, {}) == pytest.approx(expected)
        # ...and subtree sums of the stored metrics give back Dask's cumulative view
        children: dict[str | None, list[str]] = {}
        for s in detail["spans"]:
            children.setdefault(s["parent_span_id"], []).append(s["span_id"])

        def subtree(sid: str) -> dict[tuple[str, ...], float]:
            out = dict(stored_metrics.get(sid, {}))
            for child in children.get(sid, []):
                for k, v in subtree(child).items():
                    out[k] = out.get(k, 0.0) + v
            return out

        for sid, cumulative in truth_cumulative.items():
            mine = subtree(sid)
            known = sum(v for k, v in mine.items() if k[0] == "execute" and k[-1] == "seconds")
            mine[IDLE] = max(0.0, stored_spans[sid]["active_cpu_seconds"] - known)
            expected = {tuple(map(str, k)): v for k, v in cumulative.items()}
            assert mine == pytest.approx(expected, rel=1e-6, abs=1e-6)
        assert any(row["activity"] == "thread-cpu" for row in span_metric_rows(store, cluster_id))

        # computations, with the code that launched them
        codes = "\n".join(c for comp in detail["computations"] for c in comp["code"])
        assert "the calling line" in codes
        assert sum(c["tasks_executed"] for c in detail["computations"]) == executed_truth
        assert sum(c["tasks_erred"] for c in detail["computations"]) == 3
        grouped = [n for c in detail["computations"] for n in c["task_groups"]]
        assert sorted(grouped) == sorted(truth_groups)  # each group in exactly one computation

        # workers and lifecycle
        kinds = [e["kind"] for e in detail["events"]]
        assert kinds.count("worker-added") == 2 and "cluster-closed" in kinds
        assert table_counts(store, cluster_id)["worker_samples"] >= 2
        prefixes = {p["name"]: p for p in detail["task_prefixes"]}
        assert prefixes["fail"]["tasks_erred"] == 3
        assert sum(p["tasks_executed"] for p in prefixes.values()) == executed_truth

    run(body)


def test_flushing_twice_stores_each_record_once(database_url: str) -> None:
    db_url = database_url

    async def body() -> None:
        cluster, client, cluster_id = await in_process_cluster(db_url)
        async with cluster, client:
            await client.gather(client.map(inc, range(50)))
            await daskscope.flush(client)
            store = open_store(db_url)
            before = table_counts(store, cluster_id)
            plugin = cluster.scheduler.plugins["daskscope"]
            # forget what was written: the same records are written again
            plugin.write_all_again()
            await daskscope.flush(client, wait_for_metrics=False)
            after = table_counts(store, cluster_id)
        for table in ("computations", "task_groups", "task_prefixes", "spans", "span_metrics"):
            assert after[table] == before[table], table

    run(body)


def test_failures_inside_daskscope_never_reach_dask(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        cluster, client, cluster_id = await in_process_cluster(db_url)
        async with cluster, client:
            plugin: DaskscopePlugin = cluster.scheduler.plugins["daskscope"]
            await plugin._first_flush_done()  # the cluster's record, written as it started
            good_sink = plugin._sink

            def broken_track(*args: Any, **kwargs: Any) -> Any:
                raise RuntimeError("bug inside daskscope")

            plugin._sink = MemorySink(fail=OSError("disk on fire"))
            tracker = plugin.tracker
            real_finished, real_snapshot = tracker.task_finished, tracker.snapshot_groups
            tracker.task_finished = broken_track  # type: ignore[method-assign]
            tracker.snapshot_groups = broken_track  # type: ignore[method-assign]
            results = await client.gather(client.map(inc, range(100)))
            assert results == list(range(1, 101))
            status = await daskscope.flush(client, wait_for_metrics=False)
            assert status["hook_failures"]["transition"] == 100
            assert status["hook_failures"]["snapshot"] == 1
            assert status["write_failures"] == 1 and "disk on fire" in status["last_write_error"]

            # the store comes back: what was kept in memory is written then
            tracker.task_finished = real_finished  # type: ignore[method-assign]
            tracker.snapshot_groups = real_snapshot  # type: ignore[method-assign]
            plugin._sink = good_sink
            assert await client.submit(inc, 1) == 2
            status = await daskscope.flush(client, wait_for_metrics=False)
            assert status["last_write_error"] is None

        detail = cluster_detail(open_store(db_url), cluster_id)
        kinds = [e["kind"] for e in detail["events"]]
        assert kinds.count("worker-added") == 2  # buffered during the outage, not lost
        assert any(g["name"].startswith("inc") for g in detail["task_groups"])

    # only the test's own flushes: a periodic one on a loaded machine would count twice
    with (
        dask.config.set({"daskscope.flush-interval": "1h"}),
        caplog.at_level(logging.ERROR, logger="daskscope"),
    ):
        run(body)
    assert "transition hook failed" in caplog.text


def test_unwritable_store_does_not_break_the_computation(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    url = f"sqlite:///{blocker / 'store.db'}"  # cannot be created: its parent is a file

    async def body() -> None:
        cluster, client, _ = await in_process_cluster(url)
        async with cluster, client:
            assert await client.gather(client.map(inc, range(20))) == list(range(1, 21))
            status = await daskscope.flush(client, wait_for_metrics=False)
            assert status["write_failures"] >= 1
            assert status["last_write_error"]

    run(body)
    assert blocker.read_text() == "not a directory"


def test_memory_stays_bounded_over_many_computations(db_url: str) -> None:
    async def body() -> None:
        cluster, client, _ = await in_process_cluster(db_url)
        async with cluster, client:
            plugin: DaskscopePlugin = cluster.scheduler.plugins["daskscope"]
            for i in range(30):
                x = da.ones((100,), chunks=10) + i
                assert await client.compute(x.sum()) == 100 * (i + 1)
                if i % 5 == 4:
                    await daskscope.flush(client, wait_for_metrics=False)
            await daskscope.flush(client, wait_for_metrics=False)
            await daskscope.flush(client, wait_for_metrics=False)
            # finished, forgotten and written: only the newest computation is kept
            assert len(plugin.tracker.computations) <= 2
            assert len(plugin.tracker.current) <= 10
            assert plugin._buffer == []
            cluster_row = plugin._cluster
            assert cluster_row.tasks_executed >= 30 * 11

    run(body)


def test_preload_records_without_code_changes(db_url: str) -> None:
    async def body() -> None:
        with dask.config.set({"daskscope.database": db_url, "daskscope.cluster-name": "preloaded"}):
            cluster = await LocalCluster(
                n_workers=1,
                processes=False,
                asynchronous=True,
                dashboard_address=":0",
                scheduler_kwargs={"preload": ["daskscope"]},
            )
            async with cluster, Client(cluster, asynchronous=True) as client:
                assert await client.submit(inc, 1) == 2
                status = await daskscope.flush(client)
        return status["cluster_id"]

    cluster_id = run(body)
    detail = cluster_detail(open_store(db_url), cluster_id)
    assert detail["cluster"]["name"] == "preloaded"
    assert detail["cluster"]["tasks_executed"] == 1


def test_registering_twice_keeps_one_recorder(db_url: str) -> None:
    async def body() -> None:
        cluster, client, first = await in_process_cluster(db_url)
        async with cluster, client:
            second = await daskscope.register(client, database=db_url)
            assert second == first
            assert list(cluster.scheduler.plugins).count("daskscope") == 1

    run(body)


def slow_inc(x: int) -> int:
    import time

    time.sleep(0.05)
    return x + 1


def test_worker_loss_is_recorded_and_recomputed_tasks_counted(db_url: str) -> None:
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=db_url)
        futures = client.map(slow_inc, range(200))
        # wait until some results sit on the victim, then kill its process without warning
        victim_pid = None
        deadline = time.monotonic() + 120
        while victim_pid is None:
            who_has = client.who_has()
            held = {w for ws in who_has.values() for w in ws}
            if len(held) == 2 and len(who_has) > 40:
                victim = sorted(held)[0]
                victim_pid = client.run(os.getpid, workers=[victim])[victim]
            else:
                # polled at the pace of the tasks (0.05 s each), not as fast as the
                # scheduler answers: that spin took a core from the cluster it waits on
                assert time.monotonic() < deadline, "no results on both workers"
                time.sleep(0.05)
        os.kill(victim_pid, signal.SIGKILL)
        assert client.gather(futures) == list(range(1, 201))
        daskscope.flush(client)
    detail = cluster_detail(open_store(db_url), cluster_id)
    removed = [e for e in detail["events"] if e["kind"] == "worker-removed"]
    assert removed and removed[0]["detail"]["reason"] == "lost"
    assert removed[0]["detail"]["expected"] is False
    # the tasks lost with the worker ran again, and each run is counted
    assert detail["cluster"]["tasks_executed"] > 200
