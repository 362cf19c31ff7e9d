"""Every attempt of a task Dask retries is recorded (issue 25, point 1).

``client.submit(f, retries=n)``: Dask runs ``f`` again after each failed attempt and
drops the failed attempt's times and traceback before any scheduler plugin sees them.
The ground truth here is the function's own log of its attempts (which worker and thread
ran each, what it raised), the workers' own record of each failed execution (their state
machine's ExecuteFailureEvent: start, stop, exception, traceback), Dask's task stream
(the last attempts) and Dask's own task-prefix durations (the attempts that ended well).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

import sqlalchemy as sa
from distributed import Client, LocalCluster, get_task_stream, get_worker, wait
from distributed.worker_state_machine import ExecuteFailureEvent

import daskscope
from daskscope.analysis.cluster import cluster_statistics
from daskscope.store import Store
from daskscope.store import schema as s
from daskscope.tasklog.lookups import task_executions, timeline_extent
from daskscope.tasklog.window import timeline_window
from lane_bins import lane_bins

#: the store keeps whole microseconds
CLOCK = 1.5e-6

#: the function's own log of its attempts, in this process (an in-process cluster)
ATTEMPTS: list[dict[str, Any]] = []
_LOCK = threading.Lock()


def flaky(name: str, failures: int, pause: float) -> str:
    """Fails its first ``failures`` attempts; logs each attempt as it runs."""
    with _LOCK:
        attempt = 1 + sum(1 for a in ATTEMPTS if a["name"] == name)
        entry = {"name": name, "attempt": attempt, "failed": attempt <= failures}
        ATTEMPTS.append(entry)
    started = time.perf_counter()
    time.sleep(pause)  # the workload: an attempt that takes time
    entry.update(
        worker=get_worker().address,
        thread=threading.get_ident(),
        seconds=time.perf_counter() - started,
    )
    if attempt <= failures:
        raise ValueError(f"attempt {attempt} of {name} fails")
    return name


def failed_executions(dask_worker: Any) -> list[dict[str, Any]]:
    """The worker's own record of the executions that failed on it."""
    return [
        {
            "key": ev.key,
            "start": ev.start,
            "stop": ev.stop,
            "exception": ev.exception_text,
            "traceback": ev.traceback_text,
        }
        for ev in dask_worker.state.stimulus_log
        if isinstance(ev, ExecuteFailureEvent)
    ]


def dask_compute_seconds(dask_scheduler: Any) -> float:
    """Dask's own compute seconds: its task prefixes' durations (attempts that ended
    well only)."""
    return sum(p.all_durations.get("compute", 0.0) for p in dask_scheduler.task_prefixes.values())


def rows(store: Store, table: sa.Table, cluster_id: str) -> list[dict[str, Any]]:
    column = table.c.id if table is s.clusters else table.c.cluster_id
    with store.engine.connect() as conn:
        return [
            dict(r._mapping) for r in conn.execute(sa.select(table).where(column == cluster_id))
        ]


