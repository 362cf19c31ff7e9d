"""The scheduler half of the Dask backend: chunk routing and worker tracking.

The functions at the bottom run inside the scheduler (``client.run_on_scheduler``).
They install one small :class:`WorkflowSchedulerPlugin` whose ``log_event`` hook routes
every chunk record to the collector it names (the route stamped on the processor), else
to the collector whose span contains the task's span; a collector nested in another
passes its records on to its parents. A sampler per collector records the workers every
``interval`` seconds, on the scheduler's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.metrics import time

from daskscope.collector import dask_adapter
from daskscope.collector.workers import worker_sample
from daskscope.model import WorkerSampleRecord
from daskscope.workflow.tracking import CHUNK_TOPIC

if TYPE_CHECKING:
    from daskscope.collector.plugin import DaskscopePlugin

__all__ = ["WorkflowSchedulerPlugin", "finish_run", "span_metrics", "start_run"]

logger = logging.getLogger("daskscope")
PLUGIN_NAME = "daskscope-workflow"


@dataclass
class _Run:
    collector_id: str
    span_id: str
    interval: float
    #: enclosing collectors (innermost first): they receive this run's chunks too
    parents: list[str] = field(default_factory=list)
    chunks: list[dict[str, Any]] = field(default_factory=list)
    samples: dict[str, Any] = field(default_factory=dict)
    task: asyncio.Task[Any] | None = None
    #: own metrics, at the start, of every other span holding a live task group: new
    #: tasks of the same group join that span (distributed's TaskGroup collision)
    foreign: dict[str, dict[tuple[Any, ...], float]] = field(default_factory=dict)
    #: the Dask client that runs the collector (None: any client's graphs count)
    client_id: str | None = None
    #: spans outside this run's own that its tasks were seen joining: a graph of the
    #: run's client added tasks to a task group that already lived on such a span. Only
    #: these spans' growth can be this run's work (a foreign span that merely grows,
    #: e.g. the enclosing run's own tasks finishing, is not)
    joined: set[str] = field(default_factory=set)


def _empty_series() -> dict[str, Any]:
    return {
        "time": [],
        "workers": [],
        "threads": [],
        "memory_bytes": [],
        "active_tasks": [],
        "processing_tasks": [],
        "cpu_percent": [],
        "occupancy_s": [],
        "per_worker": {},
    }


class WorkflowSchedulerPlugin(SchedulerPlugin):
    """Routes chunk records and samples workers for every active ``MetricsCollector``."""

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self) -> None:
        self.runs: dict[str, _Run] = {}
        self.by_span: dict[str, str] = {}
        self.scheduler: Any = None
        self.failures = 0

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def update_graph(
        self, scheduler: Any, *, client: str | None = None, tasks: Any = (), **kwargs: Any
    ) -> None:
        # Runs after distributed has put the new tasks on their spans: a task whose group
        # was already alive went to that group's span, whatever span it asked for
        if not self.runs:
            return
        try:
            runs = [r for r in self.runs.values() if r.client_id in (None, client)]
            if runs:
                self._note_joined(scheduler, runs, tasks)
        except Exception:  # never into Dask
            self.failures += 1
            logger.debug("daskscope: watching a graph's task groups failed", exc_info=True)

    def _note_joined(self, scheduler: Any, runs: list[_Run], keys: Any) -> None:
        added: dict[Any, int] = {}
        for key in keys:
            ts = scheduler.tasks.get(key)
            if ts is not None and ts.group is not None:
                added[ts.group] = added.get(ts.group, 0) + 1
        # A group with no more tasks than this graph added was born with it, on the span
        # the graph asked for: only older groups can pull tasks onto another span
        spans = {tg.span_id for tg, n in added.items() if tg.span_id and len(tg) > n}
        if not spans:
            return
        for run in runs:
            span = dask_adapter.span(scheduler, run.span_id)
            ours = {s.id for s in span.traverse_spans()} if span is not None else set()
            run.joined |= spans - ours - {run.span_id}

    def log_event(self, topic: str, msg: Any) -> None:
        if topic != CHUNK_TOPIC or not self.by_span:
            return
        try:
            named = msg.get("collector_id")
            # A named collector that has finished gets nothing more (never a neighbour)
            run = self.runs.get(named) if named else self._run_for_span(msg.get("span_id"))
            if run is None:
                return
            run.chunks.append(msg)
            for parent_id in run.parents:
                parent = self.runs.get(parent_id)
                if parent is not None:
                    parent.chunks.append(msg)
        except Exception:  # never into Dask
            self.failures += 1
            logger.debug("daskscope: routing a chunk record failed", exc_info=True)

    def _run_for_span(self, span_id: str | None) -> _Run | None:
        # The task may sit in a span nested inside the collector's: walk up the tree
        while span_id is not None:
            collector_id = self.by_span.get(span_id)
            if collector_id is not None:
                return self.runs.get(collector_id)
            span = dask_adapter.span(self.scheduler, span_id) if self.scheduler else None
            parent = span.parent if span is not None else None
            span_id = parent.id if parent is not None else None
        return None

    def worker_samples(self, run: _Run) -> tuple[float, list[WorkerSampleRecord]]:
        """Every worker's sample and its time: the cluster's recorder's when one records
        (its newest, if taken within half the run's interval and after the run's last
        sample), else taken here."""
        recorder = _recorder(self.scheduler)
        if recorder is not None:
            times = run.samples["time"]
            after = times[-1] if times else 0.0
            samples = recorder.worker_samples(max_age=run.interval / 2, after=after)
        else:
            now = time()
            workers = self.scheduler.workers.values()
            samples = [worker_sample(ws, cluster_id="", at=now) for ws in workers]
        return (samples[0].sampled_at if samples else time()), samples

    def sample(self, run: _Run) -> None:
        now, samples = self.worker_samples(run)
        live = self.scheduler.workers
        series = run.samples
        series["time"].append(now)
        series["workers"].append(len(samples))
        series["threads"].append(sum(s.nthreads for s in samples))
        memory = active = processing = 0
        cpu: list[float] = []
        occupancy = 0.0
        n = len(series["time"])
        for s in samples:
            memory += s.memory or 0
            active += s.executing
            processing += s.processing
            ws = live.get(s.worker)
            occupancy += float(getattr(ws, "occupancy", 0.0) or 0.0)
            if s.cpu_percent is not None:
                cpu.append(float(s.cpu_percent))
            per = series["per_worker"].setdefault(
                s.worker,
                {"memory_bytes": [None] * (n - 1), "cpu_percent": [None] * (n - 1),
                 "active_tasks": [None] * (n - 1), "threads": [None] * (n - 1),
                 "memory_limit_bytes": [None] * (n - 1)},
            )  # fmt: skip
            per["memory_bytes"].append(s.memory)
            per["cpu_percent"].append(s.cpu_percent)
            per["active_tasks"].append(s.executing)
            per["threads"].append(s.nthreads)
            # the worker's own limit (None: unlimited), for memory as a share of it
            limit = getattr(ws, "memory_limit", None)
            limits = per.setdefault("memory_limit_bytes", [None] * (n - 1))
            limits.append(int(limit) if limit else None)
        for per in series["per_worker"].values():  # workers that left: a gap
            for values in per.values():
                if len(values) < n:
                    values.append(None)
        series["memory_bytes"].append(memory)
        series["active_tasks"].append(active)
        series["processing_tasks"].append(processing)
        series["cpu_percent"].append(sum(cpu) / len(cpu) if cpu else None)
        series["occupancy_s"].append(occupancy)

    async def _sampling(self, run: _Run) -> None:
        while True:
            await asyncio.sleep(run.interval)
            try:
                self.sample(run)
            except Exception:
                self.failures += 1
                logger.debug("daskscope: a workflow sample failed", exc_info=True)


def _recorder(scheduler: Any) -> DaskscopePlugin | None:
    """The cluster's daskscope recorder, when one is attached and recording."""
    from daskscope.collector.plugin import DaskscopePlugin

    recorder = dask_adapter.find_recorder(scheduler)
    if isinstance(recorder, DaskscopePlugin) and recorder.recording:
        return recorder
    return None


