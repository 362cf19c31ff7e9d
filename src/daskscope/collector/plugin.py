"""The scheduler plugin that records a Dask cluster.

Hot hooks (``transition``, ``log_event``) only count and mark what changed: O(1). A
flush, every few seconds, turns only what changed into records on the event loop (the
scheduler's objects are not thread-safe), in slices so that the loop is never held for
long, and hands them to one writer thread. Every hook is guarded: an error inside
daskscope is logged and never reaches Dask.

The parts: :mod:`~daskscope.collector.tracking` (which computation ran which tasks),
:mod:`~daskscope.collector.lifecycle` (why workers left),
:mod:`~daskscope.collector.capacity` (threads and memory over time),
:mod:`~daskscope.collector.writer` (the writer thread), :mod:`~daskscope.collector.sink`
(where records go).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import platform
import uuid
from collections.abc import Hashable
from dataclasses import dataclass
from time import perf_counter, thread_time
from typing import TYPE_CHECKING, Any

import dask
import distributed
import distributed.profile
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.metrics import time

from daskscope.collector import snapshot
from daskscope.collector.capacity import Capacity, threads_integral
from daskscope.collector.lifecycle import WorkerLifecycle
from daskscope.collector.sink import Sink, StoreLost, StoreSink
from daskscope.collector.tracking import ComputationTrack, GroupUse, WorkTracker
from daskscope.collector.workers import worker_sample
from daskscope.collector.writer import WriterThread
from daskscope.config import CollectorSettings
from daskscope.model import (
    ClusterRecord,
    ErrorRecord,
    EventRecord,
    ProfileRecord,
    Record,
    SpanRecord,
    WorkerSampleRecord,
    stable_id,
)
from daskscope.wire import MAX_PROFILE_DEPTH

if TYPE_CHECKING:
    from distributed.scheduler import Scheduler

__all__ = ["DaskscopePlugin", "own_metrics"]

logger = logging.getLogger("daskscope")

#: Log the first few failures of each hook in full, then only count them.
_LOGGED_FAILURES_PER_HOOK = 3
#: Changed task groups turned into records per slice of a flush; the event loop is
#: given back between slices (a few milliseconds each).
_GROUPS_PER_SLICE = 200
#: A finished span's fine metrics still arrive with the workers' next heartbeats: keep
#: comparing them for this long after it finished.
_SPAN_SETTLE_SECONDS = 30.0
#: How long a worker may take to send its profile window (a leaving worker: less)
_PROFILE_TIMEOUT = 10.0
_LAST_PROFILE_TIMEOUT = 3.0
#: A span record costing t seconds of event loop is taken at most every t times this (a
#: 125 ms record of a 20,000-group span: every 6 s; a 50 µs one: every flush)
_SPAN_PACING = 50


@dataclass(slots=True)
class _SpanTrack:
    own_metrics: dict[tuple[Hashable, ...], float]
    done: bool
    written_at: float


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
        #: why the recorder is not recording, if it could not start
        self.start_error: str | None = None
        #: Time of daskscope's own work on the scheduler's event loop (graph hooks,
        #: snapshots, samples) and CPU time of its writer thread: what it costs besides
        #: the transition hook
        self.loop_seconds = 0.0
        self.writer_cpu_seconds = 0.0
        self.tracker = WorkTracker(self.cluster_id, max_code_chars=self.settings.max_code_chars)
        self._spans: dict[str, _SpanTrack] = {}
        #: Dask computes a span's states and durations over every task group it ever had:
        #: a big span's record is taken again only after a pause of _SPAN_PACING times
        #: what it cost last time; what changed meanwhile waits here for its turn
        self._span_due: dict[str, float] = {}
        self._spans_waiting: set[str] = set()
        self._unpaced = False  # a flush the user asked for writes every span now
        self._buffer: list[Record] = []
        #: lifecycle events and errors, kept to write again into a store that was lost
        self._history: list[Record] = []
        self._errors_kept = 0
        self._started = False
        self._closing = False
        self._loops: list[asyncio.Task] = []
        self._flush_lock: asyncio.Lock | None = None
        self._profile_from = 0.0
        self._last_words: asyncio.Task | None = None
        self.scheduler: Scheduler | None = None
        self._sink: Sink | None = None
        self._writer: WriterThread | None = None
        self._cluster: ClusterRecord | None = None
        self._capacity: Capacity | None = None
        self.lifecycle: WorkerLifecycle | None = None

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

    @property
    def destination(self) -> str:
        """Where this recorder writes: the server's URL or the store's."""
        return self.settings.server or self.settings.database

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, scheduler: Scheduler) -> None:
        if self._started:  # add_plugin + start may both reach us; start once
            return
        self._started = True
        # Handlers first, so that a client can ask why recording did not start. A second
        # recorder added under another name must not take them over.
        scheduler.handlers.setdefault("daskscope_flush", self.handle_flush)
        scheduler.handlers.setdefault("daskscope_info", self.handle_info)
        try:
            self._start(scheduler)
        except Exception as exc:
            self.start_error = f"{type(exc).__name__}: {exc}"
            logger.error(
                "daskscope is NOT recording this cluster: it could not start (%s). "
                "Dask goes on; check the daskscope settings (docs/configuration.md).",
                self.start_error,
                exc_info=exc,
            )

    def _start(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._tasks = scheduler.tasks
        self._sink = self.make_sink()
        self._writer = WriterThread()
        self._flush_lock = asyncio.Lock()
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
        self._cluster.core_seconds = threads_integral(scheduler.total_nthreads_history, now)
        self._capacity = Capacity(self._cluster, since=now)
        self._capacity.refresh(scheduler.workers.values())
        self.lifecycle = WorkerLifecycle(scheduler)
        self._event("cluster-started", at=started_at, detail={"attached_at": now})
        for ws in scheduler.workers.values():
            self._worker_added(ws.address, at=now, detail={"present_when_attached": True})

        self._wrap_retire_workers(scheduler)
        # Open the store (imports, schema check) in the writer thread now, not during the
        # first flush in the middle of the user's work; a failure shows at the first write.
        self._writer.submit(self._sink.open)
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

    def _wrap_retire_workers(self, scheduler: Scheduler) -> None:
        """A LocalCluster's close and ``cluster.scale()`` down retire workers through the
        scheduler's ``retire_workers`` handler before any of them closes: the last moment
        their samples and profile can be taken. (A worker that is already closing no
        longer answers for its profile.)"""
        original = scheduler.handlers.get("retire_workers")
        if original is None or getattr(original, "_daskscope", False):
            return

        async def retire_workers(*args: Any, **kwargs: Any) -> Any:
            await self._take_last_words()
            return await original(*args, **kwargs)

        retire_workers._daskscope = True  # type: ignore[attr-defined]
        scheduler.handlers["retire_workers"] = retire_workers

    async def _take_last_words(self) -> None:
        try:
            self._workers_leaving("*")
            if self._last_words is not None:
                await asyncio.wait_for(
                    asyncio.shield(self._last_words), timeout=_LAST_PROFILE_TIMEOUT + 1
                )
        except Exception as exc:
            self._hook_failed("retire_workers", exc)

    @property
    def recording(self) -> bool:
        return self._cluster is not None

    async def before_close(self) -> None:
        """Last words: profile, samples, the workers still here, everything."""
        if not self.recording or self._closing:
            return
        self._closing = True
        try:
            for loop in self._loops:
                loop.cancel()
            if self._last_words is not None:
                await asyncio.wait_for(self._last_words, timeout=_LAST_PROFILE_TIMEOUT + 1)
            if self.settings.profile_enabled:
                await self._collect_profile(_LAST_PROFILE_TIMEOUT)
            self._sample_workers()
            now = time()
            # Dask drops the workers of a closing scheduler without calling the plugins'
            # remove_worker (e.g. `dask scheduler` stopped with Ctrl-C): they leave now.
            assert self.scheduler is not None and self.lifecycle is not None
            for address in list(self.scheduler.workers):
                self._worker_removed(address, at=now, reason="closed", msg={}, with_cluster=True)
            self._event("cluster-closed", at=now)
            assert self._cluster is not None
            self._cluster.stopped_at = now
            await asyncio.wait_for(self.flush(), timeout=60)
        except Exception as exc:
            self._hook_failed("before_close", exc)

    async def close(self) -> None:
        if not self.recording:
            return
        await self.before_close()  # a no-op when Dask already called it
        try:
            assert self._writer is not None and self._sink is not None
            # Wait for the sink's close: a server sink makes its last delivery try there,
            # and a `dask scheduler` process may exit as soon as this returns
            closing = self._writer.submit(self._sink.close)
            self._writer.shutdown()
            await asyncio.wait_for(asyncio.wrap_future(closing), timeout=60)
        except Exception as exc:
            self._hook_failed("close", exc)

    def restart(self, scheduler: Scheduler) -> None:
        if not self.recording:
            return
        try:
            assert self.lifecycle is not None
            self.lifecycle.restarting(expected_workers=len(scheduler.workers))
            self.tracker.finish_all()
            self._event("cluster-restarted", at=time())
        except Exception as exc:
            self._hook_failed("restart", exc)

    # -- hot hooks -----------------------------------------------------------------------

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if start != "processing":
            if finish == "forgotten":
                try:
                    ts = self._tasks.get(key)
                    if ts is not None:
                        self.tracker.task_forgotten(ts)
                except Exception as exc:
                    self._hook_failed("transition", exc)
            return
        try:
            if finish == "memory":
                ts = self._tasks.get(key)
                if ts is not None:
                    self.tracker.task_finished(ts, kwargs)
            elif finish == "erred":
                ts = self._tasks.get(key)
                if ts is not None:
                    self._task_erred(key, ts, kwargs)
        except Exception as exc:
            self._hook_failed("transition", exc)

    def update_graph(self, scheduler: Scheduler, *, tasks: Any = (), **kwargs: Any) -> None:
        if not self.recording:
            return
        started = perf_counter()
        try:
            self.tracker.graph_updated(scheduler, tasks or kwargs.get("keys") or ())
        except Exception as exc:
            self._hook_failed("update_graph", exc)
        self.loop_seconds += perf_counter() - started

    def log_event(self, topic: str, msg: Any) -> None:
        if not isinstance(msg, dict) or self.lifecycle is None:
            return
        try:
            leaving = self.lifecycle.observe(topic, msg)
            if leaving is not None:
                self._workers_leaving(leaving)
        except Exception as exc:
            self._hook_failed("log_event", exc)

    def add_worker(self, scheduler: Scheduler, worker: str) -> None:
        if not self.recording:
            return
        try:
            assert self.lifecycle is not None
            self.lifecycle.added(worker)
            self.lifecycle.arrived(len(scheduler.workers))
            self._worker_added(worker, at=time())
        except Exception as exc:
            self._hook_failed("add_worker", exc)

    def remove_worker(self, scheduler: Scheduler, worker: str, **kwargs: Any) -> None:
        if not self.recording:
            return
        try:
            assert self.lifecycle is not None
            msg = self.lifecycle.removal_message(worker)
            reason = self.lifecycle.reason(worker, msg, closing=self._closing)
            self._worker_removed(worker, at=time(), reason=reason, msg=msg, **kwargs)
        except Exception as exc:
            self._hook_failed("remove_worker", exc)

    # -- bookkeeping -------------------------------------------------------------------

    def _task_erred(self, key: Any, ts: Any, kwargs: dict[str, Any]) -> None:
        use = self.tracker.task_erred(ts, kwargs)
        if self._errors_kept >= self.settings.max_errors:
            return
        self._errors_kept += 1
        traceback_text = kwargs.get("traceback_text") or ""
        limit = self.settings.max_traceback_chars
        if len(traceback_text) > limit:
            traceback_text = "…" + traceback_text[-limit:]  # the innermost frames matter most
        self._keep(
            ErrorRecord(
                id=stable_id(self.cluster_id, "error", key, self._errors_kept),
                cluster_id=self.cluster_id,
                key=str(key),
                at=time(),
                group=ts.group.name,
                prefix=ts.prefix.name,
                group_id=use.record_id,
                worker=kwargs.get("worker"),
                exception=(kwargs.get("exception_text") or "")[: self.settings.max_code_chars],
                traceback=traceback_text,
            )
        )

    def _keep(self, record: Record) -> None:
        """An event or error: buffered for the next write, and kept for a lost store."""
        self._buffer.append(record)
        if len(self._history) < self.settings.max_buffered_records:
            self._history.append(record)

    def _event(
        self, kind: str, *, at: float, worker: str | None = None, detail: dict | None = None
    ) -> None:
        self._keep(
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
        assert self._capacity is not None and self.scheduler is not None
        self._capacity.advance(at)
        self._capacity.refresh(self.scheduler.workers.values())
        ws = self.scheduler.workers.get(worker)
        info = dict(detail or {})
        if ws is not None:
            info.update(nthreads=ws.nthreads, memory_limit=ws.memory_limit, name=str(ws.name))
        self._event("worker-added", at=at, worker=worker, detail=info)

    def _worker_removed(
        self,
        worker: str,
        *,
        at: float,
        reason: str,
        msg: dict[str, Any],
        with_cluster: bool = False,
        **kwargs: Any,
    ) -> None:
        assert self._capacity is not None and self.scheduler is not None
        assert self.lifecycle is not None
        if not self.lifecycle.mark_removed(worker):
            return  # already recorded (e.g. at the scheduler's close)
        self._capacity.advance(at)
        remaining = [ws for addr, ws in self.scheduler.workers.items() if addr != worker]
        self._capacity.refresh(remaining)
        detail = {
            "reason": reason,
            "expected": bool(msg.get("expected", False)),
            "stimulus_id": kwargs.get("stimulus_id", msg.get("stimulus_id")),
            "processing_tasks": len(msg.get("processing-tasks", ()) or ()),
            "lost_computed_tasks": len(msg.get("lost-computed-tasks", ()) or ()),
            "lost_scattered_tasks": len(msg.get("lost-scattered-tasks", ()) or ()),
        }
        if with_cluster:
            detail["with_cluster"] = True
        self._event("worker-removed", at=at, worker=worker, detail=detail)

    def _workers_leaving(self, worker: str) -> None:
        """Workers are about to leave (``"*"``: some, not yet known which; else the one
        that said it is closing): sample them while they are here, and take the last
        profile while they can still answer."""
        assert self.scheduler is not None
        now = time()
        leaving = self.scheduler.workers.values() if worker == "*" else ()
        if worker != "*" and worker in self.scheduler.workers:
            leaving = (self.scheduler.workers[worker],)
        for ws in leaving:
            self._buffer.append(worker_sample(ws, cluster_id=self.cluster_id, at=now))
        if self.settings.profile_enabled and (self._last_words is None or self._last_words.done()):
            self._last_words = asyncio.ensure_future(
                self._collect_profile_guarded(timeout=_LAST_PROFILE_TIMEOUT)
            )

    # -- periodic work -------------------------------------------------------------------

    async def _every(self, interval: float, action: Any) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await action()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._hook_failed(getattr(action, "__name__", "loop"), exc)

    def _sample_workers(self) -> None:
        assert self._capacity is not None and self.scheduler is not None
        started = perf_counter()
        now = time()
        self._capacity.advance(now)
        for ws in self.scheduler.workers.values():
            self._buffer.append(worker_sample(ws, cluster_id=self.cluster_id, at=now))
        self.loop_seconds += perf_counter() - started

    async def _sample_workers_async(self) -> None:
        self._sample_workers()

    async def _collect_profile_guarded(self, timeout: float) -> None:
        try:
            await self._collect_profile(timeout)
        except Exception as exc:
            self._hook_failed("profile", exc)

    async def _collect_profile(self, timeout: float = _PROFILE_TIMEOUT) -> None:
        """The workers' merged profile since the last window. Each worker is asked on its
        own, with a timeout: a worker on its way out must not hold the others back."""
        assert self.scheduler is not None
        start, stop = self._profile_from, time()
        workers = list(self.scheduler.workers)
        if not workers or stop - start < 0.05:
            return
        self._profile_from = stop  # the next window starts here, whatever comes back

        async def one(address: str) -> Any:
            return await asyncio.wait_for(
                self.scheduler.rpc(address).profile(start=start, stop=stop), timeout
            )

        answers = await asyncio.gather(*map(one, workers), return_exceptions=True)
        trees = [t for t in answers if isinstance(t, dict)]
        tree = distributed.profile.merge(*trees) if trees else None
        if tree and tree.get("count"):
            # the store and the server take trees of bounded depth
            snapshot.prune_profile(tree, MAX_PROFILE_DEPTH)
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
        """Write everything that changed since the last successful write; returns the
        number of records written."""
        if not self.recording:
            return 0
        assert self._flush_lock is not None
        async with self._flush_lock:
            return await self._flush()

    async def _flush(self) -> int:
        assert self._capacity is not None and self._cluster is not None
        assert self.scheduler is not None and self._writer is not None
        tracker = self.tracker
        started = perf_counter()
        self._capacity.advance(time())
        records: list[Record] = []
        dirty = list(tracker.dirty)
        tracker.dirty = set()
        spans: set[str] = set()
        finished: list[GroupUse] = []
        computations: set[ComputationTrack] = set()
        prefixes: set[str] = set()
        try:
            for first in range(0, len(dirty), _GROUPS_PER_SLICE):
                if first:  # give the event loop back between slices
                    self.loop_seconds += perf_counter() - started
                    await asyncio.sleep(0)
                    started = perf_counter()
                touched, done = tracker.snapshot_groups(
                    dirty[first : first + _GROUPS_PER_SLICE], self.scheduler, records
                )
                spans |= touched
                finished += done
            computations, tracker.dirty_computations = tracker.dirty_computations, set()
            done_computations = []
            for track in computations:
                record, done = tracker.computation_record(track)
                records.append(record)
                if done and track is not tracker.newest:
                    done_computations.append(track)
            prefixes, tracker.dirty_prefixes = tracker.dirty_prefixes, set()
            records += tracker.prefix_records(prefixes)
            span_tracks = self._snapshot_spans(spans, records)
        except Exception as exc:  # a bug here must not stop the buffered records
            self._hook_failed("snapshot", exc)
            tracker.dirty.update(dirty)
            span_tracks, done_computations, finished = {}, [], []
        totals = tracker.totals
        cluster = self._cluster
        cluster.tasks_executed = totals.executed
        cluster.tasks_erred = totals.erred
        cluster.bytes_processed = totals.nbytes
        cluster.compute_seconds = totals.durations.get("compute", 0.0)
        records.append(dataclasses.replace(cluster))
        records += self._buffer
        self._buffer = []
        self.loop_seconds += perf_counter() - started
        try:
            await asyncio.wrap_future(self._writer.submit(self._timed_write, records))
        except StoreLost as exc:
            self._store_lost(exc)
            return 0
        except Exception as exc:
            # everything snapshotted is taken again next time
            tracker.dirty.update(dirty)
            tracker.dirty_computations |= computations
            tracker.dirty_prefixes |= prefixes
            self._write_failed(exc, [r for r in records if self._is_append_only(r)])
            return 0
        tracker.drop(finished)
        tracker.computations_written(done_computations)
        self._spans.update(span_tracks)
        self.records_written += len(records)
        self.last_write_error = None
        return len(records)

    def _timed_write(self, records: list[Record]) -> None:
        """The sink's write, in the writer thread, counting that thread's CPU time."""
        assert self._sink is not None
        started = thread_time()
        try:
            self._sink.write(records)
        finally:
            self.writer_cpu_seconds += thread_time() - started

    @staticmethod
    def _is_append_only(record: Record) -> bool:
        return isinstance(record, (ErrorRecord, EventRecord, ProfileRecord, WorkerSampleRecord))

    def _write_failed(self, exc: Exception, unwritten: list[Record]) -> None:
        # Append-only records go back to the buffer, within its bound (oldest first out)
        self.write_failures += 1
        self.last_write_error = f"{type(exc).__name__}: {exc}"
        if self.write_failures <= _LOGGED_FAILURES_PER_HOOK:
            logger.warning(
                "daskscope could not write to %s: %s (kept in memory; will retry)",
                self.destination,
                exc,
            )
        self._buffer[:0] = unwritten
        overflow = len(self._buffer) - self.settings.max_buffered_records
        if overflow > 0:
            del self._buffer[:overflow]
            self.records_dropped += overflow

    def _store_lost(self, exc: Exception) -> None:
        """The store went away (e.g. its file was deleted) and the sink made a new one:
        write again everything still known — the cluster, its live groups, computations,
        prefixes and spans, and every event and error."""
        self.write_failures += 1
        self.last_write_error = f"{type(exc).__name__}: {exc}"
        logger.warning(
            "daskscope: %s; writing again what this cluster's recorder still holds "
            "(task groups already finished survive only in the totals)",
            exc,
        )
        self.write_all_again()
        kept = {id(r) for r in self._history}
        self._buffer = list(self._history) + [r for r in self._buffer if id(r) not in kept]

    def write_all_again(self) -> None:
        """Make the next flush write every live group, computation, prefix and span,
        as if none had been written."""
        tracker = self.tracker
        tracker.dirty.update(tracker.current.values())
        tracker.dirty_computations.update(tracker.computations.values())
        tracker.dirty_prefixes.update(tracker.prefix_groups)
        self._spans.clear()

    def _snapshot_spans(self, changed: set[str], records: list[Record]) -> dict[str, _SpanTrack]:
        """Records of the spans whose groups, states or fine metrics changed; returns
        what to remember of them once written."""
        assert self.scheduler is not None
        extension = self.scheduler.extensions.get("spans")
        if extension is None:
            return {}
        spans = extension.spans
        # A span's states and durations cover its subtree: a change shows in the ancestors
        for span_id in list(changed):
            span = spans.get(span_id)
            while span is not None:
                changed.add(span.id)
                span = span.parent
        changed |= self._spans_waiting
        self._spans_waiting = set()
        now = time()
        out: dict[str, _SpanTrack] = {}
        for span_id, span in list(spans.items()):
            paced = not (self._closing or self._unpaced)
            if paced and self._span_due.get(span_id, 0.0) > now:
                if span_id in changed or span_id not in self._spans:
                    self._spans_waiting.add(span_id)
                continue
            track = self._spans.get(span_id)
            settled = (
                track is not None and track.done and now - track.written_at > _SPAN_SETTLE_SECONDS
            )
            if settled and span_id not in changed:
                continue
            own = own_metrics(span)
            metrics_changed = track is None or own != track.own_metrics
            if not (metrics_changed or span_id in changed or track is None or not track.done):
                continue
            started = perf_counter()
            record: SpanRecord = snapshot.span_record(
                span, cluster_id=self.cluster_id, max_code_chars=self.settings.max_code_chars
            )
            self._span_due[span_id] = now + (perf_counter() - started) * _SPAN_PACING
            records.append(record)
            if metrics_changed:
                records.extend(
                    snapshot.span_metric_records(span_id, own, cluster_id=self.cluster_id)
                )
            written_at = track.written_at if track and track.done and not metrics_changed else now
            out[span_id] = _SpanTrack(dict(own), record.done, written_at)
        return out

    # -- handlers (called by the client through the scheduler's RPC) ----------------------

    async def handle_flush(
        self, wait_for_metrics: bool = True, timeout: float = 10.0
    ) -> dict[str, Any]:
        """Write everything now; first wait until every worker has sent two heartbeats
        after this call, so that the fine metrics of finished tasks have arrived."""
        if not self.recording:
            return {"written": 0, **self.handle_info()}
        if wait_for_metrics:
            await self._wait_for_heartbeats(timeout)
        self._sample_workers()
        if self.settings.profile_enabled:
            await self._collect_profile()
        self._unpaced = True
        try:
            written = await self.flush()
        finally:
            self._unpaced = False
        return {"written": written, **self.handle_info()}

    def handle_info(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "recording": self.recording,
            "start_error": self.start_error,
            "database": self.settings.database,
            "destination": self.destination,
            "records_written": self.records_written,
            "write_failures": self.write_failures,
            "last_write_error": self.last_write_error,
            "records_dropped": self.records_dropped,
            # a server sink's delivery counts (the direct store sink has none)
            "spooled": getattr(self._sink, "spooled", 0),
            "delivered_batches": getattr(self._sink, "delivered_batches", None),
            "rejected_batches": getattr(self._sink, "rejected_batches", None),
            # records a store refused one by one (the rest of their batch was written)
            "rejected_records": getattr(self._sink, "rejected_records", 0),
            "loop_seconds": self.loop_seconds,
            "writer_cpu_seconds": self.writer_cpu_seconds,
            "hook_failures": dict(self.hook_failures),
        }

    async def _wait_for_heartbeats(self, timeout: float) -> None:
        assert self.scheduler is not None
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
