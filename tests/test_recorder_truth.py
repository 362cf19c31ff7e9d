"""The recorder as people use it, against Dask's own task stream and event log.

A notebook session (data persisted once, then many small computations, one failing),
the ways a worker leaves, and the end of a cluster.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from time import sleep as wall_sleep
from typing import Any

import dask.array as da
import pytest
import sqlalchemy as sa
from distributed import Client, LocalCluster, SchedulerPlugin, get_task_stream, wait
from distributed.metrics import time
from distributed.utils import key_split_group

import daskscope
from daskscope.store import open_store
from daskscope.store import schema as s


def rows(url: str, table: sa.Table, cluster_id: str) -> list[dict[str, Any]]:
    with open_store(url).engine.connect() as conn:
        column = table.c.id if table is s.clusters else table.c.cluster_id
        result = conn.execute(sa.select(table).where(column == cluster_id))
        return [dict(r._mapping) for r in result]


class GraphLog(SchedulerPlugin):
    """Ground truth kept by key, in the scheduler's own order of events: the keys of
    every graph received, and each task that left ``processing`` counted for the newest
    graph that held its key."""

    name = "graph-log"

    def __init__(self) -> None:
        self.graphs: list[set[Any]] = []
        self.ran: list[dict[str, Any]] = []

    def update_graph(self, scheduler: Any, *, tasks: Any = (), **kwargs: Any) -> None:
        self.graphs.append(set(tasks))
        self.ran.append({"executed": [], "erred": [], "last_stop": 0.0})

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if start == "processing" and finish in ("memory", "erred"):
            owner = max(i for i, keys in enumerate(self.graphs) if key in keys)
            ran = self.ran[owner]
            ran["executed" if finish == "memory" else "erred"].append(key)
            # this execution is the last "compute" entry: a worker that kept the task
            # from an earlier call sends that call's entries first (their clock offset
            # may put them later), and a "disk-write" after it is the worker storing
            # the result, timed on its event loop
            computes = [ss for ss in kwargs.get("startstops") or () if ss["action"] == "compute"]
            if computes:
                ran["last_stop"] = max(ran["last_stop"], computes[-1]["stop"])


def boom(block: Any) -> Any:
    raise ZeroDivisionError("a bad block")


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


def test_each_computation_owns_its_tasks_in_a_notebook_loop(db_url: str) -> None:
    """Ground truth: the task stream's executions inside each compute() call's window."""
    calls: list[tuple[str, float, float]] = []

    def call(label: str, fn: Any) -> Any:
        started = time()
        try:
            return fn()
        finally:
            calls.append((label, started, time()))

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=db_url)
        graphs = GraphLog()
        cluster.scheduler.add_plugin(graphs)
        with get_task_stream(client) as stream:
            data = da.random.random(4000, chunks=250)

            def persist() -> Any:
                persisted = data.persist()
                wait(persisted)
                return persisted

            x = call("persist", persist)
            call("sum", lambda: x.sum().compute())
            call("mean", lambda: x.mean().compute())
            for _ in range(150):
                call("loop", lambda: (x + 1).sum().compute())
            for attempt in ("fail", "retry"):
                with pytest.raises(ZeroDivisionError):
                    call(attempt, lambda: x.map_blocks(boom, dtype=float).sum().compute())
            call("after", lambda: x.max().compute())
        status = daskscope.flush(client)
        assert status["write_failures"] == 0 and status["hook_failures"] == {}
        dask_kept = len(cluster.scheduler.computations)

    # The task stream saw exactly the executions the ground truth placed
    assert len(graphs.graphs) == len(calls)
    placed = sorted(map(repr, (k for r in graphs.ran for k in r["executed"] + r["erred"])))
    assert placed == sorted(repr(t["key"]) for t in stream.data)
    truth = [
        {
            "executed": len(r["executed"]),
            "erred": len(r["erred"]),
            "groups": {key_split_group(k) for k in r["executed"] + r["erred"]},
            "last_stop": r["last_stop"],
        }
        for r in graphs.ran
    ]

    computations = sorted(rows(db_url, s.computations, cluster_id), key=lambda c: c["started_at"])
    groups_by_computation: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for group in rows(db_url, s.task_groups, cluster_id):
        groups_by_computation[group["computation_id"]][group["name"]] = group

    # every call is one computation, more than Dask itself keeps
    assert len(computations) == len(calls) == 156 > dask_kept
    for i, (computation, (label, start, stop), t) in enumerate(
        zip(computations, calls, truth, strict=True)
    ):
        assert start <= computation["started_at"] <= stop, label
        assert computation["tasks_executed"] == t["executed"], label
        assert computation["tasks_erred"] == t["erred"], label
        stored = groups_by_computation[computation["id"]]
        assert set(stored) == t["groups"], label
        assert sum(g["tasks_executed"] for g in stored.values()) == t["executed"]
        assert sum(g["tasks_erred"] for g in stored.values()) == t["erred"]
        # it stops with its last task
        if t["executed"] or t["erred"]:
            # what a failure shows: the call, its groups' stops and the next call's window
            seen = (label, i, {n: g["stopped_at"] for n, g in stored.items()}, calls[i + 1 :][:1])
            assert computation["stopped_at"] == pytest.approx(t["last_stop"], abs=0.05), seen
        else:  # it ran nothing (all it needed was held already): it took no time
            assert computation["stopped_at"] == computation["started_at"], label
        assert "call(" in "\n".join(computation["code"]), label
    # the failing call owns its errors (compute() gives up at the first one; the retry
    # may find the error still held by the scheduler and run nothing, as Dask decides)
    by_label = dict(zip([c[0] for c in calls], computations, strict=True))
    assert by_label["fail"]["tasks_erred"] >= 1
    erred_total = sum(t["erred"] for t in truth)
    errors = rows(db_url, s.errors, cluster_id)
    assert len(errors) == erred_total
    assert all("a bad block" in e["exception"] for e in errors)

    cluster_row = rows(db_url, s.clusters, cluster_id)[0]
    assert cluster_row["tasks_executed"] == sum(t["executed"] for t in truth)
    assert cluster_row["tasks_erred"] == erred_total
    prefixes = rows(db_url, s.task_prefixes, cluster_id)
    assert sum(p["tasks_executed"] for p in prefixes) == cluster_row["tasks_executed"]


def deep(n: int) -> int:
    if n == 0:
        wall_sleep(0.6)  # the profiler samples this frame, 400 calls deep
        return 0
    return deep(n - 1) + 1


def tree_depth(tree: dict[str, Any]) -> int:
    deepest, pending = 0, [(tree, 0)]
    while pending:
        node, d = pending.pop()
        deepest = max(deepest, d)
        pending.extend((c, d + 1) for c in node["children"].values())
    return deepest


def test_a_deep_recursion_profile_is_stored(db_url: str) -> None:
    """Dask cuts stacks at 100 frames itself; what it sends is stored whole."""
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        attached = time()
        cluster_id = daskscope.register(client, database=db_url)
        assert client.submit(deep, 400).result() == 400
        wall_sleep(1.5)  # workers add their samples to the history once a second
        truth = client.profile(start=attached)
        assert daskscope.flush(client)["write_failures"] == 0
    profiles = rows(db_url, s.profiles, cluster_id)
    assert sum(p["samples"] for p in profiles) >= truth["count"] > 0
    assert max(tree_depth(p["tree"]) for p in profiles) == tree_depth(truth) > 50


def test_a_profile_deeper_than_the_wire_takes_is_pruned_not_refused() -> None:
    from daskscope.collector.snapshot import prune_profile
    from daskscope.wire import MAX_PROFILE_DEPTH

    def node(name: str, count: int) -> dict[str, Any]:
        return {"identifier": name, "count": count, "description": {}, "children": {}}

    root = node("root", 600)
    tip = root
    for level in range(600):  # one chain 600 frames deep, each frame sampled once more
        child = node(f"f{level}", 600 - level - 1)
        tip["children"][child["identifier"]] = child
        tip = child
    cut = prune_profile(root, MAX_PROFILE_DEPTH)
    assert tree_depth(root) == MAX_PROFILE_DEPTH
    assert cut == 600 - MAX_PROFILE_DEPTH
    assert root["count"] == 600  # samples stay counted in the kept frames
