"""A flush's work follows what changed, not what is alive (issue 16).

Ground truth: the task groups Dask holds (``Scheduler.task_groups``), the keys submitted
here, and Dask's own ``Span`` figures, which Dask computes by walking every group the
span ever had while the recorder keeps them by deltas.
"""

from __future__ import annotations

import operator
import time
from pathlib import Path
from typing import Any

import pytest
from dask.base import tokenize
from distributed import Client, LocalCluster, wait

import daskscope
from daskscope.collector.store_sink import StoreSink
from daskscope.store import cluster_detail, open_store
from factories import make_cluster, make_group

#: only the flushes the test asks for
QUIET = dict(flush_interval=3600, worker_sampling_interval=3600, profile_enabled=False)


def groups_of(n: int, label: str, tasks: int = 2) -> dict[Any, Any]:
    """``n`` task groups of ``tasks`` tasks each (a tuple key's group is its first
    element, so each token is a group)."""
    return {
        (f"{label}-{tokenize(label, i)}", j): (operator.add, i, j)
        for i in range(n)
        for j in range(tasks)
    }


def dask_span_figures(dask_scheduler: Any) -> dict[str, Any]:
    """Dask's own figures of each span, computed by Dask over all its groups."""
    out = {}
    for span_id, span in dask_scheduler.extensions["spans"].spans.items():
        out[span_id] = {
            "states": {k: v for k, v in span.states.items() if v},
            "nbytes_total": span.nbytes_total,
            "duration_s": span.duration,
            "durations": dict(span.all_durations),
            "done": span.done,
            "started_at": span.start or None,
            "stopped_at": span.stop if span.done else None,
            "active_cpu_seconds": span.active_cpu_seconds if span.done else None,
            "group_count": len(span.groups),
        }
    return out


def until_forgotten(cluster: LocalCluster, names: set[str]) -> None:
    deadline = time.monotonic() + 30
    while names & set(cluster.scheduler.task_groups):
        assert time.monotonic() < deadline, "Dask kept the groups after their results"
        time.sleep(0.05)


def test_a_flush_after_touching_k_of_n_live_groups_takes_k(database_url: str) -> None:
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=database_url, **QUIET)
        alive = groups_of(2000, "alive", tasks=1)
        futures = client.get(alive, list(alive), sync=False)  # held: 2,000 groups stay
        wait(futures)
        first = daskscope.flush(client, wait_for_metrics=False)
        assert first["write_failures"] == 0 and first["hook_failures"] == {}
        # reading and writing 2,000 new groups took the loop in more than one block
        assert first["flush_blocks"] > first["flushes"]
        live = {key[0] for key in alive}
        assert live <= set(cluster.scheduler.task_groups)  # Dask holds all of them

        extra = groups_of(3, "extra", tasks=2)
        assert client.get(extra, list(extra)) == [i + j for i in range(3) for j in range(2)]
        until_forgotten(cluster, {key[0] for key in extra})
        second = daskscope.flush(client, wait_for_metrics=False)
        truth = client.run_on_scheduler(dask_span_figures)
        # what the store holds now, at the moment of the truth (at close it is written
        # again, as the 2,000 are released)
        detail = cluster_detail(open_store(database_url), cluster_id)
        assert live <= set(cluster.scheduler.task_groups)
        del futures

    # the second flush took the 3 groups that ran, none of the 2,000 that stayed alive
    assert second["last_groups_snapshotted"] == 3
    assert second["groups_snapshotted"] - first["groups_snapshotted"] == 3
    # the spans' figures read those 3 groups twice (new, in a span seen for the first
    # time: once; changed: once more), none of the 2,000
    assert second["span_groups_read"] - first["span_groups_read"] == 3 * 2
    # and the store got one row for each of them
    rows = second["rows_written_by_table"]["task_groups"]
    assert rows - first["rows_written_by_table"]["task_groups"] == 3

    groups = {g["name"]: g for g in detail["task_groups"]}
    assert set(groups) == live | {key[0] for key in extra}
    assert all(groups[name]["tasks_executed"] == 1 for name in live)
    assert all(groups[key[0]]["tasks_executed"] == 2 for key in extra)
    # the span records kept by deltas say what Dask computes over every group
    stored = {s["span_id"]: s for s in detail["spans"]}
    assert set(stored) == set(truth)
    assert sum(s["group_count"] for s in stored.values()) == 2003
    for span_id, dask in truth.items():
        mine = stored[span_id]
        assert mine["states"] == dask["states"]
        assert mine["nbytes_total"] == dask["nbytes_total"]
        assert mine["done"] is dask["done"] is True
        assert mine["group_count"] == dask["group_count"]
        assert mine["duration_s"] == pytest.approx(dask["duration_s"], abs=1e-9)
        assert mine["durations"] == pytest.approx(dask["durations"], abs=1e-9)
        assert mine["started_at"] == pytest.approx(dask["started_at"], abs=1e-6)
        assert mine["stopped_at"] == pytest.approx(dask["stopped_at"], abs=1e-6)
        assert mine["active_cpu_seconds"] == pytest.approx(dask["active_cpu_seconds"], rel=1e-9)


