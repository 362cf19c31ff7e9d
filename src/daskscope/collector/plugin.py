"""The scheduler plugin that records a Dask cluster.

Hot hooks (``transition``, ``log_event``) only count: O(1), no allocation on the common
path. Everything else happens on periodic loops: a snapshot of the live task groups,
computations and spans is taken on the event loop (the objects are not thread-safe) and
handed to a single writer thread. Every hook is guarded: an error inside daskscope is
logged and never reaches Dask.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import platform
import uuid
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from time import perf_counter, thread_time
from typing import TYPE_CHECKING, Any

import dask
import distributed
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.metrics import time

from daskscope.collector import snapshot
from daskscope.collector.sink import Sink, StoreSink
from daskscope.config import CollectorSettings
from daskscope.model import (
    ClusterRecord,
    ComputationRecord,
    ErrorRecord,
    EventRecord,
    ProfileRecord,
    Record,
    SpanRecord,
    TaskPrefixRecord,
    WorkerSampleRecord,
    stable_id,
)

if TYPE_CHECKING:
    from distributed.scheduler import Computation, Scheduler, TaskGroup

__all__ = ["DaskscopePlugin"]

logger = logging.getLogger("daskscope")

#: Log the first few failures of each hook in full, then only count them.
_LOGGED_FAILURES_PER_HOOK = 3


@dataclass(slots=True)
class _GroupTrack:
    """What daskscope knows of one live TaskGroup beyond what the group keeps itself."""

    record_id: str
    computation_id: str | None
    executed: int = 0
    erred: int = 0
    #: signature of the last snapshot written; equal means nothing new to write
    written: tuple[Any, ...] | None = None
    retired: bool = False


@dataclass(slots=True)
class _Totals:
    """Additive totals of task groups (per cluster or per prefix)."""

    groups: int = 0
    executed: int = 0
    erred: int = 0
    nbytes: int = 0
    duration_s: float = 0.0
    durations: dict[str, float] = field(default_factory=dict)

    def add(self, executed: int, erred: int, nbytes: int, durations: Mapping[str, float]) -> None:
        self.groups += 1
        self.executed += executed
        self.erred += erred
        self.nbytes += nbytes
        for activity, seconds in durations.items():
            self.duration_s += seconds
            self.durations[activity] = self.durations.get(activity, 0.0) + seconds

    def copy(self) -> _Totals:
        return _Totals(
            self.groups,
            self.executed,
            self.erred,
            self.nbytes,
            self.duration_s,
            dict(self.durations),
        )


@dataclass(slots=True)
class _SpanTrack:
    own_metrics: dict[tuple[Hashable, ...], float]
    done: bool


def _jsonable(value: Any) -> Any:
    """A JSON-safe copy (annotations may hold tuples, sets or arbitrary objects)."""
    return json.loads(json.dumps(value, default=str))


class DaskscopePlugin(SchedulerPlugin):
    """Records everything the scheduler knows about its work into a daskscope store.

    Attach with :func:`daskscope.register`, or with no code change through the scheduler
    preload ``daskscope`` (``distributed.scheduler.preload: [daskscope]``).
    """

    name = "daskscope"
    idempotent = True

    def __init__(self, settings: CollectorSettings | None = None, *, cluster_id: str | None = None):
        self.settings = settings or CollectorSettings.from_config()
        self.cluster_id = cluster_id or str(uuid.uuid4())
        self.hook_failures: dict[str, int] = {}
        self.write_failures = 0
        self.records_written = 0
        self.records_dropped = 0
        self.last_write_error: str | None = None
        #: Time of daskscope's periodic work on the scheduler's event loop (snapshots,
        #: samples) and CPU time of its writer thread: what it costs besides the hooks
        self.loop_seconds = 0.0
        self.writer_cpu_seconds = 0.0
        self._started = False

    # -- pickling: only the settings travel from the client to the scheduler --------------

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings, "cluster_id": self.cluster_id}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["settings"], cluster_id=state["cluster_id"])  # type: ignore[misc]

    def make_sink(self) -> Sink:
        if self.settings.server:
            from daskscope.collector.http_sink import HttpSink

            return HttpSink(self.settings.server, self.settings.token, self.settings.spool_dir)
        return StoreSink(self.settings.database)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, scheduler: Scheduler) -> None:
        if self._started:  # add_plugin + start may both reach us; start once
            return
        try:
            self._start(scheduler)
        except Exception as exc:
            self._hook_failed("start", exc)

    def _start(self, scheduler: Scheduler) -> None:
        self._started = True
        self.scheduler = scheduler
        self._tasks = scheduler.tasks
        self._group_tracks: dict[TaskGroup, _GroupTrack] = {}
        self._computations: dict[uuid.UUID, Computation] = {}
        self._computations_written: dict[uuid.UUID, tuple[Any, ...]] = {}
        self._span_tracks: dict[str, _SpanTrack] = {}
        self._prefixes_written: dict[str, tuple[Any, ...]] = {}
        self._retired = _Totals()
        self._retired_by_prefix: dict[str, _Totals] = {}
        self._name_occurrences: dict[str, int] = {}
        self._buffer: list[Record] = []
        self._removals: dict[str, dict[str, Any]] = {}
        self._errors_kept = 0
        self._sink = self.make_sink()
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="daskscope-writer")
        self._flush_lock = asyncio.Lock()
        self._closing = False

        now = time()
        started_at = getattr(scheduler, "time_started", now)
        self._cluster = ClusterRecord(
            id=self.cluster_id,
            name=self.settings.cluster_name or scheduler.id,
            account=self.settings.account,
            user=self.settings.user,
            scheduler_address=scheduler.address or "",
            dask_version=dask.__version__,
            distributed_version=distributed.__version__,
            python_version=platform.python_version(),
            started_at=started_at,
            last_seen_at=now,
        )
        # Threads before we were attached come from Dask's own history; memory limits
        # have no history, so their integral starts now.
        self._cluster.core_seconds = self._threads_integral(scheduler.total_nthreads_history, now)
        self._integrated_until = now
        self._refresh_capacity()
        self._event("cluster-started", at=started_at, detail={"attached_at": now})
        for ws in scheduler.workers.values():
            self._worker_added(ws.address, at=now, detail={"present_when_attached": True})

        # Open the store (imports, schema check) in the writer thread now, not during the
        # first flush in the middle of the user's work; a failure shows at the first write.
        self._writer.submit(self._sink.open)
        # A second recorder added under another name must not take over the handlers
        scheduler.handlers.setdefault("daskscope_flush", self.handle_flush)
        scheduler.handlers.setdefault("daskscope_info", self.handle_info)
        self._loops = [
            asyncio.create_task(self._every(self.settings.flush_interval, self.flush)),
            asyncio.create_task(
                self._every(self.settings.worker_sampling_interval, self._sample_workers_async)
            ),
        ]
        self._profile_from = now
        if self.settings.profile_enabled:
            self._loops.append(
                asyncio.create_task(
                    self._every(self.settings.profile_interval, self._collect_profile)
                )
            )

    async def before_close(self) -> None:
        """Last words while the workers are still there: profile, samples, everything."""
        if not self._started or self._closing:
            return
        self._closing = True
        try:
            for loop in self._loops:
                loop.cancel()
            if self.settings.profile_enabled:
                await self._collect_profile()
            self._sample_workers()
            now = time()
            self._event("cluster-closed", at=now)
            self._cluster.stopped_at = now
            await asyncio.wait_for(self.flush(), timeout=60)
        except Exception as exc:
            self._hook_failed("before_close", exc)

    async def close(self) -> None:
        if not self._started:
            return
        await self.before_close()  # a no-op when Dask already called it
        try:
            self._writer.submit(self._sink.close)
            self._writer.shutdown(wait=False)
        except Exception as exc:
            self._hook_failed("close", exc)

    def restart(self, scheduler: Scheduler) -> None:
        try:
            self._event("cluster-restarted", at=time())
        except Exception as exc:
            self._hook_failed("restart", exc)

    # -- hot hooks -----------------------------------------------------------------------

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if start != "processing":
            return
        try:
            if finish == "memory":
                ts = self._tasks.get(key)
                if ts is not None:
                    self._group_track(ts.group).executed += 1
            elif finish == "erred":
                self._task_erred(key, kwargs)
        except Exception as exc:
            self._hook_failed("transition", exc)

    def update_graph(self, scheduler: Scheduler, **kwargs: Any) -> None:
        try:
            if scheduler.computations:
                computation = scheduler.computations[-1]
                self._computations.setdefault(computation.id, computation)
        except Exception as exc:
            self._hook_failed("update_graph", exc)

    def log_event(self, topic: str, msg: Any) -> None:
        # Dask tells why a worker left only through its event log, just before the
        # remove_worker hook runs: keep the message for that hook.
        if topic != "all" or not isinstance(msg, dict) or msg.get("action") != "remove-worker":
            return
        try:
            self._removals[msg["worker"]] = msg
        except Exception as exc:
            self._hook_failed("log_event", exc)

    def add_worker(self, scheduler: Scheduler, worker: str) -> None:
        try:
            self._worker_added(worker, at=time())
        except Exception as exc:
            self._hook_failed("add_worker", exc)

    def remove_worker(self, scheduler: Scheduler, worker: str, **kwargs: Any) -> None:
        try:
            now = time()
            self._advance_integrals(now)
            self._refresh_capacity()
            msg = self._removals.pop(worker, {})
            expected = bool(msg.get("expected", False))
            detail = {
                "reason": "closed" if expected else "lost",
                "expected": expected,
                "stimulus_id": kwargs.get("stimulus_id", msg.get("stimulus_id")),
                "processing_tasks": len(msg.get("processing-tasks", ()) or ()),
                "lost_computed_tasks": len(msg.get("lost-computed-tasks", ()) or ()),
                "lost_scattered_tasks": len(msg.get("lost-scattered-tasks", ()) or ()),
            }
            self._event("worker-removed", at=now, worker=worker, detail=detail)
        except Exception as exc:
            self._hook_failed("remove_worker", exc)

    # -- bookkeeping -------------------------------------------------------------------

    def _group_track(self, tg: TaskGroup, computation_id: str | None = None) -> _GroupTrack:
        track = self._group_tracks.get(tg)
        if track is None:
            # A group name comes back as a new TaskGroup once the old one is forgotten:
            # number the lifetimes so that each keeps its own record.
            occurrence = self._name_occurrences.get(tg.name, 0)
            self._name_occurrences[tg.name] = occurrence + 1
            record_id = stable_id(self.cluster_id, "task-group", tg.name, occurrence)
            track = self._group_tracks[tg] = _GroupTrack(record_id, computation_id)
        elif track.computation_id is None and computation_id is not None:
            track.computation_id = computation_id
        return track

    def _computation_record_id(self, computation_id: uuid.UUID) -> str:
        return stable_id(self.cluster_id, "computation", computation_id)

    def _task_erred(self, key: Any, kwargs: dict[str, Any]) -> None:
        ts = self._tasks.get(key)
        if ts is None:
            return
        track = self._group_track(ts.group)
        track.erred += 1
        if self._errors_kept >= self.settings.max_errors:
            return
        self._errors_kept += 1
        now = time()
        traceback_text = kwargs.get("traceback_text") or ""
        limit = self.settings.max_traceback_chars
        if len(traceback_text) > limit:
            traceback_text = "…" + traceback_text[-limit:]  # the innermost frames matter most
        self._buffer.append(
            ErrorRecord(
                id=stable_id(self.cluster_id, "error", key, self._errors_kept),
                cluster_id=self.cluster_id,
                key=str(key),
                at=now,
                group=ts.group.name,
                prefix=ts.prefix.name,
                group_id=track.record_id,
                worker=kwargs.get("worker"),
                exception=(kwargs.get("exception_text") or "")[: self.settings.max_code_chars],
                traceback=traceback_text,
            )
        )

    def _event(
        self, kind: str, *, at: float, worker: str | None = None, detail: dict | None = None
    ) -> None:
        self._buffer.append(
            EventRecord(
                id=stable_id(self.cluster_id, "event", kind, worker, at),
                cluster_id=self.cluster_id,
                at=at,
                kind=kind,
                worker=worker,
                detail=detail or {},
            )
        )

    def _worker_added(self, worker: str, *, at: float, detail: dict | None = None) -> None:
        self._advance_integrals(at)
        self._refresh_capacity()
        ws = self.scheduler.workers.get(worker)
        info = dict(detail or {})
        if ws is not None:
            info.update(nthreads=ws.nthreads, memory_limit=ws.memory_limit, name=str(ws.name))
        self._event("worker-added", at=at, worker=worker, detail=info)

    @staticmethod
    def _threads_integral(history: list[tuple[float, int]], until: float) -> float:
        total = 0.0
        for (t0, n), (t1, _) in zip(history, [*history[1:], (until, 0)], strict=True):
            total += n * max(0.0, min(t1, until) - t0)
        return total

    def _advance_integrals(self, now: float) -> None:
        """Add the capacity held since the last change to the cluster's integrals."""
        dt = max(0.0, now - self._integrated_until)
        self._cluster.core_seconds += self._threads * dt
        self._cluster.memory_limit_byte_seconds += self._memory_limit * dt
        self._integrated_until = max(now, self._integrated_until)
        self._cluster.last_seen_at = max(self._cluster.last_seen_at, now)

    def _refresh_capacity(self) -> None:
        workers = self.scheduler.workers.values()
        self._threads = sum(ws.nthreads for ws in workers)
        self._memory_limit = sum(ws.memory_limit or 0 for ws in workers)
        cluster = self._cluster
        cluster.workers_peak = max(cluster.workers_peak, len(workers))
        cluster.threads_peak = max(cluster.threads_peak, self._threads)
        cluster.memory_limit_peak = max(cluster.memory_limit_peak, self._memory_limit)

    # -- periodic work -------------------------------------------------------------------

    async def _every(self, interval: float, action: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await action()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._hook_failed(getattr(action, "__name__", "loop"), exc)

    def _sample_workers(self) -> None:
        started = perf_counter()
        now = time()
        self._advance_integrals(now)
        for ws in self.scheduler.workers.values():
            self._buffer.append(snapshot.worker_sample(ws, cluster_id=self.cluster_id, at=now))
        self.loop_seconds += perf_counter() - started

    async def _sample_workers_async(self) -> None:
        self._sample_workers()

    async def _collect_profile(self) -> None:
        start, stop = self._profile_from, time()
        if not self.scheduler.workers:
            self._profile_from = stop
            return
        tree = await asyncio.wait_for(
            self.scheduler.get_profile(start=start, stop=stop), timeout=10
        )
        self._profile_from = stop
        if tree and tree.get("count"):
            self._buffer.append(
                ProfileRecord(
                    id=stable_id(self.cluster_id, "profile", start),
                    cluster_id=self.cluster_id,
                    started_at=start,
                    stopped_at=stop,
                    samples=int(tree["count"]),
                    tree=tree,
                )
            )

    # -- flushing ------------------------------------------------------------------------

    async def flush(self) -> int:
        """Write everything new since the last successful write; returns records written."""
        async with self._flush_lock:
            started = perf_counter()
            self._advance_integrals(time())
            try:
                records, on_success = self._snapshot()
            except Exception as exc:  # a bug here must not stop the buffered records
                self._hook_failed("snapshot", exc)
                records, on_success = [], []
            records += self._buffer
            self._buffer = []
            self.loop_seconds += perf_counter() - started
            try:
                await asyncio.get_running_loop().run_in_executor(
                    self._writer, self._timed_write, records
                )
            except Exception as exc:
                self._write_failed(exc, [r for r in records if self._is_append_only(r)])
                return 0
            for commit in on_success:
                commit()
            self.records_written += len(records)
            self.last_write_error = None
            return len(records)

    def _timed_write(self, records: list[Record]) -> None:
        """The sink's write, in the writer thread, counting that thread's CPU time."""
        started = thread_time()
        try:
            self._sink.write(records)
        finally:
            self.writer_cpu_seconds += thread_time() - started

    @staticmethod
    def _is_append_only(record: Record) -> bool:
        return isinstance(record, (ErrorRecord, EventRecord, ProfileRecord, WorkerSampleRecord))

    def _write_failed(self, exc: Exception, unwritten: list[Record]) -> None:
        # Snapshots are taken again next time; append-only records go back to the buffer,
        # within its bound (the oldest go first).
        self.write_failures += 1
        self.last_write_error = f"{type(exc).__name__}: {exc}"
        if self.write_failures <= _LOGGED_FAILURES_PER_HOOK:
            logger.warning(
                "daskscope could not write to %s: %s (will retry)", self._sink_name(), exc
            )
        self._buffer[:0] = unwritten
        overflow = len(self._buffer) - self.settings.max_buffered_records
        if overflow > 0:
            del self._buffer[:overflow]
            self.records_dropped += overflow

    def _sink_name(self) -> str:
        url = getattr(self._sink, "url", None)
        return str(url) if url else type(self._sink).__name__

    def _snapshot(self) -> tuple[list[Record], list[Callable[[], None]]]:
        """Records of everything that changed since the last write, and what to mark as
        written once they are stored."""
        records: list[Record] = []
        on_success: list[Callable[[], None]] = []
        for computation_id, computation in list(self._computations.items()):
            record_id = self._computation_record_id(computation_id)
            for tg in computation.groups:
                self._group_track(tg, record_id)
        changed_spans = self._snapshot_groups(records, on_success)
        self._snapshot_computations(records, on_success)
        self._snapshot_spans(changed_spans, records, on_success)
        records.append(dataclasses.replace(self._cluster))
        return records, on_success

    def _snapshot_groups(
        self, records: list[Record], on_success: list[Callable[[], None]]
    ) -> set[str]:
        live_groups = self.scheduler.task_groups
        totals = self._retired.copy()
        by_prefix = {name: t.copy() for name, t in self._retired_by_prefix.items()}
        changed_spans: set[str] = set()
        for tg, track in list(self._group_tracks.items()):
            if track.retired:
                continue
            record = snapshot.task_group_record(
                tg,
                record_id=track.record_id,
                cluster_id=self.cluster_id,
                computation_id=track.computation_id,
                executed=track.executed,
                erred=track.erred,
            )
            compute = record.durations
            totals.add(record.tasks_executed, record.tasks_erred, record.nbytes_total, compute)
            by_prefix.setdefault(record.prefix, _Totals()).add(
                record.tasks_executed, record.tasks_erred, record.nbytes_total, compute
            )
            signature = (
                record.tasks_executed,
                record.tasks_erred,
                record.nbytes_total,
                record.duration_s,
                tuple(record.states.items()),
                record.span_id,
                record.stopped_at,
                record.computation_id,
                len(record.dependencies),
            )
            if signature != track.written:
                records.append(record)
                on_success.append(_setter(track, "written", signature))
                if record.span_id:
                    changed_spans.add(record.span_id)
            elif live_groups.get(tg.name) is not tg and tg.done:
                self._retire_group(tg, track, record)
        self._cluster.tasks_executed = totals.executed
        self._cluster.tasks_erred = totals.erred
        self._cluster.bytes_processed = totals.nbytes
        self._cluster.compute_seconds = totals.durations.get("compute", 0.0)
        for name, prefix_totals in by_prefix.items():
            record = TaskPrefixRecord(
                id=stable_id(self.cluster_id, "task-prefix", name),
                cluster_id=self.cluster_id,
                name=name,
                group_count=prefix_totals.groups,
                tasks_executed=prefix_totals.executed,
                tasks_erred=prefix_totals.erred,
                nbytes_total=prefix_totals.nbytes,
                duration_s=prefix_totals.duration_s,
                durations=prefix_totals.durations,
            )
            signature = (
                record.group_count,
                record.tasks_executed,
                record.tasks_erred,
                record.nbytes_total,
                record.duration_s,
            )
            if self._prefixes_written.get(name) != signature:
                records.append(record)
                on_success.append(_item_setter(self._prefixes_written, name, signature))
        return changed_spans

    def _retire_group(self, tg: TaskGroup, track: _GroupTrack, record: Any) -> None:
        """The scheduler forgot this group and its last state is stored: fold it into the
        totals and stop looking at it (this keeps the plugin's memory bounded)."""
        self._retired.add(
            record.tasks_executed, record.tasks_erred, record.nbytes_total, record.durations
        )
        self._retired_by_prefix.setdefault(record.prefix, _Totals()).add(
            record.tasks_executed, record.tasks_erred, record.nbytes_total, record.durations
        )
        track.retired = True
        if track.computation_id is None:
            del self._group_tracks[tg]

    def _snapshot_computations(
        self, records: list[Record], on_success: list[Callable[[], None]]
    ) -> None:
        newest = self.scheduler.computations[-1] if self.scheduler.computations else None
        for computation_id, computation in list(self._computations.items()):
            tracks = [
                self._group_tracks[tg] for tg in computation.groups if tg in self._group_tracks
            ]
            done = all(tg.done for tg in computation.groups)
            stop = computation.stop
            stopped_at = stop if done and stop > 0 else None
            executed, erred = sum(t.executed for t in tracks), sum(t.erred for t in tracks)
            signature = (
                stopped_at,
                executed,
                erred,
                len(computation.groups),
                len(computation.code),
            )
            if self._computations_written.get(computation_id) != signature:
                # the code is only turned into text when something changed
                record = ComputationRecord(
                    id=self._computation_record_id(computation_id),
                    cluster_id=self.cluster_id,
                    started_at=computation.start,
                    stopped_at=stopped_at,
                    code=snapshot.code_snippets(computation.code, self.settings.max_code_chars),
                    annotations=_jsonable(computation.annotations),
                    tasks_executed=executed,
                    tasks_erred=erred,
                    group_count=len(computation.groups),
                )
                records.append(record)
                on_success.append(
                    _item_setter(self._computations_written, computation_id, signature)
                )
            elif computation is not newest and all(t.retired for t in tracks):
                # Dask may still add groups to its newest computation: never retire that one
                for tg in computation.groups:
                    self._group_tracks.pop(tg, None)
                del self._computations[computation_id]
                del self._computations_written[computation_id]

    def _snapshot_spans(
        self, changed: set[str], records: list[Record], on_success: list[Callable[[], None]]
    ) -> None:
        extension = self.scheduler.extensions.get("spans")
        if extension is None:
            return
        spans = extension.spans
        # A span's states and durations cover its subtree: a change shows in the ancestors
        for span_id in list(changed):
            span = spans.get(span_id)
            while span is not None:
                changed.add(span.id)
                span = span.parent
        for span_id, span in list(spans.items()):
            track = self._span_tracks.get(span_id)
            own = own_metrics(span)
            metrics_changed = track is None or own != track.own_metrics
            if not (metrics_changed or span_id in changed or track is None or not track.done):
                continue
            record: SpanRecord = snapshot.span_record(
                span, cluster_id=self.cluster_id, max_code_chars=self.settings.max_code_chars
            )
            records.append(record)
            if metrics_changed:
                records.extend(
                    snapshot.span_metric_records(span_id, own, cluster_id=self.cluster_id)
                )
            on_success.append(
                _item_setter(self._span_tracks, span_id, _SpanTrack(dict(own), record.done))
            )

    # -- handlers (called by the client through the scheduler's RPC) ----------------------

    async def handle_flush(
        self, wait_for_metrics: bool = True, timeout: float = 10.0
    ) -> dict[str, Any]:
        """Write everything now; first wait until every worker has sent two heartbeats
        after this call, so that the fine metrics of finished tasks have arrived."""
        if wait_for_metrics:
            await self._wait_for_heartbeats(timeout)
        self._sample_workers()
        if self.settings.profile_enabled:
            await self._collect_profile()
        written = await self.flush()
        return {"cluster_id": self.cluster_id, "written": written, **self.handle_info()}

    def handle_info(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "database": self.settings.database,
            "records_written": self.records_written,
            "write_failures": self.write_failures,
            "last_write_error": self.last_write_error,
            "records_dropped": self.records_dropped,
            # a server sink's delivery counts (the direct store sink has none)
            "spooled": getattr(self._sink, "spooled", 0),
            "delivered_batches": getattr(self._sink, "delivered_batches", None),
            "rejected_batches": getattr(self._sink, "rejected_batches", None),
            "loop_seconds": self.loop_seconds,
            "writer_cpu_seconds": self.writer_cpu_seconds,
            "hook_failures": dict(self.hook_failures),
        }

    async def _wait_for_heartbeats(self, timeout: float) -> None:
        deadline = time() + timeout
        seen = {addr: [ws.last_seen, 0] for addr, ws in self.scheduler.workers.items()}
        while time() < deadline:
            pending = False
            for addr, state in seen.items():
                ws = self.scheduler.workers.get(addr)
                if ws is None:
                    continue
                if ws.last_seen != state[0]:
                    state[0], state[1] = ws.last_seen, state[1] + 1
                if state[1] < 2:
                    pending = True
            if not pending:
                return
            await asyncio.sleep(0.02)

    # -- failure handling ----------------------------------------------------------------

    def _hook_failed(self, hook: str, exc: BaseException) -> None:
        count = self.hook_failures[hook] = self.hook_failures.get(hook, 0) + 1
        if count <= _LOGGED_FAILURES_PER_HOOK:
            logger.error("daskscope: %s hook failed; Dask goes on", hook, exc_info=exc)


def own_metrics(span: Any) -> dict[tuple[Hashable, ...], float]:
    """The span's fine metrics exclusive of its children."""
    own = getattr(span, "_cumulative_worker_metrics", None)
    if own is not None:
        return dict(own)
    # Dask only publishes subtree totals: take the children out again
    out = dict(span.cumulative_worker_metrics)
    out.pop(("execute", "N/A", "idle or other spans", "seconds"), None)
    for child in span.children:
        for key, value in child.cumulative_worker_metrics.items():
            if key in out:
                out[key] -= value
    return {k: v for k, v in out.items() if v}


def _setter(obj: Any, attr: str, value: Any) -> Callable[[], None]:
    return lambda: setattr(obj, attr, value)


def _item_setter(mapping: dict, key: Any, value: Any) -> Callable[[], None]:
    return lambda: mapping.__setitem__(key, value)
