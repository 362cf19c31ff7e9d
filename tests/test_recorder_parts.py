"""The recorder's parts that need no cluster, on stand-ins for Dask's objects built here
(task groups, tasks, computations, spans, workers) and real SQLite stores: accounting,
group and span tracking, event records, flushing with its retries and a lost store, the
sink factory and its statistics, the workers' shared samples, and the Dask adapter."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa
from distributed.scheduler import TaskGroup, TaskPrefix, TaskState

from daskscope.collector import dask_adapter, flushing
from daskscope.collector.accounting import Accounting, cluster_record, threads_integral
from daskscope.collector.destination import sink_for
from daskscope.collector.events import EventLog
from daskscope.collector.flushing import Flusher
from daskscope.collector.http_sink import HttpSink
from daskscope.collector.lifecycle import WorkerLifecycle
from daskscope.collector.roster import WorkerRoster
from daskscope.collector.snapshot import plain
from daskscope.collector.spans import SpanTracker, group_share
from daskscope.collector.store_sink import StoreSink
from daskscope.collector.tracking import PROGRESS_SECONDS, ComputationTrack, Totals, WorkTracker
from daskscope.config import CollectorSettings
from daskscope.model import (
    ClusterRecord,
    ComputationRecord,
    EventRecord,
    Record,
    SpanMetricRecord,
    SpanRecord,
    TaskGroupRecord,
)
from daskscope.store import open_store, table_counts
from daskscope.store import schema as store_schema
from daskscope.store.engine import as_engine

# -- stand-ins for Dask's objects ---------------------------------------------------------


class Group:
    """Dask's TaskGroup, as much as the tracker reads of it."""

    def __init__(self, name: str, size: int, span_id: str | None = None) -> None:
        self.name = name
        self.prefix = SimpleNamespace(name=name.rsplit("-", 1)[0])
        self.size = size
        self.span_id = span_id
        self.nbytes_total = 0
        self.all_durations: dict[str, float] = {}
        self.start = 0.0
        self.stop = 0.0
        self.states = {"waiting": size, "memory": 0}
        self.dependencies: set[Group] = set()
        self.types: set[str] = {"int"}
        self.done = False

    def __len__(self) -> int:
        return self.size

    @property
    def duration(self) -> float:
        return sum(self.all_durations.values())

    def run(self, task: Task, *, at: float, nbytes: int = 8, seconds: float = 0.5) -> None:
        """One of its tasks ran: Dask's own figures grow."""
        self.start = self.start or at
        self.stop = at + seconds
        self.nbytes_total += nbytes
        self.all_durations["compute"] = self.all_durations.get("compute", 0.0) + seconds
        self.states["waiting"] -= 1
        self.states["memory"] += 1
        self.done = self.states["waiting"] == 0


class Task:
    def __init__(self, key: str, group: Group) -> None:
        self.key = key
        self.group = group
        self.prefix = group.prefix


class Computation:
    def __init__(self, number: int, start: float) -> None:
        self.id = f"computation-{number}"
        self.start = start
        self.code: list[Any] = []
        self.annotations: dict[str, Any] = {}
        self.groups: set[Group] = set()


class Scheduler:
    """Dask's scheduler, as much as the tracking parts read of it."""

    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}
        self.task_groups: dict[str, Group] = {}
        self.computations: list[Computation] = []
        self.extensions: dict[str, Any] = {}
        self.workers: dict[str, Any] = {}
        self.id = "Scheduler-stand-in"
        self.address = "tcp://127.0.0.1:8786"
        self.time_started = 1000.0
        self.total_nthreads_history: list[tuple[float, int]] = [(1000.0, 2)]

    def graph(self, group: Group, start: float) -> list[str]:
        """A graph of one group's tasks, added to a new computation."""
        self.computations.append(Computation(len(self.computations), start))
        self.task_groups[group.name] = group
        keys = [f"{group.name}-{i}" for i in range(len(group))]
        for key in keys:
            self.tasks[key] = Task(key, group)
        return keys


def worker(nthreads: int, memory_limit: int) -> Any:
    return SimpleNamespace(nthreads=nthreads, memory_limit=memory_limit)


def startstops(at: float) -> dict[str, Any]:
    return {"startstops": [{"action": "compute", "start": at, "stop": at + 0.5}]}


class Span:
    """Dask's Span, as much as the span records read of it."""

    def __init__(self, span_id: str, name: tuple[str, ...], parent: Span | None = None) -> None:
        self.id = span_id
        self.name = name
        self.parent = parent
        self.children: list[Span] = []
        if parent is not None:
            parent.children.append(self)
        self.enqueued = 1000.0
        self.start = 1001.0
        self.stop = 1002.0
        self.done = False
        self.states = {"memory": 2}
        self.nbytes_total = 16
        self.duration = 1.0
        self.all_durations = {"compute": 1.0}
        self.active_cpu_seconds = 1.0
        self.code: list[Any] = []
        self.groups: set[Any] = set()
        self._cumulative_worker_metrics: dict[tuple[str, ...], float] = {}

    @property
    def cumulative_worker_metrics(self) -> dict[tuple[str, ...], float]:
        out = dict(self._cumulative_worker_metrics)
        for child in self.children:
            for key, value in child.cumulative_worker_metrics.items():
                out[key] = out.get(key, 0.0) + value
        return out


def with_spans(scheduler: Scheduler, *spans: Span) -> None:
    scheduler.extensions["spans"] = SimpleNamespace(spans={s.id: s for s in spans})


