"""The task timeline: every task execution of a cluster, read from its task-log segments
(:mod:`daskscope.segments`).

(Over 400 lines: every read of the task-log segments, the window, a key's executions,
the slowest tasks, transfers and the extent, over one selection of segments and one
cache of decoded ones. ``timeline_window`` is the long function; issue 27, point 1,
splits it.)

A window of time comes back raw (every execution) when it holds at most ``max_tasks``
executions, else as busy seconds per worker thread in ``bins`` bins. Segments carry their
time range, their groups and a filter of their keys, so a query decodes only the ones
that may hold what it asks; decoded segments are kept in a small cache (a segment never
changes once written: the same id is the same executions).
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa

from daskscope.segments import (
    KEY_IS_GROUP,
    KEY_TUPLE,
    KEY_WHOLE,
    NO_THREAD,
    STATES,
    DecodedSegment,
    decode_segment,
    key_filter_may_hold,
    key_parts,
)
from daskscope.store import schema as s
from daskscope.store.engine import Store, as_engine
from daskscope.store.errors import UnknownCluster
from daskscope.store.groups import span_scope_ids
from daskscope.store.timeline_bins import BinSums, LaneColumns
from daskscope.summaries import BINS, SLOWEST_PER_GROUP, Summary, read_summary
from daskscope.text import escape_text

__all__ = [
    "Lane",
    "LaneBin",
    "LaneColumns",
    "TaskAction",
    "TaskExecution",
    "TimelineExtent",
    "TimelineWindow",
    "Transfer",
    "slowest_tasks",
    "task_executions",
    "timeline_extent",
    "timeline_window",
    "transfers",
]

COMPUTE = "compute"  # (the same name as timeline_bins.COMPUTE)


@dataclass(frozen=True, slots=True)
class TaskAction:
    """One start/stop pair Dask reports for an execution."""

    #: "compute", "transfer", "disk-read", "disk-write", "deserialize", ...
    action: str
    #: epoch seconds, on the scheduler's clock (Dask corrects the workers' to it)
    start: float
    stop: float
    #: for "transfer": the worker the data came from
    source: str | None = None


@dataclass(frozen=True, slots=True)
class TaskExecution:
    """One execution of one task (a recomputation is another execution)."""

    key: str
    group: str
    prefix: str
    worker: str
    #: thread ident on the worker (0 when Dask did not say)
    thread: int
    #: first start and last stop of its actions
    start: float
    stop: float
    #: "memory" or "erred"
    state: str
    nbytes: int | None
    computation_id: str | None
    span_id: str | None
    actions: tuple[TaskAction, ...]
    #: the key of the dependency it waited for last (whose end made it ready); None when
    #: it waited for none, or the log was written before daskscope kept this
    trigger: str | None = None


@dataclass(frozen=True, slots=True)
class LaneBin:
    """Aggregated time of one worker thread in ``[start, stop)``."""

    start: float
    stop: float
    #: seconds by activity: "compute" and the other action names
    busy_s: dict[str, float]
    #: executions overlapping the bin
    tasks: int
    #: the group with most compute time in the bin (its colour)
    top_group: str | None


class Lane:
    """One worker thread of a window: its bins as objects (``bins``, empty when the
    window is raw) and, when binned, column-wise (``columns``: what the timeline view
    reads; the objects are made from them only when first asked for)."""

    __slots__ = ("_bins", "columns", "thread", "worker")

    def __init__(
        self,
        worker: str,
        thread: int,
        bins: tuple[LaneBin, ...] = (),
        columns: LaneColumns | None = None,
    ) -> None:
        self.worker = worker
        self.thread = thread
        self.columns = columns
        self._bins: tuple[LaneBin, ...] | None = bins if bins or columns is None else None

    @property
    def bins(self) -> tuple[LaneBin, ...]:
        if self._bins is None:
            self._bins = _bins_of(self.columns) if self.columns is not None else ()
        return self._bins

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Lane):
            return NotImplemented
        return (self.worker, self.thread, self.bins) == (other.worker, other.thread, other.bins)

    def __hash__(self) -> int:
        return hash((self.worker, self.thread))

    def __repr__(self) -> str:
        return f"Lane({self.worker!r}, {self.thread!r}, <{len(self.bins)} bins>)"


def _bins_of(columns: LaneColumns) -> tuple[LaneBin, ...]:
    activities = list(columns.busy)
    per_bin = zip(*(columns.busy[a].tolist() for a in activities), strict=True)
    busy = [{a: x for a, x in zip(activities, xs, strict=True) if x > 0} for xs in per_bin]
    if not activities:
        busy = [{} for _ in range(len(columns.start))]
    names = columns.groups
    top = [names[g] if g >= 0 else None for g in columns.top.tolist()]
    return tuple(
        map(
            LaneBin,
            columns.start.tolist(),
            columns.stop.tolist(),
            busy,
            columns.tasks.tolist(),
            top,
        )
    )


@dataclass(frozen=True, slots=True)
class TimelineWindow:
    cluster_id: str
    #: the window asked (or the cluster's first start / last stop when not given)
    start: float
    stop: float
    #: executions overlapping the window (with the filters)
    total_tasks: int
    #: True: ``tasks`` holds every execution; False: ``lanes`` hold bins
    raw: bool
    tasks: tuple[TaskExecution, ...]
    #: one per worker thread that ran something (also when raw, with no bins)
    lanes: tuple[Lane, ...]


@dataclass(frozen=True, slots=True)
class Transfer:
    """Data a task's worker fetched from another worker before running it (Dask
    reports the transfer with the task that needed it, not with the data's key)."""

    key: str
    source: str
    target: str
    start: float
    stop: float
    #: Dask does not say how many bytes one transfer moved
    nbytes: int | None