def test_the_store_writes_a_group_once_per_batch_however_often_it_changed(
    tmp_path: Path,
) -> None:
    """A batch holding a group's record four times (running, finished, released,
    forgotten) writes its row once, with the last values; through the store's child
    process, whose own count says so."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    cluster = make_cluster()
    versions = [
        make_group(cluster, "add-1", states=states, tasks_executed=done)
        for states, done in (
            ({"processing": 2}, 0),
            ({"memory": 2}, 2),
            ({"released": 2}, 2),
            ({"forgotten": 2}, 2),
        )
    ]
    sink = StoreSink(url)
    try:
        sink.write([cluster])
        sink.write([*versions, make_group(cluster, "add-2")])
        stats = sink.stats()
    finally:
        sink.close()
    assert stats.rows_by_table == {"clusters": 1, "task_groups": 2}
    detail = cluster_detail(open_store(url), cluster.id)
    stored = {g["name"]: g for g in detail["task_groups"]}
    assert stored["add-1"]["states"] == {"forgotten": 2}


def _mark_every_live_group_changed(dask_scheduler: Any) -> int:
    """What a hook does when it cannot tell whether a group changed: mark it."""
    tracker = dask_scheduler.plugins["daskscope"].tracker
    tracker.dirty.update(tracker.current.values())
    return len(tracker.current)


def test_a_group_row_is_written_once_per_change(database_url: str) -> None:
    """Group rows go to the store when the group changed since its last write, once per
    change: a flush of groups marked changed but equal to what was written writes no
    row; their tasks forgotten, their states alone moved on: no row, whatever the flush
    (a finished group is written once; it keeps the states of its last record). Counted
    by the store's own stats; ground truth the groups Dask holds and the keys sent here."""
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=database_url, **QUIET)
        held = groups_of(40, "held", tasks=2)
        futures = client.get(held, list(held), sync=False)
        wait(futures)
        names = {key[0] for key in held}
        assert names <= set(cluster.scheduler.task_groups)
        ran = daskscope.flush(client, wait_for_metrics=False)
        again = daskscope.flush(client, wait_for_metrics=False)  # nothing happened
        marked = client.run_on_scheduler(_mark_every_live_group_changed)
        same = daskscope.flush(client, wait_for_metrics=False)
        del futures
        until_forgotten(cluster, names)
        forgotten = daskscope.flush(client, wait_for_metrics=False)
        truth = client.run_on_scheduler(dask_span_figures)
        detail = cluster_detail(open_store(database_url), cluster_id)

    def rows(info: dict[str, Any]) -> int:
        return int(info["rows_written_by_table"].get("task_groups", 0))

    for info in (ran, again, same, forgotten):
        assert info["write_failures"] == 0 and info["hook_failures"] == {}
    assert rows(ran) == len(names) == 40  # each group once, as it ran
    assert rows(again) == rows(ran)  # no change: no row
    assert again["groups_snapshotted"] == ran["groups_snapshotted"]
    # marked changed without a change: snapshotted, compared, not written
    assert marked == len(names)
    assert same["groups_snapshotted"] - again["groups_snapshotted"] == len(names)
    assert same["groups_unchanged"] - again["groups_unchanged"] == len(names)
    assert rows(same) == rows(again)
    # their tasks forgotten: states alone, no row; the groups let go
    assert rows(forgotten) == rows(same)
    assert forgotten["groups_states_only"] - same["groups_states_only"] == len(names)
    stored = {g["name"]: g for g in detail["task_groups"]}
    assert set(stored) == names
    for name in names:
        assert stored[name]["tasks_executed"] == 2
        assert stored[name]["states"] == {"memory": 2}  # as when it finished
    # while their spans, written by that explicit flush, count them forgotten, as Dask does
    spans = {s["span_id"]: s for s in detail["spans"]}
    assert set(spans) == set(truth)
    for span_id, dask in truth.items():
        assert spans[span_id]["states"] == dask["states"] == {"forgotten": 2 * len(names)}