def _plugin(scheduler: Any) -> WorkflowSchedulerPlugin:
    plugin = dask_adapter.find_plugin(scheduler, PLUGIN_NAME)
    if plugin is None:
        plugin = WorkflowSchedulerPlugin()
        plugin.scheduler = scheduler
        scheduler.add_plugin(plugin, name=PLUGIN_NAME)
    found: WorkflowSchedulerPlugin = plugin
    return found


def start_run(
    collector_id: str,
    span_id: str,
    interval: float | None,
    parents: list[str] | None = None,
    client_id: str | None = None,
    dask_scheduler: Any = None,
) -> dict[str, Any]:
    """Begin routing chunks of ``span_id`` to ``collector_id`` and sampling workers."""
    plugin = _plugin(dask_scheduler)
    run = _Run(
        collector_id, span_id, interval or 0.0, parents=list(parents or []),
        samples=_empty_series(), client_id=client_id,
    )  # fmt: skip
    plugin.runs[collector_id] = run
    plugin.by_span[span_id] = collector_id
    for tg in dask_scheduler.task_groups.values():
        other = dask_adapter.span(dask_scheduler, tg.span_id)
        if other is not None and other.id not in run.foreign:
            run.foreign[other.id] = dask_adapter.own_metrics(other)
    if interval:
        plugin.sample(run)
        run.task = asyncio.get_running_loop().create_task(plugin._sampling(run))
    recorder = _recorder(dask_scheduler)
    # the cluster's id and where its recorder delivers, so that the run follows it (the
    # token stays with the client's backend, never in the run's stored info)
    recording = (
        recorder.destination_info()
        if recorder is not None
        else {"cluster_id": None, "database": None, "server": None, "token": None}
    )
    return {
        **recording,
        "scheduler_time": time(),
        "scheduler_address": dask_scheduler.address,
        "threads": sum(ws.nthreads for ws in dask_scheduler.workers.values()),
    }


