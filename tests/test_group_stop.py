"""A group's start and stop when Dask reuses it across computations (issue 25, point 5).

Dask keeps a group's released tasks while a dependent lives, and the worker keeps its
own copy of each task with the start/stop entries of every execution. When a later
computation runs those tasks again, the worker's report carries the earlier
executions' entries first, each shifted by the clock offset the worker estimated at
the time (``Worker.scheduler_delay``, from its heartbeats): under load that estimate
swings by tenths of a second, so an earlier execution's entry can lie after the one
that just ended (seen: 0.46 s) — and a group's stop taken as the latest entry of all
lands in the next calls' windows. Here the mechanism is made deterministic on a real
cluster: the worker's heartbeats are held and its clock offset set to +5 s or -5 s
for the first computations and 0 for the second, which must then start and stop with
its own executions, as the task function timed them itself.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from dask import delayed
from distributed import Client, LocalCluster, SchedulerPlugin

import daskscope
from daskscope.store import open_store
from daskscope.store import schema as s

#: the task function's own timing of each execution: (group, index, start, stop)
TIMED: list[tuple[str, int, float, float]] = []

SHIFT = 5.0


def timed(group: str, i: int) -> int:
    start = time.time()
    time.sleep(0.01)
    TIMED.append((group, i, start, time.time()))
    return i


class Reports(SchedulerPlugin):
    """Dask's own reports of the tasks that finished: key and start/stop entries."""

    name = "reports"

    def __init__(self) -> None:
        self.finished: list[tuple[Any, list[dict[str, Any]]]] = []

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if start == "processing" and finish == "memory":
            self.finished.append((key, list(kwargs.get("startstops") or ())))


def _rows(url: str, table: sa.Table, cluster_id: str) -> list[dict[str, Any]]:
    with open_store(url).engine.connect() as conn:
        result = conn.execute(sa.select(table).where(table.c.cluster_id == cluster_id))
        return [dict(r._mapping) for r in result]


def _rows_by_id(url: str, cluster_id: str) -> dict[str, Any]:
    with open_store(url).engine.connect() as conn:
        row = conn.execute(sa.select(s.clusters).where(s.clusters.c.id == cluster_id)).one()
        return dict(row._mapping)


def test_a_reused_groups_start_and_stop_are_its_own_executions(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    TIMED.clear()

    async def body() -> tuple[str, float, float, Reports]:
        async with (
            LocalCluster(
                n_workers=1,
                threads_per_worker=1,
                processes=False,
                asynchronous=True,
                dashboard_address=":0",
            ) as cluster,
            Client(cluster, asynchronous=True) as client,
        ):
            cluster_id = await daskscope.register(client, database=url)
            reports = Reports()
            cluster.scheduler.add_plugin(reports)
            (worker,) = cluster.workers.values()
            late = [delayed(timed)("late", i, dask_key_name=("late", i)) for i in range(3)]
            early = [delayed(timed)("early", i, dask_key_name=("early", i)) for i in range(3)]

            heartbeat = worker.periodic_callbacks["heartbeat"]
            heartbeat.stop()  # the clock offsets set below stay as set
            try:
                # the first computations: the worker's clock offset off by ±5 s; their
                # results are kept, so Dask and the worker keep the tasks they used
                worker.scheduler_delay = SHIFT
                first_late = client.compute(delayed(sum)(late, dask_key_name="first-late"))
                assert await first_late == 3
                worker.scheduler_delay = -SHIFT
                first_early = client.compute(delayed(sum)(early, dask_key_name="first-early"))
                assert await first_early == 3
                # the second computation runs the same tasks again, its offset right
                worker.scheduler_delay = 0.0
                began = time.time()
                second = client.compute(delayed(sum)(late + early, dask_key_name="second"))
                assert await second == 6
                ended = time.time()
            finally:
                heartbeat.start()
            status = await daskscope.flush(client)
            assert status["write_failures"] == 0 and status["hook_failures"] == {}
            del first_late, first_early, second

        # The mechanism happened: each second execution's report carries the first
        # one's entry before its own, shifted by 5 s either way
        again = [(k, ss) for k, ss in reports.finished if k[0] in ("late", "early")][6:]
        assert len(again) == 6
        for key, entries in again:
            computes = [e for e in entries if e["action"] == "compute"]
            assert len(computes) == 2, (key, entries)
            if key[0] == "late":
                assert computes[0]["stop"] > computes[1]["stop"] + SHIFT / 2
            else:
                assert computes[0]["start"] < computes[1]["start"] - SHIFT / 2
        return cluster_id, began, ended, reports

    cluster_id, began, ended, reports = asyncio.run(body())

    computations = sorted(_rows(url, s.computations, cluster_id), key=lambda c: c["started_at"])
    assert len(computations) == 3
    second = computations[-1]
    by_name = {
        g["name"]: g
        for g in _rows(url, s.task_groups, cluster_id)
        if g["computation_id"] == second["id"]
    }
    assert {"late", "early"} <= set(by_name)
    for name in ("late", "early"):
        # the second executions, as the function timed them (three per group)
        own = [(start, stop) for group, _, start, stop in TIMED[6:] if group == name]
        assert len(own) == 3
        group = by_name[name]
        assert group["tasks_executed"] == 3
        # Dask times a task around the function: its start before the function's own,
        # its stop after; both inside the call
        assert began <= group["started_at"] <= min(start for start, _ in own), name
        assert max(stop for _, stop in own) <= group["stopped_at"] <= ended, name
    assert max(by_name[n]["stopped_at"] for n in by_name) <= second["stopped_at"] <= ended

    # Task time: each execution once, its own compute entry (Dask's group durations add
    # the re-sent entries again), in whole microseconds as Dask counts
    def micros(entry: dict[str, Any]) -> int:
        return max(round((entry["stop"] - entry["start"]) * 1e6), 0)

    own = {name: 0 for name in ("late", "early")}
    everything = 0
    for key, entries in reports.finished:
        computes = [e for e in entries if e["action"] == "compute"]
        everything += micros(computes[-1])
        if isinstance(key, tuple) and len(computes) == 2:  # a second execution
            own[key[0]] += micros(computes[-1])
    for name in own:
        assert by_name[name]["durations"]["compute"] == pytest.approx(own[name] / 1e6, abs=1e-6)
    cluster = _rows_by_id(url, cluster_id)
    assert cluster["compute_seconds"] == pytest.approx(everything / 1e6, abs=1e-5)