# -- accounting ---------------------------------------------------------------------------


def test_accounting_integrates_capacity_between_changes_and_keeps_peaks() -> None:
    assert threads_integral([(0.0, 2), (10.0, 4)], until=15.0) == 2 * 10 + 4 * 5
    cluster = ClusterRecord(
        id="c", name="n", account="a", user="u", scheduler_address="", dask_version="",
        distributed_version="", python_version="", started_at=0.0, last_seen_at=15.0,
    )  # fmt: skip
    accounts = Accounting(cluster, since=15.0, threads_before=[(0.0, 2), (10.0, 4)])
    assert cluster.core_seconds == 40.0  # Dask's history up to the attachment
    accounts.refresh([worker(2, 100), worker(2, 100)])
    accounts.workers_changed([worker(2, 100)], at=25.0)  # one left after 10 s
    accounts.advance(30.0)
    assert cluster.core_seconds == 40.0 + 4 * 10 + 2 * 5
    assert cluster.memory_limit_byte_seconds == 200 * 10 + 100 * 5
    assert (cluster.workers_peak, cluster.threads_peak, cluster.memory_limit_peak) == (2, 4, 200)
    assert cluster.last_seen_at == 30.0
    accounts.advance(20.0)  # a late clock reading never integrates backwards
    assert cluster.core_seconds == 40.0 + 4 * 10 + 2 * 5

    totals = Totals(executed=7, erred=1, nbytes=64, durations={"compute": 3.5, "transfer": 1.0})
    record = accounts.record(totals)
    assert (record.tasks_executed, record.tasks_erred) == (7, 1)
    assert (record.bytes_processed, record.compute_seconds) == (64, 3.5)
    accounts.advance(40.0)
    assert record.core_seconds < cluster.core_seconds  # a copy: the accounts go on


def test_cluster_record_names_the_cluster_from_settings_or_the_scheduler() -> None:
    scheduler = Scheduler()
    unnamed = CollectorSettings.from_config(database="sqlite://")
    record = cluster_record(scheduler, unnamed, "c1", now=2000.0)  # type: ignore[arg-type]
    assert (record.name, record.started_at, record.last_seen_at) == (
        "Scheduler-stand-in",
        1000.0,
        2000.0,
    )
    named = CollectorSettings.from_config(database="sqlite://", cluster_name="nightly")
    assert cluster_record(scheduler, named, "c1", now=2000.0).name == "nightly"  # type: ignore[arg-type]


# -- tracking -----------------------------------------------------------------------------


def snapshot(
    tracker: WorkTracker, scheduler: Scheduler, *, paced: bool = False, now: float = 0.0
) -> tuple[list[Record], list[Any]]:
    """One flush's group records (unpaced by default, as an explicit flush) at ``now``
    (the tracker's monotonic clock, for PROGRESS_SECONDS)."""
    records: list[Record] = []
    dirty = tracker.take_changed(paced=paced, now=now)
    _, finished, _ = tracker.snapshot_groups(dirty, scheduler, records, paced=paced, now=now)  # type: ignore[arg-type]
    return records, finished


def test_tracker_counts_each_computations_tasks_and_hands_a_group_over() -> None:
    scheduler = Scheduler()
    tracker = WorkTracker("c", max_code_chars=1000)
    group = Group("inc-abc", 4)
    keys = scheduler.graph(group, start=1000.0)
    tracker.graph_updated(scheduler, keys)  # type: ignore[arg-type]
    first = tracker.newest
    assert first is not None
    for key in keys[:2]:
        group.run(scheduler.tasks[key], at=1001.0)
        tracker.task_finished(scheduler.tasks[key], startstops(1001.0))  # type: ignore[arg-type]
    records, finished = snapshot(tracker, scheduler)
    (record,) = records
    assert isinstance(record, TaskGroupRecord)
    assert (record.tasks_executed, record.nbytes_total, record.durations) == (
        2,
        16,
        {"compute": 1.0},
    )
    assert record.computation_id == first.record_id and finished == []
    assert tracker.totals.executed == 2 and tracker.prefix_totals["inc"].executed == 2

    # The same group asked for again: its next tasks count for the newer computation
    scheduler.computations.append(Computation(1, start=1005.0))
    tracker.graph_updated(scheduler, keys)  # type: ignore[arg-type]
    second = tracker.newest
    assert second is not None and second is not first
    for key in keys[2:]:
        group.run(scheduler.tasks[key], at=1006.0)
        tracker.task_finished(scheduler.tasks[key], startstops(1006.0))  # type: ignore[arg-type]
    records, finished = snapshot(tracker, scheduler)
    by_computation = {r.computation_id: r for r in records if isinstance(r, TaskGroupRecord)}
    # the first computation's record, frozen at the hand-over, is what was written before
    # (nothing of it changed since): not written again
    assert first.record_id not in by_computation and tracker.unchanged == 1
    frozen = finished[0].final
    assert frozen is not None and frozen.tasks_executed == 2 and finished[0].written is not None
    assert by_computation[second.record_id].tasks_executed == 2
    assert by_computation[second.record_id].nbytes_total == 16  # its growth only
    assert len(finished) == 1 and finished[0].computation is first  # frozen: goes once written
    assert tracker.totals.executed == 4

    done_first, done = tracker.computation_record(first)
    assert isinstance(done_first, ComputationRecord) and done
    assert done_first.tasks_executed == 2 and done_first.stopped_at is not None

    # written: the frozen use goes; the group, forgotten by Dask, goes at the next snapshot
    tracker.drop(finished)
    tracker.computations_written([first])
    assert first.computation not in tracker.computations
    del scheduler.task_groups[group.name]
    tracker.task_forgotten(scheduler.tasks[keys[0]])  # type: ignore[arg-type]
    _, finished = snapshot(tracker, scheduler)
    tracker.drop(finished)
    assert tracker.current == {}