@dataclass(frozen=True, slots=True)
class TimelineExtent:
    #: distinct keys executed
    tasks: int
    executions: int
    first: float | None
    last: float | None
    workers: int
    #: worker threads that ran something
    threads: int


# -- reading segments --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _SegmentRow:
    id: str
    first_start: float
    last_stop: float
    executions: int
    groups: list[str]


class _Lru:
    """Values by key, least recently used first out, bounded by a total weight."""

    def __init__(self, max_weight: int) -> None:
        self.max_weight = max_weight
        self._held: OrderedDict[tuple[str, str], tuple[Any, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> Any:
        with self._lock:
            found = self._held.get(key)
            if found is None:
                return None
            self._held.move_to_end(key)
            return found[0]

    def put(self, key: tuple[str, str], value: Any, weight: int) -> None:
        with self._lock:
            if key in self._held:
                return
            self._held[key] = (value, weight)
            self._weight += weight
            while self._weight > self.max_weight and len(self._held) > 1:
                _, (_, dropped) = self._held.popitem(last=False)
                self._weight -= dropped


# In the server process: a segment never changes once written (its id is its cluster
# and number, and writing it again writes the same executions)
_decoded_cache = _Lru(max_weight=2_000_000)  # executions
_summary_cache = _Lru(max_weight=512 * 2**20)  # bytes of parsed summaries
_filter_cache = _Lru(max_weight=64 * 2**20)  # bytes
_rows_cache = _Lru(max_weight=1_000_000)  # segments listed


def _check_cluster(conn: sa.Connection, cluster_id: str) -> None:
    found = conn.execute(sa.select(s.clusters.c.id).where(s.clusters.c.id == cluster_id))
    if found.first() is None:
        raise UnknownCluster(cluster_id)


def _segment_rows(
    conn: sa.Connection, cluster_id: str, start: float | None = None, stop: float | None = None
) -> list[_SegmentRow]:
    """The cluster's segments overlapping ``[start, stop]``, oldest first.

    Read once per state of the log (its segment count and newest start, which the index
    answers alone) and kept: a segment's groups lie after its payload in the row, so
    reading them walks the payload's pages (a quarter of a second at 200 segments)."""
    t = s.task_segments.c
    state = tuple(
        conn.execute(
            sa.select(sa.func.count(), sa.func.max(t.first_start)).where(t.cluster_id == cluster_id)
        ).one()
    )
    key = (str(conn.engine.url), cluster_id)
    held = _rows_cache.get(key)
    if held is None or held[0] != state:
        query = sa.select(t.id, t.first_start, t.last_stop, t.executions, t.groups).where(
            t.cluster_id == cluster_id
        )
        rows = conn.execute(query.order_by(t.first_start, t.segment))
        held = (state, [_SegmentRow(r[0], r[1], r[2], r[3], list(r[4] or ())) for r in rows])
        _rows_cache.put(key, held, len(held[1]) + 1)
    return [
        r
        for r in held[1]
        if (stop is None or r.first_start <= stop) and (start is None or r.last_stop >= start)
    ]


def _blobs(
    conn: sa.Connection, column: sa.ColumnElement[Any], ids: list[str], cache: _Lru
) -> dict[str, bytes]:
    """A bytes column of the segments ``ids``: from ``cache``, else read (and kept)."""
    url = str(conn.engine.url)
    found: dict[str, bytes] = {}
    missing = []
    for segment_id in ids:
        value = cache.get((url, segment_id))
        if value is None:
            missing.append(segment_id)
        else:
            found[segment_id] = value
    t = s.task_segments.c
    for first in range(0, len(missing), 500):
        query = sa.select(t.id, column).where(t.id.in_(missing[first : first + 500]))
        for segment_id, value in conn.execute(query):
            found[segment_id] = bytes(value or b"")
            cache.put((url, segment_id), found[segment_id], len(found[segment_id]) + 100)
    return found


def _summaries(conn: sa.Connection, rows: list[_SegmentRow]) -> dict[str, Summary]:
    """The segments' summaries, read and parsed once per server process."""
    url = str(conn.engine.url)
    found: dict[str, Summary | None] = {}
    missing = []
    for r in rows:
        held = _summary_cache.get((url, r.id))
        if held is None:
            missing.append(r.id)
        else:
            found[r.id] = held[0]
    t = s.task_segments.c
    for first in range(0, len(missing), 200):
        query = sa.select(t.id, t.summary).where(t.id.in_(missing[first : first + 200]))
        for segment_id, blob in conn.execute(query):
            summary = read_summary(bytes(blob or b""))
            found[segment_id] = summary
            weight = 100 if summary is None else summary.nbytes
            _summary_cache.put((url, segment_id), (summary,), weight)
    return {segment_id: summary for segment_id, summary in found.items() if summary is not None}


def _decoded(conn: sa.Connection, rows: list[_SegmentRow]) -> Iterator[DecodedSegment]:
    """The segments of ``rows`` decoded: from the cache, else read in one query."""
    url = str(conn.engine.url)
    missing = [r.id for r in rows if _decoded_cache.get((url, r.id)) is None]
    fresh: dict[str, DecodedSegment] = {}
    t = s.task_segments.c
    for first in range(0, len(missing), 50):
        query = sa.select(t.id, t.format, t.payload).where(t.id.in_(missing[first : first + 50]))
        for segment_id, fmt, payload in conn.execute(query):
            segment = decode_segment(fmt, bytes(payload))
            _decoded_cache.put((url, segment_id), segment, len(segment))
            if len(fresh) < 8:  # a few survive a cache too small for the query
                fresh[segment_id] = segment
    for r in rows:
        segment = fresh.get(r.id) or _decoded_cache.get((url, r.id))
        if segment is None:  # evicted meanwhile by a larger query: read it alone
            query = sa.select(t.format, t.payload).where(t.id == r.id)
            fmt, payload = conn.execute(query).one()
            segment = decode_segment(fmt, bytes(payload))
        yield segment


# -- the executions of a segment ---------------------------------------------------------


def _spans(seg: DecodedSegment) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Each execution's first start and last stop over all its actions."""
    return seg.first, seg.last


def _selected(
    seg: DecodedSegment,
    start: float | None,
    stop: float | None,
    *,
    computation_id: str | None = None,
    span_ids: frozenset[str] | None = None,
    group: str | None = None,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Which executions overlap the window and pass the filters; with their spans."""
    first, last = _spans(seg)
    mask = np.ones(len(seg), dtype=bool)
    if start is not None:
        mask &= (last > start) | ((last == start) & (first == start))
    if stop is not None:
        mask &= first < stop if start is None or stop > start else first <= stop
    for column, wanted in (
        (seg.computation, None if computation_id is None else (computation_id,)),
        (seg.span, span_ids),
        (seg.group, None if group is None else (group,)),
    ):
        if wanted is not None:
            mask &= seg.naming(column, wanted)
    return mask, first, last


def _name(seg: DecodedSegment, index: int) -> str | None:
    return seg.names[index] if index >= 0 else None


def _execution(seg: DecodedSegment, row: int) -> TaskExecution:
    lo = int(np.searchsorted(seg.action_row, row, "left"))
    hi = int(np.searchsorted(seg.action_row, row, "right"))
    actions = [TaskAction(COMPUTE, float(seg.start[row]), float(seg.stop[row]))]
    for i in range(lo, hi):
        actions.append(
            TaskAction(
                seg.names[int(seg.action_name[i])],
                float(seg.action_start[i]),
                float(seg.action_stop[i]),
                _name(seg, int(seg.action_source[i])),
            )
        )
    if hi > lo and seg.start[row] == seg.stop[row]:
        # no compute was reported (a zero-length one stands in the row): leave it out
        actions = actions[1:]
    actions.sort(key=lambda a: (a.start, a.stop))
    nbytes = int(seg.nbytes[row])
    return TaskExecution(
        key=seg.key(row),
        group=seg.names[int(seg.group[row])],
        prefix=seg.names[int(seg.prefix[row])],
        worker=seg.names[int(seg.worker[row])],
        thread=int(seg.thread[row]),
        start=min(a.start for a in actions),
        stop=max(a.stop for a in actions),
        state=STATES[int(seg.state[row])],
        nbytes=None if nbytes < 0 else nbytes,
        computation_id=_name(seg, int(seg.computation[row])),
        span_id=_name(seg, int(seg.span[row])),
        actions=tuple(actions),
        trigger=seg.trigger(row),
    )


# -- the window --------------------------------------------------------------------------


def timeline_window(
    store: Store | sa.Engine,
    cluster_id: str,
    start: float | None = None,
    stop: float | None = None,
    *,
    computation_id: str | None = None,
    span_id: str | None = None,
    group: str | None = None,
    max_tasks: int = 5000,
    bins: int = 1000,
) -> TimelineWindow:
    """The executions of ``[start, stop)`` (the whole log when not given): raw when
    at most ``max_tasks``, else busy time per worker thread in ``bins`` bins.

    Zoomed out, a segment whose executions all pass the filters is taken from its
    summary (busy seconds in :data:`~daskscope.summaries.BINS` bins of its time range,
    spread over the window's bins by overlap) when the window's bins are at least as
    wide; its executions then count in the bin where they *start*. ``span_id`` keeps the
    tasks of the span and of every span below it."""
    if max_tasks < 0 or bins < 1:
        raise ValueError("max_tasks must be >= 0 and bins >= 1")
    if start is not None and stop is not None and stop < start:
        raise ValueError(f"the window's stop ({stop}) is before its start ({start})")
    with as_engine(store).connect() as conn:
        _check_cluster(conn, cluster_id)
        span_ids = _span_ids(conn, cluster_id, span_id)
        filters: dict[str, Any] = {
            "computation_id": computation_id,
            "span_ids": span_ids,
            "group": group,
        }
        rows = _segment_rows(conn, cluster_id, start, stop)
        if group is not None:
            rows = [r for r in rows if group in r.groups]
        summaries = {
            segment_id: summary
            for segment_id, summary in _summaries(conn, rows).items()
            if _passes_all(summary, computation_id, span_ids, group)
        }
        whole = [r for r in rows if r.id in summaries]
        picked = _picked(conn, [r for r in rows if r.id not in summaries], start, stop, filters)
        total = sum(_started_within(summaries[r.id], r, start, stop) for r in whole)
        total += sum(len(c) for _, c, _, _ in picked)
        if start is None or stop is None:
            firsts = [r.first_start for r in whole] + [float(f[c].min()) for _, c, f, _ in picked]
            lasts = [r.last_stop for r in whole] + [float(la[c].max()) for _, c, _, la in picked]
            start = (min(firsts) if firsts else 0.0) if start is None else start
            stop = (max(lasts) if lasts else start) if stop is None else stop
        width = (stop - start) / bins
        summed: list[Summary] = []
        if total <= max_tasks:  # few: every one of them, exactly
            picked += _picked(conn, whole, start, stop, filters)
            total = sum(len(c) for _, c, _, _ in picked)
        else:
            levels = {r.id: summaries[r.id].coarse(width) for r in whole}
            summed = [level for level in levels.values() if level is not None]
            used = {id(summaries[i]) for i, level in levels.items() if level is not None}
            rest = [r for r in whole if id(summaries[r.id]) not in used]
            picked += _picked(conn, rest, start, stop, filters)
            # exact where decoded, by the summaries' starts where not
            total = sum(len(c) for _, c, _, _ in picked) + sum(
                _started_within(summaries[r.id], r, start, stop)
                for r in whole
                if id(summaries[r.id]) in used
            )
    lane_names = sorted(
        {lane for seg, chosen, _, _ in picked for lane in _lanes_of(seg, chosen)}
        | {lane for summary in summed for lane in summary.lanes}
    )
    if not summed and total <= max_tasks:
        tasks = [_execution(seg, int(row)) for seg, chosen, _, _ in picked for row in chosen]
        tasks.sort(key=lambda t: (t.start, t.worker, t.thread, t.key))
        lanes = tuple(Lane(w, t, ()) for w, t in lane_names)
        return TimelineWindow(cluster_id, start, stop, total, True, tuple(tasks), lanes)
    sums = BinSums(lane_names, start, stop, bins)
    for seg, chosen, first, last in picked:
        sums.add_decoded(seg, chosen, first, last)
    for summary in summed:
        sums.add_summary(summary)
    binned = tuple(
        Lane(w, t, (), columns) for (w, t), columns in zip(lane_names, sums.columns(), strict=True)
    )
    return TimelineWindow(cluster_id, start, stop, total, False, (), binned)


def _lanes_of(seg: DecodedSegment, rows: npt.NDArray[np.intp]) -> list[tuple[str, int]]:
    """The worker threads that ran ``rows`` of the segment."""
    threads, thread_of = np.unique(seg.thread[rows], return_inverse=True)
    pairs = np.unique(seg.worker[rows].astype(np.int64) * len(threads) + thread_of.ravel())
    return [(seg.names[p // len(threads)], int(threads[p % len(threads)])) for p in pairs.tolist()]


_Picked = tuple[DecodedSegment, "npt.NDArray[np.intp]", "npt.NDArray[np.float64]", Any]


def _picked(
    conn: sa.Connection,
    rows: list[_SegmentRow],
    start: float | None,
    stop: float | None,
    filters: dict[str, Any],
) -> list[_Picked]:
    """The executions of the segments of ``rows`` in the window and passing the filters:
    (segment, rows chosen, first starts, last stops)."""
    picked: list[_Picked] = []
    for seg in _decoded(conn, rows):
        mask, first, last = _selected(seg, start, stop, **filters)
        chosen = np.flatnonzero(mask)
        if len(chosen):
            picked.append((seg, chosen, first, last))
    return picked


def _started_within(
    summary: Summary, row: _SegmentRow, start: float | None, stop: float | None
) -> int:
    """The segment's executions in the window: all when it lies inside, else those its
    summary says started in bins whose middle is inside."""
    if (start is None or row.first_start >= start) and (stop is None or row.last_stop < stop):
        return row.executions
    middle = summary.start + summary.width * (np.arange(BINS) + 0.5)
    within = np.ones(BINS, dtype=bool)
    if start is not None:
        within &= middle >= start
    if stop is not None:
        within &= middle < stop
    return int(summary.starts[:, within].sum())


def _passes_all(
    summary: Summary,
    computation_id: str | None,
    span_ids: frozenset[str] | None,
    group: str | None,
) -> bool:
    """Every execution of the summary's segment passes the filters."""
    return (
        (computation_id is None or summary.computations == [computation_id])
        and (span_ids is None or all(span in span_ids for span in summary.spans))
        and (group is None or summary.groups == [group])
    )


def _span_ids(conn: sa.Connection, cluster_id: str, span_id: str | None) -> frozenset[str] | None:
    """The spans a span filter keeps: the span and its subtree (a task carries its
    innermost span); the span alone when the cluster recorded no such span."""
    if span_id is None:
        return None
    return frozenset(span_scope_ids(conn, cluster_id, span_id=span_id, tag=None) or {span_id})


# -- lookups -----------------------------------------------------------------------------


def task_executions(store: Store | sa.Engine, cluster_id: str, key: str) -> list[TaskExecution]:
    """Every execution of ``key`` (the str of a Dask key), oldest first."""
    key = escape_text(key)  # stored so: a lone surrogate cannot be UTF-8
    found: list[TaskExecution] = []
    with as_engine(store).connect() as conn:
        _check_cluster(conn, cluster_id)
        rows = _segment_rows(conn, cluster_id)
        groups = _groups_of_key(key)
        of_group = [r for r in rows if not groups.isdisjoint(r.groups)]
        rows = of_group or rows  # (a key of a form not foreseen: every segment may hold it)
        filters = _blobs(conn, s.task_segments.c.key_filter, [r.id for r in rows], _filter_cache)
        rows = [r for r in rows if key_filter_may_hold(filters[r.id], key)]
        for seg in _decoded(conn, rows):
            found += [_execution(seg, int(row)) for row in _rows_of_key(seg, key)]
    return sorted(found, key=lambda t: (t.start, t.stop))


def _groups_of_key(key: str) -> set[str]:
    """The names the group of ``key`` (the str of a Dask key) may have: a tuple's first
    item, or what Dask's ``key_split_group`` makes of a str key."""
    from distributed.utils import key_split_group

    found: set[str] = {key, key_split_group(key)} if key else {key}
    for quote in ("'", '"'):
        if key.startswith("(" + quote):
            end = key.find(quote + ", ", 2)
            if end > 0:
                found.add(key[2:end])
    return found


def _rows_of_key(seg: DecodedSegment, key: str) -> npt.NDArray[np.intp]:
    """The rows of ``key``: kept whole, or as its group's name (and a tuple's rest)."""
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    def rest_is(text: str) -> npt.NDArray[np.bool_]:
        return np.asarray(pc.equal(seg.key_rest, text).fill_null(False), dtype=bool)

    mask = (seg.key_form == KEY_WHOLE) & rest_is(key)
    for g in np.unique(seg.group).tolist():
        form, rest = key_parts(key, seg.names[g])
        if form == KEY_IS_GROUP:
            mask |= (seg.group == g) & (seg.key_form == KEY_IS_GROUP)
        elif form == KEY_TUPLE:
            mask |= (seg.group == g) & (seg.key_form == KEY_TUPLE) & rest_is(rest)
    return np.flatnonzero(mask)


def slowest_tasks(
    store: Store | sa.Engine,
    cluster_id: str,
    *,
    group: str | None = None,
    computation_id: str | None = None,
    limit: int = 20,
) -> list[TaskExecution]:
    """The ``limit`` longest executions (last stop - first start), longest first.

    Each segment's summary names its groups' slowest executions: only the segments
    holding the longest of those are decoded."""
    if limit <= 0:
        return []
    with as_engine(store).connect() as conn:
        _check_cluster(conn, cluster_id)
        rows = _segment_rows(conn, cluster_id)
        if group is not None:
            rows = [r for r in rows if group in r.groups]
        summaries = {
            segment_id: summary
            for segment_id, summary in _summaries(conn, rows).items()
            if limit <= SLOWEST_PER_GROUP and _passes_all(summary, computation_id, None, None)
        }
        # (duration, segment, row) of the candidates the summaries name
        candidates: list[tuple[float, int, int]] = []
        for index, r in enumerate(rows):
            summary = summaries.get(r.id)
            if summary is None:
                continue
            wanted = summary.slowest_group >= 0
            if group is not None:
                wanted &= summary.slowest_group == _index(summary.groups, group)
            candidates += zip(
                summary.slowest_duration[wanted].tolist(),
                [index] * int(wanted.sum()),
                summary.slowest_row[wanted].tolist(),
                strict=True,
            )
        best = heapq.nlargest(limit, candidates)
        needed = sorted({index for _, index, _ in best})
        decoded = dict(zip(needed, _decoded(conn, [rows[i] for i in needed]), strict=True))
        found = [(d, row, decoded[index]) for d, index, row in best]
        for seg in _decoded(conn, [r for r in rows if r.id not in summaries]):
            mask, first, last = _selected(
                seg, None, None, group=group, computation_id=computation_id
            )
            chosen = np.flatnonzero(mask)
            durations = (last - first)[chosen]
            if len(chosen) > limit:
                top = np.argpartition(-durations, limit - 1)[:limit]
                chosen, durations = chosen[top], durations[top]
            found += [
                (d, row, seg) for d, row in zip(durations.tolist(), chosen.tolist(), strict=True)
            ]
    found.sort(key=lambda item: -item[0])
    return [_execution(seg, row) for _, row, seg in found[:limit]]


def _index(names: list[str], name: str) -> int:
    try:
        return names.index(name)
    except ValueError:
        return -2  # matches nothing (not even "none")


def transfers(
    store: Store | sa.Engine,
    cluster_id: str,
    start: float | None = None,
    stop: float | None = None,
    *,
    limit: int = 1000,
) -> list[Transfer]:
    """Transfers overlapping ``[start, stop]``, oldest first, at most ``limit``."""
    found: list[Transfer] = []
    with as_engine(store).connect() as conn:
        _check_cluster(conn, cluster_id)
        for seg in _decoded(conn, _segment_rows(conn, cluster_id, start, stop)):
            name = seg.name_index("transfer")
            if name < 0:
                continue
            mask = seg.action_name == name
            if start is not None:
                mask &= seg.action_stop >= start
            if stop is not None:
                mask &= seg.action_start <= stop
            for i in np.flatnonzero(mask).tolist():
                row = int(seg.action_row[i])
                found.append(
                    Transfer(
                        key=seg.key(row),
                        source=_name(seg, int(seg.action_source[i])) or "",
                        target=seg.names[int(seg.worker[row])],
                        start=float(seg.action_start[i]),
                        stop=float(seg.action_stop[i]),
                        nbytes=None,
                    )
                )
    found.sort(key=lambda t: (t.start, t.stop, t.key))
    return found[: max(0, limit)]


def timeline_extent(
    store: Store | sa.Engine, cluster_id: str, *, computation_id: str | None = None
) -> TimelineExtent:
    """How much the task log of the cluster (or of one computation) holds."""
    keys: set[tuple[str, int, str]] = set()
    executions = 0
    first: float | None = None
    last: float | None = None
    lanes: set[tuple[str, int]] = set()
    with as_engine(store).connect() as conn:
        _check_cluster(conn, cluster_id)
        for seg in _decoded(conn, _segment_rows(conn, cluster_id)):
            mask, f, la = _selected(seg, None, None, computation_id=computation_id)
            chosen = np.flatnonzero(mask)
            if not len(chosen):
                continue
            executions += len(chosen)
            lo, hi = float(f[chosen].min()), float(la[chosen].max())
            first = lo if first is None else min(first, lo)
            last = hi if last is None else max(last, hi)
            keys.update(_keys(seg, chosen))
            lanes.update(
                (seg.names[w], t)
                for w, t in zip(
                    seg.worker[chosen].tolist(), seg.thread[chosen].tolist(), strict=True
                )
            )
    return TimelineExtent(
        tasks=len(keys),
        executions=executions,
        first=first,
        last=last,
        workers=len({w for w, _ in lanes}),
        threads=len({lane for lane in lanes if lane[1] != NO_THREAD} or lanes),
    )


def _keys(seg: DecodedSegment, rows: npt.NDArray[np.intp]) -> Iterator[tuple[str, int, str]]:
    """Each row's key as (group's name, form, rest): equal exactly when the keys are (a
    key's group follows from the key)."""
    rests = seg.key_rest.take(rows).to_pylist()
    forms = seg.key_form[rows].tolist()
    names = seg.names
    for g, f, r in zip(seg.group[rows].tolist(), forms, rests, strict=True):
        yield (names[g], f, r)