def _collided(
    plugin: WorkflowSchedulerPlugin, run: _Run, scheduler: Any, span: Any
) -> tuple[dict[str, dict[tuple[Any, ...], float]], set[str]]:
    """Work of this run that Dask put on other spans (TaskGroup collision).

    Only the spans the run's tasks were seen joining count (``run.joined``): another
    span that merely grew during the run (the enclosing run's own tasks, say) holds
    none of this run's work. Returns the growth, during the run, of each joined span
    that no other open collector owns (that growth is this run's), and the spans whose
    growth cannot be told apart (another open run's span, or a span not seen at the
    start)."""
    ours = {s.id for s in span.traverse_spans()} if span is not None else {run.span_id}
    seen: set[str] = {c["span_id"] for c in run.chunks if c.get("span_id")} - ours
    others: set[str] = set()
    for other_run in plugin.runs.values():
        other = dask_adapter.span(scheduler, other_run.span_id)
        if other is not None:
            others |= {s.id for s in other.traverse_spans()}
    borrowed: dict[str, dict[tuple[Any, ...], float]] = {}
    unknown: set[str] = set()
    for span_id, before in run.foreign.items():
        if span_id in ours or span_id not in run.joined:
            continue
        foreign = dask_adapter.span(scheduler, span_id)
        if foreign is None:
            continue
        delta = {
            k: v - before.get(k, 0.0)
            for k, v in dask_adapter.own_metrics(foreign).items()
            if v - before.get(k, 0.0) > 0
        }
        if not delta:
            continue
        if span_id in others:
            unknown.add(span_id)
        else:
            borrowed[span_id] = delta
    # joined spans without a picture at the start (born during the run): no telling
    unknown |= (seen | (run.joined - set(run.foreign))) - ours - set(borrowed)
    return borrowed, unknown