def test_a_groups_record_stops_with_its_own_tasks_not_dasks_group_stop() -> None:
    """Dask's TaskGroup.stop takes in every task of the group, whichever computation
    ran it (CI once stored a loop computation's stop 0.4 s late, past the next call):
    a use's stop is its own tasks' latest compute stop."""
    scheduler = Scheduler()
    tracker = WorkTracker("c", max_code_chars=1000)
    group = Group("inc-1", 3)
    keys = scheduler.graph(group, start=1000.0)
    tracker.graph_updated(scheduler, keys)  # type: ignore[arg-type]
    for at in (1001.0, 1002.0):
        task = scheduler.tasks[keys[int(at) - 1001]]
        group.run(task, at=at)
        tracker.task_finished(task, startstops(at))  # type: ignore[arg-type]
    group.stop = 1010.0  # a task counted elsewhere moved Dask's figure
    records, _ = snapshot(tracker, scheduler)
    (record,) = records
    assert isinstance(record, TaskGroupRecord) and record.stopped_at == 1002.5


def test_timed_flushes_write_a_group_when_its_figures_change() -> None:
    """Timed flushes: a running group is first written PROGRESS_SECONDS after a flush
    first saw it running, or at the flush after it is done; a done group whose tasks only move on
    (memory, released, forgotten) is not written again until an explicit flush, and one
    forgotten before keeps its last record. The totals never wait."""
    scheduler = Scheduler()
    tracker = WorkTracker("c", max_code_chars=1000)
    kept, gone, slow = Group("kept-1", 2), Group("gone-1", 1), Group("slow-1", 2)
    keys = scheduler.graph(kept, start=1000.0)
    for group in (gone, slow):
        scheduler.task_groups[group.name] = group
        for i in range(len(group)):
            key = f"{group.name}-{i}"
            scheduler.tasks[key] = Task(key, group)
            keys.append(key)
    tracker.graph_updated(scheduler, keys)  # type: ignore[arg-type]

    def flush(*, paced: bool = True, now: float = 0.0) -> dict[str, dict[str, int]]:
        records, finished = snapshot(tracker, scheduler, paced=paced, now=now)
        tracker.drop(finished)
        return {r.name: r.states for r in records if isinstance(r, TaskGroupRecord)}

    def run(key: str, at: float) -> None:
        task = scheduler.tasks[key]
        task.group.run(task, at=at)
        tracker.task_finished(task, startstops(at))  # type: ignore[arg-type]

    def release(group: Group) -> None:
        group.states["memory"] -= 1
        group.states["released"] = group.states.get("released", 0) + 1

    for key in ("kept-1-0", "gone-1-0", "slow-1-0"):
        run(key, 1001.0)
    # gone-1 is done: written; the two running ones are put off
    assert flush() == {"gone-1": {"memory": 1}}
    assert tracker.totals.executed == 1  # what is put off is not counted yet
    run("kept-1-1", 1002.0)
    # kept-1 is done by the next flush: written; slow-1 still runs, put off again
    assert flush(now=1.0) == {"kept-1": {"memory": 2}}
    assert tracker.totals.executed == 3
    # PROGRESS_SECONDS after a flush first saw it running: written, unchanged since
    assert flush(now=PROGRESS_SECONDS) == {"slow-1": {"waiting": 1, "memory": 1}}
    assert tracker.totals.executed == 4
    run("slow-1-1", 1003.0)
    assert flush(now=PROGRESS_SECONDS + 1) == {"slow-1": {"memory": 2}}  # done
    # the tasks move on: released, then gone-1 is forgotten and dropped by Dask
    release(kept)
    release(gone)
    tracker.task_forgotten(scheduler.tasks["kept-1-0"])  # type: ignore[arg-type]
    tracker.task_forgotten(scheduler.tasks["gone-1-0"])  # type: ignore[arg-type]
    del scheduler.task_groups["gone-1"]
    assert flush() == {} and tracker.states_only == 2
    assert {g.name for g in tracker.current} == {"kept-1", "slow-1"}  # gone-1 let go
    # an explicit flush writes what timed flushes left out, of the groups still alive
    assert flush(paced=False) == {"kept-1": {"memory": 1, "released": 1}}
    assert flush(paced=False) == {} and not tracker.states_pending
    record, done = tracker.computation_record(tracker.newest)  # type: ignore[arg-type]
    assert done and record.tasks_executed == 5 and record.stopped_at == 1003.5


def one_group_computation(
    name: str, tasks: int, progress_seconds: float = PROGRESS_SECONDS
) -> tuple[Scheduler, WorkTracker, list[str], ComputationTrack, Callable[[str, float], None]]:
    """A tracker that saw one graph of one group; ``run(key, at)`` finishes one of its
    tasks at ``at``."""
    scheduler = Scheduler()
    tracker = WorkTracker("c", max_code_chars=1000, progress_seconds=progress_seconds)
    group = Group(name, tasks)
    keys = scheduler.graph(group, start=1000.0)
    tracker.graph_updated(scheduler, keys)  # type: ignore[arg-type]
    track = tracker.newest
    assert track is not None

    def run(key: str, at: float) -> None:
        group.run(scheduler.tasks[key], at=at)
        tracker.task_finished(scheduler.tasks[key], startstops(at))  # type: ignore[arg-type]

    return scheduler, tracker, keys, track, run


