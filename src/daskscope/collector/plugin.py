# ~450 lines: one guarded method per Dask hook and RPC handler; the work is in the parts.
"""The scheduler plugin that records a Dask cluster: Dask's hooks and daskscope's RPC
handlers, forwarded to the parts that do the work.

Hot hooks (``transition``, ``log_event``) only count and mark what changed: O(1). Every
hook is guarded: an error inside daskscope is logged and never reaches Dask.

The parts: :mod:`~daskscope.collector.tracking` (which computation ran which tasks),
:mod:`~daskscope.collector.spans` (which spans changed), :mod:`~daskscope.collector.
accounting` (threads and memory over time, peaks, totals), :mod:`~daskscope.collector.
events` (events and errors), :mod:`~daskscope.collector.roster` (workers coming, going
and sampled), :mod:`~daskscope.collector.lifecycle` (why workers left),
:mod:`~daskscope.collector.profiles` (the workers' profile),
:mod:`~daskscope.collector.flushing` (buffer, writer thread, retries),
:mod:`~daskscope.collector.sink` (where records go), and
:mod:`~daskscope.collector.dask_adapter` (Dask's private names).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from time import perf_counter
from typing import TYPE_CHECKING, Any

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.metrics import time

from daskscope.collector import dask_adapter
from daskscope.collector.accounting import Accounting, cluster_record, limits_before
from daskscope.collector.attempts import AttemptWatch
from daskscope.collector.destination import sink_for
from daskscope.collector.events import EventLog
from daskscope.collector.flushing import Flusher
from daskscope.collector.lifecycle import WorkerLifecycle
from daskscope.collector.profiles import LAST_TIMEOUT, ProfileWindows
from daskscope.collector.roster import WorkerRoster, wait_for_heartbeats
from daskscope.collector.sink import Sink
from daskscope.collector.spans import SpanTracker
from daskscope.collector.tracking import WorkTracker
from daskscope.config import CollectorSettings
from daskscope.model import ClusterRecord, Record, WorkerSampleRecord
from daskscope.tasklog.record import TaskLog

if TYPE_CHECKING:
    from distributed.scheduler import Scheduler, TaskState

__all__ = ["DaskscopePlugin"]

logger = logging.getLogger("daskscope")

#: Log the first few failures of each hook in full, then only count them.
_LOGGED_FAILURES_PER_HOOK = 3
#: where a task goes from "waiting" once its dependencies are in memory
_READY = frozenset({"processing", "queued", "no-worker"})


class DaskscopePlugin(SchedulerPlugin):
    """Records everything the scheduler knows about its work into a daskscope store.

    Attach with :func:`daskscope.register`, or with no code change through the scheduler
    preload ``daskscope`` (``distributed.scheduler.preload: [daskscope]``).
    """

    name = dask_adapter.RECORDER_NAME
    idempotent = True

    def __init__(self, settings: CollectorSettings | None = None, *, cluster_id: str | None = None):
        self.settings = settings or CollectorSettings.from_config()
        self.cluster_id = cluster_id or str(uuid.uuid4())
        self.hook_failures: dict[str, int] = {}
        #: why the recorder is not recording, if it could not start
        self.start_error: str | None = None
        #: Time of daskscope's own work on the scheduler's event loop outside the flushes
        #: (graph hooks, samples): the flushes count theirs in ``flusher.stats``
        self.loop_seconds = 0.0
        settings = self.settings
        self.tracker = WorkTracker(
            self.cluster_id,
            max_code_chars=settings.max_code_chars,
            progress_seconds=settings.progress_interval,
        )
        self.spans = SpanTracker(self.cluster_id, max_code_chars=settings.max_code_chars)
        self.events = EventLog(
            self.cluster_id,
            max_errors=settings.max_errors,
            max_traceback_chars=settings.max_traceback_chars,
            max_code_chars=settings.max_code_chars,
        )
        self.profiles = ProfileWindows(self.cluster_id, on_error=self._hook_failed)
        #: the worker's task-erred message being handled: a retried attempt's times
        self.attempts = AttemptWatch()
        self.task_log = (
            TaskLog(
                self.cluster_id,
                segment_executions=settings.task_segment_executions,
                max_pending_segments=settings.task_max_pending_segments,
                seal_after=settings.task_seal_after,
            )
            if settings.task_log_enabled
            else None
        )
        # The parts that need the scheduler: made by start()
        self.scheduler: Scheduler | None = None
        self.accounting: Accounting | None = None
        self.flusher: Flusher | None = None
        self.lifecycle: WorkerLifecycle | None = None
        self.roster: WorkerRoster | None = None
        self._tasks: dict[Any, TaskState] = {}
        self._started = False
        self._closing = False
        self._loops: list[asyncio.Task[None]] = []
        self._first_flush: asyncio.Task[int] | None = None

    # -- pickling: only the settings travel from the client to the scheduler --------------

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings, "cluster_id": self.cluster_id}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["settings"], cluster_id=state["cluster_id"])  # type: ignore[misc]

    def make_sink(self) -> Sink:
        settings = self.settings
        return sink_for(
            database=settings.database,
            server=settings.server,
            token=settings.token,
            spool_dir=settings.spool_dir,
        )

    @property
    def destination(self) -> str:
        """Where this recorder writes: the server's URL or the store's."""
        return self.settings.server or self.settings.database

    @property
    def recording(self) -> bool:
        return self.flusher is not None

    # -- what other parts of daskscope on the scheduler may ask -----------------------------

    def destination_info(self) -> dict[str, Any]:
        """The cluster's id and where its records go (a workflow run follows them)."""
        return {
            "cluster_id": self.cluster_id,
            "database": self.settings.database,
            "server": self.settings.server,
            "token": self.settings.token,
        }

    def worker_samples(self, max_age: float, *, after: float = 0.0) -> list[WorkerSampleRecord]:
        """A sample of every worker, at most ``max_age`` seconds old and taken after
        ``after``: the recorder's newest if it is, else taken now (only the recorder's own
        sampling rounds are stored)."""
        assert self.roster is not None, "the recorder is not recording"
        return self.roster.samples(max_age, after=after)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, scheduler: Scheduler) -> None:
        if self._started:  # add_plugin + start may both reach us; start once
            return
        self._started = True
        # Handlers first, so that a client can ask why recording did not start. A second
        # recorder added under another name must not take them over.
        dask_adapter.add_handlers(
            scheduler, {"daskscope_flush": self.handle_flush, "daskscope_info": self.handle_info}
        )
        try:
            self._start(scheduler)
        except Exception as exc:
            self.flusher = self.roster = self.lifecycle = None
            self.start_error = f"{type(exc).__name__}: {exc}"
            logger.error(
                "daskscope is NOT recording this cluster: it could not start (%s). "
                "Dask goes on; check the daskscope settings (docs/configuration.md).",
                self.start_error,
                exc_info=exc,
            )

    def _start(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        settings = self.settings
        now = time()
        cluster = cluster_record(scheduler, settings, self.cluster_id, now=now)
        # Threads before we were attached come from Dask's own history, the memory of
        # the workers here from their arrival in its event log
        self.accounting = Accounting(
            cluster,
            since=now,
            threads_before=scheduler.total_nthreads_history,
            limits_before=limits_before(scheduler, now),
        )
        self.accounting.refresh(scheduler.workers.values())
        self.lifecycle = WorkerLifecycle(scheduler)
        self.flusher = Flusher(
            scheduler=scheduler,
            sink=self.make_sink(),
            tracker=self.tracker,
            spans=self.spans,
            accounting=self.accounting,
            destination=self.destination,
            max_buffered_records=settings.max_buffered_records,
            on_error=self._hook_failed,
        )
        if self.task_log is not None:
            flusher = self.flusher
            self.task_log.attach(flusher.writer, lambda: flusher.sink)
        self.roster = WorkerRoster(
            scheduler,
            cluster_id=self.cluster_id,
            accounting=self.accounting,
            events=self.events,
            lifecycle=self.lifecycle,
            flusher=self.flusher,
        )
        started = self.events.event(
            "cluster-started", at=cluster.started_at, detail={"attached_at": now}
        )
        self.flusher.keep(started)
        for ws in scheduler.workers.values():
            self.roster.added(ws.address, at=now, detail={"present_when_attached": True})
        # A LocalCluster's close and ``cluster.scale()`` down retire workers through this
        # handler before any of them closes: the last moment their samples and profile
        # can be taken (a worker already closing no longer answers for its profile)
        dask_adapter.wrap_handler(scheduler, "retire_workers", self._take_last_words)
        # An attempt Dask retries reaches the transition hook without its times: they
        # are in the worker's task-erred message (collector/attempts.py)
        dask_adapter.watch_stream(scheduler, "task-erred", self.attempts.seen, self.attempts.done)
        self.flusher.open_sink()
        if self.task_log is not None:
            self.task_log.prepare()  # after the sink's opening: it comes first
        # The cluster's record goes out now, not at the first interval: a server takes
        # a cluster's other records (a workflow run that ends within seconds) once it
        # has it, and a scheduler that lives less than an interval is still recorded
        self._first_flush = asyncio.create_task(self.flush(every_task=False))
        self._loops = [
            asyncio.create_task(self._every(settings.flush_interval, self._periodic_flush)),
            asyncio.create_task(
                self._every(settings.worker_sampling_interval, self._sample_workers_async)
            ),
        ]
        self.profiles.since = now
        if settings.profile_enabled:
            self._loops.append(
                asyncio.create_task(self._every(settings.profile_interval, self._collect_profile))
            )
        self._tasks = scheduler.tasks  # last: the transition hook counts from now on

    async def _take_last_words(self) -> None:
        try:
            self._workers_leaving("*")
            await self.profiles.last_taken(shield=True)
        except Exception as exc:
            self._hook_failed("retire_workers", exc)

    async def before_close(self) -> None:
        """Last words: profile, samples, the workers still here, everything."""
        if self.flusher is None or self._closing:
            return
        self._closing = True
        assert self.scheduler is not None and self.accounting is not None
        assert self.roster is not None
        try:
            for loop in self._loops:
                loop.cancel()
            await self._first_flush_done()
            await self.profiles.last_taken()
            if self.settings.profile_enabled:
                await self.profiles.collect_into(
                    self.scheduler, self.flusher.add, LAST_TIMEOUT, last=True
                )
            self._sample_workers()
            now = time()
            # Dask drops the workers of a closing scheduler without calling the plugins'
            # remove_worker (e.g. `dask scheduler` stopped with Ctrl-C): they leave now.
            for address in list(self.scheduler.workers):
                self.roster.removed(
                    address, at=now, reason="closed", msg={}, stimulus_id=None, with_cluster=True
                )
            self.flusher.keep(self.events.event("cluster-closed", at=now))
            self.accounting.stopped(now)
            self.flusher.unpaced = True  # the last flush writes every span
            self.spans.closing = True  # with the states Dask's spans end with
            await asyncio.wait_for(self.flush(), timeout=60)
        except Exception as exc:
            self._hook_failed("before_close", exc)

    async def _first_flush_done(self) -> None:
        """The last flush comes after the first (a scheduler closed as it starts): its
        records are not written out of order, nor after the sink is closed."""
        first = self._first_flush
        if first is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(first), timeout=60)
        except Exception as exc:
            self._hook_failed("first flush", exc)

    async def close(self) -> None:
        if self.flusher is None:
            return
        await self.before_close()  # a no-op when Dask already called it
        try:
            await self.flusher.close_sink(timeout=60)
        except Exception as exc:
            self._hook_failed("close", exc)

    def restart(self, scheduler: Scheduler) -> None:
        if self.flusher is None:
            return
        try:
            assert self.lifecycle is not None
            self.lifecycle.restarting(expected_workers=len(scheduler.workers))
            self.tracker.finish_all()
            self.flusher.keep(self.events.event("cluster-restarted", at=time()))
        except Exception as exc:
            self._hook_failed("restart", exc)

    # -- hot hooks -----------------------------------------------------------------------

    def transition(
        self, key: Any, start: str, finish: str, *args: Any, stimulus_id: Any = None, **kwargs: Any
    ) -> None:
        # Dask names stimulus_id: taken apart from kwargs, the calls filtered here (five
        # or six of about seven a task) make no dict entry for it
        if start != "processing":
            if finish == "forgotten":
                try:
                    ts = self._tasks.get(key)
                    if ts is not None:
                        self.tracker.task_forgotten(ts)
                    if self.task_log is not None:
                        self.task_log.task_forgotten(key)
                except Exception as exc:
                    self._hook_failed("transition", exc)
            elif start == "waiting" and finish in _READY and self.task_log is not None:
                try:
                    self.task_log.task_ready(key, stimulus_id)
                except Exception as exc:
                    self._hook_failed("transition", exc)
            return
        kwargs["stimulus_id"] = stimulus_id  # the parts below read it with the rest
        try:
            if finish == "memory":
                ts = self._tasks.get(key)
                if ts is not None:
                    use = self.tracker.task_finished(ts, kwargs)
                    if self.task_log is not None:
                        track = use.computation
                        computation_id = track.record_id if track is not None else None
                        self.task_log.task_done(key, ts, kwargs, computation_id, erred=False)
            elif finish == "erred":
                ts = self._tasks.get(key)
                if ts is not None:
                    self._task_erred(key, ts, kwargs)
            elif finish == "released" and self.attempts.message is not None:
                message = self.attempts.retried(key, stimulus_id)
                ts = self._tasks.get(key)
                if message is not None and ts is not None:
                    self._attempt_retried(key, ts, message)
        except Exception as exc:
            self._hook_failed("transition", exc)

    def update_graph(self, scheduler: Scheduler, *, tasks: Any = (), **kwargs: Any) -> None:
        if self.flusher is None:
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
        if self.flusher is None:
            return
        try:
            assert self.lifecycle is not None and self.roster is not None
            self.lifecycle.added(worker)
            self.lifecycle.arrived(len(scheduler.workers))
            self.roster.added(worker, at=time())
        except Exception as exc:
            self._hook_failed("add_worker", exc)

    def remove_worker(self, scheduler: Scheduler, worker: str, **kwargs: Any) -> None:
        if self.flusher is None:
            return
        try:
            assert self.lifecycle is not None and self.roster is not None
            msg = self.lifecycle.removal_message(worker)
            reason = self.lifecycle.reason(worker, msg, closing=self._closing)
            stimulus_id = kwargs.get("stimulus_id", msg.get("stimulus_id"))
            self.roster.removed(worker, at=time(), reason=reason, msg=msg, stimulus_id=stimulus_id)
        except Exception as exc:
            self._hook_failed("remove_worker", exc)

    # -- bookkeeping -------------------------------------------------------------------

    def _task_erred(self, key: Any, ts: TaskState, kwargs: dict[str, Any]) -> None:
        use = self.tracker.task_erred(ts, kwargs)
        if self.task_log is not None:
            track = use.computation
            computation_id = track.record_id if track is not None else None
            self.task_log.task_done(key, ts, kwargs, computation_id, erred=True)
        record = self.events.error(key, ts, use.record_id, kwargs, at=time())
        if record is not None:
            assert self.flusher is not None
            self.flusher.keep(record)

    def _attempt_retried(self, key: Any, ts: TaskState, message: Mapping[str, Any]) -> None:
        """An attempt of ``ts`` failed and Dask runs it again (the worker's task-erred
        ``message`` says when, where and why): kept in its group's durations, the task
        log and the errors, as Dask keeps it nowhere."""
        use = self.tracker.attempt_retried(ts, message.get("startstops") or ())
        if self.task_log is not None:
            track = use.computation
            computation_id = track.record_id if track is not None else None
            self.task_log.task_retried(key, ts, message, computation_id)
        record = self.events.error(key, ts, use.record_id, message, at=time())
        if record is not None:
            assert self.flusher is not None
            self.flusher.keep(record)

    def _workers_leaving(self, worker: str) -> None:
        """Workers are about to leave (``"*"``: some, not yet known which; else the one
        that said it is closing): sample them while they are here, and take the last
        profile while they can still answer."""
        assert self.roster is not None and self.scheduler is not None
        assert self.flusher is not None
        self.roster.leaving(worker)
        if self.settings.profile_enabled:
            self.profiles.take_last(self.scheduler, self.flusher.add)

    # -- periodic work -------------------------------------------------------------------

    async def _every(self, interval: float, action: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await action()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._hook_failed(getattr(action, "__name__", "loop"), exc)

    def _sample_workers(self) -> None:
        assert self.roster is not None
        started = perf_counter()
        self.roster.sample()
        self.loop_seconds += perf_counter() - started

    async def _sample_workers_async(self) -> None:
        self._sample_workers()

    async def _collect_profile(self) -> None:
        assert self.scheduler is not None and self.flusher is not None
        await self.profiles.collect_into(self.scheduler, self.flusher.add)

    async def flush(self, *, every_task: bool = True) -> int:
        """Write everything that changed since the last successful write; returns the
        number of records written. ``every_task=False`` (the periodic flush) may leave a
        small task-log buffer for a later segment."""
        if self.flusher is None:
            return 0
        written = await self.flusher.flush()
        if self.task_log is not None:  # after the cluster's record: a server needs it first
            written += await self.task_log.flush(every_task=every_task)
        return written

    async def _periodic_flush(self) -> int:
        return await self.flush(every_task=False)

    def write_all_again(self) -> None:
        """Make the next flush write everything the recorder holds, as if none of it had
        been written."""
        if self.flusher is not None:
            self.flusher.write_all_again()

    # -- handlers (called by the client through the scheduler's RPC) ----------------------

    async def handle_flush(
        self, wait_for_metrics: bool = True, timeout: float = 10.0
    ) -> dict[str, Any]:
        """Write everything now; first wait until every worker has sent two heartbeats
        after this call, so that the fine metrics of finished tasks have arrived."""
        if self.flusher is None:
            return {"written": 0, **self.handle_info()}
        if wait_for_metrics:
            assert self.scheduler is not None
            await wait_for_heartbeats(self.scheduler, timeout)
        self._sample_workers()
        if self.settings.profile_enabled:
            await self._collect_profile()
        self.flusher.unpaced = True
        try:
            written = await self.flush()
        finally:
            self.flusher.unpaced = self._closing  # the last flush at close stays unpaced
        return {"written": written, **self.handle_info()}

    def handle_info(self) -> dict[str, Any]:
        flusher = self.flusher
        task_log = self.task_log.status() if self.task_log is not None else {}
        status = flusher.status() if flusher is not None else Flusher.idle_status()
        # the writer thread's CPU: the flushes' writes and the task log's segments
        status["writer_cpu_seconds"] += task_log.get("task_log_writer_cpu_seconds", 0.0)
        return {
            "cluster_id": self.cluster_id,
            "recording": self.recording,
            "start_error": self.start_error,
            "database": self.settings.database,
            "destination": self.destination,
            **status,
            # the flushes' time on the event loop, and the hooks' and samples'
            "loop_seconds": self.loop_seconds + (flusher.stats.loop_seconds if flusher else 0.0),
            "hook_failures": dict(self.hook_failures),
            "profile_samples_left_out": self.profiles.samples_left_out,
            **task_log,
        }

    # -- failure handling ----------------------------------------------------------------

    def _hook_failed(self, hook: str, exc: BaseException) -> None:
        count = self.hook_failures[hook] = self.hook_failures.get(hook, 0) + 1
        if count <= _LOGGED_FAILURES_PER_HOOK:
            logger.error("daskscope: %s hook failed; Dask goes on", hook, exc_info=exc)

    # -- for tests that reach into the recorder's parts --------------------------------

    @property
    def _sink(self) -> Any:
        return self.flusher.sink if self.flusher is not None else None

    @_sink.setter
    def _sink(self, sink: Any) -> None:
        assert self.flusher is not None
        self.flusher.sink = sink

    @property
    def _buffer(self) -> list[Record]:
        return self.flusher.buffer if self.flusher is not None else []

    @property
    def _cluster(self) -> ClusterRecord | None:
        return self.accounting.cluster if self.accounting is not None else None