def test_every_attempt_of_a_retried_task_is_kept(store: Store, database_url: str) -> None:
    ATTEMPTS.clear()
    plans = {  # key -> (failures, retries)
        "flaky-1": (2, 3),  # fails twice, then ends well
        "flaky-2": (5, 2),  # fails three times: erred after two retries
        "flaky-3": (1, 1),  # fails once, then ends well
        "flaky-4": (0, 3),  # never fails
    }
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=database_url)
        with get_task_stream(client) as stream:
            futures = [
                client.submit(flaky, key, failures, 0.15, key=key, retries=retries, pure=False)
                for key, (failures, retries) in plans.items()
            ]
            wait(futures)
        assert [f.status for f in futures] == ["finished", "error", "finished", "finished"]
        status = daskscope.flush(client)
        assert status["hook_failures"] == {}
        failures_on = client.run(failed_executions)
        dask_compute = client.run_on_scheduler(dask_compute_seconds)

    # the function's log: which attempts ran, where and in which thread
    logged = defaultdict(list)
    for entry in ATTEMPTS:
        logged[entry["name"]].append(entry)
    assert {k: len(v) for k, v in logged.items()} == {
        "flaky-1": 3,
        "flaky-2": 3,
        "flaky-3": 2,
        "flaky-4": 1,
    }
    # the workers' record of every failed execution, by key in the order they ran
    failed = defaultdict(list)
    for worker, executions in failures_on.items():
        for e in executions:
            failed[e["key"]].append({**e, "worker": worker})
    for executions in failed.values():
        executions.sort(key=lambda e: e["start"])
    assert {k: len(v) for k, v in failed.items()} == {"flaky-1": 2, "flaky-2": 3, "flaky-3": 1}
    last = {e["key"]: e for e in stream.data}  # Dask's task stream: the last attempts
    assert len(last) == len(stream.data) == 4

    # the task log: every attempt, the retried ones with the worker's own times
    retried_seconds = 0.0
    for key, attempts in logged.items():
        stored = sorted(task_executions(store, cluster_id, key), key=lambda t: t.start)
        final = "erred" if key == "flaky-2" else "memory"
        assert [t.state for t in stored] == ["retried"] * (len(attempts) - 1) + [final], key
        for t, attempt in zip(stored, attempts, strict=True):
            assert (t.worker, t.thread) == (attempt["worker"], attempt["thread"]), key
            assert [a.action for a in t.actions] == ["compute"], key
            # the worker's window holds the function's call
            assert t.stop - t.start >= attempt["seconds"] - CLOCK, key
        for t, e in zip(stored[:-1], failed[key], strict=False):
            assert abs(t.start - e["start"]) < CLOCK and abs(t.stop - e["stop"]) < CLOCK
            assert t.nbytes is None and t.worker == e["worker"]
            retried_seconds += e["stop"] - e["start"]
        end = last[key]
        assert abs(stored[-1].start - end["startstops"][0]["start"]) < CLOCK, key
    retried = sum(len(v) - 1 for v in logged.values())
    assert retried == 5
    extent = timeline_extent(store, cluster_id)
    assert extent.executions == len(stream.data) + retried and extent.tasks == 4
    window = timeline_window(store, cluster_id)
    assert sum(t.state == "retried" for t in window.tasks) == retried
    # zoomed out, the timeline's busy time holds the retried attempts too
    binned = timeline_window(store, cluster_id, max_tasks=0, bins=10)
    busy = sum(b.busy_s.get("compute", 0.0) for lane in binned.lanes for b in lane_bins(lane))
    truth = sum(e["stop"] - e["start"] for v in failed.values() for e in v)
    truth += sum(
        a["stop"] - a["start"] for e in stream.data if e["status"] == "OK" for a in e["startstops"]
    )
    assert abs(busy - truth) < CLOCK * 20

    # every failed attempt is an error with its traceback; Dask counts one task erred
    errors = rows(store, s.errors, cluster_id)
    assert sorted((e["key"], e["exception"], e["worker"]) for e in errors) == sorted(
        (key, e["exception"], e["worker"]) for key, v in failed.items() for e in v
    )
    for e in errors:
        assert "raise ValueError" in e["traceback"] and "flaky" in e["traceback"]
    messages = sorted(
        f"attempt {a['attempt']} of {a['name']} fails" for a in ATTEMPTS if a["failed"]
    )
    assert sorted(m for e in errors for m in messages if m in e["exception"]) == messages
    (cluster,) = rows(store, s.clusters, cluster_id)
    assert cluster["tasks_erred"] == sum(e["status"] == "error" for e in stream.data) == 1
    assert cluster["tasks_executed"] == sum(e["status"] == "OK" for e in stream.data) == 3

    # compute time: Dask's own, and the attempts Dask dropped
    assert retried_seconds > retried * 0.15
    assert abs(cluster["compute_seconds"] - (dask_compute + retried_seconds)) < CLOCK * 10
    (prefix,) = [p for p in rows(store, s.task_prefixes, cluster_id) if p["name"] == "flaky"]
    assert abs(prefix["durations"]["compute"] - cluster["compute_seconds"]) < CLOCK
    groups = rows(store, s.task_groups, cluster_id)
    assert (
        abs(
            sum(g["durations"].get("compute", 0.0) for g in groups) - prefix["durations"]["compute"]
        )
        < CLOCK
    )
    stats = cluster_statistics(cluster)
    assert stats["utilisation"] == cluster["compute_seconds"] / cluster["core_seconds"]


def slow(x: int) -> int:
    time.sleep(0.5)
    return x


def test_a_task_released_while_running_is_no_attempt(tmp_path: Any) -> None:
    """A running task cancelled (``processing → released`` without a failure) is not a
    retried attempt; a failure that is not retried is one error, as Dask counts it."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    from daskscope.store import open_store

    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url)
        future = client.submit(slow, 1, key="slow-1", retries=2)
        deadline = time.monotonic() + 120  # a minute or more at load 50
        tasks = cluster.scheduler.tasks
        while not (tasks.get("slow-1") and tasks["slow-1"].processing_on):  # it runs
            assert time.monotonic() < deadline, "the task never started"
            time.sleep(0.01)
        client.cancel(future)
        bad = client.submit(flaky, "flaky-9", 1, 0.0, key="flaky-9")  # no retries
        wait(bad)
        status = daskscope.flush(client)
        assert status["hook_failures"] == {}
    store = open_store(url)
    assert [t.state for t in task_executions(store, cluster_id, "flaky-9")] == ["erred"]
    assert all(t.state != "retried" for t in timeline_window(store, cluster_id).tasks)
    errors = rows(store, s.errors, cluster_id)
    assert [e["key"] for e in errors] == ["flaky-9"]