def test_a_computation_is_not_done_while_a_group_of_it_is_put_off() -> None:
    """A flush puts a running group off; its last task ends before the flush makes the
    computation's record (the flush gives the loop back between slices): the record
    must not say done, with a stop that misses the group."""
    scheduler, tracker, keys, track, run = one_group_computation("inc-1", 2)
    run(keys[0], 1001.0)
    records, _ = snapshot(tracker, scheduler, paced=True)
    assert records == [] and track.awaiting == 1  # put off
    run(keys[1], 1002.0)  # Dask says done now
    record, done = tracker.computation_record(track)
    assert not done and record.stopped_at is None
    records, _ = snapshot(tracker, scheduler, paced=True)  # the next flush takes it
    assert [r.tasks_executed for r in records if isinstance(r, TaskGroupRecord)] == [2]
    record, done = tracker.computation_record(track)
    assert done and record.stopped_at == 1002.5 and track.awaiting == 0


@pytest.mark.parametrize("p", [PROGRESS_SECONDS, 3.0], ids=["default", "configured"])
def test_a_running_groups_progress_is_written_at_most_every_progress_seconds(p: float) -> None:
    """A timed flush writes a running group ``progress_seconds`` after it first saw it
    running, then again ``progress_seconds`` after that, and the finished group at the
    next flush; while it waits its computation is not done. An explicit flush writes it
    at once."""
    scheduler, tracker, keys, track, run = one_group_computation("inc-2", 4, p)

    def timed_flush(now: float) -> list[int]:
        records, _ = snapshot(tracker, scheduler, paced=True, now=now)
        return [r.tasks_executed for r in records if isinstance(r, TaskGroupRecord)]

    run(keys[0], 1001.0)
    assert timed_flush(0.0) == []  # seen running: its clock starts
    assert timed_flush(1.0) == []
    assert track.awaiting == 1
    assert not tracker.computation_record(track)[1]
    assert timed_flush(p) == [1]  # its first record
    assert track.awaiting == 0
    run(keys[1], 1002.0)
    assert timed_flush(p + 1.0) == []  # progress written 1 s ago
    assert tracker.take_changed(paced=True, now=p + 2.0) == []  # nothing changed or due
    assert timed_flush(2 * p - 0.1) == []
    assert track.awaiting == 1
    assert timed_flush(2 * p) == [2]
    run(keys[2], 1003.0)
    assert timed_flush(2 * p + 0.1) == []
    records, _ = snapshot(tracker, scheduler)  # explicit: at once, changed since or not
    assert [r.tasks_executed for r in records if isinstance(r, TaskGroupRecord)] == [3]
    run(keys[3], 1004.0)  # done: at the next timed flush, however recent the last write
    assert timed_flush(2 * p + 0.5) == [4]
    record, done = tracker.computation_record(track)
    assert done and record.stopped_at == 1004.5 and record.tasks_executed == 4


def test_a_progress_interval_of_zero_writes_a_running_group_at_every_flush() -> None:
    scheduler, tracker, keys, track, run = one_group_computation("inc-4", 3, 0.0)
    counts = []
    for i, key in enumerate(keys):
        run(key, 1001.0 + i)
        records, _ = snapshot(tracker, scheduler, paced=True, now=0.001 * i)
        counts += [r.tasks_executed for r in records if isinstance(r, TaskGroupRecord)]
        assert track.awaiting == 0
    assert counts == [1, 2, 3]


def test_a_running_group_whose_write_failed_is_written_at_the_next_flush() -> None:
    """A failed write (or a lost store) leaves the store without a running group's
    record: the next timed flush writes it, whatever its pace says."""
    scheduler, tracker, keys, _, run = one_group_computation("inc-3", 3)
    run(keys[0], 1001.0)

    def timed_flush(now: float) -> list[int]:
        records, _ = snapshot(tracker, scheduler, paced=True, now=now)
        return [r.tasks_executed for r in records if isinstance(r, TaskGroupRecord)]

    assert timed_flush(0.0) == []
    assert timed_flush(PROGRESS_SECONDS) == [1]
    tracker.not_written(list(tracker.current.values()))
    assert timed_flush(PROGRESS_SECONDS + 1.0) == [1]
    run(keys[1], 1002.0)
    assert timed_flush(PROGRESS_SECONDS + 2.0) == []  # and then at its pace again


def test_a_group_outside_any_graph_is_adopted_and_errors_counted() -> None:
    scheduler = Scheduler()
    tracker = WorkTracker("c", max_code_chars=1000)
    group = Group("fail-1", 2)
    scheduler.task_groups[group.name] = group
    task = Task("fail-1-0", group)
    use = tracker.task_erred(
        task, {"startstops": [{"action": "compute", "start": 5.0, "stop": 6.0}]}
    )  # type: ignore[arg-type]
    assert use.computation is None and use.erred == 1 and use.error_stop == 6.0
    records, _ = snapshot(tracker, scheduler)
    (record,) = records
    assert isinstance(record, TaskGroupRecord) and record.tasks_erred == 1
    assert tracker.totals.erred == 1


# -- spans --------------------------------------------------------------------------------


