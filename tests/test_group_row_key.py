"""A task group's row key is made of its parts, with no hash a group (issue 28, point 2):
``<computation's record id>/<lifetime>/<group name>``; a name too long for the ids that
refer to a group, or not ASCII, keeps the uuid5 form. Rows stored by earlier versions
(uuid5 ids) are read beside the new ones. Checked on a real cluster against Dask's own
task groups."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from dask import delayed
from distributed import Client, LocalCluster

import daskscope
from daskscope.collector.tracking import MAX_PLAIN_ID
from daskscope.model import TaskGroupRecord, stable_id
from daskscope.store import open_store, write_records
from daskscope.store import schema as s
from daskscope.store.groups import task_group_page

LONG = "long-" + "x" * MAX_PLAIN_ID


def inc(i: int) -> int:
    return i + 1


def test_group_rows_are_keyed_by_computation_lifetime_and_name(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"

    async def body() -> tuple[str, dict[str, int]]:
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
            # groups: "short" and the long name (tuple keys: a group per first element),
            # "grün" (not ASCII), and the sum
            parts = [delayed(inc)(i, dask_key_name=("short", i)) for i in range(3)]
            parts += [delayed(inc)(i, dask_key_name=(LONG, i)) for i in range(2)]
            parts += [delayed(inc)(i, dask_key_name=("grün", i)) for i in range(4)]
            total = client.compute(delayed(sum)(parts, dask_key_name="total"))
            assert await total == sum(range(1, 4)) + sum(range(1, 3)) + sum(range(1, 5))
            dask_counts = {name: len(tg) for name, tg in cluster.scheduler.task_groups.items()}
            status = await daskscope.flush(client)
            assert status["write_failures"] == 0 and status["hook_failures"] == {}
        return cluster_id, dask_counts

    cluster_id, dask_counts = asyncio.run(body())
    store = open_store(url)
    with store.engine.connect() as conn:
        rows = [
            dict(r._mapping)
            for r in conn.execute(
                sa.select(s.task_groups).where(s.task_groups.c.cluster_id == cluster_id)
            )
        ]
        (computation_id,) = conn.execute(
            sa.select(s.computations.c.id).where(s.computations.c.cluster_id == cluster_id)
        ).scalars()
    by_name = {row["name"]: row for row in rows}
    assert set(by_name) == {"short", LONG, "grün", "total"} == set(dask_counts)
    for name, row in by_name.items():
        assert row["tasks_executed"] == row["tasks_total"] == dask_counts[name]
        assert row["computation_id"] == computation_id
        owner, lifetime, rest = row["id"].split("/", 2) if "/" in row["id"] else ("", "", "")
        if name in ("short", "total"):
            assert (owner, rest) == (computation_id, name) and int(lifetime) >= 1
        else:  # too long, or not ASCII: a uuid5 of the parts
            assert len(row["id"]) == 36 and "/" not in row["id"]
    assert len({row["id"] for row in rows}) == len(rows)

    # a row an earlier version stored (uuid5 id) is read beside the new ones
    old = TaskGroupRecord(
        id=stable_id(cluster_id, "task-group", "earlier", 1, computation_id),
        cluster_id=cluster_id,
        name="earlier",
        prefix="earlier",
        computation_id=computation_id,
        states={"memory": 2},
        tasks_total=2,
        tasks_executed=2,
    )
    write_records(store, [old])
    page = task_group_page(store, cluster_id, offset=0, limit=100)
    assert page is not None
    listed: dict[str, Any] = {g["id"]: g for g in page["groups"]}
    assert set(listed) == {row["id"] for row in rows} | {old.id}
    assert listed[old.id]["tasks_executed"] == 2
    store.close()
