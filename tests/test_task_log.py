"""The task log against Dask's own task stream: every execution of a real cluster run is
in the store, with its worker, thread, action times, bytes and state; a lost worker's
recomputed tasks are there twice; the setting turns it off; memory stays bounded when
the writer cannot keep up."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import tracemalloc
from collections import Counter, defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dask.array as da
import pytest
import sqlalchemy as sa
from distributed import Client, LocalCluster, get_task_stream

import daskscope
from daskscope.collector.destination import sink_for
from daskscope.collector.writer import WriterThread
from daskscope.store import open_store
from daskscope.store import schema as s
from daskscope.tasklog.lookups import task_executions, timeline_extent
from daskscope.tasklog.record import TaskLog
from daskscope.tasklog.window import timeline_window

#: the store keeps whole microseconds
CLOCK = 1.5e-6


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


def fail_on(x: int) -> int:
    if x == 3:
        raise ValueError("three is bad")
    return x


def segments(url: str, cluster_id: str) -> list[dict[str, Any]]:
    with open_store(url).engine.connect() as conn:
        query = sa.select(s.task_segments).where(s.task_segments.c.cluster_id == cluster_id)
        return [dict(r._mapping) for r in conn.execute(query)]


def test_every_task_of_a_run_is_stored_as_the_task_stream_saw_it(db_url: str) -> None:
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=db_url)
        with get_task_stream(client) as stream:
            x = da.random.random((1200, 1200), chunks=(100, 100))
            # a transpose sum moves blocks between the workers
            (x + x.T).sum().compute()
            (x @ x.T)[:200].sum().compute()
            futures = client.map(fail_on, range(6))
            client.gather(futures, errors="skip")
        status = daskscope.flush(client)
        assert status["hook_failures"] == {} and status["task_log_dropped"] == 0

    # A worker asked for a key whose result it still holds answers with the execution it
    # already ran, and the stream shows that execution twice: one execution is a key,
    # worker and first start
    executions = {}
    for e in stream.data:
        first = min(a["start"] for a in e["startstops"])
        executions.setdefault((str(e["key"]), e["worker"], first), e)
    truth = list(executions.values())
    assert len(truth) > 800
    repeated = len(stream.data) - len(truth)
    assert status["task_log_repeated"] == repeated
    store = open_store(db_url)
    window = timeline_window(store, cluster_id, max_tasks=1_000_000)
    assert window.raw and window.total_tasks == len(truth)
    stored = defaultdict(list)
    for t in window.tasks:
        stored[t.key].append(t)
    assert Counter(t.worker for t in window.tasks) == Counter(e["worker"] for e in truth)
    transfers_seen = 0
    for e in truth:
        key = str(e["key"])
        actions = sorted(e["startstops"], key=lambda a: (a["start"], a["stop"]))
        first = min(a["start"] for a in actions)
        matches = [t for t in stored[key] if abs(t.start - first) < CLOCK]
        assert len(matches) == 1, key
        t = matches[0]
        assert t.thread == e["thread"] and t.worker == e["worker"]
        assert t.state == ("erred" if e["status"] == "error" else "memory")
        assert t.nbytes == (None if e["status"] == "error" else e["nbytes"])
        assert [a.action for a in t.actions] == [a["action"] for a in actions]
        for mine, theirs in zip(t.actions, actions, strict=True):
            assert abs(mine.start - theirs["start"]) < CLOCK
            assert abs(mine.stop - theirs["stop"]) < CLOCK
            assert mine.source == theirs.get("source")
            transfers_seen += mine.action == "transfer"
    assert transfers_seen > 0  # the run did move data between the workers
    erred = [t for t in window.tasks if t.state == "erred"]
    assert [t.key for t in erred] == [str(f.key) for f in futures[3:4]]
    # computations are named as the recorder's computation records are
    with store.engine.connect() as conn:
        query = sa.select(s.computations.c.id).where(s.computations.c.cluster_id == cluster_id)
        computation_ids = set(conn.execute(query).scalars())
    assert {t.computation_id for t in window.tasks} <= computation_ids
    assert len({t.computation_id for t in window.tasks}) >= 3
    extent = timeline_extent(store, cluster_id)
    assert extent.executions == len(truth) and extent.workers == 2
    assert extent.threads == len({(e["worker"], e["thread"]) for e in truth})


def slow_inc(x: int) -> int:
    import time

    time.sleep(0.02)
    return x + 1


def test_a_lost_workers_recomputed_tasks_are_stored_twice(db_url: str) -> None:
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=db_url)
        with get_task_stream(client) as stream:
            futures = client.map(slow_inc, range(200))
            victim_pid = None
            deadline = time.monotonic() + 120
            while victim_pid is None:
                who_has = client.who_has()
                held = {w for ws in who_has.values() for w in ws}
                if len(held) == 2 and len(who_has) > 40:
                    victim = sorted(held)[0]
                    victim_pid = client.run(os.getpid, workers=[victim])[victim]
                else:
                    # polled at the tasks' pace, not in a spin that takes a core from them
                    assert time.monotonic() < deadline, "no results on both workers"
                    time.sleep(0.05)
            os.kill(victim_pid, signal.SIGKILL)
            assert client.gather(futures) == list(range(1, 201))
        daskscope.flush(client)

    runs = Counter(str(e["key"]) for e in stream.data)
    twice = sorted(k for k, n in runs.items() if n > 1)
    assert twice  # the victim held results that had to be computed again
    store = open_store(db_url)
    for key in twice:
        executions = task_executions(store, cluster_id, key)
        assert len(executions) == runs[key]
        assert len({t.worker for t in executions}) == 2  # once on each worker
    extent = timeline_extent(store, cluster_id)
    assert extent.tasks == 200 and extent.executions == len(stream.data)


def test_the_setting_off_stores_no_segments(db_url: str) -> None:
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=db_url, task_log_enabled=False)
        assert client.gather(client.map(slow_inc, range(10))) == list(range(1, 11))
        status = daskscope.flush(client)
        assert "task_log_executions" not in status
    assert segments(db_url, cluster_id) == []
    store = open_store(db_url)
    extent = timeline_extent(store, cluster_id)
    assert extent.executions == 0 and extent.first is None
    window = timeline_window(store, cluster_id)
    assert window.total_tasks == 0 and window.tasks == () and window.lanes == ()


# -- bounded memory -------------------------------------------------------------------


def stand_in_task(i: int) -> Any:
    """What the task log reads of a TaskState: its group (name, span) and prefix."""
    group = SimpleNamespace(name="inc-0f3a", span_id="span-1")
    return SimpleNamespace(group=group, prefix=SimpleNamespace(name="inc"))


def feed(log: TaskLog, count: int, start: float = 1.8e9) -> None:
    ts = stand_in_task(0)
    for i in range(count):
        t = start + i * 1e-3
        kwargs = {
            "worker": f"tcp://10.0.0.{i % 4}:4000",
            "thread": 140000 + i % 2,
            "nbytes": 8000,
            "startstops": [{"action": "compute", "start": t, "stop": t + 0.01}],
        }
        log.task_done(("inc-0f3a", i), ts, kwargs, "computation-1", erred=False)


def test_memory_stays_bounded_when_the_writer_is_stalled(db_url: str) -> None:
    segment, pending = 2_000, 2
    writer = WriterThread("stalled-writer")
    sink = sink_for(database=db_url)
    writer.submit(sink.open).result()
    log = TaskLog("cluster-1", segment_executions=segment, max_pending_segments=pending)
    log.attach(writer, lambda: sink)
    release = threading.Event()
    writer.submit(release.wait)  # the writer is busy elsewhere until released
    peaks = []
    for rounds in (1, 4):
        tracemalloc.start()
        feed(log, rounds * 10 * segment, start=1.8e9 + rounds * 1e3)  # other executions
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    feed(log, 1234, start=1.9e9)
    fed = 50 * segment + 1234
    # two sealed buffers wait for the writer, one is open; every other one was dropped
    assert log.pending_segments == pending and len(log.rows) == 1234
    assert log.stats.executions_dropped == fed - pending * segment - 1234
    # four times the executions, not more memory: it is bounded by the buffers
    assert peaks[1] < 1.5 * peaks[0]
    release.set()
    writer.submit(lambda: None).result()  # the sealed ones are encoded now
    written = asyncio.run(log.flush())
    writer.submit(sink.close).result()
    writer.shutdown()
    assert written == pending + 1
    stored = segments(db_url, "cluster-1")
    assert sum(r["executions"] for r in stored) == pending * segment + 1234
    assert log.stats.executions_dropped + sum(r["executions"] for r in stored) == fed


def test_a_periodic_flush_leaves_a_small_buffer_until_it_is_due(db_url: str) -> None:
    """Small segments cost most of the task log's encoding: a periodic flush seals a
    buffer smaller than a segment only once it has held executions ``seal_after``
    seconds; an explicit flush seals it at once."""
    writer = WriterThread("seal-policy")
    sink = sink_for(database=db_url)
    writer.submit(sink.open).result()
    try:
        log = TaskLog("cluster-1", segment_executions=10_000, seal_after=0.2)
        log.attach(writer, lambda: sink)
        feed(log, 300)
        assert asyncio.run(log.flush(every_task=False)) == 0  # first seen now: not due
        assert len(log.rows) == 300 and segments(db_url, "cluster-1") == []
        feed(log, 200, start=1.9e9)
        threading.Event().wait(0.3)
        assert asyncio.run(log.flush(every_task=False)) == 1  # held 0.3 s: due
        assert log.rows == [] and log.stats.executions == 500
        feed(log, 7, start=2.0e9)
        assert asyncio.run(log.flush(every_task=False)) == 0
        assert asyncio.run(log.flush()) == 1  # an explicit flush seals what is there
        stored = segments(db_url, "cluster-1")
        assert sorted(r["executions"] for r in stored) == [7, 500]
    finally:
        writer.submit(sink.close).result()
        writer.shutdown()