def test_span_tracker_writes_what_changed_and_lets_settled_spans_go() -> None:
    scheduler = Scheduler()
    root = Span("root", ("default",))
    child = Span("child", ("default", "load"), parent=root)
    child._cumulative_worker_metrics = {("execute", "inc", "thread-cpu", "seconds"): 2.0}
    root._cumulative_worker_metrics = {("execute", "add", "thread-cpu", "seconds"): 5.0}
    root.done = child.done = True
    with_spans(scheduler, root, child)
    spans = SpanTracker("c", max_code_chars=1000)

    records: list[Record] = []
    tracks = spans.snapshot(scheduler, {"child"}, records, paced=False)  # type: ignore[arg-type]
    assert {r.span_id for r in records if isinstance(r, SpanRecord)} == {"root", "child"}
    metrics = {(r.span_id, r.prefix, r.value) for r in records if isinstance(r, SpanMetricRecord)}
    assert metrics == {("child", "inc", 2.0), ("root", "add", 5.0)}
    spans.remember(tracks)

    # done, nothing changed: nothing to write
    records = []
    spans.remember(spans.snapshot(scheduler, set(), records, paced=False))  # type: ignore[arg-type]
    assert records == []

    # a heartbeat brings more of the child's metrics: the child again, with the metric
    # that moved (not the others: a flush writes what changed)
    child._cumulative_worker_metrics[("execute", "inc", "thread-cpu", "seconds")] = 3.0
    child._cumulative_worker_metrics[("execute", "inc", "disk-read", "bytes")] = 64.0
    records = []
    spans.remember(spans.snapshot(scheduler, set(), records, paced=False))  # type: ignore[arg-type]
    assert [r.span_id for r in records if isinstance(r, SpanRecord)] == ["child"]
    moved = {(r.activity, r.value) for r in records if isinstance(r, SpanMetricRecord)}
    assert moved == {("thread-cpu", 3.0), ("disk-read", 64.0)}
    child._cumulative_worker_metrics[("execute", "inc", "disk-read", "bytes")] = 96.0
    records = []
    spans.remember(spans.snapshot(scheduler, set(), records, paced=False))  # type: ignore[arg-type]
    assert [(r.activity, r.value) for r in records if isinstance(r, SpanMetricRecord)] == [
        ("disk-read", 96.0)
    ]

    # a lost store: everything again, every metric too
    spans.forget()
    records = []
    spans.snapshot(scheduler, set(), records, paced=False)  # type: ignore[arg-type]
    assert {r.span_id for r in records if isinstance(r, SpanRecord)} == {"root", "child"}
    assert len([r for r in records if isinstance(r, SpanMetricRecord)]) == 3


def test_span_tracker_without_the_spans_extension_writes_nothing() -> None:
    records: list[Record] = []
    tracks = SpanTracker("c", max_code_chars=10).snapshot(
        Scheduler(),  # type: ignore[arg-type]
        {"x"},
        records,
        paced=True,
    )
    assert tracks == {} and records == []


# -- events -------------------------------------------------------------------------------


def test_event_log_bounds_errors_and_keeps_the_innermost_frames() -> None:
    events = EventLog("c", max_errors=2, max_traceback_chars=10, max_code_chars=5)
    task = Task("fail-1-0", Group("fail-1", 1))
    failure = {"traceback_text": "outer frames ... inner", "exception_text": "ValueError: x"}
    first = events.error("fail-1-0", task, "g1", failure, at=1.0)  # type: ignore[arg-type]
    assert first is not None
    assert first.traceback == "…" + failure["traceback_text"][-10:]
    assert first.exception == "Value"
    assert events.error("k2", task, "g1", failure, at=2.0) is not None  # type: ignore[arg-type]
    assert events.error("k3", task, "g1", failure, at=3.0) is None  # type: ignore[arg-type]
    removed = events.worker_removed(
        "tcp://w", at=4.0, reason="lost", msg={"processing-tasks": ["a", "b"]},
        stimulus_id="s", with_cluster=False,
    )  # fmt: skip
    assert removed.detail["processing_tasks"] == 2 and removed.detail["reason"] == "lost"


# -- flushing, with real SQLite stores ----------------------------------------------------


def rows(url: str, table: sa.Table, cluster_id: str) -> list[dict[str, Any]]:
    column = table.c.id if table is store_schema.clusters else table.c.cluster_id
    with as_engine(open_store(url)).connect() as conn:
        return [
            dict(r._mapping) for r in conn.execute(sa.select(table).where(column == cluster_id))
        ]


def make_flusher(url: str, scheduler: Scheduler, *, max_buffered: int = 1000) -> Flusher:
    settings = CollectorSettings.from_config(database=url)
    tracker = WorkTracker("c", max_code_chars=1000)
    cluster = cluster_record(scheduler, settings, "c", now=1000.0)  # type: ignore[arg-type]
    errors: list[str] = []
    return Flusher(
        scheduler=scheduler,  # type: ignore[arg-type]
        sink=sink_for(database=url),
        tracker=tracker,
        spans=SpanTracker("c", max_code_chars=1000),
        accounting=Accounting(cluster, since=1000.0),
        destination=url,
        max_buffered_records=max_buffered,
        on_error=lambda what, exc: errors.append(what),
    )


def event(n: int) -> EventRecord:
    return EventLog("c", max_errors=0, max_traceback_chars=0, max_code_chars=0).event(
        "worker-added", at=1000.0 + n, worker=f"tcp://w{n}"
    )


