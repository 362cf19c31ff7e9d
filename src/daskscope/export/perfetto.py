"""The task timeline as a Chrome trace-event JSON file, which ui.perfetto.dev (and
chrome://tracing) opens.

A process per worker, a thread per worker thread (named by the worker's address and
Dask's thread ident); each compute of a task is a complete event ("X") on its thread,
named by the task prefix with the key, group, bytes, state, computation and span in its
args. Dask now and then reports two tasks of one thread whose times cross (its own task
stream shows them so); the later one goes to a second track of that thread, named
"overlapping", as a track can only show slices that nest or follow one another.

The other actions Dask reports (transfers with their source worker, disk reads and
writes, deserialisation) happen off the task's thread, on the worker's event loop, and
overlap one another: they are async slices ("b"/"e") of the worker's process, one track
per action. Transfers are not drawn as flow arrows (the sending side has no slice to
start one from).

Times are microseconds since the cluster started (``otherData.origin_epoch_s`` holds that
moment), so windows of one cluster line up. The task log is read column-wise, a segment
at a time, in order of the executions' starts (:meth:`ExportView.execution_pages
<daskscope.views.export.ExportView.execution_pages>`), and the file written as a stream
of text chunks, a page of executions each, so a cluster of millions of tasks never sits
in memory whole. :class:`TaskTimeline` is what this format and Perfetto's protobuf
(:mod:`.perfetto_proto`) share: the command, the options, the window and the pages.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

import msgspec

from daskscope.views.export import ExportView, Page, TaskWindow, export_view

if TYPE_CHECKING:
    from daskscope.store import Store
    from daskscope.tasklog.forms import TaskExecution

__all__ = [
    "PAGE_TASKS",
    "PerfettoJson",
    "TaskTimeline",
    "perfetto_chunks",
    "perfetto_events",
]

#: executions read from the store at a time; a window holding more is split
PAGE_TASKS = 20_000


#: slices of a thread's track kept to check a new one against: Dask's reports hold a
#: crossing pair now and then, and one comes at most a few tasks out of order
RECENT_SLICES = 32


def _crosses(begin: float, end: float, other: tuple[float, float]) -> bool:
    """Whether two slices (µs) overlap without one holding the other, which a track
    cannot show (the trace importer drops one); touching within rounding is fine."""
    a, b = other
    eps = 0.01
    return (a < begin and b - begin > eps and end - b > eps) or (
        begin < a and end - a > eps and b - end > eps
    )


@dataclass
class _Ids:
    """Small numbers for workers (pid) and their threads' tracks (tid), with the
    metadata events naming them, given once each, when first seen. A compute that
    crosses one Dask reported on the same thread goes to a second track of that thread
    ("overlapping"), so that every task stays visible."""

    pids: dict[str, int] = field(default_factory=dict)
    tids: dict[tuple[str, int, int], int] = field(default_factory=dict)
    recent: dict[tuple[str, int, int], deque[tuple[float, float]]] = field(default_factory=dict)
    #: the latest end of a slice on each track: one beginning after it crosses none
    latest_end: dict[tuple[str, int, int], float] = field(default_factory=dict)
    async_ids: int = 0

    def track(
        self, worker: str, thread: int, slice_: tuple[float, float] | None = None
    ) -> tuple[int, int, list[dict[str, object]]]:
        """(pid, tid, metadata to write first) of the thread's track for ``slice_``
        (its first track when None)."""
        named: list[dict[str, object]] = []
        pid = self.pids.get(worker)
        if pid is None:
            pid = self.pids[worker] = len(self.pids) + 1
            named.append(_meta("process_name", pid, 0, {"name": f"worker {worker}"}))
            named.append(_meta("process_sort_index", pid, 0, {"sort_index": pid}))
        lane = 0
        if slice_ is not None:
            while self.latest_end.get((worker, thread, lane), -math.inf) - slice_[0] > 0.01 and any(
                _crosses(*slice_, kept) for kept in self.recent.get((worker, thread, lane), ())
            ):
                lane += 1
            kept = self.recent.setdefault((worker, thread, lane), deque(maxlen=RECENT_SLICES))
            kept.append(slice_)
            latest = self.latest_end.get((worker, thread, lane), -math.inf)
            self.latest_end[(worker, thread, lane)] = max(latest, slice_[1])
        tid = self.tids.get((worker, thread, lane))
        if tid is None:
            tid = self.tids[(worker, thread, lane)] = 1 + sum(
                1 for w, _, _ in self.tids if w == worker
            )
            name = f"thread {thread}" if thread else "thread (ident not reported)"
            if lane:
                name += f" · overlapping {lane}"
            named.append(_meta("thread_name", pid, tid, {"name": name}))
            named.append(_meta("thread_sort_index", pid, tid, {"sort_index": tid}))
        return pid, tid, named


def _meta(name: str, pid: int, tid: int, args: dict[str, object]) -> dict[str, object]:
    return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args}


def _us(seconds: float, origin: float) -> float:
    # three decimals: nanoseconds, which is what Dask's clock resolves
    return round((seconds - origin) * 1e6, 3)


def perfetto_events(
    execution: TaskExecution, origin: float, ids: _Ids
) -> Iterator[dict[str, object]]:
    """The trace events of one execution (after the metadata naming its thread)."""
    actions = [(a.action, a.start, a.stop, a.source) for a in execution.actions]
    return _events(
        ids,
        origin,
        execution.worker,
        execution.thread,
        execution.prefix,
        execution.state,
        _args(
            execution.key,
            execution.group,
            execution.state,
            execution.nbytes,
            execution.computation_id,
            execution.span_id,
        ),
        actions,
    )


def _args(
    key: str,
    group: str | None,
    state: str,
    nbytes: int | None,
    computation: str | None,
    span: str | None,
) -> dict[str, object]:
    args: dict[str, object] = {"key": key, "group": group, "state": state}
    if nbytes is not None:
        args["bytes"] = nbytes
    if computation:
        args["computation"] = computation
    if span:
        args["span"] = span
    return args


def _events(
    ids: _Ids,
    origin: float,
    worker: str,
    thread: int,
    prefix: str | None,
    state: str,
    args: dict[str, object],
    actions: list[tuple[str, float, float, str | None]],
) -> Iterator[dict[str, object]]:
    """The events of one execution's ``actions`` ``(name, start, stop, source)``."""
    for action, start, stop, source in actions:
        ts = _us(start, origin)
        dur = max(0.0, round(_us(stop, origin) - ts, 3))
        if action == "compute":
            pid, tid, named = ids.track(worker, thread, (ts, ts + dur))
            yield from named
            yield {
                "name": prefix,
                "cat": "compute" if state != "erred" else "compute,erred",
                "ph": "X",
                "ts": ts,
                "dur": dur,
                "pid": pid,
                "tid": tid,
                "args": args,
            }
            continue
        pid, tid, named = ids.track(worker, thread)
        yield from named
        ids.async_ids += 1
        extra = {"source": source} if source else {}
        common = {"cat": action, "id": ids.async_ids, "pid": pid, "tid": tid}
        yield {**common, "name": f"{action} {prefix}", "ph": "b", "ts": ts,
               "args": {**args, **extra}}  # fmt: skip
        yield {**common, "name": f"{action} {prefix}", "ph": "e", "ts": ts + dur}