def watch_metrics(collector_id: str, span_id: str, dask_scheduler: Any = None) -> Any:
    """What the wait for heartbeats watches: the span's metrics and the growth of the
    spans this run's tasks may have joined. None: nothing ran, nothing to wait for."""
    plugin = _plugin(dask_scheduler)
    run = plugin.runs.get(collector_id)
    own = span_metrics(span_id, dask_scheduler)
    grown = []
    for foreign_id, before in run.foreign.items() if run is not None else ():
        assert run is not None
        if foreign_id not in run.joined:  # growth that is not this run's: no wait
            continue
        foreign = dask_adapter.span(dask_scheduler, foreign_id)
        now = dask_adapter.own_metrics(foreign) if foreign is not None else before
        if now != before:
            grown.append([foreign_id, sorted(map(str, now.items()))])
    chunks = len(run.chunks) if run is not None else 0
    # a run whose tasks all joined other spans' groups has no span of its own, but it
    # ran: their growth may still be on its way (an empty ``grown`` is not "nothing")
    joined = run is not None and bool(run.joined)
    if own is None and not grown and not chunks and not joined:
        return None
    return [own, grown, chunks]


def span_subtree_ids(span_id: str, dask_scheduler: Any = None) -> list[str]:
    """The ids of the span and of the spans below it; [] when it has no tasks."""
    span = dask_adapter.span(dask_scheduler, span_id)
    return [] if span is None else dask_adapter.subtree_ids(span)


def span_metrics(span_id: str, dask_scheduler: Any = None) -> list[list[Any]] | None:
    """The span's fine metrics (its whole subtree) as ``[[key parts], value]`` pairs:
    tuple keys do not survive the trip as dict keys. None: the span has no tasks."""
    span = dask_adapter.span(dask_scheduler, span_id)
    if span is None:
        return None
    return [[list(k), float(v)] for k, v in dask_adapter.subtree_metrics(span).items()]


async def finish_run(collector_id: str, dask_scheduler: Any = None) -> dict[str, Any]:
    """Stop the collector's sampler; return its samples, chunks, span and computations."""
    plugin = _plugin(dask_scheduler)
    run = plugin.runs.pop(collector_id, None)
    if run is None:
        return {"chunks": [], "samples": _empty_series(), "span": None, "computations": []}
    plugin.by_span.pop(run.span_id, None)
    if run.task is not None:
        run.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run.task
        plugin.sample(run)  # the last picture, at the end of the run
    span = dask_adapter.span(dask_scheduler, run.span_id)
    info: dict[str, Any] | None = None
    computations: list[str] = []
    borrowed, unknown = _collided(plugin, run, dask_scheduler, span)
    if span is not None or borrowed or unknown:
        subtree = {s.id for s in span.traverse_spans()} if span is not None else set()
        metrics = dask_adapter.subtree_metrics(span) if span is not None else {}
        for delta in borrowed.values():
            for key, value in delta.items():
                metrics[key] = metrics.get(key, 0.0) + value
        info = {
            "span_id": run.span_id,
            "metrics": [[list(k), float(v)] for k, v in metrics.items()],
            "borrowed_from": sorted(borrowed),
            "incomplete": sorted(unknown),
            "name": None, "subtree": [], "enqueued": None, "start": None, "stop": None,
            "nbytes_total": None, "active_cpu_seconds": None,
        }  # fmt: skip
        if span is not None:
            info.update(
                name=list(span.name), subtree=sorted(subtree), enqueued=span.enqueued,
                start=span.start or None, stop=span.stop if span.done else None,
                nbytes_total=span.nbytes_total, active_cpu_seconds=span.active_cpu_seconds,
            )  # fmt: skip
        for computation in dask_scheduler.computations:
            if any(tg.span_id in subtree for tg in computation.groups):
                computations.append(str(computation.id))
    return {
        "chunks": run.chunks,
        "samples": run.samples,
        "span": info,
        "computations": computations,
        "routing_failures": plugin.failures,
    }