def test_flusher_writes_what_changed_and_counts_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    scheduler = Scheduler()

    async def body() -> Flusher:
        flusher = make_flusher(url, scheduler)
        group = Group("inc-1", 2)
        keys = scheduler.graph(group, start=1000.0)
        flusher.tracker.graph_updated(scheduler, keys)  # type: ignore[arg-type]
        for key in keys:  # done at its first flush: written then
            group.run(scheduler.tasks[key], at=1001.0)
            flusher.tracker.task_finished(scheduler.tasks[key], startstops(1001.0))  # type: ignore[arg-type]
        flusher.keep(event(1))
        flusher.open_sink()
        written = await flusher.flush()
        # cluster, group, computation, prefix, event
        assert written == 5
        assert await flusher.flush() == 1  # nothing changed: the cluster's running totals
        await flusher.close_sink(timeout=30)
        return flusher

    flusher = asyncio.run(body())
    stats = flusher.stats
    assert (stats.flushes, stats.records_written, stats.write_failures) == (2, 6, 0)
    assert stats.longest_block_seconds <= stats.loop_seconds
    status = flusher.status()
    assert status["delivered_batches"] is None and status["records_written"] == 6
    counts = table_counts(open_store(url), "c")
    assert (counts["clusters"], counts["task_groups"], counts["events"]) == (1, 1, 1)
    (cluster,) = rows(url, store_schema.clusters, "c")
    assert cluster["tasks_executed"] == 2 and cluster["bytes_processed"] == 16