Chunk = TypeVar("Chunk", str, bytes)


class TaskTimeline(Generic[Chunk]):
    """The task timeline for Perfetto, whichever its encoding: the command, its options,
    the window (checked before the first chunk) and the executions page by page."""

    name = "perfetto"
    subject = "timeline"
    help = (
        "The task timeline for Perfetto: open it in https://ui.perfetto.dev.\n\n"
        "The whole cluster unless --computation or --start/--stop narrow it; written as a "
        "stream, so millions of tasks fit."
    )
    options: tuple[str, ...] = ("computation", "window")
    streamed = True

    def __init__(self, page_tasks: int = PAGE_TASKS) -> None:
        #: executions per page: a chunk of the file each
        self.page_tasks = page_tasks

    def render(self, view: ExportView) -> Iterator[Chunk]:
        """The file's chunks. Raises (at once) NothingRecorded when no task of the
        cluster (in the window) was recorded."""
        window = view.task_window()
        return self._chunks(view, window, view.execution_pages(window, self.page_tasks))

    def _chunks(
        self, view: ExportView, window: TaskWindow, pages: Iterator[Page]
    ) -> Iterator[Chunk]:
        raise NotImplementedError


class PerfettoJson(TaskTimeline[str]):
    """Chrome trace-event JSON (see the module's docstring)."""

    format = "json"
    description = "Chrome trace-event JSON"
    media_type = "application/json"
    extension = "json"
    binary = False

    def _chunks(self, view: ExportView, window: TaskWindow, pages: Iterator[Page]) -> Iterator[str]:
        head = {
            "displayTimeUnit": "ms",
            "otherData": {
                "exporter": "daskscope",
                "daskscope.cluster.id": view.cluster_id,
                "origin_epoch_s": window.origin,
                "window_start_epoch_s": window.lo,
                "window_stop_epoch_s": window.hi,
                **({"computation": view.computation} if view.computation else {}),
            },
        }
        yield json.dumps(head)[:-1] + ', "traceEvents": ['
        ids = _Ids()
        first = True
        for page in pages:
            encoded = msgspec.json.encode(_page_events(page, window.origin, ids)).decode()[1:-1]
            yield encoded if first else "," + encoded  # the same text however it is paged
            first = False
        yield "]}\n"


def _page_events(page: Page, origin: float, ids: _Ids) -> list[dict[str, object]]:
    """The events of a page of executions, in order."""
    events: list[dict[str, object]] = []
    for c, row in page:
        state = c.state[row]
        args = _args(c.key[row], c.group[row], state, c.nbytes[row],
                     c.computation[row], c.span[row])  # fmt: skip
        worker, thread, prefix = c.worker[row] or "", c.thread[row], c.prefix[row]
        events.extend(_events(ids, origin, worker, thread, prefix, state, args, c.actions(row)))
    return events


def perfetto_chunks(
    store: Store,
    cluster_id: str,
    *,
    computation: str | None = None,
    start: float | None = None,
    stop: float | None = None,
    page_tasks: int = PAGE_TASKS,
) -> Iterator[str]:
    """The trace as text chunks to write or stream one after the other: the cluster's
    view (:func:`~daskscope.views.export.export_view`) rendered, in one call.

    Raises (before the first chunk) UnknownCluster, UnknownComputation, BadWindow, and
    NothingRecorded when no task of the cluster (in the window) was recorded."""
    view = export_view(store, cluster_id, computation=computation, start=start, stop=stop)
    return PerfettoJson(page_tasks).render(view)
