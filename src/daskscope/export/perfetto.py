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
at a time, in order of the executions' starts (:mod:`daskscope.store.task_scan`), and the
file written as a stream of text chunks, a page of executions each, so a cluster of
millions of tasks never sits in memory whole.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import msgspec

from daskscope.export.common import NothingRecorded, UnknownComputation, check_window
from daskscope.store import Store, cluster_detail
from daskscope.store.task_scan import PlainColumnsCache, log_extent, ordered_rows, scan_segments
from daskscope.store.timeline import TaskExecution

__all__ = ["PAGE_TASKS", "perfetto_chunks", "perfetto_events", "trace_window"]

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


def perfetto_chunks(
    store: Store,
    cluster_id: str,
    *,
    computation: str | None = None,
    start: float | None = None,
    stop: float | None = None,
    page_tasks: int = PAGE_TASKS,
) -> Iterator[str]:
    """The trace as text chunks to write or stream one after the other.

    Raises (before the first chunk) UnknownCluster, UnknownComputation, BadWindow, and
    NothingRecorded when no task of the cluster (in the window) was recorded."""
    lo, hi, origin = trace_window(store, cluster_id, computation, start, stop)
    return _chunks(store, cluster_id, lo, hi, origin, computation, page_tasks)


def trace_window(
    store: Store,
    cluster_id: str,
    computation: str | None,
    start: float | None,
    stop: float | None,
) -> tuple[float, float, float]:
    """``(lo, hi, origin)``: the window of the trace in epoch seconds (executions
    overlapping ``[lo, hi)``) and the cluster's start. Raises what
    :func:`perfetto_chunks` says."""
    check_window(start, stop)
    detail = cluster_detail(store, cluster_id, max_groups=0)
    if computation is not None and all(c["id"] != computation for c in detail["computations"]):
        raise UnknownComputation(cluster_id, computation)
    extent = log_extent(store, cluster_id, computation=computation)
    if not extent.executions or extent.first is None or extent.last is None:
        raise NothingRecorded(
            f"cluster {cluster_id} has no task recorded"
            + (f" for computation {computation}" if computation else "")
            + ": the task timeline is kept when daskscope.tasks.enabled is true "
            "(the default) while the cluster runs"
        )
    lo = extent.first if start is None else start
    # windows hold what starts before their stop: just past the last stop, so that a
    # task of no duration at the very end is in too
    hi = math.nextafter(extent.last, math.inf) if stop is None else stop
    if (
        hi <= lo
        or (start is not None and start > extent.last)
        or (stop is not None and stop < extent.first)
    ):
        raise NothingRecorded(
            f"no task of cluster {cluster_id} ran in this window: its tasks ran from "
            f"{extent.first:.3f} to {extent.last:.3f} (epoch seconds)"
        )
    return lo, hi, float(detail["cluster"]["started_at"])


def _chunks(
    store: Store,
    cluster_id: str,
    lo: float,
    hi: float,
    origin: float,
    computation: str | None,
    page: int,
) -> Iterator[str]:
    head = {
        "displayTimeUnit": "ms",
        "otherData": {
            "exporter": "daskscope",
            "daskscope.cluster.id": cluster_id,
            "origin_epoch_s": origin,
            "window_start_epoch_s": lo,
            "window_stop_epoch_s": hi,
            **({"computation": computation} if computation else {}),
        },
    }
    yield json.dumps(head)[:-1] + ', "traceEvents": ['
    ids = _Ids()
    first = True
    for events in _event_pages(store, cluster_id, lo, hi, origin, computation, page, ids):
        encoded = msgspec.json.encode(events).decode()[1:-1]  # the list's items
        yield encoded if first else "," + encoded  # the same text however it is paged
        first = False
    yield "]}\n"


def _event_pages(
    store: Store,
    cluster_id: str,
    lo: float,
    hi: float,
    origin: float,
    computation: str | None,
    page: int,
    ids: _Ids,
) -> Iterator[list[dict[str, object]]]:
    """The events of the window's executions in order of start, ``page`` executions'
    at a time: read column-wise, a segment at a time (memory bounded by the segments
    overlapping one another, not the trace)."""
    cache = PlainColumnsCache()
    events: list[dict[str, object]] = []
    held = 0
    scanned = scan_segments(store, cluster_id, lo, hi)
    for batch in ordered_rows(scanned, lo, hi, computation=computation):
        plain = cache.of(batch)
        for which, row in zip(batch.segment.tolist(), batch.rows.tolist(), strict=True):
            c = plain[which]
            state = c.state[row]
            args = _args(c.key[row], c.group[row], state, c.nbytes[row],
                         c.computation[row], c.span[row])  # fmt: skip
            events.extend(
                _events(
                    ids,
                    origin,
                    c.worker[row] or "",
                    c.thread[row],
                    c.prefix[row],
                    state,
                    args,
                    c.actions(row),
                )
            )
            held += 1
            if held == page:
                yield events
                events, held = [], 0
    if events:
        yield events