def test_a_graphs_new_groups_are_adopted_by_the_next_flush_not_by_the_hook(
    tmp_path: Path,
) -> None:
    """update_graph only notes a graph's new groups (it holds the event loop for the
    whole graph); the next flush adopts them, in chunks. Until then a task that ends is
    counted for the computation that asked for its group, with all of its figures; a
    group a newer graph asks for before it ran is the newer computation's; and a group
    forgotten before the flush is let go, not kept for ever."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    scheduler = Scheduler()
    early, late, moved, dropped = (Group(f"{n}-1", 2) for n in ("early", "late", "moved", "x"))

    def keys_of(group: Group) -> list[str]:
        scheduler.task_groups[group.name] = group
        keys = [f"{group.name}-{i}" for i in range(len(group))]
        scheduler.tasks.update((key, Task(key, group)) for key in keys)
        return keys

    def run(group: Group, keys: list[str], at: float) -> None:
        for key in keys:
            group.run(scheduler.tasks[key], at=at)
            flusher.tracker.task_finished(scheduler.tasks[key], startstops(at))  # type: ignore[arg-type]

    flusher = make_flusher(url, scheduler)
    tracker = flusher.tracker
    scheduler.computations.append(Computation(0, start=1000.0))
    graph = {group: keys_of(group) for group in (early, late, moved, dropped)}
    tracker.graph_updated(scheduler, [key for keys in graph.values() for key in keys])  # type: ignore[arg-type]
    first = tracker.newest
    assert first is not None and tracker.current == {} and len(tracker.to_adopt) == 4

    run(early, graph[early][:1], at=1001.0)  # before any flush
    assert tracker.current[early].computation is first  # type: ignore[index]
    scheduler.computations.append(Computation(1, start=1002.0))
    tracker.graph_updated(scheduler, graph[moved])  # type: ignore[arg-type]
    second = tracker.newest
    assert second is not None and second is not first
    del scheduler.task_groups[dropped.name]  # its tasks released and forgotten, unrun
    dropped.done = True
    for key in graph[dropped]:
        tracker.task_forgotten(scheduler.tasks[key])  # type: ignore[arg-type]
    run(early, graph[early][1:], at=1003.0)
    run(moved, graph[moved], at=1003.0)

    async def body() -> None:
        flusher.open_sink()
        await flusher.flush()
        run(late, graph[late], at=1004.0)  # adopted by that flush, before it ran
        await flusher.flush()
        await flusher.close_sink(timeout=30)

    asyncio.run(body())
    stored = {row["name"]: row for row in rows(url, store_schema.task_groups, "c")}
    assert set(stored) == {early.name, late.name, moved.name}  # the unrun one: no row
    owner = {name: row["computation_id"] for name, row in stored.items()}
    assert owner == {
        early.name: first.record_id,
        late.name: first.record_id,
        moved.name: second.record_id,
    }
    for name in stored:  # every task's figures, none taken as a baseline
        assert (stored[name]["tasks_executed"], stored[name]["nbytes_total"]) == (2, 16)
    assert stored[early.name]["started_at"] == 1001.0
    assert tracker.to_adopt == {} and dropped not in tracker.current


@pytest.mark.parametrize("slice_seconds", [0.0, 60.0])
def test_a_flush_gives_the_loop_back_once_a_block_held_it_for_a_slice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slice_seconds: float
) -> None:
    """A block ends when it has held the loop for SLICE_SECONDS, checked after each
    chunk of groups: at 0 every chunk is a block of its own, at 60 s the flush is one
    block up to the write and one after it (letting go of what is stored); either way
    every group is written, and let go once Dask forgot it."""
    monkeypatch.setattr(flushing, "SLICE_SECONDS", slice_seconds)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    scheduler = Scheduler()
    groups = 3 * flushing.GROUPS_PER_CHUNK + 1

    async def body() -> Flusher:
        flusher = make_flusher(url, scheduler)
        for n in range(groups):
            group = Group(f"inc-{n}", 1)
            keys = scheduler.graph(group, start=1000.0)
            flusher.tracker.graph_updated(scheduler, keys)  # type: ignore[arg-type]
            group.run(scheduler.tasks[keys[0]], at=1001.0)
            flusher.tracker.task_finished(scheduler.tasks[keys[0]], startstops(1001.0))  # type: ignore[arg-type]
            del scheduler.task_groups[group.name]  # done and forgotten by Dask
        flusher.open_sink()
        await flusher.flush()
        await flusher.close_sink(timeout=30)
        return flusher

    flusher = asyncio.run(body())
    # chunks of new groups, of changed ones, and of stored ones let go after the write
    chunks = -(-groups // flushing.GROUPS_PER_CHUNK)
    assert flusher.stats.blocks == (3 * chunks + 2 if slice_seconds == 0 else 2)
    assert flusher.tracker.current == {}
    assert flusher.status()["flush_blocks"] == flusher.stats.blocks
    assert table_counts(open_store(url), "c")["task_groups"] == groups


def test_flusher_keeps_records_through_a_failed_write_within_its_bound(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    broken = f"sqlite:///{blocker / 'store.db'}"  # its folder is a file: never written
    good = f"sqlite:///{tmp_path / 'store.db'}"

    async def body() -> Flusher:
        flusher = make_flusher(broken, Scheduler(), max_buffered=3)
        for n in range(3):
            flusher.keep(event(n))
        assert await flusher.flush() == 0
        assert len(flusher.buffer) == 3  # events kept; the cluster record is made again
        flusher.keep(event(3))  # over the bound: the oldest goes
        assert await flusher.flush() == 0
        assert flusher.stats.records_dropped >= 1 and len(flusher.buffer) == 3
        flusher.sink = sink_for(database=good)  # the store comes back
        assert await flusher.flush() == 4
        await flusher.close_sink(timeout=30)
        return flusher

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logging.getLogger("daskscope"), "disabled", True)
        flusher = asyncio.run(body())
    assert flusher.stats.write_failures == 2 and flusher.stats.last_write_error is None
    worker_names = sorted(e["worker"] for e in rows(good, store_schema.events, "c"))
    assert worker_names == ["tcp://w1", "tcp://w2", "tcp://w3"]


def test_flusher_writes_everything_again_into_a_store_that_was_lost(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    scheduler = Scheduler()

    async def body() -> None:
        flusher = make_flusher(url, scheduler)
        group = Group("inc-1", 2)
        keys = scheduler.graph(group, start=1000.0)
        flusher.tracker.graph_updated(scheduler, keys)  # type: ignore[arg-type]
        group.run(scheduler.tasks[keys[0]], at=1001.0)
        flusher.tracker.task_finished(scheduler.tasks[keys[0]], startstops(1001.0))  # type: ignore[arg-type]
        flusher.keep(event(1))
        flusher.open_sink()
        # cluster, computation, prefix, event; the group began running: put off
        assert await flusher.flush() == 4
        group.run(scheduler.tasks[keys[1]], at=1002.0)
        flusher.tracker.task_finished(scheduler.tasks[keys[1]], startstops(1002.0))  # type: ignore[arg-type]
        # the cluster, the group done, its computation and prefix counting it
        assert await flusher.flush() == 4
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        assert await flusher.flush() == 0  # StoreLost: a new store is made
        assert await flusher.flush() == 5  # and everything written into it again
        await flusher.close_sink(timeout=30)
        assert flusher.stats.write_failures == 1

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logging.getLogger("daskscope"), "disabled", True)
        asyncio.run(body())
    counts = table_counts(open_store(url), "c")
    assert (counts["clusters"], counts["task_groups"], counts["events"]) == (1, 1, 1)
    assert counts["computations"] == 1 and counts["task_prefixes"] == 1


# -- sinks --------------------------------------------------------------------------------


def test_the_sink_factory_and_each_sinks_statistics(tmp_path: Path) -> None:
    server = sink_for(server="http://127.0.0.1:9", token="t", spool_dir=tmp_path / "spool")
    assert isinstance(server, HttpSink)
    assert server.stats().kind == "server" and server.stats().spooled == 0
    isolated = sink_for(database=f"sqlite:///{tmp_path / 'a.db'}")
    assert isinstance(isolated, StoreSink) and isolated.isolated
    one_shot = sink_for(database=f"sqlite:///{tmp_path / 'b.db'}", one_shot=True)
    assert isinstance(one_shot, StoreSink) and not one_shot.isolated

    one_shot.write([event(1), event(2)])
    one_shot.close()
    stats = one_shot.stats()
    assert (stats.kind, stats.records_written, stats.batches_written) == ("store", 2, 1)
    assert (stats.failures, stats.last_error) == (0, None)

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    failing = sink_for(database=f"sqlite:///{blocker / 'c.db'}", one_shot=True)
    with pytest.raises(Exception):  # noqa: B017 - whichever the store raises
        failing.write([event(1)])
    stats = failing.stats()
    assert stats.failures == 1 and stats.last_error and stats.records_written == 0


# -- the Dask adapter ---------------------------------------------------------------------


def test_own_metrics_without_dasks_private_totals_take_the_children_out() -> None:
    cpu = ("execute", "inc", "thread-cpu", "seconds")
    root = Span("root", ("default",))
    child = Span("child", ("default", "x"), parent=root)
    root._cumulative_worker_metrics = {cpu: 1.0, dask_adapter.IDLE_KEY: 5.0}
    child._cumulative_worker_metrics = {cpu: 2.0}
    assert dask_adapter.own_metrics(root) == {cpu: 1.0, dask_adapter.IDLE_KEY: 5.0}  # type: ignore[arg-type]
    assert dask_adapter.subtree_metrics(root)[cpu] == 3.0  # type: ignore[arg-type]

    class PublicOnly:  # a Dask that publishes subtree totals only
        def __init__(self, span: Span) -> None:
            self.cumulative_worker_metrics = span.cumulative_worker_metrics
            self.children = [
                SimpleNamespace(cumulative_worker_metrics=c.cumulative_worker_metrics)
                for c in span.children
            ]

    assert dask_adapter.own_metrics(PublicOnly(root)) == {cpu: 1.0}  # type: ignore[arg-type]


def test_adapter_reads_worker_memory_and_heartbeats_and_finds_plugins() -> None:
    class NoHeartbeat:
        @property
        def memory(self) -> Any:
            raise KeyError("process")

    assert dask_adapter.memory_split(NoHeartbeat()) == (None,) * 6  # type: ignore[arg-type]
    beat = {"cpu": 37.5, "transfer": {"incoming_bytes": 10}}
    assert dask_adapter.heartbeat_value(beat, "cpu_percent") == 37.5
    assert dask_adapter.heartbeat_value(beat, "transfer_incoming_bytes") == 10
    assert dask_adapter.heartbeat_value(beat, "net_read_bps") is None

    recorder = object()
    scheduler = SimpleNamespace(plugins={"daskscope": recorder}, handlers={})
    assert dask_adapter.find_recorder(scheduler) is recorder  # type: ignore[arg-type]

    calls: list[str] = []

    async def retire(*args: Any) -> str:
        calls.append("retire")
        return "retired"

    async def before() -> None:
        calls.append("before")

    scheduler.handlers["retire_workers"] = retire
    assert dask_adapter.wrap_handler(scheduler, "retire_workers", before)  # type: ignore[arg-type]
    assert not dask_adapter.wrap_handler(scheduler, "retire_workers", before)  # type: ignore[arg-type]
    assert asyncio.run(scheduler.handlers["retire_workers"]()) == "retired"
    assert calls == ["before", "retire"]
    dask_adapter.add_handlers(scheduler, {"retire_workers": before})  # type: ignore[arg-type]
    assert scheduler.handlers["retire_workers"] is not before  # taken names stay


# -- the workers' samples, shared with the workflow ---------------------------------------


class Worker:
    """Dask's WorkerState, as much as a worker sample reads of it."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.nthreads = 2
        self.memory_limit = 1000
        self.metrics = {"cpu": 50.0}
        self.executing: set[Any] = set()
        self.processing: set[Any] = set()
        self.memory = SimpleNamespace(
            process=500, managed=100, unmanaged=400, unmanaged_old=300, unmanaged_recent=100,
            spilled=0,
        )  # fmt: skip


def test_roster_samples_are_shared_while_fresh_and_only_rounds_are_stored(
    tmp_path: Path,
) -> None:
    scheduler = Scheduler()
    scheduler.workers = {a: Worker(a) for a in ("tcp://a", "tcp://b")}
    flusher = make_flusher(f"sqlite:///{tmp_path / 'store.db'}", scheduler)
    roster = WorkerRoster(
        scheduler,  # type: ignore[arg-type]
        cluster_id="c",
        accounting=flusher.accounting,
        events=EventLog("c", max_errors=0, max_traceback_chars=0, max_code_chars=0),
        lifecycle=WorkerLifecycle(scheduler),  # type: ignore[arg-type]
        flusher=flusher,
    )
    roster.sample()  # a sampling round: stored
    assert [s.worker for s in flusher.buffer] == ["tcp://a", "tcp://b"]
    (at, first) = roster.latest
    assert first[0].memory == 500 and first[0].cpu_percent == 50.0
    assert roster.samples(max_age=60.0) is first  # fresh: the round's own samples
    again = roster.samples(max_age=60.0, after=at)  # the caller has those already
    assert again is not first and again[0].sampled_at > at
    assert roster.samples(max_age=-1.0) is not again  # too old: taken now
    assert len(flusher.buffer) == 2  # samples taken on demand are not stored
    scheduler.workers["tcp://c"] = Worker("tcp://c")
    assert len(roster.samples(max_age=60.0)) == 3  # a worker arrived: taken again


def test_what_the_recorder_keeps_of_a_live_group_is_not_tracked_by_the_collector() -> None:
    """What lives as long as its group adds nothing to the garbage collector's full passes
    over the scheduler's heap: a span's share of it is a tuple of atoms, and copies of
    Dask's durations in a use (its baseline) are dicts the collector does not track
    (``dict()`` of Dask's defaultdict would be tracked)."""
    tg = TaskGroup("add-1", TaskPrefix("add"))
    task = TaskState(("add-1", 0), None, "memory", tg, False)
    tg.add(task)
    tg.add_duration("compute", 1.0, 2.5)
    assert gc.is_tracked(dict(tg.all_durations))  # what a plain copy avoids
    assert plain(tg.all_durations) == {"compute": 1.5}
    share = group_share(tg)
    states, _, durations, *_ = share
    assert dict(states) == {s: n for s, n in tg.states.items() if n}
    assert dict(durations) == {"compute": 1.5}
    # a span's share of a group is a tuple of atoms: the collector untracks the inner
    # tuples, then the outer one, within three collections (a class instance or a named
    # tuple would stay tracked for good)
    assert gc.is_tracked(share)
    for _ in range(3):
        gc.collect()
    assert not gc.is_tracked(share)
    tracker = WorkTracker("c", max_code_chars=1000)
    use = tracker.task_finished(task, startstops(1.0))  # a group outside any graph
    assert use.base_durations == {"compute": 1.5} and not gc.is_tracked(use.base_durations)
